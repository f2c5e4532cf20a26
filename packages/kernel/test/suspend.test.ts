// Held continuations on the control path (spec 01 §4.4 `Suspended` row, §9, §10, §11 `resume`).
import { describe, expect, it } from 'vitest';
import { AmbiguousEffect, InvalidArgument, NotExecuted, Suspended, createAction, type ExecutionContext, type JsonObject } from '@ctrlrun/kernel';
import { setup } from './harness.js';

const MIN = 60_000;

function refund(paymentId: string, amount = 500) {
  return createAction({ name: 'stripe.refund', arguments: { payment_id: paymentId, amount }, principal: { agent: 'refund-agent' }, resource: null });
}

/** An executor that suspends with each of `tokens` in turn, then returns; it logs every call. */
function roundTrips(tokens: string[]) {
  const calls: { args: JsonObject; attempt: number; effectKey: string | null }[] = [];
  const run = (args: JsonObject, ctx: ExecutionContext) => {
    calls.push({ args, attempt: ctx.attempt, effectKey: ctx.effectKey });
    const next = tokens[calls.length - 1];
    if (next !== undefined) throw new Suspended(next);
    return { id: `re_${String(args['payment_id'])}` };
  };
  return { run, calls };
}

describe('held continuations', () => {
  it('test_suspend_then_resume_commits_with_one_receipt', async () => {
    const ctx = await setup(undefined, { suspendTimeout: 10 * MIN });
    const action = refund('txn_s1');
    const exec = roundTrips(['cont-1']);
    const thrown = await ctx.control.execute(action, exec.run).then(() => null, (e: unknown) => e);
    expect(thrown).toBeInstanceOf(Suspended);
    expect((thrown as Suspended).continuation).toBe('cont-1');
    // Still executing, lease now + suspendTimeout, no receipt, the event says held and which round.
    expect(await ctx.store.getEffect('refund:txn_s1')).toMatchObject({ state: 'executing', attempt: 1, leaseExpiresAt: '2026-01-01T12:10:00+00:00' });
    expect(ctx.receipts).toHaveLength(0);
    expect(ctx.types()).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'EFFECT_RESERVED', 'EXECUTION_STARTED', 'EXECUTION_SUSPENDED']);
    expect(ctx.events.at(-1)).toMatchObject({ actionId: action.actionId, effectKey: 'refund:txn_s1', data: { held: true, round: 1 } });
    expect(await ctx.store.continuationRounds('refund:txn_s1')).toBe(1);

    ctx.advance(MIN);
    const { value, receipt } = await ctx.control.resumeWithReceipt('cont-1', exec.run);
    expect(value).toEqual({ id: 're_txn_s1' });
    expect(exec.calls).toHaveLength(2);
    expect(exec.calls[1]).toEqual({ args: action.canonicalArguments, attempt: 1, effectKey: 'refund:txn_s1' });
    expect(receipt).toMatchObject({ seq: 1, document: { result: 'committed' } });
    expect(JSON.parse(receipt.json)).toMatchObject({ action_id: action.actionId, action_hash: action.actionHash, effect_key: 'refund:txn_s1', attempt: 1, result: 'committed' });
    expect(ctx.types().slice(5)).toEqual(['EXECUTION_RESUMED', 'EXECUTION_COMMITTED']);
    expect(ctx.events[5]).toMatchObject({ actionId: action.actionId, effectKey: 'refund:txn_s1', data: { round: 1 } });
    expect(await ctx.store.getEffect('refund:txn_s1')).toMatchObject({ state: 'committed', leaseExpiresAt: null });
    expect(ctx.receipts).toHaveLength(1);
  });

  it('test_suspending_twice_counts_rounds', async () => {
    const ctx = await setup();
    const exec = roundTrips(['c-a', 'c-b']);
    await expect(ctx.control.execute(refund('txn_s2'), exec.run)).rejects.toBeInstanceOf(Suspended);
    await expect(ctx.control.resume('c-a', exec.run)).rejects.toBeInstanceOf(Suspended);
    expect(await ctx.store.continuationRounds('refund:txn_s2')).toBe(2);
    expect(ctx.events.filter((e) => e.type === 'EXECUTION_SUSPENDED').map((e) => [e.data['held'], e.data['round']])).toEqual([[true, 1], [true, 2]]);
    expect(await ctx.control.resume('c-b', exec.run)).toEqual({ id: 're_txn_s2' });
    expect(ctx.events.filter((e) => e.type === 'EXECUTION_RESUMED').map((e) => e.data)).toEqual([{ round: 1 }, { round: 2 }]);
    expect(exec.calls).toHaveLength(3);
    expect(ctx.receipts.map((r) => r.document['result'])).toEqual(['committed']);
  });

  it('test_a_second_resume_of_one_continuation_is_refused_and_never_runs', async () => {
    const ctx = await setup();
    const exec = roundTrips(['once']);
    await expect(ctx.control.execute(refund('txn_s3'), exec.run)).rejects.toBeInstanceOf(Suspended);
    await ctx.control.resume('once', exec.run);
    const before = ctx.events.length;
    await expect(ctx.control.resume('once', exec.run)).rejects.toBeInstanceOf(InvalidArgument);
    await expect(ctx.control.resume('never-held', exec.run)).rejects.toBeInstanceOf(InvalidArgument);
    expect(exec.calls).toHaveLength(2);
    expect(ctx.events.length, 'a refused resume records nothing').toBe(before);
    expect(ctx.receipts).toHaveLength(1);
  });

  it('test_T163_a_resume_after_the_lease_lapsed_is_ambiguous', async () => {
    const ctx = await setup(undefined, { suspendTimeout: 8 * MIN });
    const exec = roundTrips(['late']);
    await expect(ctx.control.execute(refund('txn_s4'), exec.run)).rejects.toBeInstanceOf(Suspended);
    ctx.advance(8 * MIN + 1);
    await expect(ctx.control.resume('late', exec.run)).rejects.toBeInstanceOf(AmbiguousEffect);
    expect(exec.calls).toHaveLength(1);
    // Never failed, never committed: the next contender finds it lapsed and it becomes ambiguous.
    expect((await ctx.store.getEffect('refund:txn_s4'))!.state).toBe('executing');
    await expect(ctx.control.execute(refund('txn_s4'), exec.run)).rejects.toBeInstanceOf(AmbiguousEffect);
    expect((await ctx.store.getEffect('refund:txn_s4'))!.state).toBe('ambiguous');
  });

  it('test_a_resumed_executor_may_still_fail_or_lose_its_reply', async () => {
    const ctx = await setup();
    let outcome: 'not-executed' | 'lost' = 'not-executed';
    let first = true;
    const run = () => {
      if (first) {
        first = false;
        throw new Suspended(`tok-${outcome}`);
      }
      if (outcome === 'not-executed') throw new NotExecuted('card declined');
      throw new Error('read timeout');
    };
    await expect(ctx.control.execute(refund('txn_s5'), run)).rejects.toBeInstanceOf(Suspended);
    await expect(ctx.control.resume('tok-not-executed', run)).rejects.toBeInstanceOf(NotExecuted);
    expect(await ctx.store.getEffect('refund:txn_s5')).toMatchObject({ state: 'failed', error: 'card declined' });
    outcome = 'lost';
    first = true;
    await expect(ctx.control.execute(refund('txn_s5'), run)).rejects.toBeInstanceOf(Suspended);
    await expect(ctx.control.resume('tok-lost', run)).rejects.toThrow('read timeout');
    expect(await ctx.store.getEffect('refund:txn_s5')).toMatchObject({ state: 'ambiguous', attempt: 2 });
    expect(ctx.receipts.map((r) => r.document['result'])).toEqual(['failed', 'ambiguous']);
  });

  it('test_a_suspension_without_an_effect_key_is_invalid_and_recorded_ambiguous', async () => {
    const ctx = await setup();
    const action = createAction({ name: 'customer.read', arguments: { id: 'c_1' }, principal: { agent: 'refund-agent' }, resource: null });
    const err = await ctx.control.execute(action, () => {
      throw new Suspended('nowhere');
    }).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect(ctx.types()).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'EXECUTION_STARTED', 'EXECUTION_AMBIGUOUS']);
    expect(ctx.receipts.map((r) => r.document['result'])).toEqual(['ambiguous']);
    expect(JSON.parse(ctx.receipts[0]!.json)['error']).toContain('Suspended: nowhere');
    await expect(ctx.control.resume('nowhere', () => 1)).rejects.toBeInstanceOf(InvalidArgument);
  });

  it('test_a_hold_the_store_refuses_is_recorded_ambiguous_never_failed', async () => {
    const ctx = await setup();
    // The first suspension holds `dup`; a second effect suspending with the same value cannot be held.
    await expect(ctx.control.execute(refund('txn_s6'), () => { throw new Suspended('dup'); })).rejects.toBeInstanceOf(Suspended);
    await expect(ctx.control.execute(refund('txn_s7'), () => { throw new Suspended('dup'); })).rejects.toBeInstanceOf(InvalidArgument);
    expect(await ctx.store.getEffect('refund:txn_s7')).toMatchObject({ state: 'ambiguous' });
    expect(ctx.receipts.map((r) => r.document['result'])).toEqual(['ambiguous']);
    expect(await ctx.store.getEffect('refund:txn_s6')).toMatchObject({ state: 'executing' });
  });
});
