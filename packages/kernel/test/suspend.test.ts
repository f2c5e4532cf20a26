// Held continuations on the control path (spec 01 §4.4 `Suspended` row, §9, §10, §11 `resume`).
import { describe, expect, it } from 'vitest';
import {
  AmbiguousEffect,
  ApprovalRequired,
  AuthorityDenied,
  Control,
  IdentityError,
  InvalidArgument,
  NotExecuted,
  Suspended,
  createAction,
  loadPolicy,
  stats,
  type ExecutionContext,
  type JsonObject,
} from '@ctrlrun/kernel';
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
    const thrown = await ctx.control.execute(action, exec.run).then(
      () => null,
      (e: unknown) => e,
    );
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
    expect(JSON.parse(receipt.json)).toMatchObject({
      action_id: action.actionId,
      action_hash: action.actionHash,
      effect_key: 'refund:txn_s1',
      attempt: 1,
      result: 'committed',
    });
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
    expect(ctx.events.filter((e) => e.type === 'EXECUTION_SUSPENDED').map((e) => [e.data['held'], e.data['round']])).toEqual([
      [true, 1],
      [true, 2],
    ]);
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
    const err = await ctx.control
      .execute(action, () => {
        throw new Suspended('nowhere');
      })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(InvalidArgument);
    expect(ctx.types()).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'EXECUTION_STARTED', 'EXECUTION_AMBIGUOUS']);
    expect(ctx.receipts.map((r) => r.document['result'])).toEqual(['ambiguous']);
    expect(JSON.parse(ctx.receipts[0]!.json)['error']).toContain('Suspended: nowhere');
    await expect(ctx.control.resume('nowhere', () => 1)).rejects.toBeInstanceOf(InvalidArgument);
  });

  it('test_a_hold_the_store_refuses_is_recorded_ambiguous_never_failed', async () => {
    const ctx = await setup();
    // The first suspension holds `dup`; a second effect suspending with the same value cannot be held.
    await expect(
      ctx.control.execute(refund('txn_s6'), () => {
        throw new Suspended('dup');
      }),
    ).rejects.toBeInstanceOf(Suspended);
    await expect(
      ctx.control.execute(refund('txn_s7'), () => {
        throw new Suspended('dup');
      }),
    ).rejects.toBeInstanceOf(InvalidArgument);
    expect(await ctx.store.getEffect('refund:txn_s7')).toMatchObject({ state: 'ambiguous' });
    expect(ctx.receipts.map((r) => r.document['result'])).toEqual(['ambiguous']);
    expect(await ctx.store.getEffect('refund:txn_s6')).toMatchObject({ state: 'executing' });
  });
});

// ---- who may act while a continuation is held, and what the resumed receipt says ----

const CAROL = 'carol@example.com';
const CFO = { agent: 'cfo-agent', user: CAROL };
const FINANCE = { agent: 'finance-agent', user: CAROL };
const HOUR = 60 * MIN;

const DELEGATING = `schema: ctrlrun.policy/v3
authority:
  grants:
    - id: head-of-finance
      subject: { agent: cfo-agent, user: "${CAROL}" }
      actions: ["stripe.**"]
      expires_at: "2026-01-02T12:00:00+00:00"
      delegable: true
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`;

function financeRefund(paymentId: string) {
  return createAction({ name: 'stripe.refund', arguments: { payment_id: paymentId, amount: 700 }, principal: FINANCE, resource: null });
}

async function delegated() {
  const ctx = await setup(DELEGATING, { environment: 'production' });
  const d = await ctx.control.delegate(
    'head-of-finance',
    { subject: FINANCE, actions: ['stripe.refund'], expiresAt: '2026-01-02T00:00:00+00:00' },
    { by: CFO },
  );
  return { ctx, d };
}

