// Authority in the control path (spec 02 §2): opt-in then fail-closed, subject/action/resource/
// environment matching, constraints, expiry to the microsecond, reason precedence, evaluation
// before policy, the stricter of the two axes.
import { describe, expect, it } from 'vitest';
import {
  ActionDenied,
  ApprovalRequired,
  AuthorityDenied,
  Control,
  IdentityError,
  InvalidArgument,
  PolicyError,
  checkPolicy,
  createAction,
  loadAuthority,
  loadPolicy,
  protect,
  type IdentityProvider,
} from '@ctrlrun/kernel';
import { ACTIONS, AUTHORITY_EVENTS, DERIVED_ACTIONS, GRANT, T0, V3, action, doc, rejection, rig } from './authority.fixtures.js';

describe('T66: no authority section is the pre-authority behaviour, exactly', () => {
  it('test_T66_a_document_with_no_authority_section_leaves_control_authority_none', async () => {
    const r = await rig(doc());
    expect(r.control.authority).toBeNull();
    expect(loadPolicy(doc()).authority).toBeNull();
    // The control for the assertion: with a section, the Control has one.
    expect((await rig(doc(GRANT))).control.authority).not.toBeNull();
  });

  it('test_T66_no_authority_event_is_appended_without_a_section', async () => {
    const r = await rig(doc());
    await r.control.execute(action(), r.executor, { effectKey: 'refund:EU-42' });
    expect(await rejection(r.control.execute(action({ arguments: { amount: 100000, payment_id: 'EU-43' } }), r.executor))).toBeInstanceOf(ApprovalRequired);
    expect(await rejection(r.control.execute(action({ arguments: { amount: 90000000, payment_id: 'EU-44' } }), r.executor))).toBeInstanceOf(ActionDenied);
    expect(r.calls).toBe(1);
    expect(r.types().filter((t) => AUTHORITY_EVENTS.includes(t))).toEqual([]);
    // The guard is live: the same run under a section does append them.
    const g = await rig(doc(GRANT));
    await g.control.execute(action(), g.executor);
    expect(g.types()).toContain('AUTHORITY_RESOLVED');
  });
});

