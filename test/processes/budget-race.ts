/**
 * Refunds racing one budget, for any store a worker can open by URL: `processes` real OS
 * processes each run their own refunds (distinct effect keys) through `Control.execute` under one
 * grant whose budget is `limit` cents a day, every fifth refund's executor (the first of each process among them) failing with
 * `NotExecuted`. The ledger is the judge: the unreleased charges never sum past the limit, every
 * committed refund holds exactly its charge, every refused one left no charge and no reservation,
 * and every failed one's charge is released.
 */
import type { StateStore } from '@ctrlrun/kernel';
import { expect } from 'vitest';
import { lastLine, PROGRESS_EVERY, RENDEZVOUS_TIMEOUT_S, runAll, tempDir } from './harness.js';

/** The grant: `limit` cents of `amount` per day for the race agent (the processes' principal). */
export function budgetPolicy(limit: number): string {
  return `schema: ctrlrun.policy/v7
authority:
  grants:
    - id: refund-desk
      subject: { agent: "race-agent" }
      actions: ["budget.refund"]
      budgets: [{metric: amount, limit: ${limit}, window: P1D}]
actions:
  budget.refund:
    effect: "refund:{payment_id}"
    decision: allow
`;
}

interface Outcome {
  payment_id: string;
  amount: number;
  fail: boolean;
  outcome: string;
}

/** Runs the race on `store` (created and migrated), the workers opening it at `url`, and asserts the ledger. */
export async function raceBudget(
  store: StateStore,
  url: string,
  opts: { processes: number; refunds: number; limit: number; tempPrefix: string },
): Promise<void> {
  const rendezvous = tempDir(`${opts.tempPrefix}-rendezvous`);
  try {
    const finished = await runAll(
      Array.from({ length: opts.processes }, (_, p) => ({
        kind: 'refund-budget' as const,
        url,
        policy: budgetPolicy(opts.limit),
        // Amounts 100..1000 cents; the demand is several times the limit, so the limit is reached under contention.
        refunds: Array.from({ length: opts.refunds }, (_, i) => ({
          payment_id: `p${p}-${i}`,
          amount: 100 + ((p * 37 + i * 53) % 10) * 100,
          fail: i % 5 === 0,
        })),
        rendezvous_dir: rendezvous.dir,
        contenders: opts.processes,
        rendezvous_timeout: RENDEZVOUS_TIMEOUT_S,
        progress_every: PROGRESS_EVERY,
      })),
    );
    const outcomes = finished.flatMap((f) => (lastLine(f)['outcomes'] as Outcome[]) ?? []);
    expect(outcomes).toHaveLength(opts.processes * opts.refunds);
    const by = (o: string) => outcomes.filter((x) => x.outcome === o);
    const committed = by('committed');
    const refused = by('BudgetExhausted:budget_exhausted');
    const failed = by('failed');
    expect(
      committed.length + refused.length + failed.length,
      `no other outcome: ${JSON.stringify(outcomes.filter((x) => !['committed', 'failed', 'BudgetExhausted:budget_exhausted'].includes(x.outcome)).slice(0, 5))}`,
    ).toBe(outcomes.length);
    expect(refused.length, 'the limit was reached: some refunds were refused').toBeGreaterThan(0);
    expect(failed.length, 'some executors failed').toBeGreaterThan(0);

    const spent = committed.reduce((s, x) => s + x.amount, 0);
    expect(spent, 'the committed refunds never sum past the limit').toBeLessThanOrEqual(opts.limit);
    const ledger = store.budgets!();
    expect(await ledger.spent('refund-desk', 'amount', 86400), 'the ledger holds exactly the committed charges').toBe(BigInt(spent));
    const rows = await ledger.consumptions({ grantId: 'refund-desk' });
    const rowOf = new Map(rows.map((r) => [r.effectKey, r]));
    expect(rows).toHaveLength(committed.length + failed.length);
    for (const x of committed)
      expect(rowOf.get(`refund:${x.payment_id}`), x.payment_id).toMatchObject({ amount: BigInt(x.amount), releasedAt: null, attempt: 1 });
    for (const x of failed) {
      const row = rowOf.get(`refund:${x.payment_id}`);
      expect(row?.releasedAt, `${x.payment_id}: a failed effect's charge is released`).not.toBeNull();
      expect(await store.getEffect(`refund:${x.payment_id}`)).toMatchObject({ state: 'failed' });
    }
    for (const x of refused) {
      expect(rowOf.has(`refund:${x.payment_id}`), `${x.payment_id}: a refused refund left no charge`).toBe(false);
      expect(await store.getEffect(`refund:${x.payment_id}`), `${x.payment_id}: and no reservation`).toBeNull();
    }
  } finally {
    rendezvous.remove();
  }
}