describe('T80b: a held continuation after its delegation is revoked', () => {
  it('test_T80b_resume_records_the_denial_and_the_next_extension_is_refused', async () => {
    const { ctx, d } = await delegated();
    const action = financeRefund('txn_r1');
    const exec = roundTrips(['r1-a', 'r1-b']);
    await expect(ctx.control.execute(action, exec.run)).rejects.toBeInstanceOf(Suspended);
    expect(ctx.types(), 'the first hold passed authority').toContain('EXECUTION_SUSPENDED');
    expect(await ctx.control.revoke(d.delegationId, { by: 'ops' })).toBe(true);
    ctx.advance(MIN);
    const before = ctx.events.length;

    // The resumption runs (nothing is decided again) but the authority's answer is on record; the
    // executor's next suspension asks for more time, and that is refused with the reason.
    const err = await ctx.control.resume('r1-a', exec.run).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AuthorityDenied);
    expect(err).toMatchObject({ reason: 'authority_revoked', delegationId: d.delegationId });
    expect(exec.calls).toHaveLength(2);
    const after = ctx.events.slice(before);
    expect(after.map((e) => e.type)).toEqual(['AUTHORITY_DENIED', 'EXECUTION_RESUMED', 'AUTHORITY_DENIED', 'EXECUTION_AMBIGUOUS']);
    expect(after[0]!.data).toMatchObject({ reason: 'authority_revoked', delegation_id: d.delegationId });
    expect(after.every((e) => e.actionId === action.actionId)).toBe(true);
    // Not held: the lease was not extended, the record is an unknown outcome now, never resumable.
    expect(await ctx.store.getEffect('refund:txn_r1')).toMatchObject({ state: 'ambiguous' });
    expect(ctx.receipts.map((r) => r.document['result'])).toEqual(['ambiguous']);
    expect(String(ctx.receipts[0]!.document['error'])).toContain('AuthorityDenied');
    await expect(ctx.control.resume('r1-b', exec.run)).rejects.toBeInstanceOf(InvalidArgument);
    expect(exec.calls).toHaveLength(2);
    // And a blind retry is refused as ambiguous.
    await expect(ctx.control.execute(financeRefund('txn_r1'), exec.run)).rejects.toBeInstanceOf(Error);
    expect(exec.calls).toHaveLength(2);
  });

  it('test_T80b_an_outcome_write_after_revocation_is_never_refused', async () => {
    const { ctx, d } = await delegated();
    const exec = roundTrips(['r2-a']);
    await expect(ctx.control.execute(financeRefund('txn_r2'), exec.run)).rejects.toBeInstanceOf(Suspended);
    await ctx.control.revoke(d.delegationId);
    const { receipt } = await ctx.control.resumeWithReceipt('r2-a', exec.run);
    expect(receipt.document).toMatchObject({ result: 'committed', decision: 'allow', decision_reason: 'decision' });
    expect(ctx.types().slice(-3)).toEqual(['AUTHORITY_DENIED', 'EXECUTION_RESUMED', 'EXECUTION_COMMITTED']);
  });

  it('test_T80b_a_resume_with_authority_intact_records_AUTHORITY_RESOLVED', async () => {
    const { ctx, d } = await delegated();
    const exec = roundTrips(['r3-a', 'r3-b']);
    await expect(ctx.control.execute(financeRefund('txn_r3'), exec.run)).rejects.toBeInstanceOf(Suspended);
    await expect(ctx.control.resume('r3-a', exec.run)).rejects.toBeInstanceOf(Suspended);
    await ctx.control.resume('r3-b', exec.run);
    const resolved = ctx.events.filter((e) => e.type === 'AUTHORITY_RESOLVED');
    expect(resolved).toHaveLength(3); // the first attempt, then each resumption
    expect(resolved.at(-1)!.data).toMatchObject({ reason: 'authority_grant', delegation_id: d.delegationId, depth: 1 });
    expect(ctx.receipts.map((r) => r.document['result'])).toEqual(['committed']);
  });
});

describe('T80b in observe mode: nothing is enforced, the denial is on record', () => {
  it('test_T80b_observe_mode_records_the_denial_and_still_holds', async () => {
    const ctx = await setup(DELEGATING.replace('schema: ctrlrun.policy/v3\n', 'schema: ctrlrun.policy/v3\nmode: observe\n'), { environment: 'production' });
    const d = await ctx.control.delegate(
      'head-of-finance',
      { subject: FINANCE, actions: ['stripe.refund'], expiresAt: '2026-01-02T00:00:00+00:00' },
      { by: CFO },
    );
    const exec = roundTrips(['o-a', 'o-b']);
    await expect(ctx.control.execute(financeRefund('txn_o'), exec.run)).rejects.toBeInstanceOf(Suspended);
    await ctx.control.revoke(d.delegationId);
    await expect(ctx.control.resume('o-a', exec.run)).rejects.toBeInstanceOf(Suspended);
    const { receipt } = await ctx.control.resumeWithReceipt('o-b', exec.run);
    expect(ctx.events.filter((e) => e.type === 'AUTHORITY_DENIED')).toHaveLength(3);
    expect(receipt.document).toMatchObject({
      result: 'observed',
      execution: 'committed',
      would_have: { decision: 'allow', reason: 'decision', blocked_reason: 'authority_revoked' },
    });
  });
});

