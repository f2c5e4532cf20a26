/**
 * The HTTP suite against the workerd entry, bundled as for a deployment and run by miniflare
 * with Node compatibility off; tokens arrive as bindings.
 */
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { expect, it } from 'vitest';
import { bundleWorkerd, COMPATIBILITY_DATE, out } from './bundle.js';
import { describeWorkerHttp, TEST_ENV } from './http.case.js';

describeWorkerHttp('workerd (miniflare, Node compatibility off)', async () => {
  const bundle = await bundleWorkerd('workerd-test');
  const mf = new Miniflare({
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [], // no nodejs_compat
    modulesRoot: out,
    modules: [
      { type: 'ESModule', path: bundle.scriptPath, contents: bundle.script },
      { type: 'CompiledWasm', path: join(out, bundle.wasmName), contents: bundle.wasm },
    ],
    bindings: TEST_ENV,
  });
  await mf.ready;
  return {
    async fetch(path, init) {
      const r = await mf.dispatchFetch(`http://worker.invalid${path}`, init as never);
      return new Response(await r.arrayBuffer(), { status: r.status, headers: [...r.headers.entries()] });
    },
    close: () => mf.dispose(),
  };
});

it('the workerd bundle carries the kernel, sql.js and hono, and nothing of store-node or Node', async () => {
  const { inputs } = await bundleWorkerd('workerd-inputs');
  expect(inputs.some((i) => i.startsWith('packages/kernel/src/'))).toBe(true);
  expect(inputs.some((i) => i.includes('node_modules/sql.js/dist/sql-wasm-browser.js'))).toBe(true);
  expect(inputs.some((i) => i.includes('node_modules/hono/'))).toBe(true);
  expect(
    inputs.filter(
      (i) => i.startsWith('packages/store-node/') || i.startsWith('node:') || i.includes('@hono/node-server') || i.endsWith('worker/src/runtime/node.ts'),
    ),
  ).toEqual([]);
});
