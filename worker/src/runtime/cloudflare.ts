/**
 * Cloudflare entry with a durable store: the worker's `fetch` hands every request to one
 * Durable Object (`CTRLRUN_STORE`, named by `CTRLRUN_STORE_NAME`, default `default`), whose
 * class {@link CtrlrunStore} serves the app over the kernel's SQL store on the object's own
 * SQLite storage. However many isolates the deployment runs, they all reach the one instance of
 * that object, so the reservation table is one table and an effect runs at most once; the state
 * survives restarts and deployments. Use one object name per tenant to give each its own store.
 *
 * Configuration as on workerd (`workerd.ts`): `CTRLRUN_POLICY` / `CTRLRUN_CONFIG` text bindings,
 * token secrets; HTTP forwarders only (no module executors), and no playground (`CTRLRUN_DEMO`
 * must be unset or off). Declare the class under `new_sqlite_classes` (see `wrangler.toml`).
 *
 * @module
 */
import { InvalidArgument } from '@ctrlrun/kernel';
import { openDurableObjectStore, type DurableObjectSqlStorage } from '@ctrlrun/store-do';
import type { WorkerEnv } from '../config.js';
import { createConfiguredApp } from '../configured.js';
import { createFakeRemote } from '../demo.js';
import { errorResponse } from '../http.js';
import { loadWorkerSettings } from '../settings.js';

type Handler = { fetch(request: Request): Response | Promise<Response> };

/** The Durable Object namespace binding, structurally. */
interface Namespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}

const STORE_NAME = /^[A-Za-z0-9._:-]{1,128}$/;

async function build(storage: DurableObjectSqlStorage, env: WorkerEnv): Promise<Handler> {
  const settings = await loadWorkerSettings(env, { generate: false, demoExecutors: createFakeRemote().executors });
  if (settings.demo && env['CTRLRUN_DEMO'] !== undefined) throw new InvalidArgument('CTRLRUN_DEMO: the Durable Object entry serves no playground; set it off');
  const store = await openDurableObjectStore(storage);
  return createConfiguredApp({ ...settings, demo: false }, { store }).app;
}

/** The Durable Object that holds one store and serves the API over it. */
export class CtrlrunStore {
  readonly #storage: DurableObjectSqlStorage;
  readonly #env: WorkerEnv;
  #app: Promise<Handler> | undefined;

  constructor(ctx: { storage: DurableObjectSqlStorage }, env: WorkerEnv) {
    this.#storage = ctx.storage;
    this.#env = env;
  }

  async fetch(request: Request): Promise<Response> {
    try {
      this.#app ??= build(this.#storage, this.#env);
      return await (await this.#app).fetch(request);
    } catch (err) {
      this.#app = undefined;
      return errorResponse(503, 'ERR_NOT_CONFIGURED', `the worker is not configured: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}

export default {
  async fetch(request: Request, env: WorkerEnv): Promise<Response> {
    const namespace = env['CTRLRUN_STORE'] as Namespace | undefined;
    if (!namespace || typeof namespace.idFromName !== 'function') {
      return errorResponse(503, 'ERR_NOT_CONFIGURED', 'the worker is not configured: bind the Durable Object namespace CTRLRUN_STORE (class CtrlrunStore)');
    }
    const name = typeof env['CTRLRUN_STORE_NAME'] === 'string' && env['CTRLRUN_STORE_NAME'] !== '' ? env['CTRLRUN_STORE_NAME'] : 'default';
    if (!STORE_NAME.test(name))
      return errorResponse(503, 'ERR_NOT_CONFIGURED', 'the worker is not configured: CTRLRUN_STORE_NAME must be 1-128 of A-Z a-z 0-9 . _ : -');
    return namespace.get(namespace.idFromName(name)).fetch(request);
  },
};
