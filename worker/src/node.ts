/**
 * Node entry (`npm run worker`): the embedded default on `@hono/node-server`. The in-memory
 * sql.js store unless `DATABASE_URL` names a server store; tokens from the environment,
 * generated and printed when absent. `PORT` (default 8787) and `HOST` (default 127.0.0.1).
 *
 * @module
 */
import process from 'node:process';
import { pathToFileURL } from 'node:url';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { StateStore } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { configFromEnv, startupBanner, type WorkerEnv } from './config.js';
import { createDemoApp } from './demo.js';
import { describeUrl, openServerStore } from './server-store.js';

/** A running Node server. */
export interface NodeWorker {
  /** `http://host:port` it listens on. */
  readonly url: string;
  readonly store: StateStore;
  /** Stops listening and closes the stores. */
  close(): Promise<void>;
}

/** Starts the worker on Node; `port: 0` picks a free port. */
export async function startNodeWorker(options: { env?: WorkerEnv; port?: number; hostname?: string; print?: (text: string) => void } = {}): Promise<NodeWorker> {
  const env = options.env ?? process.env;
  const config = configFromEnv(env, { generate: true });
  const store = config.databaseUrl ? await openServerStore(config.databaseUrl) : await createSqlJsStore();
  const tryItStore = config.demo ? await createSqlJsStore() : null;
  const { app } = createDemoApp({ store, tryItStore, auth: config.auth, cors: config.cors });
  const hostname = options.hostname ?? (typeof env['HOST'] === 'string' && env['HOST'] !== '' ? env['HOST'] : '127.0.0.1');
  const port = options.port ?? Number(env['PORT'] ?? 8787);
  if (!Number.isSafeInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be a port number, not ${String(env['PORT'])}`);
  const server = serve({ fetch: app.fetch, port, hostname });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const address = server.address() as AddressInfo;
  const url = `http://${hostname.includes(':') ? `[${hostname}]` : hostname}:${address.port}`;
  const storeName = config.databaseUrl ? describeUrl(config.databaseUrl) : 'sql.js in memory (gone when the process exits)';
  (options.print ?? console.log)(startupBanner(config, { url, store: storeName, runtime: `node ${process.versions.node}` }));
  return {
    url,
    store,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await store.close();
      await tryItStore?.close();
    },
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const worker = await startNodeWorker().catch((err: unknown) => {
    console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
    return process.exit(1);
  });
  const stop = (): void => {
    void worker.close().finally(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
