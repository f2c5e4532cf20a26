/**
 * The entry points' configuration: tokens from the environment (generated and printed when
 * absent), demo mode, CORS, and `DATABASE_URL` selecting a server store on Node (a SQLite file
 * through `@ctrlrun/store-node`), which keeps its records across restarts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFromEnv } from '../../worker/src/index.js';
import { startNodeWorker } from '../../worker/src/runtime/node.js';

const AGENT = 'agent-token-for-entry-tests';
const OPERATOR = 'operator-token-for-entry-t';

describe('configuration from the environment', () => {
  it('generates missing tokens only when allowed, and lists them to print', async () => {
    const config = configFromEnv({ CTRLRUN_AGENT_TOKEN: AGENT }, { generate: true });
    expect(config.generated.map((g) => g.variable)).toEqual(['CTRLRUN_OPERATOR_TOKEN']);
    const token = config.generated[0]!.token;
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const identity = await config.auth(new Request('http://x.invalid/', { headers: { authorization: `Bearer ${token}` } }));
    expect(identity).toEqual({
      role: 'operator',
      operator: 'human:operator',
      verified: { agent: 'operator', user: 'human:operator', issuer: 'ctrlrun-worker:token', claims: null },
    });
    expect(() => configFromEnv({ CTRLRUN_AGENT_TOKEN: AGENT }, { generate: false })).toThrow(/CTRLRUN_OPERATOR_TOKEN is not set/);
  });

  it('reads demo mode, CORS origins and DATABASE_URL; refuses a bad CTRLRUN_DEMO', () => {
    const env = { CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR };
    expect(configFromEnv(env, { generate: false })).toMatchObject({ demo: true, cors: null, databaseUrl: null, generated: [] });
    expect(
      configFromEnv(
        { ...env, CTRLRUN_DEMO: 'off', CTRLRUN_CORS_ORIGINS: 'https://a.example, https://b.example', DATABASE_URL: 'sqlite:/tmp/x.db' },
        { generate: false },
      ),
    ).toMatchObject({
      demo: false,
      cors: { origins: ['https://a.example', 'https://b.example'] },
      databaseUrl: 'sqlite:/tmp/x.db',
    });
    expect(() => configFromEnv({ ...env, CTRLRUN_DEMO: 'maybe' }, { generate: false })).toThrow(/CTRLRUN_DEMO/);
    expect(() => configFromEnv({ ...env, CTRLRUN_AGENT_TOKEN: 'short' }, { generate: false })).toThrow(/at least 16/);
  });
});

describe('the Node entry', () => {
  it('prints generated tokens at start and serves with them', async () => {
    const printed: string[] = [];
    const worker = await startNodeWorker({ env: {}, port: 0, print: (t) => printed.push(t) });
    try {
      const token = /CTRLRUN_OPERATOR_TOKEN=(\S+)/.exec(printed.join('\n'))?.[1];
      expect(printed.join('\n')).toMatch(/CTRLRUN_AGENT_TOKEN=\S+/);
      const r = await fetch(`${worker.url}/v1/receipts`, { headers: { authorization: `Bearer ${token}` } });
      expect(r.status).toBe(200);
      expect((await fetch(`${worker.url}/v1/receipts`)).status).toBe(401);
    } finally {
      await worker.close();
    }
  });

  it('DATABASE_URL opens a SQLite file through store-node, and the records outlive the process', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ctrlrun-worker-'));
    const env = { CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR, DATABASE_URL: `sqlite:${join(dir, 'ctrlrun.db')}` };
    const post = (url: string) =>
      fetch(`${url}/v1/actions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'stripe.refund', arguments: { payment_id: 'db_1', amount: 100 } }),
      });
    try {
      const printed: string[] = [];
      const first = await startNodeWorker({ env, port: 0, print: (t) => printed.push(t) });
      expect(printed.join('\n')).toContain(`store:    sqlite:${join(dir, 'ctrlrun.db')}`);
      try {
        expect((await post(first.url)).status).toBe(200);
      } finally {
        await first.close();
      }
      const second = await startNodeWorker({ env, port: 0, print: () => undefined });
      try {
        const again = await post(second.url);
        expect(again.status).toBe(409);
        expect(((await again.json()) as { error: { code: string } }).error.code).toBe('ERR_DUPLICATE_EFFECT');
        const verify = await fetch(`${second.url}/v1/receipts/verify`, { headers: { authorization: `Bearer ${OPERATOR}` } });
        expect(await verify.json()).toMatchObject({ ok: true, verified: 2 });
      } finally {
        await second.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('an unknown DATABASE_URL scheme is a clear error at start', async () => {
    await expect(
      startNodeWorker({ env: { CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR, DATABASE_URL: 'mongodb://x' }, port: 0, print: () => undefined }),
    ).rejects.toThrow(/unknown scheme "mongodb"/);
  });
});
