/**
 * `DATABASE_URL` on Node and Deno: a server store from `@ctrlrun/store-node`'s `openStore(url)`
 * (a SQLite path or `sqlite:PATH`, `postgres://…`, `pglite:`). Imported only when the variable
 * is set, so the app itself never depends on store-node (workerd cannot load it).
 *
 * @module
 */
import { InvalidArgument, MissingDependency, type StateStore } from '@ctrlrun/kernel';

/** Opens the store `url` names through `@ctrlrun/store-node`. */
export async function openServerStore(url: string): Promise<StateStore> {
  // A variable specifier: bundlers leave it alone, and the type does not tie the app to store-node.
  const specifier = '@ctrlrun/store-node';
  let mod: { openStore?: unknown };
  try {
    mod = (await import(specifier)) as { openStore?: unknown };
  } catch (err) {
    throw new MissingDependency(specifier, specifier, { message: `DATABASE_URL is set but ${specifier} could not be loaded (${err instanceof Error ? err.message : String(err)}): npm install ${specifier}` });
  }
  if (typeof mod.openStore !== 'function') {
    throw new InvalidArgument(`DATABASE_URL is set but this build of ${specifier} has no openStore(url); unset DATABASE_URL to use the in-memory sql.js store`);
  }
  return (await (mod.openStore as (url: string) => Promise<StateStore>)(url));
}

/** `DATABASE_URL` with any password masked, for the startup lines. */
export function describeUrl(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@/]*@/, '//$1:***@');
}
