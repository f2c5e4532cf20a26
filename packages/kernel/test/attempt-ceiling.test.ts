// The attempt ceiling, `max_attempts` (v5; spec 05 §3.2), ported from the original's
// tests/test_attempt_cap.py: a fast path after the policy (a failed record already at the
// ceiling: nothing reserved, no request, a presented approval unspent) and the guarantee after
// the reservation (the attempt number the store assigned). Every refusal is asserted by its
// reason: an ActionDenied is also what a policy denial raises.
import { describe, expect, it } from 'vitest';
import { ActionDenied, AmbiguousEffect, ApprovalRequired, createAction, NotExecuted, protect, type StateStore } from '@ctrlrun/kernel';
import { setup } from './harness.js';

const CEILING = 'attempt_ceiling';
const KEY = 'refund:txn_1';
const doc = (schema: string, entry: string, extra = '') => `schema: ${schema}
${extra}actions:
  stripe.refund:
    effect: "refund:{payment_id}"
${entry}`;
const ALLOW = (n: number) => doc('ctrlrun.policy/v5', `    max_attempts: ${n}\n    decision: allow\n`);
const APPROVE = (n: number) => doc('ctrlrun.policy/v5', `    max_attempts: ${n}\n    decision: approve\n`);
const ALLOW_NO_CEILING = doc('ctrlrun.policy/v2', '    decision: allow\n');

type Ctx = Awaited<ReturnType<typeof setup>>;
type Step = 'ok' | 'not_executed' | 'lost';

/** An executor that counts its calls and does what the script says (the last step repeats). */
function remote(...script: Step[]) {
  const r = {
    calls: 0,
    run: () => {
      r.calls += 1;
      const step = script[Math.min(r.calls - 1, script.length - 1)];
      if (step === 'not_executed') throw new NotExecuted('the remote rejected it before doing anything');
      if (step === 'lost') throw new Error('the response was lost');
      return `re_txn_1-${r.calls}`;
    },
  };
  return r;
}

function refund(ctx: Ctx, r: ReturnType<typeof remote>, options: { reconcile?: () => Promise<'not_executed'> } = {}) {
  return protect<{ payment_id: string; amount: number }, string>(() => r.run(), { control: ctx.control, name: 'stripe.refund', ...options });
}

async function call(ctx: Ctx, r: ReturnType<typeof remote>, approvalId?: string): Promise<unknown> {
  return refund(ctx, r)({ payment_id: 'txn_1', amount: 200 }, approvalId === undefined ? undefined : { approvalId }).catch((e: unknown) => e);
}

async function driveToFailed(ctx: Ctx, n: number) {
  const r = remote('not_executed');
  for (let i = 0; i < n; i++) expect(await call(ctx, r)).toBeInstanceOf(NotExecuted);
  const record = await ctx.store.getEffect(KEY);
  expect([record?.state, record?.attempt]).toEqual(['failed', n]);
  return r;
}

const refusals = (ctx: Ctx) => ctx.events.filter((e) => e.type === 'EFFECT_RESERVATION_REFUSED');

/** A granted approval for the refund of txn_1, filed as a request pass files one (for the cases where asking is refused). */
async function granted(ctx: Ctx): Promise<string> {
  const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_1', amount: 200 }, principal: { agent: 'refund-agent' } });
  const requestId = `apr_${Math.random().toString(16).slice(2).padEnd(32, '0').slice(0, 32)}`;
  const now = ctx.clock();
  await ctx.store.putApprovalRequest({
    requestId,
    actionHash: action.actionHash,
    action,
    createdAt: now.toISOString(),
    expiresAt: new Date(now.getTime() + 3_600_000).toISOString(),
    policyHash: ctx.control.policyHash,
  });
  await ctx.control.grantApproval(requestId, { approver: 'ops@example.com' });
  return requestId;
}

