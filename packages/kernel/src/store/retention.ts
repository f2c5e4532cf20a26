/**
 * Retention in the SQL store (spec 05 §5.2–§5.4): the prune under a recorded checkpoint, legal
 * holds, and the anchors cache. Every write here takes the receipt-write lock first (SQLite
 * `BEGIN IMMEDIATE`; Postgres the head row `FOR UPDATE`; a single-connection engine its queue)
 * and holds it for the whole validation and deletion, so no receipt is chained while a prune
 * decides, and `receipt_chain` is never touched.
 *
 * @module
 */
import { askProvider, checkAnchor, type Anchor, type AnchorKind, type AnchorProvider, type AnchoredStore } from '../anchor.js';
import { isPlainObject, parseJson } from '../canonical.js';
import { ChainVerifier, type ChainBreak } from '../chain.js';
import { InvalidArgument } from '../errors.js';
import type { ReceiptRow } from '../model.js';
import { RECEIPT_SCHEMA } from '../receipt.js';
import { PREDICATE_FIELDS, unreadableReceipt } from '../receipt-readable.js';
import { parseTime, storedTime } from '../time.js';
import { quotedForMessage } from '../visible.js';
import type { SqlExecutor, SqlValue } from './driver.js';
import type { SqlEngine } from './engine.js';
import type { RetentionSql } from './retention-sql.js';
import { chainPosition, nonEmpty, receiptFromRow, storedText, type ReceiptSqlRow } from './rows.js';

/** One legal hold: a receipt range no prune may delete until a person releases it. */
export interface Hold {
  readonly holdId: string;
  readonly fromSeq: number;
  /** `null`: open-ended (everything from `fromSeq` on). */
  readonly toSeq: number | null;
  readonly reason: string;
  readonly placedBy: string;
  /** Stored time (`…+00:00`, any offset the original wrote). */
  readonly placedAt: string;
  readonly releasedAt: string | null;
  readonly releasedBy: string | null;
}

/** What a person asks for when placing a hold. */
export interface HoldDraft {
  readonly holdId: string;
  readonly fromSeq: number;
  readonly toSeq: number | null;
  readonly reason: string;
  readonly placedBy: string;
}

/** The single point a prune pruned through (the `prune_checkpoint` row). */
export interface Checkpoint {
  readonly seq: number;
  readonly hash: string;
  /** The receipt schema current when it was written. */
  readonly schema: string;
  readonly at: string;
}

/** What a prune is asked: delete the chain through `through`, whose charged effects are older than `olderThanMs`. */
export interface PruneOptions {
  readonly through: number;
  readonly olderThanMs: number;
  /** Anchors the checkpoint (`kind = checkpoint`) before anything is deleted; its failure refuses the prune. */
  readonly anchor?: AnchorProvider | null;
}

/** What a prune did. */
export interface PruneResult {
  readonly checkpoint: Checkpoint;
  /** Receipt rows deleted. */
  readonly receiptsDeleted: number;
  /** Ledger rows deleted (the prefix's effect keys). */
  readonly ledgerRowsDeleted: number;
  /** The checkpoint's anchor, or `null` without a provider. */
  readonly anchor: Anchor | null;
}

/** Why a prune was refused (spec 05 §5.3 steps 1–7); nothing was written. */
export type PruneRefusal = 'invalid' | 'no_chain' | 'through_head' | 'not_forward' | 'held' | 'unsettled' | 'charged' | 'new_break';

/** A prune refused before anything was deleted, naming the step, and the hold or effect that stands in its way. */
export class PruneRefused extends InvalidArgument {
  override name = 'PruneRefused';
  constructor(
    readonly reason: PruneRefusal,
    message: string,
    readonly detail: { holdId?: string; effectKey?: string; state?: string; breaks?: readonly ChainBreak[] } = {},
  ) {
    super(`prune refused (${reason}): ${message}`);
  }
}

