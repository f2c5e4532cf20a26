/**
 * The canonical text of a JSON document given as text, read in one pass over its characters
 * without building the value: the fast path for hashing stored documents (receipts), which the
 * kernel writes with canonical tokens but keys in the reference's order.
 *
 * {@link canonicalizeJsonText} sorts the keys and drops whitespace itself, and leaves everything
 * else to the full path, `canonicalJson(parseJson(text))`: any text the full parse refuses, and any
 * token spelled otherwise than the canonical form spells it. Whenever it gives a text, the full
 * path gives the same text.
 *
 * @module
 */
import { compareCodePoints, MAX_INTEGER_DIGITS, parseJson, type JsonObject, type JsonValue } from './canonical.js';

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

// The reader's state, module-wide so that a document costs no closures. A read calls nothing
// that could start another read, so reads never interleave; each read clears what it held.
let src = '';
let pos = 0;
/** Bumped whenever a value's canonical text is not its own span of `src` (whitespace dropped, members sorted). */
let rewrites = 0;
/** The canonical text of the last container passed, when it was rewritten ({@link REWRITTEN}). */
let rewritten = '';
/** What a pass found: the value's canonical text is its own span of `src`, or is {@link rewritten}, or the pass gives up. */
const CLEAN = 0;
const REWRITTEN = 1;
const GIVE_UP = -1;
const NO_FIELDS: ReadonlySet<string> = new Set();

// The members (and array items) of the containers being read, as a stack of parallel arrays: a
// container owns the slots from where the stack stood when it started, and frees them when done.
let top = 0;
let highWater = 0;
/** Where the key's literal starts (at its quote) and ends (after its quote). */
const keyStart: number[] = [];
const keyEnd: number[] = [];
/** Where the value starts and ends. */
const valueStart: number[] = [];
const valueEnd: number[] = [];
/** {@link ESCAPED_KEY}, {@link SURROGATE_KEY}, {@link MEMBER_CLEAN}, {@link PLAIN_STRING_VALUE}. */
const slotFlags: number[] = [];
/** The value's canonical text when it was rewritten, else null (it is `src` from valueStart to valueEnd). */
const valueText: (string | null)[] = [];
const ESCAPED_KEY = 1;
const SURROGATE_KEY = 2;
/** The member's canonical `"key":value` is its own span of `src`. */
const MEMBER_CLEAN = 4;
/** The value is a string without an escape: its characters are `src` between its quotes. */
const PLAIN_STRING_VALUE = 8;

/**
 * The canonical text of the JSON document `text`, and the values of the root object's `fields`.
 *
 * Returns `null` whenever this pass does not settle the document: anything {@link parseJson}
 * refuses (invalid JSON, a float, `-0`, a duplicate key, a lone surrogate, an integer over
 * {@link MAX_INTEGER_DIGITS} digits, nesting over 512), and anything it accepts but spelled
 * otherwise than the canonical form spells it (a number such as `1e2` or `1.0`, an escape such as
 * `\u0041` or `\/`). The caller then takes the full path, `canonicalJson(parseJson(text))`, which
 * gives the same text or the refusal it has always given. Keys out of order are sorted and
 * whitespace between tokens is dropped here, as the full path does.
 */
export function canonicalizeJsonText(text: string, options: CanonicalizeTextOptions = {}): CanonicalJsonText | null {
  if (typeof text !== 'string') return null;
  src = text;
  pos = 0;
  rewrites = 0;
  special = -1;
  top = 0;
  highWater = 0;
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
    valueText.fill(null, 0, highWater);
  }
}

