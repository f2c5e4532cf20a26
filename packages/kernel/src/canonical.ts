/**
 * The one canonicaliser: the bytes behind the action hash, the receipt chain and the policy hash.
 *
 * JSON with object keys sorted by Unicode code point (recursively), `,`/`:` separators and no
 * whitespace, non-ASCII written raw, only `"`, `\` and U+0000–U+001F escaped, UTF-8. Integers are
 * exact at any magnitude up to {@link MAX_INTEGER_DIGITS} digits (`bigint` beyond 2^53 − 1); anything else (a fraction, NaN, ±Infinity,
 * -0, `undefined`, a function, a symbol, a `Date`, a `Map`, a class instance, a lone surrogate) is
 * refused with {@link InvalidArgument} naming the path. Nothing is ever coerced.
 *
 * @module
 */
import { InvalidArgument } from './errors.js';
import { quotedForMessage } from './quoted.js';

/** A JSON value as the kernel handles it: integers are safe `number`s or `bigint`s. */
export type JsonValue = string | number | bigint | boolean | null | JsonValue[] | { [key: string]: JsonValue };
/** A JSON object (string keys). */
export type JsonObject = { [key: string]: JsonValue };

const FLOAT_HINT = ": use integer minor units (amount=200000) or a decimal string ('2000.00')";
const DATE_HINT = ': pass date.toISOString() (a string such as "2026-01-01T12:00:00.000Z") or date.getTime() (integer milliseconds)';
const encoder = new TextEncoder();

/** Orders two strings by Unicode code point (UTF-8 byte order), not by UTF-16 code unit. */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codeUnitOrder(x, y);
  }
  return a.length - b.length;
}

/**
 * The code point order of the first two UTF-16 code units that differ, `x` and `y`: their
 * difference, except that a surrogate (half of a code point above U+FFFF) outranks U+E000–U+FFFF.
 */
export function codeUnitOrder(x: number, y: number): number {
  const xs = x >= 0xd800 && x <= 0xdfff;
  const ys = y >= 0xd800 && y <= 0xdfff;
  if (xs !== ys) {
    if (xs && y >= 0xe000) return 1;
    if (ys && x >= 0xe000) return -1;
  }
  return x - y;
}

const hasWellFormed = typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === 'function';
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether `s` holds no lone surrogate (so it encodes to UTF-8 without loss). */
export function isWellFormedString(s: string): boolean {
  return hasWellFormed ? (s as string & { isWellFormed(): boolean }).isWellFormed() : !LONE_SURROGATE.test(s);
}

/** Whether `v` is a plain data object: `{}` literal or `Object.create(null)`, nothing else. */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function describe(v: unknown): string {
  if (v === undefined) return 'undefined';
  if (typeof v === 'function') return 'function';
  if (typeof v === 'symbol') return 'symbol';
  if (typeof v === 'object' && v !== null) {
    const ctor = (Object.getPrototypeOf(v) as { constructor?: { name?: string } } | null)?.constructor?.name;
    return ctor ? ctor : 'object';
  }
  return typeof v;
}

