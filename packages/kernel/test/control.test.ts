import { describe, expect, it } from 'vitest';
import {
  ActionDenied,
  AmbiguousEffect,
  ApprovalMismatch,
  ApprovalRequired,
  AuthorityDenied,
  DuplicateEffect,
  EffectKeyError,
  InvalidArgument,
  NotExecuted,
  createAction,
  protect,
  type StateStore,
} from '@ctrlrun/kernel';
import type { SqlExecutor } from '@ctrlrun/kernel/store';
import { setup } from './harness.js';
import { GRANT, action as authorityAction, doc, rig } from './authority.fixtures.js';
import { SPEC_RECEIPT_KEYS } from './receipt.fixtures.js';

const MIN = 60_000;

function refunder(ctx: Awaited<ReturnType<typeof setup>>, opts: { lose?: () => boolean; notExecuted?: () => boolean } = {}) {
  const calls: Record<string, number> = {};
  const fn = protect<{ payment_id: string; amount: number }, { id: string }>(
    (args) => {
      const id = args['payment_id'] as string;
      calls[id] = (calls[id] ?? 0) + 1;
      if (opts.notExecuted?.()) throw new NotExecuted('card network refused before charging');
      if (opts.lose?.()) throw new Error('read timeout');
      return { id: `re_${id}` };
    },
    { control: ctx.control, name: 'stripe.refund' },
  );
  return { fn, calls };
}

