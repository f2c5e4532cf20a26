// Readable refusals: a policy decision as a sentence built from the rule that decided, the
// ToolRefusal the adapters hand a model, and Protected.needsApproval (the adapters' one question).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ActionDenied,
  ApprovalRequired,
  AuthorityDenied,
  DuplicateEffect,
  StoreError,
  createAction,
  explainDecision,
  loadPolicy,
  protect,
  toolRefusal,
} from '@ctrlrun/kernel';
import { REFUND_POLICY, setup } from './harness.js';

const CAPPED = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    rules:
      - when: {amount_lte: 100000}
        decision: allow
      - when: {amount_lte: 1000000}
        decision: approve
      - when: {amount_gt: 1000000}
        decision: deny
  mail.send:
    rules:
      - when: {to_in: ["ops@example.com"], subject_neq: "urgent"}
        decision: allow
  iam.grant_admin: {decision: deny}
  docs.read: {decision: allow}
`);
const REFUND = loadPolicy(REFUND_POLICY);

describe('explainDecision', () => {
  it('a denial names the condition that matched and the argument it read', () => {
    expect(explainDecision(CAPPED, 'stripe.refund', { amount: 5000000 })).toBe('denied: amount 5000000 is above 1000000 for stripe.refund (rule[2])');
    expect(explainDecision(CAPPED, 'stripe.refund', { amount: 500000 })).toBe(
      "needs a human's approval: amount 500000 is at most 1000000 for stripe.refund (rule[1])",
    );
    expect(explainDecision(CAPPED, 'stripe.refund', { amount: 5 })).toBe('allowed: amount 5 is at most 100000 for stripe.refund (rule[0])');
  });

  it('a catch-all rule, or no rule matching, says what the rules before asked for and what came', () => {
    expect(explainDecision(REFUND, 'stripe.refund', { payment_id: 'p', amount: 5000000 })).toBe(
      'denied: no earlier rule of stripe.refund matched: rule[0] needs amount at least 0 and amount at most 100000, rule[1] needs amount at least 0 and amount at most 1000000; amount 5000000 (rule[2])',
    );
    expect(explainDecision(CAPPED, 'mail.send', { to: 'x@example.com', subject: 'hi' })).toBe(
      'denied: no rule of mail.send matched: rule[0] needs to to be one of ["ops@example.com"] and subject not to be "urgent"; to "x@example.com", subject "hi" (no_matching_rule)',
    );
    expect(explainDecision(CAPPED, 'mail.send', {})).toMatch(/; to \(absent\), subject \(absent\) \(no_matching_rule\)$/);
  });

  it('unknown actions and bare decisions', () => {
    expect(explainDecision(CAPPED, 'stripe.refnd', {})).toBe('denied: "stripe.refnd" is not an action the policy names (unknown_action)');
    expect(explainDecision(CAPPED, 'iam.grant_admin', { user: 'x' })).toBe(
      'denied: the policy decides iam.grant_admin the same way for any arguments (decision)',
    );
    expect(explainDecision(CAPPED, 'docs.read', {})).toMatch(/^allowed: /);
  });

  it('an untrusted value never reaches the sentence raw: control characters are escaped and every value is cut to 80 characters', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 400 }), fc.string({ maxLength: 400 }), (to, subject) => {
        const text = explainDecision(CAPPED, 'mail.send', { to, subject });
        expect(text).not.toMatch(/[\u0000-\u001f\u007f\u2028\u2029]/);
        const shown =
          /; to (.*), subject (.*) \(no_matching_rule\)$/.exec(text) ?? /^allowed: to (.*) is one of .* and subject (.*) is not "urgent"/.exec(text);
        expect(shown).not.toBeNull();
        expect([...shown![1]!].length).toBeLessThanOrEqual(80);
        expect([...shown![2]!].length).toBeLessThanOrEqual(80);
      }),
    );
  });

  it('an invisible character in an argument (a bidi override, a zero-width space, U+2028) is written as its escape, never raw', () => {
    expect(explainDecision(CAPPED, 'mail.send', { to: 'a\u202egro.live@b', subject: 'x\u200by\u2028' })).toBe(
      'denied: no rule of mail.send matched: rule[0] needs to to be one of ["ops@example.com"] and subject not to be "urgent"; to "a\\u202egro.live@b", subject "x\\u200by\\u2028" (no_matching_rule)',
    );
  });

  it('the control path refuses a policy denial with this sentence: protect rejects with it as the message, reason and action id kept', async () => {
    const ctx = await setup();
    const refund = protect(() => 'ran', { control: ctx.control, name: 'stripe.refund' });
    const err = await refund({ payment_id: 'p9', amount: 5000000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect((err as ActionDenied).message).toBe(explainDecision(REFUND, 'stripe.refund', { amount: 5000000, payment_id: 'p9' }));
    expect((err as ActionDenied).message).toMatch(/^denied: no earlier rule of stripe\.refund matched: .*; amount 5000000 \(rule\[2\]\)$/);
    expect(err).toMatchObject({ code: 'ERR_ACTION_DENIED', reason: 'rule[2]' });
    expect((err as ActionDenied).actionId).toMatch(/^act_/);
  });

  it('an action name from the agent is shown escaped too', () => {
    expect(explainDecision(CAPPED, 'evil\nname', {})).toBe('denied: "evil\\nname" is not an action the policy names (unknown_action)');
  });
});

describe('toolRefusal', () => {
  const principal = { agent: 'a' };
  const big = createAction({ name: 'stripe.refund', arguments: { amount: 5000000 }, principal });

  it('a policy denial, given its action, is told by the rule that decided', () => {
    const r = toolRefusal(new ActionDenied('rule[2]', { message: 'stripe.refund denied by policy (rule[2])' }), { policy: CAPPED, action: big });
    expect(r).toEqual({
      refused: true,
      error: 'ActionDenied',
      code: 'ERR_ACTION_DENIED',
      reason: 'rule[2]',
      message: 'ActionDenied: denied: amount 5000000 is above 1000000 for stripe.refund (rule[2]). The tool did not run.',
    });
  });

  it("other denials keep their own message: an authority denial, a human's no; without context the bare message", () => {
    expect(
      toolRefusal(new AuthorityDenied('no_grant', { message: 'stripe.refund denied by authority (no_grant)' }), { policy: CAPPED, action: big })!.message,
    ).toBe('AuthorityDenied: stripe.refund denied by authority (no_grant). The tool did not run.');
    expect(
      toolRefusal(new ActionDenied('approval_denied', { message: 'approval apr_1 was denied by human:ana' }), { policy: CAPPED, action: big })!.message,
    ).toBe('ActionDenied: approval apr_1 was denied by human:ana (approval_denied). The tool did not run.');
    expect(toolRefusal(new ActionDenied('rule[2]', { message: 'stripe.refund denied by policy (rule[2])' }))!.message).toBe(
      'ActionDenied: stripe.refund denied by policy (rule[2]). The tool did not run.',
    );
    expect(toolRefusal(new DuplicateEffect('committed', { message: 'refund:p already committed' }))).toMatchObject({
      error: 'DuplicateEffect',
      reason: 'committed',
    });
  });

  it('what is not a refusal to tell the model is null: a request for a human, a store failure, any other error', () => {
    expect(toolRefusal(new ApprovalRequired('apr_1'))).toBeNull();
    expect(toolRefusal(new StoreError('disk full'))).toBeNull();
    expect(toolRefusal(new Error('boom'))).toBeNull();
    expect(toolRefusal('boom')).toBeNull();
  });
});

describe('Protected.needsApproval', () => {
  it('approve: true, and one request filed for those arguments however often it is asked; fn never runs', async () => {
    const ctx = await setup();
    const calls: unknown[] = [];
    const refund = protect((a) => calls.push(a), { control: ctx.control, name: 'stripe.refund' });
    expect(await refund.needsApproval({ payment_id: 'p1', amount: 200000 })).toBe(true);
    expect(await refund.needsApproval({ payment_id: 'p1', amount: 200000 })).toBe(true);
    expect((await ctx.store.listApprovals('pending')).map((r) => r.request.action.canonicalArguments)).toEqual([{ payment_id: 'p1', amount: 200000 }]);
    expect(calls).toEqual([]);
    expect(ctx.receipts).toEqual([]);
  });

  it('allow, deny, arguments that make no action: false, and no request', async () => {
    const ctx = await setup();
    const refund = protect(() => 1, { control: ctx.control, name: 'stripe.refund' });
    expect(await refund.needsApproval({ payment_id: 'p2', amount: 5 })).toBe(false);
    expect(await refund.needsApproval({ payment_id: 'p2', amount: 5000000 })).toBe(false);
    expect(await refund.needsApproval({ payment_id: 'p2', amount: 1.5 })).toBe(false);
    expect(await refund.needsApproval([] as never)).toBe(false);
    expect(await ctx.store.listApprovals()).toEqual([]);
  });

  it('observe mode never asks', async () => {
    const ctx = await setup(REFUND_POLICY.replace('schema: ctrlrun.policy/v2\n', 'schema: ctrlrun.policy/v3\nmode: observe\n'));
    const refund = protect(() => 1, { control: ctx.control, name: 'stripe.refund' });
    expect(await refund.needsApproval({ payment_id: 'p3', amount: 200000 })).toBe(false);
    expect(await ctx.store.listApprovals()).toEqual([]);
    expect(ctx.receipts).toEqual([]); // nothing was run, not even observed
  });
});
