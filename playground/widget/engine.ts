/**
 * What `<ctrlrun-try-it>` loads when it starts (in view, or first used): sql.js and its wasm, the
 * kernel's try-it module over a sql.js store, and the calls the page and the element share.
 * The element imports this dynamically: in the one-file build it is inlined; in the split build
 * (`buildWidget(dir, { split: true })`) it is a chunk fetched with the wasm.
 *
 * @module
 */
import initSqlJs from 'sql.js';
import type { Policy } from '@ctrlrun/kernel';
import { createTryIt, type TryIt } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore, type SqlJsModule, type SqlJsStore } from '@ctrlrun/store-sqljs';
import { policyOf } from '../src/machinery.js';

export { TRY_IT_POLICY_YAML } from '@ctrlrun/kernel/try-it';
export { canonicalAction, decidingRule, evaluateRule, protectCall } from '../src/machinery.js';
export { approveRequest, chainView, resolveAs, runRefundForm } from '../src/session.js';

/** One element's running kernel. */
export interface Live {
  store: SqlJsStore;
  tryIt: TryIt;
  /** The loaded policy (for the rule that decided). */
  policy: Policy;
}

/** One sql.js per wasm URL and page: the wasm is fetched and compiled once, however many elements. */
const sqlModules = new Map<string, Promise<SqlJsModule>>();

/** sql.js with its wasm from `wasmUrl` (fetched and compiled on the first call). */
export function sqlFor(wasmUrl: string): Promise<SqlJsModule> {
  let found = sqlModules.get(wasmUrl);
  if (!found) {
    found = (initSqlJs({ locateFile: () => wasmUrl }) as Promise<unknown> as Promise<SqlJsModule>).catch((err: unknown) => {
      sqlModules.delete(wasmUrl);
      throw err;
    });
    sqlModules.set(wasmUrl, found);
  }
  return found;
}

/** A fresh in-memory store and the try-it module over it, under `policyYaml` (a bad policy throws the kernel's PolicyError). */
export async function openLive(policyYaml: string, wasmUrl: string): Promise<Live> {
  const store = await createSqlJsStore({ SQL: await sqlFor(wasmUrl) });
  try {
    const tryIt = createTryIt({ store, policyYaml });
    return { store, tryIt, policy: policyOf(tryIt.policyYaml) };
  } catch (err) {
    await store.close();
    throw err;
  }
}