describe('T67: a section governs every action; no grant is no_authority', () => {
  it('test_T67_a_principal_with_no_grant_is_denied', async () => {
    const r = await rig(doc(GRANT));
    const a = action({ principal: { agent: 'other-agent', user: 'alice@example.com' } });
    const err = await rejection(r.control.execute(a, r.executor, { effectKey: 'refund:EU-42' }));
    expect(err).toBeInstanceOf(AuthorityDenied);
    expect(err).toBeInstanceOf(ActionDenied);
    expect(err.reason).toBe('no_authority');
    expect(err.code).toBe('ERR_AUTHORITY_DENIED');
    expect(r.calls).toBe(0);
    expect(r.lastReceipt()).toMatchObject({ result: 'denied', decision: 'deny', decision_reason: 'no_authority', execution: null, would_have: null });
    expect(await r.store.approvalsFor(a.actionHash)).toEqual([]);
    expect(await r.store.getEffect('refund:EU-42')).toBeNull();
  });

  it('test_T67_an_action_the_policy_allows_outright_still_needs_a_grant', async () => {
    const r = await rig(doc(GRANT));
    const err = await rejection(r.control.execute(action({ name: 'customer.read', resource: null }), r.executor));
    expect(err.reason).toBe('no_authority');
    expect(r.calls).toBe(0);
  });

  it('test_T67_an_empty_grants_list_denies_everything', async () => {
    const r = await rig(doc('authority:\n  grants: []\n'));
    expect((await rejection(r.control.execute(action(), r.executor))).reason).toBe('no_authority');
  });

  const subjectGrant = (subject: string) => `\nauthority:\n  grants:\n    - id: g\n      subject: ${subject}\n      actions: ["**"]\n`;
  const cases: [string, [string, string | null], boolean][] = [
    ['{ agent: "support-agent", user: "alice@example.com" }', ['support-agent', null], false],
    ['{ agent: "support-agent", user: "alice@example.com" }', ['support-agent', 'bob'], false],
    ['{ agent: "support-agent", user: "alice@example.com" }', ['support-agent', 'alice@example.com'], true],
    ['{ agent: "support-agent" }', ['support-agent', 'alice@example.com'], true],
    ['{ agent: "support-agent" }', ['support-agent', null], true],
    ['{ agent: "*" }', ['acme.support.agent', null], true],
    ['{ agent: "support-*" }', ['support-agent', null], true],
    ['{ agent: "support-*" }', ['supporter', null], false],
    ['{ agent: "support-*" }', ['the-support-agent', null], false],
    ['{ user: "alice@example.com" }', ['any-agent-at-all', 'alice@example.com'], true],
    ['{ user: "alice@example.com" }', ['any-agent-at-all', null], false],
  ];
  for (const [subject, [agent, user], expected] of cases) {
    it(`test_T67b_subject_matching ${subject} vs ${agent}/${user} → ${expected ? 'pass' : 'deny'}`, async () => {
      const r = await rig(doc(subjectGrant(subject)));
      const p = r.control.execute(action({ name: 'customer.read', resource: null, principal: { agent, user } }), r.executor);
      if (expected) await p;
      else expect((await rejection(p)).reason).toBe('no_authority');
      expect(r.calls).toBe(expected ? 1 : 0);
    });
  }

  const ENV =
    '\nauthority:\n  grants:\n    - id: staging-only\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      environments: ["staging"]\n';
  it('test_T67c_a_grant_scoped_to_another_environment_does_not_match', async () => {
    const r = await rig(doc(ENV));
    expect((await rejection(r.control.execute(action({ resource: null }), r.executor))).reason).toBe('no_authority');
    const s = await rig(doc(ENV), { environment: 'staging' });
    await s.control.execute(action({ resource: null, environment: 'staging' }), s.executor);
    expect(s.calls).toBe(1);
  });

  const SHAPE =
    '\nauthority:\n  grants:\n    - id: eu-refunds\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      resources: ["payment:EU-*"]\n';
  const shapes: [string, string, string | null, boolean][] = [
    ['match', 'stripe.refund', 'payment:EU-42', true],
    ['other-resource', 'stripe.refund', 'payment:US-42', false],
    ['deeper-resource', 'stripe.refund', 'payment:EU-42:leg2', false],
    ['no-resource', 'stripe.refund', null, false],
    ['other-action', 'customer.read', 'payment:EU-42', false],
  ];
  for (const [id, name, resource, expected] of shapes) {
    it(`test_T67d_the_action_name_and_the_resource_are_both_matched (${id})`, async () => {
      const r = await rig(doc(SHAPE));
      const p = r.control.execute(action({ name, resource, principal: { agent: 'support-agent' } }), r.executor);
      if (expected) await p;
      else expect((await rejection(p)).reason).toBe('no_authority');
      expect(r.calls).toBe(expected ? 1 : 0);
    });
  }
});

describe('T68–T69: a matching grant passes to policy; a failed constraint denies', () => {
  it('test_T68_a_matching_grant_passes_to_policy', async () => {
    const r = await rig(doc(GRANT));
    const { receipt } = await r.control.executeWithReceipt(action(), r.executor, { effectKey: 'refund:EU-42' });
    expect(r.calls).toBe(1);
    expect(receipt.document['result']).toBe('committed');
    const types = r.types();
    expect(types.indexOf('AUTHORITY_RESOLVED')).toBeLessThan(types.indexOf('POLICY_EVALUATED'));
    expect(r.data('AUTHORITY_RESOLVED')[0]).toEqual({ reason: 'authority_grant', grant_id: 'head-of-support' });
    // The receipt carries the policy's reason when authority passes (the stricter of the two).
    expect(receipt.document['decision_reason']).toBe('rule[0]');
  });

  it('test_T69_a_failed_constraint_denies_what_policy_would_allow', async () => {
    const r = await rig(doc(GRANT, '\nactions:\n  stripe.refund:\n    resource: "payment:{payment_id}"\n    rules:\n      - decision: allow\n'));
    const a = action({ arguments: { amount: 300000, payment_id: 'EU-42' } });
    expect(r.control.policy.evaluate(a.name, a.canonicalArguments).decision).toBe('allow');
    const err = await rejection(r.control.execute(a, r.executor));
    expect(err).toMatchObject({ reason: 'authority_constraint', grantId: 'head-of-support', delegationId: null });
    expect(r.calls).toBe(0);
    expect(r.lastReceipt()['decision_reason']).toBe('authority_constraint');
  });

  it('test_T69_an_absent_argument_makes_a_constraint_false', async () => {
    const r = await rig(doc(GRANT));
    const err = await rejection(r.control.execute(action({ arguments: { payment_id: 'EU-42' } }), r.executor));
    expect(err.reason).toBe('authority_constraint');
    expect(r.warnings.join('\n')).toMatch(/amount/);
  });

  it('test_T69_constraints_are_type_strict', async () => {
    const g =
      '\nauthority:\n  grants:\n    - id: g\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      constraints: { urgent_eq: true, amount_lte: 100 }\n';
    const r = await rig(doc(g));
    // `1` is not `true`, and a boolean is not a bounded integer.
    expect((await rejection(r.control.execute(action({ resource: null, arguments: { urgent: 1, amount: 5 } }), r.executor))).reason).toBe(
      'authority_constraint',
    );
    expect((await rejection(r.control.execute(action({ resource: null, arguments: { urgent: true, amount: true } }), r.executor))).reason).toBe(
      'authority_constraint',
    );
    await r.control.execute(action({ resource: null, arguments: { urgent: true, amount: 100 } }), r.executor);
    expect(r.calls).toBe(1);
  });
});

