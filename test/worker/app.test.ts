/**
 * The API's statuses and records, in Node through `app.request`: every status the issue lists,
 * what each one leaves in the store, and the operator's side (approvals, effects, receipts).
 */
import { describe, expect, it } from 'vitest';
import { AGENT, harness, OPERATOR, POLICY } from './harness.js';
import { createTryIt } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

const refund = (payment_id: string, amount: number, extra: Record<string, unknown> = {}) => ({
  name: 'stripe.refund',
  arguments: { payment_id, amount },
  ...extra,
});

describe('POST /v1/actions', () => {
  it('200: committed, with the result, the receipt id and the principal from the credential', async () => {
    const h = await harness();
    const r = await h.call('POST', '/v1/actions', AGENT, refund('p1', 500));
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ status: 'committed', effectKey: 'refund:p1', result: { id: 're_p1', amount: 500 }, seq: 1 });
    const [row] = await h.store.receipts();
    expect(r.json['receiptId']).toBe(row!.receipt_id);
    expect(JSON.parse(row!.json!)).toMatchObject({ principal: { agent: 'billing-agent', user: 'u-42' }, result: 'committed' });
    expect(h.calls).toEqual(['refund p1']);
  });

  it('202: approval required, with the request id and the action hash; nothing runs', async () => {
    const h = await harness();
    const r = await h.call('POST', '/v1/actions', AGENT, refund('p2', 200000));
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ status: 'approval_required', requestId: expect.stringMatching(/^apr_/), actionHash: expect.stringMatching(/^sha256:/) });
    const [record] = await h.store.listApprovals('pending');
    expect(record!.request.requestId).toBe(r.json['requestId']);
    expect(record!.request.actionHash).toBe(r.json['actionHash']);
    expect(h.calls).toEqual([]);
  });

  it('403 ActionDenied, with the reason, and a denied receipt', async () => {
    const h = await harness();
    const r = await h.call('POST', '/v1/actions', AGENT, { name: 'unknown.thing', arguments: {} });
    expect(r.status).toBe(403);
    expect(r.json['error']).toMatchObject({ code: 'ERR_ACTION_DENIED', reason: 'unknown_action' });
    expect((await h.store.receipts()).map((x) => x.result)).toEqual(['denied']);
  });

  it('409 for ApprovalMismatch, DuplicateEffect and AmbiguousEffect', async () => {
    const h = await harness();
    const unknown = await h.call('POST', '/v1/actions', AGENT, refund('p3', 200000, { approvalId: 'apr_nope' }));
    expect(unknown.status).toBe(409);
    expect(unknown.json['error']).toMatchObject({ code: 'ERR_APPROVAL_MISMATCH', reason: 'unknown' });
    await h.call('POST', '/v1/actions', AGENT, refund('p4', 1));
    const dup = await h.call('POST', '/v1/actions', AGENT, refund('p4', 1));
    expect(dup.json['error']).toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', state: 'committed' });
    expect(dup.status).toBe(409);
    await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'c1', mode: 'lost' } });
    const amb = await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'c1', mode: 'ok' } });
    expect(amb.status).toBe(409);
    expect(amb.json['error']).toMatchObject({ code: 'ERR_AMBIGUOUS_EFFECT', effectKey: 'charge:c1' });
    expect(h.calls).toEqual(['refund p4', 'charge c1 lost']);
  });

  it('refuses before asking: a call needing a human whose effect key is ambiguous is 409 AmbiguousEffect, committed 409 DuplicateEffect; no request filed, the refusal recorded', async () => {
    // flaky.charge needs a human above 100; its key charge:{id} is shared by every amount.
    const policy = POLICY.replace(
      '  flaky.charge:\n    effect: "charge:{id}"\n    decision: allow\n',
      '  flaky.charge:\n    effect: "charge:{id}"\n    rules:\n      - {when: {amount_lte: 100}, decision: allow}\n      - {decision: approve}\n',
    );
    expect(policy).not.toBe(POLICY);
    const h = await harness({}, policy);
    const charge = (id: string, mode: string, amount: number) =>
      h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id, mode, amount } });
    expect((await charge('c1', 'lost', 50)).status).toBe(502);
    expect((await charge('c2', 'ok', 50)).status).toBe(200);
    const before = await h.counts();
    const amb = await charge('c1', 'ok', 5000);
    expect(amb.status, amb.text).toBe(409);
    expect(amb.json['error']).toMatchObject({ code: 'ERR_AMBIGUOUS_EFFECT', effectKey: 'charge:c1' });
    const dup = await charge('c2', 'ok', 5000);
    expect(dup.status, dup.text).toBe(409);
    expect(dup.json['error']).toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', state: 'committed', effectKey: 'charge:c2' });
    expect(await h.store.listApprovals()).toEqual([]);
    // Each refusal: ACTION_PROPOSED, POLICY_EVALUATED, EFFECT_RESERVATION_REFUSED and a blocked receipt; no effect written.
    expect(await h.counts()).toEqual({ ...before, events: before.events + 6, receipts: before.receipts + 2 });
    const refusals = (await h.store.events()).filter((e) => e.type === 'EFFECT_RESERVATION_REFUSED').map((e) => e.data);
    expect(refusals).toEqual([{ reason: 'ambiguous' }, { reason: 'duplicate', state: 'committed' }]);
    expect((await h.store.receipts()).slice(-2).map((r) => [r.result, JSON.parse(r.json!)['decision']])).toEqual([
      ['blocked', 'approve'],
      ['blocked', 'approve'],
    ]);
    expect(h.calls).toEqual(['charge c1 lost', 'charge c2 ok']);
  });

  it('502 when the executor fails with an unknown outcome: recorded AMBIGUOUS, resolved by an operator', async () => {
    const h = await harness();
    const lost = await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'c2', mode: 'lost' } });
    expect(lost.status).toBe(502);
    expect(lost.json['error']).toMatchObject({ code: 'ERR_AMBIGUOUS_EFFECT', outcome: 'ambiguous', effectKey: 'charge:c2' });
    expect((await h.store.getEffect('charge:c2'))!.state).toBe('ambiguous');
    expect((await h.store.receipts()).at(-1)!.result).toBe('ambiguous');

    const seen = await h.call('GET', '/v1/effects/charge:c2', OPERATOR);
    expect(seen.json['effect']).toMatchObject({ state: 'ambiguous', error: expect.stringContaining('socket hang up') });
    expect((await h.call('POST', '/v1/effects/charge:c2/resolve', AGENT, { state: 'committed' })).status).toBe(403);
    expect((await h.store.getEffect('charge:c2'))!.state).toBe('ambiguous');
    const resolved = await h.call('POST', '/v1/effects/charge:c2/resolve', OPERATOR, { state: 'committed' });
    expect(resolved.status).toBe(200);
    expect(resolved.json['effect']).toMatchObject({ state: 'committed', resolvedBy: 'human:ops' });
    const retry = await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'c2', mode: 'ok' } });
    expect(retry.json['error']).toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', state: 'committed' });
    expect(h.calls).toEqual(['charge c2 lost']);
    const events = (await h.store.events()).map((e) => e.type);
    expect(events).toContain('EFFECT_RESOLVED');
  });

  it('422 NotExecuted: recorded FAILED, and a retry may run', async () => {
    const h = await harness();
    const refused = await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'c3', mode: 'refused' } });
    expect(refused.status).toBe(422);
    expect(refused.json['error']).toMatchObject({ code: 'ERR_NOT_EXECUTED', effectKey: 'charge:c3' });
    expect((await h.store.getEffect('charge:c3'))!.state).toBe('failed');
    expect((await h.store.receipts()).at(-1)!.result).toBe('failed');
    const retry = await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'c3', mode: 'ok' } });
    expect(retry.status).toBe(200);
  });

  it('an allowed action with no executor is recorded FAILED (422), never run', async () => {
    const h = await harness();
    const r = await h.call('POST', '/v1/actions', AGENT, { name: 'nothing.registered', arguments: {} });
    expect(r.status).toBe(422);
    expect(r.json['error']).toMatchObject({ code: 'ERR_NOT_EXECUTED', message: expect.stringContaining('no executor is registered for nothing.registered') });
  });

  it('keeps integers beyond 2^53 exact, in the hash, the record and the reply', async () => {
    const h = await harness();
    const r = await h.call('POST', '/v1/actions', AGENT, '{"name":"flaky.charge","arguments":{"id":"c4","mode":"ok","n":123456789012345678901}}');
    expect(r.status).toBe(200);
    expect(r.text).toContain('"big":123456789012345678901234567890');
    expect((await h.store.receipts())[0]!.json).toContain('"n":123456789012345678901');
  });

  it('the policy names the effect key: a different effectKey is 400 and writes nothing', async () => {
    const h = await harness();
    const r = await h.call('POST', '/v1/actions', AGENT, refund('p5', 1, { effectKey: 'refund:other' }));
    expect(r.status).toBe(400);
    expect(r.json['error']).toMatchObject({ path: '$.effectKey' });
    expect(await h.counts()).toEqual({ events: 0, receipts: 0, effects: 0, approvals: 0 });
    expect((await h.call('POST', '/v1/actions', AGENT, refund('p5', 1, { effectKey: 'refund:p5' }))).status).toBe(200);
  });

  it("without a policy template, the agent's effectKey is the reservation, scoped to the action", async () => {
    const h = await harness();
    const first = await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: { a: 1 }, effectKey: 'order-7' });
    expect(first.json).toMatchObject({ status: 'committed', effectKey: 'caller/free.form/order-7' });
    const again = await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: { a: 2 }, effectKey: 'order-7' });
    expect(again.json['error']).toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', effectKey: 'caller/free.form/order-7' });
    const keyless = await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: { a: 2 } });
    expect(keyless.json).toMatchObject({ status: 'committed', effectKey: null });
  });

  it("the resource: the policy's template when it has one (another is 400); none claimed without one", async () => {
    const h = await harness();
    const templated = await h.call('POST', '/v1/actions', AGENT, { name: 'db.drop', arguments: { table: 'orders' } });
    expect(templated.json).toMatchObject({ status: 'committed', result: { dropped: 'orders', resource: 'table:orders' } });
    expect((await h.call('POST', '/v1/actions', AGENT, { name: 'db.drop', arguments: { table: 'orders' }, resource: 'table:orders' })).status).toBe(200);
    const other = await h.call('POST', '/v1/actions', AGENT, { name: 'db.drop', arguments: { table: 'orders' }, resource: 'table:users' });
    expect(other.status).toBe(400);
    expect(other.json['error']).toMatchObject({ path: '$.resource' });
    const before = await h.counts();
    const unresolvable = await h.call('POST', '/v1/actions', AGENT, { name: 'db.drop', arguments: {} });
    expect(unresolvable.status).toBe(400);
    expect(unresolvable.json['error']).toMatchObject({ path: '$.arguments', message: expect.stringContaining('table:{table}') });
    expect(await h.counts()).toEqual(before);
    // No resource: template: the claim would be the agent's word where a grant checks resources.
    const claimed = await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: {}, resource: 'db:orders' });
    expect(claimed.status).toBe(400);
    expect(claimed.json['error']).toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
      path: '$.resource',
      message: expect.stringContaining('free.form has no resource: template'),
    });
    expect(await h.counts()).toEqual(before);
    const bare = await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: {}, resource: null });
    expect(bare.status).toBe(200);
    expect(JSON.parse((await h.store.receipts()).at(-1)!.json!)).toMatchObject({ resource: null });
  });

  it('400 names the field for a bad body, and writes nothing', async () => {
    const h = await harness();
    const cases: [unknown, string][] = [
      [[], '$'],
      [{ arguments: {} }, '$.name'],
      [{ name: 'stripe.refund', arguments: [1] }, '$.arguments'],
      [{ name: 'stripe.refund', arguments: {}, approvalId: 7 }, '$.approvalId'],
      [{ name: 'stripe.refund', arguments: {}, extra: true }, '$["extra"]'],
      [{ name: 'stripe.refund', arguments: { payment_id: 'p', amount: 1, data_scope: ['pci'] } }, '$.arguments.data_scope'],
      ['{"name":"stripe.refund","arguments":{"list":[1,2,{"x":1e3}]}}', '$.arguments.list[2].x'],
      ['{"name":"stripe.refund","name":"x"}', '$.name'],
      ['{"name":"stripe.refund","arguments":{"a b":-0}}', '$.arguments["a b"]'],
    ];
    for (const [body, path] of cases) {
      const r = await h.call('POST', '/v1/actions', AGENT, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json['error'], JSON.stringify(body)).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', path });
    }
    expect(await h.counts()).toEqual({ events: 0, receipts: 0, effects: 0, approvals: 0 });
  });

  it('413 beyond the limit, also when the body is streamed without a length', async () => {
    const h = await harness({ bodyLimit: 1000 });
    const declared = await h.call('POST', '/v1/actions', AGENT, refund('p6', 1, { arguments: { payment_id: 'p6', amount: 1, pad: 'x'.repeat(2000) } }));
    expect(declared.status).toBe(413);
    const chunk = new TextEncoder().encode(' '.repeat(600));
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(chunk);
        controller.enqueue(chunk);
        controller.close();
      },
    });
    const streamed = await h.app.request('/v1/actions', {
      method: 'POST',
      headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect(await h.counts()).toEqual({ events: 0, receipts: 0, effects: 0, approvals: 0 });
  });

  it('415 for a body that is not application/json in UTF-8', async () => {
    const h = await harness();
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', 'application/jsonx']) {
      const r = await h.call('POST', '/v1/actions', AGENT, refund('p7', 1), { 'content-type': type });
      expect(r.status, type).toBe(415);
    }
    const missing = await h.app.request('/v1/actions', { method: 'POST', headers: { authorization: `Bearer ${AGENT}` }, body: new Uint8Array([123, 125]) });
    expect(missing.status).toBe(415);
    expect((await h.call('POST', '/v1/actions', AGENT, refund('p7', 1), { 'content-type': 'Application/JSON; charset=UTF-8' })).status).toBe(200);
  });
});

