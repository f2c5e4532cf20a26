// Worker figures: allowed actions/s over HTTP on Node (sql.js in memory; a SQLite file through
// store-node), the same app without the network (`app.request`), the workerd bundle's size
// (gzip), and cold start in workerd (miniflare, Node compatibility off).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { Miniflare } from 'miniflare';
import { Control, createAction, loadPolicy, type JsonObject } from '@ctrlrun/kernel';
import { TRY_IT_POLICY_YAML } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { createDemoApp, staticTokens } from '../../worker/src/index.js';
import { startNodeWorker } from '../../worker/src/runtime/node.js';
import { bundleWorkerd, COMPATIBILITY_DATE, out } from '../../test/worker/bundle.js';

const AGENT = 'bench-agent-token-000000001';
const OPERATOR = 'bench-operator-token-0000001';
const ENV = { CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR, CTRLRUN_DEMO: 'off' };
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

let serial = 0;
/** An allowed refund on a payment never used before (so every request commits). */
function allowed(): RequestInit {
  serial++;
  return {
    method: 'POST',
    headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'stripe.refund', arguments: { payment_id: `bench_${serial}`, amount: 500 } }),
  };
}

/** Requests/s for `ms`, `concurrency` in flight; every answer must be 200. */
async function rate(ms: number, concurrency: number, send: (init: RequestInit) => Promise<Response>): Promise<number> {
  let done = 0;
  const end = performance.now() + ms;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const r = await send(allowed());
        if (r.status !== 200) throw new Error(`expected 200, got ${r.status}: ${await r.text()}`);
        await r.arrayBuffer();
        done++;
      }
    }),
  );
  return done / ((performance.now() - start) / 1000);
}

// 1. The kernel alone, then the app without a network: what HTTP parsing, auth and JSON cost.
{
  const control = new Control({ policy: loadPolicy(TRY_IT_POLICY_YAML), store: await createSqlJsStore() });
  const refund = (args: JsonObject) => ({ id: `re_${String(args['payment_id'])}`, status: 'succeeded' });
  const direct = async (): Promise<void> => {
    serial++;
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: `bench_${serial}`, amount: 500 }, principal: { agent: 'bench' } });
    await control.executeWithReceipt(action, refund);
  };
  const kernelRate = async (ms: number): Promise<number> => {
    let n = 0;
    const start = performance.now();
    while (performance.now() - start < ms) {
      await direct();
      n++;
    }
    return n / ((performance.now() - start) / 1000);
  };
  await kernelRate(300);
  const kernel = await kernelRate(1500);
  const auth = staticTokens([
    { role: 'agent', token: AGENT, agent: 'bench' },
    { role: 'operator', token: OPERATOR, operator: 'human:bench' },
  ]);
  const { app } = createDemoApp({ store: await createSqlJsStore(), auth });
  await rate(300, 1, async (init) => app.request('/v1/actions', init));
  const inProcess = await rate(1500, 1, async (init) => app.request('/v1/actions', init));
  console.log(`allowed actions/s, Control only      ${fmt(kernel).padStart(7)}   sql.js in memory, one at a time (the floor for what follows)`);
  console.log(
    `allowed actions/s, app.request       ${fmt(inProcess).padStart(7)}   no network, one at a time: ${((inProcess / kernel) * 100).toFixed(0)}% of Control only`,
  );
}

// 2. Over HTTP on 127.0.0.1 (@hono/node-server), sql.js in memory, then a SQLite file.
async function overHttp(label: string, env: Record<string, string>): Promise<void> {
  const worker = await startNodeWorker({ env, port: 0, print: () => undefined });
  try {
    const send = (init: RequestInit) => fetch(`${worker.url}/v1/actions`, init);
    await rate(300, 8, send);
    const one = await rate(1500, 1, send);
    const eight = await rate(1500, 8, send);
    console.log(`allowed actions/s, HTTP, ${label.padEnd(11)} ${fmt(one).padStart(7)}   one at a time; ${fmt(eight)} with 8 in flight`);
  } finally {
    await worker.close();
  }
}
await overHttp('sql.js', ENV);
const dir = await mkdtemp(join(tmpdir(), 'ctrlrun-bench-'));
try {
  await overHttp('SQLite file', { ...ENV, DATABASE_URL: `sqlite:${join(dir, 'bench.db')}` });
} catch (err) {
  console.log(`allowed actions/s, HTTP, SQLite file  (skipped: ${err instanceof Error ? err.message : String(err)})`);
} finally {
  await rm(dir, { recursive: true, force: true });
}

// 3. The workerd bundle: minified script and sql.js's .wasm, gzip.
const bundle = await bundleWorkerd('workerd-bench');
const kb = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
const scriptGz = gzipSync(bundle.script).length;
const wasmGz = gzipSync(bundle.wasm).length;
console.log(
  `workerd bundle (gzip)                ${kb(scriptGz + wasmGz).padStart(7)}   script ${kb(scriptGz)} (${kb(bundle.script.length)} raw) + ${bundle.wasmName} ${kb(wasmGz)} (${kb(bundle.wasm.length)} raw)`,
);

// 4. Cold start in workerd: a fresh runtime per sample; the first request builds the isolate's
//    app (sql.js instantiated, two in-memory stores migrated).
const starts: number[] = [];
const firsts: number[] = [];
for (let i = 0; i < 3; i++) {
  const t0 = performance.now();
  const mf = new Miniflare({
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [],
    modulesRoot: out,
    modules: [
      { type: 'ESModule', path: bundle.scriptPath, contents: bundle.script },
      { type: 'CompiledWasm', path: join(out, bundle.wasmName), contents: bundle.wasm },
    ],
    bindings: { ...ENV, CTRLRUN_DEMO: 'on' },
  });
  await mf.ready;
  const t1 = performance.now();
  const r = await mf.dispatchFetch('http://bench.invalid/healthz');
  await r.text();
  const t2 = performance.now();
  starts.push(t1 - t0);
  firsts.push(t2 - t1);
  await mf.dispose();
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `workerd cold start                   ${`${median(firsts).toFixed(0)} ms`.padStart(7)}   first request of a fresh isolate (median of 3); runtime start ${median(starts).toFixed(0)} ms`,
);
