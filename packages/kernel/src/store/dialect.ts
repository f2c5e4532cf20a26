/**
 * The dialect contract: every statement the SQL store sends, in one SQL family's text, and how
 * that family's engine reports the few things the store must recognise. `sqlite.ts` and
 * `postgres.ts` each implement it; nothing else in the store is dialect-specific.
 *
 * @module
 */
import type { BudgetSql } from './budget-sql.js';
import type { Dialect } from './driver.js';
import type { RetentionSql } from './retention-sql.js';

/**
 * Every migration this build knows, in order: the Python original's eight, as its 0.12.2 release
 * records them (spec 05 §1). Both dialects carry exactly these ids; an id the original does not
 * know would make it refuse the store for ever.
 */
export const MIGRATION_IDS = [
  '0001_baseline',
  '0002_receipt_chain',
  '0003_resolved_by',
  '0004_policy_provenance',
  '0005_precondition_fingerprint',
  '0006_verified_approver',
  '0007_budget_ledger',
  '0008_anchor_checkpoint_hold',
] as const;

/** One known migration id. */
export type MigrationId = (typeof MIGRATION_IDS)[number];

/**
 * Every statement the store sends, in one dialect's text and placeholder style. Parameters are
 * positional and in the order each member's TSDoc gives; a new dialect writes the same
 * statements with the same parameter order (and `rowsAffected` semantics), never a translation.
 */
export interface DialectSql {
  /** One row `{ version }`, or `null` when the engine needs no check. */
  readonly serverVersion: string | null;
  /** Catalogue: one row if `schema_version` exists, none otherwise. */
  readonly schemaVersionExists: string;
  /**
   * Catalogue: `{ name }` of every user table, by name: not the engine's own, nor a host
   * platform's (a Durable Object's `_cf_KV`), which never make a database foreign.
   */
  readonly listTables: string;
  /** Catalogue: `{ name }` of every column of table `?1`. */
  readonly tableColumns: string;
  /** `CREATE TABLE IF NOT EXISTS schema_version(…)` (spec 03 §1). */
  readonly createSchemaVersion: string;
  /** `{ migration_id, applied_at, ctrlrun_version }` by `migration_id`. */
  readonly readSchemaVersion: string;
  /** Params: migration_id, applied_at, ctrlrun_version. */
  readonly insertSchemaVersion: string;
  /** Run first in each migration transaction (Postgres: the advisory lock), or `null`. */
  readonly migrationLock: string | null;
  /**
   * Before migrating, one row the dialect's `checkMigrationPrivilege` judges (Postgres: the
   * schema, the role and `has_schema_privilege(schema, 'CREATE')`); absent when the engine has no
   * privileges to check.
   */
  readonly migrationPrivilege?: string | null;

  /** Params: effect_key. Every effect column. */
  readonly selectEffect: string;
  /**
   * Params: effect_key, state, action_id, attempt, lease_expires_at, created_at, updated_at.
   * A key collision may raise a unique violation (SQLite) or affect 0 rows (`ON CONFLICT DO
   * NOTHING`, as Postgres must, since an error aborts its transaction): both mean "someone
   * else's row landed first", and the store re-plans once on the re-read row.
   */
  readonly insertEffect: string;
  /**
   * Optional: {@link insertEffect} that affects 0 rows on a key collision and never raises, for a
   * dialect whose write transaction already excludes every other writer (SQLite's `BEGIN
   * IMMEDIATE`). Present: a reservation inserts first and reads the key only when the row was
   * there already (the common new key costs one statement, not two); the outcome is the same,
   * since nobody can write between the two. Absent: read, plan, then insert.
   */
  readonly insertEffectIfAbsent?: string;
  /** Params: state, action_id, attempt, lease_expires_at, updated_at, effect_key, prior attempt (only if still `failed`). */
  readonly renewEffect: string;
  /**
   * Compare-and-set of a whole record. Params: state, action_id, attempt, lease_expires_at,
   * result_json, error, updated_at, resolved_by, then the read row's effect_key, state,
   * action_id, attempt.
   */
  readonly updateEffect: string;
  /**
   * Optional: {@link updateEffect} that also requires the row's lease_expires_at, created_at and
   * updated_at to be three more parameters (after the twelve), compared null-safely — the
   * compare-and-set of a prior the kernel remembers writing rather than one it read in this
   * transaction. Absent: the kernel always reads the row first.
   */
  readonly updateEffectExact?: string;
  /** Every effect, by `created_at` (dialect tie-break). */
  readonly listEffects: string;
  /** Params: state. As {@link listEffects}. */
  readonly listEffectsInState: string;