describe('a byte order mark', () => {
  it('at the start of a body is a 400 naming it, and writes nothing; inside a string it is data', async () => {
    const h = await harness();
    const json = new TextEncoder().encode(JSON.stringify(refund('bom1', 1)));
    const withBom = new Uint8Array([0xef, 0xbb, 0xbf, ...json]);
    const r = await h.app.request('/v1/actions', {
      method: 'POST',
      headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' },
      body: withBom,
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: unknown }).error).toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
      path: '$',
      message: expect.stringContaining('byte order mark'),
    });
    expect(await h.counts()).toEqual({ events: 0, receipts: 0, effects: 0, approvals: 0 });
    // Grant, deny and resolve read their bodies the same way.
    const resolve = await h.app.request('/v1/effects/x/resolve', {
      method: 'POST',
      headers: { authorization: `Bearer ${OPERATOR}`, 'content-type': 'application/json' },
      body: new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('{"state":"failed"}')]),
    });
    expect(resolve.status).toBe(400);
    const inside = await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: { note: '\uFEFFhello' } });
    expect(inside.status).toBe(200);
    expect(JSON.parse((await h.store.receipts()).at(-1)!.json!).arguments.note).toBe('\uFEFFhello');
  });
});

describe('approvals, effects and receipts (operator)', () => {
  it('lists approvals by status, with the action as the human must see it', async () => {
    const h = await harness();
    const asked = await h.call('POST', '/v1/actions', AGENT, refund('p8', 300000));
    const list = await h.call('GET', '/v1/approvals?status=pending', OPERATOR);
    const [shown] = list.json['approvals'] as Record<string, unknown>[];
    expect(shown).toMatchObject({
      requestId: asked.json['requestId'],
      status: 'pending',
      action: { name: 'stripe.refund', arguments: { amount: 300000, payment_id: 'p8' }, principal: { agent: 'billing-agent', user: 'u-42' } },
    });
    // The hashed text is shown, and it is what the hash covers.
    const action = shown!['action'] as { canonical: string; actionHash: string };
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(action.canonical)));
    expect(`sha256:${[...digest].map((b) => b.toString(16).padStart(2, '0')).join('')}`).toBe(action.actionHash);
    expect((await h.call('GET', '/v1/approvals?status=granted', OPERATOR)).json['approvals']).toEqual([]);
    expect((await h.call('GET', '/v1/approvals?status=maybe', OPERATOR)).status).toBe(400);
    expect(((await h.call('GET', '/v1/approvals', OPERATOR)).json['approvals'] as unknown[]).length).toBe(1);
  });

  it('grant and deny are recorded with the operator as the approver; answering twice is 409, an unknown id 404', async () => {
    const h = await harness();
    const a = String((await h.call('POST', '/v1/actions', AGENT, refund('p9', 300000))).json['requestId']);
    const b = String((await h.call('POST', '/v1/actions', AGENT, refund('p10', 300000))).json['requestId']);
    expect((await h.call('POST', `/v1/approvals/${a}/grant`, OPERATOR, {})).json['approval']).toMatchObject({ approver: 'human:ops', status: 'granted' });
    expect((await h.call('POST', `/v1/approvals/${b}/deny`, OPERATOR)).json['approval']).toMatchObject({ approver: 'human:ops', status: 'denied' });
    const twice = await h.call('POST', `/v1/approvals/${a}/deny`, OPERATOR);
    expect(twice.status).toBe(409);
    expect(twice.json['error']).toMatchObject({ code: 'ERR_APPROVAL_MISMATCH', reason: 'granted' });
    expect((await h.call('POST', '/v1/approvals/apr_missing/grant', OPERATOR)).status).toBe(404);
    expect((await h.call('POST', `/v1/approvals/${a}/grant`, OPERATOR, { approver: 'someone' })).status).toBe(400);
    const types = (await h.store.events()).map((e) => e.type);
    expect(types.filter((t) => t === 'APPROVAL_GRANTED' || t === 'APPROVAL_DENIED')).toEqual(['APPROVAL_GRANTED', 'APPROVAL_DENIED']);
    const presented = await h.call('POST', '/v1/actions', AGENT, refund('p10', 300000, { approvalId: b }));
    expect(presented.status).toBe(403);
    expect(presented.json['error']).toMatchObject({ reason: 'approval_denied' });
  });

  it('resolve: 404 for no record, 409 unless ambiguous, 400 for a bad state', async () => {
    const h = await harness();
    await h.call('POST', '/v1/actions', AGENT, refund('p11', 1));
    expect((await h.call('POST', '/v1/effects/refund:nope/resolve', OPERATOR, { state: 'failed' })).status).toBe(404);
    const settled = await h.call('POST', '/v1/effects/refund:p11/resolve', OPERATOR, { state: 'failed' });
    expect(settled.status).toBe(409);
    expect(settled.json['error']).toMatchObject({ state: 'committed' });
    expect((await h.call('POST', '/v1/effects/refund:p11/resolve', OPERATOR, { state: 'done' })).json['error']).toMatchObject({ path: '$.state' });
    expect((await h.call('GET', '/v1/effects/refund:nope', OPERATOR)).status).toBe(404);
    // Keys with a slash travel percent-encoded.
    await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: {}, effectKey: 'a/b c' });
    expect((await h.call('GET', `/v1/effects/${encodeURIComponent('caller/free.form/a/b c')}`, OPERATOR)).json['effect']).toMatchObject({
      effectKey: 'caller/free.form/a/b c',
      state: 'committed',
    });
  });

  it('pages receipts by seq, verifies the chain, and finds a receipt by id', async () => {
    const h = await harness();
    for (let i = 0; i < 5; i++) await h.call('POST', '/v1/actions', AGENT, refund(`q${i}`, 1));
    const first = await h.call('GET', '/v1/receipts?limit=2', OPERATOR);
    expect((first.json['receipts'] as { seq: number }[]).map((r) => r.seq)).toEqual([1, 2]);
    expect(first.json['next']).toBe(2);
    const last = await h.call('GET', '/v1/receipts?after=4&limit=2', OPERATOR);
    expect((last.json['receipts'] as { seq: number }[]).map((r) => r.seq)).toEqual([5]);
    expect(last.json['next']).toBeNull();
    for (const bad of ['limit=0', 'limit=1001', 'after=-1', 'limit=2.5', 'after=x'])
      expect((await h.call('GET', `/v1/receipts?${bad}`, OPERATOR)).status, bad).toBe(400);
    const verify = await h.call('GET', '/v1/receipts/verify', OPERATOR);
    expect(verify.json).toMatchObject({ ok: true, verified: 5, head_seq: 5, breaks: [] });
    const one = await h.call('GET', `/v1/receipts/${String((first.json['receipts'] as { receiptId: string }[])[1]!.receiptId)}`, OPERATOR);
    expect(one.json).toMatchObject({ seq: 2, receipt: { seq: 2, result: 'committed' } });
    expect((await h.call('GET', '/v1/receipts/ctr_missing', OPERATOR)).status).toBe(404);
  });

  it('reports a tampered chain as a break', async () => {
    const h = await harness();
    for (let i = 0; i < 2; i++) await h.call('POST', '/v1/actions', AGENT, refund(`t${i}`, 1));
    const driver = (h.store as unknown as { driver: { query(sql: string, params: unknown[]): Promise<unknown> } }).driver;
    await driver.query(`UPDATE receipts SET json = replace(json, '"amount":1', '"amount":9') WHERE seq = 1`, []);
    const verify = await h.call('GET', '/v1/receipts/verify', OPERATOR);
    expect(verify.json).toMatchObject({ ok: false, breaks: expect.arrayContaining([expect.objectContaining({ name: 'content_altered', seq: 1 })]) });
  });
});

