// Observe mode (spec 02 §4, spec 01 §7): everything evaluated and recorded as in enforce mode,
// nothing enforced, the executor runs; the receipt records `execution` and `would_have`; and
// `stats` counts what observe mode recorded.
import { describe, expect, it } from 'vitest';
import {
  ActionDenied,
  AuthorityEscalation,
  Control,
  DuplicateEffect,
  EffectKeyError,
  IdentityError,
  InvalidArgument,
  STATS_SCHEMA,
  loadPolicy,
  parseSince,
  protect,
  stats,
  type IdentityProvider,
} from '@ctrlrun/kernel';
import { T0, V3, action, rejection, rig } from './authority.fixtures.js';

const MIN = 60_000;
const OBSERVE = `${V3}mode: observe\n`;
const ACTIONS = `actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - when: { amount_lte: 5000000 }
        decision: approve
      - decision: deny
  customer.read:
    decision: allow
`;
const AUTHORITY = `authority:
  max_delegation_depth: 2
  grants:
    - id: support
      subject: { agent: support-agent }
      actions: [stripe.refund, customer.read]
      expires_at: 2026-09-04T00:00:00Z
      delegable: true
`;

const refund = (amount: number, payment = 'p1', principal: { agent: string; user?: string | null; expiresAt?: string } = { agent: 'support-agent' }) =>
  action({ principal, resource: null, arguments: { amount, payment_id: payment } });

describe('T82: observe executes what enforce would deny, and records why', () => {
  it('test_T82_observe_executes_what_enforce_would_deny', async () => {
    const r = await rig(OBSERVE + ACTIONS);
    const { value, receipt } = await r.control.executeWithReceipt(refund(90000000), r.executor);
    expect(value).toBe('ok');
    expect(r.calls).toBe(1);
    expect(receipt.document).toMatchObject({
      result: 'observed',
      execution: 'committed',
      decision: 'deny',
      decision_reason: 'rule[2]',
      would_have: { decision: 'deny', reason: 'rule[2]', blocked_reason: 'rule[2]' },
      effect_key: 'refund:p1',
    });
    expect(r.types()).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'EFFECT_RESERVED', 'EXECUTION_STARTED', 'EXECUTION_COMMITTED']);
    expect((await r.store.getEffect('refund:p1'))!.state).toBe('committed');
    // The same action in enforce mode is refused.
    const e = await rig(V3 + ACTIONS);
    expect(await rejection(e.control.execute(refund(90000000), e.executor))).toBeInstanceOf(ActionDenied);
    expect(e.calls).toBe(0);
  });

  it('an allowed action is observed with nothing blocked', async () => {
    const r = await rig(OBSERVE + ACTIONS);
    const { receipt } = await r.control.executeWithReceipt(refund(100), r.executor);
    expect(receipt.document).toMatchObject({
      result: 'observed',
      execution: 'committed',
      would_have: { decision: 'allow', reason: 'rule[0]', blocked_reason: null },
    });
  });

  it('an authority denial is recorded as in enforce mode (no policy), and the action runs', async () => {
    const r = await rig(OBSERVE + AUTHORITY + ACTIONS);
    const a = refund(100, 'p1', { agent: 'stranger' });
    const { receipt } = await r.control.executeWithReceipt(a, r.executor);
    expect(r.types(a.actionId)).toEqual(['ACTION_PROPOSED', 'AUTHORITY_DENIED', 'EFFECT_RESERVED', 'EXECUTION_STARTED', 'EXECUTION_COMMITTED']);
    expect(receipt.document).toMatchObject({
      result: 'observed',
      execution: 'committed',
      decision: 'deny',
      decision_reason: 'no_authority',
      would_have: { decision: 'deny', reason: 'no_authority', blocked_reason: 'no_authority' },
    });
  });

  it('an expired principal is recorded and runs; nothing after it is evaluated', async () => {
    const r = await rig(OBSERVE + AUTHORITY + ACTIONS);
    const a = refund(100, 'p1', { agent: 'support-agent', expiresAt: '2026-09-03T00:00:00Z' });
    const { receipt } = await r.control.executeWithReceipt(a, r.executor);
    expect(r.types(a.actionId)).not.toContain('AUTHORITY_RESOLVED');
    expect(r.types(a.actionId)).not.toContain('POLICY_EVALUATED');
    expect(r.types(a.actionId)).not.toContain('ACTION_DENIED');
    expect(receipt.document['would_have']).toEqual({ decision: 'deny', reason: 'principal_expired', blocked_reason: 'principal_expired' });
  });

  it('enforce receipts carry execution and would_have as null', async () => {
    const r = await rig(V3 + ACTIONS);
    const { receipt } = await r.control.executeWithReceipt(refund(100), r.executor);
    expect(receipt.document).toMatchObject({ result: 'committed', execution: null, would_have: null });
  });

  it('observe is a decision input of the policy hash', () => {
    expect(loadPolicy(OBSERVE + ACTIONS).policyHash).not.toBe(loadPolicy(V3 + ACTIONS).policyHash);
  });
});

