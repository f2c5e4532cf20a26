// protect({ wait }): block on the human's answer, then run the same action presenting it.
import { describe, expect, it } from 'vitest';
import { ActionDenied, ApprovalTimeout, answerCommands, LocalApprovalProvider, protect, type WaitingFor } from '@ctrlrun/kernel';
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
