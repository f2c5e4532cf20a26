/**
 * The canonical form of a JSON document given as text, read in one pass over its characters
 * without building the value: the fast path for hashing stored documents (receipts), which the
 * kernel writes with canonical tokens but keys in the reference's order.
 *
 * The pass sorts keys and drops whitespace itself, and leaves everything else to the full path,
 * `canonicalJson(parseJson(text))`: any text the full parse refuses, and any token spelled
 * otherwise than the canonical form spells it. Whenever it gives a result, the full path gives
 * the same text (and so the same hash).
 *
 * @module
 */
import { codeUnitOrder, compareCodePoints, MAX_INTEGER_DIGITS, parseJson, type JsonValue } from './canonical.js';
import { sha256Tagged } from './hash.js';

/** Options for {@link canonicalizeJsonText} and {@link hashJsonText}. */
export interface CanonicalizeTextOptions {
  /**
   * Keys of the root object whose values the caller wants (see {@link CanonicalJsonText.fields}).
   * The list is remembered with the key sequences it was asked of: pass the same array each time.
   */
  readonly fields?: readonly string[];
}

/**
 * The values of the asked-for fields of a root object, in the order they were asked for, as
 * {@link parseJson} gives them; `undefined` where the object has no such key.
 */
export type FieldValues = readonly (JsonValue | undefined)[];

/** What {@link canonicalizeJsonText} gives for a document it could read in one pass. */
export interface CanonicalJsonText {
  /** The canonical text: the same string as `canonicalJson(parseJson(text))`. */
  readonly canonical: string;
  /** When the root is an object, the values of the asked-for {@link CanonicalizeTextOptions.fields}; `null` when it is not. */
  readonly fields: FieldValues | null;
}

/** What {@link hashJsonText} gives for a document it could read in one pass. */
export interface HashedJsonText {
  /** `sha256:` and the hex SHA-256 of the canonical UTF-8 bytes: the same as `hashDocument(parseJson(text))`. */
  readonly hash: string;
  /** As {@link CanonicalJsonText.fields}. */
  readonly fields: FieldValues | null;
}

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
  try {
    const root = read(text, options.fields ?? NO_FIELDS);
    if (root === null) return null;
    return { canonical: root.rewritten ? textOf(root.from, root.to) : src.slice(root.from, root.to), fields: root.fields };
  } finally {
    release();
  }
}

/**
 * The hash of the JSON document `text` as `hashDocument(parseJson(text))` computes it, and the
 * values of the root object's `fields`; `null` exactly when {@link canonicalizeJsonText} gives
 * `null` (the caller then takes the full path). The canonical bytes are assembled from the
 * text's own UTF-8 bytes, without building the canonical string.
 */
export function hashJsonText(text: string, options: CanonicalizeTextOptions = {}): HashedJsonText | null {
  try {
    const root = read(text, options.fields ?? NO_FIELDS);
    if (root === null) return null;
    return { hash: sha256Tagged(bytesOf(root)), fields: root.fields };
  } finally {
    release();
  }
}

// The reader's state, module-wide so that a document costs no closures. A read calls nothing
// that could start another read, so reads never interleave; each read clears what it held.
let src = '';
let pos = 0;
/** Bumped whenever a value's canonical form is not its own span of `src` (whitespace dropped, members sorted). */
let rewrites = 0;
/** What passing a value found: its canonical form is its own span of `src`, or was rewritten, or the pass gives up. */
const CLEAN = 0;
const REWRITTEN = 1;
const GIVE_UP = -1;
const NO_FIELDS: readonly string[] = [];

// A rewritten container's canonical form, as a list of pieces: pairs (a, b) that are either the
// span src[a, b) (a ≥ 0), or, for a nested container rewritten too, a reference (−1 − from, to)
// to its own list, pieces[from, to). A container writes its whole list when it ends, so each
// list is one run of the array.
const pieces: number[] = [];
let piecesTop = 0;
/** Where the list being written starts (so that touching spans merge only within it). */
let listStart = 0;
/** The list of the container that was rewritten last. */
let rewrittenFrom = 0;
let rewrittenTo = 0;

