/**
 * Deno entry: the embedded default on `Deno.serve`. Run the bundle from the repository root
 * (`deno run -A --node-modules-dir=manual`), so `sql.js` (and, with `DATABASE_URL`,
 * `@ctrlrun/store-node`) resolve from `node_modules`. `PORT` (default 8787; 0 picks one) and
 * `HOST` (default 127.0.0.1).
 *
 * @module
 */
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { configFromEnv, startupBanner } from './config.js';
import { createDemoApp } from './demo.js';
import { describeUrl, openServerStore } from './server-store.js';

declare const Deno: {
  version: { deno: string };
  env: { toObject(): Record<string, string> };
  serve(
    options: { port: number; hostname: string; onListen?: (addr: { hostname: string; port: number }) => void },
    handler: (request: Request) => Response | Promise<Response>,
  ): { finished: Promise<void> };
};

const env = Deno.env.toObject();
const config = configFromEnv(env, { generate: true });
const store = config.databaseUrl ? await openServerStore(config.databaseUrl) : await createSqlJsStore();
const tryItStore = config.demo ? await createSqlJsStore() : null;
const { app } = createDemoApp({ store, tryItStore, auth: config.auth, cors: config.cors });
const hostname = env['HOST'] || '127.0.0.1';
const port = Number(env['PORT'] ?? 8787);
Deno.serve({
  port,
  hostname,
  onListen(addr) {
    const storeName = config.databaseUrl ? describeUrl(config.databaseUrl) : 'sql.js in memory (gone when the process exits)';
    console.log(startupBanner(config, { url: `http://${addr.hostname}:${addr.port}`, store: storeName, runtime: `deno ${Deno.version.deno}` }));
  },
}, (request) => app.fetch(request));
