/**
 * `SqlStateStore`: the one implementation of {@link StateStore} over a {@link SqlDriver}, for
 * every SQL family. It reads, asks the kernel's pure planners (`planReservation`, `checked`,
 * `checkResolvable`, `planLeaseExtension`, `checkConsumable`, `checkAnswerable`, `sealReceipt`),
 * and writes what they say, each method in one transaction. The SQL text comes from a
 * {@link SqlDialect}; nothing here is dialect-specific.
 *
 * @module
 */
import { actionFromJson, actionToJson, type Action } from '../action.js';
import { checkAnswerable, checkConsumable } from '../approvals.js';
import { canonicalJson, isPlainObject, isWellFormedString, parseJson, type JsonObject } from '../canonical.js';
import {
  checkActor,
  checkContinuation,
  checked,
  checkResolvable,
  checkTakeable,
  planContinuationHold,
  planLeaseExtension,
  planReservation,
  resolutionError,
  resultToJson,
  sameSecret,
  UNKNOWN_CONTINUATION,
} from '../effects.js';
import {
  AmbiguousWrite,
  ApprovalMismatch,
  CTRLRunError,
  DuplicateEffect,
  InvalidArgument,
  StoreClosedError,
  StoreError,
} from '../errors.js';
import type {
  Approval,
  ApprovalRecord,
  ApprovalRequest,
  ApprovalStatus,
  ChainHead,
  EffectRecord,
  EffectState,
  EventDraft,
  EventRecord,
  EventType,
  ReceiptDraft,
  ReceiptRow,
  Reservation,
  StoredReceipt,
} from '../model.js';
import { sealReceipt } from '../receipt.js';
import { parseTime, storedTime, systemClock, type Clock } from '../time.js';
import type { Dialect, SqlDriver, SqlExecutor, SqlValue } from './driver.js';
import { migrate, readApplied, type AppliedMigration, type MigrationId } from './migrations.js';
import { Mutex } from './mutex.js';
import { sqliteDialect } from './sqlite.js';
import { A1_OURS, A1_REFUSE, A1_REINSERT, A2_LANDED, A2_REFUSE, A2_REISSUE, lostCommitBranch, type EffectWriteIntent } from './lost-commit.js';
import { postgresDialect } from './postgres.js';
import type { Logger } from '../control.js';
import type { DelegationRecord, ReservationStep, StateStore, TakenContinuation, TrailingEvents } from './state-store.js';

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
  /** Catalogue: `{ name }` of every user table, by name. */
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
  /** Params: state, action_id, attempt, lease_expires_at, updated_at, effect_key, prior attempt (only if still `failed`). */
  readonly renewEffect: string;
  /**
   * Compare-and-set of a whole record. Params: state, action_id, attempt, lease_expires_at,
   * result_json, error, updated_at, resolved_by, then the read row's effect_key, state,
   * action_id, attempt.
   */
  readonly updateEffect: string;
  /** Every effect, by `created_at` (dialect tie-break). */
  readonly listEffects: string;
  /** Params: state. As {@link listEffects}. */
  readonly listEffectsInState: string;

  /** Params: approval_id, action_hash, action_json, created_at, expires_at, policy_hash_at_approval (status `pending`). */
  readonly insertApproval: string;
  /** Params: approval_id. Every approval column. */
  readonly selectApproval: string;
  /** Params: status, approver, granted_at, approval_id (only if still `pending`). */
  readonly answerApproval: string;
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
  /** Every event by `event_id`. */
  readonly listEvents: string;
  /** Params: action_id, type. The newest such event's columns (as {@link listEvents}), or no row. */
  readonly lastEvent: string;

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
  /** Params: hash. */
  readonly setChainHash: string;
  /** `{ seq, hash }` of the head row. */
  readonly selectChainHead: string;
  /** Every receipt row by `seq`, null `seq` first. */
  readonly listReceipts: string;
  /** Params: seq, limit. Rows with `seq` greater, by `seq` (unique: walked on its index), at most `limit`. */
  readonly receiptsAfter: string;
  /** Params: receipt_id. Every receipt column. */
  readonly receiptById: string;
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
  /** Whether a driver error (or its `cause` chain) is a unique/primary-key violation. */
  isUniqueViolation(err: unknown): boolean;
}

/** The dialects this build carries, by family (Postgres: the `public` schema). */
const DIALECTS: Partial<Record<Dialect, SqlDialect>> = { sqlite: sqliteDialect, postgres: postgresDialect() };

/** Options of {@link openSqlStateStore}. */
export interface SqlStateStoreOptions {
  /** The clock every decision and stored timestamp uses (the only test seam). */
  clock?: Clock;
  /** Open an up-to-date database only, migrate nothing, and refuse every write. */
  readOnly?: boolean;
  /** The SQL to send; defaults to this build's dialect for `driver.dialect`. */
  dialect?: SqlDialect;
  /**
   * Where the store's warnings go (default `console`): each lost COMMIT resolved by a re-read is
   * logged once, with attributes `{ logger: 'ctrlrun.postgres', level: 'WARNING', branch }`.
   */
  logger?: Logger;
}

/** A refusal whose write must be kept: returned out of the transaction, thrown after commit. */
class RaiseAfterCommit {
  constructor(readonly error: Error) {}
}

/**
 * One write attempt's declaration: the effect row it is about to write, so that a lost COMMIT
 * ({@link AmbiguousWrite} from the driver) can be resolved by a re-read (spec 03 §3.4).
 */
interface WriteRun {
  intent: EffectWriteIntent | null;
}

/** A write's result with the events it stored in its own transaction (see {@link TrailingEvents}). */
interface Trailed<R> {
  readonly value: R;
  readonly events: EventRecord[];
  readonly receipt: StoredReceipt | null;
}

/** A receipt draft, checked, before any transaction starts. */
function receiptFields(draft: ReceiptDraft) {
  if (!isPlainObject(draft) || !isPlainObject(draft.document)) throw new InvalidArgument('receipt draft must be an object with a document');
  return {
    receiptId: nonEmpty(draft.receiptId, 'receipt.receiptId'),
    actionId: nullableText(draft.actionId, 'receipt.actionId'),
    effectKey: nullableText(draft.effectKey, 'receipt.effectKey'),
    result: nonEmpty(draft.result, 'receipt.result'),
    finishedAt: nonEmpty(draft.finishedAt, 'receipt.finishedAt'),
    document: draft.document,
  };
}

/** Refuses a malformed `events` argument before any transaction starts. */
function checkTrailing<R>(events: TrailingEvents<R> | undefined): TrailingEvents<R> | undefined {
  if (events === undefined || events === null) return undefined;
  if (typeof events !== 'object' || typeof events.drafts !== 'function') throw new InvalidArgument('events must be { drafts: (result) => EventDraft[] }');
  return events;
}

/** A draft, checked, as its stored fields and its `insertEvent` parameters. */
function eventFields(event: EventDraft, what = 'event'): { record: Omit<EventRecord, 'eventId'>; params: SqlValue[] } {
  if (!isPlainObject(event)) throw new InvalidArgument(`${what} must be an object`);
  const type = nonEmpty(event.type, `${what}.type`) as EventType;
  const ts = nonEmpty(event.ts, `${what}.ts`);
  const actionId = nullableText(event.actionId, `${what}.actionId`);
  const effectKey = nullableText(event.effectKey, `${what}.effectKey`);
  const approvalId = nullableText(event.approvalId, `${what}.approvalId`);
  if (!isPlainObject(event.data)) throw new InvalidArgument(`${what}.data must be a plain object`);
  const dataJson = canonicalJson(event.data, `${what}.data`);
  return { record: { ts, type, actionId, effectKey, approvalId, data: event.data }, params: [ts, type, actionId, effectKey, approvalId, dataJson] };
}

