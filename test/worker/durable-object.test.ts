/**
 * The Durable Object store, in workerd (miniflare, SQLite-backed Durable Objects, Node
 * compatibility off): the kernel's store conformance suite run inside an object; refused
 * transactions leaving nothing; and the Cloudflare entry (`worker/src/runtime/cloudflare.ts`) shared by
 * two Worker scripts (two isolates) through one object, racing one refund to a real counting
 * upstream: it runs once, and a restart on the same persisted state still refuses a second run.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { Miniflare } from 'miniflare';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs example without types
import { startFakeUpstream } from '../../examples/worker/fake-upstream.mjs';
import { bundleWorkerd, bundleWorkerdModule, COMPATIBILITY_DATE, out, root } from './bundle.js';

interface Outcome {
  file: string;
  name: string;
  status: 'pass' | 'fail' | 'skip';
  ms: number;
  error?: string;
}
interface Upstream {
  url: string;
  calls(): number;
  close(): Promise<void>;
}

const TIMEOUT = 300_000;

describe('Durable Object store inside workerd', () => {
  it(
    'passes the store conformance suite',
    async () => {
      const bundle = await bundleWorkerdModule('test/worker/durable-object/conformance-entry.ts', 'do-conformance', {
        vitest: join(root, 'test', 'browser', 'harness', 'vitest-shim.ts'),
      });
      const mf = new Miniflare({
        compatibilityDate: COMPATIBILITY_DATE,
        compatibilityFlags: [],
        modules: [{ type: 'ESModule', path: bundle.scriptPath, contents: bundle.script }],
        durableObjects: { RUNNER: { className: 'ConformanceRunner', useSQLite: true } },
      });
      try {
        const response = await mf.dispatchFetch('http://runner.invalid/');
        const text = await response.text();
        expect(response.status, text.slice(0, 2000)).toBe(200);
        const results = JSON.parse(text) as Outcome[];
        const failed = results.filter((r) => r.status === 'fail').map((r) => `${r.name}\n${r.error ?? ''}`);
        expect(failed).toEqual([]);
        const passed = results.filter((r) => r.status === 'pass').length;
        const skipped = results.filter((r) => r.status === 'skip').map((r) => r.name);
        expect(passed).toBeGreaterThanOrEqual(28);
        expect(results.filter((r) => r.name.startsWith('DurableObjectSqlDriver') && r.status === 'pass')).toHaveLength(4);
        expect(skipped).toEqual([expect.stringContaining('e1-cross-process')]);
        console.log(`Durable Object conformance in workerd: ${passed} passed; skipped: ${skipped.join('; ')}`);
      } finally {
        await mf.dispose();
      }
    },
    TIMEOUT,
  );
});

const AGENT = 'agent-token-for-durable-tests';
const OPERATOR = 'operator-token-for-durable-t';

/** examples/cloudflare/wrangler.toml as miniflare options: two Worker scripts (two isolates) on its one Durable Object. */
async function fromWrangler(upstreamUrl: string, persist: string): Promise<Miniflare> {
  const { parse } = await import('smol-toml');
  const tomlPath = join(root, 'examples', 'cloudflare', 'wrangler.toml');
  const toml = parse(await readFile(tomlPath, 'utf8')) as {
    main: string;
    compatibility_date: string;
    durable_objects: { bindings: { name: string; class_name: string }[] };
    migrations: { new_sqlite_classes?: string[] }[];
    vars: Record<string, string>;
  };
  const main = relative(root, resolve(dirname(tomlPath), toml.main));
  const bundle = await bundleWorkerdModule(main, 'cloudflare-entry');
  const sqlite = new Set(toml.migrations.flatMap((m) => m.new_sqlite_classes ?? []));
  const vars = { ...toml.vars, CTRLRUN_CONFIG: toml.vars['CTRLRUN_CONFIG']!.replace('https://billing.example.com', upstreamUrl) };
  const secrets = { CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR, UPSTREAM_TOKEN: 'upstream-secret' };
  const worker = (name: string, owner: boolean) => ({
    name,
    compatibilityDate: toml.compatibility_date,
    compatibilityFlags: [],
    modules: [{ type: 'ESModule' as const, path: bundle.scriptPath, contents: bundle.script }],
    bindings: { ...vars, ...secrets },
    durableObjects: Object.fromEntries(
      toml.durable_objects.bindings.map((b) => [
        b.name,
        { className: b.class_name, useSQLite: sqlite.has(b.class_name), ...(owner ? {} : { scriptName: 'isolate-a' }) },
      ]),
    ),
  });
  const mf = new Miniflare({ durableObjectsPersist: persist, workers: [worker('isolate-a', true), worker('isolate-b', false)] });
  await mf.ready;
  return mf;
}