function piece(a: number, b: number): void {
  // A span that starts where the last one ends extends it.
  if (piecesTop > listStart && pieces[piecesTop - 1] === a && (pieces[piecesTop - 2] as number) >= 0) {
    pieces[piecesTop - 1] = b;
    return;
  }
  pieces[piecesTop++] = a;
  pieces[piecesTop++] = b;
}

// The members (and array items) of the containers being read, as a stack of parallel arrays: a
// container owns the slots from where the stack stood when it started, and frees them when done.
let top = 0;
/** Where the key's literal starts (at its quote) and ends (after its quote), and where its `:` is. */
const keyStart: number[] = [];
const keyEnd: number[] = [];
const colonAt: number[] = [];
/** Where the value starts and ends in `src`. */
const valueStart: number[] = [];
const valueEnd: number[] = [];
/** A rewritten value's list of pieces. */
const valueFrom: number[] = [];
const valueTo: number[] = [];
/** {@link ESCAPED_KEY}, {@link SURROGATE_KEY}, {@link MEMBER_CLEAN}, {@link PLAIN_STRING_VALUE}, {@link VALUE_REWRITTEN}. */
const slotFlags: number[] = [];
const ESCAPED_KEY = 1;
const SURROGATE_KEY = 2;
/** The member's canonical `"key":value` is its own span of `src`. */
const MEMBER_CLEAN = 4;
/** The value is a string without an escape: its characters are `src` between its quotes. */
const PLAIN_STRING_VALUE = 8;
/** The value is a container whose canonical form is its list of pieces. */
const VALUE_REWRITTEN = 16;

/** The root, once read: its span, or (rewritten) its list of pieces. */
interface Root {
  readonly rewritten: boolean;
  readonly from: number;
  readonly to: number;
  readonly fields: FieldValues | null;
}

function read(text: string, want: readonly string[]): Root | null {
  if (typeof text !== 'string') return null;
  src = text;
  pos = 0;
  rewrites = 0;
  special = -1;
  top = 0;
  piecesTop = 0;
  listStart = 0;
  skipWs();
  const start = pos;
  let fields: (JsonValue | undefined)[] | null = null;
  let found: number;
  if (src.charCodeAt(pos) === 0x7b) {
    fields = [];
    for (let k = 0; k < want.length; k++) fields.push(undefined);
    found = scanObject(0, want, fields);
  } else found = scanValue(0);
  if (found === GIVE_UP) return null;
  const end = pos;
  skipWs();
  if (pos !== src.length) return null;
  return found === CLEAN ? { rewritten: false, from: start, to: end, fields } : { rewritten: true, from: rewrittenFrom, to: rewrittenTo, fields };
}

/** Slots and pieces beyond this many are not kept for the next read (one huge document should not stay in memory). */
const KEPT_SLOTS = 1 << 16;

function release(): void {
  src = '';
  if (pieces.length > 2 * KEPT_SLOTS) pieces.length = 0;
  if (keyStart.length > KEPT_SLOTS) for (const a of [keyStart, keyEnd, colonAt, valueStart, valueEnd, valueFrom, valueTo, slotFlags]) a.length = 0;
}

/** The text of the list of pieces `pieces[from, to)`. */
function textOf(from: number, to: number): string {
  const parts: string[] = [];
  const collect = (f: number, t: number): void => {
    for (let p = f; p < t; p += 2) {
      const a = pieces[p] as number;
      const b = pieces[p + 1] as number;
      if (a >= 0) parts.push(src.slice(a, b));
      else collect(-1 - a, b);
    }
  };
  collect(from, to);
  return parts.join('');
}

const utf8 = new TextEncoder();
/** Kept between reads: the text's UTF-8 bytes, then the canonical bytes assembled from them. */
let buffer = new Uint8Array(1 << 16);
/** A larger buffer than this is not kept for the next read. */
const KEPT_BUFFER = 1 << 22;

