/**
 * `@ctrlrun/store-sqljs`: the ctrlrun state store on sql.js (SQLite in WebAssembly), in memory
 * by default, or persisted to IndexedDB or any `load`/`save` pair. Runs in browsers, workerd,
 * Deno and Node; imports no Node API.
 *
 * @module
 */
import { InvalidArgument } from '@ctrlrun/kernel';
import { openSqlJsStore, type SqlJsModule, type SqlJsStore, type SqlJsStoreOptions } from './sql-js.js';

export {
  SqlJsDriver,
  SqlJsStore,
  openSqlJsStore,
  type SqlJsDatabase,
  type SqlJsModule,
  type SqlJsPersistence,
  type SqlJsStatement,
  type SqlJsStoreOptions,
} from './sql-js.js';
export { indexedDbPersistence, PAGE_BYTES, type IndexedDbPersistence, type IndexedDbPersistenceOptions } from './indexeddb.js';

/** What sql.js's `initSqlJs` accepts, as far as the store passes it on. */
export interface SqlJsConfig {
  locateFile?: (file: string, prefix: string) => string;
  wasmBinary?: ArrayBuffer | Uint8Array;
}

/** Options of {@link createSqlJsStore}. */
export interface CreateSqlJsStoreOptions extends SqlJsStoreOptions {
  /** An initialised sql.js module, or a promise of one (browsers and workerd load their own wasm). */
  SQL?: SqlJsModule | Promise<SqlJsModule>;
  /** sql.js's `initSqlJs` (or a wrapper); called with `locateFile`/`wasmBinary`. */
  initSqlJs?: (config?: SqlJsConfig) => Promise<SqlJsModule>;
  /** Where sql.js finds its `.wasm` (passed to `initSqlJs`). */
  locateFile?: (file: string, prefix: string) => string;
  /** The `.wasm` bytes (passed to `initSqlJs`). */
  wasmBinary?: ArrayBuffer | Uint8Array;
}

let defaultModule: Promise<SqlJsModule> | undefined;

async function importInit(): Promise<(config?: SqlJsConfig) => Promise<SqlJsModule>> {
  const mod = (await import('sql.js')) as unknown as { default?: unknown };
  const init = (typeof mod.default === 'function' ? mod.default : mod) as unknown;
  if (typeof init !== 'function') throw new InvalidArgument('sql.js did not export initSqlJs');
  return init as (config?: SqlJsConfig) => Promise<SqlJsModule>;
}

function sqlModule(options: CreateSqlJsStoreOptions): Promise<SqlJsModule> {
  if (options.SQL !== undefined) return Promise.resolve(options.SQL);
  const config: SqlJsConfig = {};
  if (options.locateFile) config.locateFile = options.locateFile;
  if (options.wasmBinary) config.wasmBinary = options.wasmBinary;
  if (options.initSqlJs) return options.initSqlJs(config);
  if (config.locateFile || config.wasmBinary) return importInit().then((init) => init(config));
  // The plain default is shared: instantiating the wasm once per process is enough.
  return (defaultModule ??= importInit()
    .then((init) => init())
    .catch((err: unknown) => {
      defaultModule = undefined;
      throw err;
    }));
}

/**
 * Creates a ctrlrun state store on sql.js, migrated and ready. In memory unless `persistence`
 * is given (then loaded at open and saved after every committed write). Without `SQL` or
 * `initSqlJs` it imports `sql.js` itself.
 *
 * @example
 * const store = await createSqlJsStore();                                       // in memory
 * const kept = await createSqlJsStore({ persistence: indexedDbPersistence('ctrlrun') });
 */
export async function createSqlJsStore(options: CreateSqlJsStoreOptions = {}): Promise<SqlJsStore> {
  if (typeof options !== 'object' || options === null) throw new InvalidArgument('createSqlJsStore options must be an object');
  return openSqlJsStore(await sqlModule(options), options);
}
