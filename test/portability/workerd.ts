/**
 * workerd host (Node compatibility off): a module worker. The sql.js `.wasm` arrives as a
 * compiled `WebAssembly.Module` (a CompiledWasm module next to the bundle) and is instantiated
 * through sql.js's `instantiateWasm` hook, since a worker cannot fetch or read files.
 */
import initSqlJs from 'sql.js';
import sqlWasm from './sql-wasm.wasm';
import type { SqlJsModule } from '@ctrlrun/store-sqljs';
import { runScenario, type ScenarioReport } from './scenario.js';

// sql.js's browser build reads `self.location.href` while it initialises, and workerd has no
// `location`. The worker entry supplies one; the kernel and the store never see this.
const scope = globalThis as { location?: unknown };
scope.location ??= { href: 'https://portability.invalid/' };

export default {
  async fetch(): Promise<Response> {
    try {
      if ('process' in globalThis) throw new Error('globalThis.process exists: Node compatibility is on');
      // workerd refuses to compile wasm from bytes at run time ("Wasm code generation disallowed
      // by embedder"), so the store's `wasmBinary` cannot work here: sql.js instantiates the
      // module the worker was deployed with, through the store's `initSqlJs` option.
      const steps = await runScenario({
        initSqlJs: () =>
          initSqlJs({
            instantiateWasm(imports, receive) {
              void WebAssembly.instantiate(sqlWasm, imports).then((instance) => receive(instance));
              return {};
            },
          }) as Promise<unknown> as Promise<SqlJsModule>, // @types/sql.js's bind() is narrower than the store's structural type
      });
      const report: ScenarioReport = { runtime: { name: 'workerd', version: navigator.userAgent }, steps };
      return Response.json(report);
    } catch (error) {
      return new Response(error instanceof Error ? (error.stack ?? error.message) : String(error), { status: 500 });
    }
  },
};
