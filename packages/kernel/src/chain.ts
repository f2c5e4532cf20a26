/**
 * Verifying the receipt chain (spec 03 §5.3): a pure walk over receipt rows as stored and the
 * chain head row, reporting each break by one of seven names at the `seq` where it was found.
 *
 * The walk hashes what was stored: each row's `json` is parsed with the strict {@link parseJson}
 * and hashed with {@link hashDocument}, never re-rendered, so documents of any receipt schema
 * (v1–v3) written by the original verify as they were written. A document spelled with canonical
 * tokens (as every store writes it; only its key order and whitespace differ from the canonical
 * form) is hashed by {@link hashJsonText} in one pass over its text instead, which gives the same
 * hash without building the document; any other text takes the full parse.
 *
 * Only the `json` column is hashed; the columns beside it that repeat one of its fields (the
 * {@link DUPLICATED_COLUMNS}) are compared with that field, so an edited `result` or `effect_key`
 * column is a `column_mismatch` finding (beside the verdict), and {@link receiptView} gives views those fields as the hashed
 * document holds them.
 *
 * @module
 */
import { isPlainObject, jsonEquals, parseJson, type JsonObject, type JsonValue } from './canonical.js';
import { hashJsonText } from './canonical-text.js';
import { GENESIS_HASH, hashDocument } from './hash.js';
import type { ChainHead, ReceiptRow } from './model.js';
import { PREDICATE_FIELDS, unreadableReceipt } from './receipt-readable.js';
import { parseTime } from './time.js';
import { quotedForMessage } from './visible.js';

/** The names a chain break can have: the original's six (spec 03 §5.3), no more. */
export type ChainBreakName = 'content_altered' | 'hash_missing' | 'link_broken' | 'missing' | 'head_mismatch' | 'unchained';

/**
 * The `receipts` columns that repeat a field of the stored document, and that field: the
 * document is what is hashed, so the column must say the same (`ts` is `finished_at`, the same
 * instant in either timestamp format).
 */
export const DUPLICATED_COLUMNS: Readonly<Record<'receipt_id' | 'action_id' | 'effect_key' | 'result' | 'ts' | 'seq' | 'prev_hash', string>> = Object.freeze({
  receipt_id: 'receipt_id',
  action_id: 'action_id',
  effect_key: 'effect_key',
  result: 'result',
  ts: 'finished_at',
  seq: 'seq',
  prev_hash: 'prev_hash',
});
type DuplicatedColumn = keyof typeof DUPLICATED_COLUMNS;
const DUPLICATED = Object.keys(DUPLICATED_COLUMNS) as DuplicatedColumn[];

/** One break found by {@link verifyChain}. */
export interface ChainBreak {
  /** What is wrong. */
  readonly name: ChainBreakName;
  /** Where: the chain position, or `null` (unchained rows, no head row, a row without a usable `seq`). */
  readonly seq: number | null;
  /** A human-readable explanation. */
  readonly detail: string;
}

/**
 * A finding beside the chain's verdict: a column that repeats a field of the hashed document
 * (see {@link DUPLICATED_COLUMNS}) holds something else. Only `json` is hashed, so such a column
 * is never trusted and views show the document's field; the original does not compare these
 * columns, so they are reported apart and never change `ok` (two verifiers of one shared store
 * give one verdict).
 */
export interface ColumnFinding {
  readonly name: 'column_mismatch';
  /** The row's chain position. */
  readonly seq: number;
  readonly detail: string;
}

/** What {@link verifyChain} found. */
export interface ChainReport {
  /** `true` only when no break was found (the {@link ChainReport.column_findings} do not count). */
  readonly ok: boolean;
  /** Chained rows whose `seq` no break names. */
  readonly verified: number;
  /** Rows with a non-null `seq`. */
  readonly chained: number;
  /** Rows with a null `seq` (written before the chain existed). */
  readonly unchained: number;
  /** The head row's `seq`, or `null` when there is no head row. */
  readonly head_seq: number | null;
  /** The head row's `hash`, or `null` when there is no head row. */
  readonly head_hash: string | null;
  /** Every break, in walk order. */
  readonly breaks: readonly ChainBreak[];
  /** Columns that disagree with their row's hashed document, in walk order: shown, not part of the verdict. */
  readonly column_findings: readonly ColumnFinding[];
}

