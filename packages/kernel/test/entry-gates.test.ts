// What this build cannot verify fails closed at execution, as the original 0.12.2 does without
// the same means (spec 05 §3.2–§3.3): a threshold above one with no approver identity, an
// upstream pin with no gateway that observed the upstream; and the names reserved for the
// original's policy-change flow are never executed or reserved here.
import { describe, expect, it } from 'vitest';
import { ActionDenied, ApprovalRequired, createAction, InvalidArgument, POLICY_CHANGE_ACTION, protect, Suspended } from '@ctrlrun/kernel';
import { setup } from './harness.js';
import { rejection, rig } from './authority.fixtures.js';

const D = `sha256:${'a'.repeat(64)}`;
const doc = (schema: string, entry: string, extra = '') =>
  `schema: ${schema}\n${extra}actions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n${entry}  customer.read: {decision: allow}\n`;

function refunder(ctx: Awaited<ReturnType<typeof setup>>) {
  const calls = { n: 0 };
  const fn = protect<{ payment_id: string; amount: number }, string>(
    () => {
      calls.n += 1;
      return 'done';
    },
    { control: ctx.control, name: 'stripe.refund' },
  );
  return {
    fn,
    calls,
    run: (approvalId?: string) => fn({ payment_id: 'txn_1', amount: 200 }, approvalId ? { approvalId } : undefined).catch((e: unknown) => e),
  };
}

describe('approvals_required above one (v6)', () => {
  it('test_T321_a_threshold_above_one_with_no_approver_identity_is_denied', async () => {
    const ctx = await setup(doc('ctrlrun.policy/v6', '    approvals_required: 2\n    decision: approve\n'));
    const { run, calls } = refunder(ctx);
    const err = await run();
    expect(err).toBeInstanceOf(ActionDenied);
    expect(err).not.toBeInstanceOf(ApprovalRequired);
    expect((err as ActionDenied).reason).toBe('approvals_unverifiable');
    expect((err as Error).message).toMatch(/needs 2 distinct approvers \(approvals_required\).*denied before anyone is asked/);
    expect(calls.n).toBe(0);
    // Nobody was asked: no request row, no APPROVAL_REQUESTED.
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_1', amount: 200 }, principal: { agent: 'refund-agent' } });
    expect(await ctx.store.approvalsFor(action.actionHash)).toEqual([]);
    expect(ctx.types()).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'ACTION_DENIED']);
    expect(ctx.events.at(-1)?.data).toEqual({ reason: 'approvals_unverifiable' });
    const receipt = ctx.receipts.at(-1)!.document;
    expect([receipt['result'], receipt['decision'], receipt['decision_reason']]).toEqual(['denied', 'deny', 'approvals_unverifiable']);
    // Nothing reserved either.
    expect(await ctx.store.getEffect('refund:txn_1')).toBeNull();
  });

  it('one approver, or an action the policy allows, is what it always was', async () => {
    const one = await setup(doc('ctrlrun.policy/v6', '    approvals_required: 1\n    decision: approve\n'));
    expect(await refunder(one).run()).toBeInstanceOf(ApprovalRequired);
    const allowed = await setup(doc('ctrlrun.policy/v6', '    approvals_required: 3\n    decision: allow\n'));
    expect(await refunder(allowed).run()).toBe('done');
  });
});

describe('upstream pins (v8)', () => {
  it('test_T493_a_pin_with_nothing_observed_is_refused_and_never_admitted (in process: upstream_unverified)', async () => {
    for (const pin of [`{tool_schema_sha256: "${D}"}`, `{tls_cert_sha256: ["${D}"]}`, '{tls_cert_file: /etc/upstream.pem}']) {
      const ctx = await setup(doc('ctrlrun.policy/v8', `    upstream: ${pin}\n    decision: allow\n`));
      const { run, calls } = refunder(ctx);
      const err = await run();
      expect((err as ActionDenied).reason, pin).toBe('upstream_unverified');
      expect(calls.n).toBe(0);
      expect(await ctx.store.getEffect('refund:txn_1')).toBeNull();
      expect(ctx.receipts.at(-1)!.document['decision_reason']).toBe('upstream_unverified');
    }
  });

  it('an entry that pins nothing, and every other action, runs', async () => {
    const ctx = await setup(doc('ctrlrun.policy/v8', '    upstream: {}\n    decision: allow\n'));
    expect(await refunder(ctx).run()).toBe('done');
    const pinned = await setup(doc('ctrlrun.policy/v8', `    upstream: {tool_schema_sha256: "${D}"}\n    decision: allow\n`));
    const read = protect(() => 'row', { control: pinned.control, name: 'customer.read' });
    expect(await read({})).toBe('row');
  });

  it('the pin is checked before the approval gate: no human is asked about an action that could never run', async () => {
    const ctx = await setup(doc('ctrlrun.policy/v8', `    upstream: {tool_schema_sha256: "${D}"}\n    decision: approve\n`));
    const err = await refunder(ctx).run();
    expect((err as ActionDenied).reason).toBe('upstream_unverified');
    expect(ctx.types()).not.toContain('APPROVAL_REQUESTED');
  });
});

