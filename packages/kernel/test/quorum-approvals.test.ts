// Approvals by verified people and preconditions through the Control (spec 05 §4.2–§4.4), ported
// from the original 0.12.2's tests/test_approver.py, test_entitlement.py, test_m_of_n.py and
// test_preconditions.py under their names. The store side (count_grant, the fingerprint compared at
// consumption) is in the conformance suite every store runs.
import { describe, expect, it } from 'vitest';
import {
  ActionDenied,
  ApprovalMismatch,
  ApprovalRequired,
  approvalProgress,
  createAction,
  preconditionFingerprint,
  protect,
  randomIds,
  type ControlOptions,
  type JsonObject,
  type VerifiedPrincipal,
} from '@ctrlrun/kernel';
import { setup } from './harness.js';

const POLICY = (entry = '', controls = '') => `schema: ctrlrun.policy/v6
${controls}actions:
  stripe.refund:
    effect: "refund:{payment_id}"
${entry}    decision: approve
`;
const ROLES = `controls:
  refund-limit: {title: Refund limit, approver_role: finance}
  pii: {title: Customer data}
`;
const IDENTITY: Partial<ControlOptions> = { approvers: { rolesClaim: 'roles' } };
const ARGS = { payment_id: 'txn_1', amount: 200 };
const REQUESTER = { agent: 'refund-agent', user: 'riley' };

const ana: VerifiedPrincipal = { agent: 'inbox', user: 'ana', issuer: 'https://idp.example', claims: { roles: ['finance'], email: 'ana@example.com' } };
const bo: VerifiedPrincipal = { agent: 'inbox', user: 'bo', issuer: 'https://idp.example', claims: { roles: 'finance' } };
const cy: VerifiedPrincipal = { agent: 'inbox', user: 'cy', issuer: 'https://idp.example', claims: { roles: ['support'] } };

async function rig(policy: string, extra: Partial<ControlOptions> = {}) {
  const ctx = await setup(policy, extra);
  const action = createAction({ name: 'stripe.refund', arguments: ARGS, principal: REQUESTER });
  const runs = { n: 0 };
  const exec = (approvalId?: string, preconditions?: () => JsonObject | Promise<JsonObject>) =>
    ctx.control
      .execute(action, () => ++runs.n, { ...(approvalId ? { approvalId } : {}), ...(preconditions ? { preconditions } : {}) })
      .catch((e: unknown) => e);
  const ask = async (preconditions?: () => JsonObject) => {
    const err = await exec(undefined, preconditions);
    expect(err).toBeInstanceOf(ApprovalRequired);
    return (err as ApprovalRequired).requestId;
  };
  const invalidated = () => ctx.events.filter((e) => e.type === 'APPROVAL_INVALIDATED').map((e) => e.data);
  const lastReceipt = () => ctx.receipts.at(-1)!.document;
  return { ...ctx, action, runs, exec, ask, invalidated, lastReceipt };
}

async function pending(p: Promise<unknown>): Promise<ApprovalMismatch> {
  const err = await p.catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApprovalMismatch);
  expect((err as ApprovalMismatch).reason).toBe('pending');
  return err as ApprovalMismatch;
}

