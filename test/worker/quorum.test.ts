// Two-person approvals on the worker (spec 05 §4): operators' credentials (static tokens, JWTs
// with roles from a configured claim) are resolving surfaces, so their answers are verified
// approvers'; the API and the inbox say "1 of 2 approvals: ana", refuse a second yes by the same
// person, and the requester's own verified yes is refused when the approval is presented.
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { describe, expect, it } from 'vitest';
import { Control, loadPolicy, sequentialIds } from '@ctrlrun/kernel';
import { createJwtIdentityProvider } from '@ctrlrun/kernel/jwt';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { anyOf, createApp, identityProviderAuth, identityProviderOperators, loadWorkerSettings, staticTokens } from '../../worker/src/index.js';
import { createConfiguredApp } from '../../worker/src/configured.js';

const POLICY = `schema: ctrlrun.policy/v6
controls:
  refund-limit: {title: Refunds above the limit, approver_role: finance}
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    approvals_required: 2
    controls: [refund-limit]
    decision: approve
`;
const AGENT = 'agent-token-for-quorum-tests-1';
const ANA = 'operator-token-of-ana-for-tests';
const BO = 'operator-token-of-bo-for-tests-';
const CY = 'operator-token-of-cy-no-roles--';
const ISSUER = 'https://idp.example';
const keys = await generateKeyPair('ES256', { extractable: true });
const now = Math.floor(Date.now() / 1000);
const jwt = (claims: Record<string, unknown>) =>
  new SignJWT({ iss: ISSUER, aud: 'ctrlrun-operators', exp: now + 300, ...claims }).setProtectedHeader({ alg: 'ES256', typ: 'JWT' }).sign(keys.privateKey);

async function app() {
  const store = await createSqlJsStore();
  const control = new Control({
    policy: loadPolicy(POLICY),
    store,
    ids: sequentialIds(),
    logger: { warn: () => undefined },
    approvers: { rolesClaim: 'roles' },
  });
  const operators = await createJwtIdentityProvider({
    publicKey: await exportSPKI(keys.publicKey),
    algorithms: ['ES256'],
    issuer: ISSUER,
    audience: 'ctrlrun-operators',
    tokenType: 'jwt',
    userClaim: 'email',
    claimNames: ['roles'],
    logger: { warn() {} },
  });
  const auth = anyOf(
    staticTokens([
      { role: 'agent', token: AGENT, agent: 'billing-agent', user: 'riley@example.com' },
      { role: 'operator', token: ANA, operator: 'ana', roles: ['finance'] },
      { role: 'operator', token: BO, operator: 'bo', roles: ['finance'] },
      { role: 'operator', token: CY, operator: 'cy' },
    ]),
    identityProviderOperators(operators, { environment: 'production' }),
  );
  const calls: string[] = [];
  const a = createApp({ control, auth, executors: { 'stripe.refund': (args) => (calls.push(String(args['payment_id'])), { ok: true }) } });
  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const r = await a.request(path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: r.status, json: (await r.json()) as Record<string, unknown> };
  };
  const propose = async (payment_id: string, approvalId?: string) =>
    call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id, amount: 5000 }, ...(approvalId ? { approvalId } : {}) });
  return { app: a, store, control, calls, call, propose };
}

