/**
 * `@ctrlrun/kernel/store`: what a driver or store author needs, and nothing an application should.
 *
 * - the driver contract (`SqlDriver`, `QueryResult`, …) a database client implements;
 * - the `StateStore` protocol and `SqlStateStore`, its one SQL implementation, with the two
 *   dialects (`sqliteDialect`, `postgresDialect`), the migrations and the lost-COMMIT rules;
 * - `Mutex` for single-connection engines;
 * - the pure planners a store calls inside its transactions (reservation, approval consumption,
 *   lease extension, continuations, receipt sealing, the chain's genesis hash and time format);
 * - `useSha256Digest`, for a host whose own SHA-256 is quicker than the built-in one.
 *
 * @module
 */
export type { Dialect, SqlValue, QueryResult, SqlExecutor, SqlDriver, DriverCapabilities } from './store/driver.js';
export { transactionExecutor, type TransactionStatements } from './store/transaction-executor.js';
// Rows as stored: an action's action_json, a delegation's grant_json, the receipt document's keys.
export { actionFromJson } from './action.js';
export { grantFromJson, grantToJson } from './authority/index.js';
export { RECEIPT_KEYS, RECEIPT_EDIT_KEYS } from './receipt.js';
export type { StateStore, TrailingEvents, TakenContinuation, DelegationRecord, ApprovalEditWrite, ApprovalEditResult } from './store/state-store.js';
export type * from './model.js';
export { Mutex } from './store/mutex.js';
export { SqlStateStore, openSqlStateStore, type SqlStateStoreOptions, type SqlDialect, type DialectSql } from './store/sql-state-store.js';
export { sqliteDialect } from './store/sqlite.js';
export { postgresDialect, quoteIdentifier, commitErrorOutcome, standaloneErrorOutcome, FAILED_WRITE_SQLSTATES, MIGRATION_LOCK_KEY } from './store/postgres.js';
export {
  INSERT_LANDED,
  INSERT_LOST_REISSUE,
  INSERT_FOUND_OTHER,
  UPDATE_LANDED,
  UPDATE_LOST_REISSUE,
  UPDATE_FOUND_OTHER,
  LOST_COMMIT_BRANCHES,
  WRITTEN_COLUMNS,
  type LostCommitBranch,
  type InsertBranch,
  type UpdateBranch,
  type EffectWriteIntent,
  sameWrittenColumns,
  lostInsertBranch,
  lostUpdateBranch,
  lostCommitBranch,
  type EditBranch,
  type EditWriteIntent,
} from './store/lost-commit.js';
export {
  MIGRATION_IDS,
  SCHEMA_WRITER,
  type MigrationId,
  type AppliedMigration,
  type MigrateOptions,
  classifyVersioned,
  classifyUnversioned,
  checkMigrationList,
  migrate,
} from './store/migrations.js';
export { LEASE_EXPIRED, type ReservationPlan, planReservation, checked, planLeaseExtension } from './effects.js';
export { type ApprovalPlan, checkConsumable, checkAnswerable } from './approvals.js';
export { type ReceiptResult, type ReceiptFields, buildReceipt, pendingReceiptDocument, sealReceipt } from './receipt.js';
export { offChainReceiptPages, receiptPages } from './chain-pages.js';
export { GENESIS_HASH, hashDocument, sha256Tagged, useSha256Digest, type Sha256Digest, type Sha256TextDigest } from './hash.js';
export { evidenceTime, storedTime, parseTime } from './time.js';
export { dispatchToSinks } from './events.js';