describe('M of N (tests/test_m_of_n.py)', () => {
  it('through Control, one person with a second credential (another agent or issuer, the name in another case or with an invisible character) is one yes, not two', async () => {
    const r = await rig(POLICY('    approvals_required: 2\n'), IDENTITY);
    const id = await r.ask();
    await pending(r.control.grantApproval(id, { approver: 'ana', via: 'inbox', verified: ana }));
    for (const again of [
      { ...ana, agent: 'operator', issuer: 'ctrlrun:static-token' },
      { ...ana, agent: 'ana-idp-subject', user: 'ANA' },
      { ...ana, agent: 'other-client', user: 'an\u034fa ' },
      // An identity provider with no user claim names the person by its subject.
      { ...ana, agent: 'Ana', user: null },
    ]) {
      const err = await pending(r.control.grantApproval(id, { approver: String(again.user), via: 'inbox', verified: again }));
      expect(err.message).toMatch(/a second yes by the same person counts once; it stays pending \(1 of 2 approvals: ana\)/);
    }
    expect((await r.store.getApproval(id))?.status).toBe('pending');
    expect(await r.exec(id)).toMatchObject({ reason: 'pending' });
    expect(r.runs.n).toBe(0);
    // Another person reaches two, and the action runs once.
    await r.control.grantApproval(id, { approver: 'bo', via: 'inbox', verified: bo });
    expect(await r.exec(id)).toBe(1);
  });

  it('test_T310_the_approval_is_consumable_only_after_the_nth: two verified approvers, the action runs once, the receipt names both', async () => {
    const r = await rig(POLICY('    approvals_required: 2\n'), IDENTITY);
    const id = await r.ask();
    expect((await r.store.getApproval(id))?.request.approvalsRequired).toBe(2);
    const first = await pending(r.control.grantApproval(id, { approver: 'ana', via: 'inbox', verified: ana }));
    expect(first.message).toContain('1 of 2 approvals: ana');
    expect(approvalProgress((await r.store.getApproval(id))!)).toBe('1 of 2 approvals: ana');
    // Presented after one: refused as pending, nothing runs.
    expect(await r.exec(id)).toMatchObject({ reason: 'pending' });
    expect(r.runs.n).toBe(0);
    r.advance(1000);
    const approval = await r.control.grantApproval(id, { approver: 'bo', via: 'inbox', verified: bo });
    expect(approval.approvers?.map((a) => a.user)).toEqual(['ana', 'bo']);
    expect(r.events.filter((e) => e.type === 'APPROVAL_GRANTED').map((e) => e.data)).toEqual([
      { approver: 'bo', action_hash: r.action.actionHash, via: 'inbox', verified: { agent: 'inbox', user: 'bo', issuer: 'https://idp.example' } },
    ]);
    expect(await r.exec(id)).toBe(1);
    expect(await r.exec(id)).toMatchObject({ reason: 'consumed' });
    expect(r.runs.n).toBe(1);
    const committed = r.receipts.find((x) => x.document['result'] === 'committed')!.document;
    expect(committed['approvers']).toEqual([
      { agent: 'inbox', user: 'ana', issuer: 'https://idp.example', entitled: [], granted_at: '2026-01-01T12:00:00+00:00' },
      { agent: 'inbox', user: 'bo', issuer: 'https://idp.example', entitled: [], granted_at: '2026-01-01T12:00:01+00:00' },
    ]);
  });

  it('test_T311_a_second_grant_from_the_same_principal_counts_once (refused, saying so)', async () => {
    const r = await rig(POLICY('    approvals_required: 2\n'), IDENTITY);
    const id = await r.ask();
    await pending(r.control.grantApproval(id, { approver: 'ana', verified: ana }));
    const again = await pending(r.control.grantApproval(id, { approver: 'ana', verified: ana }));
    expect(again.message).toMatch(/"?ana"? already approved it.*1 of 2 approvals: ana/);
    expect((await r.store.getApproval(id))?.status).toBe('pending');
  });

  it('test_T314_the_requesters_own_yes_is_refused_at_consumption', async () => {
    const r = await rig(POLICY('    approvals_required: 2\n'), IDENTITY);
    const id = await r.ask();
    await pending(r.control.grantApproval(id, { approver: 'ana', verified: ana }));
    // The requester answers through a surface that verified it: counted, then refused when presented.
    await r.control.grantApproval(id, { approver: 'a helpful colleague', verified: { agent: REQUESTER.agent, user: REQUESTER.user, issuer: null } });
    const err = await r.exec(id);
    expect(err).toMatchObject({ reason: 'approver_is_requester' });
    expect((err as Error).message).toContain('"riley" is the principal that requested the action');
    expect(r.runs.n).toBe(0);
    expect((await r.store.getApproval(id))?.status, 'left granted').toBe('granted');
    expect(r.invalidated()).toEqual([{ reason: 'approver_is_requester', action_hash: r.action.actionHash }]);
    expect([r.lastReceipt()['result'], (r.lastReceipt()['approvers'] as unknown[]).length]).toEqual(['blocked', 2]);
  });

  it('test_T315_an_unentitled_yes_is_refused_at_consumption', async () => {
    const r = await rig(POLICY('    approvals_required: 2\n    controls: [refund-limit]\n', ROLES), IDENTITY);
    const id = await r.ask();
    expect((await r.store.getApproval(id))?.request.requiredRoles).toEqual([{ control: 'refund-limit', role: 'finance' }]);
    await pending(r.control.grantApproval(id, { approver: 'ana', verified: ana }));
    await r.control.grantApproval(id, { approver: 'cy', verified: cy });
    expect(await r.exec(id)).toMatchObject({ reason: 'approver_unentitled' });
    expect(r.runs.n).toBe(0);
  });

  it('test_T316_an_unverifiable_yes_does_not_count', async () => {
    const r = await rig(POLICY('    approvals_required: 2\n'), IDENTITY);
    const id = await r.ask();
    await pending(r.control.grantApproval(id, { approver: 'ana', verified: ana }));
    const err = await pending(r.control.grantApproval(id, { approver: 'cli:local' }));
    expect(err.message).toContain('no verified identity');
    expect((await r.store.getApproval(id))?.approvers?.length).toBe(1);
  });

  it('test_T317_one_denial_denies_a_request_holding_n_minus_one', async () => {
    const r = await rig(POLICY('    approvals_required: 2\n'), IDENTITY);
    const id = await r.ask();
    await pending(r.control.grantApproval(id, { approver: 'ana', verified: ana }));
    await r.control.denyApproval(id, { approver: 'bo', verified: bo });
    expect(await r.exec(id)).toBeInstanceOf(ActionDenied);
    expect(r.runs.n).toBe(0);
  });

  it('test_T319_one_required_is_unchanged', async () => {
    const r = await rig(POLICY());
    const id = await r.ask();
    expect((await r.store.getApproval(id))?.request.approvalsRequired).toBe(1);
    await r.control.grantApproval(id, { approver: 'cli:local' });
    expect(await r.exec(id)).toBe(1);
    expect(r.lastReceipt()['approvers']).toEqual([]);
  });
});

