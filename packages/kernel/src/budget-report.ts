/**
 * What an operator reads about budgets (spec 05 §5.1): for every grant that carries one — the
 * authority's own grants, then every live delegation in the store (the original's included) — what
 * it spent of each budget's metric in that budget's rolling window, beside the limit. For the CLI
 * (`ctrlrun budgets`) and the worker's operator route; never shown to an agent, whose refusal
 * names only the grant, the metric and the window.
 *
 * @module
 */
import { delegationFromRecord, type Authority } from './authority/authority.js';
import type { Grant } from './authority/grant.js';
import { InvalidArgument } from './errors.js';
import type { StateStore } from './store/state-store.js';

/** One budget of one grant, and its spend in the window ending now. */
export interface BudgetSpend {
  /** The grant id, or a `dlg_…` delegation id. */
  readonly grantId: string;
  /** Whether the grant is a delegation (a row in the store) rather than one of the document's. */
  readonly delegated: boolean;
  readonly metric: string;
  /** The rolling window, in seconds. */
  readonly window: number;
  readonly limit: number | bigint;
  /** What was charged and not released within the window (committed, ambiguous, in flight). */
  readonly spent: bigint;
}

/**
 * Every budget in force and its spend now, the document's grants first (in document order), then
 * live delegations (oldest first); only `grantId` when given. A delegation row that cannot be read
 * is skipped (the control path refuses every action while one exists: `authority_unreadable`).
 */
export async function budgetSpend(store: StateStore, authority: Authority | null, options: { grantId?: string | null } = {}): Promise<BudgetSpend[]> {
  const ledger = store.budgets?.();
  if (ledger === undefined) throw new InvalidArgument(`the store ${store.name} keeps no budget ledger`);
  const only = options.grantId ?? null;
  const grants: [Grant, boolean][] = [];
  for (const g of authority?.grants.values() ?? []) grants.push([g, false]);
  for (const row of await store.delegations()) {
    try {
      grants.push([delegationFromRecord(row).grant, true]);
    } catch {
      continue;
    }
  }
  const out: BudgetSpend[] = [];
  for (const [grant, delegated] of grants) {
    if (grant.budgets === null || (only !== null && grant.id !== only)) continue;
    for (const b of grant.budgets) {
      out.push({ grantId: grant.id, delegated, metric: b.metric, window: b.window, limit: b.limit, spent: await ledger.spent(grant.id, b.metric, b.window) });
    }
  }
  return out;
}

/** A window in seconds as the largest whole unit (`1d`, `4h`, `90s`). */
export function windowText(seconds: number): string {
  for (const [unit, n] of [
    ['d', 86400],
    ['h', 3600],
    ['m', 60],
  ] as const)
    if (seconds % n === 0) return `${seconds / n}${unit}`;
  return `${seconds}s`;
}
