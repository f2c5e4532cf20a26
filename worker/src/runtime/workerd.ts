/**
 * workerd entry (a module worker; Node compatibility off). The policy and the config come as text
 * bindings (`CTRLRUN_POLICY`, `CTRLRUN_CONFIG`; see `settings.ts`). Tokens come from the bindings
 * `CTRLRUN_AGENT_TOKEN` and `CTRLRUN_OPERATOR_TOKEN` (secrets; nothing is generated here), the
 * store is sql.js in memory per isolate, so state lasts as long as the isolate does: a
 * deployment that must keep it needs a durable store (not part of this worker yet).
 *
 * sql.js's `.wasm` is imported as a compiled module and instantiated through `instantiateWasm`,
 * since a worker may not compile wasm from bytes at run time.
 *
 * @module
 */
import initSqlJs from 'sql.js';
import sqlWasm from 'sql.js/dist/sql-wasm-browser.wasm';
import { createSqlJsStore, type SqlJsModule } from '@ctrlrun/store-sqljs';
import type { WorkerEnv } from '../config.js';
import { createConfiguredApp } from '../configured.js';
import { createFakeRemote } from '../demo.js';
import { loadWorkerSettings } from '../settings.js';
import { errorResponse } from '../http.js';

// sql.js's browser build reads `self.location.href` while it initialises; workerd has none.
const scope = globalThis as { location?: unknown };
scope.location ??= { href: 'https://ctrlrun.invalid/' };

let SQL: Promise<SqlJsModule> | undefined;
function sqlJs(): Promise<SqlJsModule> {
  return (SQL ??= initSqlJs({
    instantiateWasm(imports, receive) {
      void WebAssembly.instantiate(sqlWasm, imports).then((instance) => receive(instance));
      return {};
    },
  }) as Promise<unknown> as Promise<SqlJsModule>);
}

let app: Promise<{ fetch(request: Request): Response | Promise<Response> }> | undefined;

async function build(env: WorkerEnv): Promise<{ fetch(request: Request): Response | Promise<Response> }> {
  // No files here: the config and the policy arrive as text bindings (CTRLRUN_CONFIG, CTRLRUN_POLICY).
  const settings = await loadWorkerSettings(env, { generate: false, demoExecutors: createFakeRemote().executors });
  const store = await createSqlJsStore({ SQL: sqlJs() });
  const tryItStore = settings.demo ? await createSqlJsStore({ SQL: sqlJs() }) : null;
  return createConfiguredApp(settings, { store, tryItStore }).app;
}

export default {
  async fetch(request: Request, env: WorkerEnv): Promise<Response> {
    try {
      app ??= build(env);
      return await (await app).fetch(request);
    } catch (err) {
      app = undefined;
      const message = err instanceof Error ? err.message : String(err);
      return errorResponse(503, 'ERR_NOT_CONFIGURED', `the worker is not configured: ${message}`);
    }
  },
};
