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
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    // A surrogate stands for a code point above U+FFFF, so it outranks U+E000–U+FFFF.
    if (xs !== ys) {
      if (xs && y >= 0xe000) return 1;
      if (ys && x >= 0xe000) return -1;
    }
    return x - y;
  }
  return a.length - b.length;
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
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
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

/** Serialises `value` canonically, validating as it goes; `path` names the root in errors. */
function write(value: unknown, path: Path, out: string[]): void {
  switch (typeof value) {
    case 'string':
      if (!isWellFormedString(value)) throw new InvalidArgument(`a lone surrogate is not allowed at ${pathText(path)}`);
      out.push(JSON.stringify(value));
      return;
    case 'number':
      if (!Number.isInteger(value)) throw new InvalidArgument(`float is not an allowed argument type at ${pathText(path)}${FLOAT_HINT}`);
      if (!Number.isSafeInteger(value)) {
        throw new InvalidArgument(`integer at ${pathText(path)} is beyond 2^53 - 1 and would lose precision: pass it as a bigint`);
      }
      if (Object.is(value, -0)) throw new InvalidArgument(`-0 is not an allowed argument value at ${pathText(path)}: use 0`);
      out.push(String(value));
      return;
    case 'bigint': {
      const digits = value.toString();
      const n = digits.length - (value < 0n ? 1 : 0);
      if (n > MAX_INTEGER_DIGITS) throw new InvalidArgument(`integer at ${pathText(path)} has ${n} digits; the limit is ${MAX_INTEGER_DIGITS}`);
      out.push(digits);
      return;
    }
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return;
    case 'object':
      if (value === null) {
        out.push('null');
        return;
      }
      if (Array.isArray(value)) {
        out.push('[');
        for (let i = 0; i < value.length; i++) {
          if (!(i in value)) throw new InvalidArgument(`an array hole is not an allowed argument value at ${pathText({ parent: path, key: i })}`);
          if (i > 0) out.push(',');
          write(value[i], { parent: path, key: i }, out);
        }
        out.push(']');
        return;
      }
      if (isPlainObject(value)) {
        if (Object.getOwnPropertySymbols(value).length > 0) throw new InvalidArgument(`a symbol key is not allowed at ${pathText(path)}`);
        const keys = Object.keys(value).sort(compareCodePoints);
        out.push('{');
        let first = true;
        for (const k of keys) {
          if (!isWellFormedString(k)) throw new InvalidArgument(`a key with a lone surrogate is not allowed at ${pathText(path)}`);
          if (!first) out.push(',');
          first = false;
          out.push(JSON.stringify(k), ':');
          write(value[k], { parent: path, key: k }, out);
        }
        out.push('}');
        return;
      }
      if (value instanceof Date) throw new InvalidArgument(`Date is not an allowed argument type at ${pathText(path)}${DATE_HINT}`);
      throw new InvalidArgument(`${describe(value)} is not an allowed argument type at ${pathText(path)}`);
    default:
      throw new InvalidArgument(`${describe(value)} is not an allowed argument type at ${pathText(path)}`);
  }
}

/** The canonical JSON text of `value`; `path` names the root in error messages. */
export function canonicalJson(value: unknown, path = 'value'): string {
  const out: string[] = [];
  write(value, path, out);
  return out.join('');
}

/** The canonical UTF-8 bytes of `value` (what every hash of this package is computed over). */
export function canonicalBytes(value: unknown, path = 'value'): Uint8Array {
  return encoder.encode(canonicalJson(value, path));
}

/** Validates `value` as an allowed argument value and returns a deep-frozen copy. */
export function freezeValue<T = JsonValue>(value: unknown, path = 'arguments'): T {
  canonicalJson(value, path);
  return deepCopy(value, true) as T;
}

