/**
 * The app on Deno, as both Deno entries serve it (`deno.ts` on `Deno.serve`, `deno-serve.ts` for
 * `deno serve`): the configuration of `settings.ts` (config file through `--config PATH` or
 * `CTRLRUN_CONFIG_FILE`), and the store `DATABASE_URL` names.
 *
 * Stores on Deno: `postgres://…` (PostgreSQL through `pg`) for a server; for a local file store,
 * `pglite:DIR` (PostgreSQL in WebAssembly, kept in a directory; one process at a time). A SQLite
 * file (`sqlite:PATH`) needs better-sqlite3, a native addon Deno cannot load, and is refused with
 * that advice. Without `DATABASE_URL`, sql.js in memory (gone when the process exits).
 *
 * @module
 */
import { maskUrl, type StateStore } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import type { App } from '../app.js';
import { createConfiguredApp } from '../configured.js';
import { createFakeRemote } from '../demo.js';
import { openServerStore } from './server-store.js';
import { loadWorkerSettings, settingsBanner } from '../settings.js';

declare const Deno: {
  version: { deno: string };
  exit(code: number): never;
  env: { toObject(): Record<string, string> };
  args: string[];
  cwd(): string;
  readTextFile(path: string): Promise<string>;
  addSignalListener(signal: 'SIGINT' | 'SIGTERM', handler: () => void): void;
};

/** A one-line error on stderr and exit 1. */
function fail(message: string): never {
  console.error(`error: ${message}`);
  return Deno.exit(1);
}

/** A server store, or a one-line error and exit 1: a SQLite file needs better-sqlite3, which Deno cannot load. */
async function openDatabase(url: string): Promise<StateStore> {
  try {
    return await openServerStore(url);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const hint = /better-sqlite3/.test(message)
      ? ' (on Deno, DATABASE_URL may be postgres://… or pglite:…; a SQLite file needs better-sqlite3, a native addon Deno cannot load)'
      : '';
    return fail(`DATABASE_URL ${maskUrl(url)}: ${message}${hint}`);
  }
}

/** Reads the configuration and opens the store; `banner(url)` is what to print once listening. */
export async function denoApp(): Promise<{ app: App; banner(url: string): string }> {
  const env = Deno.env.toObject();
  const flag = Deno.args.indexOf('--config');
  const configPath = flag >= 0 ? (Deno.args[flag + 1] ?? fail('--config needs a path')) : null;
  const settings = await loadWorkerSettings(env, {
    generate: true,
    configPath,
    runtime: {
      readText: (path) => Deno.readTextFile(path),
      importModule: async (path) => (await import(new URL(path, `file://${Deno.cwd()}/`).href)) as Record<string, unknown>,
    },
    demoExecutors: createFakeRemote().executors,
  }).catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
  const store = settings.databaseUrl ? await openDatabase(settings.databaseUrl) : await createSqlJsStore();
  const tryItStore = settings.demo ? await createSqlJsStore() : null;
  const { app, control } = createConfiguredApp(settings, { store, tryItStore });
  // Close the stores before exiting: PGlite writes its directory out on close.
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void Promise.allSettled([store.close(), tryItStore?.close()]).finally(() => Deno.exit(0));
  };
  Deno.addSignalListener('SIGINT', stop);
  Deno.addSignalListener('SIGTERM', stop);
  const storeName = settings.databaseUrl ? maskUrl(settings.databaseUrl) : 'sql.js in memory (gone when the process exits)';
  return { app, banner: (url) => settingsBanner(settings, { url, store: storeName, runtime: `deno ${Deno.version.deno}`, policyHash: control.policyHash }) };
}
