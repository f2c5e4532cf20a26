// protect({ wait }): block on the human's answer, then run the same action presenting it.
import { describe, expect, it } from 'vitest';
import {
  ActionDenied,
  ApprovalRequired,
  ApprovalTimeout,
  answerCommands,
  InvalidArgument,
  LocalApprovalProvider,
  protect,
  type ApprovalProvider,
  type WaitingFor,
} from '@ctrlrun/kernel';
import { setup } from './harness.js';

const MIN = 60_000;

/** A provider whose "sleep" is where the human acts (a second terminal), then the clock moves on. */
function human(ctx: Awaited<ReturnType<typeof setup>>, answer: (id: string) => Promise<unknown>) {
  return new LocalApprovalProvider(ctx.store, {
    clock: ctx.clock,
    sleep: async (ms) => {
      ctx.advance(ms);
      for (const r of await ctx.store.listApprovals('pending')) await answer(r.request.requestId);
    },
  });
}

function refunder(ctx: Awaited<ReturnType<typeof setup>>, wait: Parameters<typeof protect>[1]['wait']) {
  const calls: string[] = [];
  const fn = protect<{ payment_id: string; amount: number }, string>(
    (a) => {
      calls.push(a['payment_id'] as string);
      return `re_${String(a['payment_id'])}`;
    },
    { control: ctx.control, name: 'stripe.refund', wait },
  );
  return { fn, calls };
}

describe('protect with wait', () => {
  it('waits for the grant and runs the same action once, presenting the approval', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx, { provider: human(ctx, (id) => ctx.control.grantApproval(id, { approver: 'human:ana' })) });
    expect(await fn({ payment_id: 'w1', amount: 200000 })).toBe('re_w1');
    expect(calls).toEqual(['w1']);
    const receipt = ctx.receipts.at(-1)!.document;
    expect([receipt['result'], receipt['decision'], receipt['approver']]).toEqual(['committed', 'approve', 'human:ana']);
    const [req] = await ctx.store.listApprovals();
    expect(req!.status).toBe('consumed');
    expect(receipt['approval_id']).toBe(req!.request.requestId);
    expect(receipt['action_id']).toBe(req!.request.action.actionId);
  });

  it('a denial is refused by the control path as approval_denied, and nothing runs', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx, { provider: human(ctx, (id) => ctx.control.denyApproval(id, { approver: 'human:ana' })) });
    const err = await fn({ payment_id: 'w2', amount: 200000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect((err as ActionDenied).reason).toBe('approval_denied');
    expect(calls).toEqual([]);
  });

  it('no answer in time is ApprovalTimeout, and the request stays pending', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx, { timeoutMs: 2 * MIN, provider: human(ctx, async () => undefined) });
    await expect(fn({ payment_id: 'w3', amount: 200000 })).rejects.toBeInstanceOf(ApprovalTimeout);
    expect(calls).toEqual([]);
    expect((await ctx.store.listApprovals())[0]!.status).toBe('pending');
  });

  it('an allowed action never waits, and bad wait options are refused at wrap time', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx, true);
    expect(await fn({ payment_id: 'w4', amount: 500 })).toBe('re_w4');
    expect(calls).toEqual(['w4']);
    expect(() => protect(() => 1, { control: ctx.control, name: 'x', wait: { timeoutMs: 0 } })).toThrow('wait.timeoutMs');
    expect(() => protect(() => 1, { control: ctx.control, name: 'x', wait: 'yes' as never })).toThrow('wait must be');
  });

  it('says what it waits for before waiting: onWaiting gets the request id and the commands that answer it', async () => {
    const ctx = await setup();
    const told: WaitingFor[] = [];
    const seenWhenAnswered: number[] = [];
    const provider = human(ctx, async (id) => {
      seenWhenAnswered.push(told.length);
      await ctx.control.grantApproval(id, { approver: 'human:ana' });
    });
    const { fn } = refunder(ctx, { provider, onWaiting: (w) => void told.push(w) });
    expect(await fn({ payment_id: 'w5', amount: 200000 })).toBe('re_w5');
    const [req] = await ctx.store.listApprovals();
    const id = req!.request.requestId;
    expect(told).toEqual([
      {
        requestId: id,
        name: 'stripe.refund',
        actionHash: req!.request.actionHash,
        approve: `npx ctrlrun approve ${id} --as NAME`,
        deny: `npx ctrlrun deny ${id} --as NAME`,
      },
    ]);
    expect(seenWhenAnswered[0]).toBe(1); // told before the human could answer
    expect(answerCommands(id)).toEqual({ approve: told[0]!.approve, deny: told[0]!.deny });
  });

  it("without onWaiting, one line to the Control's logger names the request and the command; a throwing onWaiting is logged and the wait goes on", async () => {
    const warnings: string[] = [];
    const ctx = await setup(undefined, { logger: { warn: (m: string) => void warnings.push(m) } });
    const grant = (id: string) => ctx.control.grantApproval(id, { approver: 'human:ana' });
    const { fn } = refunder(ctx, { provider: human(ctx, grant) });
    await fn({ payment_id: 'w6', amount: 200000 });
    const id = (await ctx.store.listApprovals())[0]!.request.requestId;
    expect(warnings).toEqual([
      `[ctrlrun] stripe.refund is waiting for a human: approval request ${id}; answer with: npx ctrlrun approve ${id} --as NAME (or: npx ctrlrun deny ${id} --as NAME)`,
    ]);
    warnings.length = 0;
    const throwing = refunder(ctx, {
      provider: human(ctx, grant),
      onWaiting: () => {
        throw new Error('pager down');
      },
    });
    expect(await throwing.fn({ payment_id: 'w7', amount: 200000 })).toBe('re_w7');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('pager down');
    expect(() => protect(() => 1, { control: ctx.control, name: 'x', wait: { onWaiting: 'no' as never } })).toThrow('wait.onWaiting');
  });
});