/** A deep copy of already-validated JSON data; objects keep `__proto__` as data. */
export function deepCopy(value: unknown, freeze = false): JsonValue {
  if (Array.isArray(value)) {
    const a = value.map((v) => deepCopy(v, freeze));
    return freeze ? Object.freeze(a) as JsonValue : a;
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
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
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
    if (depth > 512) fail('nesting too deep');
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
        if (Object.prototype.hasOwnProperty.call(o, k)) fail(`duplicate key ${JSON.stringify(k)}`);
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

/** Options for {@link canonicalizeJsonText}. */
export interface CanonicalizeTextOptions {
  /** Keys of the root object whose values the caller wants (see {@link CanonicalJsonText.fields}). */
  readonly fields?: ReadonlySet<string>;
}

/** What {@link canonicalizeJsonText} gives for a document it could read in one pass. */
export interface CanonicalJsonText {
  /** The canonical text: the same string as `canonicalJson(parseJson(text))`. */
  readonly canonical: string;
  /**
   * When the root is an object: the asked-for {@link CanonicalizeTextOptions.fields} it has, with
   * the values {@link parseJson} gives them (a prototype-free object); `null` when the root is not
   * an object.
   */
  readonly fields: JsonObject | null;
}

// The one-pass reader's state. It calls nothing that could call back into it, so no other read
// interleaves with one; `src` is cleared after each read so no document is kept alive.
let src = '';
let pos = 0;
/** Bumped whenever a value's canonical text is not its own span of `src` (whitespace dropped, members sorted). */
let rewrites = 0;
/** The canonical text of the last container scanned, when it was rewritten ({@link REWRITTEN}). */
let rewritten = '';
/** What a scan found: its canonical text is its own span of `src`, or is in {@link rewritten}, or the pass gives up. */
const CLEAN = 0;
const REWRITTEN = 1;
const GIVE_UP = -1;
const NO_FIELDS: ReadonlySet<string> = new Set();

/**
 * The canonical text of the JSON document `text`, read in one pass over its characters without
 * building the value: the fast path for hashing stored documents (receipts), which are written
 * canonically except for the order of their keys. Keys out of order are sorted and whitespace
 * between tokens is dropped, as the full path does.
 *
 * Returns `null` whenever this pass does not settle the document: anything {@link parseJson}
 * refuses (invalid JSON, a float, `-0`, a duplicate key, a lone surrogate, an integer over
 * {@link MAX_INTEGER_DIGITS} digits, nesting over 512), and anything it accepts but spelled
 * otherwise than the canonical form spells it (a number such as `1e2`, an escape such as
 * `\u0041` or `\/`). The caller then takes the full path, `canonicalJson(parseJson(text))`, which
 * gives the same text or the refusal it has always given. Whenever a result is returned, its
 * `canonical` equals `canonicalJson(parseJson(text))`.
 */
export function canonicalizeJsonText(text: string, options: CanonicalizeTextOptions = {}): CanonicalJsonText | null {
  if (typeof text !== 'string') return null;
  src = text;
  pos = 0;
  rewrites = 0;
  special = -1;
  try {
    skipWs();
    const start = pos;
    let fields: JsonObject | null = null;
    let found: number;
    if (src.charCodeAt(pos) === 0x7b) {
      fields = Object.create(null) as JsonObject;
      found = scanObject(0, options.fields ?? NO_FIELDS, fields);
    } else found = scanValue(0);
    if (found === GIVE_UP) return null;
    const end = pos;
    skipWs();
    if (pos !== src.length) return null;
    return { canonical: found === CLEAN ? src.slice(start, end) : rewritten, fields };
  } finally {
    src = '';
    rewritten = '';
  }
}

/** Passes whitespace; any it passes is dropped from the canonical text (a rewrite). */
function skipWs(): void {
  const from = pos;
  for (;;) {
    const c = src.charCodeAt(pos);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) pos++;
    else break;
  }
  if (pos !== from) rewrites++;
}

/** Passes the value at `pos`. */
function scanValue(depth: number): number {
  const c = src.charCodeAt(pos);
  if (c === 0x22) return scanString() < 0 ? GIVE_UP : CLEAN;
  if (c === 0x7b) return scanObject(depth, NO_FIELDS, null);
  if (c === 0x5b) return scanArray(depth);
  if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return scanInteger();
  if (c === 0x74 && src.startsWith('true', pos)) pos += 4;
  else if (c === 0x66 && src.startsWith('false', pos)) pos += 5;
  else if (c === 0x6e && src.startsWith('null', pos)) pos += 4;
  else return GIVE_UP;
  return CLEAN;
}

/** Characters a string literal may hold only in the slow walk: a backslash, a control character, a surrogate. */
const SPECIAL = /[\\\u0000-\u001f\ud800-\udfff]/g;
/** The position of the first {@link SPECIAL} character at or after the last search's start (`src.length`: none). */
let special = -1;

/** The position of the first {@link SPECIAL} character at or after `i`; one search serves every string before it. */
function nextSpecial(i: number): number {
  if (special >= i) return special;
  SPECIAL.lastIndex = i;
  special = SPECIAL.test(src) ? SPECIAL.lastIndex - 1 : src.length;
  return special;
}

/**
 * Passes the string literal at `pos` if it is spelled exactly as `JSON.stringify` spells its
 * value (raw characters; only `\"`, `\\`, `\b\f\n\r\t` and lowercase `\u00xx` for the other
 * control characters) and that value has no lone surrogate. Returns a bit set (1: it holds an
 * escape, 2: it holds a surrogate pair), or -1 (nothing passed for certain) when the pass gives up.
 */
function scanString(): number {
  const quote = src.indexOf('"', pos + 1);
  if (quote < 0) return -1;
  // Most strings hold no special character: the closing quote is the first quote.
  if (nextSpecial(pos + 1) > quote) {
    pos = quote + 1;
    return 0;
  }
  let i = pos + 1;
  let flags = 0;
  for (;;) {
    const c = src.charCodeAt(i);
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c && (c < 0xd800 || c > 0xdfff)) {
      i++;
      continue;
    }
    if (c === 0x22) break;
    if (c === 0x5c) {
      const e = src.charCodeAt(i + 1);
      if (e === 0x22 || e === 0x5c || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) i += 2;
      else if (e === 0x75) {
        // Only a control character without a short form is written as \u00xx (lowercase hex).
        if (src.charCodeAt(i + 2) !== 0x30 || src.charCodeAt(i + 3) !== 0x30) return -1;
        const h = src.charCodeAt(i + 4);
        const l = src.charCodeAt(i + 5);
        if (h !== 0x30 && h !== 0x31) return -1;
        const low = l >= 0x30 && l <= 0x39 ? l - 0x30 : l >= 0x61 && l <= 0x66 ? l - 0x57 : -1;
        if (low < 0) return -1;
        const code = (h - 0x30) * 16 + low;
        if (code === 0x08 || code === 0x09 || code === 0x0a || code === 0x0c || code === 0x0d) return -1;
        i += 6;
      } else return -1;
      flags |= 1;
      continue;
    }
    // A high surrogate followed by a low one passes; a lone one, a raw control character or
    // the end of the text (NaN) gives up.
    if (!(c >= 0xd800 && c <= 0xdbff)) return -1;
    const d = src.charCodeAt(i + 1);
    if (!(d >= 0xdc00 && d <= 0xdfff)) return -1;
    flags |= 2;
    i += 2;
  }
  pos = i + 1;
  return flags;
}