describe('T61b: a held continuation after the credential expires', () => {
  const expiring = (paymentId: string) =>
    createAction({
      name: 'stripe.refund',
      arguments: { payment_id: paymentId, amount: 500 },
      principal: { agent: 'refund-agent', expiresAt: '2026-01-01T12:05:00+00:00' },
      resource: null,
    });

  it('test_T61b_resume_is_not_rechecked_but_the_extension_is_refused', async () => {
    const ctx = await setup(undefined, { suspendTimeout: 10 * MIN });
    const exec = roundTrips(['e1-a', 'e1-b']);
    await expect(ctx.control.execute(expiring('txn_e1'), exec.run)).rejects.toBeInstanceOf(Suspended);
    ctx.advance(6 * MIN);
    const err = await ctx.control.resume('e1-a', exec.run).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(IdentityError);
    expect((err as IdentityError).reason).toBe('principal_expired');
    expect(exec.calls, 'the resumption itself ran').toHaveLength(2);
    expect(await ctx.store.getEffect('refund:txn_e1')).toMatchObject({ state: 'ambiguous' });
    expect(ctx.types().slice(-2)).toEqual(['EXECUTION_RESUMED', 'EXECUTION_AMBIGUOUS']);
    expect(ctx.receipts.map((r) => r.document['result'])).toEqual(['ambiguous']);
    await expect(ctx.control.resume('e1-b', exec.run)).rejects.toBeInstanceOf(InvalidArgument);
  });

  it('test_T61b_an_outcome_write_after_expiry_is_never_refused', async () => {
    const ctx = await setup(undefined, { suspendTimeout: 10 * MIN });
    const exec = roundTrips(['e2-a']);
    await expect(ctx.control.execute(expiring('txn_e2'), exec.run)).rejects.toBeInstanceOf(Suspended);
    ctx.advance(6 * MIN);
    expect(await ctx.control.resume('e2-a', exec.run)).toEqual({ id: 're_txn_e2' });
    expect(await ctx.store.getEffect('refund:txn_e2')).toMatchObject({ state: 'committed' });
  });

  it('test_T61b_the_first_suspension_of_an_expired_credential_is_not_held', async () => {
    const ctx = await setup();
    // Expires while the executor runs: the action was allowed, its hold is not.
    const run = () => {
      ctx.advance(6 * MIN);
      throw new Suspended('e3');
    };
    const err = await ctx.control.execute(expiring('txn_e3'), run).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ name: 'IdentityError', reason: 'principal_expired' });
    expect(await ctx.store.continuationRounds('refund:txn_e3')).toBe(0);
    expect(await ctx.store.getEffect('refund:txn_e3')).toMatchObject({ state: 'ambiguous' });
  });
});

describe('a continuation belongs to its environment', () => {
  it('test_a_staging_control_cannot_resume_a_production_action', async () => {
    const ctx = await setup(undefined, { environment: 'production' });
    const exec = roundTrips(['env-1']);
    await expect(ctx.control.execute(refund('txn_env'), exec.run)).rejects.toBeInstanceOf(Suspended);
    const staging = new Control({ policy: ctx.control.policy, store: ctx.store, clock: ctx.clock, environment: 'staging', logger: { warn() {} } });
    const before = (await ctx.store.events()).length;
    const err = await staging.resume('env-1', exec.run).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(/production.*staging/);
    expect(exec.calls).toHaveLength(1);
    expect((await ctx.store.events()).length, 'nothing written').toBe(before);
    expect(await ctx.store.getEffect('refund:txn_env')).toMatchObject({ state: 'executing' });
    // Not consumed: its own deployment still resumes it.
    expect(await ctx.control.resume('env-1', exec.run)).toEqual({ id: 're_txn_env' });
  });
});

