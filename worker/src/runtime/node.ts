/**
 * Node entry (`npm run worker [-- --config worker.yaml]`) on `@hono/node-server`: the configured
 * policy and executors (`settings.ts`), else the embedded try-it default. The in-memory
 * sql.js store unless `DATABASE_URL` names a server store; tokens from the environment,
 * generated and printed when absent. `PORT` (default 8787) and `HOST` (default 127.0.0.1).
 *
 * Slow clients: a request whose headers have not all arrived within `CTRLRUN_HEADERS_TIMEOUT_MS`
 * (default 10 000), or whose headers and body have not all arrived within
 * `CTRLRUN_REQUEST_TIMEOUT_MS` (default 30 000), is answered 408 by Node's HTTP server and its
 * connection closed, so a client trickling bytes cannot hold a connection for minutes.
 *
 * @module
 */
import process from 'node:process';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { InvalidArgument, maskUrl, type StateStore } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import type { WorkerEnv } from '../config.js';
import { createConfiguredApp } from '../configured.js';
import { createFakeRemote } from '../demo.js';
import { loadWorkerSettings, settingsBanner, type RuntimeAccess, type WorkerSettings } from '../settings.js';
import { openServerStore } from './server-store.js';

/** A running Node server. */
export interface NodeWorker {
  /** `http://host:port` it listens on. */
  readonly url: string;
  readonly store: StateStore;
  /** What it was configured with. */
  readonly settings: WorkerSettings;
  /** Stops listening and closes the stores. */
  close(): Promise<void>;
}

/** How long a client may take to send a request (Node's `headersTimeout` / `requestTimeout`). */
export interface NodeTimeouts {
  /** Until every header has arrived, in ms (default 10 000; env `CTRLRUN_HEADERS_TIMEOUT_MS`). */
  headersMs?: number;
  /** Until the whole request, headers and body, has arrived, in ms (default 30 000; env `CTRLRUN_REQUEST_TIMEOUT_MS`). */
  requestMs?: number;
}

/** The defaults of {@link NodeTimeouts}. */
export const DEFAULT_NODE_TIMEOUTS = Object.freeze({ headersMs: 10_000, requestMs: 30_000 });

function timeoutMs(given: number | undefined, env: WorkerEnv, variable: string, fallback: number): number {
  let value: unknown = given;
  let what = variable;
  if (value === undefined) {
    const raw = env[variable];
    if (raw === undefined || raw === null || raw === '') return fallback;
    value = typeof raw === 'string' && /^\d{1,9}$/.test(raw.trim()) ? Number(raw.trim()) : raw;
  } else {
    what = variable === 'CTRLRUN_HEADERS_TIMEOUT_MS' ? 'timeouts.headersMs' : 'timeouts.requestMs';
  }
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > 3_600_000) {
    throw new InvalidArgument(`${what} must be a whole number of milliseconds from 1 to 3600000, not ${JSON.stringify(String(value))}`);
  }
  return value;
}

/** The timeouts `startNodeWorker` applies: options first, then the environment, then the defaults. */
export function nodeTimeouts(env: WorkerEnv, given: NodeTimeouts = {}): Required<NodeTimeouts> {
  const headersMs = timeoutMs(given.headersMs, env, 'CTRLRUN_HEADERS_TIMEOUT_MS', DEFAULT_NODE_TIMEOUTS.headersMs);
  const requestMs = timeoutMs(given.requestMs, env, 'CTRLRUN_REQUEST_TIMEOUT_MS', DEFAULT_NODE_TIMEOUTS.requestMs);
  if (headersMs > requestMs)
    throw new InvalidArgument(`the headers timeout (${headersMs} ms) cannot exceed the request timeout (${requestMs} ms), which includes it`);
  return { headersMs, requestMs };
}

/** Files and modules on Node: paths relative to the working directory. */
export const NODE_RUNTIME: RuntimeAccess = {
  readText: (path) => readFile(resolve(path), 'utf8'),
  importModule: async (path) => (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>,
};

/**
 * Starts the worker on Node; `port: 0` picks a free port. `configPath` (the `--config` flag)
 * names a config document; else `CTRLRUN_CONFIG_FILE` / `CTRLRUN_CONFIG` (see `settings.ts`).
 */
export async function startNodeWorker(
  options: { env?: WorkerEnv; configPath?: string | null; port?: number; hostname?: string; print?: (text: string) => void; timeouts?: NodeTimeouts } = {},
): Promise<NodeWorker> {
  const env = options.env ?? process.env;
  const config = await loadWorkerSettings(env, {
    generate: true,
    configPath: options.configPath ?? null,
    runtime: NODE_RUNTIME,
    demoExecutors: createFakeRemote().executors,
  });
  const timeouts = nodeTimeouts(env, options.timeouts);
  const store = config.databaseUrl ? await openServerStore(config.databaseUrl) : await createSqlJsStore();
  const tryItStore = config.demo ? await createSqlJsStore() : null;
  const { app, control } = createConfiguredApp(config, { store, tryItStore });
  const hostname = options.hostname ?? (typeof env['HOST'] === 'string' && env['HOST'] !== '' ? env['HOST'] : '127.0.0.1');
  const port = options.port ?? Number(env['PORT'] ?? 8787);
  if (!Number.isSafeInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be a port number, not ${String(env['PORT'])}`);
  const server = serve({
    fetch: app.fetch,
    port,
    hostname,
    serverOptions: {
      headersTimeout: timeouts.headersMs,
      requestTimeout: timeouts.requestMs,
      // Node checks the two timeouts only this often (its default, 30 s, would stretch them).
      connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(timeouts.headersMs / 4))),
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', (err: NodeJS.ErrnoException) => {
      const inUse = err.code === 'EADDRINUSE';
      const failure = inUse
        ? new Error(
            `${hostname}:${port} is already in use (another ctrlrun worker, or another program): stop it, or start this one on another port (PORT=8788, or PORT=0 for any free port; HOST picks the address)`,
            { cause: err },
          )
        : err;
      void Promise.allSettled([store.close(), tryItStore?.close()]).then(() => reject(failure));
    });
  });
  const address = server.address() as AddressInfo;
  const url = `http://${hostname.includes(':') ? `[${hostname}]` : hostname}:${address.port}`;
  const storeName = config.databaseUrl ? maskUrl(config.databaseUrl) : 'sql.js in memory (gone when the process exits)';
  (options.print ?? console.log)(settingsBanner(config, { url, store: storeName, runtime: `node ${process.versions.node}`, policyHash: control.policyHash }));
  return {
    url,
    store,
    settings: config,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await store.close();
      await tryItStore?.close();
    },
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  // Listening for the stop signals before the banner says where to connect: a signal sent by
  // whoever read it must close the worker, not end the process by Node's default. One that comes
  // before the worker listens (a store that never answers, say) ends the process by the signal
  // at once, as it would with no listener: there is nothing to close yet.
  let listening = false;
  const starting = (async () => {
    const { values } = parseArgs({ options: { config: { type: 'string' } }, strict: true });
    return startNodeWorker({
      configPath: values.config ?? null,
      print: (banner) => {
        listening = true;
        console.log(banner);
      },
    });
  })().catch((err: unknown) => {
    console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
    return process.exit(1);
  });
  const stop = (signal: NodeJS.Signals): void => {
    if (!listening) {
      process.removeListener('SIGINT', stop);
      process.removeListener('SIGTERM', stop);
      process.kill(process.pid, signal);
      return;
    }
    void starting.then((worker) => worker.close()).finally(() => process.exit(0));
  };
  // Once each: a second Ctrl-C ends the process by the signal, as usual.
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
