/**
 * `DATABASE_URL` on Node and Deno: a server store from `@ctrlrun/store-node`'s `openStore(url)`
 * (a SQLite path or `sqlite:PATH`, `postgres://…`, `pglite:`). Imported only when the variable
 * is set, so the app itself never depends on store-node (workerd cannot load it).
 *
 * @module
 */
import { MissingDependency, type StateStore } from '@ctrlrun/kernel';

/** Opens the store `url` names through `@ctrlrun/store-node`. */
export async function openServerStore(url: string): Promise<StateStore> {
  let mod: typeof import('@ctrlrun/store-node');
  try {
    mod = await import('@ctrlrun/store-node');
  } catch (err) {
    throw new MissingDependency('@ctrlrun/store-node', '@ctrlrun/store-node', {
      message: `DATABASE_URL is set but @ctrlrun/store-node could not be loaded (${err instanceof Error ? err.message : String(err)}): npm install @ctrlrun/store-node`,
    });
  }
  return mod.openStore(url);
}
