// A wrong answer to an interruption (a stale screen, a second tab) is refused and leaves the call
// waiting: the right answer then runs it once. The real Runner and RunState, a scripted Model.
import { describe, expect, it } from 'vitest';
import { run, RunState } from '@openai/agents';
import { ApprovalMismatch, type StoredReceipt } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { approvalRequestFor, approveInterruption, rejectInterruption } from '@ctrlrun/openai-agents';
import { callsTool, control, refundAgent, says, ScriptedModel, type Turn } from './fixtures/agent.js';

async function setup(turns: Turn[]) {
  const store = await createSqlJsStore();
  const receipts: StoredReceipt[] = [];
  const ctrl = control(store, receipts);
  const model = new ScriptedModel(turns);
  return { store, receipts, ctrl, model, ...refundAgent(ctrl, model) };
}

describe('a wrong answer leaves the call waiting', () => {
  it('approve and reject naming another request are refused, nothing recorded; the right answer then runs the refund once', async () => {
    const ctx = await setup([
      callsTool('c1', 'refund', { payment_id: 'w0', amount: 600000 }),
      callsTool('c2', 'refund', { payment_id: 'w1', amount: 500000 }),
      says('Refunded.'),
    ]);
    // Another pending request: the one a second tab shows.
    const stale = (await approvalRequestFor((await run(ctx.agent, 'refund w0')).interruptions[0]!))!.request.requestId;
    const first = await run(ctx.agent, 'refund w1');
    const item = first.interruptions[0]!;
    const shown = await approvalRequestFor(item);
    for (const answer of [
      () => approveInterruption(first.state, item, { approver: 'human:ana', requestId: stale }),
      () => rejectInterruption(first.state, item, { approver: 'human:ana', requestId: stale }),
      () => approveInterruption(first.state, item, { approver: 'human:ana', requestId: stale, edit: { arguments: { payment_id: 'w1', amount: 1 } } }),
    ]) {
      const err = await answer().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApprovalMismatch);
      expect((err as Error).message).toMatch(/nothing was answered/);
    }
    expect((await ctx.store.listApprovals()).map((r) => [r.request.requestId, r.status])).toEqual([
      [stale, 'pending'],
      [shown!.request.requestId, 'pending'],
    ]);
    // The state was answered neither way: serialized and read back, it still waits on the same call.
    const state = await RunState.fromString(ctx.agent, first.state.toString());
    expect(state.getInterruptions().map((i) => i.arguments)).toEqual([item.arguments]);

    await approveInterruption(state, state.getInterruptions()[0]!, { approver: 'human:bo', requestId: shown!.request.requestId });
    const done = await run(ctx.agent, state);
    expect(done.finalOutput).toBe('Refunded.');
    expect(ctx.done.refunds).toEqual([{ payment_id: 'w1', amount: 500000 }]);
    expect((await ctx.store.listApprovals()).map((r) => [r.status, r.approver])).toEqual([
      ['pending', null],
      ['consumed', 'human:bo'],
    ]);
    expect(ctx.receipts.filter((r) => r.document['result'] === 'committed')).toHaveLength(1);
  });

  it('a run resumed after a refused answer pauses again on the same request; the right answer then runs the refund once', async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'w2', amount: 500000 }), says('Refunded.')]);
    const first = await run(ctx.agent, 'refund w2');
    const shown = await approvalRequestFor(first.interruptions[0]!);
    await expect(approveInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana', requestId: 'apr_stale' })).rejects.toBeInstanceOf(
      ApprovalMismatch,
    );
    // The app goes on with the unanswered state: the run stops on the same call again.
    const again = await run(ctx.agent, first.state);
    expect(again.interruptions.map((i) => i.arguments)).toEqual(['{"payment_id":"w2","amount":500000}']);
    expect((await approvalRequestFor(again.interruptions[0]!))!.request.requestId).toBe(shown!.request.requestId);
    expect(ctx.done.refunds).toEqual([]);

    await approveInterruption(again.state, again.interruptions[0]!, { approver: 'human:ana', requestId: shown!.request.requestId });
    const done = await run(ctx.agent, again.state);
    expect(done.finalOutput).toBe('Refunded.');
    expect(ctx.done.refunds).toEqual([{ payment_id: 'w2', amount: 500000 }]);
    expect(await ctx.store.listApprovals()).toHaveLength(1);
  });
});

describe('an answer for a call the run state does not wait on', () => {
  it('an interruption from another run (same tool, same call id) is refused, nothing answered; the right one then runs once', async () => {
    // Models that number their calls (call_0, call_1, …) give two runs the same call id.
    const ctx = await setup([
      callsTool('c1', 'refund', { payment_id: 'a1', amount: 600000 }),
      callsTool('c1', 'refund', { payment_id: 'b1', amount: 500000 }),
      says('Refunded b1.'),
    ]);
    const a = await run(ctx.agent, 'refund a1');
    const b = await run(ctx.agent, 'refund b1');
    const staleItem = a.interruptions[0]!; // what a stale screen still shows
    for (const answer of [
      () => approveInterruption(b.state, staleItem, { approver: 'human:ana' }),
      () => rejectInterruption(b.state, staleItem, { approver: 'human:ana' }),
    ]) {
      const err = await answer().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApprovalMismatch);
      expect((err as ApprovalMismatch).reason).toBe('mismatch');
      expect((err as Error).message).toBe(
        'stripe.refund: the answer is for call "c1" with arguments "{\\"payment_id\\":\\"a1\\",\\"amount\\":600000}", which this run state does not wait on (an interruption from another run or an older state); nothing was answered',
      );
    }
    expect((await ctx.store.listApprovals()).map((r) => [r.request.action.canonicalArguments['payment_id'], r.status])).toEqual([
      ['a1', 'pending'],
      ['b1', 'pending'],
    ]);
    // The same call read back from the saved state is the one it waits on: accepted.
    const state = await RunState.fromString(ctx.agent, b.state.toString());
    await approveInterruption(state, state.getInterruptions()[0]!, { approver: 'human:bo' });
    const done = await run(ctx.agent, state);
    expect(done.finalOutput).toBe('Refunded b1.');
    expect(ctx.done.refunds).toEqual([{ payment_id: 'b1', amount: 500000 }]);
    expect((await ctx.store.listApprovals()).map((r) => [r.request.action.canonicalArguments['payment_id'], r.status])).toEqual([
      ['a1', 'pending'],
      ['b1', 'consumed'],
    ]);
  });

  it('a rejection after an approval of the same call is refused, not dropped in silence; the approved call runs once', async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'r1', amount: 500000 }), says('Refunded.')]);
    const first = await run(ctx.agent, 'refund r1');
    const item = first.interruptions[0]!;
    await approveInterruption(first.state, item, { approver: 'human:ana' });
    const err = await rejectInterruption(first.state, item, { approver: 'human:bo', message: 'no' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalMismatch);
    expect((err as ApprovalMismatch).reason).toBe('answered');
    expect((err as Error).message).toMatch(/already approved in this run state/);
    const done = await run(ctx.agent, first.state);
    expect(done.finalOutput).toBe('Refunded.');
    expect(ctx.done.refunds).toEqual([{ payment_id: 'r1', amount: 500000 }]);
    expect((await ctx.store.listApprovals()).map((r) => [r.status, r.approver])).toEqual([['consumed', 'human:ana']]);
  });
});