  /**
   * Params: approval_id, action_hash, action_json, created_at, expires_at, policy_hash_at_approval,
   * approvals_required (an integer ≥ 1), precondition_fingerprint (or null), required_roles (its
   * JSON text, or null). Status `pending`.
   */
  readonly insertApproval: string;
  /** Params: approval_id. Every approval column. */
  readonly selectApproval: string;
  /** Params: status, approver, granted_at, approval_id (only if still `pending`). */
  readonly answerApproval: string;
  /**
   * One counted answer (the original's `count_grant` write). Params: status, approver, granted_at,
   * approvers (its §4.1 text, or null), approval_id, the approvers text read (or null). Only if
   * still `pending` with the approvers read (a compare-and-set on both).
   */
  readonly countApproval: string;
  /** Params: approval_id, the status read (only if still that status). */
  readonly expireApproval: string;
  /** Params: consumed_at, approval_id (only if still `granted`). */
  readonly consumeApproval: string;
  /** Params: action_hash. Oldest first. */
  readonly approvalsFor: string;
  /** Params: action_hash, status. Newest first. */
  readonly newestApprovalsFor: string;
  /** Every approval, oldest first. */
  readonly listApprovals: string;
  /** Params: status. Oldest first. */
  readonly listApprovalsInStatus: string;

  /** Params: ts, type, action_id, effect_key, approval_id, data_json. Returns `{ event_id }`. */
  readonly insertEvent: string;
  /**
   * Optional: {@link insertEvent} for `n` rows in one statement (params: the six of each row, row
   * after row), returning one `{ event_id }` per row; ids are assigned in row order. Absent: one
   * statement per event.
   */
  insertEvents?(n: number): string;
  /**
   * Optional, with {@link updateEffectWithTrail}: {@link insertEffect} and, only if the row was
   * inserted, `n` events ({@link insertEvents}' parameters after the seven), as one statement.
   * Rows `{ k, n }`: `k = 'effect'` once if the row was inserted, `k = 'event'` with `n` = each
   * new `event_id` (ids assigned in row order).
   */
  insertEffectWithEvents?(n: number): string;
  /**
   * Optional: {@link updateEffect}'s compare-and-set (its twelve parameters) and, only if it
   * applied, `n` events (six parameters each) and, `withReceipt`, the chained receipt, as one
   * statement. Receipt parameters: receipt_id, action_id, effect_key, result, ts, then the stored
   * JSON's three parts and its order flag (1 when `seq` comes first), then the canonical text's
   * three parts and flag: the server takes the head row's lock, splices `seq` (the head's + 1)
   * and `prev_hash` (the head's hash) between the parts, hashes the canonical text
   * (`sha256:` + hex), inserts the receipt and advances the head — only when the head's values
   * need no escaping (seq a safe integer, hash `sha256:` + 64 hex). Rows `{ k, n, a, b, j }`:
   * `effect` once if applied; `event` with `n` = each new id; `head` once if the head was locked
   * and its values usable; `receipt` with `n` = seq, `a` = prev_hash, `b` = hash, `j` = json if
   * inserted (absent on a receipt id already stored: then the head did not advance).
   * `exact`: the compare-and-set also requires the row's lease_expires_at, created_at and
   * updated_at to be three more parameters, after all the others (for a prior the kernel did not
   * read in this transaction).
   */
  updateEffectWithTrail?(n: number, withReceipt: boolean, exact?: boolean): string;
  /**
   * Optional: an outcome and its receipt, sealed by the kernel on the chain head it expects, as
   * one statement that stands alone (its own implicit transaction). It locks the head row; only
   * if the head is the expected one does it run {@link updateEffect}'s compare-and-set with
   * `exact`'s three more columns; only if that applied, `n` events, the receipt, and the head
   * advanced to the receipt's seq and hash. Parameters: the expected head's seq and hash; the
   * fifteen of the exact compare-and-set; six per event; then receipt_id, action_id, effect_key,
   * result, json, ts, seq, prev_hash, hash. Rows `{ k, n, a }`: `head` once with the head as
   * locked (`n` = seq, `a` = hash); `effect` once if applied; `event` with `n` = each new id;
   * `receipt` once if inserted; `advanced` once if the head was moved to the receipt. A receipt id
   * already stored is an error (nothing written).
   */
  appendOutcome?(n: number): string;
  /** Every event by `event_id`. */
  readonly listEvents: string;
  /**
   * Optional: params action_id, limit. The newest such events (as {@link listEvents}), newest first:
   * how a lost COMMIT's re-read finds the events it landed (with {@link appendOutcome}, and a
   * receipt written on its own).
   */
  readonly newestEventsOf?: string;
  /** Params: action_id, type. The newest such event's columns (as {@link listEvents}), or no row. */
  readonly lastEvent: string;
  /**
   * Optional. Params: approval_id, type. The newest such event's columns (as {@link listEvents}),
   * or no row (an edit-then-approve is found from either request id this way). Absent: the
   * store filters {@link listEvents}.
   */
  readonly lastApprovalEvent?: string;

