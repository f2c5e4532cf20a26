// The gateway in workerd with Node compatibility off (miniflare): bundled as a deployment would be,
// fronting the counting upstream (a Node process, over Streamable HTTP), with a real SDK agent
// talking to miniflare over HTTP.
import { readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { createRequire } from 'node:module';
import { build, type Plugin } from 'esbuild';
import { Miniflare } from 'miniflare';
import { afterAll, expect, it } from 'vitest';
import { COMPATIBILITY_DATE, out, root } from '../worker/bundle.js';
import { call, httpAgent, POLICY, startHttpUpstream, upstreamCalls, workDir } from './support.js';

const require = createRequire(import.meta.url);
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => {});
});

it('the gateway runs in workerd: one run, the duplicate refused, the rest relayed', async () => {
  const wasmPaths: string[] = [];
  const wasm: Plugin = {
    name: 'wasm-module',
    setup(b) {
      b.onResolve({ filter: /\.wasm$/ }, (args) => {
        const path = require.resolve(args.path, { paths: [args.resolveDir] });
        wasmPaths.push(path);
        return { path: `./${basename(path)}`, external: true };
      });
    },
  };
  const scriptPath = join(out, 'mcp-gateway-workerd.mjs');
  const result = await build({
    entryPoints: [join(root, 'test/mcp/workerd-entry.ts')],
    outfile: scriptPath,
    bundle: true,
    format: 'esm',
    target: 'es2022',
    platform: 'neutral',
    mainFields: ['browser', 'module', 'main'],
    conditions: ['@ctrlrun/source', 'browser', 'workerd', 'worker'],
    metafile: true,
    logLevel: 'silent',
    absWorkingDir: root,
    plugins: [wasm],
  });
  expect(Object.keys(result.metafile.inputs).filter((i) => i.startsWith('node:'))).toEqual([]);
  const log = join(workDir(), 'upstream.log');
  const upstream = await startHttpUpstream(log);
  closers.push(() => upstream.process.stop());
  const mf = new Miniflare({
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [],
    modulesRoot: out,
    modules: [
      { type: 'ESModule', path: scriptPath, contents: await readFile(scriptPath, 'utf8') },
      { type: 'CompiledWasm', path: join(out, basename(wasmPaths[0]!)), contents: await readFile(wasmPaths[0]!) },
    ],
    bindings: { UPSTREAM_URL: upstream.url, POLICY },
  });
  closers.push(() => mf.dispose());
  const base = await mf.ready;
  const agent = await httpAgent(new URL('/mcp', base).href);
  closers.push(() => agent.close());
  expect((await agent.listTools()).tools.map((t) => t.name)).toContain('refund');
  const first = await call(agent, 'refund', { payment_id: 'e1', amount: 3 });
  expect(first.error).toBeUndefined();
  expect(first.result?._meta?.['com.ctrlrun/receipt']).toMatchObject({ result: 'committed', effect_key: 'refund:e1' });
  expect((await call(agent, 'refund', { payment_id: 'e1', amount: 3 })).error?.code).toBe(-41004);
  expect((await call(agent, 'refund', { payment_id: 'e2', amount: 9000 })).error?.code).toBe(-41001);
  expect(upstreamCalls(log).map((c) => c.arguments)).toEqual([{ amount: 3, payment_id: 'e1' }]);
}, 180_000);