describe('the resumed receipt carries what the first attempt was decided and approved with', () => {
  it('test_an_approved_action_resumed_keeps_its_approval_and_approver', async () => {
    const ctx = await setup();
    const action = refund('txn_ap', 200000);
    const exec = roundTrips(['ap-1']);
    const req = (await ctx.control.execute(action, exec.run).catch((e: unknown) => e)) as ApprovalRequired;
    expect(req).toBeInstanceOf(ApprovalRequired);
    await ctx.control.grantApproval(req.requestId, { approver: 'human:ana' });
    await expect(ctx.control.execute(action, exec.run, { approvalId: req.requestId })).rejects.toBeInstanceOf(Suspended);
    const { receipt } = await ctx.control.resumeWithReceipt('ap-1', exec.run);
    expect(receipt.document).toMatchObject({
      result: 'committed',
      decision: 'approve',
      decision_reason: 'rule[1]',
      approval_id: req.requestId,
      approver: 'human:ana',
    });
    expect(ctx.events.at(-1)).toMatchObject({ type: 'EXECUTION_COMMITTED', approvalId: req.requestId });
  });

  const OBSERVED = `schema: ctrlrun.policy/v3
mode: observe
actions:
  iam.grant_admin: {decision: deny}
`;

  it('test_an_observed_action_resumed_under_enforce_stays_observed', async () => {
    const ctx = await setup(OBSERVED);
    const action = createAction({ name: 'iam.grant_admin', arguments: { user: 'eve' }, principal: { agent: 'refund-agent' }, resource: null });
    const exec = roundTrips(['ob-1']);
    await expect(ctx.control.execute(action, exec.run, { effectKey: 'admin:eve' })).rejects.toBeInstanceOf(Suspended);
    // The operator switches to enforce (spec 02 §4.5: no migration) while the continuation is held.
    const enforcing = new Control({
      policy: loadPolicy(OBSERVED.replace('mode: observe', 'mode: enforce')),
      store: ctx.store,
      clock: ctx.clock,
      logger: { warn() {} },
    });
    const { receipt } = await enforcing.resumeWithReceipt('ob-1', exec.run);
    const doc = receipt.document;
    expect([doc['decision'], doc['result'], doc['execution']]).toEqual(['deny', 'observed', 'committed']);
    expect(doc['would_have']).toEqual({ decision: 'deny', reason: 'decision', blocked_reason: 'decision' });
    expect(doc['policy_hash'], 'decided under the observe document').toBe(ctx.control.policyHash);
  });

  it('test_an_observe_mode_resume_is_counted_by_stats', async () => {
    const ctx = await setup(OBSERVED);
    const action = createAction({ name: 'iam.grant_admin', arguments: { user: 'eve' }, principal: { agent: 'refund-agent' }, resource: null });
    const exec = roundTrips(['ob-2']);
    await expect(ctx.control.execute(action, exec.run, { effectKey: 'admin:eve' })).rejects.toBeInstanceOf(Suspended);
    await ctx.control.resume('ob-2', exec.run);
    const doc = await stats(ctx.store, { mode: 'observe' });
    expect([doc.actions, doc.would_have_been_denied, doc.denied_by_reason]).toEqual([1, 1, { decision: 1 }]);
  });

  it('test_a_suspension_recorded_without_a_decision_falls_back_to_the_policy_and_its_own_approval_only', async () => {
    const ctx = await setup();
    const exec = roundTrips(['old-1']);
    await expect(ctx.control.execute(refund('txn_old'), exec.run)).rejects.toBeInstanceOf(Suspended);
    // A store without lastEvent, and an event from a build that recorded no `decided`.
    const bare = new Proxy(ctx.store, {
      get(target, prop, receiver) {
        if (prop === 'lastEvent') return undefined;
        if (prop === 'events')
          return async () => (await target.events()).map((e) => (e.type === 'EXECUTION_SUSPENDED' ? { ...e, data: { held: true, round: 1 } } : e));
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const warnings: string[] = [];
    const control = new Control({ policy: ctx.control.policy, store: bare, clock: ctx.clock, logger: { warn: (m: string) => void warnings.push(m) } });
    const { receipt } = await control.resumeWithReceipt('old-1', exec.run);
    expect(receipt.document).toMatchObject({ result: 'committed', decision: 'allow', decision_reason: 'rule[0]', approval_id: null, approver: null });
    expect(warnings.join('\n')).toMatch(/recorded no decision/);
  });
});