/** The canonical UTF-8 bytes of the root (a view valid until the next read). */
function bytesOf(root: Root): Uint8Array {
  const n = src.length;
  let buf = buffer;
  if (buf.length < 2 * n) {
    buf = new Uint8Array(2 * n);
    if (buf.length <= KEPT_BUFFER) buffer = buf;
  }
  const { read: taken, written } = utf8.encodeInto(src, buf);
  // Only when every character is one byte do the text's positions point at its bytes.
  if (taken !== n || written !== n) return utf8.encode(root.rewritten ? textOf(root.from, root.to) : src.slice(root.from, root.to));
  if (!root.rewritten) return buf.subarray(root.from, root.to);
  const end = copyPieces(buf, root.from, root.to, n);
  return buf.subarray(n, end);
}

/** Copies the bytes of the list `pieces[from, to)` to `at` (after the text's own bytes); returns where it ends. */
function copyPieces(buf: Uint8Array, from: number, to: number, at: number): number {
  let o = at;
  for (let p = from; p < to; p += 2) {
    const a = pieces[p] as number;
    const b = pieces[p + 1] as number;
    if (a < 0) o = copyPieces(buf, -1 - a, b, o);
    else if (b - a > 32) {
      buf.copyWithin(o, a, b);
      o += b - a;
    } else for (let i = a; i < b; i++) buf[o++] = buf[i] as number; // a call costs more than a short copy
  }
  return o;
}

/** Passes whitespace; any it passes is dropped from the canonical form (a rewrite). */
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
    if (x !== y) return codeUnitOrder(x, y);
  }
  return ie - i - (je - j);
}

/** A key sequence seen before, with its members' canonical order (indexes into the sequence). */
interface KnownKeys {
  readonly keys: readonly string[];
  readonly order: readonly number[];
  /** Whether the sequence is already in canonical order. */
  readonly sorted: boolean;
  /** The last `fields` list asked of this sequence, and pairs (index in the sequence, index in the list) of its keys. */
  wantedBy: readonly string[] | null;
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

/** Pairs (index in `seen`, index in `want`) of the keys in both. */
function wantedIn(seen: KnownKeys, want: readonly string[]): readonly number[] {
  if (seen.wantedBy !== want) {
    const wanted: number[] = [];
    seen.keys.forEach((key, k) => want.forEach((name, w) => (name === key ? wanted.push(k, w) : 0)));
    seen.wanted = wanted;
    seen.wantedBy = want;
  }
  return seen.wanted;
}

/** Adds the canonical form of the value in slot `s` to the list being written. */
function valuePieces(s: number): void {
  if (((slotFlags[s] as number) & VALUE_REWRITTEN) !== 0) {
    pieces[piecesTop++] = -1 - (valueFrom[s] as number);
    pieces[piecesTop++] = valueTo[s] as number;
  } else piece(valueStart[s] as number, valueEnd[s] as number);
}

/** Records the value just passed (from `vs` to `pos`) in slot `s`; a rewritten one with its list. */
function recordValue(s: number, vs: number, rewritten: boolean): void {
  valueStart[s] = vs;
  valueEnd[s] = pos;
  if (rewritten) {
    valueFrom[s] = rewrittenFrom;
    valueTo[s] = rewrittenTo;
  }
}

/**
 * Passes the object at `pos`, its members sorted by key (a rewrite unless they already are);
 * the values of the keys in `want` go into `fields` (at the key's index in `want`).
 */
function scanObject(depth: number, want: readonly string[], fields: (JsonValue | undefined)[] | null): number {
  if (depth >= 512) return GIVE_UP;
  const before = rewrites;
  const base = top;
  const start = pos;
  let comma = -1;
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
      const colon = pos++;
      skipWs();
      const vs = pos;
      const valueBefore = rewrites;
      let valueFlags = 0;
      if (src.charCodeAt(pos) === 0x22) {
        const stringFlags = scanString();
        if (stringFlags < 0) return GIVE_UP;
        if ((stringFlags & ESCAPED_KEY) === 0) valueFlags = PLAIN_STRING_VALUE;
        // A nested container takes the slots from `top` and frees them before it returns.
      } else if (scanValue(depth + 1) === GIVE_UP) return GIVE_UP;
      const s = top++;
      keyStart[s] = ks;
      keyEnd[s] = ke;
      colonAt[s] = colon;
      // A value is rewritten only when it is a container that was (whitespace inside, keys sorted).
      const rewritten = rewrites !== valueBefore;
      recordValue(s, vs, rewritten);
      slotFlags[s] = flags | valueFlags | (rewritten ? VALUE_REWRITTEN : 0) | (rewrites === memberBefore ? MEMBER_CLEAN : 0);
      skipWs();
      const c = src.charCodeAt(pos);
      if (c === 0x2c) {
        if (comma < 0) comma = pos;
        pos++;
        continue;
      }
      pos++;
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
    if (!sorted || (fields !== null && want.length > 0)) {
      seen = sortKeys(base, end);
      if (seen === null) return GIVE_UP;
    }
  }
  if (fields !== null && seen !== null && want.length > 0) {
    const wanted = wantedIn(seen, want);
    for (let w = 0; w < wanted.length; w += 2) fields[wanted[w + 1] as number] = fieldValue(base + (wanted[w] as number));
  }
  top = base;
  if (sorted && rewrites === before) return CLEAN;
  // Written from the text's own characters: its braces, one of its commas, its members.
  listStart = piecesTop;
  piece(start, start + 1);
  for (let k = 0; k < end - base; k++) {
    const s = base + (sorted ? k : ((seen as KnownKeys).order[k] as number));
    if (k > 0) piece(comma, comma + 1);
    const flags = slotFlags[s] as number;
    if ((flags & MEMBER_CLEAN) !== 0) piece(keyStart[s] as number, valueEnd[s] as number);
    else {
      piece(keyStart[s] as number, keyEnd[s] as number);
      piece(colonAt[s] as number, (colonAt[s] as number) + 1);
      valuePieces(s);
    }
  }
  piece(pos - 1, pos);
  rewrittenFrom = listStart;
  rewrittenTo = piecesTop;
  rewrites++;
  return REWRITTEN;
}

