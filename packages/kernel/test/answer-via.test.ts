// Answers given through a named surface (the MCP operator server) carry `via`, and a resolution
// carries the human's reason, in the events the Control writes; a blank one is refused unwritten.
import { describe, expect, it } from 'vitest';
import { ApprovalRequired, createAction, InvalidArgument } from '@ctrlrun/kernel';
import { setup } from './harness.js';

describe('grantApproval / denyApproval / resolveEffect: via and reason', () => {
  it('record via (and the reason of a resolution) in the event data; omitted, the data is as before', async () => {
    const { control, store } = await setup();
    const action = (id: string) =>
      createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 500000 }, principal: { agent: 'refund-agent' } }, { ids: control.ids });
    const ask = async (id: string) => {
      const err = await control.execute(action(id), () => 'ok').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApprovalRequired);
      return (err as ApprovalRequired).requestId;
    };
    const a = await ask('p1');
    const b = await ask('p2');
    const c = await ask('p3');
    await control.grantApproval(a, { approver: 'mcp-operator:alice', via: 'mcp-operator' });
    await control.denyApproval(b, { approver: 'mcp-operator:alice', via: 'mcp-operator' });
    await control.grantApproval(c, { approver: 'cli:local' });
    const ambiguous = createAction(
      { name: 'stripe.refund', arguments: { payment_id: 'p4', amount: 5 }, principal: { agent: 'refund-agent' } },
      { ids: control.ids },
    );
    await expect(
      control.execute(ambiguous, () => {
        throw new Error('socket closed');
      }),
    ).rejects.toThrow('socket closed');
    await control.resolveEffect('refund:p4', 'failed', { by: 'mcp-operator:alice', via: 'mcp-operator', reason: 'the provider says no charge' });
    const data = (await store.events()).filter((e) => ['APPROVAL_GRANTED', 'APPROVAL_DENIED', 'EFFECT_RESOLVED'].includes(e.type)).map((e) => e.data);
    expect(data).toEqual([
      { approver: 'mcp-operator:alice', action_hash: expect.any(String), via: 'mcp-operator' },
      { approver: 'mcp-operator:alice', via: 'mcp-operator' },
      { approver: 'cli:local', action_hash: expect.any(String) },
      { state: 'failed', resolver: 'mcp-operator:alice', resolved_by: 'human', via: 'mcp-operator', reason: 'the provider says no charge' },
    ]);
  });

  it('a blank or non-string via or reason is refused before anything is written', async () => {
    const { control, store } = await setup();
    const err = await control
      .execute(
        createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: { agent: 'refund-agent' } }, { ids: control.ids }),
        () => 'ok',
      )
      .catch((e: unknown) => e as ApprovalRequired);
    const id = (err as ApprovalRequired).requestId;
    await expect(control.grantApproval(id, { approver: 'alice', via: ' ' })).rejects.toBeInstanceOf(InvalidArgument);
    await expect(control.denyApproval(id, { approver: 'alice', via: 7 as unknown as string })).rejects.toBeInstanceOf(InvalidArgument);
    await expect(control.resolveEffect('refund:p1', 'failed', { by: 'alice', reason: '' })).rejects.toBeInstanceOf(InvalidArgument);
    expect((await store.getApproval(id))?.status).toBe('pending');
  });
});
