// The one intake (issue 29): a surface's call becomes the action and its execute options, or a
// refusal naming the field. protect, the worker, the MCP gateway and verify's rig all call it;
// these cases pin what each refusal names and that protect's action is the intake's.
import { describe, expect, it } from 'vitest';
import { ActionDenied, intake, IntakeRefusal, InvalidArgument, protect } from '@ctrlrun/kernel';
import { setup } from './harness.js';

const POLICY = `schema: ctrlrun.policy/v4
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    resource: "payment:{payment_id}"
    decision: allow
  notify.customer: {decision: allow}
  card.lookup:
    data: {card_number: pci}
    decision: allow
`;

async function refusal(p: Promise<unknown>): Promise<IntakeRefusal> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(IntakeRefusal);
  expect(err).toBeInstanceOf(InvalidArgument);
  return err as IntakeRefusal;
}

describe('intake', () => {
  it('builds the action and its options: the policy resource, the presented approval, no key without a template', async () => {
    const { control } = await setup(POLICY);
    const refund = await intake(control, { name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 5, note: undefined }, approvalId: 'apr_1' });
    expect(refund.action.resource).toBe('payment:p1');
    expect(refund.action.canonicalArguments).toEqual({ payment_id: 'p1', amount: 5 });
    expect(refund.options).toEqual({ approvalId: 'apr_1' });
    const notify = await intake(control, { name: 'notify.customer', arguments: {} });
    expect(notify.options).toEqual({ approvalId: null, effectKey: null });
    // protect builds the same action through it (ids differ, the hash does not).
    const wrapped = protect(() => 'ok', { control, name: 'stripe.refund' });
    expect((await wrapped.action({ payment_id: 'p1', amount: 5 })).actionHash).toBe(refund.action.actionHash);
  });

  it('refuses an argument named data_scope, naming it, in the words of every surface', async () => {
    const { control, store } = await setup(POLICY);
    const err = await refusal(intake(control, { name: 'card.lookup', arguments: { card_number: '4242', data_scope: 'public' } }));
    expect([err.field, err.reason, err.message]).toEqual([
      'arguments.data_scope',
      'derived_argument',
      'an argument may not be named data_scope: it is derived by the policy',
    ]);
    expect(await store.events()).toEqual([]);
  });

  it('refuses a non-object, an uncanonical value and an unresolvable resource template at arguments', async () => {
    const { control } = await setup(POLICY);
    expect((await refusal(intake(control, { name: 'notify.customer', arguments: [] }))).field).toBe('arguments');
    expect((await refusal(intake(control, { name: 'notify.customer', arguments: { x: 1.5 } }))).field).toBe('arguments');
    const unresolved = await refusal(intake(control, { name: 'stripe.refund', arguments: { amount: 5 } }));
    expect([unresolved.field, unresolved.reason]).toEqual(['arguments', 'resource_template']);
  });

  it("a claimed resource: refused from an agent where nothing derives one, the application's kept, a mismatch refused", async () => {
    const { control } = await setup(POLICY);
    const agent = await refusal(intake(control, { name: 'notify.customer', arguments: {}, resource: 'customer:1' }));
    expect([agent.field, agent.reason]).toEqual(['resource', 'resource_claim']);
    const app = await intake(control, { name: 'notify.customer', arguments: {}, resource: 'customer:1', claimedBy: 'application' });
    expect(app.action.resource).toBe('customer:1');
    const wrong = await refusal(intake(control, { name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 5 }, resource: 'payment:p2' }));
    expect([wrong.field, wrong.reason]).toEqual(['resource', 'resource_mismatch']);
    expect((await intake(control, { name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 5 }, resource: 'payment:p1' })).action.resource).toBe(
      'payment:p1',
    );
  });

  it("a caller's effect key: the template's own passes, another is refused; without a template it is scoped, a collision refused", async () => {
    const { control } = await setup(POLICY);
    const args = { payment_id: 'p1', amount: 5 };
    expect((await intake(control, { name: 'stripe.refund', arguments: args, effectKey: 'refund:p1' })).options).toEqual({ approvalId: null });
    const other = await refusal(intake(control, { name: 'stripe.refund', arguments: args, effectKey: 'refund:p2' }));
    expect([other.field, other.reason]).toEqual(['effectKey', 'effect_key_mismatch']);
    expect((await intake(control, { name: 'notify.customer', arguments: {}, effectKey: 'refund:p1' })).options.effectKey).toBe(
      'caller/notify.customer/refund:p1',
    );
    const { control: loose } = await setup(`schema: ctrlrun.policy/v2
actions:
  any.thing: {effect: "{id}", decision: allow}
  notify.customer: {decision: allow}
`);
    const taken = await refusal(intake(loose, { name: 'notify.customer', arguments: {}, effectKey: 'k' }));
    expect([taken.field, taken.reason]).toEqual(['effectKey', 'caller_key_collision']);
  });

  it("the surface's templates beat the policy's; an authenticated principal is used as is", async () => {
    const { control } = await setup(POLICY);
    const built = await intake(control, {
      name: 'notify.customer',
      arguments: { id: 'c1' },
      resourceTemplate: 'customer:{id}',
      effectTemplate: 'notify:{id}',
      principal: { agent: 'worker-agent', user: 'u1' },
      authenticated: true,
    });
    expect(built.action.resource).toBe('customer:c1');
    expect(built.options).toEqual({ approvalId: null, effectTemplate: 'notify:{id}' });
    expect(built.action.principal).toMatchObject({ agent: 'worker-agent', user: 'u1' });
  });

  it('no principal is refused by the Control before the arguments are read', async () => {
    const { control } = await setup(POLICY, { principal: null });
    await expect(intake(control, { name: 'card.lookup', arguments: { data_scope: 'x' } })).rejects.toBeInstanceOf(ActionDenied);
  });
});