async function post(mf: Miniflare, isolate: string, token: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const w = (await mf.getWorker(isolate)) as unknown as { fetch(url: string, init: RequestInit): Promise<Response> };
  const r = await w.fetch(`http://ctrlrun.invalid${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

describe('examples/cloudflare/wrangler.toml under miniflare: two isolates, one Durable Object', () => {
  let upstream: Upstream | undefined;
  let persist = '';
  afterAll(async () => {
    await upstream?.close();
    if (persist) await rm(persist, { recursive: true, force: true });
  });

  it(
    'a refund raced from two isolates reaches the upstream once; after a restart on the same state it is still refused',
    async () => {
      upstream = (await startFakeUpstream(0, '127.0.0.1', { delayMs: 300 })) as Upstream;
      persist = await mkdtemp(join(tmpdir(), 'ctrlrun-do-'));
      let mf = await fromWrangler(upstream.url, persist);
      try {
        const refund = { name: 'billing.refund', arguments: { payment_id: 'race_1', amount: 500 } };
        const replies = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((i) => post(mf, i % 2 === 0 ? 'isolate-a' : 'isolate-b', AGENT, '/v1/actions', refund)));
        const statuses = replies.map((r) => r.status).sort();
        expect(statuses.filter((s) => s === 200)).toHaveLength(1);
        expect(statuses.filter((s) => s !== 200).every((s) => s === 409)).toBe(true);
        expect(upstream.calls()).toBe(1);

        // An approval asked through one isolate, granted through the other, runs once.
        const big = { name: 'billing.refund', arguments: { payment_id: 'race_2', amount: 20000 } };
        const asked = await post(mf, 'isolate-a', AGENT, '/v1/actions', big);
        expect(asked.status).toBe(202);
        expect((await post(mf, 'isolate-b', OPERATOR, `/v1/approvals/${String(asked.json['requestId'])}/grant`, {})).status).toBe(200);
        const runs = await Promise.all(
          ['isolate-a', 'isolate-b'].map((w) => post(mf, w, AGENT, '/v1/actions', { ...big, approvalId: asked.json['requestId'] })),
        );
        expect(runs.map((r) => r.status).sort()).toEqual([200, 409]);
        expect(upstream.calls()).toBe(2);
      } finally {
        await mf.dispose();
      }

      mf = await fromWrangler(upstream.url, persist);
      try {
        const again = await post(mf, 'isolate-b', AGENT, '/v1/actions', { name: 'billing.refund', arguments: { payment_id: 'race_1', amount: 500 } });
        expect(again.status).toBe(409);
        expect((again.json['error'] as { code: string }).code).toBe('ERR_DUPLICATE_EFFECT');
        expect(upstream.calls()).toBe(2);
        const verify = await post(mf, 'isolate-a', OPERATOR, '/v1/receipts/verify');
        expect(verify.json).toMatchObject({ ok: true, breaks: [] });
        expect(verify.json['verified']).toBeGreaterThanOrEqual(3);
        const policy = await post(mf, 'isolate-a', AGENT, '/v1/policy');
        expect(policy.json['actions']).toEqual([{ name: 'billing.refund', executor: true }]);
      } finally {
        await mf.dispose();
      }
    },
    TIMEOUT,
  );
});

it(
  'without the Durable Object (workerd.ts: sql.js in memory per isolate) the same race runs the refund twice — why the object is needed',
  async () => {
    const upstream = (await startFakeUpstream(0, '127.0.0.1', { delayMs: 200 })) as Upstream;
    const { parse } = await import('smol-toml');
    const vars = (parse(await readFile(join(root, 'examples', 'cloudflare', 'wrangler.toml'), 'utf8')) as { vars: Record<string, string> }).vars;
    const bundle = await bundleWorkerd('workerd-per-isolate');
    const bindings = {
      CTRLRUN_POLICY: vars['CTRLRUN_POLICY']!,
      CTRLRUN_CONFIG: vars['CTRLRUN_CONFIG']!.replace('https://billing.example.com', upstream.url),
      CTRLRUN_AGENT_TOKEN: AGENT,
      CTRLRUN_OPERATOR_TOKEN: OPERATOR,
      UPSTREAM_TOKEN: 'u',
    };
    const worker = (name: string) => ({
      name,
      compatibilityDate: COMPATIBILITY_DATE,
      compatibilityFlags: [],
      modulesRoot: out,
      modules: [
        { type: 'ESModule' as const, path: bundle.scriptPath, contents: bundle.script },
        { type: 'CompiledWasm' as const, path: join(out, bundle.wasmName), contents: bundle.wasm },
      ],
      bindings,
    });
    const mf = new Miniflare({ workers: [worker('isolate-a'), worker('isolate-b')] });
    try {
      const refund = { name: 'billing.refund', arguments: { payment_id: 'race_x', amount: 500 } };
      const replies = await Promise.all(['isolate-a', 'isolate-b'].map((w) => post(mf, w, AGENT, '/v1/actions', refund)));
      expect(replies.map((r) => r.status)).toEqual([200, 200]);
      expect(upstream.calls()).toBe(2);
    } finally {
      await mf.dispose();
      await upstream.close();
    }
  },
  TIMEOUT,
);