function keyPath(path: string, key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${quotedForMessage(key, 200)}]`;
}

/**
 * Where a value sits, for error messages only: built as a chain while writing (cheap) and turned
 * into text (`arguments.items[2].name`) only when something is refused.
 */
type Path = string | { readonly parent: Path; readonly key: string | number };

function pathText(path: Path): string {
  if (typeof path === 'string') return path;
  const parent = pathText(path.parent);
  return typeof path.key === 'number' ? `${parent}[${path.key}]` : keyPath(parent, path.key);
}

/** The deepest nesting of arrays and objects {@link parseJson} reads and the canonical form writes. */
export const MAX_NESTING = 512;

/** The deepest nesting of an action's arguments (half of {@link MAX_NESTING}: room for every envelope). */
export const MAX_ARGUMENT_NESTING = 256;

/** `path` itself, or the child `key` of `parent`: a chain link is made only where one is needed. */
function at(parent: Path, key: string | number | undefined): Path {
  return key === undefined ? parent : { parent, key };
}

/** Up to this many keys are put in order by insertion, in place; more are sorted natively. */
const INSERTION_SORT_KEYS = 16;

/**
 * `keys` in code point order, sorted in place. Keys already in order are returned as listed; a
 * few are put in order by insertion on {@link compareCodePoints} (no allocation, a handful of
 * comparisons); more are sorted natively (UTF-16 order) and checked pair by pair, as the two
 * orders differ only around surrogates.
 */
function sortedKeys(keys: string[]): string[] {
  let ordered = true;
  for (let i = 1; i < keys.length; i++) {
    if (compareCodePoints(keys[i - 1]!, keys[i]!) > 0) {
      ordered = false;
      break;
    }
  }
  if (ordered) return keys;
  if (keys.length <= INSERTION_SORT_KEYS) {
    for (let i = 1; i < keys.length; i++) {
      const k = keys[i]!;
      let j = i - 1;
      for (; j >= 0 && compareCodePoints(keys[j]!, k) > 0; j--) keys[j + 1] = keys[j]!;
      keys[j + 1] = k;
    }
    return keys;
  }
  keys.sort();
  for (let i = 1; i < keys.length; i++) {
    if (compareCodePoints(keys[i - 1]!, keys[i]!) > 0) return keys.sort(compareCodePoints);
  }
  return keys;
}

/** What JSON.stringify escapes in a well-formed string (a lone surrogate is refused before this). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

/**
 * A well-formed string as JSON text, exactly as JSON.stringify writes it: most strings need no
 * escape and are only quoted, without a call into the serialiser.
 */
function quoted(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}

/** Where {@link write} leaves the deep-frozen copy of the value it wrote, when asked for one. */
interface CopySlot {
  value?: JsonValue;
}

/**
 * Serialises `value` canonically, validating as it goes. The value sits at `key` of `parent`
 * (or is the root named `parent` when `key` is undefined); the chain is built only for a
 * container's children or a refusal. Each property is read once. With `copy`, the value is also
 * copied as it is read (objects with no prototype, keys as listed; arrays; every container
 * frozen) into `copy.value`: what was written is exactly what was copied, even from a getter or a
 * proxy that would answer differently a second time.
 */
function write(value: unknown, parent: Path, key: string | number | undefined, depth = 0, limit = MAX_NESTING, copy?: CopySlot): string {
  // No deeper than parseJson reads (a deeper or cyclic value is refused, not a stack overflow).
  if (depth > limit)
    throw new InvalidArgument(
      `the value at ${pathText(at(parent, key))} is nested deeper than ${limit} levels${limit === MAX_NESTING ? ', the most the kernel reads back' : ''}`,
    );
  switch (typeof value) {
    case 'string':
      if (!isWellFormedString(value)) throw new InvalidArgument(`a lone surrogate is not allowed at ${pathText(at(parent, key))}`);
      if (copy !== undefined) copy.value = value;
      return quoted(value);
    case 'number':
      if (!Number.isInteger(value)) throw new InvalidArgument(`float is not an allowed argument type at ${pathText(at(parent, key))}${FLOAT_HINT}`);
      if (!Number.isSafeInteger(value)) {
        throw new InvalidArgument(`integer at ${pathText(at(parent, key))} is beyond 2^53 - 1 and would lose precision: pass it as a bigint`);
      }
      if (Object.is(value, -0)) throw new InvalidArgument(`-0 is not an allowed argument value at ${pathText(at(parent, key))}: use 0`);
      if (copy !== undefined) copy.value = value;
      return String(value);
    case 'bigint': {
      const digits = value.toString();
      const n = digits.length - (value < 0n ? 1 : 0);
      if (n > MAX_INTEGER_DIGITS) throw new InvalidArgument(`integer at ${pathText(at(parent, key))} has ${n} digits; the limit is ${MAX_INTEGER_DIGITS}`);
      if (copy !== undefined) copy.value = value;
      return digits;
    }
    case 'boolean':
      if (copy !== undefined) copy.value = value;
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) {
        if (copy !== undefined) copy.value = null;
        return 'null';
      }
      const path = at(parent, key);
      // One slot for every child in turn: each child's write fills it just before it returns.
      const slot: CopySlot | undefined = copy === undefined ? undefined : {};
      if (Array.isArray(value)) {
        const length = value.length;
        const items = copy === undefined ? null : new Array<JsonValue>(length);
        let out = '[';
        for (let i = 0; i < length; i++) {
          if (!(i in value)) throw new InvalidArgument(`an array hole is not an allowed argument value at ${pathText({ parent: path, key: i })}`);
          if (i > 0) out += ',';
          out += write(value[i], path, i, depth + 1, limit, slot);
          if (items !== null) items[i] = slot!.value!;
        }
        if (items !== null) copy!.value = Object.freeze(items) as JsonValue;
        return out + ']';
      }
      if (isPlainObject(value)) {
        if (Object.getOwnPropertySymbols(value).length > 0) throw new InvalidArgument(`a symbol key is not allowed at ${pathText(path)}`);
        const listed = Object.keys(value);
        // The copy has the keys as listed (placed first, so the values written in sorted order
        // land in that order); without a prototype, a `__proto__` key is a key like any other.
        let read: JsonObject | null = null;
        if (copy !== undefined) {
          read = Object.create(null) as JsonObject;
          for (const k of listed) read[k] = null;
        }
        const keys = sortedKeys(read === null ? listed : listed.slice());
        let out = '{';
        for (let i = 0; i < keys.length; i++) {
          const k = keys[i]!;
          if (!isWellFormedString(k)) throw new InvalidArgument(`a key with a lone surrogate is not allowed at ${pathText(path)}`);
          if (i > 0) out += ',';
          out += quoted(k) + ':' + write(value[k], path, k, depth + 1, limit, slot);
          if (read !== null) read[k] = slot!.value!;
        }
        if (read !== null) copy!.value = Object.freeze(read);
        return out + '}';
      }
      if (value instanceof Date) throw new InvalidArgument(`Date is not an allowed argument type at ${pathText(path)}${DATE_HINT}`);
      throw new InvalidArgument(`${describe(value)} is not an allowed argument type at ${pathText(path)}`);
    }
    default:
      throw new InvalidArgument(`${describe(value)} is not an allowed argument type at ${pathText(at(parent, key))}`);
  }
}

/** The canonical JSON text of `value`; `path` names the root in error messages. */
export function canonicalJson(value: unknown, path = 'value'): string {
  return write(value, path, undefined);
}

/** The canonical UTF-8 bytes of `value` (what every hash of this package is computed over). */
export function canonicalBytes(value: unknown, path = 'value'): Uint8Array {
  return encoder.encode(canonicalJson(value, path));
}

/**
 * Validates `value` as an allowed argument value, and returns a deep-frozen copy of it and the
 * canonical text of that copy, from one reading of `value`: each property is read once, so the
 * text is exactly that of the copy.
 */
export function frozenWithText<T = JsonValue>(value: unknown, path = 'arguments'): { value: T; text: string } {
  // Arguments are written inside receipts, events and their envelopes (a receipt's edit holds
  // them two levels down): they stay well within what parseJson reads back, or a stored receipt
  // would be unreadable and the chain would report it altered.
  const copy: CopySlot = {};
  const text = write(value, path, undefined, 0, MAX_ARGUMENT_NESTING, copy);
  return { value: copy.value as T, text };
}

/** A deep copy of already-validated JSON data; objects keep `__proto__` as data. */
export function deepCopy(value: unknown, freeze = false): JsonValue {
  if (Array.isArray(value)) {
    const a = value.map((v) => deepCopy(v, freeze));
    return freeze ? (Object.freeze(a) as JsonValue) : a;
  }
  if (typeof value === 'object' && value !== null) {
    const o: JsonObject = Object.create(null) as JsonObject;
    for (const k of Object.keys(value)) o[k] = deepCopy((value as Record<string, unknown>)[k], freeze);
    return freeze ? Object.freeze(o) : o;
  }
  return value as JsonValue;
}

/**
 * The most digits an integer may have (sign not counted), in {@link parseJson} and in the
 * canonical form alike, so that nothing the kernel writes is unreadable to it.
 */
export const MAX_INTEGER_DIGITS = 400;

/** Options for {@link parseJson}. */
export interface ParseJsonOptions {
  /** `'refuse'` (default): a number with `.`, `e` or `E` is an error. `'allow'`: parsed as a `number`. */
  floats?: 'refuse' | 'allow';
  /** Name of the document in error messages. */
  what?: string;
}

/**
 * A strict JSON parser that keeps what `JSON.parse` loses: it refuses float tokens (`20.0`,
 * `2e1`), yields `bigint` for integers beyond 2^53 − 1, refuses lone surrogates (raw or escaped)
 * and duplicate keys, and builds `Object.create(null)` objects so `__proto__` stays data.
 */
export function parseJson(text: string, options: ParseJsonOptions = {}): JsonValue {
  const floats = options.floats ?? 'refuse';
  const what = options.what ?? 'JSON';
  let i = 0;
  // Where the parser is, as keys and indexes; rendered only for an error.
  const at: (string | number)[] = [];
  const pathText = (): string => at.reduce<string>((p, seg) => (typeof seg === 'number' ? `${p}[${seg}]` : keyPath(p, seg)), '$');
  const fail = (msg: string): never => {
    throw new InvalidArgument(`${what} is not valid: ${msg} at offset ${i}`);
  };
  const ws = (): void => {
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else return;
    }
  };
  const str = (): string => {
    // text[i] === '"'
    i++;
    let out = '';
    let start = i;
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        out += text.slice(start, i);
        i++;
        break;
      }
      if (c < 0x20) fail('unescaped control character in string');
      if (c === 0x5c) {
        out += text.slice(start, i);
        const e = text[i + 1];
        i += 2;
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u': {
            const hex = text.slice(i, i + 4);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('bad \\u escape');
            out += String.fromCharCode(parseInt(hex, 16));
            i += 4;
            break;
          }
          default:
            fail('bad escape');
        }
        start = i;
        continue;
      }
      i++;
    }
    if (!isWellFormedString(out)) fail('lone surrogate in string');
    return out;
  };
  const num = (): number | bigint => {
    // One character past the limit is read, so a longer number is seen, and refused by name
    // (BigInt never parses an attacker's megabyte of digits; a cut token would blame the next byte).
    const m = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + MAX_INTEGER_DIGITS + 2));
    if (!m) return fail('bad number');
    const tok = m[0];
    const integer = m[1] === undefined && m[2] === undefined;
    const digits = tok.length - (tok.startsWith('-') ? 1 : 0);
    if (digits > MAX_INTEGER_DIGITS) {
      let end = i + tok.length;
      while (end < text.length && /[0-9.eE+-]/.test(text[end] as string)) end++;
      const n = end - i - (tok.startsWith('-') ? 1 : 0);
      fail(`${integer ? `integer at ${pathText()} has ${n} digits` : `number at ${pathText()} is ${n} characters long`}; the limit is ${MAX_INTEGER_DIGITS}`);
    }
    i += tok.length;
    if (!integer) {
      if (floats === 'refuse') {
        i -= tok.length;
        fail(`float ${tok} is not allowed`);
      }
      return Number(tok);
    }
    if (tok === '-0') {
      i -= tok.length;
      fail('-0 is not allowed');
    }
    const n = Number(tok);
    return Number.isSafeInteger(n) ? n : BigInt(tok);
  };
  const value = (depth: number): JsonValue => {
    if (depth > MAX_NESTING) fail('nesting too deep');
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const o: JsonObject = Object.create(null) as JsonObject;
      ws();
      if (text[i] === '}') {
        i++;
        return o;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected a string key');
        const k = str();
        if (Object.prototype.hasOwnProperty.call(o, k)) fail(`duplicate key ${quotedForMessage(k, 200)}`);
        ws();
        if (text[i] !== ':') fail("expected ':'");
        i++;
        at.push(k);
        o[k] = value(depth + 1);
        at.pop();
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return o;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      i++;
      const a: JsonValue[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return a;
      }
      for (;;) {
        at.push(a.length);
        a.push(value(depth + 1));
        at.pop();
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return a;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') return str();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return num();
    if (text.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (text.startsWith('false', i)) {
      i += 5;
      return false;
    }
    if (text.startsWith('null', i)) {
      i += 4;
      return null;
    }
    return fail('unexpected character');
  };
  if (typeof text !== 'string') throw new InvalidArgument(`${what} must be a string`);
  const v = value(0);
  ws();
  if (i !== text.length) fail('trailing characters');
  return v;
}

/** Type-strict equality of two JSON values (`true` ≠ `1`, `5` = `5n`, containers by content). */
export function jsonEquals(a: unknown, b: unknown): boolean {
  if ((typeof a === 'number' || typeof a === 'bigint') && (typeof b === 'number' || typeof b === 'bigint')) {
    // eslint-disable-next-line eqeqeq
    return a == b;
  }
  if (typeof a !== typeof b) return false;
  if (a === null || b === null) return a === b;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => jsonEquals(x, b[i]));
  }
  if (Array.isArray(b)) return false;
  if (typeof a === 'object') {
    const ka = Object.keys(a as object);
    const kb = Object.keys(b as object);
    if (ka.length !== kb.length) return false;
    return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEquals((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
  }
  return a === b;
}

/**
 * Compact JSON that keeps each object's own key order (for documents whose key order the
 * reference fixes, such as receipts and `action_json`) and writes `bigint`s as digits.
 * Values must already be valid JSON data.
 */
export function orderedJson(value: unknown): string {
  // JSON.stringify keeps each object's own key order too, natively; of JSON data it refuses only
  // a bigint (a TypeError), which the walk below writes as digits.
  try {
    return JSON.stringify(value);
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
  }
  return orderedWalk(value);
}

function orderedWalk(value: unknown): string {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return `[${value.map(orderedWalk).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const parts: string[] = [];
    for (const k of Object.keys(value)) parts.push(`${JSON.stringify(k)}:${orderedWalk((value as Record<string, unknown>)[k])}`);
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value);
}
