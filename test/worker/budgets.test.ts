/**
 * `GET /v1/budgets` (spec 05 §5.1): what each budgeted grant spent per metric in its window,
 * beside the limit, for an operator; an agent's credential is 403, and the agent's own refusal
 * (budget_exhausted) names the grant, the metric and the window, never the balance.
 */
import { describe, expect, it } from 'vitest';
import { AGENT, harness } from './harness.js';
import { BUDGET_POLICY, budgetExchanges } from './budgets-exchanges.js';

describe('GET /v1/budgets', () => {
  it('shows an operator the spend per grant, metric and window; never an agent', async () => {
    const h = await harness({}, BUDGET_POLICY);
    const refund = (id: string, amount: number) => h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: id, amount } });
    const first = await refund('b1', 300);
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    const over = await refund('b2', 201);
    const error = over.json['error'] as Record<string, unknown>;
    expect([over.status, error['reason']], JSON.stringify(over.json)).toEqual([403, 'budget_exhausted']);
    expect(String(error['message'])).toContain('"billing"');
    expect(JSON.stringify(over.json)).not.toContain('300');
    expect(h.calls).toEqual(['refund b1']);

    const [all, one, bad, agent, none] = await budgetExchanges(h);
    expect(all!.status).toBe(200);
    expect(all!.json).toEqual({
      budgets: [
        { grantId: 'billing', delegated: false, metric: 'amount', windowSeconds: 86400, limit: '500', spent: '300' },
        { grantId: 'billing', delegated: false, metric: 'count', windowSeconds: 3600, limit: '10', spent: '1' },
      ],
    });
    expect(one!.json).toEqual(all!.json);
    expect(bad!.status).toBe(400);
    expect(agent!.status).toBe(403);
    expect(JSON.stringify(agent!.json)).not.toContain('300');
    expect(none!.status).toBe(401);
  });
});
