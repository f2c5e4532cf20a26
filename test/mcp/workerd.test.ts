// The gateway in workerd with Node compatibility off (miniflare): bundled as a deployment would be,
// fronting the counting upstream (a Node process, over Streamable HTTP), with a real SDK agent
// talking to miniflare over HTTP.
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { afterAll, expect, it } from 'vitest';
import { bundleWorkerd, COMPATIBILITY_DATE, out, root } from '../worker/bundle.js';
import { call, failure, httpAgent, POLICY, startHttpUpstream, upstreamCalls, workDir } from './support.js';

const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => {});
});

it('the gateway runs in workerd: one run, the duplicate refused, the rest relayed', async () => {
  const bundle = await bundleWorkerd('mcp-gateway-workerd', join(root, 'test/mcp/workerd-entry.ts'));
  expect(bundle.inputs.filter((i) => i.startsWith('node:') || i.startsWith('packages/store-node/'))).toEqual([]);
  expect(bundle.inputs.some((i) => i.includes('node_modules/@modelcontextprotocol/sdk/'))).toBe(true);
  const log = join(workDir(), 'upstream.log');
  const upstream = await startHttpUpstream(log);
  closers.push(() => upstream.process.stop());
  const mf = new Miniflare({
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [],
    modulesRoot: out,
    modules: [
      { type: 'ESModule', path: bundle.scriptPath, contents: bundle.script },
      { type: 'CompiledWasm', path: join(out, bundle.wasmName), contents: bundle.wasm },
    ],
    bindings: { UPSTREAM_URL: upstream.url, POLICY },
  });
  closers.push(() => mf.dispose());
  const base = await mf.ready;
  const agent = await httpAgent(new URL('/mcp', base).href);
  closers.push(() => agent.close());
  expect((await agent.listTools()).tools.map((t) => t.name)).toContain('refund');
  const first = await call(agent, 'refund', { payment_id: 'e1', amount: 3 });
  expect(failure(first)).toBeUndefined();
  expect(first.result?._meta?.['com.ctrlrun/receipt']).toMatchObject({ result: 'committed', effect_key: 'refund:e1' });
  expect((await call(agent, 'refund', { payment_id: 'e1', amount: 3 })).refused?.code).toBe(-41004);
  expect((await call(agent, 'refund', { payment_id: 'e2', amount: 9000 })).refused?.code).toBe(-41001);
  expect(upstreamCalls(log).map((c) => c.arguments)).toEqual([{ amount: 3, payment_id: 'e1' }]);
}, 180_000);
