// Red team of edit-then-approve in the kernel: each case was a hole before its fix.
import { describe, expect, it } from 'vitest';
import { ApprovalRequired, InvalidArgument, createAction, protect } from '@ctrlrun/kernel';
import { setup } from './harness.js';

const NO_TEMPLATES = `schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    decision: approve
`;

describe('edit-then-approve, red team', () => {
  it('a resource the policy does not derive (protect\'s own template) is never kept for edited arguments: the edit is refused, so the edited action cannot reserve the proposal\'s key', async () => {
    const ctx = await setup(NO_TEMPLATES);
    const ran: unknown[] = [];
    const refund = protect((a: { payment_id: string; amount: number }) => void ran.push(a), {
      control: ctx.control, name: 'stripe.refund', resource: 'payment:{payment_id}', effect: 'refund:{resource}',
    });
    const err = await refund({ payment_id: 'p1', amount: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalRequired);
    const requestId = (err as ApprovalRequired).requestId;
    const edit = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p2', amount: 400 } } }).catch((e: unknown) => e);
    expect(edit).toBeInstanceOf(InvalidArgument);
    expect((edit as Error).message).toMatch(/resource/);
    expect((await ctx.store.getApproval(requestId))?.status).toBe('pending');
    expect(ran).toEqual([]);
    expect(await ctx.store.getEffect('refund:payment:p1')).toBeNull();
  });

  it('an action with no resource keeps none, and an edit of it is granted as before', async () => {
    const ctx = await setup(NO_TEMPLATES);
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500 }, principal: { agent: 'refund-agent' } });
    const requestId = ((await ctx.control.execute(action, () => 'never').catch((e: unknown) => e)) as ApprovalRequired).requestId;
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p2', amount: 400 } } });
    expect((await ctx.store.getApproval(approval.approvalId))?.request.action.resource).toBeNull();
  });
});

describe('edit-then-approve, red team: the proposal again', () => {
  it('"edited" arguments equal to the proposal of an action whose caller gave its resource are a plain grant, not a refusal', async () => {
    const ctx = await setup(NO_TEMPLATES);
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500 }, principal: { agent: 'refund-agent' }, resource: 'payment:p1' });
    const requestId = ((await ctx.control.execute(action, () => 'never').catch((e: unknown) => e)) as ApprovalRequired).requestId;
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { amount: 500, payment_id: 'p1' } } });
    expect(approval.approvalId).toBe(requestId);
  });
});
