/**
 * One name and one time format in every body the worker sends (issue 35): an approval request's
 * id is `requestId` everywhere (the grant's answer keeps the deprecated `approvalId` beside it, as
 * the README documented it), and every time is UTC with milliseconds and `Z` — the receipts' own
 * form — never the store column's `…172000+00:00`. The stored columns stay as they are.
 */
import { describe, expect, it } from 'vitest';
import { viewTime } from '@ctrlrun/kernel';
import { AGENT, harness, OPERATOR, type Harness } from './harness.js';

/** The one form every view shows. */
const VIEW_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

async function ask(h: Harness, paymentId: string, amount = 300000): Promise<Record<string, unknown>> {
  const r = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: paymentId, amount } });
  expect(r.status).toBe(202);
  return r.json;
}

describe('the worker: requestId and one time format', () => {
  it('202: requestId, and expiresAt in the view form (the stored column is +00:00, and is left so)', async () => {
    const h = await harness();
    const asked = await ask(h, 'n1');
    const id = String(asked['requestId']);
    const stored = (await h.store.getApproval(id))!;
    expect(stored.request.expiresAt).toMatch(/\+00:00$/);
    expect(asked['expiresAt']).toMatch(VIEW_TIME);
    expect(asked['expiresAt']).toBe(viewTime(stored.request.expiresAt));
    expect(asked).not.toHaveProperty('approvalId');
  });

  it('GET /v1/approvals and a denial: requestId, every time in the view form (grantedAt/consumedAt null until then)', async () => {
    const h = await harness();
    const id = String((await ask(h, 'n2'))['requestId']);
    const listed = (await h.call('GET', '/v1/approvals?status=pending', OPERATOR)).json['approvals'] as Record<string, unknown>[];
    expect(listed).toHaveLength(1);
    const stored = (await h.store.getApproval(id))!;
    expect(listed[0]).toMatchObject({
      requestId: id,
      createdAt: viewTime(stored.request.createdAt),
      expiresAt: viewTime(stored.request.expiresAt),
      grantedAt: null,
      consumedAt: null,
    });
    expect(listed[0]!['createdAt']).toMatch(VIEW_TIME);
    const denied = (await h.call('POST', `/v1/approvals/${id}/deny`, OPERATOR)).json['approval'] as Record<string, unknown>;
    expect(denied['requestId']).toBe(id);
    expect(denied['createdAt']).toMatch(VIEW_TIME);
    expect(denied['expiresAt']).toMatch(VIEW_TIME);
  });

  it('a grant answers requestId (the deprecated approvalId beside it, the same id) and its times in the view form; consumedAt after the run', async () => {
    const h = await harness();
    const id = String((await ask(h, 'n3'))['requestId']);
    const granted = (await h.call('POST', `/v1/approvals/${id}/grant`, OPERATOR)).json['approval'] as Record<string, unknown>;
    expect(granted).toMatchObject({ requestId: id, approvalId: id, status: 'granted' });
    expect(granted['grantedAt']).toMatch(VIEW_TIME);
    expect(granted['expiresAt']).toMatch(VIEW_TIME);
    // With an edit: requestId is the edited request's, editedFrom the proposal's.
    const other = String((await ask(h, 'n4', 500000))['requestId']);
    const edited = (await h.call('POST', `/v1/approvals/${other}/grant`, OPERATOR, { edit: { arguments: { payment_id: 'n4', amount: 400000 } } })).json;
    const approval = edited['approval'] as Record<string, unknown>;
    expect(approval['requestId']).not.toBe(other);
    expect(approval).toMatchObject({ approvalId: approval['requestId'], editedFrom: other });
    expect((edited['edit'] as Record<string, unknown>)['approved']).toBe(approval['requestId']);

    expect(
      (await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'n3', amount: 300000 }, approvalId: id })).status,
    ).toBe(200);
    const consumed = ((await h.call('GET', '/v1/approvals?status=consumed', OPERATOR)).json['approvals'] as Record<string, unknown>[])[0]!;
    expect(consumed['requestId']).toBe(id);
    expect(consumed['consumedAt']).toMatch(VIEW_TIME);
    expect(consumed['grantedAt']).toMatch(VIEW_TIME);
  });

  it('a refused presentation (ApprovalMismatch) names the request as requestId, approvalId kept beside it', async () => {
    const h = await harness();
    const id = String((await ask(h, 'n5'))['requestId']);
    const r = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'n5', amount: 300000 }, approvalId: id });
    expect(r.status).toBe(409);
    expect(r.json['error']).toMatchObject({ code: 'ERR_APPROVAL_MISMATCH', reason: 'pending', requestId: id, approvalId: id });
  });

  it('an effect record: createdAt, updatedAt and leaseExpiresAt in the view form', async () => {
    const h = await harness();
    expect((await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 't1', mode: 'lost' } })).status).toBe(502);
    const effect = (await h.call('GET', '/v1/effects/charge:t1', OPERATOR)).json['effect'] as Record<string, unknown>;
    const stored = (await h.store.getEffect('charge:t1'))!;
    expect(effect).toMatchObject({ state: 'ambiguous', createdAt: viewTime(stored.createdAt), updatedAt: viewTime(stored.updatedAt) });
    expect(effect['createdAt']).toMatch(VIEW_TIME);
    expect(effect['updatedAt']).toMatch(VIEW_TIME);
    expect(effect['leaseExpiresAt'] === null || VIEW_TIME.test(String(effect['leaseExpiresAt']))).toBe(true);
    const resolved = (await h.call('POST', '/v1/effects/charge:t1/resolve', OPERATOR, { state: 'failed' })).json['effect'] as Record<string, unknown>;
    expect(resolved['updatedAt']).toMatch(VIEW_TIME);
  });
});