describe('the approver gate (tests/test_approver.py, tests/test_entitlement.py)', () => {
  it('test_T281_an_approval_with_no_verified_approver_is_refused', async () => {
    const r = await rig(POLICY(), IDENTITY);
    const id = await r.ask();
    await r.control.grantApproval(id, { approver: 'cli:local' });
    expect(await r.exec(id)).toMatchObject({ reason: 'approver_unverified' });
    expect(r.runs.n).toBe(0);
    expect((await r.store.getApproval(id))?.status).toBe('granted');
  });

  it('test_T282_with_no_approver_identity_the_whole_path_is_0_7_0', async () => {
    const r = await rig(POLICY('    controls: [refund-limit]\n', ROLES));
    const id = await r.ask();
    // Even the requester's own verified yes and an unentitled one: no gate without an identity.
    await r.control.grantApproval(id, { approver: 'riley', verified: { agent: REQUESTER.agent, user: REQUESTER.user } });
    expect(await r.exec(id)).toBe(1);
  });

  it('test_T283_a_resolving_surface_records_the_principal_and_no_claim_value', async () => {
    const r = await rig(POLICY('    controls: [refund-limit]\n', ROLES), IDENTITY);
    const id = await r.ask();
    await r.control.grantApproval(id, { approver: 'ana', verified: ana });
    expect((await r.store.getApproval(id))?.approvers).toEqual([
      { agent: 'inbox', user: 'ana', issuer: 'https://idp.example', entitled: ['refund-limit'], grantedAt: '2026-01-01T12:00:00+00:00' },
    ]);
    expect(await r.exec(id)).toBe(1);
    expect(JSON.stringify(r.lastReceipt()['approvers'])).not.toContain('ana@example.com');
  });

  it('test_T285_self_approval_is_refused_on_the_principal_not_the_string', async () => {
    const r = await rig(POLICY(), IDENTITY);
    const own = await r.ask();
    await r.control.grantApproval(own, { approver: 'somebody else', verified: { agent: 'refund-agent', user: 'riley' } });
    expect(await r.exec(own)).toMatchObject({ reason: 'approver_is_requester' });
    // The approver string naming the requester means nothing: the verified principal is someone else.
    const r2 = await rig(POLICY(), IDENTITY);
    const other = await r2.ask();
    await r2.control.grantApproval(other, { approver: 'riley', verified: ana });
    expect(await r2.exec(other)).toBe(1);
  });

  it('test_T291_the_check_runs_with_no_precondition_provider_anywhere', async () => {
    const r = await rig(POLICY(), IDENTITY);
    const id = await r.ask();
    await r.control.grantApproval(id, { approver: 'cli:local' });
    expect(await r.exec(id)).toMatchObject({ reason: 'approver_unverified' });
  });

  it('test_T291b_a_denied_approval_still_denies, test_T291b_a_consumed_approval_still_reports_consumed', async () => {
    const r = await rig(POLICY(), IDENTITY);
    const denied = await r.ask();
    await r.control.denyApproval(denied, { approver: 'cli:local' });
    expect(await r.exec(denied)).toMatchObject({ reason: 'approval_denied' });
    const r2 = await rig(POLICY(), IDENTITY);
    const used = await r2.ask();
    await r2.control.grantApproval(used, { approver: 'ana', verified: ana });
    expect(await r2.exec(used)).toBe(1);
    expect(await r2.exec(used)).toMatchObject({ reason: 'consumed' });
  });

  it('test_T297_an_unentitled_approver_is_refused_and_the_control_is_named', async () => {
    const r = await rig(POLICY('    controls: [refund-limit, pii]\n', ROLES), IDENTITY);
    const id = await r.ask();
    await r.control.grantApproval(id, { approver: 'cy', verified: cy });
    const err = await r.exec(id);
    expect(err).toMatchObject({ reason: 'approver_unentitled' });
    expect((err as Error).message).toContain('control "refund-limit" requires');
    expect(r.invalidated()).toEqual([{ reason: 'approver_unentitled', action_hash: r.action.actionHash, control: 'refund-limit', role: 'finance' }]);
  });

  it('test_T298_an_entitled_approver_approves_and_the_action_runs', async () => {
    const r = await rig(POLICY('    controls: [refund-limit]\n', ROLES), IDENTITY);
    const id = await r.ask();
    await r.control.grantApproval(id, { approver: 'bo', verified: bo });
    expect(await r.exec(id)).toBe(1);
    expect((r.lastReceipt()['approvers'] as { entitled: string[] }[])[0]!.entitled).toEqual(['refund-limit']);
  });

  it('test_T301_a_control_naming_no_role_gates_nobody', async () => {
    const r = await rig(POLICY('    controls: [pii]\n', ROLES), IDENTITY);
    const id = await r.ask();
    expect((await r.store.getApproval(id))?.request.requiredRoles).toBeUndefined();
    await r.control.grantApproval(id, { approver: 'cy', verified: cy });
    expect(await r.exec(id)).toBe(1);
  });

  it('test_T303_matching_is_byte_for_byte', async () => {
    const r = await rig(POLICY('    controls: [refund-limit]\n', ROLES), IDENTITY);
    const id = await r.ask();
    await r.control.grantApproval(id, { approver: 'dee', verified: { agent: 'inbox', user: 'dee', claims: { roles: ['Finance', 'finance '] } } });
    expect(await r.exec(id)).toMatchObject({ reason: 'approver_unentitled' });
  });

  it('test_T304_no_roles_claim_configured_entitles_nobody', async () => {
    const r = await rig(POLICY('    controls: [refund-limit]\n', ROLES), { approvers: {} });
    const id = await r.ask();
    await r.control.grantApproval(id, { approver: 'ana', verified: ana });
    expect((await r.store.getApproval(id))?.approvers?.[0]?.entitled).toEqual([]);
    expect(await r.exec(id)).toMatchObject({ reason: 'approver_unentitled' });
  });

  it('an edit-then-approve by a verified person: the edited grant records that approver and runs; an unverified edit is refused at presentation', async () => {
    const r = await rig(POLICY(), IDENTITY);
    const id = await r.ask();
    const granted = await r.control.grantApproval(id, { approver: 'ana', verified: ana, edit: { arguments: { payment_id: 'txn_1', amount: 150 } } });
    expect(granted.approvers?.map((a) => a.user)).toEqual(['ana']);
    expect((await r.store.getApproval(granted.approvalId))?.approvers?.map((a) => a.user)).toEqual(['ana']);
    expect(await r.exec(id)).toBe(1);
    expect((r.lastReceipt()['approvers'] as { user: string }[]).map((a) => a.user)).toEqual(['ana']);
    const r2 = await rig(POLICY(), IDENTITY);
    const other = await r2.ask();
    await r2.control.grantApproval(other, { approver: 'ana', edit: { arguments: { payment_id: 'txn_1', amount: 150 } } });
    expect(await r2.exec(other)).toMatchObject({ reason: 'approver_unverified' });
  });

  it('a threshold above one is filed, not denied, once approvers are verified (T321 is its converse)', async () => {
    const r = await rig(POLICY('    approvals_required: 3\n'), IDENTITY);
    const id = await r.ask();
    expect((await r.store.getApproval(id))?.request.approvalsRequired).toBe(3);
  });
});