describe('T70: the stricter of the two wins', () => {
  const PERMISSIVE = '\nauthority:\n  grants:\n    - id: everything\n      subject: { agent: "support-agent" }\n      actions: ["**"]\n';
  const policyOf = (d: string) => `\nactions:\n  stripe.refund:\n    resource: "payment:{payment_id}"\n    rules:\n      - decision: ${d}\n`;
  const table: [string, string, string, string, string][] = [
    ['pass-allow', PERMISSIVE, 'allow', 'allow', 'rule[0]'],
    ['pass-approve', PERMISSIVE, 'approve', 'approve', 'rule[0]'],
    ['pass-deny', PERMISSIVE, 'deny', 'deny', 'rule[0]'],
    ['deny-any', GRANT, 'allow', 'deny', 'no_authority'],
  ];
  for (const [id, grant, policy, decision, reason] of table) {
    it(`test_T70_the_stricter_of_the_two_wins (${id})`, async () => {
      const r = await rig(doc(grant, policyOf(policy)));
      const a = action({ principal: { agent: 'support-agent' }, resource: null });
      // `evaluate` answers the combined decision and writes nothing.
      expect(await r.control.evaluate(a)).toMatchObject({ decision, reason });
      expect(await r.store.events()).toEqual([]);
      const p = r.control.execute(a, r.executor);
      if (decision === 'allow') await p;
      else {
        const err = await rejection(p);
        if (decision === 'approve') expect(err).toBeInstanceOf(ApprovalRequired);
        else {
          expect(err.reason).toBe(reason);
          expect(r.lastReceipt()['decision_reason']).toBe(reason);
          expect(err instanceof AuthorityDenied).toBe(reason === 'no_authority');
        }
      }
      expect(r.calls).toBe(decision === 'allow' ? 1 : 0);
    });
  }

  for (const [first, second] of [
    ['a-narrow', 'b-wide'],
    ['b-wide', 'a-narrow'],
  ] as const) {
    it(`test_T70b_several_matching_grants_name_the_lowest_id (${first} first)`, async () => {
      const g = `\nauthority:\n  grants:\n    - id: ${first}\n      subject: { agent: "support-agent" }\n      actions: ["${first === 'a-narrow' ? 'stripe.**' : '**'}"]\n    - id: ${second}\n      subject: { agent: "support-agent" }\n      actions: ["${second === 'a-narrow' ? 'stripe.**' : '**'}"]\n`;
      const r = await rig(doc(g));
      await r.control.execute(action({ principal: { agent: 'support-agent' } }), r.executor);
      expect(r.data('AUTHORITY_RESOLVED')[0]!['grant_id']).toBe('a-narrow');
    });
  }

  it('test_T70b_holding_two_permissions_is_never_worse_than_holding_one', async () => {
    const g =
      '\nauthority:\n  grants:\n    - id: a-narrow\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      constraints: { amount_lte: 100 }\n    - id: b-wide\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n';
    const r = await rig(doc(g));
    await r.control.execute(action({ principal: { agent: 'support-agent' } }), r.executor);
    expect(r.calls).toBe(1);
    expect(r.data('AUTHORITY_RESOLVED')[0]!['grant_id']).toBe('b-wide');
  });
});