/** Passes whitespace; any it passes is dropped from the canonical text (a rewrite). */
function skipWs(): void {
  // Every token starts above U+0020: most calls end here.
  if (src.charCodeAt(pos) > 0x20) return;
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

/** Characters a string may hold only through the slow walk: a backslash, a control character, a surrogate. */
const SPECIAL = /[\\\u0000-\u001f\ud800-\udfff]/g;
/** The position of the first {@link SPECIAL} character at or after the last search's start (`src.length`: none). */
let special = -1;

/** The position of the first {@link SPECIAL} character at or after `i`: one search serves every string before it. */
function nextSpecial(i: number): number {
  if (special >= i) return special;
  SPECIAL.lastIndex = i;
  special = SPECIAL.test(src) ? SPECIAL.lastIndex - 1 : src.length;
  return special;
}

/**
 * Passes the string literal at `pos` if it is spelled exactly as `JSON.stringify` spells its
 * value (raw characters; only `\"`, `\\`, `\b\f\n\r\t` and lowercase `\u00xx` for the other
 * control characters) and that value has no lone surrogate. Returns {@link ESCAPED_KEY} when it
 * holds an escape, {@link SURROGATE_KEY} when it holds a surrogate pair, 0 when neither, and -1
 * (`pos` unmoved) when the pass gives up.
 */
function scanString(): number {
  const quote = src.indexOf('"', pos + 1);
  if (quote < 0) return -1;
  // Most strings hold no special character: the first quote closes them.
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
      flags |= ESCAPED_KEY;
      continue;
    }
    // A high surrogate followed by a low one passes; a lone one, a raw control character or
    // the end of the text (NaN) gives up.
    if (!(c >= 0xd800 && c <= 0xdbff)) return -1;
    const d = src.charCodeAt(i + 1);
    if (!(d >= 0xdc00 && d <= 0xdfff)) return -1;
    flags |= SURROGATE_KEY;
    i += 2;
  }
  pos = i + 1;
  return flags;
}

/** Passes an integer spelled canonically (no `-0`, no leading zero, no fraction or exponent). */
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

/** The key of the member in slot `s`, as {@link parseJson} reads it. */
function keyOf(s: number): string {
  const ks = keyStart[s] as number;
  const ke = keyEnd[s] as number;
  // A canonically spelled literal is exactly what JSON.parse reads back, without loss.
  return ((slotFlags[s] as number) & ESCAPED_KEY) === 0 ? src.slice(ks + 1, ke - 1) : (JSON.parse(src.slice(ks, ke)) as string);
}