describe('T82c: approvals in observe mode are checked, never requested, never consumed', () => {
  it('test_T82c_approve_with_nothing_presented_creates_no_request', async () => {
    const r = await rig(OBSERVE + ACTIONS);
    const { receipt } = await r.control.executeWithReceipt(refund(100000), r.executor);
    expect(r.calls).toBe(1);
    expect(r.types()).not.toContain('APPROVAL_REQUESTED');
    expect(await r.store.listApprovals()).toEqual([]);
    expect(receipt.document['would_have']).toEqual({ decision: 'approve', reason: 'rule[1]', blocked_reason: 'approval_required' });
  });

  async function granted(amount: number) {
    // A request made and granted in enforce mode, over the same store.
    const r = await rig(OBSERVE + ACTIONS);
    const enforce = new Control({ policy: loadPolicy(V3 + ACTIONS), store: r.store, clock: r.clock, logger: { warn: () => {} }, environment: 'production' });
    const req = await rejection(enforce.execute(refund(amount, 'p2'), r.executor));
    const id = req['requestId'] as string;
    await enforce.grantApproval(id, { approver: 'human:ana' });
    return { r, id, enforce };
  }

  it('a valid presented approval is checked and left granted', async () => {
    const { r, id } = await granted(100000);
    const { receipt } = await r.control.executeWithReceipt(refund(100000, 'p2'), r.executor, { approvalId: id });
    expect((await r.store.getApproval(id))!.status).toBe('granted');
    expect(r.types()).not.toContain('APPROVAL_CONSUMED');
    expect(receipt.document).toMatchObject({
      approval_id: id,
      approver: 'human:ana',
      would_have: { decision: 'approve', reason: 'rule[1]', blocked_reason: null },
    });
  });

  it('a mismatched approval is recorded as approval_mismatch, and still not consumed', async () => {
    const { r, id } = await granted(100000);
    const { receipt } = await r.control.executeWithReceipt(refund(200000, 'p2'), r.executor, { approvalId: id });
    expect(r.data('APPROVAL_INVALIDATED').at(-1)).toMatchObject({ reason: 'mismatch' });
    expect((await r.store.getApproval(id))!.status).toBe('granted');
    expect(receipt.document['would_have']).toMatchObject({ blocked_reason: 'approval_mismatch' });
    expect(r.calls).toBe(1);
  });

  it('a denied approval is recorded as approval_denied', async () => {
    const r = await rig(OBSERVE + ACTIONS);
    const enforce = new Control({ policy: loadPolicy(V3 + ACTIONS), store: r.store, clock: r.clock, logger: { warn: () => {} }, environment: 'production' });
    const id = (await rejection(enforce.execute(refund(100000, 'p3'), r.executor)))['requestId'] as string;
    await enforce.denyApproval(id, { approver: 'human:bo' });
    const { receipt } = await r.control.executeWithReceipt(refund(100000, 'p3'), r.executor, { approvalId: id });
    expect(r.data('APPROVAL_DENIED').at(-1)).toEqual({ approver: 'human:bo' });
    expect(receipt.document['would_have']).toMatchObject({ blocked_reason: 'approval_denied' });
  });
});