describe('T71: expiry, to the microsecond, and reason precedence', () => {
  const expiring = (at: string) =>
    `\nauthority:\n  grants:\n    - id: head-of-support\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      expires_at: ${at}\n`;
  const sa = () => action({ principal: { agent: 'support-agent' } });

  it('test_T71_an_expired_grant_denies', async () => {
    const r = await rig(doc(expiring('2026-09-03T10:12:01Z')));
    r.set('2026-09-03T10:12:02Z');
    const err = await rejection(r.control.execute(sa(), r.executor));
    expect(err).toMatchObject({ reason: 'authority_expired', grantId: 'head-of-support' });
    expect(r.lastReceipt()['decision_reason']).toBe('authority_expired');
    expect(r.calls).toBe(0);
  });

  it('test_T71_a_grant_is_valid_up_to_and_including_its_expiry', async () => {
    const r = await rig(doc(expiring('2026-09-03T10:12:01Z')));
    r.set(T0);
    await r.control.execute(sa(), r.executor);
    expect(r.calls).toBe(1);
  });

  it('test_T71_one_microsecond_past_the_expiry_does_not', async () => {
    // The clock is at 10:12:01.000000; an expiry one microsecond earlier has lapsed, one
    // microsecond later has not: expiries are compared in microseconds, not milliseconds.
    const before = await rig(doc(expiring('2026-09-03T10:12:00.999999Z')));
    expect((await rejection(before.control.execute(sa(), before.executor))).reason).toBe('authority_expired');
    const after = await rig(doc(expiring('2026-09-03T10:12:01.000001+00:00')));
    await after.control.execute(sa(), after.executor);
    expect(after.calls).toBe(1);
  });

  it('test_T71_an_expiry_in_another_offset_is_the_same_instant', async () => {
    const r = await rig(doc(expiring('"2026-09-03T12:12:01+02:00"')));
    await r.control.execute(sa(), r.executor);
    r.advance(1);
    expect((await rejection(r.control.execute(sa(), r.executor))).reason).toBe('authority_expired');
  });

  const EXPIRED = '    - id: a-expired\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      expires_at: 2026-09-03T09:00:00Z\n';
  const CONSTRAINED =
    '    - id: b-constrained\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      constraints: { amount_lte: 1 }\n';
  for (const [id, order] of [
    ['expired-first', [EXPIRED, CONSTRAINED]],
    ['constrained-first', [CONSTRAINED, EXPIRED]],
  ] as const) {
    it(`test_T71b_expiry_outranks_a_failed_constraint_across_grants (${id})`, async () => {
      const r = await rig(doc(`authority:\n  grants:\n${order.join('')}`));
      const err = await rejection(r.control.execute(sa(), r.executor));
      expect(err).toMatchObject({ reason: 'authority_expired', grantId: 'a-expired' });
      expect(r.data('AUTHORITY_DENIED')[0]).toEqual({ reason: 'authority_expired', grant_id: 'a-expired' });
    });
  }

  it('test_T71b_one_grant_failing_both_ways_reports_the_expiry', async () => {
    const r = await rig(
      doc(
        'authority:\n  grants:\n    - id: g\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      constraints: { amount_lte: 1 }\n      expires_at: 2026-09-03T09:00:00Z\n',
      ),
    );
    expect((await rejection(r.control.execute(sa(), r.executor))).reason).toBe('authority_expired');
  });

  it('test_T71b_two_grants_failing_the_same_way_name_the_lowest_id', async () => {
    const g =
      'authority:\n  grants:\n    - id: b-second\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      constraints: { amount_lte: 1 }\n    - id: a-first\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      constraints: { amount_lte: 2 }\n';
    const r = await rig(doc(g));
    expect(await rejection(r.control.execute(sa(), r.executor))).toMatchObject({ reason: 'authority_constraint', grantId: 'a-first' });
  });

  it('test_T71b_no_authority_implicates_no_grant', async () => {
    const r = await rig(doc(GRANT));
    const err = await rejection(r.control.execute(action({ principal: { agent: 'other-agent' } }), r.executor));
    expect(err.grantId).toBeNull();
    expect(r.data('AUTHORITY_DENIED')[0]).toEqual({ reason: 'no_authority' });
  });
});