/** The retention side of a store: the prune, holds, and the anchors it caches. */
export interface RetentionStore extends AnchoredStore {
  /** The prune of spec 05 §5.3, every step in order, under the receipt-write lock. Refusals are {@link PruneRefused}. */
  prune(options: PruneOptions): Promise<PruneResult>;
  /** Places a hold (a plain insert under the receipt-write lock; a duplicate id is refused). */
  putHold(draft: HoldDraft): Promise<Hold>;
  /** Releases a live hold (compare-and-set on `released_at IS NULL`); none live → `InvalidArgument`. */
  releaseHold(holdId: string, by: string): Promise<Hold>;
  /** Every hold, live and released. */
  holds(): Promise<Hold[]>;
  /** The checkpoint row with its schema and time, or `null`. */
  checkpoint(): Promise<Checkpoint | null>;
  /** Anchors the chain head (`kind = interval`) with `provider`, and caches it. A failing provider anchors nothing (`AnchorUnavailable`). */
  anchorHead(provider: AnchorProvider): Promise<Anchor>;
}

/** How many rows one step reads at a time. */
const PAGE = 1000;
/** How many holds or effects a refusal names. */
const NAMED = 5;

const q = (s: string): string => quotedForMessage(s, 120);

function seqParam(n: number): SqlValue {
  return n;
}

function checkSeq(v: unknown, what: string, min: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    throw new InvalidArgument(`${what} must be an integer ≥ ${min}, got ${typeof v === 'number' ? v : typeof v}`);
  return v;
}

/** A time column as read: text (SQLite, or Postgres through `to_char`); a driver's `Date` in the stored form. */
function timeText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return storedTime(v);
  return String(v);
}

interface HoldRow {
  hold_id: string;
  from_seq: SqlValue;
  to_seq: SqlValue;
  reason: string;
  placed_by: string;
  placed_at: unknown;
  released_at: unknown;
  released_by: string | null;
}

function holdFromRow(r: HoldRow): Hold {
  return {
    holdId: String(r.hold_id),
    fromSeq: chainPosition(r.from_seq),
    toSeq: r.to_seq === null ? null : chainPosition(r.to_seq),
    reason: String(r.reason),
    placedBy: String(r.placed_by),
    placedAt: timeText(r.placed_at) ?? '',
    releasedAt: timeText(r.released_at),
    releasedBy: r.released_by ?? null,
  };
}

interface AnchorRow {
  token: string;
  seq: SqlValue;
  hash: string;
  kind: string;
  at: unknown;
}

function anchorFromRow(r: AnchorRow): Anchor {
  return checkAnchor({ token: r.token, seq: chainPosition(r.seq), hash: r.hash, kind: r.kind, at: timeText(r.at) }, `the cached anchor ${q(String(r.token))}`);
}

/** Whether the original reads a stored receipt document (spec 05 §2.5): JSON, an object, and its predicate. */
function readable(json: string | null): boolean {
  if (json === null) return false;
  try {
    const doc = parseJson(json, { what: 'receipt', floats: 'allow' });
    if (!isPlainObject(doc)) return false;
    const d = doc as Readonly<Record<string, unknown>>;
    return unreadableReceipt(PREDICATE_FIELDS.map((k) => (Object.prototype.hasOwnProperty.call(d, k) ? (d[k] as never) : undefined))) === null;
  } catch {
    return false;
  }
}

