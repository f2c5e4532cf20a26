/**
 * Combined writes: where the dialect offers them, the statements of one write step — the effect
 * row, the step's events, and the chained receipt — go to the server as ONE statement inside the
 * same transaction, instead of one statement (one round trip) each. Nothing else changes: the
 * transaction, its COMMIT, the lost-COMMIT intent and every refusal are those of the statement-
 * by-statement path, which runs instead whenever the combined statement did not apply.
 *
 * The chained receipt is sealed by the server under the head row's lock (its `seq` and
 * `prev_hash` are only known there): the stored JSON and the canonical text are sent split around
 * those two values, the server splices them in and hashes the canonical text, and the kernel
 * computes both itself from the values the server used and compares them before the transaction
 * commits.
 *
 * @module
 */
import type { EffectRecord, EventRecord, StoredReceipt } from '../model.js';
import { canonicalJson, orderedJson, type JsonObject } from '../canonical.js';
import { sealedDocument } from '../receipt.js';
import { sha256Tagged } from '../hash.js';
import { StoreError } from '../errors.js';
import type { SqlExecutor, SqlValue } from './driver.js';
import type { SqlEngine } from './engine.js';
import { effectParams, int, type eventFields, type receiptFields } from './rows.js';

const textEncoder = new TextEncoder();

type EventFields = ReturnType<typeof eventFields>;
type ReceiptFields = ReturnType<typeof receiptFields>;

/** One row of a combined statement's answer: `k` says what it reports. */
interface CombinedRow {
  k: 'effect' | 'event' | 'head' | 'receipt';
  n: SqlValue;
  a: string | null;
  b: string | null;
  j: string | null;
}

/** A text split around the `seq` and `prev_hash` values: `parts[0] X parts[1] Y parts[2]`, X = seq when `seqFirst`. */
export interface SplitText {
  readonly parts: readonly [string, string, string];
  readonly seqFirst: boolean;
}

/** The receipt's stored JSON and canonical text, each split around `seq` and `prev_hash`. */
export interface ReceiptTemplate {
  readonly json: SplitText;
  readonly canonical: SplitText;
}

function random64(): bigint {
  const b = new Uint32Array(2);
  globalThis.crypto.getRandomValues(b);
  return (BigInt(b[0]!) << 32n) | BigInt(b[1]!);
}

function split(text: string, seqText: string, prevText: string): SplitText | null {
  const s = text.indexOf(seqText);
  const p = text.indexOf(prevText);
  // Each marker exactly once, so that the one found is the field's own.
  if (s < 0 || p < 0 || text.indexOf(seqText, s + 1) >= 0 || text.indexOf(prevText, p + 1) >= 0) return null;
  const [first, firstLen, second, secondLen] = s < p ? [s, seqText.length, p, prevText.length] : [p, prevText.length, s, seqText.length];
  if (first + firstLen > second) return null;
  return { parts: [text.slice(0, first), text.slice(first + firstLen, second), text.slice(second + secondLen)], seqFirst: s < p };
}

/**
 * The receipt document sealed with two random markers in place of `seq` and `prev_hash`, both
 * renderings split around them; `null` when a marker is not found exactly once (the caller then
 * chains the receipt statement by statement).
 */
export function receiptTemplate(document: JsonObject): ReceiptTemplate | null {
  // A 15-digit marker is a safe integer, rendered as its digits; the hash marker is hex only (no escaping).
  const seq = Number(100_000_000_000_000n + (random64() % 800_000_000_000_000n));
  const prev = `ctrlrun-seal-${random64().toString(16)}${random64().toString(16)}`;
  const sealed = sealedDocument(document, seq, prev);
  const json = split(orderedJson(sealed), String(seq), prev);
  const canonical = split(canonicalJson(sealed, 'receipt'), String(seq), prev);
  return json === null || canonical === null ? null : { json, canonical };
}

/** `text` with `seq` and `prevHash` spliced in (what the server does; the tests compare the two). */
export function splice(text: SplitText, seq: number, prevHash: string): string {
  const [a, b, c] = text.parts;
  return text.seqFirst ? `${a}${seq}${b}${prevHash}${c}` : `${a}${prevHash}${b}${seq}${c}`;
}

