// Refuse before asking: a call the policy sends to a human whose effect key is already committed
// (it happened) or ambiguous (nobody knows) is refused as the reservation would refuse it, with
// the same evidence, and no approval request is filed that a grant could only lead to a refusal.
import { describe, expect, it } from 'vitest';
import { AmbiguousEffect, ApprovalRequired, DuplicateEffect, protect, type ReconcileHook } from '@ctrlrun/kernel';
import { setup } from './harness.js';

type Ctx = Awaited<ReturnType<typeof setup>>;

/** stripe.refund (effect `refund:{payment_id}`): allowed up to 100000, a human's above. */
function refunder(ctx: Ctx, opts: { lose?: () => boolean; reconcile?: ReconcileHook } = {}) {
  const calls: string[] = [];
  const fn = protect<{ payment_id: string; amount: number }, string>(
    (args) => {
      calls.push(String(args['payment_id']));
      if (opts.lose?.()) throw new Error('read timeout');
      return `re_${String(args['payment_id'])}`;
    },
    { control: ctx.control, name: 'stripe.refund', ...(opts.reconcile ? { reconcile: opts.reconcile } : {}) },
  );
  return { fn, calls };
}

async function refusal(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error('the call ran');
    },
    (e: unknown) => e,
  );
}

/** The events of the last action proposed, by type. */
function lastActionTypes(ctx: Ctx): string[] {
  const id = ctx.events.filter((e) => e.type === 'ACTION_PROPOSED').at(-1)!.actionId;
  return ctx.events.filter((e) => e.actionId === id).map((e) => e.type);
}