/** A row as the walk needs it; `seq` is `undefined` when the column held something unusable. */
interface Entry {
  readonly seq: number | null | undefined;
  readonly rawSeq: unknown;
  readonly json: unknown;
  readonly hash: unknown;
  /** The duplicated columns, in {@link DUPLICATED}'s order; `undefined` for a column the caller left off (not compared). */
  readonly columns: readonly unknown[];
}

/** Stands in for the hash of a row that could not be hashed: no JSON value equals it, so nothing links to it. */
const UNHASHABLE: unique symbol = Symbol('unhashable');

/** A value for a break's detail; never throws (a revoked Proxy, a function whose toString throws). */
function describe(v: unknown): string {
  if (typeof v === 'string') return quotedForMessage(v, 80);
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'function') return 'a function';
  if (v === null || typeof v !== 'object') return String(v);
  try {
    return Array.isArray(v) ? 'an array' : 'an object';
  } catch {
    return 'an object';
  }
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A `seq` column value as a position: `null`, a safe integer, or `undefined` for anything else. */
function position(v: unknown): number | null | undefined {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number') return Number.isSafeInteger(v) ? v : undefined;
  // Drivers may return BIGINT columns as bigint; accept those that are exact numbers.
  if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : undefined;
  return undefined;
}

/** Reads one row without trusting its shape: a row that cannot be read has no usable `seq`. */
function entry(row: unknown): Entry {
  try {
    if (typeof row !== 'object' || row === null) return { seq: undefined, rawSeq: row, json: undefined, hash: undefined, columns: [] };
    const r = row as Record<string, unknown>;
    const rawSeq = r['seq'];
    const columns = DUPLICATED.map((c) => r[c]);
    return { seq: position(rawSeq), rawSeq, json: r['json'], hash: r['hash'], columns };
  } catch (e) {
    return { seq: undefined, rawSeq: `an unreadable row (${message(e)})`, json: undefined, hash: undefined, columns: [] };
  }
}

/** Whether a column value says the same as the document's field (absent field = null). */
function sameAsField(column: DuplicatedColumn, value: unknown, field: JsonValue): boolean {
  if (column === 'seq') {
    // The column may come back as a bigint (BIGINT) or a number; the document holds a JSON integer.
    return (typeof value === 'number' || typeof value === 'bigint') && (typeof field === 'number' || typeof field === 'bigint')
      ? jsonEquals(value, field)
      : value === field;
  }
  if (column === 'ts' && typeof value === 'string' && typeof field === 'string' && value !== field) {
    // `ts` = `finished_at`; a store may write it in the column timestamp format (`+00:00`).
    try {
      return parseTime(value).getTime() === parseTime(field).getTime();
    } catch {
      return false;
    }
  }
  return value === field;
}

/** The document fields the duplicated columns repeat (`prev_hash` among them), in {@link DUPLICATED}'s order. */
const COLUMN_FIELDS: readonly string[] = DUPLICATED.map((c) => DUPLICATED_COLUMNS[c]);
/** What the walk reads of a document: {@link COLUMN_FIELDS}, then the fields of the original's read predicate. */
const READ_FIELDS: readonly string[] = Object.freeze([...COLUMN_FIELDS, ...PREDICATE_FIELDS]);
const PREV_HASH = DUPLICATED.indexOf('prev_hash');
/** The predicate's fields within {@link READ_FIELDS}. */
const predicateValues = (fields: Fields): Fields => (fields === null ? null : fields.slice(COLUMN_FIELDS.length));

/**
 * A document's {@link READ_FIELDS}, in that order (`undefined` for a field it does not have), or
 * null when the document is not an object (then it has none).
 */
type Fields = readonly (JsonValue | undefined)[] | null;

function fieldsOf(document: JsonValue): Fields {
  if (!isPlainObject(document)) return null;
  return READ_FIELDS.map((f) => (Object.prototype.hasOwnProperty.call(document, f) ? (document[f] as JsonValue) : undefined));
}

/**
 * The duplicated columns of a row that disagree with its parsed document. A field the document
 * does not have is not compared (an older or newer schema may lack it; a view shows it as null).
 */
