/**
 * examples/cloudflare/wrangler.toml under the real `wrangler dev`, run as the file's own comment
 * says: `tsc -b` first (wrangler bundles the packages' `dist`), then wrangler with
 * `-c examples/cloudflare/wrangler.toml`. Offline: no metrics, no `Request.cf` download, local
 * mode. The secrets the comment puts with `wrangler secret put` go in a temporary `--env-file`,
 * together with `CTRLRUN_CONFIG` pointed at a local counting upstream (the example's own text with
 * its URL replaced); state goes to a temporary `--persist-to`. Through wrangler's own server:
 * healthz 200, an allowed refund runs once, its repeat is 409, an approval is asked, granted and
 * used once.
 *
 * Written once, run by `wrangler-dev.test.ts` (the `wrangler` dev dependency, 4.86, on the
 * machine's Node) and `wrangler-dev-current.test.ts` (today's wrangler, which needs Node 22.12 or
 * later, on such a Node): {@link wranglerDevSuite} takes the wrangler and the Node to run it on.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs example without types
import { startFakeUpstream } from '../../examples/worker/fake-upstream.mjs';
import { scaled } from '../support/load.js';
import { root } from './bundle.js';

interface Upstream {
  url: string;
  calls(): number;
  refunds: Map<string, { authorization: string | null }>;
  close(): Promise<void>;
}

const CONFIG = join('examples', 'cloudflare', 'wrangler.toml');
/** The `wrangler` dev dependency's entry. */
export const DEV_WRANGLER = join(root, 'node_modules', 'wrangler', 'bin', 'wrangler.js');
const TSC = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const AGENT = 'agent-token-for-wrangler-dev';
const OPERATOR = 'operator-token-for-wrangler-d';
const UPSTREAM_TOKEN = 'upstream-secret-for-wrangler';

/** Which wrangler runs on which Node. */
export interface WranglerTarget {
  /** `wrangler 4.86.0 on Node v20.20.2`, for the suite's name. */
  readonly label: string;
  /** The Node binary wrangler runs on. */
  readonly node: string;
  /** Wrangler's `bin/wrangler.js`. */
  readonly wrangler: string;
}

/** Wrangler's own start-up (bundling, workerd) takes 30 s and more on a loaded machine. */
const START_MS = scaled(120_000);
const TIMEOUT = START_MS + scaled(240_000);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * The suite against `target`, or skipped naming why (`target` is then the reason: under CI=true
 * the test file throws instead of getting here).
 */