describe('a custom authenticator (the shape a JWT provider fills)', () => {
  it('its principal, claims and issuer go onto the action; a principal the kernel refuses is 401', async () => {
    const h = await harness({
      auth: async (request) => {
        const who = request.headers.get('x-test-who');
        if (who === null) return null;
        return { role: 'agent', principal: { agent: who, user: 'u-7', claims: { tenant: 'acme' }, issuer: 'https://idp.example' } };
      },
    });
    const ok = await h.app.request('/v1/actions', {
      method: 'POST',
      headers: { 'x-test-who': 'jwt-agent', 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'free.form', arguments: {} }),
    });
    expect(ok.status).toBe(200);
    expect(JSON.parse((await h.store.receipts())[0]!.json!)).toMatchObject({
      principal: { agent: 'jwt-agent', user: 'u-7', claims: { tenant: 'acme' }, issuer: 'https://idp.example' },
    });
    const bad = await h.app.request('/v1/actions', {
      method: 'POST',
      headers: { 'x-test-who': '', 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'free.form', arguments: {} }),
    });
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/principal is not valid/);
    expect((await h.app.request('/v1/receipts')).status).toBe(401);
  });
});

describe('the playground route and CORS', () => {
  it('is 404 unless the app is in demo mode', async () => {
    const h = await harness();
    const r = await h.call('POST', '/v1/try-it/step', AGENT, { op: 'refund', payment_id: 'x', amount: 1 });
    expect(r.status).toBe(404);
  });

  it('an agent may only refund: approve and resolve (and anything else) need an operator; the operator resolves', async () => {
    const store = await createSqlJsStore();
    const h = await harness({ tryIt: createTryIt({ store }) });
    const lost = await h.call('POST', '/v1/try-it/step', AGENT, { op: 'refund', payment_id: 'txn_4', amount: 50000, lose_reply: true });
    expect([lost.status, lost.json['outcome']]).toEqual([200, 'reply_lost']);
    const before = (await store.events()).length;
    for (const body of [
      { op: 'resolve', effect_key: 'refund:txn_4', state: 'failed' },
      { op: 'approve', request_id: 'apr_x' },
      { op: 'Resolve' },
      { op: null },
    ]) {
      const r = await h.call('POST', '/v1/try-it/step', AGENT, body);
      expect([r.status, (r.json['error'] as { code: string }).code], JSON.stringify(body)).toEqual([403, 'ERR_FORBIDDEN']);
    }
    expect((await store.getEffect('refund:txn_4'))?.state).toBe('ambiguous');
    expect((await store.events()).length).toBe(before);
    const retry = await h.call('POST', '/v1/try-it/step', AGENT, { op: 'refund', payment_id: 'txn_4', amount: 50000 });
    expect([retry.json['outcome'], retry.json['remote_calls']]).toEqual(['ambiguous_retry', 1]);
    const resolved = await h.call('POST', '/v1/try-it/step', OPERATOR, { op: 'resolve', effect_key: 'refund:txn_4', state: 'committed' });
    expect([resolved.status, resolved.json['state']]).toEqual([200, 'committed']);
  });

  it('CORS answers only the configured origins', async () => {
    const h = await harness({ cors: { origins: ['https://ops.example'] } });
    const ok = await h.app.request('/v1/receipts', { method: 'OPTIONS', headers: { origin: 'https://ops.example', 'access-control-request-method': 'GET' } });
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://ops.example');
    const other = await h.app.request('/v1/receipts', {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' },
    });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('marks every answer no-store', async () => {
    const h = await harness();
    expect((await h.call('GET', '/healthz', null)).headers.get('cache-control')).toBe('no-store');
    expect((await h.call('GET', '/v1/receipts', OPERATOR)).headers.get('cache-control')).toBe('no-store');
  });
});
