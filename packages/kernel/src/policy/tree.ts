/**
 * The loader's shared tree helpers: where-paths, refusals, closed key sets, and the operand
 * parser. One copy, used by the policy loader and by the authority loader, so that a grant's
 * `constraints:` and a rule's `when:` refuse exactly the same operands.
 *
 * @module
 */
import { isPlainObject, isWellFormedString, type JsonObject, type JsonValue } from '../canonical.js';
import { NUMERIC_OPERATORS, type Condition } from './conditions.js';
import { describeKey, MAX_EXPANDED_BYTES, typeName, utf8Length, YFloat, YMap, YSeq, YTimestamp, type YValue } from './yaml.js';

/** Python's `str.isspace()` characters: `strip()` removes exactly these. */
export const BLANK = /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

/** Whether `s` is empty after Python's `strip()`. */
export function isBlank(s: string): boolean {
  return BLANK.test(s);
}

/** A refusal at a place in the document; the loader turns it into a {@link PolicyError}. */
export class Refusal extends Error {
  constructor(
    readonly where: string,
    message: string,
    readonly line: number | null,
  ) {
    super(message);
  }
}

/** `'key'`, as the messages quote a key. */
export function quote(key: string): string {
  return `'${key}'`;
}

/** The where-path of `key` under `path` (`actions.a` or `actions['a.b']`). */
export function child(path: string, key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${path}.${key}` : `${path}[${quote(key)}]`;
}

/** Refuses a `mode:` below the top level, before unknown keys, so the message says why. */
export function rejectNestedMode(map: YMap, where: string): void {
  const e = map.entry('mode');
  if (e) {
    throw new Refusal(
      where,
      "'mode' is top level and nothing else: a configuration where some actions are observed and some enforced is one where nobody can say whether an action was permitted or merely watched; move it beside 'schema:'",
      e.line,
    );
  }
}

/** Refuses keys outside a closed set, naming them and the allowed ones. */
export function rejectUnknownKeys(map: YMap, allowed: readonly string[], where: string): void {
  const unknown = map.entries.filter((e) => typeof e.key !== 'string' || !allowed.includes(e.key));
  if (unknown.length > 0) {
    const names = unknown.map((e) => describeKey(e.key)).sort();
    throw new Refusal(where, `unknown key(s) ${names.join(', ')}; allowed: ${[...allowed].sort().join(', ')}`, unknown[0]!.line);
  }
}

/** A YAML value as plain JSON data for the hash: dates render ISO; floats, binary, sets, non-string keys refused. */
export function plain(v: YValue, where: string, line: number): JsonValue {
  if (typeof v === 'string') {
    if (!isWellFormedString(v)) throw new Refusal(where, 'a string holds a lone surrogate, which the policy hash cannot encode', line);
    return v;
  }
  if (typeof v === 'bigint') return toInt(v);
  if (typeof v === 'boolean' || v === null) return v;
  if (v instanceof YTimestamp) return v.iso;
  if (v instanceof YMap) {
    const o: JsonObject = Object.create(null) as JsonObject;
    for (const e of v.entries) {
      if (typeof e.key !== 'string') {
        throw new Refusal(
          where,
          `policy keys must be strings; ${describeKey(e.key)} is a ${typeName(e.key)}, and coercing it would make two different documents hash the same`,
          e.line,
        );
      }
      if (!isWellFormedString(e.key)) throw new Refusal(where, 'a key holds a lone surrogate, which the policy hash cannot encode', e.line);
      o[e.key] = plain(e.value, child(where, e.key), e.line);
    }
    return o;
  }
  if (v instanceof YSeq) return v.items.map((x, i) => plain(x, `${where}[${i}]`, v.lines[i] ?? line));
  if (v instanceof YFloat) {
    throw new Refusal(
      where,
      `a policy cannot contain a float (${v.text}): its decision inputs are hashed as canonical JSON; write a threshold as an integer in minor units`,
      line,
    );
  }
  throw new Refusal(
    where,
    `a policy cannot contain ${v.kind === 'binary' ? 'binary data' : 'a set'}: a lossy encoding would make two different documents hash the same`,
    line,
  );
}

/** A YAML integer as a safe `number`, or the `bigint` itself beyond 2^53 − 1. */
export function toInt(v: bigint): number | bigint {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

/** An operand checked against the allowed argument types (no float, no date, string keys). */
export function checkedOperand(v: YValue, where: string, key: string, line: number): JsonValue {
  if (v instanceof YFloat) {
    throw new Refusal(where, `condition '${key}': float operands are not allowed; use integer minor units (amount_lte: 50000) or a decimal string`, line);
  }
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return plain(v, where, line);
  if (typeof v === 'bigint') return toInt(v);
  if (v instanceof YMap) {
    const o: JsonObject = Object.create(null) as JsonObject;
    for (const e of v.entries) {
      if (typeof e.key !== 'string') throw new Refusal(where, `condition '${key}': operand keys must be strings, got ${describeKey(e.key)}`, e.line);
      o[plain(e.key, where, e.line) as string] = checkedOperand(e.value, where, key, e.line);
    }
    return o;
  }
  if (v instanceof YSeq) return v.items.map((x, i) => checkedOperand(x, where, key, v.lines[i] ?? line));
  throw new Refusal(where, `condition '${key}': ${typeName(v)} is not an allowed operand type`, line);
}

/** Parses one condition operand for `op` (numeric ops need an integer; `in` a list). */
export function parseOperand(op: Condition['op'], v: YValue, where: string, key: string, line: number): JsonValue {
  if (NUMERIC_OPERATORS.has(op)) {
    if (typeof v !== 'bigint') {
      throw new Refusal(
        where,
        `condition '${key}': a numeric operator needs an integer operand, got ${typeName(v)}. Only integers can be bounded, so an amount is written in integer minor units (amount_lte: 200000), never as a decimal string`,
        line,
      );
    }
    return toInt(v);
  }
  if (op === 'in') {
    if (!(v instanceof YSeq)) throw new Refusal(where, `condition '${key}': '_in' needs a list operand, got ${typeName(v)}`, line);
    return checkedOperand(v, where, key, line);
  }
  const checked = checkedOperand(v, where, key, line);
  if (Array.isArray(checked)) {
    for (const item of checked) {
      if (typeof item === 'object' && item !== null) {
        throw new Refusal(
          where,
          `condition '${key}': a list operand of '_${op}' holds scalars, got ${Array.isArray(item) ? 'list' : 'mapping'}. Write it as a flat list (data_scope_eq: [phi, pci])`,
          line,
        );
      }
    }
  }
  return checked;
}
/** A JS value as the loader's tree (no lines: a parsed document has none). */
export function fromJs(v: unknown, where: string, active: Set<object>, budget: { bytes: number } = { bytes: 0 }): YValue {
  // A parsed document can share one long string or one subtree many times over (a DAG, not a
  // cycle); bound what it weighs expanded, as the YAML reader bounds its aliases.
  budget.bytes += 1 + (typeof v === 'string' ? utf8Length(v) : 0);
  if (budget.bytes > MAX_EXPANDED_BYTES) {
    throw new Refusal(
      where,
      `once shared values are expanded, the document is larger than the size limit of ${MAX_EXPANDED_BYTES} bytes (8 MiB, MAX_EXPANDED_BYTES)`,
      null,
    );
  }
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') {
    if (Number.isSafeInteger(v) && !Object.is(v, -0)) return BigInt(v);
    return new YFloat(String(v), v);
  }
  if (v instanceof Date) {
    if (Number.isNaN(v.getTime())) throw new Refusal(where, 'an invalid Date', null);
    const iso = v.toISOString();
    const ms = v.getUTCMilliseconds();
    const text = `${iso.slice(0, 19)}${ms ? `.${String(ms * 1000).padStart(6, '0')}` : ''}+00:00`;
    return new YTimestamp(text, `js:${v.getTime()}`);
  }
  if (typeof v === 'object') {
    if (active.has(v)) throw new Refusal(where, 'the document contains itself', null);
    active.add(v);
    try {
      if (Array.isArray(v)) {
        const items = Array.from(v, (x, i) => fromJs(x, `${where}[${i}]`, active, budget));
        return new YSeq(
          items,
          items.map(() => 0),
          0,
        );
      }
      if (isPlainObject(v)) {
        return new YMap(
          Object.keys(v).map((k) => {
            budget.bytes += utf8Length(k);
            return { key: k, value: fromJs(v[k], child(where, k), active, budget), line: 0 };
          }),
          0,
        );
      }
    } finally {
      active.delete(v);
    }
  }
  throw new Refusal(where, `a policy document cannot hold a ${typeof v === 'object' ? ((v as object).constructor?.name ?? 'object') : typeof v}`, null);
}