function columnMismatches(columns: readonly unknown[], fields: Fields): DuplicatedColumn[] {
  if (fields === null) return [];
  const out: DuplicatedColumn[] = [];
  for (let i = 0; i < DUPLICATED.length; i++) {
    const value = columns[i];
    const field = fields[i];
    if (value === undefined || field === undefined) continue;
    const c = DUPLICATED[i] as DuplicatedColumn;
    if (!sameAsField(c, value, field)) out.push(c);
  }
  return out;
}

/**
 * Hashes the stored document, or explains why it cannot be hashed. Documents stored as the
 * kernel writes them take {@link hashJsonText}'s one pass (the canonical bytes are the same, so
 * is the hash; only the fields the walk reads are built); any other text takes the full parse
 * and rewrite, which refuses what it has always refused, with the same message.
 */
function recompute(json: unknown): { hash: string; fields: Fields } | { error: string } {
  if (typeof json !== 'string') return { error: `the json column is ${describe(json)}, not JSON text` };
  try {
    const fast = hashJsonText(json, { fields: READ_FIELDS });
    if (fast !== null) return fast;
  } catch {
    // Never expected; the full path below decides, as it does for every text the fast one leaves.
  }
  try {
    const document = parseJson(json, { what: 'receipt json' });
    return { hash: hashDocument(document, 'receipt'), fields: fieldsOf(document) };
  } catch (e) {
    return { error: message(e) };
  }
}

function readHead(head: unknown): { seq: number; hash: string } | string {
  if (head === null || head === undefined) return 'there is no chain head row';
  try {
    if (typeof head !== 'object') return `the chain head is ${describe(head)}, not a row`;
    const h = head as Record<string, unknown>;
    const seq = position(h['seq']);
    if (typeof seq !== 'number') return `the chain head's seq is ${describe(h['seq'])}, not an integer`;
    if (typeof h['hash'] !== 'string') return `the chain head's hash is ${describe(h['hash'])}, not a string`;
    return { seq, hash: h['hash'] };
  } catch (e) {
    return `the chain head cannot be read (${message(e)})`;
  }
}

// Module-private access to a verifier's row intake, for verifyChain (set in the class's static block).
let pushEntry: (v: ChainVerifier, e: Entry) => void;
let setListError: (v: ChainVerifier, detail: string) => void;

/**
 * Verifies the receipt chain: `rows` are the `receipts` rows as stored (any order; position comes
 * from the `seq` column, nulls first, ties kept in the given order) and `head` the
 * `receipt_chain(id = 1)` row, or `null` when there is none.
 *
 * The walk starts at `seq` 1 after {@link GENESIS_HASH} (or, given `options.checkpoint`, the
 * store's prune checkpoint, right after it) and carries forward each row's **recomputed** hash:
 * `missing` when a `seq` is skipped (then it resyncs), `content_altered` when the recomputed hash
 * differs from the stored one, the document cannot be parsed or canonicalised, or it is not a
 * receipt the original can read (spec 05 §2.5: a required key missing, a decision or result
 * outside its vocabulary, a time it cannot parse, an empty principal, `controls` not a list of
 * strings) — then the next row's link cannot hold either; `hash_missing` when there is no stored
 * hash, `link_broken` when the document's own `prev_hash` is not the previous recomputed hash,
 * `head_mismatch` when the head is not the last row's (`seq`, recomputed hash), and `unchained`
 * (listed first) for rows without `seq`, which are never a pass. These are the original's six
 * names and verdicts. A column that repeats a field of the parsed document (see
 * {@link DUPLICATED_COLUMNS}) and holds something else is a {@link ColumnFinding}, reported apart
 * in `column_findings`: only `json` is hashed, so such a column is never trusted. A row whose `seq`
 * column is not an integer (a string, a fraction, a number beyond 2^53) has no place in the chain:
 * it is reported as `content_altered` with `seq` null.
 *
 * Pure and total: it never throws and never loops beyond the rows given.
 */
export function verifyChain(
  rows: readonly ReceiptRow[],
  head: ChainHead | null,
  options: { readonly checkpoint?: { readonly seq: number; readonly hash: string } | null } = {},
): ChainReport {
  const checkpoint = options?.checkpoint ?? null;
  const verifier = new ChainVerifier(head, checkpoint === null ? {} : { after: checkpoint });
  let entries: Entry[] = [];
  try {
    if (!Array.isArray(rows)) setListError(verifier, `the receipt rows are ${describe(rows)}, not an array`);
    else for (const row of rows as readonly unknown[]) entries.push(entry(row));
  } catch (e) {
    entries = [];
    setListError(verifier, `the receipt rows cannot be read (${message(e)})`);
  }
  // Array#sort is stable, so equal positions keep the order they were given in.
  const chained = entries.filter((e): e is Entry & { seq: number } => typeof e.seq === 'number').sort((a, b) => a.seq - b.seq);
  for (const e of entries) if (typeof e.seq !== 'number') pushEntry(verifier, e);
  for (const e of chained) pushEntry(verifier, e);
  return verifier.finish();
}

