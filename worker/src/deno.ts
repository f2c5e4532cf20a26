/**
 * Deno entry: the embedded default on `Deno.serve`. Run the bundle from the repository root
 * (`deno run -A --node-modules-dir=manual`), so `sql.js` and the database drivers resolve from
 * `node_modules`. `PORT` (default 8787; 0 picks one) and
 * `HOST` (default 127.0.0.1). `DATABASE_URL` may name PostgreSQL (`postgres://…`) or PGlite
 * (`pglite:`); a SQLite file needs better-sqlite3, a legacy native addon Deno cannot load.
 *
 * @module
 */
import type { StateStore } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { createConfiguredApp } from './configured.js';
import { createFakeRemote } from './demo.js';
import { loadWorkerSettings, settingsBanner } from './settings.js';
import { describeUrl, openServerStore } from './server-store.js';

declare const Deno: {
  version: { deno: string };
  exit(code: number): never;
  env: { toObject(): Record<string, string> };
  args: string[];
  cwd(): string;
  readTextFile(path: string): Promise<string>;
  serve(
    options: { port: number; hostname: string; onListen?: (addr: { hostname: string; port: number }) => void },
    handler: (request: Request) => Response | Promise<Response>,
  ): { finished: Promise<void> };
};

/** A server store, or a one-line error and exit 1: a SQLite file needs better-sqlite3, which Deno cannot load. */
async function openDatabase(url: string): Promise<StateStore> {
  try {
    return await openServerStore(url);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const hint = /better-sqlite3/.test(message) ? ' (on Deno, DATABASE_URL may be postgres://… or pglite:…; a SQLite file needs better-sqlite3, a native addon Deno cannot load)' : '';
    console.error(`error: DATABASE_URL ${describeUrl(url)}: ${message}${hint}`);
    return Deno.exit(1);
  }
}

const env = Deno.env.toObject();
const flag = Deno.args.indexOf('--config');
const configPath = flag >= 0 ? (Deno.args[flag + 1] ?? null) : null;
const config = await loadWorkerSettings(env, {
  generate: true,
  configPath,
  runtime: {
    readText: (path) => Deno.readTextFile(path),
    importModule: async (path) => (await import(new URL(path, `file://${Deno.cwd()}/`).href)) as Record<string, unknown>,
  },
  demoExecutors: createFakeRemote().executors,
}).catch((err: unknown) => {
  console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
  return Deno.exit(1);
});
const store = config.databaseUrl ? await openDatabase(config.databaseUrl) : await createSqlJsStore();
const tryItStore = config.demo ? await createSqlJsStore() : null;
const { app, control } = createConfiguredApp(config, { store, tryItStore });
const hostname = env['HOST'] || '127.0.0.1';
const port = Number(env['PORT'] ?? 8787);
Deno.serve({
  port,
  hostname,
  onListen(addr) {
    const storeName = config.databaseUrl ? describeUrl(config.databaseUrl) : 'sql.js in memory (gone when the process exits)';
    console.log(settingsBanner(config, { url: `http://${addr.hostname}:${addr.port}`, store: storeName, runtime: `deno ${Deno.version.deno}`, policyHash: control.policyHash }));
  },
}, (request) => app.fetch(request));