/** Retention over one SQL store's engine. */
export function sqlRetention(e: SqlEngine): RetentionStore {
  const sql = (): RetentionSql => e.sql.sql.retention;

  /** The newest readable chained receipt at or below `upper`, with its stored hash, or `null`. */
  async function newestReadable(tx: SqlExecutor, upper: number): Promise<{ seq: number; hash: string | null } | null> {
    for (let bound = upper; ;) {
      const rows = (await e.query<{ seq: SqlValue; json: string | null; hash: string | null }>(tx, sql().newestAtOrBelow, [seqParam(bound), PAGE])).rows;
      for (const r of rows) {
        const seq = chainPosition(r.seq);
        if (Number.isSafeInteger(seq) && readable(r.json)) return { seq, hash: r.hash ?? null };
      }
      if (rows.length < PAGE) return null;
      const last = chainPosition(rows[rows.length - 1]!.seq);
      if (!Number.isSafeInteger(last) || last - 1 >= bound) return null;
      bound = last - 1;
    }
  }

  async function readCheckpoint(ex: SqlExecutor): Promise<Checkpoint | null> {
    const row = (await e.query<{ seq: SqlValue; hash: string; schema: string; at: unknown }>(ex, sql().selectCheckpoint)).rows[0];
    if (row === undefined) return null;
    return { seq: chainPosition(row.seq), hash: String(row.hash), schema: String(row.schema), at: timeText(row.at) ?? '' };
  }

  async function lockHead(tx: SqlExecutor): Promise<{ seq: number; hash: string } | null> {
    const head = (await e.query<{ seq: SqlValue; hash: string }>(tx, sql().lockHead)).rows[0];
    return head === undefined ? null : { seq: chainPosition(head.seq), hash: String(head.hash) };
  }

  /**
   * Rule 2 (step 7): the chain report after the prune — seeded from the new checkpoint, same head —
   * against the current one; the breaks the prune would add. One walk, both verifiers fed.
   */
  async function newBreaks(
    tx: SqlExecutor,
    head: { seq: number; hash: string },
    old: Checkpoint | null,
    next: { seq: number; hash: string },
    through: number,
  ): Promise<ChainBreak[]> {
    const current = new ChainVerifier(head, old === null ? {} : { after: { seq: old.seq, hash: old.hash } });
    const after = new ChainVerifier(head, { after: next });
    for (let offAfter = ''; ;) {
      const page = (await e.query<ReceiptSqlRow>(tx, e.sql.sql.receiptsOffChain, [offAfter, PAGE])).rows.map(receiptFromRow);
      current.push(page);
      // A row without an integer seq is never deleted (`seq IS NOT NULL AND seq <= through` spares a null; a text seq the walk cannot place either way).
      after.push(page.filter((r) => r.seq === null || !(typeof r.seq === 'number' && r.seq <= through)));
      if (page.length < PAGE) break;
      offAfter = page[page.length - 1]!.receipt_id;
    }
    for (let pos: SqlValue[] = [Number.MIN_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, '']; ;) {
      const page: ReceiptRow[] = (await e.query<ReceiptSqlRow>(tx, e.sql.sql.receiptsInChain, [...pos, PAGE])).rows.map(receiptFromRow);
      current.push(page);
      after.push(page.filter((r) => (r.seq as number) > through));
      if (page.length < PAGE) break;
      const end = page[page.length - 1]!;
      pos = [end.seq as number, end.seq as number, end.receipt_id];
    }
    const known = new Set(current.finish().breaks.map((b) => `${b.name}@${String(b.seq)}`));
    return after.finish().breaks.filter((b) => !known.has(`${b.name}@${String(b.seq)}`));
  }

  /** Makes and caches one anchor inside the caller's transaction: per-kind seq order, per-kind time order, provider first. */
  async function makeAnchor(tx: SqlExecutor, provider: AnchorProvider, seq: number, hash: string, kind: AnchorKind): Promise<Anchor> {
    const lastRow = (await e.query<AnchorRow>(tx, sql().lastAnchor, [kind])).rows[0];
    const last = lastRow === undefined ? null : anchorFromRow(lastRow);
    if (last !== null && seq <= last.seq)
      throw new InvalidArgument(
        `anchor refused: a ${kind} anchor must be above the last ${kind} anchor (seq ${last.seq}); seq ${seq} is not, and nothing was anchored`,
      );
    const made = await askProvider(provider, 'make', async () => {
      const answer = await provider.make(seq, hash, kind);
      return checkAnchor({ ...(isPlainObject(answer) ? answer : { token: answer }), seq, hash, kind }, 'make()');
    });
    if (last !== null && parseTime(made.at).getTime() < parseTime(last.at).getTime())
      throw new InvalidArgument(`anchor refused: the provider's time ${q(made.at)} precedes the last ${kind} anchor's (${q(last.at)}), so nothing was cached`);
    await e.query(tx, sql().insertAnchor, [made.token, seq, hash, kind, made.at]);
    return made;
  }

  return {
    async prune(options: PruneOptions): Promise<PruneResult> {
      // Step 1: the arguments.
      if (typeof options !== 'object' || options === null) throw new PruneRefused('invalid', 'options must be { through, olderThanMs }');
      if (typeof options.through !== 'number' || !Number.isSafeInteger(options.through) || options.through < 1)
        throw new PruneRefused('invalid', `through must be an integer ≥ 1, got ${String(options.through)}`);
      if (typeof options.olderThanMs !== 'number' || !Number.isSafeInteger(options.olderThanMs) || options.olderThanMs < 0)
        throw new PruneRefused('invalid', `older-than must be a non-negative duration, got ${String(options.olderThanMs)}`);
      const through = options.through;
      const provider = options.anchor ?? null;
      return e.write('prune', async (tx, now) => {
        const head = await lockHead(tx);
        if (head === null) throw new PruneRefused('no_chain', 'the store has no chain head row (receipt_chain id = 1)');
        const top = await newestReadable(tx, Number.MAX_SAFE_INTEGER);
        if (top === null) throw new PruneRefused('no_chain', 'the store holds no readable chained receipt');
        // Step 2: never the newest readable receipt (never judged by the head row's value).
        if (through >= top.seq)
          throw new PruneRefused('through_head', `through ${through} reaches the newest readable receipt (seq ${top.seq}): a prune keeps it`);
        // Step 3: forward only.
        const old = await readCheckpoint(tx);
        if (old !== null && through <= old.seq)
          throw new PruneRefused('not_forward', `the chain was already pruned through seq ${old.seq}; through ${through} is not beyond it`);
        // Step 4: a live hold reaching into the prefix.
        const held = (await e.query<HoldRow>(tx, sql().holdsCrossing, [seqParam(through), NAMED])).rows.map(holdFromRow);
        if (held.length > 0) {
          const h = held[0]!;
          throw new PruneRefused(
            'held',
            `hold ${q(h.holdId)} (${q(h.reason)}, placed by ${q(h.placedBy)}) covers seq ${h.fromSeq}${h.toSeq === null ? ' onwards' : `–${h.toSeq}`}; a person must release it first`,
            { holdId: h.holdId },
          );
        }
        // Step 5: the checkpoint is the newest readable receipt in the prefix.
        const point = await newestReadable(tx, through);
        if (point === null) throw new PruneRefused('no_chain', `no readable receipt at or below seq ${through} to record as the checkpoint`);
        if (point.hash === null || point.hash === '')
          throw new PruneRefused('no_chain', `the receipt at seq ${point.seq} has no stored hash to record as the checkpoint`);
        const checkpoint: Checkpoint = { seq: point.seq, hash: point.hash, schema: RECEIPT_SCHEMA, at: storedTime(now) };
        // Step 6: the ledger. An unsettled effect in the prefix, or a charge still inside the window.
        const unsettled = (await e.query<{ effect_key: string; state: string }>(tx, sql().unsettledInPrefix, [seqParam(through), NAMED])).rows;
        if (unsettled.length > 0) {
          const u = unsettled[0]!;
          const list = unsettled.map((r) => `${q(r.effect_key)} is ${String(r.state).toUpperCase()}`).join(', ');
          throw new PruneRefused('unsettled', `effects named in the prefix are not settled: ${list}; resolve them first`, {
            effectKey: u.effect_key,
            state: u.state,
          });
        }
        const floor = storedTime(new Date(now.getTime() - options.olderThanMs));
        const charged = (await e.query<{ effect_key: string; consumed_at: unknown }>(tx, sql().chargedInPrefix, [seqParam(through), floor, NAMED])).rows;
        if (charged.length > 0) {
          const c = charged[0]!;
          throw new PruneRefused(
            'charged',
            `effect ${q(c.effect_key)} was charged at ${q(timeText(c.consumed_at) ?? '?')}, inside the --older-than window (after ${floor}): its ledger row still counts`,
            { effectKey: c.effect_key },
          );
        }
        // Step 7: rule 2, the prune may not make a break the chain does not have.
        const added = await newBreaks(tx, head, old, checkpoint, through);
        if (added.length > 0) {
          const b = added[0]!;
          throw new PruneRefused(
            'new_break',
            `the chain after it would report ${b.name}${b.seq === null ? '' : ` at seq ${b.seq}`} (${b.detail}), which it does not now`,
            {
              breaks: added,
            },
          );
        }
        // Step 8: anchor first, then the checkpoint, then the deletions.
        const anchor = provider === null ? null : await makeAnchor(tx, provider, checkpoint.seq, checkpoint.hash, 'checkpoint');
        await e.query(tx, sql().putCheckpoint, [checkpoint.seq, checkpoint.hash, checkpoint.schema, checkpoint.at]);
        const ledger = await e.query(tx, sql().deletePrefixLedger, [seqParam(through)]);
        const deleted = await e.query(tx, sql().deletePrefix, [seqParam(through)]);
        return { checkpoint, receiptsDeleted: deleted.rowsAffected, ledgerRowsDeleted: ledger.rowsAffected, anchor };
      });
    },

    async putHold(draft: HoldDraft): Promise<Hold> {
      if (typeof draft !== 'object' || draft === null) throw new InvalidArgument('hold must be { holdId, fromSeq, toSeq, reason, placedBy }');
      const holdId = nonEmpty(draft.holdId, 'hold.holdId');
      const fromSeq = checkSeq(draft.fromSeq, 'hold.fromSeq', 1);
      const toSeq = draft.toSeq === null || draft.toSeq === undefined ? null : checkSeq(draft.toSeq, 'hold.toSeq', fromSeq);
      const reason = storedText(nonEmpty(draft.reason, 'hold.reason'));
      const placedBy = storedText(nonEmpty(draft.placedBy, 'hold.placedBy'));
      return e.write('putHold', async (tx, now) => {
        await lockHead(tx);
        if ((await e.query<HoldRow>(tx, sql().selectHold, [holdId])).rows.length > 0) throw new InvalidArgument(`hold ${q(holdId)} already exists`);
        await e.query(tx, sql().insertHold, [holdId, fromSeq, toSeq, reason, placedBy, storedTime(now)]);
        return holdFromRow((await e.query<HoldRow>(tx, sql().selectHold, [holdId])).rows[0]!);
      });
    },

    async releaseHold(holdId: string, by: string): Promise<Hold> {
      const id = nonEmpty(holdId, 'holdId');
      const releasedBy = storedText(nonEmpty(by, 'by'));
      return e.write('releaseHold', async (tx, now) => {
        const { rowsAffected } = await e.query(tx, sql().releaseHold, [storedTime(now), releasedBy, id]);
        if (rowsAffected !== 1) throw new InvalidArgument(`no live hold ${q(id)}: it does not exist or was already released`);
        return holdFromRow((await e.query<HoldRow>(tx, sql().selectHold, [id])).rows[0]!);
      });
    },

    async holds(): Promise<Hold[]> {
      return e.read(async (ex) => (await e.query<HoldRow>(ex, sql().listHolds)).rows.map(holdFromRow));
    },

    async checkpoint(): Promise<Checkpoint | null> {
      return e.read((ex) => readCheckpoint(ex));
    },

    async anchorHead(provider: AnchorProvider): Promise<Anchor> {
      if (typeof provider !== 'object' || provider === null || typeof provider.make !== 'function')
        throw new InvalidArgument('provider must be an AnchorProvider');
      return e.write('anchor', async (tx) => {
        const head = await lockHead(tx);
        if (head === null || head.seq < 1) throw new InvalidArgument('the chain has no receipt to anchor');
        return makeAnchor(tx, provider, head.seq, head.hash, 'interval');
      });
    },

    async cachedAnchors(): Promise<Anchor[]> {
      return e.read(async (ex) => (await e.query<AnchorRow>(ex, sql().listAnchors)).rows.map(anchorFromRow));
    },

    async pruneCheckpoint(): Promise<{ seq: number; hash: string } | null> {
      const c = await e.read((ex) => readCheckpoint(ex));
      return c === null ? null : { seq: c.seq, hash: c.hash };
    },

    async hashAt(seq: number): Promise<string | null> {
      const s = checkSeq(seq, 'seq', 0);
      const rows = await e.read(async (ex) => (await e.query<{ hash: string | null }>(ex, sql().hashAt, [s])).rows);
      return rows.length === 1 && typeof rows[0]!.hash === 'string' ? rows[0]!.hash : null;
    },
  };
}