/**
 * {@link verifyChain} in pages, for a chain too long to hold in memory: construct it with the head
 * row, {@link ChainVerifier.push} the rows page by page, then {@link ChainVerifier.finish}. Memory
 * is bounded by the breaks found, not by the rows.
 *
 * Rows with an integer `seq` must come in non-decreasing `seq` order across all pages (a store's
 * `chainPage` reads them so); rows without one (unchained, or a `seq` that is not an integer) may
 * come in any page. Given the same rows, the report is the one {@link verifyChain} gives for them
 * in that order. A chained row whose `seq` goes backwards throws a `RangeError`: the caller's
 * paging is wrong, and a report would be silently different.
 */
export class ChainVerifier {
  readonly #head: { seq: number; hash: string } | string;
  readonly #walkBreaks: ChainBreak[] = [];
  readonly #columnFindings: ColumnFinding[] = [];
  readonly #misplaced: ChainBreak[] = [];
  #listError: string | null = null;
  #unchained = 0;
  #chained = 0;
  #expectedPrev: string | typeof UNHASHABLE = GENESIS_HASH;
  #expectedSeq = 1;
  #lastSeq = 0;
  /** Every seq a break has named so far (bounded by the breaks). */
  readonly #named = new Set<number>();
  /** The run of rows sharing the current seq: counted verified once the run ends unnamed. */
  #runSeq: number | null = null;
  #runCount = 0;
  #verified = 0;
  /** Rows whose seq is the head's, so a head_mismatch naming it can take them back. */
  #headSeqRows = 0;
  #finished = false;

  /**
   * `head` is the `receipt_chain(id = 1)` row, or `null` when there is none. With `after`, the
   * rows pushed continue a chain already verified up to and including receipt `after.seq`, whose
   * hash is `after.hash`: the first row expected is `after.seq + 1` and must link to that hash,
   * and the report counts only the rows pushed (a caller that verified the start keeps its own
   * count; a head that names a row of the start is reported, but that row is the caller's to
   * take back). Without it the chain starts at seq 1 from the genesis hash. A store the original
   * pruned is verified this way from its prune checkpoint (`StateStore.pruneCheckpoint`): the
   * receipts up to it were deleted on purpose, and it holds the last one's seq and hash.
   */
  constructor(head: ChainHead | null, options: { after?: { seq: number; hash: string } } = {}) {
    this.#head = readHead(head);
    const after = options?.after;
    if (after !== undefined) {
      // Each field read once: what is checked is what is used (a getter cannot answer twice).
      let seq: unknown;
      let hash: unknown;
      try {
        if (typeof after === 'object' && after !== null) ({ seq, hash } = after);
      } catch (e) {
        throw new TypeError(`options.after cannot be read (${message(e)})`);
      }
      if (typeof after !== 'object' || after === null || !Number.isSafeInteger(seq) || (seq as number) < 0 || typeof hash !== 'string') {
        throw new TypeError(`options.after must be { seq: a non-negative integer, hash: a string }, got ${describe(after)}`);
      }
      this.#expectedSeq = (seq as number) + 1;
      this.#expectedPrev = hash;
      this.#lastSeq = seq as number;
    }
  }

  /** Adds one page of receipt rows as stored. */
  push(rows: readonly ReceiptRow[]): this {
    try {
      if (!Array.isArray(rows)) throw new TypeError(`a page of receipt rows must be an array, got ${describe(rows)}`);
    } catch (e) {
      if (e instanceof TypeError) throw e;
      throw new TypeError(`a page of receipt rows cannot be read (${message(e)})`);
    }
    for (const row of rows as readonly unknown[]) this.#pushEntry(entry(row));
    return this;
  }

  static {
    pushEntry = (v, e) => v.#pushEntry(e);
    setListError = (v, detail) => {
      v.#listError = detail;
    };
  }