describe('T74: authority is evaluated before policy', () => {
  it('test_T74_a_denial_emits_authority_denied_and_never_policy_evaluated', async () => {
    const r = await rig(doc(GRANT));
    const a = action({ principal: { agent: 'other-agent' } });
    await rejection(r.control.execute(a, r.executor, { effectKey: 'refund:EU-42' }));
    expect(r.types(a.actionId)).toEqual(['ACTION_PROPOSED', 'AUTHORITY_DENIED', 'ACTION_DENIED']);
    expect(r.data('ACTION_DENIED')[0]).toEqual({ reason: 'no_authority' });
  });

  it('test_T74_a_denial_leaves_no_pending_approval_request', async () => {
    const r = await rig(doc(GRANT, '\nactions:\n  stripe.refund:\n    resource: "payment:{payment_id}"\n    rules:\n      - decision: approve\n'));
    const a = action({ principal: { agent: 'other-agent' } });
    expect(await rejection(r.control.execute(a, r.executor))).toBeInstanceOf(AuthorityDenied);
    expect(await r.store.approvalsFor(a.actionHash)).toEqual([]);
    expect(r.types()).not.toContain('APPROVAL_REQUESTED');
  });

  it('test_T74_a_pass_emits_authority_resolved_before_policy_evaluated', async () => {
    const r = await rig(doc(GRANT));
    const a = action();
    await r.control.execute(a, r.executor);
    expect(r.types(a.actionId).slice(0, 3)).toEqual(['ACTION_PROPOSED', 'AUTHORITY_RESOLVED', 'POLICY_EVALUATED']);
  });

  it('test_T74_an_expired_principal_refuses_before_authority', async () => {
    const r = await rig(doc(GRANT));
    const a = action({ principal: { agent: 'support-agent', user: 'alice@example.com', expiresAt: '2026-09-03T09:00:00Z' } });
    expect(await rejection(r.control.execute(a, r.executor))).toBeInstanceOf(IdentityError);
    expect(r.types()).toEqual(['ACTION_PROPOSED', 'ACTION_DENIED']);
    expect(r.lastReceipt()).toMatchObject({ result: 'denied', decision: 'deny', decision_reason: 'principal_expired' });
  });

  it('the policy hash a Control records covers its authority', async () => {
    const withGrant = await rig(doc(GRANT));
    const none = await rig(doc(GRANT), { authority: null });
    expect(withGrant.control.policyHash).toBe(loadPolicy(doc(GRANT)).policyHash);
    expect(none.control.policyHash).toBe(loadPolicy(doc(GRANT)).hashFor({ environment: 'production', authority: null }));
    expect(withGrant.control.policyHash).not.toBe(none.control.policyHash);
    // Any decision input of a grant moves it; key order and comments do not.
    const narrower = GRANT.replace('amount_lte: 200000', 'amount_lte: 199999');
    expect(loadPolicy(doc(narrower)).policyHash).not.toBe(loadPolicy(doc(GRANT)).policyHash);
    const reordered =
      '\nauthority:\n  grants:\n    # a comment\n    - subject: { user: "alice@example.com", agent: "support-agent" }\n      id: head-of-support\n      environments: ["production"]\n      constraints: { amount_lte: 200000 }\n      resources: ["payment:EU-*"]\n      actions: ["stripe.refund"]\n';
    expect(loadPolicy(doc(reordered)).policyHash).toBe(loadPolicy(doc(GRANT)).policyHash);
  });

  it('authority declared twice is refused, naming both', async () => {
    const other = loadPolicy(doc('authority:\n  grants: []\n')).authority!;
    await expect(rig(doc(GRANT), { authority: other })).rejects.toThrow(/authority is declared twice/);
  });
});

describe('T62/T65: principal resolution under authority', () => {
  const declines: IdentityProvider = { resolve: () => null };

  it('a declining provider is not backfilled under authority', async () => {
    const r = await rig(doc(GRANT), { identity: declines, principal: { agent: 'support-agent', user: 'alice@example.com' } });
    const refund = protect(() => 'never', { control: r.control, name: 'stripe.refund', resource: 'payment:{payment_id}' });
    const err = await rejection(refund({ amount: 1000, payment_id: 'EU-42' }));
    expect(err).toMatchObject({ reason: 'no_principal' });
    expect(await r.store.events()).toEqual([]);
    expect(await r.store.receipts()).toEqual([]);
  });

  it('a declining provider is still backfilled without authority', async () => {
    const r = await rig(V3 + ACTIONS, { identity: declines, principal: { agent: 'support-agent' } });
    const refund = protect(() => 'ran', { control: r.control, name: 'stripe.refund' });
    expect(await refund({ amount: 1000, payment_id: 'EU-42' })).toBe('ran');
  });
});