describe('two-person approvals through the worker API', () => {
  it('static operator tokens are verified approvers: 202 "1 of 2 approvals: ana", the same person again is refused, the second person grants, the action runs once', async () => {
    const w = await app();
    const asked = await w.propose('p1');
    expect(asked.status).toBe(202);
    const id = String(asked.json['requestId']);
    const first = await w.call('POST', `/v1/approvals/${id}/grant`, ANA);
    expect(first.status).toBe(202);
    expect(first.json['approval']).toMatchObject({ status: 'pending', approvalsRequired: 2, progress: '1 of 2 approvals: ana' });
    expect((first.json['approval'] as { approvers: unknown[] }).approvers).toEqual([
      { agent: 'operator', user: 'ana', issuer: 'ctrlrun-worker:token', entitled: ['refund-limit'], grantedAt: expect.any(String) },
    ]);
    const again = await w.call('POST', `/v1/approvals/${id}/grant`, ANA);
    expect(again.status).toBe(409);
    expect(JSON.stringify(again.json)).toContain('already approved it');
    expect((await w.propose('p1', id)).status).toBe(409);
    expect(w.calls).toEqual([]);
    const listed = await w.call('GET', '/v1/approvals?status=pending', ANA);
    expect((listed.json['approvals'] as { progress: string }[])[0]!.progress).toBe('1 of 2 approvals: ana');
    const second = await w.call('POST', `/v1/approvals/${id}/grant`, BO);
    expect(second.status).toBe(200);
    const ran = await w.propose('p1', id);
    expect(ran.status).toBe(200);
    expect(w.calls).toEqual(['p1']);
    const receipt = JSON.parse((await w.store.receipts()).at(-1)!.json!) as { approvers: { user: string }[] };
    expect(receipt.approvers.map((x) => x.user)).toEqual(['ana', 'bo']);
  });

  it('an operator without the role counts, and is refused when the approval is presented (approver_unentitled)', async () => {
    const w = await app();
    const id = String((await w.propose('p2')).json['requestId']);
    expect((await w.call('POST', `/v1/approvals/${id}/grant`, ANA)).status).toBe(202);
    expect((await w.call('POST', `/v1/approvals/${id}/grant`, CY)).status).toBe(200);
    const refused = await w.propose('p2', id);
    expect(refused.status).toBe(409);
    expect(JSON.stringify(refused.json)).toContain('approver_unentitled');
    expect(w.calls).toEqual([]);
  });

  it('JWT operators: roles from the configured claim; the requester answering through its own identity is refused at consumption', async () => {
    const w = await app();
    const id = String((await w.propose('p3')).json['requestId']);
    const dee = await jwt({ sub: 'inbox', email: 'dee@example.com', roles: ['finance'] });
    const riley = await jwt({ sub: 'billing-agent', email: 'riley@example.com', roles: ['finance'] });
    const first = await w.call('POST', `/v1/approvals/${id}/grant`, dee);
    expect(first.json['approval']).toMatchObject({ progress: '1 of 2 approvals: dee@example.com' });
    expect((first.json['approval'] as { approvers: { issuer: string; entitled: string[] }[] }).approvers[0]).toMatchObject({
      issuer: ISSUER,
      entitled: ['refund-limit'],
    });
    expect((await w.call('POST', `/v1/approvals/${id}/grant`, riley)).status).toBe(200);
    const refused = await w.propose('p3', id);
    expect(refused.status).toBe(409);
    expect(JSON.stringify(refused.json)).toContain('approver_is_requester');
    expect(w.calls).toEqual([]);
  });

  it('an agent JWT provider still yields agents only (identityProviderAuth unchanged)', async () => {
    const provider = await createJwtIdentityProvider({
      publicKey: await exportSPKI(keys.publicKey),
      algorithms: ['ES256'],
      issuer: ISSUER,
      audience: 'ctrlrun-operators',
      tokenType: 'jwt',
      logger: { warn() {} },
    });
    const who = await identityProviderAuth(provider, { environment: 'production' })(
      new Request('http://x/', { headers: { authorization: `Bearer ${await jwt({ sub: 'a' })}` } }),
    );
    expect(who?.role).toBe('agent');
  });
});

describe('two-person approvals through the inbox', () => {
  async function signedIn(w: Awaited<ReturnType<typeof app>>, token: string) {
    const r = await w.app.request('http://inbox.test/inbox/login', { method: 'POST', body: new URLSearchParams({ token }) });
    const cookie = r.headers.get('set-cookie')!.split(';')[0]!;
    const html = await (await w.app.request('http://inbox.test/inbox', { headers: { cookie } })).text();
    return { cookie, csrf: /name="csrf" value="([^"]+)"/.exec(html)![1]! };
  }
  const post = (w: Awaited<ReturnType<typeof app>>, path: string, s: { cookie: string; csrf: string }) =>
    w.app.request(`http://inbox.test${path}`, {
      method: 'POST',
      headers: { cookie: s.cookie, origin: 'http://inbox.test' },
      body: new URLSearchParams({ csrf: s.csrf }),
    });

  it('the session is a verified approver: "1 of 2 approvals: ana" on the page, the same person again refused, the second person grants', async () => {
    const w = await app();
    const id = String((await w.propose('p4')).json['requestId']);
    const ana = await signedIn(w, ANA);
    const first = await (await post(w, `/inbox/approvals/${id}/grant`, ana)).text();
    expect(first).toContain('Your approval is recorded: 1 of 2 approvals: ana so far');
    expect(first).toContain('<dt>Approvals</dt><dd data-progress>1 of 2 approvals: ana</dd>');
    const again = await (await post(w, `/inbox/approvals/${id}/grant`, ana)).text();
    expect(again).toContain('Not approved: ');
    expect(again).toContain('already approved it');
    const bo = await signedIn(w, BO);
    expect((await post(w, `/inbox/approvals/${id}/grant`, bo)).status).toBe(303);
    expect((await w.store.getApproval(id))?.status).toBe('granted');
    expect((await w.propose('p4', id)).status).toBe(200);
    expect(w.calls).toEqual(['p4']);
  });
});