  /** Locks and advances the head row; returns `{ seq, hash }` (the new seq, the previous hash). */
  readonly lockChainHead: string;
  /** Params: receipt_id, action_id, effect_key, result, json, ts, seq, prev_hash, hash. */
  readonly insertReceipt: string;
  /**
   * Params: receipt_id. Every receipt column. Present when `insertReceipt` affects 0 rows on a
   * receipt id already stored (Postgres `ON CONFLICT (receipt_id) DO NOTHING`): the store then
   * rolls back — the head never advances without its row — and returns the stored receipt.
   * Absent: a collision is an `InvalidArgument`.
   */
  readonly selectReceipt?: string;
  /**
   * Params: json, seq, prev_hash, hash, receipt_id, json, hash. Chains a pending receipt (see
   * `pendingReceipt`): sets `json` and the three chain columns of the row with that id that has
   * no `seq` or `prev_hash`, whose `json` and `hash` are the pending ones given; affects 0 rows
   * when there is no such row.
   */
  readonly chainPendingReceipt: string;
  /** Params: hash. */
  readonly setChainHash: string;
  /** `{ seq, hash }` of the head row. */
  readonly selectChainHead: string;
  /** `{ seq, hash }` of the original's prune checkpoint row (spec 05 §5.3), when it pruned the chain. */
  readonly selectPruneCheckpoint: string;
  /** Every receipt row by `seq`, null `seq` first. */
  readonly listReceipts: string;
  /** Params: seq, limit. Rows with `seq` greater, by `seq` (unique: walked on its index), at most `limit`. */
  readonly receiptsAfter: string;
  /** Params: receipt_id. Every receipt column. */
  readonly receiptById: string;
  /**
   * Params: seq, seq, receipt_id, limit. Receipt rows whose `seq` is an integer within ±(2^53 − 1), after that
   * position in `(seq, receipt_id)` order, in that order, at most `limit` (a streaming walk).
   */
  readonly receiptsInChain: string;
  /** Params: limit. The last `limit` rows of {@link receiptsInChain}'s order, in that order. */
  readonly newestReceiptsInChain: string;
  /** Params: receipt_id, limit. Receipt rows whose `seq` is not such an integer (null: unchained), by `receipt_id` after it. */
  readonly receiptsOffChain: string;
  /**
   * Params: state, state (or null, null for all), created_at, effect_key, limit. Effects after that position in
   * `(COALESCE(created_at, ''), effect_key)` order, in that order, at most `limit`.
   */
  readonly effectsPage: string;
  /** Params: state, state (or null, null for all), limit. The last `limit` rows of {@link effectsPage}'s order, in that order. */
  readonly newestEffects: string;
  /**
   * Params: created_at, approval_id, limit. Approvals after that position in
   * `(COALESCE(created_at, ''), approval_id)` order, in that order, at most `limit`.
   */
  readonly approvalsPage: string;
  /** Params: status, created_at, approval_id, limit. As {@link approvalsPage}, only `status`. */
  readonly approvalsPageInStatus: string;
  /**
   * Params: now (a stored timestamp), agent, user (or null). `{ n }`: pending requests not yet
   * expired whose `action_json` principal is that agent and user (a row whose JSON cannot be read
   * is not counted).
   */
  readonly countPendingFor: string;