/** {@link compareCodePoints} of the keys in slots `a` and `b`, read in place when neither holds an escape. */
function compareKeys(a: number, b: number): number {
  if ((((slotFlags[a] as number) | (slotFlags[b] as number)) & ESCAPED_KEY) !== 0) return compareCodePoints(keyOf(a), keyOf(b));
  let i = (keyStart[a] as number) + 1;
  let j = (keyStart[b] as number) + 1;
  const ie = (keyEnd[a] as number) - 1;
  const je = (keyEnd[b] as number) - 1;
  for (; i < ie && j < je; i++, j++) {
    const x = src.charCodeAt(i);
    const y = src.charCodeAt(j);
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
  return ie - i - (je - j);
}

/** A key sequence seen before, with its members' canonical order (indexes into the sequence). */
interface KnownKeys {
  readonly keys: readonly string[];
  readonly order: readonly number[];
  /** Whether the sequence is already in canonical order. */
  readonly sorted: boolean;
  /** The last `fields` set asked of this sequence, and the indexes of its keys in the sequence. */
  wantedBy: ReadonlySet<string> | null;
  wanted: readonly number[];
}

/**
 * The last few key sequences read, each with its sorted order: documents of one kind (receipts)
 * repeat the same keys in the same order, so one sort serves them all. A sequence is reused only
 * when every key is equal, so its order is the one a sort would give; a sequence with a
 * duplicate key is never kept.
 */
const known: KnownKeys[] = [];
const KNOWN_KEPT = 8;
let nextKnown = 0;

/** The known sequence that the members in slots `base`…`end - 1` repeat, or null. */
function findKnown(base: number, end: number): KnownKeys | null {
  next: for (const k of known) {
    if (k.keys.length !== end - base) continue;
    for (let s = base; s < end; s++) {
      const key = k.keys[s - base] as string;
      if (((slotFlags[s] as number) & ESCAPED_KEY) !== 0) {
        if (keyOf(s) !== key) continue next;
      } else {
        const ks = (keyStart[s] as number) + 1;
        const n = key.length;
        if ((keyEnd[s] as number) - 1 - ks !== n) continue next;
        for (let c = 0; c < n; c++) if (src.charCodeAt(ks + c) !== key.charCodeAt(c)) continue next;
      }
    }
    return k;
  }
  return null;
}

/**
 * Whether the members in slots `base`…`end - 1` are in canonical order, compared in place;
 * GIVE_UP when two neighbours have the same key (which the full parse refuses).
 */
function inOrder(base: number, end: number): boolean | typeof GIVE_UP {
  let sorted = true;
  for (let s = base + 1; s < end; s++) {
    const order = compareKeys(s - 1, s);
    if (order === 0) return GIVE_UP;
    if (order > 0) sorted = false;
  }
  return sorted;
}

/** Sorts the members in slots `base`…`end - 1` and remembers the sequence; null on a duplicate key. */
function sortKeys(base: number, end: number): KnownKeys | null {
  const keys: string[] = [];
  for (let s = base; s < end; s++) keys.push(keyOf(s));
  const order = keys.map((_, k) => k).sort((a, b) => compareCodePoints(keys[a] as string, keys[b] as string));
  // Equal keys that were not neighbours in the document are neighbours now.
  for (let k = 1; k < order.length; k++) if (keys[order[k - 1] as number] === keys[order[k] as number]) return null;
  const seen: KnownKeys = { keys, order, sorted: order.every((o, k) => o === k), wantedBy: null, wanted: [] };
  known[nextKnown] = seen;
  nextKnown = (nextKnown + 1) % KNOWN_KEPT;
  return seen;
}

/** The indexes in `seen` of the keys in `want`. */
function wantedIn(seen: KnownKeys, want: ReadonlySet<string>): readonly number[] {
  if (seen.wantedBy !== want) {
    seen.wanted = seen.keys.flatMap((key, k) => (want.has(key) ? [k] : []));
    seen.wantedBy = want;
  }
  return seen.wanted;
}

/** The canonical `"key":value` of the member in slot `s`. */
function memberText(s: number): string {
  const ks = keyStart[s] as number;
  if (((slotFlags[s] as number) & MEMBER_CLEAN) !== 0) return src.slice(ks, valueEnd[s] as number);
  return `${src.slice(ks, keyEnd[s] as number)}:${valueText[s] ?? src.slice(valueStart[s] as number, valueEnd[s] as number)}`;
}

/**
 * Passes the object at `pos`, its members sorted by key (a rewrite unless they already are);
 * the values of the keys in `want` go into `fields`.
 */
function scanObject(depth: number, want: ReadonlySet<string>, fields: JsonObject | null): number {
  if (depth >= 512) return GIVE_UP;
  const before = rewrites;
  const base = top;
  pos++;
  skipWs();
  if (src.charCodeAt(pos) === 0x7d) pos++;
  else {
    for (;;) {
      skipWs();
      if (src.charCodeAt(pos) !== 0x22) return GIVE_UP;
      const memberBefore = rewrites;
      const ks = pos;
      const flags = scanString();
      if (flags < 0) return GIVE_UP;
      const ke = pos;
      skipWs();
      if (src.charCodeAt(pos) !== 0x3a) return GIVE_UP;
      pos++;
      skipWs();
      const vs = pos;
      const valueBefore = rewrites;
      // A nested container takes the slots from `top` and frees them before it returns.
      let valueFlags = 0;
      if (src.charCodeAt(pos) === 0x22) {
        const stringFlags = scanString();
        if (stringFlags < 0) return GIVE_UP;
        if ((stringFlags & ESCAPED_KEY) === 0) valueFlags = PLAIN_STRING_VALUE;
      } else if (scanValue(depth + 1) === GIVE_UP) return GIVE_UP;
      const s = top++;
      if (top > highWater) highWater = top;
      keyStart[s] = ks;
      keyEnd[s] = ke;
      valueStart[s] = vs;
      valueEnd[s] = pos;
      // A value is rewritten only when its span lost whitespace or holds a rewritten container.
      valueText[s] = rewrites === valueBefore ? null : rewritten;
      slotFlags[s] = flags | valueFlags | (rewrites === memberBefore ? MEMBER_CLEAN : 0);
      skipWs();
      const c = src.charCodeAt(pos);
      pos++;
      if (c === 0x2c) continue;
      if (c === 0x7d) break;
      return GIVE_UP;
    }
  }
  const end = top;
  // A known key sequence gives the order (and the keys) without comparing any; an unknown one
  // is compared in place, and its keys are read out only when it needs sorting or its fields
  // are asked for (then it becomes known).
  let seen: KnownKeys | null = end - base > 1 || fields !== null ? findKnown(base, end) : null;
  let sorted: boolean;
  if (seen !== null) sorted = seen.sorted;
  else {
    const checked = end - base > 1 ? inOrder(base, end) : true;
    if (checked === GIVE_UP) return GIVE_UP;
    sorted = checked;
    if (!sorted || (fields !== null && want.size > 0)) {
      seen = sortKeys(base, end);
      if (seen === null) return GIVE_UP;
    }
  }
  if (fields !== null && seen !== null && want.size > 0) {
    for (const k of wantedIn(seen, want)) fields[seen.keys[k] as string] = fieldValue(base + k);
  }
  let result = CLEAN;
  if (!sorted || rewrites !== before) {
    const parts: string[] = [];
    for (let k = 0; k < end - base; k++) parts.push(memberText(base + (sorted ? k : ((seen as KnownKeys).order[k] as number))));
    rewritten = `{${parts.join(',')}}`;
    rewrites++;
    result = REWRITTEN;
  }
  top = base;
  return result;
}

/** Passes the array at `pos` (a rewrite when an item is rewritten or whitespace is dropped). */
function scanArray(depth: number): number {
  if (depth >= 512) return GIVE_UP;
  const before = rewrites;
  const base = top;
  pos++;
  skipWs();
  if (src.charCodeAt(pos) === 0x5d) pos++;
  else {
    for (;;) {
      skipWs();
      const vs = pos;
      const found = scanValue(depth + 1);
      if (found === GIVE_UP) return GIVE_UP;
      const s = top++;
      if (top > highWater) highWater = top;
      valueStart[s] = vs;
      valueEnd[s] = pos;
      valueText[s] = found === CLEAN ? null : rewritten;
      skipWs();
      const c = src.charCodeAt(pos);
      pos++;
      if (c === 0x2c) continue;
      if (c === 0x5d) break;
      return GIVE_UP;
    }
  }
  let result = CLEAN;
  if (rewrites !== before) {
    let out = '[';
    for (let s = base; s < top; s++) out += `${s === base ? '' : ','}${valueText[s] ?? src.slice(valueStart[s] as number, valueEnd[s] as number)}`;
    rewritten = `${out}]`;
    rewrites++;
    result = REWRITTEN;
  }
  top = base;
  return result;
}

/** The value of the member in slot `s` (which the pass has checked), as {@link parseJson} gives it. */
function fieldValue(s: number): JsonValue {
  const vs = valueStart[s] as number;
  const ve = valueEnd[s] as number;
  if (((slotFlags[s] as number) & PLAIN_STRING_VALUE) !== 0) return src.slice(vs + 1, ve - 1);
  const text = valueText[s] ?? src.slice(vs, ve);
  const c = text.charCodeAt(0);
  if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
    const n = Number(text);
    return Number.isSafeInteger(n) ? n : BigInt(text);
  }
  if (text === 'null') return null;
  if (text === 'true') return true;
  if (text === 'false') return false;
  return parseJson(text);
}