describe('T83: reservations in observe mode', () => {
  it('test_T83_a_duplicate_is_recorded_and_still_runs', async () => {
    const r = await rig(OBSERVE + ACTIONS);
    const first = refund(100, 'p9');
    await r.control.execute(first, r.executor);
    const before = await r.store.getEffect('refund:p9');
    let hook = 0;
    const { receipt } = await r.control.executeWithReceipt(refund(100, 'p9'), r.executor, { reconcile: () => ((hook += 1), 'unknown') });
    expect(r.calls).toBe(2);
    expect(r.data('EFFECT_RESERVATION_REFUSED').at(-1)).toEqual({ reason: 'duplicate', state: 'committed' });
    expect(receipt.document).toMatchObject({ result: 'observed', execution: 'committed', would_have: { decision: 'allow', blocked_reason: 'duplicate' } });
    expect(await r.store.getEffect('refund:p9')).toEqual(before);
    expect(hook).toBe(0);
  });

  it('test_T83_an_executor_that_fails_on_a_held_key_still_writes_the_record', async () => {
    const r = await rig(OBSERVE + ACTIONS);
    // Another worker holds refund:p8 under a live lease.
    await r.store.reserveEffect('refund:p8', 'act_holder', 5 * MIN);
    const held = await r.store.getEffect('refund:p8');
    const boom = () => {
      throw new Error('remote timed out');
    };
    const a = refund(100, 'p8');
    expect((await rejection(r.control.execute(a, boom))).message).toBe('remote timed out');
    expect(r.lastReceipt()).toMatchObject({
      action_id: a.actionId,
      result: 'observed',
      execution: 'ambiguous',
      error: 'Error: remote timed out',
      would_have: { blocked_reason: 'in_progress' },
    });
    expect(await r.store.getEffect('refund:p8')).toEqual(held);
    // A lapsed lease: the attempt's own kept write moves it to ambiguous; the observed outcome is not written.
    r.advance(6 * MIN);
    const { receipt } = await r.control.executeWithReceipt(refund(100, 'p8'), r.executor);
    expect(receipt.document['would_have']).toMatchObject({ blocked_reason: 'ambiguous' });
    expect((await r.store.getEffect('refund:p8'))!.state).toBe('ambiguous');
  });

  it('the first stopper wins: approval_required before a duplicate', async () => {
    const r = await rig(OBSERVE + ACTIONS);
    await r.control.execute(refund(100000, 'p7'), r.executor);
    const { receipt } = await r.control.executeWithReceipt(refund(100000, 'p7'), r.executor);
    expect(r.data('EFFECT_RESERVATION_REFUSED').at(-1)).toEqual({ reason: 'duplicate', state: 'committed' });
    expect(receipt.document['would_have']).toMatchObject({ blocked_reason: 'approval_required' });
  });
});

describe('T82b: what observe mode still refuses, with enforce evidence', () => {
  it('test_T82b_no_principal_a_raising_provider_an_effect_key_error_and_an_escalation_are_still_refused', async () => {
    const r = await rig(OBSERVE + AUTHORITY + ACTIONS);
    const fn = protect(() => 'ran', { control: r.control, name: 'stripe.refund' });
    expect(await rejection(fn({ amount: 1, payment_id: 'x' }))).toMatchObject({ reason: 'no_principal' });
    const raising: IdentityProvider = { resolve: () => Promise.reject(new Error('down')) };
    const r2 = await rig(OBSERVE + ACTIONS, { identity: raising });
    expect(await rejection(protect(() => 'ran', { control: r2.control, name: 'stripe.refund' })({ amount: 1, payment_id: 'x' }))).toBeInstanceOf(IdentityError);
    expect(await r2.store.events()).toEqual([]);
    // No payment_id: the effect template cannot resolve.
    const err = await rejection(r.control.execute(action({ principal: { agent: 'support-agent' }, resource: null, arguments: { amount: 1 } }), r.executor));
    expect(err).toBeInstanceOf(EffectKeyError);
    expect(r.lastReceipt()).toMatchObject({ result: 'denied', decision_reason: 'effect_key_error', execution: null, would_have: null });
    expect(await rejection(r.control.delegate('support', { subject: { agent: 'x' }, actions: ['**'] }, { by: { agent: 'support-agent' } }))).toBeInstanceOf(
      AuthorityEscalation,
    );
    expect(r.calls).toBe(0);
    expect(() => loadPolicy(`${V3}mode: off\n${ACTIONS}`)).toThrow(/'mode' must be exactly 'observe' or 'enforce'/);
  });
});

describe('T87: switching to enforce needs no migration', () => {
  it('test_T87_observed_commits_become_duplicates_and_delegations_survive', async () => {
    const r = await rig(OBSERVE + AUTHORITY + ACTIONS);
    await r.control.execute(refund(100, 'p5'), r.executor);
    const d = await r.control.delegate(
      'support',
      { subject: { agent: 'helper' }, actions: ['stripe.refund'], expiresAt: '2026-09-03T23:00:00Z' },
      { by: { agent: 'support-agent' } },
    );
    const enforce = new Control({
      policy: loadPolicy(V3 + AUTHORITY + ACTIONS),
      store: r.store,
      clock: r.clock,
      logger: { warn: () => {} },
      environment: 'production',
    });
    expect(await rejection(enforce.execute(refund(100, 'p5'), r.executor))).toBeInstanceOf(DuplicateEffect);
    await enforce.execute(refund(100, 'p6', { agent: 'helper' }), r.executor);
    const resolved = (await r.store.events()).filter((e) => e.type === 'AUTHORITY_RESOLVED').at(-1)!;
    expect(resolved.data).toMatchObject({ delegation_id: d.delegationId });
  });
});

