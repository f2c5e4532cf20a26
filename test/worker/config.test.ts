/**
 * The worker serves a user's own policy and tools: a config document (YAML or JSON) checked with
 * errors naming the key path, the policy from a file or a variable with its hash printed and
 * served, HTTP forwarders to a real local upstream (counted), module executors on Node, and a
 * banner that names every action without an executor.
 */
import { spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgument } from '@ctrlrun/kernel';
import { loadWorkerSettings, parseWorkerConfig } from '../../worker/src/index.js';
import { NODE_RUNTIME, startNodeWorker, type NodeWorker } from '../../worker/src/runtime/node.js';
// @ts-expect-error a plain .mjs example without types
import { startFakeUpstream } from '../../examples/worker/fake-upstream.mjs';
import { root } from './bundle.js';

interface Upstream {
  url: string;
  calls(): number;
  refunds: Map<string, { authorization: string | null }>;
  close(): Promise<void>;
}

const ROOT_EXAMPLES = join(root, 'examples');
const AGENT = 'agent-token-for-config-tests';
const OPERATOR = 'operator-token-for-config-test';
const ENV = { CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR, UPSTREAM_TOKEN: 'upstream-secret' };
const example = join(root, 'examples', 'worker');

/** The example, copied with its upstream URL pointed at `upstreamUrl`. */
async function exampleCopy(upstreamUrl: string, edit: (text: string) => string = (t) => t): Promise<{ dir: string; config: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'ctrlrun-config-'));
  await mkdir(join(dir, 'worker'));
  for (const f of ['policy.yaml', 'tools.mjs']) await copyFile(join(example, f), join(dir, 'worker', f));
  const text = (await readFile(join(ROOT_EXAMPLES, 'worker.yaml'), 'utf8')).replace('http://127.0.0.1:8788', upstreamUrl);
  await writeFile(join(dir, 'worker.yaml'), edit(text));
  return { dir, config: join(dir, 'worker.yaml') };
}

