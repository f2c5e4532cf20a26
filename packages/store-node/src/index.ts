/**
 * `@ctrlrun/store-node`: ctrlrun state stores for servers. `openStore(url)` opens any of them by
 * address; each driver also has its own subpath (`@ctrlrun/store-node/better-sqlite3`, …), and
 * each driver library is an optional peer dependency, imported only when used.
 *
 * @module
 */
export { ACCEPTED_STORE_URLS, openStore, parseStoreUrl, type OpenStoreOptions, type StoreAddress } from './open-store.js';
export {
  BUSY_TIMEOUT_MS,
  BetterSqlite3Driver,
  BetterSqlite3Store,
  createBetterSqlite3Store,
  type BetterSqlite3Constructor,
  type BetterSqlite3Database,
  type BetterSqlite3Statement,
  type BetterSqlite3StoreOptions,
} from './sqlite/better-sqlite3.js';
export {
  PgDriver,
  PgStore,
  createPgStore,
  openPgStore,
  type PgClientLike,
  type PgDriverOptions,
  type PgPoolClientLike,
  type PgPoolLike,
  type PgResultLike,
  type PgStandaloneClientLike,
  type PgStoreOptions,
} from './postgres/pg.js';
export {
  PgliteDriver,
  PgliteStore,
  createPgliteStore,
  openPgliteStore,
  type PgliteDriverOptions,
  type PgliteLike,
  type PgliteResultLike,
  type PgliteStoreOptions,
  type PgliteTransactionLike,
} from './pglite/pglite.js';
export { jsonlFileSink, jsonlFileWriter, type JsonlFileOptions, type JsonlFileWriter } from './files/jsonl-file.js';
export { currentContext, withApproval, withContext } from './context.js';
export {
  environmentFromEnv,
  FileControl,
  fromFile,
  loadPolicyFile,
  POLICY_FILE,
  policyFilePath,
  readPolicyText,
  STATE_DIR,
  STATE_FILE,
  stateFilePath,
  type DiscoveryOptions,
  type FromFileOptions,
} from './files/from-file.js';
export {
  appendRegularFile,
  MAX_INPUT_BYTES,
  readRegularFile,
  UnreadableFile,
  type ReadRegularFileOptions,
  type UnreadableReason,
} from './files/regular-file.js';
export { jsonlAnchorProvider, type JsonlAnchorOptions } from './files/anchor-file.js';
