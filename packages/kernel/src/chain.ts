/**
 * Verifying the receipt chain (spec 03 §5.3): a pure walk over receipt rows as stored and the
 * chain head row, reporting each break by one of six names at the `seq` where it was found.
 *
 * The walk hashes what was stored: each row's `json` is parsed with the strict {@link parseJson}
 * and hashed with {@link hashDocument}, never re-rendered, so documents of any receipt schema
 * (v1–v3) written by the original verify as they were written.
 *
 * @module
 */
import { parseJson, type JsonValue } from './canonical.js';
import { GENESIS_HASH, hashDocument } from './hash.js';
import type { ChainHead, ReceiptRow } from './model.js';

/** The six names a chain break can have. */
export type ChainBreakName = 'content_altered' | 'hash_missing' | 'link_broken' | 'missing' | 'head_mismatch' | 'unchained';

/** One break found by {@link verifyChain}. */
export interface ChainBreak {
  /** What is wrong. */
  readonly name: ChainBreakName;
  /** Where: the chain position, or `null` (unchained rows, no head row, a row without a usable `seq`). */
  readonly seq: number | null;
  /** A human-readable explanation. */
  readonly detail: string;
}

/** What {@link verifyChain} found. */
export interface ChainReport {
  /** `true` only when no break was found. */
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
}

/** A row as the walk needs it; `seq` is `undefined` when the column held something unusable. */
interface Entry {
  readonly seq: number | null | undefined;
  readonly rawSeq: unknown;
  readonly json: unknown;
  readonly hash: unknown;
}

/** Stands in for the hash of a row that could not be hashed: no JSON value equals it, so nothing links to it. */
const UNHASHABLE: unique symbol = Symbol('unhashable');

function describe(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v);
  if (typeof v === 'bigint') return `${v}n`;
  if (v === null || typeof v !== 'object') return String(v);
  return Array.isArray(v) ? 'an array' : 'an object';
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
    if (typeof row !== 'object' || row === null) return { seq: undefined, rawSeq: row, json: undefined, hash: undefined };
    const r = row as Record<string, unknown>;
    const rawSeq = r['seq'];
    return { seq: position(rawSeq), rawSeq, json: r['json'], hash: r['hash'] };
  } catch (e) {
    return { seq: undefined, rawSeq: `an unreadable row (${message(e)})`, json: undefined, hash: undefined };
  }
}

/** Hashes the stored document, or explains why it cannot be hashed. */
function recompute(json: unknown): { hash: string; document: JsonValue } | { error: string } {
  if (typeof json !== 'string') return { error: `the json column is ${describe(json)}, not JSON text` };
  try {
    const document = parseJson(json, { what: 'receipt json' });
    return { hash: hashDocument(document, 'receipt'), document };
  } catch (e) {
    return { error: message(e) };
  }
}