function templateParams(r: ReceiptFields, t: ReceiptTemplate): SqlValue[] {
  return [
    r.receiptId,
    r.actionId,
    r.effectKey,
    r.result,
    r.finishedAt,
    ...t.json.parts,
    t.json.seqFirst ? 1 : 0,
    ...t.canonical.parts,
    t.canonical.seqFirst ? 1 : 0,
  ];
}

function eventsFrom(rows: readonly CombinedRow[], all: readonly EventFields[], name: string): EventRecord[] {
  const ids = rows
    .filter((r) => r.k === 'event')
    .map((r) => int(r.n, 'events.event_id'))
    .sort((a, b) => a - b);
  if (ids.length !== all.length) throw new StoreError(`[kernel] [${name}] ${all.length} events inserted, ${ids.length} ids returned`);
  return all.map((fields, i) => ({ eventId: ids[i]!, ...fields.record }));
}

/**
 * Inserts `record` (a fresh reservation) and, only if it landed, its events — one statement.
 * `null` when the key already has a row: nothing was written, and the caller plans on that row.
 */
export async function insertEffectWithEvents(
  e: SqlEngine,
  tx: SqlExecutor,
  record: EffectRecord,
  events: readonly EventFields[],
): Promise<EventRecord[] | null> {
  const statement = e.sql.sql.insertEffectWithEvents!(events.length);
  const params: SqlValue[] = [
    record.effectKey,
    record.state,
    record.actionId,
    record.attempt,
    record.leaseExpiresAt,
    record.createdAt,
    record.updatedAt,
    ...events.flatMap((f) => f.params),
  ];
  const rows = (await e.query<CombinedRow>(tx, statement, params)).rows;
  if (!rows.some((r) => r.k === 'effect')) return null;
  return eventsFrom(rows, events, e.name);
}

/** What {@link updateEffectWithTrail} wrote. `receipt` is `'unchained'` when the head row's values are not ones the server may splice: the caller chains it in the same transaction (the head is already locked). */
export interface UpdateTrail {
  readonly events: EventRecord[];
  readonly receipt: StoredReceipt | 'unchained' | 'already-stored' | null;
}

/**
 * The compare-and-set of `prior` to `next`, and only if it applied, the events and the chained
 * receipt — one statement. `null` when the row moved on: nothing was written. `exact`: the row
 * must equal `prior` in all seven written columns, not only the four that identify an attempt
 * (for a prior not read in this transaction).
 */
export async function updateEffectWithTrail(
  e: SqlEngine,
  tx: SqlExecutor,
  prior: EffectRecord,
  next: EffectRecord,
  events: readonly EventFields[],
  receipt: ReceiptFields | null,
  exact = false,
): Promise<UpdateTrail | null> {
  const template = receipt === null ? null : receiptTemplate(receipt.document);
  if (receipt !== null && template === null) return null;
  const statement = e.sql.sql.updateEffectWithTrail!(events.length, template !== null, exact);
  const params: SqlValue[] = [
    ...effectParams(next, prior),
    ...events.flatMap((f) => f.params),
    ...(template === null ? [] : templateParams(receipt!, template)),
    ...(exact ? [prior.leaseExpiresAt, prior.createdAt, prior.updatedAt] : []),
  ];
  const rows = (await e.query<CombinedRow>(tx, statement, params)).rows;
  if (!rows.some((r) => r.k === 'effect')) return null;
  const stored = eventsFrom(rows, events, e.name);
  if (receipt === null) return { events: stored, receipt: null };
  const head = rows.find((r) => r.k === 'head');
  const row = rows.find((r) => r.k === 'receipt');
  if (head === undefined) return { events: stored, receipt: 'unchained' };
  if (row === undefined) return { events: stored, receipt: 'already-stored' };
  const seq = int(row.n, 'receipts.seq');
  const prevHash = String(row.a);
  // The server's splice and hash, checked against the kernel's own before anything commits: the
  // same splice of the same parts (equal to the seal's texts: see the template's property test),
  // and SHA-256 over the canonical text, as `sealReceipt` hashes it.
  const json = splice(template!.json, seq, prevHash);
  const hash = sha256Tagged(textEncoder.encode(splice(template!.canonical, seq, prevHash)));
  if (json !== row.j || hash !== row.b) {
    throw new StoreError(`[kernel] [${e.name}] the receipt ${receipt.receiptId} sealed by the server differs from the kernel's seal (seq ${seq}); rolled back`);
  }
  return { events: stored, receipt: { seq, prevHash, hash, json, document: sealedDocument(receipt.document, seq, prevHash) } };
}
