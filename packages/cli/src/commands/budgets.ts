/**
 * `ctrlrun budgets [--grant ID] [--json]`: what each budgeted grant spent of each budget in its
 * rolling window, beside the limit (spec 05 §5.1): the policy's grants and every live delegation
 * in the store, the original's included. For the operator at the shell; an agent's refusal names
 * only the grant, the metric and the window.
 *
 * @module
 */
import { budgetSpend, windowText } from '@ctrlrun/kernel';
import { STORE_URL, type Command } from '../command.js';
import { loadPolicyFile, policyPath, storeTarget } from '../discovery.js';
import { openListing } from '../stores.js';

/** The schema tag of `budgets --json`. */
export const BUDGETS_SCHEMA = 'ctrlrun.budgets/v1';

export const budgets: Command = {
  name: 'budgets',
  summary: 'show what each budgeted grant spent per metric in its window, beside the limit',
  positionals: [],
  options: {
    grant: { type: 'string', value: 'ID', help: 'only this grant or dlg_… delegation' },
    json: { type: 'boolean', help: `one ${BUDGETS_SCHEMA} document: {grant_id, delegated, metric, window_seconds, limit, spent} per budget` },
    'store-url': STORE_URL,
  },
  details:
    'A charge counts while its effect is committed, ambiguous or in flight; a failed effect releases its charge. The window is rolling: a charge older than it no longer counts.',
  async run({ io, values, out, err, json }) {
    const { policy } = loadPolicyFile(policyPath(io));
    const store = await openListing(storeTarget(io, values['store-url'] as string | undefined), err);
    try {
      const grant = (values['grant'] as string | undefined) ?? null;
      const rows = await budgetSpend(store, policy.authority, { grantId: grant });
      if (values['json'] === true) {
        const doc = rows.map((r) => ({
          grant_id: r.grantId,
          delegated: r.delegated,
          metric: r.metric,
          window_seconds: r.window,
          limit: String(r.limit),
          spent: String(r.spent),
        }));
        json(JSON.stringify({ schema: BUDGETS_SCHEMA, budgets: doc }));
        return 0;
      }
      if (rows.length === 0) {
        out(grant === null ? 'no grant carries a budget' : `grant ${JSON.stringify(grant)} carries no budget (or is not in force)`);
        return 0;
      }
      for (const r of rows) {
        const pct = BigInt(r.limit) === 0n ? '' : `  (${(Number((r.spent * 1000n) / BigInt(r.limit)) / 10).toFixed(1)}%)`;
        out(`${r.grantId}  ${r.metric}  ${r.spent} of ${r.limit} in the last ${windowText(r.window)}${pct}`);
      }
      return 0;
    } finally {
      await store.close();
    }
  },
};