describe('refuse before asking (protect)', () => {
  it('after an approved refund committed, the same call without an approval is DuplicateEffect: no new request, a blocked receipt, the function never runs', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx);
    const asked = (await refusal(fn({ payment_id: 'p1', amount: 200000 }))) as ApprovalRequired;
    expect(asked).toBeInstanceOf(ApprovalRequired);
    await ctx.control.grantApproval(asked.requestId, { approver: 'human:ana' });
    expect(await fn({ payment_id: 'p1', amount: 200000 }, { approvalId: asked.requestId })).toBe('re_p1');
    const receipts = ctx.receipts.length;

    // The agent loops: the same call again, and again.
    for (let i = 0; i < 3; i++) {
      const err = await refusal(fn({ payment_id: 'p1', amount: 200000 }));
      expect(err).toBeInstanceOf(DuplicateEffect);
      expect(err).toMatchObject({ state: 'committed', effectKey: 'refund:p1' });
    }
    expect(await ctx.store.listApprovals('pending')).toEqual([]);
    expect((await ctx.store.listApprovals()).map((r) => [r.request.requestId, r.status])).toEqual([[asked.requestId, 'consumed']]);
    expect(ctx.types().filter((t) => t === 'APPROVAL_REQUESTED')).toHaveLength(1);
    expect(calls).toEqual(['p1']);
    // Recorded as the reservation's refusal is (spec 01 §6): evaluated, refused, a blocked receipt.
    expect(lastActionTypes(ctx)).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'EFFECT_RESERVATION_REFUSED']);
    expect(ctx.events.at(-1)).toMatchObject({ effectKey: 'refund:p1', approvalId: null, data: { reason: 'duplicate', state: 'committed' } });
    expect(ctx.receipts).toHaveLength(receipts + 3);
    const r = ctx.receipts.at(-1)!.document;
    expect([r['result'], r['decision'], r['effect_key'], r['approval_id']]).toEqual(['blocked', 'approve', 'refund:p1', null]);
    expect(r['error']).toBe('effect refund:p1 is already committed: it happened, and it will not happen twice');
  });

  it('other arguments under the same key: the allowed refund committed, the larger one needing a human is refused, not asked about', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx);
    await fn({ payment_id: 'p2', amount: 500 });
    const err = await refusal(fn({ payment_id: 'p2', amount: 300000 }));
    expect(err).toBeInstanceOf(DuplicateEffect);
    expect(await ctx.store.listApprovals()).toEqual([]);
    expect(calls).toEqual(['p2']);
    // Its message is the reservation's: the same refusal, reached earlier.
    const direct = await refusal(fn({ payment_id: 'p2', amount: 500 }));
    expect((err as Error).message).toBe((direct as Error).message);
  });

  it('an ambiguous effect is AmbiguousEffect before asking: no request, the refusal recorded', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx, { lose: () => calls.length === 1 });
    await expect(fn({ payment_id: 'p3', amount: 500 })).rejects.toThrow('read timeout');
    expect((await ctx.store.getEffect('refund:p3'))?.state).toBe('ambiguous');
    const err = await refusal(fn({ payment_id: 'p3', amount: 300000 }));
    expect(err).toBeInstanceOf(AmbiguousEffect);
    expect((err as AmbiguousEffect).effectKey).toBe('refund:p3');
    expect(await ctx.store.listApprovals()).toEqual([]);
    expect(lastActionTypes(ctx)).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'EFFECT_RESERVATION_REFUSED']);
    expect(ctx.events.at(-1)?.data).toEqual({ reason: 'ambiguous' });
    expect(ctx.receipts.at(-1)!.document['result']).toBe('blocked');
    expect(calls).toEqual(['p3']);
  });

  it('an ambiguous effect goes to the reconcile hook first, once: not_executed asks the human, committed refuses', async () => {
    const ctx = await setup();
    let answer: 'committed' | 'not_executed' = 'not_executed';
    const hook: ReconcileHook = () => answer;
    let lose = true;
    const { fn } = refunder(ctx, { lose: () => lose, reconcile: hook });
    await expect(fn({ payment_id: 'p4', amount: 500 })).rejects.toThrow('read timeout');
    await expect(fn({ payment_id: 'p5', amount: 500 })).rejects.toThrow('read timeout');
    lose = false;
    const asked = await refusal(fn({ payment_id: 'p4', amount: 300000 }));
    expect(asked).toBeInstanceOf(ApprovalRequired);
    expect((await ctx.store.getEffect('refund:p4'))?.state).toBe('failed');
    expect(lastActionTypes(ctx)).toEqual([
      'ACTION_PROPOSED',
      'POLICY_EVALUATED',
      'RECONCILIATION_STARTED',
      'RECONCILIATION_RESOLVED',
      'EFFECT_RESOLVED',
      'APPROVAL_REQUESTED',
    ]);
    answer = 'committed';
    const refused = await refusal(fn({ payment_id: 'p5', amount: 300000 }));
    expect(refused).toBeInstanceOf(DuplicateEffect);
    expect(lastActionTypes(ctx)).toEqual([
      'ACTION_PROPOSED',
      'POLICY_EVALUATED',
      'RECONCILIATION_STARTED',
      'RECONCILIATION_RESOLVED',
      'EFFECT_RESOLVED',
      'EFFECT_RESERVATION_REFUSED',
    ]);
    expect((await ctx.store.listApprovals()).map((r) => r.request.action.canonicalArguments['payment_id'])).toEqual(['p4']);
  });

  it('a key another worker holds now (it may yet fail) or one that failed is still asked about', async () => {
    const ctx = await setup();
    const { fn } = refunder(ctx);
    await ctx.store.reserveEffect('refund:p6', 'act_other', 60_000);
    expect(await refusal(fn({ payment_id: 'p6', amount: 300000 }))).toBeInstanceOf(ApprovalRequired);
    await ctx.store.beginExecution('refund:p6', 'act_other');
    await ctx.store.failEffect('refund:p6', 'act_other', 'declined');
    expect(await refusal(fn({ payment_id: 'p6', amount: 300001 }))).toBeInstanceOf(ApprovalRequired);
    expect(await ctx.store.listApprovals('pending')).toHaveLength(2);
  });

  it('the reservation stays the guard: a request filed before the key committed is granted, and presenting it is DuplicateEffect', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx);
    const asked = (await refusal(fn({ payment_id: 'p7', amount: 300000 }))) as ApprovalRequired;
    await fn({ payment_id: 'p7', amount: 500 });
    await ctx.control.grantApproval(asked.requestId, { approver: 'human:ana' });
    const err = await refusal(fn({ payment_id: 'p7', amount: 300000 }, { approvalId: asked.requestId }));
    expect(err).toBeInstanceOf(DuplicateEffect);
    expect(calls).toEqual(['p7']);
    // The refused reservation leaves the grant unused (spec 01 §5, A4).
    expect((await ctx.store.getApproval(asked.requestId))?.status).toBe('granted');
  });

  it('an action without an effect key is asked about as before, each time it needs a human', async () => {
    const ctx = await setup(`schema: ctrlrun.policy/v2
actions:
  ops.page: {decision: approve}
`);
    const page = protect<{ who: string }, string>(() => 'paged', { control: ctx.control, name: 'ops.page' });
    const asked = (await refusal(page({ who: 'oncall' }))) as ApprovalRequired;
    await ctx.control.grantApproval(asked.requestId, { approver: 'human:ana' });
    expect(await page({ who: 'oncall' }, { approvalId: asked.requestId })).toBe('paged');
    expect(await refusal(page({ who: 'oncall' }))).toBeInstanceOf(ApprovalRequired);
    expect(await ctx.store.listApprovals('pending')).toHaveLength(1);
  });

  it("needsApproval (the adapters' question) files no request for a committed or ambiguous key: false, the call then refuses", async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx, { lose: () => calls.length === 2 });
    await fn({ payment_id: 'p7', amount: 500 });
    expect(await fn.needsApproval({ payment_id: 'p7', amount: 300000 })).toBe(false);
    expect(await ctx.store.listApprovals()).toEqual([]);
    expect(await refusal(fn({ payment_id: 'p7', amount: 300000 }))).toBeInstanceOf(DuplicateEffect);
    await expect(fn({ payment_id: 'p8', amount: 500 })).rejects.toThrow('read timeout');
    expect(await fn.needsApproval({ payment_id: 'p8', amount: 300000 })).toBe(false);
    expect(await ctx.store.listApprovals()).toEqual([]);
    // A key not yet used is asked about, once.
    expect(await fn.needsApproval({ payment_id: 'p9', amount: 300000 })).toBe(true);
    expect(await fn.needsApproval({ payment_id: 'p9', amount: 300000 })).toBe(true);
    expect(await ctx.store.listApprovals('pending')).toHaveLength(1);
    expect(calls).toEqual(['p7', 'p8']);
  });
});