/** Passes an integer token spelled canonically (no `-0`, no leading zero, no fraction or exponent). */
function scanInteger(): number {
  const start = pos;
  let i = pos;
  if (src.charCodeAt(i) === 0x2d) i++;
  const first = src.charCodeAt(i);
  if (first === 0x30) {
    if (i !== start) return GIVE_UP; // -0
    i++;
  } else if (first >= 0x31 && first <= 0x39) {
    i++;
    for (let c = src.charCodeAt(i); c >= 0x30 && c <= 0x39; c = src.charCodeAt(i)) i++;
  } else return GIVE_UP;
  const after = src.charCodeAt(i);
  // A fraction or exponent (refused or rewritten by the full path), or a digit after a leading 0.
  if (after === 0x2e || after === 0x65 || after === 0x45 || (after >= 0x30 && after <= 0x39)) return GIVE_UP;
  if (i - start - (src.charCodeAt(start) === 0x2d ? 1 : 0) > MAX_INTEGER_DIGITS) return GIVE_UP;
  pos = i;
  return CLEAN;
}

/** An object's member as scanned: `text` is its canonical `"key":value`, or null when that is `src[ks, end)`. */
interface ScannedMember {
  readonly key: string;
  readonly ks: number;
  readonly end: number;
  readonly text: string | null;
}

function byKey(a: ScannedMember, b: ScannedMember): number {
  return compareCodePoints(a.key, b.key);
}

