/**
 * The worker's HTTP suite, written once and run against the embedded default in three
 * runtimes (`node.test.ts`, `workerd.test.ts`, `deno.test.ts`): the six try-it steps, the
 * propose → approve-as-operator → execute → read-the-receipt flow, an agent answering its own
 * request, and the HTTP-level refusals. Each target keeps its state between cases, so every
 * case uses its own payment ids.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unexpected } from '../portability/compare.js';

export const AGENT_TOKEN = 'agent-token-for-the-tests-0001';
export const OPERATOR_TOKEN = 'operator-token-for-the-tests-01';
export const OPERATOR = 'human:alice';
/** The environment (or bindings) every target is started with. */
export const TEST_ENV = { CTRLRUN_AGENT_TOKEN: AGENT_TOKEN, CTRLRUN_OPERATOR_TOKEN: OPERATOR_TOKEN, CTRLRUN_OPERATOR: OPERATOR, CTRLRUN_AGENT: 'refund-agent' };

/** A running worker, reached over HTTP. */
export interface Target {
  fetch(path: string, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

type Json = Record<string, unknown>;

/** Runs the suite against the target `open` starts. */
export function describeWorkerHttp(runtime: string, open: () => Promise<Target>): void {
  describe(`the worker over HTTP in ${runtime}`, () => {
    let target: Target;
    beforeAll(async () => {
      target = await open();
    }, 60_000);
    afterAll(async () => {
      await target?.close();
    });

    const call = async (method: string, path: string, token: string | null, body?: unknown): Promise<{ status: number; json: Json }> => {
      const headers: Record<string, string> = {};
      if (token !== null) headers['authorization'] = `Bearer ${token}`;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const response = await target.fetch(path, {
        method,
        headers,
        ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
      });
      const text = await response.text();
      return { status: response.status, json: JSON.parse(text) as Json };
    };
    const propose = (body: unknown, token = AGENT_TOKEN) => call('POST', '/v1/actions', token, body);
    const refund = (payment_id: string, amount: number, extra: Json = {}) => propose({ name: 'stripe.refund', arguments: { payment_id, amount }, ...extra });
    const approvals = async (status: string) => (await call('GET', `/v1/approvals?status=${status}`, OPERATOR_TOKEN)).json['approvals'] as Json[];

    it('answers /healthz without a credential', async () => {
      expect(await call('GET', '/healthz', null)).toEqual({ status: 200, json: { ok: true } });
    });

    it('runs the six try-it steps as spec 04 §4 says, approving as the operator', async () => {
      const steps: { step: string; result: unknown }[] = [];
      const step = async (label: string, request: Json, token = AGENT_TOKEN): Promise<Json> => {
        const { status, json } = await call('POST', '/v1/try-it/step', token, request);
        expect(status, JSON.stringify(json)).toBe(200);
        steps.push({ step: label, result: json });
        return json;
      };
      await step('1', { op: 'refund', payment_id: 'txn_1', amount: 50000 });
      const asked = await step('2', { op: 'refund', payment_id: 'txn_2', amount: 200000 });
      const requestId = asked['request_id'] as string;
      // The agent cannot press the playground's Approve button.
      expect((await call('POST', '/v1/try-it/step', AGENT_TOKEN, { op: 'approve', request_id: requestId })).status).toBe(403);
      const granted = await step('2', { op: 'approve', request_id: requestId }, OPERATOR_TOKEN);
      expect(granted['approval_id']).toBe(requestId);
      await step('2', { op: 'refund', payment_id: 'txn_2', amount: 500000, approval_id: requestId });
      await step('2', { op: 'refund', payment_id: 'txn_2', amount: 200000, approval_id: requestId });
      await step('3', { op: 'refund', payment_id: 'txn_2', amount: 200000, approval_id: requestId });
      await step('4', { op: 'refund', payment_id: 'txn_3', amount: 2000000 });
      await step('5', { op: 'refund', payment_id: 'txn_4', amount: 50000, lose_reply: true });
      await step('5', { op: 'refund', payment_id: 'txn_4', amount: 50000 });
      await step('6', { op: 'refund', payment_id: 'txn_1', amount: 50000 });
      // -500 on a payment this session never touched: denied before the remote.
      await step('fresh', { op: 'refund', payment_id: 'txn_neg', amount: -500 });
      expect(unexpected(steps)).toBeUndefined();
    });

    it('proposes, is approved by the operator, executes once and leaves a chained receipt', async () => {
      const asked = await refund('pay_flow', 250000);
      expect(asked.status).toBe(202);
      const { requestId, actionHash } = asked.json as { requestId: string; actionHash: string };
      expect(requestId).toMatch(/^apr_/);
      expect(actionHash).toMatch(/^sha256:[0-9a-f]{64}$/);

      const pending = (await approvals('pending')).find((a) => a['requestId'] === requestId);
      expect(pending).toMatchObject({
        status: 'pending',
        actionHash,
        action: { name: 'stripe.refund', arguments: { amount: 250000, payment_id: 'pay_flow' }, principal: { agent: 'refund-agent', user: null } },
      });

      const granted = await call('POST', `/v1/approvals/${requestId}/grant`, OPERATOR_TOKEN);
      expect(granted.status).toBe(200);
      expect(granted.json['approval']).toMatchObject({ approvalId: requestId, approver: OPERATOR, actionHash });

      const done = await refund('pay_flow', 250000, { approvalId: requestId });
      expect(done.status, JSON.stringify(done.json)).toBe(200);
      expect(done.json).toMatchObject({
        status: 'committed',
        actionHash,
        effectKey: 'refund:pay_flow',
        result: { id: 're_pay_flow', amount: 250000, status: 'succeeded' },
      });

      const receipt = await call('GET', `/v1/receipts/${String(done.json['receiptId'])}`, OPERATOR_TOKEN);
      expect(receipt.status).toBe(200);
      expect(receipt.json['receipt']).toMatchObject({
        action: 'stripe.refund',
        action_hash: actionHash,
        decision: 'approve',
        approval_id: requestId,
        approver: OPERATOR,
        result: 'committed',
        effect_key: 'refund:pay_flow',
      });

      // Used once: the same approval again is refused, and nothing runs twice.
      const again = await refund('pay_flow', 250000, { approvalId: requestId });
      expect(again.status).toBe(409);
      expect(again.json['error']).toMatchObject({ code: 'ERR_APPROVAL_MISMATCH', reason: 'consumed' });

      const page = await call('GET', '/v1/receipts?after=0&limit=1000', OPERATOR_TOKEN);
      expect((page.json['receipts'] as Json[]).some((r) => r['receiptId'] === done.json['receiptId'])).toBe(true);
      const verified = await call('GET', '/v1/receipts/verify', OPERATOR_TOKEN);
      expect(verified.json).toMatchObject({ ok: true, breaks: [] });
    });

    it('an agent approving its own request gets 403 and the approval stays pending', async () => {
      const asked = await refund('pay_self', 300000);
      const requestId = String(asked.json['requestId']);
      for (const verb of ['grant', 'deny']) {
        const tried = await call('POST', `/v1/approvals/${requestId}/${verb}`, AGENT_TOKEN);
        expect(tried.status).toBe(403);
        expect(tried.json['error']).toMatchObject({ code: 'ERR_FORBIDDEN' });
      }
      expect((await approvals('pending')).map((a) => a['requestId'])).toContain(requestId);
      const presented = await refund('pay_self', 300000, { approvalId: requestId });
      expect(presented.status).toBe(409);
      expect(presented.json['error']).toMatchObject({ code: 'ERR_APPROVAL_MISMATCH', reason: 'pending' });
    });

    it('answers denial, duplicate and a mismatched approval with the kernel codes', async () => {
      const denied = await refund('pay_big', 2_000_000);
      expect(denied.status).toBe(403);
      expect(denied.json['error']).toMatchObject({ code: 'ERR_ACTION_DENIED', reason: 'rule[2]' });
      expect((await refund('pay_dup', 100)).status).toBe(200);
      const dup = await refund('pay_dup', 100);
      expect(dup.status).toBe(409);
      expect(dup.json['error']).toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', state: 'committed', effectKey: 'refund:pay_dup' });
      const asked = await refund('pay_mm', 400000);
      await call('POST', `/v1/approvals/${String(asked.json['requestId'])}/grant`, OPERATOR_TOKEN);
      const mismatch = await refund('pay_mm', 400001, { approvalId: asked.json['requestId'] });
      expect(mismatch.status).toBe(409);
      expect(mismatch.json['error']).toMatchObject({ code: 'ERR_APPROVAL_MISMATCH', reason: 'mismatch' });
    });

    it('refuses before asking: an effect that already happened is 409 DuplicateEffect, not a new approval request (202)', async () => {
      // The refund ran with a human's approval; the agent then sends the same call without it, in a loop.
      const asked = await refund('pay_again', 250000);
      const requestId = String(asked.json['requestId']);
      expect((await call('POST', `/v1/approvals/${requestId}/grant`, OPERATOR_TOKEN)).status).toBe(200);
      expect((await refund('pay_again', 250000, { approvalId: requestId })).status).toBe(200);
      // Allowed on its own, then a larger refund of the same payment that would need a human.
      expect((await refund('pay_again_small', 100)).status).toBe(200);
      const tries = [await refund('pay_again', 250000), await refund('pay_again', 250000), await refund('pay_again_small', 300000)];
      for (const [i, r] of tries.entries()) {
        expect(r.status, JSON.stringify(r.json)).toBe(409);
        expect(r.json['error']).toMatchObject({
          code: 'ERR_DUPLICATE_EFFECT',
          state: 'committed',
          effectKey: i < 2 ? 'refund:pay_again' : 'refund:pay_again_small',
        });
      }
      const mine = (a: Json) => String((a['action'] as { arguments: Json }).arguments['payment_id']).startsWith('pay_again');
      expect((await approvals('pending')).filter(mine)).toEqual([]);
      // Each refusal is on record: a blocked receipt in an intact chain.
      const page = await call('GET', '/v1/receipts?after=0&limit=1000', OPERATOR_TOKEN);
      const blocked = (page.json['receipts'] as Json[]).filter((r) => {
        const doc = r['receipt'] as Json | undefined;
        return doc?.['result'] === 'blocked' && String(doc['effect_key']).startsWith('refund:pay_again');
      });
      expect(blocked).toHaveLength(3);
      expect((await call('GET', '/v1/receipts/verify', OPERATOR_TOKEN)).json).toMatchObject({ ok: true, breaks: [] });
    });

    it('refuses at the HTTP edge: 401, 403, 415, 413, 400 with the path, 404', async () => {
      const body = { name: 'stripe.refund', arguments: { payment_id: 'pay_edge', amount: 1 } };
      expect((await propose(body, '')).status).toBe(401);
      const none = await call('POST', '/v1/actions', null, body);
      expect(none).toMatchObject({ status: 401, json: { error: { code: 'ERR_IDENTITY' } } });
      expect(await propose(body, 'not-a-token-at-all-0000')).toMatchObject({ status: 401, json: { error: { code: 'ERR_IDENTITY' } } });
      expect(await propose(body, OPERATOR_TOKEN)).toMatchObject({ status: 403, json: { error: { code: 'ERR_FORBIDDEN' } } });
      expect((await call('GET', '/v1/receipts', AGENT_TOKEN)).status).toBe(403);
      expect((await call('POST', '/v1/effects/refund:pay_edge/resolve', AGENT_TOKEN, { state: 'failed' })).status).toBe(403);

      const text = await target.fetch('/v1/actions', {
        method: 'POST',
        headers: { authorization: `Bearer ${AGENT_TOKEN}`, 'content-type': 'text/plain' },
        body: JSON.stringify(body),
      });
      expect(text.status).toBe(415);
      expect(((await text.json()) as Json)['error']).toMatchObject({ code: 'ERR_UNSUPPORTED_MEDIA_TYPE' });

      const big = await propose({ ...body, arguments: { payment_id: 'pay_edge', amount: 1, note: 'x'.repeat(70_000) } });
      expect(big).toMatchObject({ status: 413, json: { error: { code: 'ERR_PAYLOAD_TOO_LARGE' } } });

      const float = await propose('{"name":"stripe.refund","arguments":{"payment_id":"pay_edge","amount":50.0}}');
      expect(float).toMatchObject({ status: 400, json: { error: { code: 'ERR_INVALID_ARGUMENT', path: '$.arguments.amount' } } });
      const broken = await propose('{"name":"stripe.refund","arguments":{"payment_id":');
      expect(broken).toMatchObject({ status: 400, json: { error: { code: 'ERR_INVALID_ARGUMENT', path: '$.arguments.payment_id' } } });
      const principal = await propose({ ...body, principal: { agent: 'someone-else' } });
      expect(principal).toMatchObject({ status: 400, json: { error: { path: '$.principal' } } });

      expect((await call('GET', '/v1/nothing-here', OPERATOR_TOKEN)).status).toBe(404);
      // None of these wrote a record: the effect was never reserved.
      expect((await call('GET', '/v1/effects/refund:pay_edge', OPERATOR_TOKEN)).status).toBe(404);
    });

    it('pages the approvals with a cursor, reads receipts from their documents, refuses a BOM body', async () => {
      for (let i = 0; i < 3; i++) expect((await refund(`pay_page_${i}`, 300000)).status).toBe(202);
      const seen: string[] = [];
      let after: string | null = null;
      for (let pages = 0; pages < 50; pages++) {
        const r = await call('GET', `/v1/approvals?status=pending&limit=2${after === null ? '' : `&after=${encodeURIComponent(after)}`}`, OPERATOR_TOKEN);
        expect(r.status).toBe(200);
        expect((r.json['approvals'] as Json[]).length).toBeLessThanOrEqual(2);
        seen.push(...(r.json['approvals'] as Json[]).map((a) => String((a['action'] as { arguments: Json }).arguments['payment_id'])));
        after = r.json['next'] as string | null;
        if (after === null) break;
      }
      expect(seen.filter((p) => p.startsWith('pay_page_'))).toEqual(['pay_page_0', 'pay_page_1', 'pay_page_2']);
      const page = await call('GET', '/v1/receipts?limit=1', OPERATOR_TOKEN);
      expect((page.json['receipts'] as Json[])[0]).toMatchObject({ seq: 1, intact: true, breaks: [] });
      const bom = await target.fetch('/v1/actions', {
        method: 'POST',
        headers: { authorization: `Bearer ${AGENT_TOKEN}`, 'content-type': 'application/json' },
        body: new Uint8Array([
          0xef,
          0xbb,
          0xbf,
          ...new TextEncoder().encode(JSON.stringify({ name: 'stripe.refund', arguments: { payment_id: 'pay_bom', amount: 1 } })),
        ]),
      });
      expect(bom.status).toBe(400);
      expect(((await bom.json()) as Json)['error']).toMatchObject({ message: expect.stringContaining('byte order mark') });
    });

    it('sends no CORS headers by default', async () => {
      const preflight = await target.fetch('/v1/actions', {
        method: 'OPTIONS',
        headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
      });
      expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
      await preflight.body?.cancel();
    });
  });
}