describe('lost replies (T1)', () => {
  it('test_T1_a_lost_response_leaves_the_effect_ambiguous', async () => {
    const ctx = await setup();
    const { fn } = refunder(ctx, { lose: () => true });
    await expect(fn({ payment_id: 'txn_1', amount: 500 })).rejects.toThrow('read timeout');
    const rec = await ctx.store.getEffect('refund:txn_1');
    expect(rec?.state).toBe('ambiguous');
    expect(rec?.error).toBe('Error: read timeout');
    expect(ctx.receipts.at(-1)?.document['result']).toBe('ambiguous');
    expect(ctx.receipts.at(-1)?.document['error']).toBe('Error: read timeout');
    expect(ctx.types()).toContain('EXECUTION_AMBIGUOUS');
    expect(ctx.types()).not.toContain('EXECUTION_FAILED');
  });

  it('test_T1_a_blind_retry_is_refused_and_never_reaches_the_remote', async () => {
    const ctx = await setup();
    let lose = true;
    const { fn, calls } = refunder(ctx, { lose: () => lose });
    await expect(fn({ payment_id: 'txn_1', amount: 500 })).rejects.toThrow();
    lose = false;
    const err = await fn({ payment_id: 'txn_1', amount: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousEffect);
    expect((err as AmbiguousEffect).effectKey).toBe('refund:txn_1');
    expect(calls['txn_1']).toBe(1);
    const last = ctx.receipts.at(-1)!.document;
    expect(last['result']).toBe('blocked');
    expect(ctx.events.at(-1)?.type).toBe('EFFECT_RESERVATION_REFUSED');
    expect(ctx.events.at(-1)?.data).toEqual({ reason: 'ambiguous' });
  });
});

describe('approvals (T2, T4, T5, T12, T173)', () => {
  async function approved(ctx: Awaited<ReturnType<typeof setup>>, amount = 200000) {
    const { fn, calls } = refunder(ctx);
    const req = (await fn({ payment_id: 'txn_2', amount }).catch((e: unknown) => e)) as ApprovalRequired;
    expect(req).toBeInstanceOf(ApprovalRequired);
    await ctx.control.grantApproval(req.requestId, { approver: 'human:ana' });
    return { fn, calls, id: req.requestId };
  }

  it('test_T2_a_mutated_action_presenting_the_approval_raises_ApprovalMismatch', async () => {
    const ctx = await setup();
    const { fn, calls, id } = await approved(ctx);
    const err = await fn({ payment_id: 'txn_2', amount: 500000 }, { approvalId: id }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalMismatch);
    expect((err as ApprovalMismatch).reason).toBe('mismatch');
    expect(calls['txn_2']).toBeUndefined();
    const r = ctx.receipts.at(-1)!.document;
    // The presented id is on record; ana approved another action, so she is not this one's approver.
    expect([r['result'], r['decision'], r['approval_id'], r['approver']]).toEqual(['blocked', 'approve', id, null]);
    expect(ctx.events.at(-1)?.type).toBe('APPROVAL_INVALIDATED');
  });

  it('test_T2_a_mutated_action_leaves_the_approval_granted', async () => {
    const ctx = await setup();
    const { fn, calls, id } = await approved(ctx);
    await fn({ payment_id: 'txn_2', amount: 500000 }, { approvalId: id }).catch(() => {});
    expect((await ctx.store.getApproval(id))?.status).toBe('granted');
    await fn({ payment_id: 'txn_2', amount: 200000 }, { approvalId: id });
    expect(calls['txn_2']).toBe(1);
    expect((await ctx.store.getApproval(id))?.status).toBe('consumed');
  });

  it('test_T4_replaying_the_approval_raises_ApprovalMismatch_with_reason_consumed', async () => {
    const ctx = await setup();
    const { fn, calls, id } = await approved(ctx);
    await fn({ payment_id: 'txn_2', amount: 200000 }, { approvalId: id });
    const err = await fn({ payment_id: 'txn_2', amount: 200000 }, { approvalId: id }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalMismatch);
    expect((err as ApprovalMismatch).reason).toBe('consumed');
    expect(calls['txn_2']).toBe(1);
  });

  it('test_T5_expiry_is_checked_at_consumption_not_only_at_grant', async () => {
    const ctx = await setup();
    const { fn, calls, id } = await approved(ctx);
    ctx.advance(16 * MIN);
    const err = await fn({ payment_id: 'txn_2', amount: 200000 }, { approvalId: id }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalMismatch);
    expect((err as ApprovalMismatch).reason).toBe('expired');
    expect((await ctx.store.getApproval(id))?.status).toBe('expired');
    expect(ctx.types().slice(-2)).toEqual(['APPROVAL_EXPIRED', 'APPROVAL_INVALIDATED']);
    expect(calls['txn_2']).toBeUndefined();
  });

  it('test_T12_a_refused_reservation_leaves_the_approval_granted', async () => {
    const ctx = await setup();
    const { fn, id } = await approved(ctx);
    // Another worker holds the effect key with a live lease.
    await ctx.store.reserveEffect('refund:txn_2', 'act_other', 5 * MIN);
    const err = await fn({ payment_id: 'txn_2', amount: 200000 }, { approvalId: id }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DuplicateEffect);
    expect((err as DuplicateEffect).state).toBe('in_progress');
    expect((await ctx.store.getApproval(id))?.status).toBe('granted');
  });

  it('an unknown presented approval is refused as unknown and nothing runs', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx);
    const err = await fn({ payment_id: 'txn_9', amount: 200000 }, { approvalId: 'apr_nope' }).catch((e: unknown) => e);
    expect((err as ApprovalMismatch).reason).toBe('unknown');
    expect(calls['txn_9']).toBeUndefined();
  });

  it('a denied approval is ActionDenied(approval_denied) with a denied receipt', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx);
    const req = (await fn({ payment_id: 'txn_2', amount: 200000 }).catch((e: unknown) => e)) as ApprovalRequired;
    await ctx.control.denyApproval(req.requestId, { approver: 'human:ana' });
    const err = await fn({ payment_id: 'txn_2', amount: 200000 }, { approvalId: req.requestId }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect((err as ActionDenied).reason).toBe('approval_denied');
    const r = ctx.receipts.at(-1)!.document;
    expect([r['result'], r['decision'], r['approval_id'], r['approver']]).toEqual(['denied', 'approve', req.requestId, 'human:ana']);
    expect(calls['txn_2']).toBeUndefined();
  });

  it('test_T173_the_DENY_row_refuses_and_leaves_the_approval_granted', async () => {
    const ctx = await setup();
    const { id } = await approved(ctx);
    // The policy changed between grant and use: refunds are now denied outright.
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_2', amount: 200000 }, principal: { agent: 'refund-agent' } });
    const storeA = ctx.store as StateStore;
    const { Control, loadPolicy } = await import('@ctrlrun/kernel');
    const control = new Control({
      policy: loadPolicy(`schema: ctrlrun.policy/v1\nactions:\n  stripe.refund: {decision: deny}\n`),
      store: storeA,
      clock: ctx.clock,
      logger: { warn() {} },
    });
    let ran = false;
    const err = await control.execute(action, () => void (ran = true), { approvalId: id, effectKey: 'refund:txn_2' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect(ran).toBe(false);
    expect((await storeA.getApproval(id))?.status).toBe('granted');
    const rows = await storeA.receipts();
    const last = JSON.parse(rows.at(-1)!.json!);
    expect([last.result, last.approval_id, last.approver]).toEqual(['denied', id, 'human:ana']);
    const ev = (await storeA.events()).filter((e) => e.type === 'ACTION_DENIED').at(-1)!;
    expect(ev.approvalId).toBe(id);
  });

  it('test_an_unrelated_humans_approval_on_a_denied_action_never_names_that_human', async () => {
    const ctx = await setup();
    const { id } = await approved(ctx);
    let ran = false;
    const grantAdmin = createAction({ name: 'iam.grant_admin', arguments: { user: 'mallory' }, principal: { agent: 'refund-agent' } });
    const err = await ctx.control.execute(grantAdmin, () => void (ran = true), { approvalId: id }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect(ran).toBe(false);
    const r = ctx.receipts.at(-1)!.document;
    expect([r['action'], r['result'], r['decision'], r['approver']]).toEqual(['iam.grant_admin', 'denied', 'deny', null]);
    // Nothing anywhere in this action's evidence names ana.
    expect(JSON.stringify(ctx.receipts.at(-1)!.json)).not.toContain('human:ana');
    expect(
      ctx.events
        .filter((e) => e.actionId === grantAdmin.actionId)
        .map((e) => JSON.stringify(e.data))
        .join(),
    ).not.toContain('human:ana');
    // And the approval is untouched: still granted for the refund it was asked for.
    expect((await ctx.store.getApproval(id))?.status).toBe('granted');
  });

  it('test_an_unrelated_approval_on_an_authority_denial_never_names_that_human', async () => {
    const r = await rig(doc(GRANT));
    // head-of-support may refund EU payments up to 200,000; 100,000 needs a human.
    const approvable = authorityAction({ arguments: { amount: 100000, payment_id: 'EU-42' } });
    const req = (await r.control.execute(approvable, r.executor).catch((e: unknown) => e)) as ApprovalRequired;
    expect(req).toBeInstanceOf(ApprovalRequired);
    await r.control.grantApproval(req.requestId, { approver: 'human:ana' });
    // The same agent presents ana's approval on a payment outside its grant.
    const outside = authorityAction({ arguments: { amount: 100, payment_id: 'US-1' }, resource: 'payment:US-1' });
    const err = await r.control.execute(outside, r.executor, { approvalId: req.requestId }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthorityDenied);
    expect(r.calls).toBe(0);
    expect([r.lastReceipt()['result'], r.lastReceipt()['approver']]).toEqual(['denied', null]);
    expect((await r.store.getApproval(req.requestId))?.status).toBe('granted');
  });

  it('test_an_unrelated_approval_in_observe_mode_never_names_that_human', async () => {
    const ctx = await setup();
    const { id } = await approved(ctx);
    const { Control, loadPolicy } = await import('@ctrlrun/kernel');
    const observing = new Control({
      policy: loadPolicy(`schema: ctrlrun.policy/v3\nmode: observe\nactions:\n  stripe.refund: {decision: approve, effect: "refund:{payment_id}"}\n`),
      store: ctx.store,
      clock: ctx.clock,
      logger: { warn() {} },
    });
    const other = createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_other', amount: 1 }, principal: { agent: 'refund-agent' } });
    const { receipt } = await observing.executeWithReceipt(other, () => 'ran', { approvalId: id });
    const r = receipt.document;
    expect([r['result'], r['approval_id'], r['approver']]).toEqual(['observed', id, null]);
    expect(r['would_have']).toEqual({ decision: 'approve', reason: 'decision', blocked_reason: 'approval_mismatch' });
  });

  it('test_T173_the_ALLOW_row_invalidates_the_approval_it_did_not_need', async () => {
    const ctx = await setup();
    const { id } = await approved(ctx);
    const { Control, loadPolicy } = await import('@ctrlrun/kernel');
    const control = new Control({
      policy: loadPolicy(`schema: ctrlrun.policy/v1\nactions:\n  stripe.refund: {decision: allow}\n`),
      store: ctx.store,
      clock: ctx.clock,
      logger: { warn() {} },
    });
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_2', amount: 200000 }, principal: { agent: 'refund-agent' } });
    const { receipt } = await control.executeWithReceipt(action, () => 'ok', { approvalId: id, effectKey: 'refund:txn_2' });
    expect((await ctx.store.getApproval(id))?.status).toBe('consumed');
    expect([receipt.document['decision'], receipt.document['approval_id'], receipt.document['approver']]).toEqual(['allow', id, 'human:ana']);
    const consumed = (await ctx.store.events()).find((e) => e.type === 'APPROVAL_CONSUMED');
    expect(consumed?.data).toEqual({ approver: 'human:ana', required: false });
  });
});

describe('effects (T3, T8, T9, T10)', () => {
  it('test_T3_exactly_one_agent_reserves_and_seven_are_blocked (in one process)', async () => {
    const ctx = await setup();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let executed = 0;
    const fn = protect<{ payment_id: string; amount: number }, string>(
      async () => {
        executed++;
        await gate;
        return 'done';
      },
      { control: ctx.control, name: 'stripe.refund' },
    );
    const runs = Array.from({ length: 8 }, (_, i) =>
      fn({ payment_id: 'txn_123', amount: 500 }, { principal: { agent: `agent-${i}` } }).then(
        () => null,
        (e: unknown) => e,
      ),
    );
    await new Promise((r) => setTimeout(r, 20));
    release();
    const results = await Promise.all(runs);
    expect(executed).toBe(1);
    expect(results.filter((r) => r === null)).toHaveLength(1);
    const refused = results.filter((r) => r !== null) as DuplicateEffect[];
    expect(refused).toHaveLength(7);
    for (const r of refused) {
      expect(r).toBeInstanceOf(DuplicateEffect);
      expect(r.state).toBe('in_progress');
    }
    expect((await ctx.store.getEffect('refund:txn_123'))?.state).toBe('committed');
  });

  it('test_T8_a_failed_attempt_permits_a_retry_that_commits', async () => {
    const ctx = await setup();
    let refuse = true;
    const { fn, calls } = refunder(ctx, { notExecuted: () => refuse });
    const err = await fn({ payment_id: 'txn_8', amount: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotExecuted);
    expect((await ctx.store.getEffect('refund:txn_8'))?.state).toBe('failed');
    expect(ctx.receipts.at(-1)?.document['result']).toBe('failed');
    refuse = false;
    await fn({ payment_id: 'txn_8', amount: 500 });
    const rec = await ctx.store.getEffect('refund:txn_8');
    expect([rec?.state, rec?.attempt]).toEqual(['committed', 2]);
    expect(ctx.receipts.at(-1)?.document['attempt']).toBe(2);
    expect(calls['txn_8']).toBe(2);
  });

  it('test_T9_a_committed_effect_refuses_a_second_execution', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx);
    await fn({ payment_id: 'txn_9', amount: 500 });
    const err = await fn({ payment_id: 'txn_9', amount: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DuplicateEffect);
    expect((err as DuplicateEffect).state).toBe('committed');
    expect(calls['txn_9']).toBe(1);
  });

  it('test_T10_resolve_failed_permits_a_retry', async () => {
    const ctx = await setup();
    let lose = true;
    const { fn, calls } = refunder(ctx, { lose: () => lose });
    await fn({ payment_id: 'txn_10', amount: 500 }).catch(() => {});
    const rec = await ctx.control.resolveEffect('refund:txn_10', 'failed', { by: 'cli:local' });
    expect(rec.state).toBe('failed');
    expect(rec.resolvedBy).toBe('cli:local');
    expect(rec.error).toBe('resolved failed by cli:local (was: Error: read timeout)');
    expect(ctx.events.at(-1)?.data).toEqual({ state: 'failed', resolver: 'cli:local', resolved_by: 'human' });
    lose = false;
    await fn({ payment_id: 'txn_10', amount: 500 });
    expect(calls['txn_10']).toBe(2);
  });

  it('test_T161_a_human_resolution_records_who', async () => {
    const ctx = await setup();
    const { fn } = refunder(ctx, { lose: () => true });
    await fn({ payment_id: 'txn_161', amount: 500 }).catch(() => {});
    await ctx.control.resolveEffect('refund:txn_161', 'committed', { by: 'ops:dana' });
    expect((await ctx.store.getEffect('refund:txn_161'))?.resolvedBy).toBe('ops:dana');
    await expect(ctx.control.resolveEffect('refund:txn_161', 'failed', { by: 'ops:dana' })).rejects.toBeInstanceOf(InvalidArgument);
  });

  it('test_T160_an_expired_lease_frees_nothing_and_no_read_transitions_it', async () => {
    const ctx = await setup();
    await ctx.store.reserveEffect('refund:txn_160', 'act_crashed', 5 * MIN);
    await ctx.store.beginExecution('refund:txn_160', 'act_crashed');
    ctx.advance(6 * MIN);
    expect((await ctx.store.getEffect('refund:txn_160'))?.state).toBe('executing');
    expect((await ctx.store.listEffects()).map((r) => r.state)).toEqual(['executing']);
    const { fn, calls } = refunder(ctx);
    const err = await fn({ payment_id: 'txn_160', amount: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousEffect);
    const rec = await ctx.store.getEffect('refund:txn_160');
    expect(rec?.state).toBe('ambiguous');
    expect(rec?.error).toBe('lease expired: the worker holding this effect never finished');
    expect(calls['txn_160']).toBeUndefined();
  });
});

describe('reconcile hooks (T13, T14, T15)', () => {
  async function ambiguousThen(answer: () => unknown) {
    const ctx = await setup();
    let lose = true;
    let hookCalls = 0;
    const calls: Record<string, number> = {};
    const fn = protect<{ payment_id: string; amount: number }, string>(
      (a) => {
        calls[a['payment_id'] as string] = (calls[a['payment_id'] as string] ?? 0) + 1;
        if (lose) throw new Error('socket hang up');
        return 'ok';
      },
      {
        control: ctx.control,
        name: 'stripe.refund',
        reconcile: async () => {
          hookCalls++;
          return answer() as 'committed';
        },
      },
    );
    await fn({ payment_id: 'txn_r', amount: 500 }).catch(() => {});
    lose = false;
    return { ctx, fn, calls, hookCalls: () => hookCalls };
  }

  it('test_T13_a_hook_answering_not_executed_moves_the_record_to_failed', async () => {
    const { ctx, fn, calls, hookCalls } = await ambiguousThen(() => 'not_executed');
    await fn({ payment_id: 'txn_r', amount: 500 });
    expect(hookCalls()).toBe(1);
    expect(calls['txn_r']).toBe(2);
    const rec = await ctx.store.getEffect('refund:txn_r');
    expect([rec?.state, rec?.attempt]).toEqual(['committed', 2]);
    const resolved = ctx.events.find((e) => e.type === 'EFFECT_RESOLVED');
    expect(resolved?.data).toEqual({ state: 'failed', resolver: 'reconcile:stripe.refund', resolved_by: 'reconcile' });
  });

  it('test_T14_a_hook_answering_committed_refuses_the_retry_as_a_duplicate', async () => {
    const { ctx, fn, calls, hookCalls } = await ambiguousThen(() => 'committed');
    const err = await fn({ payment_id: 'txn_r', amount: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DuplicateEffect);
    expect((err as DuplicateEffect).state).toBe('committed');
    expect(hookCalls()).toBe(1);
    expect(calls['txn_r']).toBe(1);
    expect((await ctx.store.getEffect('refund:txn_r'))?.state).toBe('committed');
  });

  it('test_T15_a_hook_that_cannot_answer_leaves_the_record_ambiguous', async () => {
    for (const answer of [
      () => 'unknown',
      () => 'maybe',
      () => {
        throw new Error('hook down');
      },
    ]) {
      const { ctx, fn, calls, hookCalls } = await ambiguousThen(answer);
      const err = await fn({ payment_id: 'txn_r', amount: 500 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AmbiguousEffect);
      expect(hookCalls()).toBe(1);
      expect(calls['txn_r']).toBe(1);
      expect((await ctx.store.getEffect('refund:txn_r'))?.state).toBe('ambiguous');
      const resolved = ctx.events.filter((e) => e.type === 'RECONCILIATION_RESOLVED').at(-1);
      expect(resolved?.data['outcome']).toBe('unknown');
    }
  });
});

describe('warnings name an effect key as it is', () => {
  it('a key the agent chose (a line break, a bidi override, 10,000 characters) is quoted, escaped and cut: one line, nothing acted on', async () => {
    const warnings: string[] = [];
    const ctx = await setup(undefined, { logger: { warn: (m: string) => void warnings.push(m) } });
    const paymentId = `txn\n[ctrlrun] forged line\u202e${'x'.repeat(10_000)}`;
    let lose = true;
    const fn = protect<{ payment_id: string; amount: number }, string>(
      () => {
        if (lose) throw new Error('socket hang up');
        return 'ok';
      },
      { control: ctx.control, name: 'stripe.refund', reconcile: async () => 'maybe' as 'committed' },
    );
    await fn({ payment_id: paymentId, amount: 500 }).catch(() => {});
    lose = false;
    await expect(fn({ payment_id: paymentId, amount: 500 })).rejects.toBeInstanceOf(AmbiguousEffect);
    const warning = warnings.find((w) => w.includes('reconcile hook for'))!;
    expect(warning).toContain('reconcile hook for "refund:txn\\n[ctrlrun] forged line\\u202e');
    expect(warning).not.toMatch(/[\n\u202e]/);
    expect(warning).toContain('x…" returned maybe; treated as unknown');
    expect(warning.length).toBeLessThan(400);
    // The stored key is the whole key: only the message is cut.
    expect((await ctx.store.getEffect(`refund:${paymentId}`))?.state).toBe('ambiguous');
  });

  it('the refusals the agent reads name its key the same way: already committed, ambiguous', async () => {
    const ctx = await setup();
    const paymentId = `txn\n[ctrlrun] forged line\u202e${'x'.repeat(10_000)}`;
    const key = `refund:${paymentId}`;
    let lose = false;
    const fn = protect<{ payment_id: string; amount: number }, string>(
      () => {
        if (lose) throw new Error('socket hang up');
        return 'ok';
      },
      { control: ctx.control, name: 'stripe.refund' },
    );
    await fn({ payment_id: paymentId, amount: 500 });
    const twice = (await fn({ payment_id: paymentId, amount: 500 }).catch((e: unknown) => e)) as DuplicateEffect;
    expect(twice).toBeInstanceOf(DuplicateEffect);
    expect(twice.message).toMatch(/^effect "refund:txn\\n\[ctrlrun\] forged line\\u202ex+…" is already committed/);
    expect(twice.message).not.toMatch(/[\n\u202e]/);
    expect(twice.effectKey).toBe(key);
    lose = true;
    await fn({ payment_id: `${paymentId}2`, amount: 500 }).catch(() => {});
    const blind = (await fn({ payment_id: `${paymentId}2`, amount: 500 }).catch((e: unknown) => e)) as AmbiguousEffect;
    expect(blind).toBeInstanceOf(AmbiguousEffect);
    expect(blind.message).toMatch(/^effect "refund:txn\\n\[ctrlrun\] forged line\\u202ex+…" is ambiguous/);
    expect(blind.message).not.toMatch(/[\n\u202e]/);
    expect(blind.effectKey).toBe(`${key}2`);
  });

  it('an approval id the caller presented is shown the same way when it cannot be consumed', async () => {
    const warnings: string[] = [];
    const ctx = await setup(undefined, { logger: { warn: (m: string) => void warnings.push(m) } });
    const fn = protect<{ payment_id: string; amount: number }, string>(() => 'ok', { control: ctx.control, name: 'stripe.refund' });
    await fn({ payment_id: 'txn_p', amount: 500 }, { approvalId: 'apr_x\n[ctrlrun] forged\u0007' }).catch(() => {});
    const warning = warnings.find((w) => w.includes('presented approval'));
    expect(warning).toContain('the presented approval "apr_x\\n[ctrlrun] forged\\u0007" was not needed');
    expect(warning).not.toMatch(/[\n\u0007]/);
  });
});

describe('decisions and refusals', () => {
  it('test_T6_unknown_action_raises_ActionDenied_with_reason_unknown_action', async () => {
    const ctx = await setup();
    const fn = protect(() => 'x', { control: ctx.control, name: 'stripe.refunds' });
    const err = await fn({}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect((err as ActionDenied).reason).toBe('unknown_action');
    expect(ctx.receipts.at(-1)?.document['result']).toBe('denied');
    expect(ctx.receipts.at(-1)?.document['decision_reason']).toBe('unknown_action');
  });

  it('test_a_policy_deny_is_denied_the_same_way_as_an_unknown_action', async () => {
    const ctx = await setup();
    const fn = protect(() => 'x', { control: ctx.control, name: 'iam.grant_admin' });
    const err = await fn({}).catch((e: unknown) => e);
    expect((err as ActionDenied).reason).toBe('decision');
    expect(ctx.types()).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'ACTION_DENIED']);
    expect(ctx.receipts.at(-1)?.document['result']).toBe('denied');
  });

  it('test_T74_a_denial_leaves_no_pending_approval_request', async () => {
    const ctx = await setup();
    const { fn } = refunder(ctx);
    await fn({ payment_id: 'txn_74', amount: 5_000_000 }).catch(() => {});
    expect(await ctx.store.listApprovals()).toEqual([]);
  });

  it('test_T62_no_principal_is_refused_with_no_receipt_and_no_events', async () => {
    const ctx = await setup(undefined, { principal: null });
    const { fn, calls } = refunder(ctx);
    const err = await fn({ payment_id: 'txn_62', amount: 500 }).catch((e: unknown) => e);
    expect((err as ActionDenied).reason).toBe('no_principal');
    expect(await ctx.store.events()).toEqual([]);
    expect(await ctx.store.receipts()).toEqual([]);
    expect(calls).toEqual({});
  });

  it('an unresolvable effect template is an EffectKeyError with a denied receipt and no policy evaluation', async () => {
    const ctx = await setup();
    const fn = protect(() => 'x', { control: ctx.control, name: 'stripe.refund' });
    const err = await fn({ amount: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EffectKeyError);
    expect(ctx.types()).toEqual(['ACTION_PROPOSED', 'ACTION_DENIED']);
    const r = ctx.receipts.at(-1)!.document;
    expect([r['result'], r['decision'], r['decision_reason'], r['effect_key']]).toEqual(['denied', 'deny', 'effect_key_error', null]);
  });

  it('an action from another environment is refused before anything is written', async () => {
    const ctx = await setup();
    const action = createAction({ name: 'customer.read', principal: { agent: 'a' }, environment: 'staging' });
    await expect(ctx.control.execute(action, () => 1)).rejects.toBeInstanceOf(InvalidArgument);
    expect(await ctx.store.events()).toEqual([]);
  });

  it('the executor receives the canonical arguments, never the caller objects', async () => {
    const ctx = await setup();
    const mine = { payment_id: 'txn_c', amount: 5, nested: { b: 1, a: [1, 2] } };
    let seen: unknown;
    const fn = protect((args) => void (seen = args), { control: ctx.control, name: 'customer.read' });
    await fn(mine);
    expect(seen).toEqual(mine);
    expect(seen).not.toBe(mine);
    expect((seen as typeof mine).nested).not.toBe(mine.nested);
  });

  it('test_T60_claims_do_not_change_the_action_hash', () => {
    const a = createAction({ name: 'x', arguments: { n: 1 }, principal: { agent: 'a', user: 'u' } });
    const b = createAction({
      name: 'x',
      arguments: { n: 1 },
      principal: { agent: 'a', user: 'u', claims: { role: 'admin' }, issuer: 'idp', expiresAt: '2030-01-01T00:00:00Z' },
    });
    expect(b.actionHash).toBe(a.actionHash);
  });
});

describe('receipts (T11, T170, T172)', () => {
  it('test_T172_every_receipt_carries_the_hash_and_the_declared_version', async () => {
    const ctx = await setup(`schema: ctrlrun.policy/v4\nversion: "2026.1"\nactions:\n  customer.read: {decision: allow}\n`);
    const fn = protect(() => 1, { control: ctx.control, name: 'customer.read' });
    await fn({});
    const doc = ctx.receipts[0]!.document;
    expect(Object.keys(doc)).toEqual(SPEC_RECEIPT_KEYS);
    expect(doc['policy_hash']).toBe(ctx.control.policyHash);
    expect(doc['policy_hash']).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(doc['policy_version']).toBe('2026.1');
  });

  it('test_T170_a_failed_receipt_write_raises_and_leaves_no_gap', async () => {
    const ctx = await setup();
    const { fn } = refunder(ctx);
    await fn({ payment_id: 'txn_a', amount: 500 });
    // The receipt's INSERT fails wherever it is written: with the outcome (one transaction) or alone.
    const driver = ctx.store.driver;
    const real = driver.transaction.bind(driver);
    let fail = true;
    driver.transaction = <T>(body: (tx: SqlExecutor) => Promise<T>) =>
      real((tx) =>
        body({
          query: (sql, params) => (fail && sql.startsWith('INSERT INTO receipts') ? Promise.reject(new Error('disk full')) : tx.query(sql, params)),
          exec: (sql) => tx.exec(sql),
        }),
      );
    await expect(fn({ payment_id: 'txn_b', amount: 500 })).rejects.toThrow('disk full');
    expect((await ctx.store.getEffect('refund:txn_b'))?.state).toBe('committed');
    expect(ctx.types()).toContain('EXECUTION_COMMITTED');
    fail = false;
    await expect(fn({ payment_id: 'txn_b', amount: 500 })).rejects.toBeInstanceOf(DuplicateEffect);
    const rows = await ctx.store.receipts();
    expect(rows.map((r) => r.seq)).toEqual([1, 2]);
    const { verifyChain } = await import('@ctrlrun/kernel');
    expect(verifyChain(rows, await ctx.store.chainHead()).ok).toBe(true);
  });
});
