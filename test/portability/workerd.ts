/**
 * workerd host (Node compatibility off): a module worker. The sql.js `.wasm` arrives as a
 * compiled `WebAssembly.Module` (a CompiledWasm module in the worker's bundle) and is instantiated
 * through sql.js's `instantiateWasm` hook, since a worker cannot fetch or read files.
 */
import sqlWasm from './sql-wasm.wasm';
import { runScenario, type ScenarioReport } from './scenario.js';

// sql.js's browser build reads `self.location.href` while it initialises, and workerd has no
// `location`. The worker entry supplies one; the kernel and the store never see this.
const scope = globalThis as { location?: unknown };
scope.location ??= { href: 'https://portability.invalid/' };

export default {
  async fetch(): Promise<Response> {
    try {
      if ('process' in globalThis) throw new Error('globalThis.process exists: Node compatibility is on');
      const steps = await runScenario({
        instantiateWasm(imports, receive) {
          void WebAssembly.instantiate(sqlWasm, imports).then((instance) => receive(instance));
          return {};
        },
      });
      const report: ScenarioReport = { runtime: { name: 'workerd', version: navigator.userAgent }, steps };
      return Response.json(report);
    } catch (error) {
      return new Response(error instanceof Error ? (error.stack ?? error.message) : String(error), { status: 500 });
    }
  },
};