async function call(url: string, token: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

describe('the config document', () => {
  const refused = (text: string, pattern: RegExp): void => {
    expect(() => parseWorkerConfig(text, 'w.yaml')).toThrow(InvalidArgument);
    expect(() => parseWorkerConfig(text, 'w.yaml')).toThrow(pattern);
  };

  it('names the key path of what is wrong', () => {
    refused('polcy: ./p.yaml\n', /^w\.yaml: polcy: unknown key/);
    refused('- 1\n', /^w\.yaml: the document must be a mapping, got a list/);
    refused('executors:\n  a.b:\n    http: { url: "ftp://x" }\n', /w\.yaml: executors\["a\.b"\]\.http\.url: "ftp:\/\/x" is not an absolute http\(s\) URL/);
    refused(
      'executors:\n  a.b:\n    http: { url: "http://x", headers: { authorization: "Bearer s3cret" } }\n',
      /executors\["a\.b"\]\.http\.headers\.authorization: .*never the secret itself/,
    );
    refused(
      'executors:\n  a.b:\n    http: { url: "http://x", headers: { Idempotency-Key: "x" } }\n',
      /headers\["Idempotency-Key"\]: is set by the forwarder itself/,
    );
    refused('executors:\n  a.b:\n    http: { url: "http://x", timeoutMs: 0 }\n', /http\.timeoutMs: must be a whole number from 1 to 600000, got number 0/);
    refused(
      'executors:\n  a.b:\n    http: { url: "http://x", notExecutedStatuses: [200] }\n',
      /notExecutedStatuses\[0\]: must be a whole number from 300 to 599/,
    );
    refused('executors:\n  a.b: { http: { url: "http://x" }, module: ./t.mjs }\n', /executors\["a\.b"\]: declare exactly one of/);
    refused('tokens:\n  agents: [{ token: abc, agent: a }]\n  operators: []\n', /tokens\.agents\[0\]\.token: must name the variable/);
    refused('tokens:\n  agents: [{ token: { env: A }, agent: a }]\n', /tokens\.operators: must list at least one operator/);
    refused('jwt: { issuer: i, audience: a, algorithms: [ES256] }\n', /jwt: give exactly one of jwksUrl/);
    refused('policy: a\npolicy: b\n', /w\.yaml \(line \d\): not a valid YAML or JSON document/);
    refused('demo: maybe\n', /demo: must be on or off/);
  });

  it('reads JSON as well as YAML, and an empty document is no configuration', () => {
    const c = parseWorkerConfig('{"policy": {"yaml": "schema: ctrlrun.policy/v2\\nactions: {}\\n"}, "executors": {"x.y": {"module": "./t.mjs"}}}', 'w.json');
    expect(c.policy).toEqual({ yaml: 'schema: ctrlrun.policy/v2\nactions: {}\n' });
    expect(c.executors.get('x.y')).toEqual({ kind: 'module', module: './t.mjs', export: 'default' });
    expect(parseWorkerConfig('', 'empty')).toMatchObject({ policy: null, tokens: null, jwt: null });
  });

  it('any text is either a config or an InvalidArgument, never another error', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json(), fc.constantFrom('executors: {a: {http: {url: 1}}}', 'tokens: [1]', '- 1', '__proto__: 1')), (text) => {
        try {
          parseWorkerConfig(text, 'fuzz');
        } catch (err) {
          expect(err).toBeInstanceOf(InvalidArgument);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('an executor for an action the policy does not list is refused; a header secret must be set', async () => {
    const policy = 'schema: ctrlrun.policy/v2\nactions:\n  a.run:\n    decision: allow\n';
    await expect(
      loadWorkerSettings(
        { ...ENV, CTRLRUN_POLICY: policy, CTRLRUN_CONFIG: 'executors:\n  a.rnu:\n    http: { url: "http://127.0.0.1:1/" }\n' },
        { generate: false },
      ),
    ).rejects.toThrow(/CTRLRUN_CONFIG: executors\["a\.rnu"\]: the policy \(CTRLRUN_POLICY\) has no action "a\.rnu"/);
    await expect(
      loadWorkerSettings(
        {
          ...ENV,
          CTRLRUN_POLICY: policy,
          CTRLRUN_CONFIG: 'executors:\n  a.run:\n    http: { url: "http://127.0.0.1:1/", headers: { x-key: { env: NOT_SET_ANYWHERE } } }\n',
        },
        { generate: false },
      ),
    ).rejects.toThrow(/x-key: the variable NOT_SET_ANYWHERE is not set/);
    await expect(loadWorkerSettings({ ...ENV, CTRLRUN_POLICY: policy, CTRLRUN_POLICY_FILE: '/x.yaml' }, { generate: false })).rejects.toThrow(
      /both CTRLRUN_POLICY and CTRLRUN_POLICY_FILE/,
    );
    await expect(
      loadWorkerSettings({ ...ENV, CTRLRUN_POLICY: policy, CTRLRUN_CONFIG: 'executors:\n  a.run: { module: ./t.mjs }\n' }, { generate: false }),
    ).rejects.toThrow(/this runtime cannot import modules/);
    await expect(loadWorkerSettings({ ...ENV, CTRLRUN_POLICY: 'schema: nope\n' }, { generate: false })).rejects.toThrow(/CTRLRUN_POLICY/);
  });

  it('a header secret with a line break is refused at start, naming the variable and never its value', async () => {
    const policy = 'schema: ctrlrun.policy/v2\nactions:\n  a.run:\n    decision: allow\n';
    const config = 'executors:\n  a.run:\n    http: { url: "http://127.0.0.1:1/", headers: { authorization: { env: UP_KEY } } }\n';
    const err = await loadWorkerSettings({ ...ENV, UP_KEY: 'abc\r\nX-Injected: 1', CTRLRUN_POLICY: policy, CTRLRUN_CONFIG: config }, { generate: false }).then(
      () => new Error('accepted'),
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(InvalidArgument);
    expect(err.message).toMatch(/headers\.authorization: the variable UP_KEY holds a character a header cannot carry/);
    expect(err.message).not.toContain('abc');
    // An executor named __proto__ is a name like any other: the policy lists no such action.
    await expect(
      loadWorkerSettings(
        { ...ENV, CTRLRUN_POLICY: policy, CTRLRUN_CONFIG: 'executors:\n  __proto__:\n    http: { url: "http://127.0.0.1:1/" }\n' },
        { generate: false },
      ),
    ).rejects.toThrow(/executors\.__proto__: the policy \(CTRLRUN_POLICY\) has no action "__proto__"/);
  });

  it('JWT settings from the config: agents present a signed token (its key from a variable); operators keep their static token', async () => {
    const { SignJWT, exportSPKI, generateKeyPair } = await import('jose');
    const keys = await generateKeyPair('ES256', { extractable: true });
    const policy = 'schema: ctrlrun.policy/v2\nactions:\n  a.run:\n    decision: allow\n';
    const config = 'jwt:\n  issuer: https://idp.example\n  audience: ctrlrun\n  algorithms: [ES256]\n  publicKey: { env: JWT_KEY }\n  claimNames: [team]\n';
    const s = await loadWorkerSettings(
      { ...ENV, JWT_KEY: await exportSPKI(keys.publicKey), CTRLRUN_POLICY: policy, CTRLRUN_CONFIG: config },
      { generate: false },
    );
    const token = await new SignJWT({ team: 'payments' })
      .setProtectedHeader({ alg: 'ES256', typ: 'JWT' })
      .setIssuer('https://idp.example')
      .setAudience('ctrlrun')
      .setSubject('jwt-agent')
      .setExpirationTime('5m')
      .sign(keys.privateKey);
    const who = await s.auth(new Request('http://x.invalid/', { headers: { authorization: `Bearer ${token}` } }));
    expect(who).toMatchObject({ role: 'agent', principal: { agent: 'jwt-agent', claims: { team: 'payments' }, issuer: 'https://idp.example' } });
    expect(await s.auth(new Request('http://x.invalid/', { headers: { authorization: `Bearer ${OPERATOR}` } }))).toEqual({
      role: 'operator',
      operator: 'human:operator',
      // The credential verifies the operator: its answers are a verified approver's (spec 05 §4.1).
      verified: { agent: 'operator', user: 'human:operator', issuer: 'ctrlrun-worker:token', claims: null },
    });
    expect(s.agents).toContain('JWT from https://idp.example');
    await expect(loadWorkerSettings({ ...ENV, CTRLRUN_POLICY: policy, CTRLRUN_CONFIG: config }, { generate: false })).rejects.toThrow(
      /jwt\.publicKey: the variable JWT_KEY is not set/,
    );
  });

  it('operatorJwt: operators present JWTs of their own audience; their roles claim reaches the verified approver; an agent JWT never answers and an operator JWT never proposes', async () => {
    const { SignJWT, exportSPKI, generateKeyPair } = await import('jose');
    const keys = await generateKeyPair('ES256', { extractable: true });
    const policy = 'schema: ctrlrun.policy/v2\nactions:\n  a.run:\n    decision: allow\n';
    const idp = (audience: string, claims = '') =>
      `  issuer: https://idp.example\n  audience: ${audience}\n  algorithms: [ES256]\n  publicKey: { env: JWT_KEY }\n  userClaim: sub\n${claims}`;
    const config = `jwt:\n${idp('ctrlrun')}operatorJwt:\n${idp('ctrlrun-operators', '  claimNames: [roles]\n')}approvers:\n  rolesClaim: roles\n`;
    const env = { ...ENV, JWT_KEY: await exportSPKI(keys.publicKey), CTRLRUN_POLICY: policy, CTRLRUN_CONFIG: config };
    const s = await loadWorkerSettings(env, { generate: false });
    const sign = (audience: string, subject: string, claims: Record<string, unknown> = {}) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', typ: 'JWT' })
        .setIssuer('https://idp.example')
        .setAudience(audience)
        .setSubject(subject)
        .setExpirationTime('5m')
        .sign(keys.privateKey);
    const as = async (token: string) => s.auth(new Request('http://x.invalid/', { headers: { authorization: `Bearer ${token}` } }));
    expect(await as(await sign('ctrlrun-operators', 'ana', { roles: ['finance'] }))).toEqual({
      role: 'operator',
      operator: 'ana',
      verified: { agent: 'ana', user: 'ana', issuer: 'https://idp.example', claims: { roles: ['finance'] } },
    });
    expect(await as(await sign('ctrlrun', 'refund-agent'))).toMatchObject({ role: 'agent', principal: { agent: 'refund-agent' } });
    expect(s.operators).toContain('JWT from https://idp.example');
    // The same issuer and audience for both would make one token both: refused.
    await expect(loadWorkerSettings({ ...env, CTRLRUN_CONFIG: `jwt:\n${idp('ctrlrun')}operatorJwt:\n${idp('ctrlrun')}` }, { generate: false })).rejects.toThrow(
      /operatorJwt: must differ from jwt: in audience or issuer/,
    );
    // Roles that could never arrive: refused at start, naming the claim.
    await expect(
      loadWorkerSettings({ ...env, CTRLRUN_CONFIG: `operatorJwt:\n${idp('ctrlrun-operators')}approvers:\n  rolesClaim: roles\n` }, { generate: false }),
    ).rejects.toThrow(/operatorJwt\.claimNames: must include the roles claim "roles"/);
    await expect(
      loadWorkerSettings({ ...env, CTRLRUN_CONFIG: `operatorJwt:\n${idp('ctrlrun-operators').replace(/  publicKey.*\n/, '')}` }, { generate: false }),
    ).rejects.toThrow(/operatorJwt: give exactly one of jwksUrl/);
  });

  it('CTRLRUN_POLICY_FILE is read; actions that can run but have no executor are listed (never-run deny actions are not)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ctrlrun-policy-'));
    try {
      await writeFile(
        join(dir, 'p.yaml'),
        'schema: ctrlrun.policy/v2\nactions:\n  a.run:\n    decision: allow\n  b.wait:\n    decision: approve\n  c.never:\n    decision: deny\n',
      );
      const s = await loadWorkerSettings({ ...ENV, CTRLRUN_POLICY_FILE: join(dir, 'p.yaml') }, { generate: false, runtime: NODE_RUNTIME });
      expect(s.policySource).toBe(join(dir, 'p.yaml'));
      expect(s.missing).toEqual(['a.run', 'b.wait']);
      expect(s.demo).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('npm run worker -- --config examples/worker.yaml, against a real upstream', () => {
  let upstream: Upstream;
  let copy: { dir: string; config: string };
  let worker: NodeWorker;
  const printed: string[] = [];

  beforeAll(async () => {
    upstream = (await startFakeUpstream(0)) as Upstream;
    copy = await exampleCopy(upstream.url);
    worker = await startNodeWorker({ env: ENV, configPath: copy.config, port: 0, print: (t) => printed.push(t) });
  }, 120_000);
  afterAll(async () => {
    await worker?.close();
    await upstream?.close();
    if (copy) await rm(copy.dir, { recursive: true, force: true });
  });

  it('prints the policy hash it serves, and GET /v1/policy serves the same policy', async () => {
    const banner = printed.join('\n');
    const r = await call(worker.url, AGENT, 'GET', '/v1/policy');
    expect(r.status).toBe(200);
    expect(r.json['policyHash']).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(banner).toContain(`hash:     ${String(r.json['policyHash'])}`);
    expect(banner).toContain(`billing.refund → http POST ${upstream.url}/refunds`);
    expect(banner).toContain('billing.lookup → module ./worker/tools.mjs#lookup');
    expect(banner).not.toContain('WARNING');
    expect(r.json['yaml']).toBe(await readFile(join(example, 'policy.yaml'), 'utf8'));
    expect(r.json['actions']).toEqual([
      { name: 'billing.lookup', executor: true },
      { name: 'billing.refund', executor: true },
      { name: 'billing.close_account', executor: false },
    ]);
    expect((await fetch(`${worker.url}/v1/policy`)).status).toBe(401);
  });

  it('forwards an allowed refund once with the secret header; a retry is a duplicate and never reaches the upstream', async () => {
    const before = upstream.calls();
    const first = await call(worker.url, AGENT, 'POST', '/v1/actions', { name: 'billing.refund', arguments: { payment_id: 'p_1', amount: 500 } });
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      status: 'committed',
      effectKey: 'refund:p_1',
      result: { status: 200, body: { id: 're_p_1', amount: 500, status: 'succeeded' } },
    });
    expect(upstream.refunds.get('refund:p_1')?.authorization).toBe('Bearer upstream-secret');
    const again = await call(worker.url, AGENT, 'POST', '/v1/actions', { name: 'billing.refund', arguments: { payment_id: 'p_1', amount: 500 } });
    expect(again.status).toBe(409);
    expect(upstream.calls() - before).toBe(1);
  });

  it('an approved refund runs once after the grant; the module tool runs in-process; a denied action never runs', async () => {
    const before = upstream.calls();
    const asked = await call(worker.url, AGENT, 'POST', '/v1/actions', { name: 'billing.refund', arguments: { payment_id: 'p_2', amount: 20000 } });
    expect(asked.status).toBe(202);
    expect(upstream.calls()).toBe(before);
    expect((await call(worker.url, OPERATOR, 'POST', `/v1/approvals/${String(asked.json['requestId'])}/grant`)).status).toBe(200);
    const run = await call(worker.url, AGENT, 'POST', '/v1/actions', {
      name: 'billing.refund',
      arguments: { payment_id: 'p_2', amount: 20000 },
      approvalId: asked.json['requestId'],
    });
    expect(run.status).toBe(200);
    const twice = await call(worker.url, AGENT, 'POST', '/v1/actions', {
      name: 'billing.refund',
      arguments: { payment_id: 'p_2', amount: 20000 },
      approvalId: asked.json['requestId'],
    });
    expect(twice.status).toBe(409);
    expect(upstream.calls() - before).toBe(1);
    const lookup = await call(worker.url, AGENT, 'POST', '/v1/actions', { name: 'billing.lookup', arguments: { payment_id: 'p_2' } });
    expect(lookup.json).toMatchObject({ status: 'committed', result: { payment_id: 'p_2', status: 'paid' } });
    expect((await call(worker.url, AGENT, 'POST', '/v1/actions', { name: 'billing.close_account', arguments: {} })).status).toBe(403);
    // The playground is off (demo: off), and the built-in stripe.refund is not served.
    expect((await call(worker.url, AGENT, 'POST', '/v1/actions', { name: 'stripe.refund', arguments: { payment_id: 'x', amount: 1 } })).status).toBe(403);
  });
});

it('the npm script itself: `npm run worker -- --config …` serves the config; an action without an executor is named at start', async () => {
  const upstream = (await startFakeUpstream(0)) as Upstream;
  const copy = await exampleCopy(upstream.url, (t) => t.replace(/  billing\.lookup:\n    module: \.\/worker\/tools\.mjs\n    export: lookup\n/, ''));
  // Its own process group: npm starts tsx, which starts node; stopping npm alone would leave them running.
  const child = spawn('npm', ['run', '--silent', 'worker', '--', '--config', copy.config], {
    cwd: root,
    env: { ...process.env, ...ENV, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        output += chunk;
        const m = /on (http:\/\/[\w.:]+)[\s\S]*try-it:/.exec(output);
        if (m) resolve(m[1]!);
      });
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
      child.once('exit', (code) => reject(new Error(`the worker exited with ${String(code)}: ${output}`)));
    });
    expect(output).toContain('WARNING:  no executor for billing.lookup');
    const r = await call(url, AGENT, 'POST', '/v1/actions', { name: 'billing.refund', arguments: { payment_id: 'npm_1', amount: 100 } });
    expect(r.status).toBe(200);
    expect(upstream.calls()).toBe(1);
    expect((await call(url, AGENT, 'POST', '/v1/actions', { name: 'billing.lookup', arguments: {} })).status).toBe(422);
  } finally {
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
    await upstream.close();
    await rm(copy.dir, { recursive: true, force: true });
  }
}, 180_000);
