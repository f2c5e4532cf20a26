/**
 * Exchanges with the worker's budgets route, for its test and the OpenAPI check:
 * {@link budgetExchanges} provokes every status the document lists for it.
 */
import { AGENT, harness, OPERATOR, type Harness } from './harness.js';

/** A grant for the harness's agent credential (billing-agent), budgeted 500 cents a day and 10 refunds an hour. */
export const BUDGET_POLICY = `schema: ctrlrun.policy/v7
authority:
  grants:
    - id: billing
      subject: { agent: "billing-agent" }
      actions: ["stripe.refund"]
      budgets: [{metric: amount, limit: 500, window: P1D}, {metric: count, limit: 10, window: PT1H}]
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`;

export interface Exchange {
  method: string;
  path: string;
  status: number;
  json: unknown;
}

/** Every status the budgets route documents, provoked against a real app; what was sent and answered. */
export async function budgetExchanges(h?: Harness): Promise<Exchange[]> {
  const app = h ?? (await harness({}, BUDGET_POLICY));
  const seen: Exchange[] = [];
  const call = async (path: string, token: string | null) => {
    const r = await app.call('GET', path, token);
    seen.push({ method: 'GET', path, status: r.status, json: r.json });
    return r;
  };
  await call('/v1/budgets', OPERATOR);
  await call('/v1/budgets?grant=billing', OPERATOR);
  await call('/v1/budgets?grant=%20bad%20', OPERATOR);
  await call('/v1/budgets', AGENT);
  await call('/v1/budgets', null);
  return seen;
}
