// Red team of edit-then-approve in the OpenAI Agents adapter: an edit made through another
// surface (CLI, worker, inbox) never went through the tool's parameters.
import { describe, expect, it } from 'vitest';
import { run } from '@openai/agents';
import type { StoredReceipt } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { approveInterruption } from '@ctrlrun/openai-agents';
import { callsTool, control, refundAgent, says, ScriptedModel, type Turn } from './fixtures/agent.js';

async function setup(turns: Turn[]) {
  const store = await createSqlJsStore();
  const receipts: StoredReceipt[] = [];
  const ctrl = control(store, receipts);
  const model = new ScriptedModel(turns);
  return { store, receipts, ctrl, model, ...refundAgent(ctrl, model) };
}

describe('OpenAI Agents edit-then-approve, red team', () => {
  it('an edit approved elsewhere that the tool\'s parameters refuse never reaches execute: a readable refusal, the grant unused', async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'p1', amount: 500000 }), says('ok')]);
    const first = await run(ctx.agent, 'refund p1');
    const [pending] = await ctx.store.listApprovals('pending');
    // What `ctrlrun approve --edit` does: the policy decides, the tool's parameters are never asked.
    const edited = await ctx.ctrl.grantApproval(pending!.request.requestId, { approver: 'ops:bob', edit: { arguments: { payment_id: 7, amount: 300000 } } });
    await approveInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana' });
    await run(ctx.agent, first.state);
    expect(ctx.done.refunds).toEqual([]);
    expect(JSON.stringify(ctx.model.toolOutputs().at(-1))).toMatch(/refused.*parameters/);
    expect((await ctx.store.getApproval(edited.approvalId))?.status).toBe('granted');
  });

  it('an edit approved elsewhere that the parameters admit unchanged runs once', async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'p1', amount: 500000 }), says('ok')]);
    const first = await run(ctx.agent, 'refund p1');
    const [pending] = await ctx.store.listApprovals('pending');
    await ctx.ctrl.grantApproval(pending!.request.requestId, { approver: 'ops:bob', edit: { arguments: { payment_id: 'p2', amount: 300000 } } });
    await approveInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana' });
    await run(ctx.agent, first.state);
    expect(ctx.done.refunds).toEqual([{ payment_id: 'p2', amount: 300000 }]);
  });
});