describe('the worker config declares it', () => {
  it('approvers: { rolesClaim } and operator roles: the configured app counts two operators and runs once', async () => {
    const config = `approvers: { rolesClaim: roles }
executors:
  stripe.refund: { http: { url: "http://127.0.0.1:1/" } }
tokens:
  agents: [{ token: { env: T_AGENT }, agent: billing-agent }]
  operators:
    - { token: { env: T_ANA }, operator: ana, roles: [finance] }
    - { token: { env: T_BO }, operator: bo, roles: [finance] }
`;
    const env = { T_AGENT: AGENT, T_ANA: ANA, T_BO: BO, CTRLRUN_POLICY: POLICY, CTRLRUN_CONFIG: config };
    const settings = await loadWorkerSettings(env, { generate: false });
    expect(settings.approvers).toEqual({ rolesClaim: 'roles' });
    const { app: a } = createConfiguredApp(settings, { store: await createSqlJsStore() });
    const call = async (path: string, token: string, body?: unknown) =>
      a.request(path, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const asked = (await (await call('/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'c1', amount: 1 } })).json()) as {
      requestId: string;
    };
    const first = await call(`/v1/approvals/${asked.requestId}/grant`, ANA);
    expect(first.status).toBe(202);
    expect(((await first.json()) as { approval: { progress: string; approvers: { entitled: string[] }[] } }).approval).toMatchObject({
      progress: '1 of 2 approvals: ana',
      approvers: [{ entitled: ['refund-limit'] }],
    });
    expect((await call(`/v1/approvals/${asked.requestId}/grant`, BO)).status).toBe(200);
    // Without approvers: the threshold is denied before anyone is asked, as before.
    const plain = await loadWorkerSettings({ ...env, CTRLRUN_CONFIG: config.replace('approvers: { rolesClaim: roles }\n', '') }, { generate: false });
    const { app: b } = createConfiguredApp(plain, { store: await createSqlJsStore() });
    const denied = await b.request('/v1/actions', {
      method: 'POST',
      headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'stripe.refund', arguments: { payment_id: 'c2', amount: 1 } }),
    });
    expect(JSON.stringify(await denied.json())).toContain('approvals_unverifiable');
    await expect(
      loadWorkerSettings(
        { ...env, CTRLRUN_CONFIG: `${config}\napprovers: { roles: x }\n`.replace('approvers: { rolesClaim: roles }\n', '') },
        { generate: false },
      ),
    ).rejects.toThrow(/approvers/);
  });
});

describe('edit-then-approve through the worker records the verified editor', () => {
  it('an operator edit on a one-approver request with approvers configured runs the edit (the editor is its verified approver)', async () => {
    const store = await createSqlJsStore();
    const policy = 'schema: ctrlrun.policy/v6\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    decision: approve\n';
    const control = new Control({
      policy: loadPolicy(policy),
      store,
      ids: sequentialIds(),
      logger: { warn: () => undefined },
      approvers: { rolesClaim: 'roles' },
    });
    const calls: unknown[] = [];
    const a = createApp({
      control,
      auth: staticTokens([
        { role: 'agent', token: AGENT, agent: 'billing-agent' },
        { role: 'operator', token: ANA, operator: 'ana' },
      ]),
      executors: { 'stripe.refund': (args) => (calls.push(args['amount']), { ok: true }) },
    });
    const post = async (path: string, token: string, body?: unknown) =>
      a.request(path, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const asked = (await (await post('/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'e1', amount: 900 } })).json()) as {
      requestId: string;
    };
    expect((await post(`/v1/approvals/${asked.requestId}/grant`, ANA, { edit: { arguments: { payment_id: 'e1', amount: 500 } } })).status).toBe(200);
    const ran = await post('/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'e1', amount: 900 }, approvalId: asked.requestId });
    expect(ran.status).toBe(200);
    expect(calls).toEqual([500]);
  });
});
