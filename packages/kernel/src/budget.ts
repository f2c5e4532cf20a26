/**
 * Budget charges (spec 05 §5.1): what one action spends of each budget on its deciding grant
 * chain, the check the store runs on them inside the reservation transaction, and the refusal
 * when one would be overspent. Pure: the store sums the ledger, this module decides.
 *
 * @module
 */
import { ActionDenied, InvalidArgument } from './errors.js';

/** One charge an action makes: `amount` of `metric` against `grantId`'s budget of `limit` per `window` seconds. */
export interface BudgetCharge {
  /** The grant (or `dlg_…` delegation, or envelope) whose budget is charged. */
  readonly grantId: string;
  readonly metric: string;
  /** A non-negative integer: 1 for metric `count`, else the action's argument of that name. */
  readonly amount: number | bigint;
  /** The budget's limit: the sum within the window may reach it, never pass it. */
  readonly limit: number | bigint;
  /** The budget's rolling window, in whole seconds. */
  readonly window: number;
}

/** One ledger row, as the original's `consumptions` reads it (in insertion order). */
export interface LedgerEntry {
  readonly id: number;
  readonly grantId: string;
  readonly metric: string;
  readonly amount: bigint;
  readonly effectKey: string;
  readonly attempt: number;
  /** Stored time (`…+00:00`). */
  readonly consumedAt: string;
  readonly releasedAt: string | null;
}

/** The reason a reservation refused for an overspent budget (the original's string). */
export const BUDGET_EXHAUSTED = 'budget_exhausted';
/** The reason an action whose budget metric cannot be read from its arguments is denied (the original's string). */
export const BUDGET_UNMEASURABLE = 'budget_unmeasurable';
/** The reason a budgeted chain's action without an effect key is denied (the original's string). */
export const BUDGET_UNKEYED = 'budget_unkeyed';

/**
 * A budget would be overspent: nothing was written. Names the grant, the metric and the window,
 * never what was spent or what is left (a refusal is read by the agent that was refused).
 */
export class BudgetExhausted extends ActionDenied {
  override name = 'BudgetExhausted';
  readonly grantId: string;
  readonly metric: string;
  /** The window, in seconds. */
  readonly window: number;
  constructor(charge: Pick<BudgetCharge, 'grantId' | 'metric' | 'window'>, options: { actionId?: string | null; actionName?: string } = {}) {
    const who = options.actionName === undefined ? 'the action' : options.actionName;
    super(BUDGET_EXHAUSTED, {
      actionId: options.actionId ?? null,
      message: `${who} refused (${BUDGET_EXHAUSTED}): grant ${JSON.stringify(charge.grantId)} has no budget left for ${JSON.stringify(charge.metric)} in its window of ${charge.window} s; nothing was reserved or charged`,
    });
    this.grantId = charge.grantId;
    this.metric = charge.metric;
    this.window = charge.window;
  }
}

function isAmount(v: unknown): v is number | bigint {
  return (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) || (typeof v === 'bigint' && v >= 0n);
}

/**
 * Checks charges as a store takes them: each a `{grantId, metric, amount, limit, window}` with
 * non-negative integers and a positive window; two on one `(grantId, metric)` with different
 * amounts are an `InvalidArgument` (they would write one ledger row for two spends). Returns a
 * frozen copy.
 */
export function checkCharges(charges: unknown): readonly BudgetCharge[] {
  if (charges === undefined || charges === null) return [];
  if (!Array.isArray(charges)) throw new InvalidArgument('charges must be a list of {grantId, metric, amount, limit, window}');
  const seen = new Map<string, bigint>();
  return Object.freeze(
    charges.map((c: unknown, i) => {
      const at = `charges[${i}]`;
      if (typeof c !== 'object' || c === null) throw new InvalidArgument(`${at} must be {grantId, metric, amount, limit, window}`);
      const { grantId, metric, amount, limit, window } = c as Record<string, unknown>;
      if (typeof grantId !== 'string' || grantId === '') throw new InvalidArgument(`${at}.grantId must be a non-empty string`);
      if (typeof metric !== 'string' || metric === '') throw new InvalidArgument(`${at}.metric must be a non-empty string`);
      if (!isAmount(amount)) throw new InvalidArgument(`${at}.amount must be a non-negative integer`);
      if (!isAmount(limit)) throw new InvalidArgument(`${at}.limit must be a non-negative integer`);
      if (typeof window !== 'number' || !Number.isSafeInteger(window) || window <= 0)
        throw new InvalidArgument(`${at}.window must be a positive number of seconds`);
      const key = JSON.stringify([grantId, metric]);
      const before = seen.get(key);
      if (before !== undefined && before !== BigInt(amount))
        throw new InvalidArgument(`${at}: two charges on grant ${JSON.stringify(grantId)}, metric ${JSON.stringify(metric)} with different amounts`);
      seen.set(key, BigInt(amount));
      return Object.freeze({ grantId, metric, amount, limit, window });
    }),
  );
}

/** The first charge the spends break (`spent + amount > limit`), or null: all fit. `spent[i]` is charge i's window sum. */
export function overspent(charges: readonly BudgetCharge[], spent: readonly bigint[]): BudgetCharge | null {
  for (let i = 0; i < charges.length; i++) {
    const c = charges[i]!;
    if (spent[i]! + BigInt(c.amount) > BigInt(c.limit)) return c;
  }
  return null;
}

/** The window's floor: `now − window` (closed: a row consumed exactly there still counts). */
export function windowFloor(now: Date, window: number): Date {
  return new Date(now.getTime() - window * 1000);
}
