/**
 * `GET /v1/openapi.json` describes what the server really sends: every response this suite
 * provokes (each route, each status it promises) is validated against the document's schema for
 * its path, method and status, with ajv's JSON Schema 2020-12 validator (OpenAPI 3.1's dialect).
 * A status the document does not list, a field it does not allow, or a required one missing fails.
 */
import Ajv2020 from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { createTryIt } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { Control, loadPolicy } from '@ctrlrun/kernel';
import { createApp, staticTokens } from '../../worker/src/index.js';
import { AGENT, harness, OPERATOR, testExecutors, type Harness } from './harness.js';
import { retentionExchanges } from './retention-exchanges.js';
import { budgetExchanges } from './budgets-exchanges.js';

const QUORUM_POLICY = 'schema: ctrlrun.policy/v6\nactions:\n  stripe.refund:\n    approvals_required: 2\n    decision: approve\n';

type Doc = { openapi: string; paths: Record<string, Record<string, { responses: Record<string, { content?: { 'application/json': { schema: unknown } } }> }>> };
interface Seen {
  method: string;
  path: string;
  status: number;
  json: unknown;
}

const pointer = (...parts: string[]): string => parts.map((p) => `/${p.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');

function operationOf(doc: Doc, method: string, path: string): { template: string; op: Doc['paths'][string][string] } {
  const pathname = new URL(path, 'http://x.invalid').pathname;
  for (const [template, item] of Object.entries(doc.paths)) {
    const re = new RegExp(`^${template.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`);
    const op = item[method.toLowerCase()];
    if (re.test(pathname) && op) return { template, op };
  }
  throw new Error(`the document has no operation for ${method} ${pathname}`);
}

/** Validates each seen response; returns the (template method status) triples covered. */
function validateAll(doc: Doc, seen: Seen[]): Set<string> {
  const ajv = new Ajv2020.default({ strict: false, allErrors: true });
  ajv.addSchema(doc as object, 'openapi.json');
  const covered = new Set<string>();
  for (const s of seen) {
    const { template, op } = operationOf(doc, s.method, s.path);
    const response = op.responses[String(s.status)];
    expect(response, `${s.method} ${s.path} answered ${s.status}, which the document does not list for ${template}`).toBeDefined();
    expect(response!.content?.['application/json'], `${template} ${s.status} has no JSON schema`).toBeDefined();
    const validate = ajv.getSchema(
      `openapi.json#${pointer('paths', template, s.method.toLowerCase(), 'responses', String(s.status), 'content', 'application/json', 'schema')}`,
    )!;
    const ok = validate(s.json);
    expect(ok, `${s.method} ${s.path} ${s.status}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(s.json).slice(0, 600)}`).toBe(true);
    covered.add(`${template} ${s.method} ${s.status}`);
  }
  return covered;
}

