/**
 * `deno serve` (the `deno` npm package) on the worker's Deno entry with the same configuration as
 * Node (`CTRLRUN_CONFIG_FILE`: examples/worker, its refund forwarded to a real counting upstream),
 * on PostgreSQL (`DATABASE_URL`, the run's throwaway server) and on the documented local file
 * store for Deno, PGlite in a directory (`pglite:DIR`): a refund runs once, and after a restart on
 * the same database the retry is refused.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs example without types
import { startFakeUpstream } from '../../examples/worker/fake-upstream.mjs';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';
import { bundleDeno, denoCommand, root } from './bundle.js';

interface Upstream {
  url: string;
  calls(): number;
  close(): Promise<void>;
}

const ROOT_EXAMPLES = join(root, 'examples');
const AGENT = 'agent-token-for-deno-serve-t';
const OPERATOR = 'operator-token-for-deno-serve';
const DENO_ENV = { DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1', NO_COLOR: '1' };
const TIMEOUT = 300_000;
const entry = bundleDeno('deno-serve-test', 'deno-serve.ts');

async function exampleConfig(upstreamUrl: string): Promise<{ dir: string; config: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'ctrlrun-deno-serve-'));
  const example = join(root, 'examples', 'worker');
  await mkdir(join(dir, 'worker'));
  for (const f of ['policy.yaml', 'tools.mjs']) await copyFile(join(example, f), join(dir, 'worker', f));
  await writeFile(join(dir, 'worker.yaml'), (await readFile(join(ROOT_EXAMPLES, 'worker.yaml'), 'utf8')).replace('http://127.0.0.1:8788', upstreamUrl));
  return { dir, config: join(dir, 'worker.yaml') };
}

/** `deno serve` on a free port; resolves once the banner names where it listens. */
async function denoServe(env: Record<string, string>): Promise<{ url: string; output: () => string; stop(): Promise<void> }> {
  const [command, prefix] = denoCommand();
  const child: ChildProcess = spawn(
    command,
    [...prefix, 'serve', '-A', '--node-modules-dir=manual', '--no-config', '--host', '127.0.0.1', '--port', '0', await entry],
    {
      cwd: root,
      env: { ...process.env, ...DENO_ENV, CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR, UPSTREAM_TOKEN: 'upstream-secret', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      const m = /ctrlrun worker \(deno [^)]+\) on (http:\/\/[\w.:[\]]+)[\s\S]*try-it:/.exec(output);
      if (m) resolve(m[1]!);
    });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`deno serve exited with ${String(code)} before listening: ${output}`)));
  });
  return {
    url,
    output: () => output,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        // The entry closes its stores on SIGTERM and exits; one that hangs is killed, and fails.
        const hung = setTimeout(() => child.kill('SIGKILL'), 60_000);
        child.once('exit', (_code, signal) => {
          clearTimeout(hung);
          expect(signal, 'deno serve must exit on SIGTERM after closing its store').not.toBe('SIGKILL');
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

async function refund(url: string, paymentId: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${url}/v1/actions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'billing.refund', arguments: { payment_id: paymentId, amount: 500 } }),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

/** Runs a refund, restarts on the same database, retries: once at the upstream, refused after. */
async function onceAcrossRestart(databaseUrl: string, storeLine: string): Promise<void> {
  const upstream = (await startFakeUpstream(0)) as Upstream;
  const copy = await exampleConfig(upstream.url);
  const env = { DATABASE_URL: databaseUrl, CTRLRUN_CONFIG_FILE: copy.config };
  try {
    const first = await denoServe(env);
    try {
      expect(first.output()).toContain(`store:    ${storeLine}`);
      expect(first.output()).toMatch(/hash: {5}sha256:[0-9a-f]{64}/);
      expect(first.output()).toContain('billing.lookup → module ./worker/tools.mjs#lookup');
      expect((await refund(first.url, 'deno_1')).status).toBe(200);
      expect(upstream.calls()).toBe(1);
    } finally {
      await first.stop();
    }
    const second = await denoServe(env);
    try {
      const again = await refund(second.url, 'deno_1');
      expect(again.status).toBe(409);
      expect((again.json['error'] as { code: string }).code).toBe('ERR_DUPLICATE_EFFECT');
      expect(upstream.calls()).toBe(1);
      const lookup = await fetch(`${second.url}/v1/actions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' },
        body: '{"name":"billing.lookup","arguments":{"payment_id":"deno_1"}}',
      });
      expect(await lookup.json()).toMatchObject({ status: 'committed', result: { payment_id: 'deno_1', status: 'paid' } });
      const verify = await fetch(`${second.url}/v1/receipts/verify`, { headers: { authorization: `Bearer ${OPERATOR}` } });
      expect(await verify.json()).toMatchObject({ ok: true, breaks: [] });
    } finally {
      await second.stop();
    }
  } finally {
    await upstream.close();
    await rm(copy.dir, { recursive: true, force: true });
  }
}

describePg('deno serve on PostgreSQL (DATABASE_URL)', (server) => {
  let db: FreshDatabase;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'deno_serve');
  }, TIMEOUT);
  afterAll(async () => {
    await db?.drop();
  });

  it(
    'serves the config, runs a refund once, and refuses the retry after a restart',
    async () => {
      await onceAcrossRestart(db.url, db.url.replace(/^(postgres(?:ql)?:\/\/)[^@]*@/, '$1***@'));
    },
    TIMEOUT,
  );
});

describe('deno serve on the local file store for Deno (pglite:DIR)', () => {
  it(
    'keeps the reservation across a restart in the directory',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'ctrlrun-deno-pglite-'));
      try {
        await onceAcrossRestart(`pglite:${dir}`, `pglite:${dir}`);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    TIMEOUT,
  );
});
