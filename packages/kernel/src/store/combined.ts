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
import { sealReceipt, sealedDocument } from '../receipt.js';
import { sha256TaggedText } from '../hash.js';
import { AmbiguousWrite, StoreError } from '../errors.js';
import { shownId } from '../visible.js';
import type { SqlExecutor, SqlValue } from './driver.js';
import type { SqlEngine, Trailed } from './engine.js';
import {
  INSERT_FOUND_OTHER,
  INSERT_LANDED,
  INSERT_LOST_REISSUE,
  LANDED_LATE,
  UPDATE_FOUND_OTHER,
  UPDATE_LANDED,
  UPDATE_LOST_REISSUE,
  lostCommitBranch,
  type EffectWriteIntent,
} from './lost-commit.js';
import { EVENTS_LOOKBACK, effectParams, findEvents, int, type EventRow, type eventFields, type receiptFields } from './rows.js';

type EventFields = ReturnType<typeof eventFields>;
type ReceiptFields = ReturnType<typeof receiptFields>;

/** One row of a combined statement's answer: `k` says what it reports. */
interface CombinedRow {
  k: 'effect' | 'event' | 'head' | 'receipt' | 'advanced';
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

/** The parameters of the dialect's `insertEffectWithEvents`: the row's seven written columns, then each event's. */
function insertParams(record: EffectRecord, events: readonly EventFields[]): SqlValue[] {
  return [
    record.effectKey,
    record.state,
    record.actionId,
    record.attempt,
    record.leaseExpiresAt,
    record.createdAt,
    record.updatedAt,
    ...events.flatMap((f) => f.params),
  ];
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
  const rows = (await e.query<CombinedRow>(tx, statement, insertParams(record, events))).rows;
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
  const hash = sha256TaggedText(splice(template!.canonical, seq, prevHash));
  if (json !== row.j || hash !== row.b) {
    throw new StoreError(`[kernel] [${e.name}] the receipt ${receipt.receiptId} sealed by the server differs from the kernel's seal (seq ${seq}); rolled back`);
  }
  return { events: stored, receipt: { seq, prevHash, hash, json, document: sealedDocument(receipt.document, seq, prevHash) } };
}

/**
 * After an outcome found the chain head moved by another writer (another store, another
 * process), this many of the engine's next outcomes go straight to the transaction, whose
 * statement locks the head and chains on whatever it holds; then one stands alone again, as a probe.
 * Alone, each outcome is sealed on the head this engine expects: while another writer appends too,
 * most would miss it (and every one sent behind a miss misses as well), each miss a round trip
 * wasted. Measured with two processes of 8 callers on one schema: the transaction 1.5× the rate of
 * sealing again on the head the answer gave.
 */
const ALONE_REST = 64;

/**
 * An outcome and its receipt as ONE statement that commits on its own (no `BEGIN`, no `COMMIT`:
 * one round trip, and the chain head's lock is held only while the server runs it and flushes).
 * The receipt is sealed here, by the kernel, on the head this engine expects
 * ({@link SqlEngine.chainTip}); the statement applies only if the locked head is exactly that one
 * and the effect row is exactly `prior` (all seven written columns), and then writes the row, the
 * events, the receipt and the head together or — on any error — nothing. So the server compares
 * and stores; it never seals, and nothing it does is checked after the fact.
 *
 * An engine sends these one at a time, each sealed on the head the one before it left (its
 * answer says which). Another engine's or process's receipt moves the head, which the answer
 * also gives: the engine expects that head from then on, and this outcome and the next
 * {@link ALONE_REST} go to the transaction. `null` (nothing written, the step runs in a
 * transaction as always): resting after another writer, the head moved, no expected head, the row
 * moved on, or an error the server reports. A lost reply is settled as a
 * lost COMMIT is (spec 03 §3.4, Table A2): the row re-read on a fresh connection, one named
 * branch, logged; landed → what the statement wrote; not landed → `{ reissueAt }`, the one
 * re-issue; another writer → its refusal.
 */
export async function appendOutcome(
  e: SqlEngine,
  what: string,
  intent: Extract<EffectWriteIntent, { kind: 'update' }>,
  events: readonly EventFields[],
  receipt: ReceiptFields,
  now: Date,
): Promise<Trailed<EffectRecord> | { reissueAt: Date } | null> {
  if (e.aloneRest > 0) {
    // Another writer appended lately: the transaction chains this one (the row stays remembered).
    e.aloneRest--;
    return null;
  }
  const { prior, target } = intent;
  // Nothing written, and the transaction decides: reading the row first, unless only the head moved.
  const inTransaction = (rowMayHaveMoved = true): null => {
    if (rowMayHaveMoved) e.forget(prior.effectKey);
    return null;
  };
  if (e.chainTip === null) {
    // One read of the head for every outcome that finds none: they then seal one after another on it.
    await (e.tipRead ??= e.driver
      .query<{ seq: SqlValue; hash: string }>(e.sql.sql.selectChainHead!, [])
      .then((r) => {
        const row = r.rows[0];
        const head = row === undefined ? null : headOf(row.seq, row.hash);
        if (head !== null && e.chainTip === null) e.chainTip = head;
      })
      // A read that fails leaves the head unknown: the transaction writes the outcome, as ever.
      .catch(() => undefined)
      .finally(() => {
        e.tipRead = null;
      }));
  }
  const tip = e.chainTip;
  if (tip === null) return inTransaction();
  const seq = tip.seq + 1;
  const sealed = sealReceipt(receipt.document, seq, tip.hash);
  e.chainTip = { seq, hash: sealed.hash };
  const params: SqlValue[] = [
    tip.seq,
    tip.hash,
    ...effectParams(target, prior),
    prior.leaseExpiresAt,
    prior.createdAt,
    prior.updatedAt,
    ...events.flatMap((f) => f.params),
    receipt.receiptId,
    receipt.actionId,
    receipt.effectKey,
    receipt.result,
    sealed.json,
    receipt.finishedAt,
    seq,
    tip.hash,
    sealed.hash,
  ];
  const stored: StoredReceipt = { seq, prevHash: tip.hash, hash: sealed.hash, json: sealed.json, document: sealed.document };
  let rows: CombinedRow[];
  try {
    rows = (await e.driver.writeAlone!<CombinedRow>(e.sql.sql.appendOutcome!(events.length), params)).rows;
  } catch (err) {
    e.chainTip = null;
    if (err instanceof AmbiguousWrite) return settleLostAppend(e, what, intent, events, receipt.receiptId, stored, now, err);
    return inTransaction(); // the server says nothing was written: the transaction decides (and meets the error again, if it stays)
  }
  if (rows.some((r) => r.k === 'effect')) {
    if (!rows.some((r) => r.k === 'receipt') || !rows.some((r) => r.k === 'advanced')) {
      throw new StoreError(
        `[kernel] [${e.name}] ${what} on ${shownId(prior.effectKey)}: the outcome applied without its receipt or the head (${rows.map((r) => r.k).join(', ')})`,
      );
    }
    e.hint(target);
    return { value: target, events: eventsFrom(rows, events, e.name), receipt: stored };
  }
  // No head row, or one no receipt can be sealed on: nothing was written, and the transaction
  // writes the outcome (without its receipt, if it cannot chain one: T170).
  const head = rows.find((r) => r.k === 'head');
  const found = head === undefined ? null : headOf(head.n, head.a);
  if (found === null) return inTransaction();
  // Only if no later outcome has sealed on what this one expected since: theirs queue behind it.
  if (e.chainTip !== null && e.chainTip.seq === seq && e.chainTip.hash === sealed.hash) e.chainTip = found;
  // The head was the one expected: the effect row moved on, and the transaction reads it and decides.
  if (found.seq === tip.seq && found.hash === tip.hash) return inTransaction();
  // Another writer moved the head: this outcome, and the next few, are chained by the transaction.
  e.aloneRest = ALONE_REST;
  return inTransaction(false);
}

/** A chain head a receipt can be sealed on (a safe integer seq below the largest, a text hash), else `null`. */
function headOf(seq: SqlValue | undefined, hash: unknown): { seq: number; hash: string } | null {
  let n: number;
  try {
    n = int(seq, 'receipt_chain.seq');
  } catch {
    return null;
  }
  return Number.isSafeInteger(n + 1) && typeof hash === 'string' ? { seq: n, hash } : null;
}

/** {@link appendOutcome}'s lost reply: the row (and, if it landed, the receipt and events) re-read on a fresh connection. */
async function settleLostAppend(
  e: SqlEngine,
  what: string,
  intent: Extract<EffectWriteIntent, { kind: 'update' }>,
  events: readonly EventFields[],
  receiptId: string,
  stored: StoredReceipt,
  now: Date,
  lost: AmbiguousWrite,
): Promise<Trailed<EffectRecord> | { reissueAt: Date; late: () => Promise<Trailed<EffectRecord> | null> }> {
  const key = intent.prior.effectKey;
  const { sql } = e.sql;
  /** The row, and what landed with it when it is the one the statement wrote. */
  const reread = async (): Promise<{ found: EffectRecord | null; landed: Trailed<EffectRecord> | null }> => {
    if (e.driver.reread === undefined || sql.newestEventsOf === undefined || sql.selectReceipt === undefined) {
      throw new StoreError(`the ${e.name} driver cannot re-read on a fresh connection`);
    }
    const { found, receiptRow, newest } = await e.driver.reread(async (ex) => ({
      found: await e.effect(ex, key),
      receiptRow: (await e.query<{ hash: string | null }>(ex, sql.selectReceipt!, [receiptId])).rows[0],
      newest: await newestEvents(e, ex, events, intent.target.actionId),
    }));
    if (lostCommitBranch(intent, found) !== UPDATE_LANDED) return { found, landed: null };
    // One statement: the row landed, so did its receipt and its events — found by what they hold.
    if (receiptRow?.hash !== stored.hash) {
      throw new StoreError(`[kernel] [${e.name}] ${what} on ${shownId(key)}: the outcome landed but its receipt ${receiptId} is not the one sealed for it`, {
        cause: lost,
      });
    }
    const landed = findEvents(newest, events);
    if (landed === null)
      throw new StoreError(`[kernel] [${e.name}] ${what} on ${shownId(key)}: the outcome landed but its events are not among the action's newest`, {
        cause: lost,
      });
    e.hint(intent.target);
    return { found, landed: { value: intent.target, events: landed, receipt: stored } };
  };
  return settleAlone(e, what, key, intent, now, lost, reread);
}

/**
 * The newest events of the action `events` were written for (newest first): as many as were
 * written, and {@link EVENTS_LOOKBACK} more, since other events of the action may have landed
 * after them. Read on the re-read's fresh connection.
 */
export async function newestEvents(e: SqlEngine, ex: SqlExecutor, events: readonly EventFields[], actionId: string): Promise<EventRow[]> {
  if (events.length === 0) return [];
  const id = events.at(-1)!.params[2];
  return (await e.query<EventRow>(ex, e.sql.sql.newestEventsOf!, [typeof id === 'string' ? id : actionId, events.length + EVENTS_LOOKBACK])).rows;
}

/**
 * What a write that commits on its own does after its reply was lost, given `reread` (the row
 * re-read on a fresh connection, and what landed with it if it is the one written): one named
 * branch (spec 03 §3.4), logged, then acted on — landed → what landed; not there → `{ reissueAt }`,
 * the one re-issue (its `late` looks again if the re-issue is refused: the statement may land
 * after this re-read, see SqlEngine.reissue); another row → its refusal. A re-read that fails
 * raises {@link AmbiguousWrite}, and nothing more is written.
 */
async function settleAlone<T>(
  e: SqlEngine,
  what: string,
  key: string,
  intent: EffectWriteIntent,
  now: Date,
  lost: AmbiguousWrite,
  reread: () => Promise<{ found: EffectRecord | null; landed: T | null }>,
): Promise<T | { reissueAt: Date; late: () => Promise<T | null> }> {
  let first: Awaited<ReturnType<typeof reread>>;
  try {
    first = await reread();
  } catch (err) {
    if (err instanceof StoreError && err.cause === lost) throw err;
    throw new AmbiguousWrite(
      `[kernel] [${e.name}] ${what} on ${shownId(key)}: the reply was lost (${lost.message}) and the re-read on a fresh connection failed (${(err as Error)?.message ?? String(err)}); whether the write landed is unknown, and nothing more was written`,
      { cause: err },
    );
  }
  const branch = lostCommitBranch(intent, first.found);
  e.logBranch(what, key, 'the reply to a write that commits on its own was lost', branch);
  switch (branch) {
    case UPDATE_LANDED:
    case INSERT_LANDED:
      return first.landed!;
    case UPDATE_LOST_REISSUE:
    case INSERT_LOST_REISSUE:
      return {
        reissueAt: now,
        late: async () => {
          const again = await reread();
          if (again.landed !== null) e.logBranch(what, key, LANDED_LATE, branch === UPDATE_LOST_REISSUE ? UPDATE_LANDED : INSERT_LANDED);
          return again.landed;
        },
      };
    case UPDATE_FOUND_OTHER:
    case INSERT_FOUND_OTHER:
    default:
      throw intent.refuse(first.found);
  }
}

/**
 * A fresh reservation (no approval to consume, no budget to charge) and its events as ONE
 * statement that commits on its own, on the connection that writes alone (where the driver
 * commits what arrives together as one group: reservations and outcomes share its COMMITs). No
 * `BEGIN`, no `COMMIT`: one round trip where the transaction takes three. `null` (nothing
 * written; the step runs in a transaction as always): the key has a row already (the transaction
 * reads and plans on it), or the server reports an error. A lost reply is settled as a lost
 * COMMIT is (spec 03 §3.4, Table A1): the row and the action's newest events re-read on a fresh
 * connection, one named branch, logged; ours → landed; no row → `{ reissueAt }`, the one
 * re-issue (whose `late` looks once more if it is refused); another row → its refusal.
 */
export async function reserveAlone<R>(
  e: SqlEngine,
  what: string,
  intent: Extract<EffectWriteIntent, { kind: 'insert' }>,
  value: R,
  events: readonly EventFields[],
  now: Date,
): Promise<Trailed<R> | { reissueAt: Date; late: () => Promise<Trailed<R> | null> } | null> {
  const { record } = intent;
  let rows: CombinedRow[] = [];
  let lost: AmbiguousWrite | null = null;
  try {
    rows = (await e.driver.writeAlone!<CombinedRow>(e.sql.sql.insertEffectWithEvents!(events.length), insertParams(record, events))).rows;
  } catch (err) {
    // The server says nothing was written: the transaction decides (and meets the error again, if it stays).
    if (!(err instanceof AmbiguousWrite)) return null;
    lost = err;
  }
  if (lost !== null) {
    // The lost reply: the row (and, if it is ours, the events that landed with it) re-read on a fresh connection.
    const key = intent.record.effectKey;
    const { sql } = e.sql;
    const reread = async (): Promise<{ found: EffectRecord | null; landed: Trailed<R> | null }> => {
      if (e.driver.reread === undefined || sql.newestEventsOf === undefined) throw new StoreError(`the ${e.name} driver cannot re-read on a fresh connection`);
      const { found, newest } = await e.driver.reread(async (ex) => ({
        found: await e.effect(ex, key),
        newest: await newestEvents(e, ex, events, intent.record.actionId),
      }));
      if (lostCommitBranch(intent, found) !== INSERT_LANDED) return { found, landed: null };
      // One statement: the row landed, so did its events — found by what they hold.
      const landed = findEvents(newest, events);
      if (landed === null)
        throw new StoreError(`[kernel] [${e.name}] ${what} on ${shownId(key)}: the reservation landed but its events are not among the action's newest`, {
          cause: lost,
        });
      e.hint(intent.record);
      return { found, landed: { value, events: landed, receipt: null } };
    };
    return settleAlone(e, what, key, intent, now, lost, reread);
  }
  if (!rows.some((r) => r.k === 'effect')) return null;
  e.hint(record);
  return { value, events: eventsFrom(rows, events, e.name), receipt: null };
}