function recording(h: Harness, seen: Seen[]): Harness['call'] {
  return async (method, path, token, body, headers) => {
    const r = await h.call(method, path, token, body, headers);
    seen.push({ method, path, status: r.status, json: r.json });
    return r;
  };
}

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1, served without a credential, and every schema in it compiles', async () => {
    const h = await harness();
    const r = await h.call('GET', '/v1/openapi.json', null);
    expect(r.status).toBe(200);
    const doc = r.json as unknown as Doc;
    expect(doc.openapi).toBe('3.1.0');
    const ajv = new Ajv2020.default({ strict: false });
    ajv.addSchema(doc as object, 'openapi.json');
    for (const name of Object.keys((r.json['components'] as { schemas: object }).schemas))
      expect(ajv.getSchema(`openapi.json#/components/schemas/${name}`)).toBeTypeOf('function');
  });

  it('every real response of every route matches its schema, for each status the suite provokes', async () => {
    const seen: Seen[] = [];
    const h = await harness({ tryIt: createTryIt({ store: await createSqlJsStore() }), policyText: 'served yaml' });
    const call = recording(h, seen);
    const doc = (await call('GET', '/v1/openapi.json', null)).json as unknown as Doc;
    await call('GET', '/healthz', null);
    await call('GET', '/v1/policy', AGENT);
    await call('GET', '/v1/policy', null);
    // Actions: each outcome.
    await call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'o1', amount: 100 } });
    await call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'o1', amount: 100 } });
    // A `__proto__` argument is hashed, and the views must show it (the schema allows any key).
    const protoArgs = '{"payment_id":"o2","amount":200000,"__proto__":{"x":1}}';
    const asked = await call('POST', '/v1/actions', AGENT, `{"name":"stripe.refund","arguments":${protoArgs}}`);
    const asked2 = await call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'o3', amount: 300000 } });
    await call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'o4', amount: 99999999 } });
    await call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'c1', mode: 'refused' } });
    await call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'c2', mode: 'lost' } });
    await call('POST', '/v1/actions', AGENT, '{"name":"stripe.refund","arguments":{"amount":1.5}}');
    await call('POST', '/v1/actions', AGENT, 'x', { 'content-type': 'text/plain' });
    await call('POST', '/v1/actions', AGENT, JSON.stringify({ name: 'free.form', arguments: { pad: 'x'.repeat(70_000) } }));
    await call('POST', '/v1/actions', OPERATOR, { name: 'stripe.refund', arguments: {} });
    await call('POST', '/v1/actions', 'not-a-valid-token-at-all', { name: 'stripe.refund', arguments: {} });
    await call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'c9', mode: 'ok' } });
    // Approvals.
    await call('GET', '/v1/approvals?status=pending&limit=1', OPERATOR);
    await call('GET', '/v1/approvals?status=nope', OPERATOR);
    await call('GET', '/v1/approvals', AGENT);
    const id = String(asked.json['requestId']);
    await call('POST', `/v1/approvals/${id}/grant`, OPERATOR);
    await call('POST', `/v1/approvals/${id}/grant`, OPERATOR);
    await call('POST', `/v1/approvals/${id}/grant`, OPERATOR, { note: 1 });
    await call('POST', `/v1/approvals/apr_nothing/grant`, OPERATOR);
    await call('POST', `/v1/approvals/${id}/deny`, AGENT);
    await call('POST', `/v1/approvals/${String(asked2.json['requestId'])}/deny`, OPERATOR);
    await call('POST', `/v1/approvals/${String(asked2.json['requestId'])}/deny`, OPERATOR);
    await call('POST', `/v1/approvals/apr_nothing/deny`, OPERATOR);
    await call('POST', `/v1/approvals/${id}/deny`, OPERATOR, { x: 1 });
    await call('POST', '/v1/actions', AGENT, `{"name":"stripe.refund","arguments":${protoArgs},"approvalId":"${id}"}`);
    await call('POST', '/v1/actions', AGENT, `{"name":"stripe.refund","arguments":${protoArgs},"approvalId":"${id}"}`);
    await call('GET', '/v1/approvals?limit=1', OPERATOR);
    // Effects.
    await call('GET', `/v1/effects/${encodeURIComponent('refund:o1')}`, OPERATOR);
    await call('GET', `/v1/effects/nope`, OPERATOR);
    await call('GET', `/v1/effects/nope`, AGENT);
    await call('POST', `/v1/effects/${encodeURIComponent('refund:o1')}/resolve`, OPERATOR, { state: 'failed' });
    await call('POST', `/v1/effects/${encodeURIComponent('charge:c2')}/resolve`, OPERATOR, { state: 'sideways' });
    await call('POST', `/v1/effects/${encodeURIComponent('charge:c2')}/resolve`, OPERATOR, { state: 'committed' });
    await call('POST', `/v1/effects/nope/resolve`, OPERATOR, { state: 'committed' });
    await call('POST', `/v1/effects/nope/resolve`, AGENT, { state: 'committed' });
    // Receipts.
    const page = await call('GET', '/v1/receipts?limit=1', OPERATOR);
    await call('GET', `/v1/receipts?after=${String(page.json['next'])}`, OPERATOR);
    await call('GET', '/v1/receipts?limit=0', OPERATOR);
    await call('GET', '/v1/receipts', AGENT);
    await call('GET', '/v1/receipts/verify', OPERATOR);
    await call('GET', '/v1/receipts/verify', AGENT);
    const first = (page.json['receipts'] as { receiptId: string }[])[0]!.receiptId;
    await call('GET', `/v1/receipts/${first}`, OPERATOR);
    await call('GET', `/v1/receipts/ctr_nothing`, OPERATOR);
    await call('GET', `/v1/receipts/${first}`, AGENT);
    // The playground.
    await call('POST', '/v1/try-it/step', AGENT, { op: 'refund', payment_id: 't1', amount: 100 });
    await call('POST', '/v1/try-it/step', AGENT, { op: 'approve', request_id: 'x' });
    await call('POST', '/v1/try-it/step', null, { op: 'refund', payment_id: 't1', amount: 100 });
    await call('POST', '/v1/try-it/step', AGENT, []);
    // No credential, and the agent's credential, on every operator route.
    for (const [method, path] of [
      ['GET', '/v1/approvals'],
      ['POST', `/v1/approvals/${id}/grant`],
      ['POST', `/v1/approvals/${id}/deny`],
      ['GET', '/v1/effects/x'],
      ['POST', '/v1/effects/x/resolve'],
      ['GET', '/v1/receipts'],
      ['GET', '/v1/receipts/verify'],
      ['GET', `/v1/receipts/${first}`],
    ] as const) {
      await call(method, path, null, method === 'POST' ? {} : undefined);
      await call(method, path, AGENT, method === 'POST' ? {} : undefined);
    }
    // The pending-approvals limit.
    const limited = await harness({ maxPendingApprovals: 1 });
    for (const n of [1, 2]) {
      const r = await limited.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: `l${n}`, amount: 200000 } });
      seen.push({ method: 'POST', path: '/v1/actions', status: r.status, json: r.json });
    }
    // A request needing two verified approvers: the first operator's yes is counted (202).
    const quorum = createApp({
      control: new Control({
        policy: loadPolicy(QUORUM_POLICY),
        store: await createSqlJsStore(),
        approvers: { rolesClaim: 'roles' },
        logger: { warn: () => undefined },
      }),
      executors: testExecutors([]),
      auth: staticTokens([
        { role: 'agent', token: AGENT, agent: 'billing-agent' },
        { role: 'operator', token: OPERATOR, operator: 'human:ops' },
      ]),
    });
    const quorumCall = async (method: string, path: string, token: string, body?: unknown) => {
      const r = await quorum.request(path, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      const s = { method, path, status: r.status, json: (await r.json()) as unknown };
      seen.push(s);
      return s;
    };
    const two = (await quorumCall('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'q1', amount: 5 } })).json as {
      requestId: string;
    };
    expect((await quorumCall('POST', `/v1/approvals/${two.requestId}/grant`, OPERATOR)).status).toBe(202);
    await quorumCall('GET', '/v1/approvals?status=pending', OPERATOR);

    expect(seen.filter((s) => s.path === '/v1/actions').map((s) => s.status)).toContain(200);
    const pendingView = seen.find((s) => s.path.startsWith('/v1/approvals?status=pending'))!.json as { approvals: { action: { arguments: object } }[] };
    expect(Object.keys(pendingView.approvals[0]!.action.arguments)).toContain('__proto__');
    // Retention and anchors: every status they document.
    seen.push(...(await retentionExchanges()));
    seen.push(...(await budgetExchanges()));
    const covered = validateAll(doc, seen);
    // Every operation and every status the document lists was provoked (401/403 where a route has them).
    const listed = Object.entries(doc.paths).flatMap(([t, item]) =>
      Object.entries(item).flatMap(([m, op]) => Object.keys(op.responses).map((s) => `${t} ${m.toUpperCase()} ${s}`)),
    );
    expect(listed.filter((l) => !covered.has(l))).toEqual([]);
  }, 120_000);

  it('lists only the routes that answer: the playground route and its schemas only in demo mode', async () => {
    const off = await harness();
    const doc = (await off.call('GET', '/v1/openapi.json', null)).json as unknown as Doc & { components: { schemas: Record<string, unknown> } };
    expect(Object.keys(doc.paths)).not.toContain('/v1/try-it/step');
    expect(Object.keys(doc.components.schemas).filter((n) => n.startsWith('TryIt'))).toEqual([]);
    // The route it leaves out does not answer.
    expect((await off.call('POST', '/v1/try-it/step', AGENT, { op: 'refund', payment_id: 't', amount: 1 })).status).toBe(404);
    // No $ref in what is left points at a schema that is not there.
    const refs = [...JSON.stringify(doc).matchAll(/"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.filter((r) => !(r in doc.components.schemas))).toEqual([]);

    const on = await harness({ tryIt: createTryIt({ store: await createSqlJsStore() }) });
    const onDoc = (await on.call('GET', '/v1/openapi.json', null)).json as unknown as Doc & { components: { schemas: Record<string, unknown> } };
    expect(Object.keys(onDoc.paths)).toContain('/v1/try-it/step');
    expect(Object.keys(onDoc.paths['/v1/try-it/step']!['post']!.responses)).toEqual(['200', '400', '401', '403']);
    expect(Object.keys(onDoc.components.schemas)).toEqual(expect.arrayContaining(['TryItStep', 'TryItResult']));
    expect(Object.keys(onDoc.paths).filter((p) => p !== '/v1/try-it/step')).toEqual(Object.keys(doc.paths));
  });

  it('a response the document does not describe is caught (the check can fail)', async () => {
    const h = await harness();
    const doc = (await h.call('GET', '/v1/openapi.json', null)).json as unknown as Doc;
    expect(() => validateAll(doc, [{ method: 'GET', path: '/healthz', status: 200, json: { ok: true, extra: 1 } }])).toThrow(
      /must NOT have additional properties/,
    );
    expect(() => validateAll(doc, [{ method: 'POST', path: '/v1/actions', status: 200, json: { status: 'committed' } }])).toThrow(
      /must have required property/,
    );
    expect(() => validateAll(doc, [{ method: 'GET', path: '/healthz', status: 418, json: {} }])).toThrow(/does not list/);
  });
});