/**
 * The public route to the check after the reservation with the fast path live: attempts 1 and 2
 * fail, attempt 3 is lost (ambiguous, which the fast path must let through), and attempt 4 carries
 * a reconcile hook that moves the record to failed at 3; the store then assigns 4.
 */
async function reachTheCheck(ctx: Ctx) {
  const r = remote('not_executed', 'not_executed', 'lost');
  for (let i = 0; i < 2; i++) expect(await call(ctx, r)).toBeInstanceOf(NotExecuted);
  expect(((await call(ctx, r)) as Error).message).toBe('the response was lost');
  expect((await ctx.store.getEffect(KEY))?.state).toBe('ambiguous');
  const err = await refund(ctx, r, { reconcile: async () => 'not_executed' })({ payment_id: 'txn_1', amount: 200 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ActionDenied);
  expect((err as ActionDenied).reason).toBe(CEILING);
  return r;
}

describe('T240–T243: exactly N dispatches, then a named refusal', () => {
  it('test_T240_exactly_N_dispatches_then_a_refusal_naming_the_ceiling', async () => {
    const ctx = await setup(ALLOW(3));
    const r = await driveToFailed(ctx, 3);
    const err = await call(ctx, r);
    expect(err).toBeInstanceOf(ActionDenied);
    expect((err as ActionDenied).reason).toBe(CEILING);
    expect(r.calls).toBe(3);
    const blocked = ctx.receipts.at(-1)!.document;
    expect(blocked['result']).toBe('blocked');
    expect(blocked['error']).toBe('attempt 4 refused: max_attempts is 3 (SPEC-v0.7 §5)');
    expect(blocked['decision']).toBe('allow');
    expect(refusals(ctx).at(-1)!.data).toEqual({ reason: CEILING, attempt: 4, max_attempts: 3 });
    expect((await ctx.store.getEffect(KEY))?.state).toBe('failed');
  });

  it('test_T241_the_fast_path_never_calls_the_executor', async () => {
    const ctx = await setup(ALLOW(3));
    const r = await driveToFailed(ctx, 3);
    await call(ctx, r);
    await call(ctx, r);
    expect(r.calls).toBe(3);
  });

  it('test_T241_the_check_after_the_reservation_never_calls_the_executor', async () => {
    const ctx = await setup(ALLOW(3));
    const r = await reachTheCheck(ctx);
    expect(r.calls).toBe(3);
  });

  it('test_T242_under_the_ceiling_nothing_changes', async () => {
    const projection = async (ctx: Ctx) => {
      const events = ctx.events.map((e) => [e.type, e.data, e.effectKey]);
      const receipts = ctx.receipts.map((x) => [x.document['result'], x.document['attempt'], x.document['effect_key']]);
      const record = await ctx.store.getEffect(KEY);
      return [events, receipts, [record?.state, record?.attempt]];
    };
    const capped = await setup(ALLOW(3));
    await driveToFailed(capped, 3);
    const free = await setup(ALLOW_NO_CEILING);
    await driveToFailed(free, 3);
    expect(await projection(capped)).toEqual(await projection(free));
    // And an attempt that succeeds under the ceiling is what it always was.
    const ok = await setup(ALLOW(3));
    expect(await call(ok, remote('ok'))).toBe('re_txn_1-1');
    expect(ok.types()).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'EFFECT_RESERVED', 'EXECUTION_STARTED', 'EXECUTION_COMMITTED']);
  });

  it('test_T243_a_document_with_no_ceiling_renews_without_bound', async () => {
    const ctx = await setup(ALLOW_NO_CEILING);
    const r = remote('not_executed');
    for (let i = 0; i < 8; i++) expect(await call(ctx, r)).toBeInstanceOf(NotExecuted);
    expect(r.calls).toBe(8);
    expect((await ctx.store.getEffect(KEY))?.attempt).toBe(8);
    expect(refusals(ctx).filter((e) => e.data['reason'] === CEILING)).toEqual([]);
  });

  it('test_T243_an_action_with_no_ceiling_beside_one_with_a_ceiling', async () => {
    const ctx = await setup(`schema: ctrlrun.policy/v5
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    max_attempts: 1
    decision: allow
  stripe.payout:
    effect: "payout:{payment_id}"
    decision: allow
`);
    const r = remote('not_executed');
    const payout = protect<{ payment_id: string; amount: number }, string>(() => r.run(), { control: ctx.control, name: 'stripe.payout' });
    for (let i = 0; i < 5; i++) expect(await payout({ payment_id: 'txn_1', amount: 200 }).catch((e: unknown) => e)).toBeInstanceOf(NotExecuted);
    expect(r.calls).toBe(5);
  });
});

