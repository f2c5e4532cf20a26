/**
 * The budget ledger inside a store transaction (spec 05 §5.1): the predicate over a reservation's
 * charges, read before anything is written, and the charge rows written after the reservation,
 * both in the reservation's own transaction; plus the operator's reads. Postgres serialises each
 * charged grant on its `budget_anchor` row (in grant id order, so two reservations never wait on
 * each other in a circle); SQLite's `BEGIN IMMEDIATE` already does.
 *
 * @module
 */
import { BudgetExhausted, overspent, windowFloor, type BudgetCharge, type LedgerEntry } from '../budget.js';
import { InvalidArgument, StoreError } from '../errors.js';
import { storedTime } from '../time.js';
import type { SqlExecutor, SqlValue } from './driver.js';
import type { SqlEngine } from './engine.js';

function bigOf(v: SqlValue | undefined, what: string): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v);
  throw new StoreError(`[kernel] column ${what} holds ${String(v)}, not an integer`);
}

function intOf(v: SqlValue | undefined, what: string): number {
  const n = bigOf(v, what);
  if (n > BigInt(Number.MAX_SAFE_INTEGER) || n < BigInt(Number.MIN_SAFE_INTEGER))
    throw new StoreError(`[kernel] column ${what} holds ${n}, not a safe integer`);
  return Number(n);
}

/** Each charge's window sum at `now`, in `charges` order; the grants locked first where the dialect locks. */
async function spentOn(e: SqlEngine, ex: SqlExecutor, charges: readonly BudgetCharge[], now: Date, lock: boolean): Promise<bigint[]> {
  const sql = e.sql.sql.budget;
  if (lock && sql.anchor !== null && sql.lockAnchor !== null) {
    for (const id of [...new Set(charges.map((c) => c.grantId))].sort()) {
      await e.query(ex, sql.anchor, [id]);
      await e.query(ex, sql.lockAnchor, [id]);
    }
  }
  const out: bigint[] = [];
  for (const c of charges) {
    const row = (await e.query<{ spent: SqlValue }>(ex, sql.spent, [c.grantId, c.metric, storedTime(windowFloor(now, c.window))])).rows[0];
    out.push(bigOf(row?.spent, 'budget_ledger.amount (sum)'));
  }
  return out;
}

/**
 * The predicate, in the reservation's transaction before any write: every charge fits its window
 * (`spent + amount ≤ limit`), else {@link BudgetExhausted} naming the first that does not (the
 * transaction then writes nothing).
 */
export async function checkBudgets(e: SqlEngine, tx: SqlExecutor, charges: readonly BudgetCharge[], now: Date, actionId: string): Promise<void> {
  if (charges.length === 0) return;
  const over = overspent(charges, await spentOn(e, tx, charges, now, true));
  if (over !== null) throw new BudgetExhausted(over, { actionId });
}

/** The charge rows, after the reservation: one per charge, under the reservation's attempt (a row already there is kept). */
export async function writeCharges(e: SqlEngine, tx: SqlExecutor, charges: readonly BudgetCharge[], key: string, attempt: number, now: Date): Promise<void> {
  const at = storedTime(now);
  for (const c of charges) await e.query(tx, e.sql.sql.budget.insertCharge, [c.grantId, c.metric, String(c.amount), key, attempt, at]);
}

/** The predicate as a read (observe mode): the first charge that would not fit now, or null. */
export async function wouldOverspend(e: SqlEngine, charges: readonly BudgetCharge[]): Promise<BudgetCharge | null> {
  if (charges.length === 0) return null;
  return e.read(async (ex, now) => overspent(charges, await spentOn(e, ex, charges, now(), false)));
}

/** What `grantId` spent of `metric` in the window of `window` seconds ending now (unreleased rows only). */
export async function spentInWindow(e: SqlEngine, grantId: string, metric: string, window: number): Promise<bigint> {
  if (typeof grantId !== 'string' || grantId === '' || typeof metric !== 'string' || metric === '')
    throw new InvalidArgument('grantId and metric must be non-empty strings');
  if (!Number.isSafeInteger(window) || window <= 0) throw new InvalidArgument('window must be a positive number of seconds');
  return e.read(async (ex, now) => (await spentOn(e, ex, [{ grantId, metric, amount: 0, limit: 0, window }], now(), false))[0]!);
}

/** Options of {@link consumptions}: each filter optional; `since` a stored time, closed. */
export interface ConsumptionFilter {
  grantId?: string | null;
  metric?: string | null;
  since?: string | null;
  effectKey?: string | null;
  /** At most this many rows (1–10 000; default 10 000). */
  limit?: number;
}

interface LedgerRow {
  id: SqlValue;
  grant_id: string;
  metric: string;
  amount: SqlValue;
  effect_key: string;
  attempt: SqlValue;
  consumed_at: string;
  released_at: string | null;
}

/** A time column as this build stores text: Postgres renders a whole second with six zeros, SQLite as written. */
function stored(t: string): string {
  return t.endsWith('.000000+00:00') ? `${t.slice(0, -13)}+00:00` : t;
}

/** The ledger rows the filter selects, in insertion order (the original's `consumptions`). */
export async function consumptions(e: SqlEngine, filter: ConsumptionFilter = {}): Promise<LedgerEntry[]> {
  const limit = filter.limit ?? 10_000;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) throw new InvalidArgument('limit must be an integer from 1 to 10000');
  const v = (x: string | null | undefined): string | null => x ?? null;
  const params: SqlValue[] = [
    v(filter.grantId),
    v(filter.grantId),
    v(filter.metric),
    v(filter.metric),
    v(filter.since),
    v(filter.since),
    v(filter.effectKey),
    v(filter.effectKey),
    limit,
  ];
  const rows = await e.read(async (ex) => (await e.query<LedgerRow>(ex, e.sql.sql.budget.consumptions, params)).rows);
  return rows.map((r) => ({
    id: intOf(r.id, 'budget_ledger.id'),
    grantId: r.grant_id,
    metric: r.metric,
    amount: bigOf(r.amount, 'budget_ledger.amount'),
    effectKey: r.effect_key,
    attempt: intOf(r.attempt, 'budget_ledger.attempt'),
    consumedAt: stored(r.consumed_at),
    releasedAt: r.released_at === null || r.released_at === undefined ? null : stored(r.released_at),
  }));
}
