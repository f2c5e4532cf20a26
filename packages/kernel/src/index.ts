/**
 * `@ctrlrun/kernel`: the last check before an AI agent does something it can't undo.
 *
 * @module
 */
export * from './errors.js';
export { canonicalBytes, canonicalJson, compareCodePoints, parseJson, jsonEquals, orderedJson, type JsonValue, type JsonObject } from './canonical.js';
export { GENESIS_HASH, hashDocument, sha256Tagged } from './hash.js';
export { type Clock, systemClock, evidenceTime, storedTime, parseTime, MINUTE } from './time.js';
export { type IdPrefix, type IdSource, randomIds, sequentialIds } from './ids.js';
export { ACTION_SCHEMA, DEFAULT_ENVIRONMENT, type Action, type ActionInput, type Principal, createAction, createPrincipal, actionHash, actionToJson, actionFromJson, principalJson } from './action.js';
export * from './model.js';
export { LEASE_EXPIRED, type ReservationPlan, planReservation, checked, checkActor, checkResolvable, planLeaseExtension, planContinuationHold, checkTakeable, checkContinuation, sameSecret, UNKNOWN_CONTINUATION, leaseLive, resultToJson, resolutionError } from './effects.js';
export { type ApprovalPlan, checkConsumable, checkAnswerable } from './approvals.js';
export { RECEIPT_SCHEMA, type ReceiptResult, type ReceiptFields, buildReceipt, sealReceipt } from './receipt.js';
export { type ChainBreakName, type ChainBreak, type ChainReport, type ReceiptView, receiptView, verifyChain } from './chain.js';
export { type ActionEntry, type CanonicalAuthority, type CanonicalGrant, type Condition, type Decision, type Evaluation, type HashForOptions, type LoadPolicyOptions, type Operator, type PolicyControl, type PolicySchema, type Template, type TemplatePart, BARE_DECISION, DECISIONS, DERIVED_SUBJECTS, EXAMPLE_POLICY_YAML, NO_MATCHING_RULE, explainDecision, POLICY_SCHEMAS, Policy, RESERVED_ARGUMENTS, RESOURCE_PLACEHOLDER, UNKNOWN_ACTION, loadPolicy, loadPolicyDocument, parseTemplate, resolveEffectTemplate, resolveResourceTemplate, splitConditionKey, strictEquals } from './policy/index.js';
export { type Bypass, type CheckPolicyOptions, type PolicyFinding, type PolicyFindingCode, checkPolicy, foldForExclusion } from './policy/index.js';
export { type EventSink, type SinkLogger, type JsonlFile, type JsonlWriter, callbackSink, eventLine, jsonlSink, dispatchToSinks } from './events.js';
export type { Dialect, SqlValue, QueryResult, SqlExecutor, SqlDriver, DriverCapabilities } from './store/driver.js';
export type { StateStore, TrailingEvents, TakenContinuation } from './store/state-store.js';
export { Mutex } from './store/mutex.js';
export { SqlStateStore, openSqlStateStore, type SqlStateStoreOptions, type SqlDialect, type DialectSql } from './store/sql-state-store.js';
export { sqliteDialect } from './store/sqlite.js';
export { postgresDialect, quoteIdentifier, sqlState, commitErrorOutcome, FAILED_WRITE_SQLSTATES, MIGRATION_LOCK_KEY } from './store/postgres.js';
export { A1_OURS, A1_REINSERT, A1_REFUSE, A2_LANDED, A2_REISSUE, A2_REFUSE, LOST_COMMIT_BRANCHES, WRITTEN_COLUMNS, type LostCommitBranch, type InsertBranch, type UpdateBranch, type EffectWriteIntent, sameWrittenColumns, lostInsertBranch, lostUpdateBranch, lostCommitBranch } from './store/lost-commit.js';
export { MIGRATION_IDS, SCHEMA_LEVEL, SCHEMA_WRITER, type MigrationId, type AppliedMigration, type MigrateOptions, classifyVersioned, classifyUnversioned, checkMigrationList, migrate, readApplied } from './store/migrations.js';
export { Control, type ControlOptions, type DelegateOptions, type ExecuteOptions, type ExecuteResult, type Executor, type ExecutionContext, type Logger, type ReconcileHook, type ResolveOptions, describeError } from './control.js';
export { protect, type ProtectOptions, type CallOptions, type Protected } from './protect.js';
export { answerCommands, type WaitingFor } from './protect.js';
export { type AmbientCall, type AmbientCallProvider, ambientCall, setAmbientCallContext } from './ambient.js';
export { toolRefusal, type ToolRefusal } from './tool-refusal.js';
export { type ApprovalProvider, type ProviderOptions, type ScriptedStep, LocalApprovalProvider, ScriptedApprovalProvider } from './approval-providers.js';
export * from './authority/index.js';
export type { DelegationRecord } from './store/state-store.js';
export { type IdentityContext, type IdentityProvider, type IdentityLogger, type StaticIdentityOptions, type HeaderIdentityOptions, StaticIdentityProvider, HeaderIdentityProvider, normalizeHeaders } from './identity.js';
export { STATS_SCHEMA, type StatsDocument, type StatsOptions, parseSince, stats } from './stats.js';