describe('T245: the check on the number the store assigned', () => {
  it('test_T245_the_check_refuses_the_attempt_the_store_assigned', async () => {
    const ctx = await setup(ALLOW(3));
    const r = await reachTheCheck(ctx);
    expect(r.calls).toBe(3);
    const types = ctx.types();
    const reserved = types.lastIndexOf('EFFECT_RESERVED');
    const refusedAt = types.lastIndexOf('EFFECT_RESERVATION_REFUSED');
    expect(reserved).toBeLessThan(refusedAt);
    expect(refusals(ctx).at(-1)!.data).toEqual({ reason: CEILING, attempt: 4, max_attempts: 3 });
    const record = await ctx.store.getEffect(KEY);
    expect([record?.state, record?.attempt, record?.error]).toEqual(['failed', 4, 'attempt 4 refused: max_attempts is 3 (SPEC-v0.7 §5)']);
    const blocked = ctx.receipts.at(-1)!.document;
    expect([blocked['result'], blocked['attempt']]).toEqual(['blocked', 4]);
    // Nothing started: the release is a transition, not a claim that something ran.
    expect(types.slice(reserved)).not.toContain('EXECUTION_STARTED');
    expect(types.slice(reserved)).not.toContain('EXECUTION_FAILED');
  });

  it('test_T245_the_fast_path_lets_an_ambiguous_record_through', async () => {
    const ctx = await setup(ALLOW(1));
    const r = remote('lost', 'ok');
    expect(((await call(ctx, r)) as Error).message).toBe('the response was lost');
    expect((await ctx.store.getEffect(KEY))?.state).toBe('ambiguous');
    expect(await call(ctx, r)).toBeInstanceOf(AmbiguousEffect);
    expect(refusals(ctx).at(-1)!.data['reason']).toBe('ambiguous');
  });

  it('test_T245_two_callers_that_both_read_below_the_ceiling_do_not_both_get_through', async () => {
    const ctx = await setup(ALLOW(2));
    const mine = remote('not_executed', 'ok');
    expect(await call(ctx, mine)).toBeInstanceOf(NotExecuted);
    expect((await ctx.store.getEffect(KEY))?.attempt).toBe(1);
    // The window between the fast path's read and the reservation, opened once, on purpose:
    // somebody else renews to 2, dispatches and fails; the store then assigns 3.
    const other = remote('not_executed');
    const store = ctx.store as StateStore & { getEffect: StateStore['getEffect'] };
    const original = store.getEffect.bind(store);
    let armed = true;
    store.getEffect = async (key: string) => {
      const seen = await original(key);
      if (armed) {
        armed = false;
        expect(await call(ctx, other)).toBeInstanceOf(NotExecuted);
      }
      return seen;
    };
    const err = await call(ctx, mine);
    store.getEffect = original;
    expect(armed).toBe(false);
    expect((err as ActionDenied).reason).toBe(CEILING);
    expect([mine.calls, other.calls]).toEqual([1, 1]);
    expect(refusals(ctx).at(-1)!.data).toEqual({ reason: CEILING, attempt: 3, max_attempts: 2 });
    const record = await ctx.store.getEffect(KEY);
    expect([record?.state, record?.attempt]).toEqual(['failed', 3]);
  });
});