  /**
   * A plain INSERT, never an upsert. Params: delegation_id, parent_id, depth, grant_json,
   * created_by_agent, created_by_user, created_via, created_at, revoked_at, revoked_by. An
   * existing id raises a unique violation or affects 0 rows; both are refused.
   */
  readonly insertDelegation: string;
  /** Params: delegation_id. Every delegation column. */
  readonly selectDelegation: string;
  /** Params: parent_id. Every delegation column, oldest first. */
  readonly delegationsFor: string;
  /** Every delegation, oldest first. */
  readonly listDelegations: string;
  /** Every unrevoked delegation, oldest first. */
  readonly listLiveDelegations: string;
  /** Params: revoked_at, revoked_by, delegation_id (only if not yet revoked). */
  readonly revokeDelegation: string;

  /** Params: effect_key. `{ effect_key, action_id, action_json, continuation, rounds }`. */
  readonly selectContinuation: string;
  /** Params: continuation (never matches the taken value `''`). As {@link selectContinuation}. */
  readonly selectContinuationByValue: string;
  /**
   * Params: effect_key, action_id, action_json, continuation, rounds, updated_at. A collision on
   * the key or on the held value affects 0 rows (never an error: the transaction lives on).
   */
  readonly insertContinuation: string;
  /**
   * Compare-and-set of a held row. Params: action_id, action_json, continuation, rounds,
   * updated_at, then the read row's effect_key, action_id, rounds. A collision affects 0 rows.
   */
  readonly updateContinuation: string;
  /** Consumes a held value. Params: updated_at, effect_key, continuation (only if still held). */
  readonly takeContinuation: string;

  /**
   * Releases the budget charges of an effect that reached `failed` (the original's ledger, spec 05
   * §5.1), in the transaction that moved it there. Params: released_at (stored time), effect_key.
   * Only unreleased rows: a release is never repeated, and no row is otherwise changed.
   */
  readonly releaseCharges: string;
  /** The budget ledger's predicate, charge rows and reads (spec 05 §5.1; `budget-sql.ts`). */
  readonly budget: BudgetSql;

  /** The prune, its checkpoint, holds and the anchors cache (spec 05 §5.2–§5.4; `retention-sql.ts`). */
  readonly retention: RetentionSql;

  /**
   * Operator sessions ended before their expiry (the inbox's sign-out), in a table of this
   * build's own, `inbox_sessions_ended`. No migration creates it (a migration id the original
   * does not know would make it refuse the store): the first sign-out does, in an open, versioned
   * store, which this build and the original judge by `schema_version` alone (spec 03 §2.1,
   * 05 §1.5), so the table is inert to both.
   */
  readonly sessionsEnded: {
    /** Catalogue: one row if the table exists, none otherwise. */
    readonly exists: string;
    /** `CREATE TABLE IF NOT EXISTS`, run after {@link migrationLock} in the writing transaction. */
    readonly create: string;
    /** Params: session_id, ended_at, expires_ms. An id already there affects 0 rows. */
    readonly insert: string;
    /** Params: now_ms. Drops the rows whose session has expired anyway. */
    readonly prune: string;
    /** Params: session_id. One row if that session was ended. */
    readonly select: string;
  };
}

/** One SQL family's text: migration DDL, statements, and how its engine reports two things. */
export interface SqlDialect {
  /** The family, matched against {@link SqlDriver.dialect}. */
  readonly name: Dialect;
  /** The DDL of each migration, statement by statement; every id of `MIGRATION_IDS`. */
  readonly migrations: Readonly<Record<MigrationId, readonly string[]>>;
  /** Every other statement. */
  readonly sql: DialectSql;
  /**
   * Postgres: classify and apply every pending migration in one transaction, after
   * `migrationLock`, with the catalogue read inside it (spec 03 §2.2). Otherwise each migration
   * runs in its own transaction and the classification reads outside one.
   */
  readonly migrateInOneTransaction?: boolean;
  /**
   * Why the engine (the `serverVersion` row: its `version`, and whatever else the dialect
   * selects, e.g. the Postgres database encoding) is refused, or `null` if it is fine.
   */
  checkServerVersion(version: string, row?: Readonly<Record<string, unknown>>): string | null;
  /** Why the `migrationPrivilege` row forbids migrating (naming the missing grant), or `null`. */
  checkMigrationPrivilege?(row: Readonly<Record<string, unknown>>): string | null;
  /** Whether a server of this version (the `serverVersion` row's) can seal receipts in {@link DialectSql.updateEffectWithTrail}. */
  sealsReceipts?(version: string): boolean;
  /** Whether a driver error (or its `cause` chain) is a unique/primary-key violation. */
  isUniqueViolation(err: unknown): boolean;
}