describe('preconditions (tests/test_preconditions.py)', () => {
  const world = { order: 'ord_1', status: 'paid' as string };
  const provider = () => ({ order: world.order, status: world.status });

  it('test_T253_a_moved_fingerprint_refuses_by_its_own_reason; APPROVAL_INVALIDATED and the receipt carry both fingerprints', async () => {
    const r = await rig(POLICY());
    world.status = 'paid';
    const id = await r.ask(provider);
    const then = preconditionFingerprint({ order: 'ord_1', status: 'paid' });
    expect((await r.store.getApproval(id))?.request.preconditionFingerprint).toBe(then);
    await r.control.grantApproval(id, { approver: 'ana' });
    world.status = 'refunded';
    const now = preconditionFingerprint({ order: 'ord_1', status: 'refunded' });
    expect(await r.exec(id, provider)).toMatchObject({ reason: 'precondition_changed' });
    expect(r.runs.n).toBe(0);
    expect(r.invalidated()).toEqual([
      { reason: 'precondition_changed', action_hash: r.action.actionHash, precondition_at_request: then, precondition_at_recheck: now },
    ]);
    expect([r.lastReceipt()['result'], r.lastReceipt()['precondition_at_request'], r.lastReceipt()['precondition_at_recheck']]).toEqual(['blocked', then, now]);
  });

  it('test_T254_the_approval_is_left_granted_and_opens_the_world_the_human_saw', async () => {
    const r = await rig(POLICY());
    world.status = 'paid';
    const id = await r.ask(provider);
    await r.control.grantApproval(id, { approver: 'ana' });
    world.status = 'refunded';
    expect(await r.exec(id, provider)).toMatchObject({ reason: 'precondition_changed' });
    expect((await r.store.getApproval(id))?.status).toBe('granted');
    world.status = 'paid';
    expect(await r.exec(id, provider)).toBe(1);
    const fp = preconditionFingerprint({ order: 'ord_1', status: 'paid' });
    const consumed = r.events.find((e) => e.type === 'APPROVAL_CONSUMED')!.data;
    expect(consumed).toMatchObject({ precondition_at_request: fp, precondition_at_recheck: fp });
    const committed = r.receipts.find((x) => x.document['result'] === 'committed')!.document;
    expect([committed['precondition_at_request'], committed['precondition_at_recheck']]).toEqual([fp, fp]);
  });

  it('test_T255_a_provider_that_raises_on_the_presenting_pass_fails_closed', async () => {
    const r = await rig(POLICY());
    const id = await r.ask(() => ({ status: 'paid' }));
    await r.control.grantApproval(id, { approver: 'ana' });
    const err = await r.exec(id, () => {
      throw new TypeError('the orders API is down: secret-token-123');
    });
    expect(err).toMatchObject({ reason: 'precondition_unavailable' });
    expect((err as Error).message).not.toContain('secret-token-123');
    expect(r.invalidated().at(-1)).toMatchObject({ reason: 'precondition_unavailable', error: 'TypeError' });
    expect(r.runs.n).toBe(0);
  });

  it('test_T255_a_provider_that_raises_on_the_request_pass_creates_no_request', async () => {
    const r = await rig(POLICY());
    const err = await r.exec(undefined, () => {
      throw new Error('down');
    });
    expect(err).toBeInstanceOf(ActionDenied);
    expect((err as ActionDenied).reason).toBe('precondition_unavailable');
    expect(await r.store.approvalsFor(r.action.actionHash)).toEqual([]);
    expect(r.lastReceipt()['decision_reason']).toBe('precondition_unavailable');
    // Something canonical bytes refuse (a float) is unavailable too.
    expect(await r.exec(undefined, () => ({ amount: 1.5 }))).toMatchObject({ reason: 'precondition_unavailable' });
  });

  it('a fingerprint on one side only is precondition_missing, never a skip', async () => {
    const r = await rig(POLICY());
    const pinned = await r.ask(provider);
    await r.control.grantApproval(pinned, { approver: 'ana' });
    expect(await r.exec(pinned)).toMatchObject({ reason: 'precondition_missing' });
    const r2 = await rig(POLICY());
    const bare = await r2.ask();
    await r2.control.grantApproval(bare, { approver: 'ana' });
    expect(await r2.exec(bare, provider)).toMatchObject({ reason: 'precondition_missing' });
    expect(r.runs.n + r2.runs.n).toBe(0);
  });

  it('a store that does not keep a pin: the request is withdrawn and the action denied (spec 05 §4.2)', async () => {
    const inner = await setup(POLICY());
    // A store that drops what a request pins (as a store written before 0005/0006 would).
    const forgetful = new Proxy(inner.store, {
      get(target, prop, receiver) {
        if (prop === 'putApprovalRequest')
          return (r: Parameters<typeof target.putApprovalRequest>[0]) =>
            target.putApprovalRequest({ ...r, preconditionFingerprint: null, approvalsRequired: 1, requiredRoles: [] });
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const ctx = await setup(POLICY('    approvals_required: 2\n'), { store: forgetful, ...IDENTITY });
    const action = createAction({ name: 'stripe.refund', arguments: ARGS, principal: REQUESTER });
    const err = await ctx.control.execute(action, () => 1, { preconditions: () => ({ status: 'paid' }) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect((err as ActionDenied).reason).toBe('precondition_missing');
    const [row] = await inner.store.approvalsFor(action.actionHash);
    expect([row!.status, row!.approver]).toEqual(['denied', 'ctrlrun:precondition-not-recorded']);
    expect(ctx.events.find((e) => e.type === 'APPROVAL_INVALIDATED')!.data).toEqual({
      reason: 'precondition_missing',
      missing: ['precondition_fingerprint', 'approvals_required'],
      action_hash: action.actionHash,
      withdrawn: true,
      precondition_at_request: null,
      precondition_at_recheck: preconditionFingerprint({ status: 'paid' }),
    });
    // With no fingerprint computed, the threshold alone: approval_unrecorded.
    const other = createAction({ name: 'stripe.refund', arguments: { ...ARGS, payment_id: 'txn_2' }, principal: REQUESTER });
    expect(await ctx.control.execute(other, () => 1).catch((e: unknown) => e)).toMatchObject({ reason: 'approval_unrecorded' });
  });

  it('protect passes its precondition provider through, on the call and on needsApproval', async () => {
    const ctx = await setup(POLICY());
    const state = { status: 'paid' };
    let runs = 0;
    const refund = protect<{ payment_id: string; amount: number }, number>(() => ++runs, {
      control: ctx.control,
      name: 'stripe.refund',
      preconditions: () => ({ ...state }),
    });
    expect(await refund.needsApproval(ARGS)).toBe(true);
    const id = (await ctx.store.listApprovals('pending'))[0]!.request;
    expect(id.preconditionFingerprint).toBe(preconditionFingerprint({ status: 'paid' }));
    await ctx.control.grantApproval(id.requestId, { approver: 'ana' });
    state.status = 'refunded';
    expect(await refund(ARGS, { approvalId: id.requestId }).catch((e: unknown) => e)).toMatchObject({ reason: 'precondition_changed' });
    state.status = 'paid';
    expect(await refund(ARGS, { approvalId: id.requestId })).toBe(1);
  });

  it('observe mode records the same reasons, consumes nothing and runs', async () => {
    const r = await rig(POLICY());
    world.status = 'paid';
    const id = await r.ask(provider);
    await r.control.grantApproval(id, { approver: 'ana' });
    world.status = 'refunded';
    const observing = await setup(POLICY().replace('actions:', 'mode: observe\nactions:'), { store: r.store, ids: randomIds, ...IDENTITY });
    let runs = 0;
    expect(await observing.control.execute(r.action, () => ++runs, { approvalId: id, preconditions: provider })).toBe(1);
    const receipt = observing.receipts.at(-1)!.document;
    expect([receipt['result'], (receipt['would_have'] as JsonObject)['blocked_reason']]).toEqual(['observed', 'approver_unverified']);
    expect(observing.events.filter((e) => e.type === 'APPROVAL_INVALIDATED').map((e) => e.data['reason'])).toEqual(['approver_unverified']);
    // Without the approver gate, the moved fingerprint is what it notes, with both fingerprints.
    const plain = await setup(POLICY().replace('actions:', 'mode: observe\nactions:'), { store: r.store, ids: randomIds });
    await plain.control.execute(r.action, () => ++runs, { approvalId: id, preconditions: provider });
    const doc = plain.receipts.at(-1)!.document;
    expect((doc['would_have'] as JsonObject)['blocked_reason']).toBe('precondition_changed');
    expect(doc['precondition_at_recheck']).toBe(preconditionFingerprint({ order: 'ord_1', status: 'refunded' }));
    expect((await r.store.getApproval(id))?.status, 'never consumed').toBe('granted');
  });
});
