/**
 * The HTTP suite against the workerd entry, bundled as for a deployment and run by miniflare
 * with Node compatibility off; tokens arrive as bindings.
 */
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
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