describe('T245b: the fast path, by the evidence only it leaves', () => {
  async function failedOnceApproved() {
    const ctx = await setup(APPROVE(1));
    const r = remote('not_executed');
    const asked = (await call(ctx, r)) as ApprovalRequired;
    expect(asked).toBeInstanceOf(ApprovalRequired);
    await ctx.control.grantApproval(asked.requestId, { approver: 'ops@example.com' });
    expect(await call(ctx, r, asked.requestId)).toBeInstanceOf(NotExecuted);
    expect((await ctx.store.getEffect(KEY))?.attempt).toBe(1);
    return { ctx, r };
  }

  it('test_T245b_the_fast_path_creates_no_approval_request', async () => {
    const { ctx, r } = await failedOnceApproved();
    const requested = ctx.types().filter((t) => t === 'APPROVAL_REQUESTED').length;
    const err = await call(ctx, r);
    expect(err).not.toBeInstanceOf(ApprovalRequired);
    expect((err as ActionDenied).reason).toBe(CEILING);
    expect(ctx.types().filter((t) => t === 'APPROVAL_REQUESTED').length).toBe(requested);
    expect(refusals(ctx).at(-1)!.data['reason']).toBe(CEILING);
    expect(r.calls).toBe(1);
  });

  it('test_T245b_the_fast_path_leaves_a_presented_approval_granted', async () => {
    const { ctx, r } = await failedOnceApproved();
    const second = await granted(ctx);
    const err = await call(ctx, r, second);
    expect((err as ActionDenied).reason).toBe(CEILING);
    expect((await ctx.store.getApproval(second))?.status).toBe('granted');
    // Recorded against the approval it met, which is not spent.
    expect(refusals(ctx).at(-1)!.approvalId).toBe(second);
    const blocked = ctx.receipts.at(-1)!.document;
    expect([blocked['approval_id'], blocked['approver'], blocked['decision']]).toEqual([second, 'ops@example.com', 'approve']);
  });

  it('test_T245b_the_fast_path_reserves_nothing', async () => {
    const ctx = await setup(ALLOW(1));
    const r = remote('not_executed');
    expect(await call(ctx, r)).toBeInstanceOf(NotExecuted);
    const reserved = ctx.types().filter((t) => t === 'EFFECT_RESERVED').length;
    expect(((await call(ctx, r)) as ActionDenied).reason).toBe(CEILING);
    expect(ctx.types().filter((t) => t === 'EFFECT_RESERVED').length).toBe(reserved);
    expect((await ctx.store.getEffect(KEY))?.attempt).toBe(1);
  });
});

describe('observe mode, and a ceiling with no key', () => {
  it('observe mode records attempt_ceiling as would_have.blocked_reason and runs the action', async () => {
    const ctx = await setup(doc('ctrlrun.policy/v5', '    max_attempts: 1\n    decision: allow\n', 'mode: observe\n'));
    const r = remote('not_executed', 'ok');
    expect(await call(ctx, r)).toBeInstanceOf(NotExecuted);
    expect(await call(ctx, r)).toBe('re_txn_1-2');
    const last = ctx.receipts.at(-1)!.document;
    expect(last['result']).toBe('observed');
    expect(last['would_have']).toEqual({ decision: 'allow', reason: 'decision', blocked_reason: CEILING });
  });

  it('a ceiling on a call with no effect key counts nothing, and says so once', async () => {
    const warnings: string[] = [];
    const ctx = await setup('schema: ctrlrun.policy/v5\nactions:\n  report.send:\n    max_attempts: 1\n    decision: allow\n', {
      logger: { warn: (m: string) => void warnings.push(m) },
    });
    const r = remote('not_executed');
    const send = protect<{ id: string }, string>(() => r.run(), { control: ctx.control, name: 'report.send' });
    for (let i = 0; i < 3; i++) expect(await send({ id: 'x' }).catch((e: unknown) => e)).toBeInstanceOf(NotExecuted);
    expect(r.calls).toBe(3);
    expect(warnings.filter((w) => w.includes('max_attempts')).length).toBe(1);
  });
});
