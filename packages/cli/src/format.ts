/**
 * Output helpers shared by commands.
 *
 * @module
 */
import { viewTime } from '@ctrlrun/kernel';

/**
 * What a terminal could act on instead of showing, or would not show as itself: C0 and C1
 * controls (CR, LF, ESC, DEL, …), format characters (the bidi embeddings, overrides and isolates
 * U+202A–E, U+2066–9, the marks, zero-width characters), the line and paragraph separators
 * U+2028/9, lone surrogates, every other character that renders as nothing
 * (Default_Ignorable_Code_Point: U+034F, variation selectors, Hangul fillers), the braille blank
 * U+2800 and every space but U+0020 — the kernel's `showInvisible` set.
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\u2800\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]/gu;

const ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * Text for a person's terminal: every character of {@link UNSAFE} written as a visible escape
 * (`\n`, `\r`, `\t`, `\x1b`, `\u202e`, `\u{e0001}`), everything else as is. Agent-controlled text
 * (an action name, an argument, a principal, a reason) can then neither add a row, rewrite one,
 * reorder one, nor send the terminal a command. The one function every human-readable line of
 * the CLI goes through (`out` and `err` apply it); JSON output is written exactly, never through it.
 */
export function visible(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const named = ESCAPES[c];
    if (named !== undefined) return named;
    const cp = c.codePointAt(0)!;
    if (cp < 0x100) return `\\x${cp.toString(16).padStart(2, '0')}`;
    if (cp < 0x10000) return `\\u${cp.toString(16).padStart(4, '0')}`;
    return `\\u{${cp.toString(16)}}`;
  });
}

/** Whether `text` holds a character {@link visible} would escape (one that is not one visible line). */
export function hasUnsafe(text: string): boolean {
  UNSAFE.lastIndex = 0;
  return UNSAFE.test(text);
}

/** A stored timestamp in the format of every view (ISO-8601 UTC, milliseconds, `Z`: the kernel's `viewTime`), or `-`. */
export function stamp(stored: string | null | undefined): string {
  if (stored === null || stored === undefined || stored === '') return '-';
  return viewTime(stored);
}

/** A nullable stored timestamp in the format of every view, or null. */
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