describe('T86: stats counts what observe mode recorded', () => {
  it('test_T86_stats_counts_what_observe_mode_recorded', async () => {
    const r = await rig(OBSERVE + AUTHORITY + ACTIONS);
    const boom = () => {
      throw new Error('lost');
    };
    await r.control.execute(refund(90000000, 'a1'), r.executor); // would have been denied: rule[2]
    await r.control.execute(refund(90000000, 'a2'), r.executor); // rule[2] again
    await r.control.execute(refund(100, 'a3', { agent: 'stranger' }), r.executor); // no_authority
    await r.control.execute(refund(100000, 'a4'), r.executor); // approval_required
    r.advance(MIN);
    await r.control.execute(refund(100, 'a1'), r.executor); // duplicate (blocked)
    await r.control.execute(refund(100, 'a5'), boom).catch(() => undefined); // ambiguous outcome
    await r.control.execute(refund(100, 'a6'), r.executor); // nothing
    const doc = await stats(r.store, { mode: 'observe' });
    expect(Object.keys(doc)).toEqual([
      'schema',
      'mode',
      'since',
      'from',
      'to',
      'actions',
      'would_have_been_denied',
      'denied_by_reason',
      'would_have_needed_approval',
      'would_have_been_blocked',
      'blocked_by_reason',
      'ambiguous_outcomes',
      // Added after the spec's fields: what was really enforced, and the approval requests filed.
      'enforced_denied',
      'enforced_denied_by_reason',
      'enforced_blocked',
      'approvals_requested',
      'approvals_pending',
    ]);
    expect(doc).toEqual({
      schema: STATS_SCHEMA,
      mode: 'observe',
      since: null,
      from: '2026-09-03T10:12:01.000Z',
      to: '2026-09-03T10:13:01.000Z',
      actions: 7,
      would_have_been_denied: 3,
      denied_by_reason: { 'rule[2]': 2, no_authority: 1 },
      would_have_needed_approval: 1,
      would_have_been_blocked: 1,
      blocked_by_reason: { duplicate: 1 },
      ambiguous_outcomes: 1,
      enforced_denied: 0,
      enforced_denied_by_reason: {},
      enforced_blocked: 0,
      approvals_requested: 0,
      approvals_pending: 0,
    });
    expect(Object.keys(doc.denied_by_reason)).toEqual(['rule[2]', 'no_authority']);
    // --since is inclusive on finished_at.
    const later = await stats(r.store, { since: '2026-09-03T10:13:01Z' });
    expect(later).toMatchObject({ since: '2026-09-03T10:13:01.000Z', actions: 3, would_have_been_denied: 0, would_have_been_blocked: 1 });
    expect(await stats(r.store, { since: '1m', clock: () => new Date(T0.getTime() + 2 * MIN) })).toMatchObject({ actions: 3 });
  });

  it('tallies order by count, then reason; enforce counts the receipts instead', async () => {
    const r = await rig(V3 + AUTHORITY + ACTIONS);
    for (const [amount, agent, id] of [
      [90000000, 'support-agent', 'b1'],
      [100, 'x', 'b2'],
      [100, 'y', 'b3'],
      [100, 'support-agent', 'b4'],
    ] as const) {
      await r.control.execute(refund(amount, id, { agent }), r.executor).catch(() => undefined);
    }
    await r.control.execute(refund(100, 'b4'), r.executor).catch(() => undefined);
    const doc = await stats(r.store, { mode: 'enforce' });
    expect(Object.keys(doc)).toEqual([
      'schema',
      'mode',
      'since',
      'from',
      'to',
      'actions',
      'denied',
      'denied_by_reason',
      'ambiguous_outcomes',
      'enforced_denied',
      'enforced_denied_by_reason',
      'enforced_blocked',
      'approvals_requested',
      'approvals_pending',
    ]);
    expect(doc).toMatchObject({
      mode: 'enforce',
      actions: 5,
      denied: 3,
      denied_by_reason: { no_authority: 2, 'rule[2]': 1 },
      ambiguous_outcomes: 0,
      enforced_denied: 3,
      enforced_blocked: 1,
    });
    // Observe numbers over enforce receipts: nothing counterfactual was recorded, but the
    // enforced refusals are still there to read.
    expect(await stats(r.store, { mode: 'observe' })).toMatchObject({
      actions: 5,
      would_have_been_denied: 0,
      would_have_been_blocked: 0,
      enforced_denied: 3,
      enforced_blocked: 1,
    });
  });

  it('an empty store is all zeros', async () => {
    const r = await rig(OBSERVE + ACTIONS);
    expect(await stats(r.store)).toEqual({
      schema: STATS_SCHEMA,
      mode: 'observe',
      since: null,
      from: null,
      to: null,
      actions: 0,
      would_have_been_denied: 0,
      denied_by_reason: {},
      would_have_needed_approval: 0,
      would_have_been_blocked: 0,
      blocked_by_reason: {},
      ambiguous_outcomes: 0,
      enforced_denied: 0,
      enforced_denied_by_reason: {},
      enforced_blocked: 0,
      approvals_requested: 0,
      approvals_pending: 0,
    });
  });

  it("stats(store) counts in the store's mode: enforced refusals and approvals-required show up", async () => {
    // An application in enforce mode reads stats(store) with no options: it used to get the
    // observe document, with 0 would-have-been-denied and nothing about what was refused.
    const r = await rig(V3 + AUTHORITY + ACTIONS);
    await r.control.execute(refund(90000000, 'c1'), r.executor).catch(() => undefined); // denied: rule[2]
    await r.control.execute(refund(100, 'c2', { agent: 'stranger' }), r.executor).catch(() => undefined); // denied: no_authority
    await r.control.execute(refund(100000, 'c3'), r.executor).catch(() => undefined); // approval required (pending)
    await r.control.execute(refund(200000, 'c4'), r.executor).catch(() => undefined); // approval required (pending)
    const doc = await stats(r.store, { clock: r.clock });
    expect(doc).toMatchObject({
      mode: 'enforce',
      actions: 2,
      denied: 2,
      denied_by_reason: { no_authority: 1, 'rule[2]': 1 },
      enforced_denied: 2,
      enforced_denied_by_reason: { no_authority: 1, 'rule[2]': 1 },
      enforced_blocked: 0,
      approvals_requested: 2,
      approvals_pending: 2,
    });
    expect(doc).not.toHaveProperty('would_have_been_denied');
    // One answered: still requested, no longer pending; a window after the requests counts none.
    const [first] = await r.store.listApprovals('pending');
    await r.control.denyApproval(first!.request.requestId, { approver: 'dana' });
    expect(await stats(r.store, { clock: r.clock })).toMatchObject({ approvals_requested: 2, approvals_pending: 1 });
    // Past their expiry, none is pending; a window after the requests counts none.
    expect(await stats(r.store, { clock: () => new Date(T0.getTime() + 400 * 24 * 60 * MIN) })).toMatchObject({ approvals_requested: 2, approvals_pending: 0 });
    expect(await stats(r.store, { since: '1m', clock: () => new Date(T0.getTime() + 10 * MIN) })).toMatchObject({ actions: 0, approvals_requested: 0 });
    // An observe store keeps the observe document by default.
    const o = await rig(OBSERVE + ACTIONS);
    await o.control.execute(refund(90000000, 'd1'), o.executor);
    expect(await stats(o.store)).toMatchObject({ mode: 'observe', would_have_been_denied: 1, enforced_denied: 0 });
  });

  it('test_T86_stats_reaches_no_network', async () => {
    const r = await rig(OBSERVE + ACTIONS);
    await r.control.execute(refund(100), r.executor);
    const real = globalThis.fetch;
    let called = 0;
    globalThis.fetch = (() => {
      called++;
      throw new Error('no network');
    }) as typeof fetch;
    try {
      await stats(r.store, { since: '1d' });
    } finally {
      globalThis.fetch = real;
    }
    expect(called).toBe(0);
  });

  it('parseSince takes an ISO instant with an offset or <n>m|h|d, and nothing else', () => {
    const now = new Date('2026-09-03T12:00:00Z');
    expect(parseSince('30m', now).toISOString()).toBe('2026-09-03T11:30:00.000Z');
    expect(parseSince('24h', now).toISOString()).toBe('2026-09-02T12:00:00.000Z');
    expect(parseSince('7d', now).toISOString()).toBe('2026-08-27T12:00:00.000Z');
    expect(parseSince('2026-09-01T00:00:00+02:00', now).toISOString()).toBe('2026-08-31T22:00:00.000Z');
    for (const bad of ['0m', '2w', '1mo', '10', '-5m', '2026-09-01T00:00:00', '2026-09-01', 'yesterday', '', '١٢h', '5 m']) {
      expect(() => parseSince(bad, now), bad).toThrow(InvalidArgument);
      expect(() => parseSince(bad, now), bad).toThrow(/<n>m, <n>h, <n>d/);
    }
  });
});