describe('protect with wait: a caller that gives up', () => {
  it('an abort while waiting stops the wait, records the abandonment, and the grant that follows runs nothing by itself', async () => {
    const ctx = await setup();
    const gone = new AbortController();
    // The human's terminal: the caller gives up on the first poll; the grant comes after.
    const provider = new LocalApprovalProvider(ctx.store, {
      clock: ctx.clock,
      sleep: async (ms) => {
        ctx.advance(ms);
        gone.abort(new Error('client timed out'));
        await new Promise(() => {}); // the poll would go on for ever: only the abort ends it
      },
    });
    const { fn, calls } = refunder(ctx, { provider });
    const err = await fn({ payment_id: 'a1', amount: 200000 }, { signal: gone.signal }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalRequired);
    const [req] = await ctx.store.listApprovals();
    expect((err as ApprovalRequired).requestId).toBe(req!.request.requestId);
    expect((err as Error).message).toContain('the caller gave up; nothing ran, and the request stays open');
    const abandoned = ctx.events.filter((e) => e.type === 'ACTION_DENIED' && e.data['reason'] === 'wait_abandoned');
    expect(abandoned).toHaveLength(1);
    expect(abandoned[0]).toMatchObject({
      approvalId: req!.request.requestId,
      actionId: req!.request.action.actionId,
      data: { reason: 'wait_abandoned', action_hash: req!.request.actionHash },
    });
    expect(req!.status).toBe('pending');

    await ctx.control.grantApproval(req!.request.requestId, { approver: 'human:ana' });
    expect(calls).toEqual([]);
    // The agent's retry presents the grant and runs it once; a second retry is refused.
    expect(await fn({ payment_id: 'a1', amount: 200000 }, { approvalId: req!.request.requestId })).toBe('re_a1');
    expect(calls).toEqual(['a1']);
    await expect(fn({ payment_id: 'a1', amount: 200000 }, { approvalId: req!.request.requestId })).rejects.toThrow();
    expect(calls).toEqual(['a1']);
  });

  it('an answer that arrives with the caller already gone is not acted on', async () => {
    const ctx = await setup();
    const gone = new AbortController();
    const provider: ApprovalProvider = {
      request: (action, ttl) => new LocalApprovalProvider(ctx.store).request(action, ttl),
      // A provider that ignores the signal and answers after the caller left.
      wait: async (id) => {
        const approval = await ctx.control.grantApproval(id, { approver: 'human:ana' });
        gone.abort();
        return approval;
      },
    };
    const { fn, calls } = refunder(ctx, { provider });
    await expect(fn({ payment_id: 'a2', amount: 200000 }, { signal: gone.signal })).rejects.toBeInstanceOf(ApprovalRequired);
    expect(calls).toEqual([]);
    expect((await ctx.store.listApprovals())[0]!.status).toBe('granted');
    expect(ctx.events.filter((e) => e.type === 'ACTION_DENIED' && e.data['reason'] === 'wait_abandoned')).toHaveLength(1);
  });

  it('a provider that never settles is still abandoned when the signal aborts', async () => {
    const ctx = await setup();
    const gone = new AbortController();
    const provider: ApprovalProvider = {
      request: (action, ttl) => new LocalApprovalProvider(ctx.store).request(action, ttl),
      wait: () => {
        queueMicrotask(() => gone.abort());
        return new Promise(() => {});
      },
    };
    const { fn, calls } = refunder(ctx, { provider });
    await expect(fn({ payment_id: 'a3', amount: 200000 }, { signal: gone.signal })).rejects.toBeInstanceOf(ApprovalRequired);
    expect(calls).toEqual([]);
  });

  it('a signal aborted before the call writes nothing; a signal that is not one is refused', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx, true);
    const err = await fn({ payment_id: 'a4', amount: 500 }, { signal: AbortSignal.abort(new Error('gone already')) }).catch((e: unknown) => e);
    expect((err as Error).message).toBe('gone already');
    expect(ctx.events).toHaveLength(0);
    expect(calls).toEqual([]);
    await expect(fn({ payment_id: 'a4', amount: 500 }, { signal: {} as AbortSignal })).rejects.toBeInstanceOf(InvalidArgument);
    // Without wait, an aborted signal changes nothing once the call has started: an allowed call runs.
    expect(await fn({ payment_id: 'a4', amount: 500 }, { signal: new AbortController().signal })).toBe('re_a4');
  });

  it('the store poll stops at the abort and leaves no listener behind', async () => {
    const ctx = await setup();
    const { fn } = refunder(ctx, false);
    const asked = (await fn({ payment_id: 'a5', amount: 200000 }).catch((e: unknown) => e)) as ApprovalRequired;
    const gone = new AbortController();
    let added = 0;
    let removed = 0;
    const signal = gone.signal;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = ((...a: Parameters<typeof add>) => (added++, add(...a))) as typeof add;
    signal.removeEventListener = ((...a: Parameters<typeof remove>) => (removed++, remove(...a))) as typeof remove;
    let polls = 0;
    const provider = new LocalApprovalProvider(ctx.store, {
      clock: ctx.clock,
      sleep: async (ms) => {
        ctx.advance(ms);
        if (++polls === 50) gone.abort();
      },
    });
    await expect(provider.wait(asked.requestId, undefined, { signal })).rejects.toThrow();
    expect(polls).toBe(50);
    expect(added - removed).toBeLessThanOrEqual(1);
  });
});
