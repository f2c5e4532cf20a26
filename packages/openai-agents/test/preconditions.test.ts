// protectTools({ preconditions }) under run(): the interruption's request pins the world's
// fingerprint; approved, a refund whose world changed is refused and never runs.
import { describe, expect, it } from 'vitest';
import { Agent, run } from '@openai/agents';
import { z } from 'zod';
import { preconditionFingerprint, type StoredReceipt } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { approveInterruption, protectTools } from '@ctrlrun/openai-agents';
import { callsTool, control, says, ScriptedModel } from './fixtures/agent.js';

describe('protectTools passes a precondition provider through', () => {
  it('pinned at the interruption; a changed world refuses the approved refund and leaves the approval granted', async () => {
    const store = await createSqlJsStore();
    const receipts: StoredReceipt[] = [];
    const ctrl = control(store, receipts);
    const order = { status: 'paid' };
    const refunds: unknown[] = [];
    const tools = protectTools(
      [
        {
          name: 'refund',
          description: 'Refund a payment',
          parameters: z.object({ payment_id: z.string(), amount: z.number().int() }),
          execute: async ({ payment_id }) => (refunds.push(payment_id), { ok: true }),
        },
      ],
      { control: ctrl, names: { refund: 'stripe.refund' }, preconditions: () => ({ order: 'o1', status: order.status }) },
    );
    const model = new ScriptedModel([callsTool('c1', 'refund', { payment_id: 'p1', amount: 500000 }), says('Done.'), says('Done.')]);
    const agent = new Agent({ name: 'support', instructions: 'Refund when asked.', model, tools });
    const first = await run(agent, 'refund p1');
    const [pending] = await store.listApprovals('pending');
    expect(pending!.request.preconditionFingerprint).toBe(preconditionFingerprint({ order: 'o1', status: 'paid' }));
    await approveInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana' });
    order.status = 'refunded';
    await run(agent, first.state);
    expect(refunds).toEqual([]);
    expect(JSON.stringify(model.toolOutputs().at(-1))).toContain('precondition_changed');
    expect((await store.getApproval(pending!.request.requestId))?.status, 'left granted').toBe('granted');
  });
});
