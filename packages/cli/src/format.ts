/**
 * Output helpers shared by commands.
 *
 * @module
 */
import { parseTime } from '@ctrlrun/kernel';

/** A stored timestamp in the CLI's format (ISO-8601 UTC, milliseconds, `Z`), or `-`. */
export function stamp(stored: string | null | undefined): string {
  if (stored === null || stored === undefined || stored === '') return '-';
  try {
    return parseTime(stored).toISOString();
  } catch {
    return stored;
  }
}

/** A nullable stored timestamp in the CLI's format, or null. */
export function stampOrNull(stored: string | null | undefined): string | null {
  return stored === null || stored === undefined ? null : stamp(stored);
}

/** Quotes a path for a POSIX shell only when it needs it. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** JSON with 2-space indent, raw non-ASCII, and `bigint`s written as their digits. */
export function prettyJson(value: unknown, depth = 0): string {
  const pad = '  '.repeat(depth + 1);
  const close = '  '.repeat(depth);
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((v) => pad + prettyJson(v, depth + 1)).join(',\n')}\n${close}]`;
  }
  if (typeof value === 'object' && value !== null) {
    const keys = Object.keys(value);
    if (keys.length === 0) return '{}';
    return `{\n${keys.map((k) => `${pad}${JSON.stringify(k)}: ${prettyJson((value as Record<string, unknown>)[k], depth + 1)}`).join(',\n')}\n${close}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Whether a parsed JSON value is an object (not an array, not null). */
export function isObject(v: unknown): v is Record<string, import('@ctrlrun/kernel').JsonValue> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