/** The receipt part of an outcome's transaction failed: the transaction is rolled back and the outcome written without it. */
class ReceiptPartFailed extends StoreError {
  constructor(readonly failure: unknown) {
    super(`[kernel] the receipt written with an outcome failed: ${failure instanceof Error ? failure.message : String(failure)}`, { cause: failure });
  }
}

/** Rolls back a receipt write whose id is already stored (where the dialect can, the stored row is returned instead). */
class ReceiptAlreadyStored extends InvalidArgument {
  constructor(readonly receiptId: string) {
    super(`receipt ${receiptId} is already stored`);
  }
}

/** The error `check` throws, or `fallback()` if it passes. */
function refusalOf(check: () => unknown, fallback: () => Error): Error {
  try {
    check();
  } catch (err) {
    return err as Error;
  }
  return fallback();
}

function movedOn(key: string): DuplicateEffect {
  return new DuplicateEffect('in_progress', { effectKey: key, message: `effect ${key} moved on while it was being written; another worker holds it` });
}

/** One mutex per driver, so two stores on one single-connection driver still never interleave. */
const MUTEXES = new WeakMap<SqlDriver, Mutex>();

const EFFECT_STATES: readonly EffectState[] = ['reserved', 'executing', 'committed', 'failed', 'ambiguous'];
const APPROVAL_STATUSES: readonly ApprovalStatus[] = ['pending', 'granted', 'denied', 'expired', 'consumed'];

interface EffectRow {
  effect_key: string;
  state: string;
  action_id: string;
  attempt: SqlValue;
  lease_expires_at: string | null;
  result_json: string | null;
  error: string | null;
  created_at: string | null;
  updated_at: string | null;
  resolved_by: string | null;
}

interface ApprovalRow {
  approval_id: string;
  action_hash: string;
  status: string;
  action_json: string;
  approver: string | null;
  created_at: string | null;
  granted_at: string | null;
  expires_at: string | null;
  consumed_at: string | null;
  policy_hash_at_approval: string | null;
}

interface EventRow {
  event_id: SqlValue;
  ts: string | null;
  type: string | null;
  action_id: string | null;
  effect_key: string | null;
  approval_id: string | null;
  data_json: string | null;
}

interface ReceiptSqlRow extends Omit<ReceiptRow, 'seq'> {
  seq: SqlValue;
}

interface DelegationRow {
  delegation_id: string;
  parent_id: string;
  depth: SqlValue;
  grant_json: string;
  created_by_agent: string;
  created_by_user: string | null;
  created_via: string;
  created_at: string;
  revoked_at: string | null;
  revoked_by: string | null;
}

interface ContinuationRow {
  effect_key: string;
  action_id: string;
  action_json: string;
  continuation: string;
  rounds: SqlValue;
}

interface HeldContinuation {
  effectKey: string;
  actionId: string;
  actionJson: string;
  continuation: string;
  rounds: number;
}

function continuationFromRow(r: ContinuationRow): HeldContinuation {
  return { effectKey: r.effect_key, actionId: r.action_id, actionJson: r.action_json, continuation: r.continuation, rounds: int(r.rounds, 'continuations.rounds') };
}

function delegationFromRow(r: DelegationRow): DelegationRecord {
  return {
    delegationId: r.delegation_id,
    parentId: r.parent_id,
    depth: int(r.depth, 'delegations.depth'),
    grantJson: r.grant_json,
    createdByAgent: r.created_by_agent,
    createdByUser: r.created_by_user ?? null,
    createdVia: r.created_via,
    createdAt: r.created_at,
    revokedAt: r.revoked_at ?? null,
    revokedBy: r.revoked_by ?? null,
  };
}

function stamp(v: unknown, what: string): string {
  parseTime(nonEmpty(v, what), what);
  return v as string;
}

function nonEmpty(v: unknown, what: string): string {
  if (typeof v !== 'string' || v === '') throw new InvalidArgument(`${what} must be a non-empty string`);
  return v;
}

function nullableText(v: unknown, what: string): string | null {
  if (v === null || v === undefined) return null;
  return nonEmpty(v, what);
}

/** Free text for a column: a lone surrogate is written as its `\uXXXX` escape rather than failing. */
function storedText(s: string): string {
  if (isWellFormedString(s)) return s;
  return s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}

/**
 * A chain position read for verification: a safe integer, or `NaN` when the column holds anything
 * else (SQLite keeps a string or a fraction in an INTEGER column). Never throws, so that a
 * malformed row reaches {@link verifyChain}, which names it, instead of failing the whole read.
 */
