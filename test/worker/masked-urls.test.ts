/**
 * The worker shows no part of a database or upstream password, whatever the password holds:
 * `s3cr3t@ssw0rd` was once printed as `***@ssw0rd` in the startup banner (issue 27). One mask,
 * the kernel's maskUrl; its property test is in packages/kernel/test/mask-url.test.ts.
 */
import { createServer, type AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAction, InvalidArgument, NotExecuted, type ExecutionContext } from '@ctrlrun/kernel';
import { httpForwarder, parseWorkerConfig } from '../../worker/src/index.js';
import { startNodeWorker } from '../../worker/src/runtime/node.js';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

const PASSWORD = 's3cr3t@ssw0rd';
const TOKENS = { CTRLRUN_AGENT_TOKEN: 'agent-token-for-mask-tests', CTRLRUN_OPERATOR_TOKEN: 'operator-token-for-mask-t' };

/** Neither half of the password, nor the whole, anywhere in `text`. */
function expectNoPassword(text: string): void {
  for (const part of [PASSWORD, 's3cr3t', 'ssw0rd']) expect(text).not.toContain(part);
}

/** A port on 127.0.0.1 nothing listens on (bound, then released): a connection there is refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describePg('the Node worker on PostgreSQL with a password holding an @', (server) => {
  let db: FreshDatabase;
  let role: string;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'mask_url');
    // A role whose password really is s3cr3t@ssw0rd: the worker starts under password
    // authentication as under trust.
    role = `ctrlrun_mask_${randomBytes(4).toString('hex')}`;
    await db.sql(`CREATE ROLE ${role} LOGIN PASSWORD '${PASSWORD}'`);
    await db.sql(`GRANT ALL ON SCHEMA public TO ${role}`);
  }, 120_000);
  afterAll(async () => {
    await db?.drop();
    if (role) {
      const admin = new pg.Client({ connectionString: server.url });
      await admin.connect();
      await admin.query(`DROP ROLE IF EXISTS ${role}`).finally(() => admin.end());
    }
  });

  it('the banner names the store with the whole userinfo masked', async () => {
    const url = new URL(db.url);
    // Written raw, as people write it (pg reads the userinfo up to the last @).
    const databaseUrl = `postgres://${role}:${PASSWORD}@${url.host}${url.pathname}`;
    const printed: string[] = [];
    const worker = await startNodeWorker({ env: { ...TOKENS, DATABASE_URL: databaseUrl }, port: 0, print: (t) => printed.push(t) });
    try {
      const banner = printed.join('\n');
      const storeLine = banner.split('\n').find((l) => /^\s*store:/.test(l));
      expect(storeLine?.trim()).toBe(`store:    postgres://***@${url.host}${url.pathname}`);
      expectNoPassword(banner);
      expect(banner).not.toContain(role);
    } finally {
      await worker.close();
    }
  });
});

describe('the Node worker when its database cannot be reached', () => {
  it('fails to start with an error naming the store without any of its password', async () => {
    const port = await closedPort();
    const err = await startNodeWorker({
      env: { ...TOKENS, DATABASE_URL: `postgresql://agent:${PASSWORD}@127.0.0.1:${port}/db?connect_timeout=5` },
      port: 0,
      print: () => undefined,
    }).then(
      async (w) => {
        await w.close();
        throw new Error('expected a refusal, but it started');
      },
      (e: unknown) => e as Error,
    );
    expect(err.message).toContain(`postgresql://***@127.0.0.1:${port}/db?connect_timeout=5`);
    expectNoPassword(err.message);
  }, 60_000);

  it('an unknown DATABASE_URL scheme is refused with the password masked', async () => {
    const err = await startNodeWorker({ env: { ...TOKENS, DATABASE_URL: `mysql://agent:${PASSWORD}@db.internal/app` }, port: 0, print: () => undefined }).then(
      () => new Error('started'),
      (e: unknown) => e as Error,
    );
    expect(err.message).toContain('"mysql://***@db.internal/app" has an unknown scheme');
    expectNoPassword(err.message);
  });
});

describe('an upstream URL holding credentials', () => {
  it('is refused by the config document, masked (fetch would refuse it and quote it whole)', () => {
    const text = `executors:\n  a.b:\n    http: { url: "https://agent:${PASSWORD}@upstream.internal/refund" }\n`;
    expect(() => parseWorkerConfig(text, 'w.yaml')).toThrow(InvalidArgument);
    expect(() => parseWorkerConfig(text, 'w.yaml')).toThrow('w.yaml: executors["a.b"].http.url: "https://***@upstream.internal/refund" holds credentials');
    try {
      parseWorkerConfig(text, 'w.yaml');
    } catch (e) {
      expectNoPassword((e as Error).message);
    }
    const bad = `executors:\n  a.b:\n    http: { url: "ftp://agent:${PASSWORD}@upstream.internal/" }\n`;
    expect(() => parseWorkerConfig(bad, 'w.yaml')).toThrow('"ftp://***@upstream.internal/" is not an absolute http(s) URL');
  });

  it('is refused by httpForwarder, and a URL function that yields one is never sent to', async () => {
    expect(() => httpForwarder({ url: `https://agent:${PASSWORD}@upstream.internal/refund` })).toThrow(
      'url "https://***@upstream.internal/refund" holds credentials',
    );
    let sent = 0;
    const forward = httpForwarder({
      url: () => `https://agent:${PASSWORD}@upstream.internal/refund`,
      fetch: () => {
        sent++;
        return Promise.resolve(new Response('{}'));
      },
    });
    const action = createAction({ name: 'stripe.refund', arguments: { amount: 1 }, principal: { agent: 'agent' } });
    const err = await Promise.resolve(forward({ amount: 1 }, { action, effectKey: null } as unknown as ExecutionContext)).then(
      () => new Error('sent'),
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(NotExecuted);
    expect(err.message).toContain('"https://***@upstream.internal/refund" holds credentials');
    expectNoPassword(err.message);
    expect(sent).toBe(0);
  });
});