/** Passes the array at `pos` (a rewrite when an item is rewritten or whitespace is dropped). */
function scanArray(depth: number): number {
  if (depth >= 512) return GIVE_UP;
  const before = rewrites;
  const base = top;
  const start = pos;
  let comma = -1;
  pos++;
  skipWs();
  if (src.charCodeAt(pos) === 0x5d) pos++;
  else {
    for (;;) {
      skipWs();
      const vs = pos;
      const valueBefore = rewrites;
      if (scanValue(depth + 1) === GIVE_UP) return GIVE_UP;
      const s = top++;
      const rewritten = rewrites !== valueBefore;
      recordValue(s, vs, rewritten);
      slotFlags[s] = rewritten ? VALUE_REWRITTEN : 0;
      skipWs();
      const c = src.charCodeAt(pos);
      if (c === 0x2c) {
        if (comma < 0) comma = pos;
        pos++;
        continue;
      }
      pos++;
      if (c === 0x5d) break;
      return GIVE_UP;
    }
  }
  const end = top;
  top = base;
  if (rewrites === before) return CLEAN;
  listStart = piecesTop;
  piece(start, start + 1);
  for (let s = base; s < end; s++) {
    if (s > base) piece(comma, comma + 1);
    valuePieces(s);
  }
  piece(pos - 1, pos);
  rewrittenFrom = listStart;
  rewrittenTo = piecesTop;
  rewrites++;
  return REWRITTEN;
}

/** The value of the member in slot `s` (which the pass has checked), as {@link parseJson} gives it. */
function fieldValue(s: number): JsonValue {
  const vs = valueStart[s] as number;
  const ve = valueEnd[s] as number;
  const flags = slotFlags[s] as number;
  if ((flags & PLAIN_STRING_VALUE) !== 0) return src.slice(vs + 1, ve - 1);
  const text = (flags & VALUE_REWRITTEN) !== 0 ? textOf(valueFrom[s] as number, valueTo[s] as number) : src.slice(vs, ve);
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