/** The document's own `prev_hash`, or `undefined` when it has none. */
function documentPrevHash(document: JsonValue): JsonValue | undefined {
  if (typeof document !== 'object' || document === null || Array.isArray(document)) return undefined;
  return Object.prototype.hasOwnProperty.call(document, 'prev_hash') ? document['prev_hash'] : undefined;
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

/**
 * Verifies the receipt chain: `rows` are the `receipts` rows as stored (any order; position comes
 * from the `seq` column, nulls first, ties kept in the given order) and `head` the
 * `receipt_chain(id = 1)` row, or `null` when there is none.
 *
 * The walk starts at `seq` 1 after {@link GENESIS_HASH} and carries forward each row's
 * **recomputed** hash: `missing` when a `seq` is skipped (then it resyncs), `content_altered` when
 * the recomputed hash differs from the stored one or the document cannot be parsed or
 * canonicalised, `hash_missing` when there is no stored hash, `link_broken` when the document's
 * own `prev_hash` is not the previous recomputed hash, `head_mismatch` when the head is not the
 * last row's (`seq`, recomputed hash), and `unchained` (listed first) for rows without `seq`,
 * which are never a pass. A row whose `seq` column is not an integer has no place in the chain:
 * it is reported as `content_altered` with `seq` null.
 *
 * Pure and total: it never throws and never loops beyond the rows given.
 */
export function verifyChain(rows: readonly ReceiptRow[], head: ChainHead | null): ChainReport {
  const breaks: ChainBreak[] = [];
  const entries: Entry[] = [];
  let listError: string | null = null;
  try {
    if (!Array.isArray(rows)) listError = `the receipt rows are ${describe(rows)}, not an array`;
    else for (const row of rows as readonly unknown[]) entries.push(entry(row));
  } catch (e) {
    listError = `the receipt rows cannot be read (${message(e)})`;
  }

  const unchained = entries.filter((e) => e.seq === null).length;
  const misplaced = entries.filter((e) => e.seq === undefined);
  // Array#sort is stable, so equal positions keep the order they were given in.
  const walk = entries.filter((e): e is Entry & { seq: number } => typeof e.seq === 'number').sort((a, b) => a.seq - b.seq);

  if (unchained > 0) {
    breaks.push({ name: 'unchained', seq: null, detail: `${unchained} receipt${unchained === 1 ? ' has' : 's have'} no seq, so the chain does not cover ${unchained === 1 ? 'it' : 'them'}` });
  }
  if (listError !== null) breaks.push({ name: 'content_altered', seq: null, detail: listError });
  for (const m of misplaced) {
    breaks.push({ name: 'content_altered', seq: null, detail: `a receipt's seq column is ${describe(m.rawSeq)}, not an integer` });
  }

  let expectedPrev: string | typeof UNHASHABLE = GENESIS_HASH;
  let expectedSeq = 1;
  let lastSeq = 0;
  for (const e of walk) {
    const seq = e.seq;
    if (seq !== expectedSeq) {
      breaks.push({ name: 'missing', seq: expectedSeq, detail: `expected seq ${expectedSeq}, found seq ${seq}` });
      expectedSeq = seq;
    }
    const r = recompute(e.json);
    if ('error' in r) {
      breaks.push({ name: 'content_altered', seq, detail: `the stored document cannot be hashed: ${r.error}` });
      // Its link cannot be evaluated either; the next row is compared against an impossible value.
      expectedPrev = UNHASHABLE;
    } else {
      if (e.hash === null || e.hash === undefined || e.hash === '') {
        breaks.push({ name: 'hash_missing', seq, detail: `no stored hash (recomputed ${r.hash})` });
      } else if (e.hash !== r.hash) {
        breaks.push({ name: 'content_altered', seq, detail: `stored hash ${describe(e.hash)} but the document hashes to ${r.hash}` });
      }
      const prev = documentPrevHash(r.document);
      if (prev !== expectedPrev) {
        const expected = expectedPrev === UNHASHABLE ? 'the previous receipt, which cannot be hashed' : expectedPrev;
        breaks.push({
          name: 'link_broken',
          seq,
          detail: `the document's prev_hash is ${prev === undefined ? 'absent' : describe(prev)}, expected ${expected}`,
        });
      }
      expectedPrev = r.hash;
    }
    lastSeq = seq;
    expectedSeq = seq + 1;
  }

  const h = readHead(head);
  if (typeof h === 'string') {
    breaks.push({ name: 'head_mismatch', seq: null, detail: h });
  } else if (h.seq !== lastSeq || h.hash !== expectedPrev) {
    const last = expectedPrev === UNHASHABLE ? 'a receipt that cannot be hashed' : expectedPrev;
    breaks.push({ name: 'head_mismatch', seq: h.seq, detail: `head is (${h.seq}, ${h.hash}) but the chain ends at (${lastSeq}, ${last})` });
  }

  const named = new Set<number>();
  for (const b of breaks) if (b.seq !== null) named.add(b.seq);
  const verified = walk.filter((e) => !named.has(e.seq)).length;
  return {
    ok: breaks.length === 0,
    verified,
    chained: walk.length + misplaced.length,
    unchained,
    head_seq: typeof h === 'string' ? null : h.seq,
    head_hash: typeof h === 'string' ? null : h.hash,
    breaks,
  };
}