describe('finding 3, as the original has it: a resource scope on an action the policy derives no resource for loads, is named, and binds what the caller gives', () => {
  const SCOPED =
    '\nauthority:\n  grants:\n    - id: eu-refunds\n      subject: { agent: "support-agent" }\n      actions: ["stripe.**"]\n      resources: ["payment:EU-*"]\n';

  it('the original 0.12.2 loads it, and so does this build: the gap is a finding (and a load warning), not a refusal', () => {
    const warnings: string[] = [];
    const p = loadPolicy(doc(SCOPED, ACTIONS), { logger: { warn: (m) => void warnings.push(m) } });
    expect(p.authority!.grants.get('eu-refunds')!.resources).toEqual(['payment:EU-*']);
    const found = checkPolicy(p).filter((f) => f.code === 'grant_resource_claimed');
    expect(found.map((f) => [f.action, f.where])).toEqual([['stripe.refund', 'authority.grants["eu-refunds"].resources']]);
    expect(found[0]!.message).toMatch(/grant "eu-refunds" scopes actions\['stripe\.refund'\] by 'resources:', but the entry has no 'resource:' template/);
    expect(warnings.some((w) => w.includes('grant "eu-refunds" scopes'))).toBe(true);
    // Every action the patterns reach is named; one the policy always denies cannot run, so is not.
    const derived = '\nactions:\n  stripe.refund:\n    resource: "payment:{payment_id}"\n    decision: allow\n';
    expect(checkPolicy(loadPolicy(doc(SCOPED, derived))).filter((f) => f.code === 'grant_resource_claimed')).toEqual([]);
    const payout = `${derived}  stripe.payout:\n    rules:\n      - when: { amount_lte: 10 }\n        decision: approve\n      - decision: deny\n  stripe.delete:\n    rules:\n      - decision: deny\n`;
    expect(checkPolicy(loadPolicy(doc(SCOPED, payout))).flatMap((f) => (f.code === 'grant_resource_claimed' ? [f.action] : []))).toEqual(['stripe.payout']);
  });

  it("in process the resource is the caller code's (protect's template, a hand-built action): the grant checks it; no resource, no match", async () => {
    const r = await rig(doc(SCOPED, ACTIONS));
    const eu = createAction({
      name: 'stripe.refund',
      arguments: { amount: 100 },
      principal: { agent: 'support-agent' },
      resource: 'payment:EU-1',
      environment: 'production',
    });
    expect(await r.control.execute(eu, r.executor)).toBe('ok');
    const us = createAction({
      name: 'stripe.refund',
      arguments: { amount: 100 },
      principal: { agent: 'support-agent' },
      resource: 'payment:US-1',
      environment: 'production',
    });
    expect((await rejection(r.control.execute(us, r.executor)))['reason']).toBe('no_authority');
    const none = createAction({ name: 'stripe.refund', arguments: { amount: 100 }, principal: { agent: 'support-agent' }, environment: 'production' });
    expect((await rejection(r.control.execute(none, r.executor)))['reason']).toBe('no_authority');
  });

  it('a standalone authority document pairs with the policy, and a delegation may scope by resources', async () => {
    const authority = loadAuthority(`${V3}${SCOPED}`, { source: 'authority.yaml' });
    const { store } = await rig(doc());
    expect(() => new Control({ policy: loadPolicy(doc(), { source: 'ctrlrun.yaml' }), store, authority })).not.toThrow();
    const ROOT = `\nauthority:\n  grants:\n    - id: root\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      expires_at: 2026-12-31T00:00:00Z\n      delegable: true\n`;
    const r = await rig(doc(ROOT));
    const narrowed = { subject: { agent: 'helper' }, actions: ['stripe.refund'], resources: ['payment:EU-*'], expiresAt: '2026-12-30T00:00:00Z' };
    await r.control.delegate('root', narrowed, { by: { agent: 'support-agent' } });
    expect(await r.store.delegations({ includeRevoked: true })).toHaveLength(1);
  });
});