/** {@link byKey} for keys without surrogates, where UTF-16 order is code point order. */
function byKeyUnits(a: ScannedMember, b: ScannedMember): number {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/** A member's canonical `"key":value`. */
function memberText(m: ScannedMember): string {
  return m.text ?? src.slice(m.ks, m.end);
}

/**
 * Passes the object at `pos`, its members sorted by key (a rewrite unless they already are);
 * the values of the keys in `want` go into `fields`.
 */
function scanObject(depth: number, want: ReadonlySet<string>, fields: JsonObject | null): number {
  if (depth >= 512) return GIVE_UP;
  const before = rewrites;
  pos++;
  const members: ScannedMember[] = [];
  let sorted = true;
  let surrogates = false;
  skipWs();
  if (src.charCodeAt(pos) === 0x7d) pos++;
  else {
    for (;;) {
      skipWs();
      if (src.charCodeAt(pos) !== 0x22) return GIVE_UP;
      const ks = pos;
      const memberBefore = rewrites;
      const flags = scanString();
      if (flags < 0) return GIVE_UP;
      const ke = pos;
      // A canonical literal is exactly what JSON.parse reads back, without loss.
      const key = (flags & 1) === 0 ? src.slice(ks + 1, ke - 1) : (JSON.parse(src.slice(ks, ke)) as string);
      if ((flags & 2) !== 0) surrogates = true;
      skipWs();
      if (src.charCodeAt(pos) !== 0x3a) return GIVE_UP;
      pos++;
      skipWs();
      const vs = pos;
      const found = scanValue(depth + 1);
      if (found === GIVE_UP) return GIVE_UP;
      const value = found === CLEAN ? null : rewritten;
      const prev = members[members.length - 1];
      if (prev !== undefined) {
        const order = surrogates ? compareCodePoints(prev.key, key) : prev.key < key ? -1 : prev.key === key ? 0 : 1;
        if (order === 0) return GIVE_UP; // a duplicate key, which the full parse refuses
        if (order > 0) sorted = false;
      }
      members.push({ key, ks, end: pos, text: rewrites === memberBefore ? null : `${src.slice(ks, ke)}:${value ?? src.slice(vs, pos)}` });
      if (fields !== null && want.size > 0 && want.has(key)) fields[key] = fieldValue(value ?? src.slice(vs, pos));
      skipWs();
      const c = src.charCodeAt(pos);
      pos++;
      if (c === 0x2c) continue;
      if (c === 0x7d) break;
      return GIVE_UP;
    }
  }
  if (sorted && rewrites === before) return CLEAN;
  let ordered = members;
  if (!sorted) {
    const known = knownOrder(members);
    if (known !== null) ordered = known.map((k) => members[k] as ScannedMember);
    else {
      ordered = members.slice().sort(surrogates ? byKey : byKeyUnits);
      // Equal keys that were not neighbours in the document are neighbours now.
      for (let k = 1; k < ordered.length; k++) if ((ordered[k - 1] as ScannedMember).key === (ordered[k] as ScannedMember).key) return GIVE_UP;
      rememberOrder(members, ordered);
    }
  }
  rewrites++;
  let out = '{';
  for (let k = 0; k < ordered.length; k++) out += k === 0 ? memberText(ordered[k] as ScannedMember) : `,${memberText(ordered[k] as ScannedMember)}`;
  rewritten = `${out}}`;
  return REWRITTEN;
}

/**
 * The last few key sequences that needed sorting, each with its sorted order (indexes into the
 * sequence): documents of one kind (receipts) repeat the same keys in the same order, so one sort
 * serves them all. A sequence is reused only when every key is equal, so the order is the one a
 * sort would give (and has no duplicates: a sequence with one is never remembered).
 */
const orders: { readonly keys: readonly string[]; readonly order: readonly number[] }[] = [];
const ORDERS_KEPT = 8;
let nextOrder = 0;

function knownOrder(members: readonly ScannedMember[]): readonly number[] | null {
  next: for (const o of orders) {
    if (o.keys.length !== members.length) continue;
    for (let k = 0; k < members.length; k++) if (o.keys[k] !== (members[k] as ScannedMember).key) continue next;
    return o.order;
  }
  return null;
}

function rememberOrder(members: readonly ScannedMember[], sorted: readonly ScannedMember[]): void {
  const index = new Map(members.map((m, k) => [m, k]));
  orders[nextOrder] = { keys: members.map((m) => m.key), order: sorted.map((m) => index.get(m) as number) };
  nextOrder = (nextOrder + 1) % ORDERS_KEPT;
}

/** Passes the array at `pos` (a rewrite when an item is rewritten or whitespace is dropped). */
function scanArray(depth: number): number {
  if (depth >= 512) return GIVE_UP;
  const before = rewrites;
  pos++;
  const items: string[] = [];
  skipWs();
  if (src.charCodeAt(pos) === 0x5d) pos++;
  else {
    for (;;) {
      skipWs();
      const vs = pos;
      const found = scanValue(depth + 1);
      if (found === GIVE_UP) return GIVE_UP;
      items.push(found === CLEAN ? src.slice(vs, pos) : rewritten);
      skipWs();
      const c = src.charCodeAt(pos);
      pos++;
      if (c === 0x2c) continue;
      if (c === 0x5d) break;
      return GIVE_UP;
    }
  }
  if (rewrites === before) return CLEAN;
  rewrites++;
  rewritten = `[${items.join(',')}]`;
  return REWRITTEN;
}

/** A value from its canonical text (which the scan has checked), as {@link parseJson} gives it. */
function fieldValue(text: string): JsonValue {
  const c = text.charCodeAt(0);
  if (c === 0x22 && !text.includes('\\')) return text.slice(1, -1);
  if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
    const n = Number(text);
    return Number.isSafeInteger(n) ? n : BigInt(text);
  }
  if (text === 'null') return null;
  if (text === 'true') return true;
  if (text === 'false') return false;
  return parseJson(text);
}