export function wranglerDevSuite(target: WranglerTarget | string): void {
  const missing = typeof target === 'string' ? target : null;
  let upstream: Upstream | undefined;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let dir = '';
  let base = '';
  let output = '';

  /** The tail of wrangler's output, for a failure's message (it holds no secret: wrangler hides them). */
  const tail = (): string => output.slice(-4000);

  async function stopWrangler(): Promise<void> {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    // Its own process group: wrangler starts workerd, which must go with it.
    const group = -child.pid!;
    process.kill(group, 'SIGTERM');
    const killed = setTimeout(() => {
      try {
        process.kill(group, 'SIGKILL');
      } catch {
        // already gone
      }
    }, scaled(15_000));
    await exited;
    clearTimeout(killed);
    try {
      process.kill(group, 'SIGKILL'); // a workerd left behind by the group's leader
    } catch {
      // the group is empty
    }
  }

  beforeAll(async () => {
    if (typeof target === 'string') return;
    // 1. `npx tsc -b`, as the example's comment says: wrangler bundles the packages from dist.
    const tsc = spawnSync(process.execPath, [TSC, '-b'], { cwd: root, encoding: 'utf8', timeout: scaled(300_000) });
    if (tsc.status !== 0) throw new Error(`tsc -b failed (${String(tsc.status ?? tsc.signal)}): ${(tsc.stdout + tsc.stderr).slice(0, 4000)}`);

    // 2. The upstream, the secrets and the state: all temporary, nothing written into the example.
    upstream = (await startFakeUpstream(0, '127.0.0.1')) as Upstream;
    dir = await mkdtemp(join(tmpdir(), 'ctrlrun-wrangler-'));
    const { parse } = await import('smol-toml');
    const vars = (parse(await readFile(join(root, CONFIG), 'utf8')) as { vars: Record<string, string> }).vars;
    const config = vars['CTRLRUN_CONFIG']!.replace('https://billing.example.com', upstream.url);
    expect(config).toContain(`${upstream.url}/refunds`);
    expect(config).not.toContain("'");
    const envFile = join(dir, 'secrets.env');
    await writeFile(
      envFile,
      [
        `CTRLRUN_AGENT_TOKEN=${AGENT}`,
        `CTRLRUN_OPERATOR_TOKEN=${OPERATOR}`,
        `UPSTREAM_TOKEN=${UPSTREAM_TOKEN}`,
        `CTRLRUN_SESSION_SECRET=${'s'.repeat(48)}`,
        `CTRLRUN_CONFIG='${config}'`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );

    // 3. `wrangler dev -c examples/cloudflare/wrangler.toml`, offline, on a free 127.0.0.1 port.
    const [port, inspector] = [await freePort(), await freePort()];
    base = `http://127.0.0.1:${port}`;
    const args = [
      target.wrangler,
      'dev',
      '-c',
      CONFIG,
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--inspector-port',
      String(inspector),
      '--local',
      '--env-file',
      envFile,
      '--persist-to',
      join(dir, 'state'),
      '--show-interactive-dev-session=false',
    ];
    child = spawn(target.node, args, {
      cwd: root,
      env: {
        ...process.env,
        // Whatever wrangler starts with `node` is this Node too.
        PATH: `${dirname(target.node)}${delimiter}${process.env['PATH'] ?? ''}`,
        WRANGLER_SEND_METRICS: 'false',
        WRANGLER_SEND_ERROR_REPORTS: 'false',
        CLOUDFLARE_CF_FETCH_ENABLED: 'false',
        WRANGLER_LOG_PATH: join(dir, 'logs'),
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const started = child;
    exited = new Promise<void>((resolve) => started.once('exit', () => resolve()));
    await new Promise<void>((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error(`wrangler dev was not ready within ${START_MS} ms:\n${tail()}`)), START_MS);
      const seen = (chunk: string): void => {
        output += chunk;
        if (output.includes(`Ready on ${base}`)) {
          clearTimeout(deadline);
          resolve();
        }
      };
      started.stdout!.setEncoding('utf8').on('data', seen);
      started.stderr!.setEncoding('utf8').on('data', seen);
      started.once('exit', (code, signal) => {
        clearTimeout(deadline);
        reject(new Error(`wrangler dev exited (${String(code ?? signal)}) before it was ready:\n${tail()}`));
      });
    });
  }, TIMEOUT);

  afterAll(async () => {
    await stopWrangler();
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, scaled(60_000));

  /**
   * One request to wrangler's server. Wrangler may reload its local server once more just after it
   * says ready; a refused connection (nothing received) is tried again, nothing else is.
   */
  async function call(method: 'GET' | 'POST', path: string, token: string | null, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
    const until = Date.now() + scaled(30_000);
    for (;;) {
      try {
        const r = await fetch(`${base}${path}`, {
          method,
          headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(scaled(60_000)),
        });
        const text = await r.text();
        let json: Record<string, unknown>;
        try {
          json = JSON.parse(text) as Record<string, unknown>;
        } catch {
          throw new Error(`${method} ${path} answered ${r.status} with a body that is not JSON: ${JSON.stringify(text.slice(0, 300))}`);
        }
        return { status: r.status, json };
      } catch (err) {
        const code = (err as { cause?: { code?: string } }).cause?.code;
        if (code !== 'ECONNREFUSED' || Date.now() > until) throw err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  describe.skipIf(missing !== null)(
    `${typeof target === 'string' ? 'wrangler dev' : target.label} on examples/cloudflare/wrangler.toml${missing ? ` — skipped: ${missing}` : ''}`,
    () => {
      it(
        'serves the example through its Durable Object: healthz, a refund once (its repeat 409), an approval asked, granted and used once',
        async () => {
          const health = await call('GET', '/healthz', null);
          expect(health.status, `${JSON.stringify(health.json)}\n${tail()}`).toBe(200);

          const refund = { name: 'billing.refund', arguments: { payment_id: 'wr_1', amount: 500 } };
          const first = await call('POST', '/v1/actions', AGENT, refund);
          expect(first.status, JSON.stringify(first.json)).toBe(200);
          expect(first.json).toMatchObject({
            status: 'committed',
            effectKey: 'refund:wr_1',
            result: { status: 200, body: { id: 're_wr_1', status: 'succeeded' } },
          });
          expect(upstream!.calls()).toBe(1);
          // The secret from the env file reached the upstream as the example's config says.
          expect([...upstream!.refunds.values()].map((r) => r.authorization)).toEqual([`Bearer ${UPSTREAM_TOKEN}`]);

          const again = await call('POST', '/v1/actions', AGENT, refund);
          expect(again.status).toBe(409);
          expect((again.json['error'] as { code: string }).code).toBe('ERR_DUPLICATE_EFFECT');
          expect(upstream!.calls()).toBe(1);

          const big = { name: 'billing.refund', arguments: { payment_id: 'wr_2', amount: 20000 } };
          const asked = await call('POST', '/v1/actions', AGENT, big);
          expect(asked.status, JSON.stringify(asked.json)).toBe(202);
          const requestId = String(asked.json['requestId']);
          expect(requestId).toMatch(/\S/);
          expect(upstream!.calls()).toBe(1);
          const early = await call('POST', '/v1/actions', AGENT, { ...big, approvalId: requestId });
          expect(early.status).toBe(409); // not granted yet: nothing runs
          expect(early.json['error']).toMatchObject({ code: 'ERR_APPROVAL_MISMATCH', reason: 'pending' });
          expect(upstream!.calls()).toBe(1);

          const grant = await call('POST', `/v1/approvals/${encodeURIComponent(requestId)}/grant`, OPERATOR, {});
          expect(grant.status, JSON.stringify(grant.json)).toBe(200);
          const approved = await call('POST', '/v1/actions', AGENT, { ...big, approvalId: requestId });
          expect(approved.status, JSON.stringify(approved.json)).toBe(200);
          expect(approved.json).toMatchObject({
            status: 'committed',
            effectKey: 'refund:wr_2',
            result: { status: 200, body: { id: 're_wr_2', amount: 20000 } },
          });
          expect(upstream!.calls()).toBe(2);
          const reused = await call('POST', '/v1/actions', AGENT, { ...big, approvalId: requestId });
          expect(reused.status).toBe(409);
          expect(upstream!.calls()).toBe(2);

          const verify = await call('GET', '/v1/receipts/verify', OPERATOR);
          expect(verify.json).toMatchObject({ ok: true, breaks: [] });
        },
        TIMEOUT,
      );
    },
  );
}