function chainPosition(v: SqlValue): number {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  if (typeof v === 'bigint' && v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(v);
  return Number.NaN;
}

/** An integer column value as a `number`. */
function int(v: SqlValue | undefined, what: string): number {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  if (typeof v === 'bigint' && v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(v);
  throw new StoreError(`[kernel] column ${what} holds ${String(v)}, not a safe integer`);
}

function receiptFromRow(r: ReceiptSqlRow): ReceiptRow {
  return {
    receipt_id: r.receipt_id,
    action_id: r.action_id ?? null,
    effect_key: r.effect_key ?? null,
    result: r.result ?? null,
    json: r.json ?? null,
    ts: r.ts ?? null,
    seq: r.seq === null || r.seq === undefined ? null : chainPosition(r.seq),
    prev_hash: r.prev_hash ?? null,
    hash: r.hash ?? null,
  };
}

/** A page bound: a non-negative position and a limit of 1 to 10 000 rows. */
function checkPage(after: number, limit: number): void {
  if (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 0) throw new InvalidArgument(`after must be a non-negative integer, got ${String(after)}`);
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) throw new InvalidArgument(`limit must be an integer from 1 to 10000, got ${String(limit)}`);
}

function effectFromRow(r: EffectRow): EffectRecord {
  return {
    effectKey: r.effect_key,
    state: r.state as EffectState,
    actionId: r.action_id,
    attempt: int(r.attempt, 'effects.attempt'),
    leaseExpiresAt: r.lease_expires_at ?? null,
    resultJson: r.result_json ?? null,
    error: r.error ?? null,
    createdAt: r.created_at ?? null,
    updatedAt: r.updated_at ?? null,
    resolvedBy: r.resolved_by ?? null,
  };
}

function approvalFromRow(r: ApprovalRow): ApprovalRecord {
  return {
    request: {
      requestId: r.approval_id,
      actionHash: r.action_hash,
      action: actionFromJson(r.action_json),
      createdAt: r.created_at ?? '',
      expiresAt: r.expires_at ?? '',
      policyHash: r.policy_hash_at_approval ?? null,
    },
    status: r.status as ApprovalStatus,
    approver: r.approver ?? null,
    grantedAt: r.granted_at ?? null,
    consumedAt: r.consumed_at ?? null,
  };
}

function grantedApproval(record: ApprovalRecord): Approval {
  return {
    approvalId: record.request.requestId,
    actionHash: record.request.actionHash,
    approver: record.approver ?? '',
    grantedAt: record.grantedAt ?? '',
    expiresAt: record.request.expiresAt,
  };
}

function eventFromRow(r: EventRow): EventRecord {
  const data = r.data_json === null ? {} : parseJson(r.data_json, { what: 'events.data_json', floats: 'allow' });
  return {
    eventId: int(r.event_id, 'events.event_id'),
    ts: r.ts ?? '',
    type: (r.type ?? '') as EventType,
    actionId: r.action_id ?? null,
    effectKey: r.effect_key ?? null,
    approvalId: r.approval_id ?? null,
    data: (isPlainObject(data) ? data : { value: data }) as JsonObject,
  };
}

function effectParams(next: EffectRecord, prior: EffectRecord): SqlValue[] {
  return [
    next.state, next.actionId, next.attempt, next.leaseExpiresAt, next.resultJson, next.error, next.updatedAt, next.resolvedBy,
    prior.effectKey, prior.state, prior.actionId, prior.attempt,
  ];
}

/**
 * The state store over SQL. Build one with {@link openSqlStateStore} (or a driver package's
 * factory), which runs the migrations; a constructed but unopened store refuses every call.
 */
export class SqlStateStore implements StateStore {
  /** The driver's name, for messages. */
  readonly name: string;
  /** The SQL family. */
  readonly dialect: Dialect;
  /** Opened as a reader: nothing migrated, every write refused. */
  readonly readOnly: boolean;
  readonly #driver: SqlDriver;
  readonly #sql: SqlDialect;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #mutex: Mutex | null;
  #state: 'new' | 'opening' | 'open' | 'closed' = 'new';

  /** Prefer {@link openSqlStateStore}; a subclass calls {@link open} once after constructing. */
  constructor(driver: SqlDriver, options: SqlStateStoreOptions = {}) {
    if (typeof driver !== 'object' || driver === null || typeof driver.query !== 'function' || typeof driver.transaction !== 'function') {
      throw new InvalidArgument('driver must be a SqlDriver (query, exec, transaction, close)');
    }
    const dialect = options.dialect ?? DIALECTS[driver.dialect];
    if (!dialect) throw new InvalidArgument(`no ${String(driver.dialect)} dialect in this build`);
    if (dialect.name !== driver.dialect) throw new InvalidArgument(`dialect ${dialect.name} does not match the ${driver.dialect} driver ${driver.name}`);
    if (options.clock !== undefined && typeof options.clock !== 'function') throw new InvalidArgument('clock must be a function returning a Date');
    this.name = driver.name;
    this.dialect = driver.dialect;
    this.readOnly = options.readOnly === true;
    this.#driver = driver;
    this.#sql = dialect;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? console;
    if (driver.capabilities.concurrentConnections) {
      this.#mutex = null;
    } else {
      let m = MUTEXES.get(driver);
      if (!m) MUTEXES.set(driver, (m = new Mutex()));
      this.#mutex = m;
    }
  }

  /**
   * Checks the engine, classifies the schema and applies missing migrations (a reader only
   * checks). Called once; resolves to this store.
   */
  async open(): Promise<this> {
    if (this.#state !== 'new') throw new InvalidArgument(`store ${this.name} was already opened`);
    this.#state = 'opening';
    try {
      await this.#locked(async () => {
        const { sql } = this.#sql;
        if (sql.serverVersion !== null) {
          const row = (await this.#query<{ version: SqlValue }>(this.#driver, sql.serverVersion)).rows[0];
          const refusal = this.#sql.checkServerVersion(String(row?.version ?? ''), row ?? {});
          if (refusal !== null) throw new StoreError(`[kernel] [${this.name}] ${refusal}`, { sql: sql.serverVersion });
        }
        await migrate(this.#driver, this.#sql, { clock: () => this.#now(), readOnly: this.readOnly });
      });
    } catch (err) {
      this.#state = 'new';
      throw this.#wrap(err, null);
    }
    this.#state = 'open';
    return this;
  }

  // ---------------------------------------------------------------- plumbing

  #now(): Date {
    const d = this.#clock();
    if (!(d instanceof Date) || Number.isNaN(d.getTime())) throw new InvalidArgument('clock must return a valid Date');
    return d;
  }

  #locked<T>(fn: () => Promise<T>): Promise<T> {
    return this.#mutex ? this.#mutex.run(fn) : fn();
  }

  #checkOpen(): void {
    if (this.#state === 'closed') throw new StoreClosedError(`[kernel] [${this.name}] store is closed`);
    if (this.#state !== 'open') throw new StoreError(`[kernel] [${this.name}] store is not open: use openSqlStateStore or the driver's factory`);
  }

  #wrap(err: unknown, sql: string | null): Error {
    if (err instanceof CTRLRunError) return err;
    const message = err instanceof Error ? err.message : String(err);
    return new StoreError(`[kernel] [${this.name}] ${message}`, { sql, cause: err });
  }

  async #query<Row>(ex: SqlExecutor, sql: string, params: readonly SqlValue[] = []): Promise<{ rows: Row[]; rowsAffected: number }> {
    try {
      return await ex.query<Row>(sql, params);
    } catch (err) {
      throw this.#wrap(err, sql);
    }
  }

  /** A read: one statement, no transaction, but queued behind any transaction on a single connection. */
  async #read<T>(fn: (ex: SqlExecutor, now: () => Date) => Promise<T>): Promise<T> {
    this.#checkOpen();
    try {
      return await this.#locked(() => fn(this.#driver, () => this.#now()));
    } catch (err) {
      throw this.#wrap(err, null);
    }
  }

  /** A read-decide-write: one transaction, the clock read inside it; a kept refusal is thrown after commit. */
  async #write<T>(what: string, fn: (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<T | RaiseAfterCommit>): Promise<T> {
    this.#checkOpen();
    if (this.readOnly) throw new InvalidArgument(`store ${this.name} was opened read-only: ${what} writes`);
    let out: T | RaiseAfterCommit;
    try {
      out = await this.#locked(() => this.#attempt(what, fn, null, true));
    } catch (err) {
      throw this.#wrap(err, null);
    }
    if (out instanceof RaiseAfterCommit) throw out.error;
    return out;
  }

  /**
   * One transaction of a write. When the driver reports that its COMMIT was lost
   * ({@link AmbiguousWrite}) and the attempt declared the effect row it wrote, the outcome is
   * settled by a re-read on a fresh connection (spec 03 §3.4); `now` is kept so that a re-issue
   * writes exactly the same values.
   */
  async #attempt<T>(what: string, fn: (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<T | RaiseAfterCommit>, now: Date | null, mayReissue: boolean): Promise<T | RaiseAfterCommit> {
    const run: WriteRun = { intent: null };
    let at = now;
    const done: { value?: T | RaiseAfterCommit } = {};
    try {
      return await this.#driver.transaction(async (tx) => {
        at ??= this.#now();
        const value = await fn(tx, at, run);
        done.value = value;
        return value;
      });
    } catch (err) {
      if (!(err instanceof AmbiguousWrite) || run.intent === null || !('value' in done) || at === null) throw err;
      return this.#settleLostCommit(what, fn, at, run.intent, done.value as T | RaiseAfterCommit, mayReissue, err);
    }
  }

  /** Tables A1/A2: re-read the row, take one named branch, log it, act on it. */
  async #settleLostCommit<T>(
    what: string,
    fn: (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<T | RaiseAfterCommit>,
    now: Date,
    intent: EffectWriteIntent,
    produced: T | RaiseAfterCommit,
    mayReissue: boolean,
    lost: AmbiguousWrite,
  ): Promise<T | RaiseAfterCommit> {
    const key = intent.kind === 'insert' ? intent.record.effectKey : intent.prior.effectKey;
    const driver = this.#driver;
    let found: EffectRecord | null;
    try {
      if (driver.reread === undefined) throw new StoreError(`the ${this.name} driver cannot re-read on a fresh connection`);
      found = await driver.reread<EffectRecord | null>((ex) => this.#effect(ex, key));
    } catch (err) {
      // Availability, never a double execution: nothing more is written, and the caller learns the outcome is unknown.
      throw new AmbiguousWrite(
        `[kernel] [${this.name}] ${what} on ${key}: the connection was lost during COMMIT (${lost.message}) and the re-read on a fresh connection failed (${(err as Error)?.message ?? String(err)}); whether the write landed is unknown, and nothing more was written`,
        { cause: err },
      );
    }
    const branch = lostCommitBranch(intent, found);
    this.#logger.warn(`[kernel] [${this.name}] ${what} on ${key}: COMMIT lost; the re-read on a fresh connection took branch ${branch}`, {
      logger: 'ctrlrun.postgres', level: 'WARNING', branch, effectKey: key, operation: what,
    });
    switch (branch) {
      case A1_OURS:
      case A2_LANDED:
        return produced;
      case A1_REINSERT:
      case A2_REISSUE:
        if (!mayReissue) {
          throw new StoreError(`[kernel] [${this.name}] ${what} on ${key}: the COMMIT was lost again after one re-issue, and the re-read shows it did not land; nothing was written`, { cause: lost });
        }
        return this.#attempt(what, fn, now, false);
      case A1_REFUSE:
      case A2_REFUSE:
        throw intent.refuse(found);
    }
  }

  /**
   * A write whose events (if any) are appended in its own transaction once it succeeded (see
   * {@link TrailingEvents}). A kept refusal writes none. A landed lost COMMIT returns the events
   * the landed transaction stored; a re-issue runs `fn` again, and with it the inserts, once.
   */
  async #writeTrailed<R>(
    what: string,
    events: TrailingEvents<R> | undefined,
    fn: (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<R | RaiseAfterCommit>,
  ): Promise<R> {
    const trailing = checkTrailing(events);
    if (trailing === undefined) return this.#write(what, fn);
    const receipt = trailing.receipt === undefined ? null : receiptFields(trailing.receipt);
    const run = (withReceipt: boolean) => this.#write<Trailed<R>>(what, async (tx, now, run) => {
      const value = await fn(tx, now, run);
      if (value instanceof RaiseAfterCommit) return value;
      const drafts = trailing.drafts(value);
      if (!Array.isArray(drafts)) throw new InvalidArgument(`${what}: events.drafts must return an array of event drafts`);
      const stored = await this.#insertEvents(tx, drafts.map((draft, i) => eventFields(draft, `events.drafts(…)[${i}]`)));
      if (!withReceipt || receipt === null) return { value, events: stored, receipt: null };
      try {
        return { value, events: stored, receipt: await this.#chainReceipt(tx, receipt) };
      } catch (err) {
        // Rolled back whole, and written again without it: the outcome is never lost to its receipt.
        throw new ReceiptPartFailed(err);
      }
    });
    let out: Trailed<R>;
    try {
      out = await run(true);
    } catch (err) {
      if (!(err instanceof ReceiptPartFailed)) throw err;
      out = await run(false);
    }
    trailing.stored = out.events;
    if (out.receipt !== null) trailing.storedReceipt = out.receipt;
    return out.value;
  }

  /** Inserts events in order — in one statement where the dialect can — and returns them with their ids. */
  async #insertEvents(tx: SqlExecutor, all: readonly ReturnType<typeof eventFields>[]): Promise<EventRecord[]> {
    if (all.length === 0) return [];
    const many = this.#sql.sql.insertEvents;
    if (all.length === 1 || many === undefined) {
      const stored: EventRecord[] = [];
      for (const fields of all) stored.push(await this.#insertEvent(tx, fields));
      return stored;
    }
    const rows = (await this.#query<{ event_id: SqlValue }>(tx, many.call(this.#sql.sql, all.length), all.flatMap((f) => f.params))).rows;
    if (rows.length !== all.length) throw new StoreError(`[kernel] [${this.name}] ${all.length} events inserted, ${rows.length} ids returned`);
    // Ids follow row order; RETURNING's own order is not promised, so they are sorted.
    const ids = rows.map((r) => int(r.event_id, 'events.event_id')).sort((a, b) => a - b);
    return all.map((fields, i) => ({ eventId: ids[i]!, ...fields.record }));
  }

  async #insertEvent(tx: SqlExecutor, fields: ReturnType<typeof eventFields>): Promise<EventRecord> {
    const row = (await this.#query<{ event_id: SqlValue }>(tx, this.#sql.sql.insertEvent, fields.params)).rows[0];
    return { eventId: int(row?.event_id, 'events.event_id'), ...fields.record };
  }

  /**
   * Chains a receipt (spec 03 §5.2): the head row locked and advanced first, so concurrent
   * writers queue rather than race; the row; the head's hash. Throws {@link ReceiptAlreadyStored}
   * on an id already stored (the transaction must roll back: the head never advances without its row).
   */
  async #chainReceipt(tx: SqlExecutor, r: ReturnType<typeof receiptFields>): Promise<StoredReceipt> {
    const { sql } = this.#sql;
    const head = (await this.#query<{ seq: SqlValue; hash: string }>(tx, sql.lockChainHead)).rows[0];
    if (!head) throw new InvalidArgument('the receipt chain has no head row (receipt_chain id = 1)');
    const seq = int(head.seq, 'receipt_chain.seq');
    const prevHash = String(head.hash);
    const sealed = sealReceipt(r.document, seq, prevHash);
    let inserted: number;
    try {
      ({ rowsAffected: inserted } = await this.#query(tx, sql.insertReceipt, [r.receiptId, r.actionId, r.effectKey, r.result, sealed.json, r.finishedAt, seq, prevHash, sealed.hash]));
    } catch (err) {
      if (!this.#sql.isUniqueViolation(err)) throw err;
      inserted = 0;
    }
    if (inserted !== 1) throw new ReceiptAlreadyStored(r.receiptId);
    await this.#query(tx, sql.setChainHash, [sealed.hash]);
    return { seq, prevHash, hash: sealed.hash, json: sealed.json, document: sealed.document };
  }

  async #effect(ex: SqlExecutor, key: string): Promise<EffectRecord | null> {
    const row = (await this.#query<EffectRow>(ex, this.#sql.sql.selectEffect, [key])).rows[0];
    return row ? effectFromRow(row) : null;
  }

  async #approval(ex: SqlExecutor, id: string): Promise<ApprovalRecord | null> {
    const row = (await this.#query<ApprovalRow>(ex, this.#sql.sql.selectApproval, [id])).rows[0];
    return row ? approvalFromRow(row) : null;
  }

  /**
   * Writes `next` over `prior` only if the row is still `prior`. Anything else means it moved on:
   * the row is re-read and `refuse` (the operation's own predicate) names the refusal. The write
   * is declared on `run` first, so a lost COMMIT can be settled (Table A2).
   */
  async #cas(tx: SqlExecutor, prior: EffectRecord, next: EffectRecord, run: WriteRun, refuse: (found: EffectRecord | null) => Error): Promise<EffectRecord> {
    run.intent = { kind: 'update', prior, target: next, refuse };
    const { rowsAffected } = await this.#query(tx, this.#sql.sql.updateEffect, effectParams(next, prior));
    if (rowsAffected !== 1) throw refuse(await this.#effect(tx, prior.effectKey));
    return next;
  }

  /** The refusal a reservation meets on `found` (re-planned once), or `DuplicateEffect(in_progress)`. */
  #reservationRefusal(found: EffectRecord | null, key: string, actionId: string, leaseMs: number, now: Date): Error {
    const again = planReservation(found, key, actionId, leaseMs, now);
    if (again.kind === 'refuse') return again.error;
    return new DuplicateEffect('in_progress', { effectKey: key, message: `effect ${key} was reserved by another worker first` });
  }

  /**
   * Reserves `key`; `state` is what the new record is written as (`executing` when the
   * reservation and the start of execution share one transaction).
   */
  async #reserve(
    tx: SqlExecutor, key: string, actionId: string, leaseMs: number, now: Date, run: WriteRun, state: 'reserved' | 'executing' = 'reserved',
  ): Promise<Reservation | RaiseAfterCommit> {
    const { sql } = this.#sql;
    const record = await this.#effect(tx, key);
    const plan = planReservation(record, key, actionId, leaseMs, now);
    const refuse = (found: EffectRecord | null): Error => this.#reservationRefusal(found, key, actionId, leaseMs, now);
    switch (plan.kind) {
      case 'refuse':
        throw plan.error;
      case 'ambiguate':
        await this.#cas(tx, record!, plan.record, run, refuse);
        return new RaiseAfterCommit(plan.error);
      case 'renew': {
        const r = plan.reservation;
        run.intent = { kind: 'update', prior: record!, target: { ...plan.record, state }, refuse };
        const { rowsAffected } = await this.#query(tx, sql.renewEffect, [
          state, r.actionId, r.attempt, r.leaseExpiresAt, plan.record.updatedAt, key, plan.priorAttempt,
        ]);
        if (rowsAffected !== 1) throw new DuplicateEffect('in_progress', { effectKey: key, message: `effect ${key} was renewed by another worker first` });
        return r;
      }
      case 'insert': {
        const n = { ...plan.record, state };
        run.intent = { kind: 'insert', record: n, refuse };
        let inserted: number;
        try {
          ({ rowsAffected: inserted } = await this.#query(tx, sql.insertEffect, [
            key, n.state, n.actionId, n.attempt, n.leaseExpiresAt, n.createdAt, n.updatedAt,
          ]));
        } catch (err) {
          if (!this.#sql.isUniqueViolation(err)) throw err;
          inserted = 0;
        }
        if (inserted !== 1) {
          // The key is the last word: someone else's row landed first. Re-plan once on it.
          const again = planReservation(await this.#effect(tx, key), key, actionId, leaseMs, now);
          if (again.kind === 'refuse') throw again.error;
          throw new DuplicateEffect('in_progress', { effectKey: key, message: `effect ${key} was reserved by another worker first` });
        }
        return plan.reservation;
      }
    }
  }

  async #expire(tx: SqlExecutor, record: ApprovalRecord): Promise<void> {
    await this.#query(tx, this.#sql.sql.expireApproval, [record.request.requestId, record.status]);
  }

  async #consume(tx: SqlExecutor, record: ApprovalRecord, now: Date): Promise<Approval> {
    const id = record.request.requestId;
    const { rowsAffected } = await this.#query(tx, this.#sql.sql.consumeApproval, [storedTime(now), id]);
    if (rowsAffected !== 1) throw new ApprovalMismatch('consumed', { approvalId: id, message: `approval ${id} refused (consumed): it was consumed by another caller first` });
    return grantedApproval(record);
  }

  async #transition(
    what: string, key: unknown, actionId: unknown, from: readonly EffectState[], next: (r: EffectRecord, stamp: string) => EffectRecord, events?: TrailingEvents<EffectRecord>,
  ): Promise<EffectRecord> {
    const k = nonEmpty(key, 'effect_key');
    const a = nonEmpty(actionId, 'action_id');
    return this.#writeTrailed(what, events, async (tx, now, run) => {
      const record = checked(await this.#effect(tx, k), k, a, from, now);
      return this.#cas(tx, record, next(record, storedTime(now)), run, (found) => refusalOf(() => checked(found, k, a, from, now), () => movedOn(k)));
    });
  }

  // ---------------------------------------------------------------- approvals

  async putApprovalRequest(request: ApprovalRequest): Promise<void> {
    if (!isPlainObject(request)) throw new InvalidArgument('approval request must be an object');
    const id = nonEmpty(request.requestId, 'request.requestId');
    const hash = nonEmpty(request.actionHash, 'request.actionHash');
    const action = request.action;
    if (typeof action !== 'object' || action === null || action.actionHash !== hash) {
      throw new InvalidArgument(`request.action must be the action whose hash is request.actionHash (${hash})`);
    }
    const created = parseTime(nonEmpty(request.createdAt, 'request.createdAt'), 'request.createdAt');
    const expires = parseTime(nonEmpty(request.expiresAt, 'request.expiresAt'), 'request.expiresAt');
    if (!(expires.getTime() > created.getTime())) throw new InvalidArgument('request.expiresAt must be after request.createdAt');
    const policyHash = nullableText(request.policyHash, 'request.policyHash');
    const actionJson = actionToJson(action);
    const { sql } = this.#sql;
    await this.#write('putApprovalRequest', async (tx) => {
      try {
        await this.#query(tx, sql.insertApproval, [id, hash, actionJson, request.createdAt, request.expiresAt, policyHash]);
      } catch (err) {
        if (this.#sql.isUniqueViolation(err)) throw new InvalidArgument(`approval request ${id} already exists`);
        throw err;
      }
    });
  }

  async getApproval(id: string): Promise<ApprovalRecord | null> {
    const i = nonEmpty(id, 'approval_id');
    return this.#read((ex) => this.#approval(ex, i));
  }

  async grantApproval(id: string, approver: string): Promise<Approval> {
    const i = nonEmpty(id, 'approval_id');
    const who = checkActor(approver, 'approver');
    return this.#write('grantApproval', async (tx, now) => {
      const record = await this.#approval(tx, i);
      const plan = checkAnswerable(record, i, now);
      if (plan.kind === 'expire') {
        await this.#expire(tx, record!);
        return new RaiseAfterCommit(plan.error);
      }
      const grantedAt = storedTime(now);
      await this.#answer(tx, i, 'granted', who, grantedAt);
      return grantedApproval({ ...plan.record, status: 'granted', approver: who, grantedAt });
    });
  }

  async denyApproval(id: string, approver: string): Promise<ApprovalRecord> {
    const i = nonEmpty(id, 'approval_id');
    const who = checkActor(approver, 'approver');
    return this.#write('denyApproval', async (tx, now) => {
      const record = await this.#approval(tx, i);
      const plan = checkAnswerable(record, i, now);
      if (plan.kind === 'expire') {
        await this.#expire(tx, record!);
        return new RaiseAfterCommit(plan.error);
      }
      await this.#answer(tx, i, 'denied', who, null);
      return { ...plan.record, status: 'denied', approver: who } satisfies ApprovalRecord;
    });
  }

  async #answer(tx: SqlExecutor, id: string, status: 'granted' | 'denied', approver: string, grantedAt: string | null): Promise<void> {
    const { rowsAffected } = await this.#query(tx, this.#sql.sql.answerApproval, [status, storedText(approver), grantedAt, id]);
    if (rowsAffected !== 1) throw new ApprovalMismatch('answered', { approvalId: id, message: `approval ${id} refused (answered): it was answered by another caller first` });
  }

  async consumeApproval(id: string, actionHash: string): Promise<Approval> {
    const i = nonEmpty(id, 'approval_id');
    const hash = nonEmpty(actionHash, 'action_hash');
    return this.#write('consumeApproval', async (tx, now) => {
      const record = await this.#approval(tx, i);
      const plan = checkConsumable(record, i, hash, now);
      if (plan.kind === 'expire') {
        await this.#expire(tx, record!);
        return new RaiseAfterCommit(plan.error);
      }
      return this.#consume(tx, plan.record, now);
    });
  }

  async approvalsFor(actionHash: string): Promise<ApprovalRecord[]> {
    const hash = nonEmpty(actionHash, 'action_hash');
    return this.#read(async (ex) => (await this.#query<ApprovalRow>(ex, this.#sql.sql.approvalsFor, [hash])).rows.map(approvalFromRow));
  }

  async #newestUnexpired(actionHash: string, status: 'granted' | 'denied'): Promise<ApprovalRecord | null> {
    const hash = nonEmpty(actionHash, 'action_hash');
    return this.#read(async (ex, now) => {
      const rows = (await this.#query<ApprovalRow>(ex, this.#sql.sql.newestApprovalsFor, [hash, status])).rows;
      const t = now().getTime();
      for (const row of rows) {
        if (row.expires_at !== null && parseTime(row.expires_at, 'expires_at').getTime() > t) return approvalFromRow(row);
      }
      return null;
    });
  }

  async findGrantedApproval(actionHash: string): Promise<Approval | null> {
    const record = await this.#newestUnexpired(actionHash, 'granted');
    return record ? grantedApproval(record) : null;
  }

  async findDeniedRequest(actionHash: string): Promise<ApprovalRecord | null> {
    return this.#newestUnexpired(actionHash, 'denied');
  }

  async listApprovals(status?: ApprovalStatus): Promise<ApprovalRecord[]> {
    if (status !== undefined && !APPROVAL_STATUSES.includes(status)) throw new InvalidArgument(`unknown approval status ${JSON.stringify(status)}`);
    const { sql } = this.#sql;
    return this.#read(async (ex) =>
      (await (status === undefined ? this.#query<ApprovalRow>(ex, sql.listApprovals) : this.#query<ApprovalRow>(ex, sql.listApprovalsInStatus, [status]))).rows.map(
        approvalFromRow,
      ),
    );
  }

  // ---------------------------------------------------------------- effects

  async reserveEffect(key: string, actionId: string, leaseMs: number, events?: TrailingEvents<Reservation>): Promise<Reservation> {
    const k = nonEmpty(key, 'effect_key');
    return this.#writeTrailed('reserveEffect', events, (tx, now, run) => this.#reserve(tx, k, actionId, leaseMs, now, run));
  }

  async consumeApprovalAndReserve(
    id: string, actionHash: string, key: string, actionId: string, leaseMs: number, events?: TrailingEvents<[Approval, Reservation]>,
  ): Promise<[Approval, Reservation]> {
    const i = nonEmpty(id, 'approval_id');
    const hash = nonEmpty(actionHash, 'action_hash');
    const k = nonEmpty(key, 'effect_key');
    return this.#writeTrailed('consumeApprovalAndReserve', events, async (tx, now, run) => {
      // The approval first: its refusal wins, and nothing of the reservation is written.
      const record = await this.#approval(tx, i);
      const plan = checkConsumable(record, i, hash, now);
      if (plan.kind === 'expire') {
        await this.#expire(tx, record!);
        return new RaiseAfterCommit(plan.error);
      }
      const reservation = await this.#reserve(tx, k, actionId, leaseMs, now, run);
      // A refused reservation (even a kept ambiguation) leaves the approval granted.
      if (reservation instanceof RaiseAfterCommit) return reservation;
      const approval = await this.#consume(tx, plan.record, now);
      return [approval, reservation] satisfies [Approval, Reservation];
    });
  }

  async reserveForExecution(step: ReservationStep, events?: TrailingEvents<[Approval | null, Reservation]>): Promise<[Approval | null, Reservation]> {
    if (!isPlainObject(step)) throw new InvalidArgument('reservation step must be an object');
    const k = nonEmpty(step.key, 'effect_key');
    const { actionId, leaseMs } = step;
    const approval = step.approval === null || step.approval === undefined
      ? null
      : { id: nonEmpty(step.approval.id, 'approval_id'), hash: nonEmpty(step.approval.actionHash, 'action_hash') };
    return this.#writeTrailed('reserveForExecution', events, async (tx, now, run) => {
      let granted: ApprovalRecord | null = null;
      if (approval !== null) {
        // The approval first: its refusal wins, and nothing of the reservation is written.
        const record = await this.#approval(tx, approval.id);
        const plan = checkConsumable(record, approval.id, approval.hash, now);
        if (plan.kind === 'expire') {
          await this.#expire(tx, record!);
          return new RaiseAfterCommit(plan.error);
        }
        granted = plan.record;
      }
      const reservation = await this.#reserve(tx, k, actionId, leaseMs, now, run, 'executing');
      // A refused reservation (even a kept ambiguation) leaves the approval granted.
      if (reservation instanceof RaiseAfterCommit) return reservation;
      const consumed = granted === null ? null : await this.#consume(tx, granted, now);
      return [consumed, reservation] satisfies [Approval | null, Reservation];
    });
  }

  async beginExecution(key: string, actionId: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
    return this.#transition('beginExecution', key, actionId, ['reserved'], (r, stamp) => ({ ...r, state: 'executing', updatedAt: stamp }), events);
  }

  async commitEffect(key: string, actionId: string, result: unknown, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
    const resultJson = resultToJson(result);
    return this.#transition('commitEffect', key, actionId, ['executing'], (r, stamp) => ({
      ...r, state: 'committed', leaseExpiresAt: null, resultJson: storedText(resultJson), updatedAt: stamp,
    }), events);
  }

  async failEffect(key: string, actionId: string, error: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
    const text = storedText(nonEmpty(error, 'error'));
    return this.#transition('failEffect', key, actionId, ['executing'], (r, stamp) => ({ ...r, state: 'failed', leaseExpiresAt: null, error: text, updatedAt: stamp }), events);
  }

  async markAmbiguous(key: string, actionId: string, error: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
    const text = storedText(nonEmpty(error, 'error'));
    return this.#transition('markAmbiguous', key, actionId, ['reserved', 'executing', 'ambiguous'], (r, stamp) => ({
      ...r, state: 'ambiguous', leaseExpiresAt: null, error: text, updatedAt: stamp,
    }), events);
  }

  async resolveEffect(key: string, state: 'committed' | 'failed', resolver: string): Promise<EffectRecord> {
    const k = nonEmpty(key, 'effect_key');
    checkActor(resolver, 'resolver');
    return this.#write('resolveEffect', async (tx, now, run) => {
      const record = await this.#effect(tx, k);
      const to = checkResolvable(record, k, state, resolver);
      const r = record!;
      const who = storedText(resolver);
      return this.#cas(
        tx, r,
        { ...r, state: to, leaseExpiresAt: null, error: storedText(resolutionError(to, resolver, r.error)), resolvedBy: who, updatedAt: storedTime(now) },
        run, (found) => refusalOf(() => checkResolvable(found, k, state, resolver), () => movedOn(k)),
      );
    });
  }

  async extendLease(key: string, actionId: string, leaseMs: number): Promise<EffectRecord> {
    const k = nonEmpty(key, 'effect_key');
    const a = nonEmpty(actionId, 'action_id');
    return this.#write('extendLease', async (tx, now, run) => {
      const record = await this.#effect(tx, k);
      const leaseExpiresAt = planLeaseExtension(record, k, a, leaseMs, now);
      return this.#cas(tx, record!, { ...record!, leaseExpiresAt, updatedAt: storedTime(now) }, run, (found) =>
        refusalOf(() => planLeaseExtension(found, k, a, leaseMs, now), () => movedOn(k)),
      );
    });
  }

  async holdContinuation(action: Action, key: string, continuation: string, leaseMs: number): Promise<number> {
    if (!action || typeof action !== 'object' || typeof action.actionHash !== 'string') throw new InvalidArgument('holdContinuation needs an Action');
    const k = nonEmpty(key, 'effect_key');
    const value = checkContinuation(continuation);
    const a = action.actionId;
    const actionJson = storedText(actionToJson(action));
    const { sql } = this.#sql;
    return this.#write('holdContinuation', async (tx, now, run) => {
      const record = await this.#effect(tx, k);
      const held = await this.#continuation(tx, k);
      const plan = planContinuationHold(record, k, a, value, leaseMs, now, held);
      const taken = await this.#continuationByValue(tx, value);
      // A held value names one suspension; reusing it would let one resumption answer two.
      if (taken !== null) throw new InvalidArgument(`continuation for ${k} is already held${taken.effectKey === k ? ' for this effect' : ' for another effect'}; each suspension needs a fresh one`);
      const stamp = storedTime(now);
      await this.#cas(tx, record!, { ...record!, leaseExpiresAt: plan.leaseExpiresAt, updatedAt: stamp }, run, (found) =>
        refusalOf(() => planLeaseExtension(found, k, a, leaseMs, now), () => movedOn(k)),
      );
      const { rowsAffected } = held === null
        ? await this.#query(tx, sql.insertContinuation, [k, a, actionJson, value, plan.round, stamp])
        : await this.#query(tx, sql.updateContinuation, [a, actionJson, value, plan.round, stamp, k, held.actionId, held.rounds]);
      if (rowsAffected !== 1) throw movedOn(k);
      return plan.round;
    });
  }

  async takeContinuation(continuation: string, options: { environment?: string } = {}): Promise<TakenContinuation> {
    const value = checkContinuation(continuation);
    const environment = options?.environment;
    if (environment !== undefined) nonEmpty(environment, 'environment');
    return this.#write('takeContinuation', async (tx, now) => {
      const held = await this.#continuationByValue(tx, value);
      // One message for every miss: the caller learns nothing about which part was wrong.
      if (held === null || !sameSecret(held.continuation, value)) throw new InvalidArgument(UNKNOWN_CONTINUATION);
      const action = actionFromJson(held.actionJson);
      // Checked before anything is consumed: the deployment the action belongs to can still resume it.
      if (environment !== undefined && action.environment !== environment) {
        throw new InvalidArgument(`the held action is for environment ${JSON.stringify(action.environment)}, not ${JSON.stringify(environment)}: only a Control of its own environment may resume it`);
      }
      const record = checkTakeable(await this.#effect(tx, held.effectKey), held.effectKey, held.actionId, now);
      const { rowsAffected } = await this.#query(tx, this.#sql.sql.takeContinuation, [storedTime(now), held.effectKey, value]);
      if (rowsAffected !== 1) throw new InvalidArgument(UNKNOWN_CONTINUATION);
      return { action, effectKey: held.effectKey, record, rounds: held.rounds } satisfies TakenContinuation;
    });
  }

  async continuationRounds(key: string): Promise<number> {
    const k = nonEmpty(key, 'effect_key');
    return this.#read(async (ex) => (await this.#continuation(ex, k))?.rounds ?? 0);
  }

  async #continuation(ex: SqlExecutor, key: string): Promise<HeldContinuation | null> {
    const row = (await this.#query<ContinuationRow>(ex, this.#sql.sql.selectContinuation, [key])).rows[0];
    return row ? continuationFromRow(row) : null;
  }

  async #continuationByValue(ex: SqlExecutor, value: string): Promise<HeldContinuation | null> {
    const row = (await this.#query<ContinuationRow>(ex, this.#sql.sql.selectContinuationByValue, [value])).rows[0];
    return row ? continuationFromRow(row) : null;
  }

  async getEffect(key: string): Promise<EffectRecord | null> {
    const k = nonEmpty(key, 'effect_key');
    return this.#read((ex) => this.#effect(ex, k));
  }

  async listEffects(state?: EffectState): Promise<EffectRecord[]> {
    if (state !== undefined && !EFFECT_STATES.includes(state)) throw new InvalidArgument(`unknown effect state ${JSON.stringify(state)}`);
    const { sql } = this.#sql;
    return this.#read(async (ex) =>
      (await (state === undefined ? this.#query<EffectRow>(ex, sql.listEffects) : this.#query<EffectRow>(ex, sql.listEffectsInState, [state]))).rows.map(effectFromRow),
    );
  }

  // ---------------------------------------------------------------- evidence

  async appendEvent(event: EventDraft): Promise<EventRecord> {
    const fields = eventFields(event);
    return this.#write('appendEvent', (tx) => this.#insertEvent(tx, fields));
  }

  async appendEvents(events: readonly EventDraft[]): Promise<EventRecord[]> {
    if (!Array.isArray(events)) throw new InvalidArgument('events must be an array of event drafts');
    const all = events.map((e, i) => eventFields(e, `events[${i}]`));
    if (all.length === 0) return [];
    return this.#write('appendEvents', (tx) => this.#insertEvents(tx, all));
  }

  async putReceipt(draft: ReceiptDraft, events?: TrailingEvents<StoredReceipt>): Promise<StoredReceipt> {
    const fields = receiptFields(draft);
    const receiptId = fields.receiptId;
    const trailing = checkTrailing(events);
    // Its own `receipt` member is the caller's business on an outcome; here the receipt is the change.
    const only: TrailingEvents<StoredReceipt> | undefined = trailing === undefined ? undefined : { drafts: (r) => trailing.drafts(r) };
    const { sql } = this.#sql;
    try {
      const stored = await this.#writeTrailed('putReceipt', only, (tx) => this.#chainReceipt(tx, fields));
      if (trailing !== undefined && only !== undefined) trailing.stored = only.stored!;
      return stored;
    } catch (err) {
      const select = sql.selectReceipt;
      if (!(err instanceof ReceiptAlreadyStored) || select === undefined) throw err;
      const row = await this.#read(async (ex) => (await this.#query<ReceiptSqlRow>(ex, select, [receiptId])).rows[0]);
      if (!row || row.json === null || row.hash === null || row.prev_hash === null) throw err;
      const document = parseJson(row.json, { what: `receipts.json of ${receiptId}`, floats: 'allow' });
      if (!isPlainObject(document)) throw err;
      return { seq: int(row.seq, 'receipts.seq'), prevHash: row.prev_hash, hash: row.hash, json: row.json, document: document as JsonObject };
    }
  }

  async chainHead(): Promise<ChainHead | null> {
    return this.#read(async (ex) => {
      const row = (await this.#query<{ seq: SqlValue; hash: string }>(ex, this.#sql.sql.selectChainHead)).rows[0];
      return row ? { seq: chainPosition(row.seq), hash: String(row.hash) } : null;
    });
  }

  async events(): Promise<EventRecord[]> {
    return this.#read(async (ex) => (await this.#query<EventRow>(ex, this.#sql.sql.listEvents)).rows.map(eventFromRow));
  }

  async lastEvent(actionId: string, type: EventType): Promise<EventRecord | null> {
    const a = nonEmpty(actionId, 'action_id');
    const t = nonEmpty(type, 'type');
    return this.#read(async (ex) => {
      const row = (await this.#query<EventRow>(ex, this.#sql.sql.lastEvent, [a, t])).rows[0];
      return row ? eventFromRow(row) : null;
    });
  }

  async receipts(): Promise<ReceiptRow[]> {
    return this.#read(async (ex) => (await this.#query<ReceiptSqlRow>(ex, this.#sql.sql.listReceipts)).rows.map(receiptFromRow));
  }

  /**
   * Chained receipt rows with `seq` greater than `after`, by `seq`, at most `limit` (bounded reads
   * for views). Rows are as stored; a `seq` that is not an integer reads as `NaN`.
   */
  async receiptsAfter(after: number, limit: number): Promise<ReceiptRow[]> {
    checkPage(after, limit);
    return this.#read(async (ex) => (await this.#query<ReceiptSqlRow>(ex, this.#sql.sql.receiptsAfter, [after, limit])).rows.map(receiptFromRow));
  }

  /** The receipt row stored under `receiptId` (as stored), or `null`. */
  async getReceipt(receiptId: string): Promise<ReceiptRow | null> {
    const row = await this.#read(async (ex) => (await this.#query<ReceiptSqlRow>(ex, this.#sql.sql.receiptById, [nonEmpty(receiptId, 'receiptId')])).rows[0]);
    return row === undefined ? null : receiptFromRow(row);
  }

  /**
   * At most `limit` approvals after `after` (the `createdAt` and `requestId` of the last record
   * of the previous page; `null` for the first), oldest first, optionally only `status`.
   */
  async approvalsPage(options: { status?: ApprovalStatus | undefined; after?: { createdAt: string; requestId: string } | null; limit: number }): Promise<ApprovalRecord[]> {
    const { status, after = null, limit } = options;
    if (status !== undefined && !APPROVAL_STATUSES.includes(status)) throw new InvalidArgument(`unknown approval status ${JSON.stringify(status)}`);
    checkPage(0, limit);
    if (after !== null && (typeof after !== 'object' || typeof after.createdAt !== 'string' || typeof after.requestId !== 'string')) {
      throw new InvalidArgument('after must be null or { createdAt, requestId } (strings) of the last record read');
    }
    const position: SqlValue[] = after === null ? ['', '', limit] : [after.createdAt, after.requestId, limit];
    const { sql } = this.#sql;
    return this.#read(async (ex) =>
      (await (status === undefined ? this.#query<ApprovalRow>(ex, sql.approvalsPage, position) : this.#query<ApprovalRow>(ex, sql.approvalsPageInStatus, [status, ...position]))).rows.map(
        approvalFromRow,
      ),
    );
  }

  /** How many unexpired `pending` requests the principal `{ agent, user }` has. */
  async countPendingApprovals(principal: { agent: string; user: string | null }): Promise<number> {
    const agent = nonEmpty(principal?.agent, 'principal.agent');
    const user = principal.user === null || principal.user === undefined ? null : nonEmpty(principal.user, 'principal.user');
    return this.#read(async (ex, now) => {
      const row = (await this.#query<{ n: SqlValue }>(ex, this.#sql.sql.countPendingFor, [storedTime(now()), agent, user])).rows[0];
      return row === undefined ? 0 : int(row.n, 'count');
    });
  }

  // ---------------------------------------------------------------- delegations

  async putDelegation(record: DelegationRecord): Promise<void> {
    if (!isPlainObject(record)) throw new InvalidArgument('delegation record must be an object');
    const id = nonEmpty(record.delegationId, 'delegation.delegationId');
    const depth = record.depth;
    if (typeof depth !== 'number' || !Number.isSafeInteger(depth) || depth < 0) throw new InvalidArgument(`delegation.depth must be a non-negative integer, got ${String(depth)}`);
    const params: SqlValue[] = [
      id,
      nonEmpty(record.parentId, 'delegation.parentId'),
      depth,
      nonEmpty(record.grantJson, 'delegation.grantJson'),
      storedText(nonEmpty(record.createdByAgent, 'delegation.createdByAgent')),
      record.createdByUser === null || record.createdByUser === undefined ? null : storedText(nonEmpty(record.createdByUser, 'delegation.createdByUser')),
      nonEmpty(record.createdVia, 'delegation.createdVia'),
      stamp(record.createdAt, 'delegation.createdAt'),
      record.revokedAt === null || record.revokedAt === undefined ? null : stamp(record.revokedAt, 'delegation.revokedAt'),
      record.revokedBy === null || record.revokedBy === undefined ? null : storedText(nonEmpty(record.revokedBy, 'delegation.revokedBy')),
    ];
    await this.#write('putDelegation', async (tx) => {
      let inserted: number;
      try {
        ({ rowsAffected: inserted } = await this.#query(tx, this.#sql.sql.insertDelegation, params));
      } catch (err) {
        if (!this.#sql.isUniqueViolation(err)) throw err;
        inserted = 0;
      }
      // Never an upsert: a delegation is an act, and a second act under one id would rewrite the first.
      if (inserted !== 1) throw new InvalidArgument(`delegation ${id} already exists; a delegation is never overwritten`);
    });
  }

  async getDelegation(id: string): Promise<DelegationRecord | null> {
    const i = nonEmpty(id, 'delegation_id');
    return this.#read(async (ex) => {
      const row = (await this.#query<DelegationRow>(ex, this.#sql.sql.selectDelegation, [i])).rows[0];
      return row ? delegationFromRow(row) : null;
    });
  }

  async delegationsFor(parentId: string): Promise<DelegationRecord[]> {
    const p = nonEmpty(parentId, 'parent_id');
    return this.#read(async (ex) => (await this.#query<DelegationRow>(ex, this.#sql.sql.delegationsFor, [p])).rows.map(delegationFromRow));
  }

  async delegations(options: { includeRevoked?: boolean } = {}): Promise<DelegationRecord[]> {
    const { sql } = this.#sql;
    const text = options?.includeRevoked === true ? sql.listDelegations : sql.listLiveDelegations;
    return this.#read(async (ex) => (await this.#query<DelegationRow>(ex, text)).rows.map(delegationFromRow));
  }

  async revokeDelegation(id: string, by: string | null, at: string): Promise<boolean> {
    const i = nonEmpty(id, 'delegation_id');
    const who = by === null || by === undefined ? null : storedText(checkActor(by, 'revoked_by'));
    const when = stamp(at, 'revoked_at');
    const { revokeDelegation: revoke, selectDelegation: select } = this.#sql.sql;
    return this.#write('revokeDelegation', async (tx) => {
      const { rowsAffected } = await this.#query(tx, revoke, [when, who, i]);
      if (rowsAffected === 1) return true;
      const row = (await this.#query<DelegationRow>(tx, select, [i])).rows[0];
      if (!row) throw new InvalidArgument(`no delegation ${i}`);
      return false;
    });
  }

  /** The rows of `schema_version`, by id (for operators and the CLI's status). */
  async appliedMigrations(): Promise<AppliedMigration[]> {
    return this.#read((ex) => readApplied(ex, this.#sql));
  }

  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    const wasOpen = this.#state !== 'new';
    this.#state = 'closed';
    try {
      await this.#locked(() => this.#driver.close());
    } catch (err) {
      if (wasOpen) throw this.#wrap(err, null);
    }
  }
}

/**
 * Opens a state store over `driver`: checks the engine, then classifies the schema and applies
 * the missing migrations (spec 03 §2). With `readOnly`, opens only an up-to-date database and
 * writes nothing. Refusals are {@link SchemaMismatch}; driver failures are {@link StoreError}.
 */
export async function openSqlStateStore(driver: SqlDriver, options: SqlStateStoreOptions = {}): Promise<SqlStateStore> {
  return new SqlStateStore(driver, options).open();
}
