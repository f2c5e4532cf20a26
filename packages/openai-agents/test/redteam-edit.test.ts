// Red team of edit-then-approve in the OpenAI Agents adapter: an edit made through another
// surface (CLI, worker, inbox) never went through the tool's parameters.
import { describe, expect, it } from 'vitest';
import { Agent, run } from '@openai/agents';
import { z } from 'zod';
import { Control, loadPolicy, type StoredReceipt } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { approveInterruption, protectTool } from '@ctrlrun/openai-agents';
import { callsTool, control, refundAgent, says, ScriptedModel, type Turn } from './fixtures/agent.js';

async function setup(turns: Turn[]) {
  const store = await createSqlJsStore();
  const receipts: StoredReceipt[] = [];
  const ctrl = control(store, receipts);
  const model = new ScriptedModel(turns);
  return { store, receipts, ctrl, model, ...refundAgent(ctrl, model) };
}

describe('OpenAI Agents edit-then-approve, red team', () => {
  it("an edit approved elsewhere that the tool's parameters refuse never reaches execute: a readable refusal, the grant unused", async () => {
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

describe('OpenAI Agents probe, red team', () => {
  it('the parse-ahead probe calls nothing of a tool with a timeout (the SDK clones the call details for it): an allowed call runs once, in the run', async () => {
    const store = await createSqlJsStore();
    const ctrl = new Control({
      policy: loadPolicy(
        'schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    rules:\n      - {when: {amount_gt: 100000}, decision: approve}\n      - decision: allow\n',
      ),
      store,
      principal: { agent: 'support-agent' },
      logger: { warn: () => {} },
    });
    const calls: string[] = [];
    const refund = protectTool(
      {
        name: 'refund',
        description: 'Refund a payment',
        parameters: z.object({ payment_id: z.string(), amount: z.number().int() }),
        timeoutMs: 60_000,
        timeoutErrorFunction: () => {
          calls.push('timeoutErrorFunction');
          return 'timeout';
        },
        execute: async ({ payment_id }) => {
          calls.push(`execute ${payment_id}`);
          return 'ok';
        },
      },
      { control: ctrl, name: 'stripe.refund' },
    );
    const model = new ScriptedModel([
      callsTool('c1', 'refund', { payment_id: 'p1', amount: 500000 }),
      callsTool('c2', 'refund', { payment_id: 'p2', amount: 5 }),
      says('done'),
    ]);
    const agent = new Agent({ name: 'support', instructions: 'Refund when asked.', model, tools: [refund] });
    const first = await run(agent, 'refund');
    expect(first.interruptions).toHaveLength(1);
    expect(calls).toEqual([]);
    await approveInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana' });
    await run(agent, first.state);
    expect(calls).toEqual(['execute p1', 'execute p2']);
  });
});