  #pushEntry(e: Entry): void {
    if (this.#finished) throw new RangeError('this ChainVerifier has finished; start a new one');
    if (e.seq === null) {
      this.#unchained += 1;
      return;
    }
    this.#chained += 1;
    if (e.seq === undefined) {
      this.#misplaced.push({ name: 'content_altered', seq: null, detail: `a receipt's seq column is ${describe(e.rawSeq)}, not an integer` });
      return;
    }
    const seq = e.seq;
    if (this.#runSeq !== null && seq < this.#runSeq) throw new RangeError(`chained receipt rows must come in seq order: seq ${seq} after seq ${this.#runSeq}`);
    if (seq !== this.#runSeq) {
      this.#closeRun();
      this.#runSeq = seq;
    }
    this.#runCount += 1;
    if (typeof this.#head !== 'string' && seq === this.#head.seq) this.#headSeqRows += 1;

    if (seq !== this.#expectedSeq) {
      this.#break({ name: 'missing', seq: this.#expectedSeq, detail: `expected seq ${this.#expectedSeq}, found seq ${seq}` });
      this.#expectedSeq = seq;
    }
    const r = recompute(e.json);
    const unreadable = 'error' in r ? null : unreadableReceipt(predicateValues(r.fields));
    if ('error' in r) {
      this.#break({ name: 'content_altered', seq, detail: `the stored document cannot be hashed: ${r.error}` });
      // Its link cannot be evaluated either; the next row is compared against an impossible value.
      this.#expectedPrev = UNHASHABLE;
    } else if (unreadable !== null) {
      // A document the original cannot read as a receipt is a break there whatever its hash (spec 05 §2.5).
      const altered =
        typeof e.hash === 'string' && e.hash !== '' && e.hash !== r.hash ? `stored hash ${describe(e.hash)} but the document hashes to ${r.hash}, and ` : '';
      this.#break({ name: 'content_altered', seq, detail: `${altered}the stored document is not a readable receipt: ${unreadable}` });
      this.#expectedPrev = UNHASHABLE;
    } else {
      if (e.hash === null || e.hash === undefined || e.hash === '') {
        this.#break({ name: 'hash_missing', seq, detail: `no stored hash (recomputed ${r.hash})` });
      } else if (e.hash !== r.hash) {
        this.#break({ name: 'content_altered', seq, detail: `stored hash ${describe(e.hash)} but the document hashes to ${r.hash}` });
      }
      const wrong = columnMismatches(e.columns, r.fields);
      if (wrong.length > 0) {
        const fields = r.fields as readonly (JsonValue | undefined)[];
        this.#columnFindings.push({
          name: 'column_mismatch',
          seq,
          detail: wrong
            .map(
              (c) =>
                `column ${c} is ${describe(e.columns[DUPLICATED.indexOf(c)])} but the document's ${DUPLICATED_COLUMNS[c]} is ${describe(fields[DUPLICATED.indexOf(c)])}`,
            )
            .join('; '),
        });
      }
      // The document's own prev_hash (undefined when it has none).
      const prev = r.fields === null ? undefined : r.fields[PREV_HASH];
      if (prev !== this.#expectedPrev) {
        const expected = this.#expectedPrev === UNHASHABLE ? 'the previous receipt, which cannot be hashed' : this.#expectedPrev;
        this.#break({
          name: 'link_broken',
          seq,
          detail: `the document's prev_hash is ${prev === undefined ? 'absent' : describe(prev)}, expected ${expected}`,
        });
      }
      this.#expectedPrev = r.hash;
    }
    this.#lastSeq = seq;
    this.#expectedSeq = seq + 1;
  }

  #break(b: ChainBreak): void {
    this.#walkBreaks.push(b);
    if (b.seq !== null) this.#named.add(b.seq);
  }

  #closeRun(): void {
    if (this.#runSeq !== null && !this.#named.has(this.#runSeq)) this.#verified += this.#runCount;
    this.#runCount = 0;
  }

  /** Compares the head with the chain's end and reports; the verifier takes no rows after this. */
  finish(): ChainReport {
    if (this.#finished) throw new RangeError('this ChainVerifier has already finished');
    this.#finished = true;
    this.#closeRun();
    const breaks: ChainBreak[] = [];
    const unchained = this.#unchained;
    if (unchained > 0) {
      breaks.push({
        name: 'unchained',
        seq: null,
        detail: `${unchained} receipt${unchained === 1 ? ' has' : 's have'} no seq, so the chain does not cover ${unchained === 1 ? 'it' : 'them'}`,
      });
    }
    if (this.#listError !== null) breaks.push({ name: 'content_altered', seq: null, detail: this.#listError });
    breaks.push(...this.#misplaced, ...this.#walkBreaks);
    const h = this.#head;
    let verified = this.#verified;
    if (typeof h === 'string') {
      breaks.push({ name: 'head_mismatch', seq: null, detail: h });
    } else if (h.seq !== this.#lastSeq || h.hash !== this.#expectedPrev) {
      const last = this.#expectedPrev === UNHASHABLE ? 'a receipt that cannot be hashed' : this.#expectedPrev;
      breaks.push({ name: 'head_mismatch', seq: h.seq, detail: `head is (${h.seq}, ${h.hash}) but the chain ends at (${this.#lastSeq}, ${last})` });
      if (!this.#named.has(h.seq)) verified -= this.#headSeqRows;
    }
    return {
      ok: breaks.length === 0,
      verified,
      chained: this.#chained,
      unchained,
      head_seq: typeof h === 'string' ? null : h.seq,
      head_hash: typeof h === 'string' ? null : h.hash,
      breaks,
      column_findings: [...this.#columnFindings],
    };
  }
}

/** One receipt row as an operator's view shows it: the fields as the stored document holds them. */
export interface ReceiptView {
  /** The document's `receipt_id`. */
  readonly receipt_id: string | null;
  /** The document's `action_id`. */
  readonly action_id: string | null;
  /** The document's `effect_key`. */
  readonly effect_key: string | null;
  /** The document's `result`. */
  readonly result: string | null;
  /** The document's `finished_at` (what the `ts` column repeats). */
  readonly ts: string | null;
  /** The document's `seq`. */
  readonly seq: number | null;
  /** The document's `prev_hash`. */
  readonly prev_hash: string | null;
  /** The stored `hash` column (not part of the document; {@link verifyChain} checks it). */
  readonly hash: string | null;
  /** The parsed stored document (prototype-free objects, integers beyond 2^53 as bigint), or null when `json` cannot be read. */
  readonly document: JsonObject | null;
  /**
   * The columns whose stored value differs from the document's field (`json` when the document
   * cannot be read): a view may flag them; it never shows the column instead of the field.
   */
  readonly mismatched: readonly string[];
}

/**
 * Reads one receipt row for display: every field a column repeats is taken from the stored
 * document, which is what the chain hashes, so an edited `result`, `effect_key`, `action_id`,
 * `receipt_id`, `ts`, `seq` or `prev_hash` column is never shown as the receipt's. A field the
 * document lacks (or holds with another type) is null. This looks at one row only: whether the
 * document itself is intact and chained is {@link verifyChain}'s to say. Never throws.
 */
export function receiptView(row: ReceiptRow): ReceiptView {
  const e = entry(row);
  const hash = typeof e.hash === 'string' ? e.hash : null;
  let document: JsonObject | null = null;
  if (typeof e.json === 'string') {
    try {
      const parsed = parseJson(e.json, { what: 'receipt json', floats: 'allow' });
      if (isPlainObject(parsed)) document = parsed as JsonObject;
    } catch {
      document = null;
    }
  }
  if (document === null) {
    return {
      receipt_id: null,
      action_id: null,
      effect_key: null,
      result: null,
      ts: null,
      seq: null,
      prev_hash: null,
      hash,
      document: null,
      mismatched: ['json'],
    };
  }
  const doc = document;
  const text = (field: string): string | null => {
    const v = Object.prototype.hasOwnProperty.call(doc, field) ? doc[field] : null;
    return typeof v === 'string' ? v : null;
  };
  const seq = Object.prototype.hasOwnProperty.call(doc, 'seq') ? position(doc['seq']) : null;
  return {
    receipt_id: text('receipt_id'),
    action_id: text('action_id'),
    effect_key: text('effect_key'),
    result: text('result'),
    ts: text('finished_at'),
    seq: seq ?? null,
    prev_hash: text('prev_hash'),
    hash,
    document,
    mismatched: columnMismatches(e.columns, fieldsOf(document)),
  };
}