describe('observe mode notes these gates and refuses nothing', () => {
  it('blocked_reason is the first gate enforce mode would have met', async () => {
    const cases: [string, string][] = [
      [`    upstream: {tool_schema_sha256: "${D}"}\n    approvals_required: 2\n    decision: approve\n`, 'upstream_unverified'],
      ['    approvals_required: 2\n    decision: approve\n', 'approvals_unverifiable'],
    ];
    for (const [entry, reason] of cases) {
      const ctx = await setup(doc('ctrlrun.policy/v8', entry, 'mode: observe\n'));
      const { run, calls } = refunder(ctx);
      expect(await run()).toBe('done');
      expect(calls.n).toBe(1);
      expect(ctx.receipts.at(-1)!.document['would_have']).toEqual({ decision: 'approve', reason: 'decision', blocked_reason: reason });
    }
  });
});

describe('the names reserved for the policy-change flow', () => {
  it('ctrlrun.policy.change is never executed here, and nothing is written', async () => {
    const ctx = await setup(`schema: ctrlrun.policy/v6\nactions:\n  ${POLICY_CHANGE_ACTION}: {decision: allow}\n`);
    const change = protect(() => 'changed', { control: ctx.control, name: POLICY_CHANGE_ACTION });
    const err = await change({ policy_hash: D }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(/reserved for the original's policy-change flow, which this build does not implement/);
    expect(await ctx.store.events()).toEqual([]);
    expect(await ctx.store.receipts()).toEqual([]);
  });

  it('an effect key beginning policy: is refused before anything is written, however it was made', async () => {
    const ctx = await setup(
      'schema: ctrlrun.policy/v2\nactions:\n  doc.publish: {decision: allow}\n  stripe.refund: {effect: "{kind}:{id}", decision: allow}\n',
    );
    const attempts: (() => Promise<unknown>)[] = [
      // A decorator template the policy never saw.
      () => protect(() => 'x', { control: ctx.control, name: 'doc.publish', effect: 'policy:{id}' })({ id: 'abc' }),
      // A placeholder that carries the prefix in.
      () => protect(() => 'x', { control: ctx.control, name: 'stripe.refund' })({ kind: 'policy', id: 'abc' }),
      // An explicit key.
      () =>
        ctx.control.execute(createAction({ name: 'doc.publish', arguments: { id: 'abc' }, principal: { agent: 'refund-agent' } }), () => 'x', {
          effectKey: `policy:${D}`,
        }),
    ];
    for (const attempt of attempts) {
      const err = await attempt().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidArgument);
      expect((err as Error).message).toMatch(/begins 'policy:', which is reserved for the policy-change flow/);
    }
    expect(await ctx.store.events()).toEqual([]);
    // A key that merely contains the word is an ordinary key.
    expect(await protect(() => 'x', { control: ctx.control, name: 'stripe.refund' })({ kind: 'not-policy', id: 'abc' })).toBe('x');
  });
});

describe('grant tasks and budgets (v7) are never ignored', () => {
  const V7 = (extra: string, delegable = '') => `schema: ctrlrun.policy/v7
authority:
  grants:
    - id: support
      subject: { agent: "support-agent" }
      actions: ["stripe.refund"]
${delegable}${extra}    - id: reader
      subject: { agent: "*" }
      actions: ["customer.read"]
actions:
  stripe.refund: {decision: allow}
  customer.read: {decision: allow}
`;
  const refund = (agent = 'support-agent') =>
    createAction({ name: 'stripe.refund', arguments: { amount: 1000 }, principal: { agent }, environment: 'production' });

  it('test_T381_a_task_bound_grant_refuses_an_action_carrying_no_task: authority_task', async () => {
    const r = await rig(V7('      tasks: ["ticket:*"]\n'));
    const err = await rejection(r.control.execute(refund(), r.executor));
    expect(err).toBeInstanceOf(ActionDenied);
    expect(err['reason']).toBe('authority_task');
    expect(r.calls).toBe(0);
    expect(r.lastReceipt()['decision_reason']).toBe('authority_task');
    // Another grant without either key is untouched.
    expect(
      await r.control.execute(createAction({ name: 'customer.read', arguments: {}, principal: { agent: 'x' }, environment: 'production' }), r.executor),
    ).toBe('ok');
  });

  it("test_T380_a_task_bound_grant_refuses_a_task_it_does_not_name; a task it names passes and is the receipt's task, never hashed", async () => {
    const r = await rig(V7('      tasks: ["ticket:*"]\n'));
    const other = await rejection(r.control.execute(refund(), r.executor, { task: 'incident:7' }));
    expect(other['reason']).toBe('authority_task');
    expect(r.calls).toBe(0);
    const action = refund();
    expect(await r.control.execute(action, r.executor, { task: 'ticket:4711' })).toBe('ok');
    expect(r.calls).toBe(1);
    const receipt = r.lastReceipt();
    expect([receipt['task'], receipt['authority_grant_id'], receipt['action_hash']]).toEqual(['ticket:4711', expect.any(String), action.actionHash]);
    // The same question without executing: evaluate with the task.
    expect((await r.control.evaluate(refund(), { task: 'ticket:1' })).decision).toBe('allow');
    expect((await r.control.evaluate(refund())).reason).toBe('authority_task');
    // protect passes the call's task through, to the question and to the run.
    const fn = protect(() => 'via protect', { control: r.control, name: 'stripe.refund' });
    const as = { principal: { agent: 'support-agent' } };
    expect(await fn.needsApproval({ amount: 1000 }, { ...as, task: 'ticket:9' })).toBe(false);
    expect(await fn({ amount: 1000 }, { ...as, task: 'ticket:9' })).toBe('via protect');
    expect(r.lastReceipt()['task']).toBe('ticket:9');
    expect((await rejection(fn({ amount: 1000 }, as)))['reason']).toBe('authority_task');
    // A malformed task is refused naming it, before anything is written.
    for (const bad of ['', 'a\u0000b', 'ticket:\u202e1', 'ticket:\u200b1', 'a\u2028b', 'a\ud800', 'x'.repeat(257), 7]) {
      expect(await rejection(r.control.execute(refund(), r.executor, { task: bad as string }))).toBeInstanceOf(InvalidArgument);
    }
  });

  it('test_T382_a_grant_naming_no_task_permits_any_task', async () => {
    const r = await rig(V7(''));
    expect(await r.control.execute(refund(), r.executor, { task: 'anything:at-all' })).toBe('ok');
    expect(r.lastReceipt()['task']).toBe('anything:at-all');
    expect(await r.control.execute(refund(), r.executor)).toBe('ok');
    expect(r.lastReceipt()['task']).toBeNull();
  });

  it("a suspended call's task is carried to its resumed leg: EXECUTION_STARTED records {task, hop}, the resume is evaluated for that task and its receipt names it", async () => {
    const r = await rig(V7('      tasks: ["ticket:*"]\n'));
    const action = refund();
    const suspended = await rejection(
      r.control.execute(
        action,
        () => {
          throw new Suspended('cont-task-1');
        },
        { task: 'ticket:4711', effectKey: 'refund:task-1' },
      ),
    );
    expect(suspended).toBeInstanceOf(Suspended);
    expect(r.data('EXECUTION_STARTED')).toEqual([{ task: 'ticket:4711', hop: null }]);
    expect(await r.control.resume('cont-task-1', () => 'resumed')).toBe('resumed');
    // The resumed leg passes the task-bound grant for the task the call named (not "no task").
    expect(r.types(action.actionId).filter((t) => t.startsWith('AUTHORITY_'))).toEqual(['AUTHORITY_RESOLVED', 'AUTHORITY_RESOLVED']);
    const receipt = r.lastReceipt();
    expect([receipt['result'], receipt['task'], receipt['authority_grant_id']]).toEqual(['committed', 'ticket:4711', 'support']);
    // A call naming no task records null, not an empty object.
    expect(
      await r.control.execute(createAction({ name: 'customer.read', arguments: {}, principal: { agent: 'x' }, environment: 'production' }), r.executor),
    ).toBe('ok');
    expect(r.data('EXECUTION_STARTED').at(-1)).toEqual({ task: null, hop: null });
  });

  it('a budgeted grant never lets an action through uncharged: with no effect key to charge under, budget_unkeyed', async () => {
    const r = await rig(V7('      budgets: [{metric: amount, limit: 100000, window: P1D}]\n'));
    const err = await rejection(r.control.execute(refund(), r.executor));
    expect(err['reason']).toBe('budget_unkeyed');
    expect(r.calls).toBe(0);
  });

  it('a delegation under a budgeted root is refused too (the whole chain is read)', async () => {
    const r = await rig(
      V7('      budgets: [{metric: amount, limit: 100000, window: P1D}]\n', '      delegable: true\n      expires_at: "2027-01-01T00:00:00+00:00"\n'),
    );
    // A child must keep the budget (containment), and with it is refused as its root is.
    const child = { subject: { agent: 'helper-agent' }, actions: ['stripe.refund'], expiresAt: '2026-12-01T00:00:00+00:00' };
    expect(await rejection(r.control.delegate('support', child, { by: { agent: 'support-agent' } }))).toMatchObject({ dimension: 'budgets' });
    await r.control.delegate('support', { ...child, budgets: [{ metric: 'amount', limit: 1000, window: 'P1D' }] }, { by: { agent: 'support-agent' } });
    const err = await rejection(r.control.execute(refund('helper-agent'), r.executor));
    expect(err['reason']).toBe('budget_unkeyed');
    expect(r.calls).toBe(0);
  });
});
