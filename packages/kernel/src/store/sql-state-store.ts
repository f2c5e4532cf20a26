/**
 * `SqlStateStore`: the one implementation of {@link StateStore} over a {@link SqlDriver}, for
 * every SQL family. It reads, asks the kernel's pure planners (`planReservation`, `checked`,
 * `checkResolvable`, `planLeaseExtension`, `checkConsumable`, `checkAnswerable`, `sealReceipt`),
 * and writes what they say, each method in one transaction. The SQL text comes from a
 * {@link SqlDialect} (`dialect.ts`); the reads are in `reads.ts`, the writes in `writes.ts`, the
 * transactions and the lost-COMMIT rule in `engine.ts`, row mapping in `rows.ts`. Nothing here is
 * dialect-specific.
 *
 * @module
 */
import type { Action } from '../action.js';
import { InvalidArgument, StoreError } from '../errors.js';
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
  VerifiedAnswer,
} from '../model.js';
import { systemClock, type Clock } from '../time.js';
import type { Dialect, SqlDriver, SqlValue } from './driver.js';
import { migrate, readApplied, type AppliedMigration } from './migrations.js';
import type { SqlDialect } from './dialect.js';
import { sqliteDialect } from './sqlite.js';
import { postgresDialect } from './postgres.js';
import type { Logger } from '../control/types.js';
import type { ApprovalEditResult, ApprovalEditWrite, DelegationRecord, ReservationStep, StateStore, TakenContinuation, TrailingEvents } from './state-store.js';
import { SqlEngine } from './engine.js';
import * as reads from './reads.js';
import * as writes from './writes.js';
import * as ledger from './ledger.js';
import { checkCharges, type BudgetCharge } from '../budget.js';
import * as sessions from './sessions.js';
import { sqlRetention, type RetentionStore } from './retention.js';
export type { DialectSql, SqlDialect } from './dialect.js';

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
  /**
   * Group commit, where the driver can (see `DriverCapabilities.groupCommit`): the outcomes
   * (effect row, event, chained receipt) of callers of this store that arrive while another
   * outcome is being written are then written together in one transaction, in arrival order,
   * every caller answered after the shared COMMIT. Default: on for a driver that writes each under
   * its own savepoint in the process (better-sqlite3, PGlite), off for one on a server (pg), where
   * it pays only when a WAL flush costs more than the round trips it adds. `false`: one
   * transaction, and one commit, per outcome.
   */
  groupCommit?: boolean;
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
  readonly #e: SqlEngine;

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
    this.#e = new SqlEngine(driver, dialect, { clock: options.clock ?? systemClock, logger: options.logger ?? console, readOnly: this.readOnly });
    if (options.groupCommit !== undefined && typeof options.groupCommit !== 'boolean') throw new InvalidArgument('groupCommit must be a boolean');
    // In the process (savepoints) it is on unless refused; on a server (back to back), where it pays only when a WAL flush costs more than the round trips it adds, it is asked for.
    const can = driver.capabilities.groupCommit;
    this.#e.groupCommit = can === 'savepoints' ? options.groupCommit !== false : can !== undefined && options.groupCommit === true;
  }

  /**
   * Checks the engine, classifies the schema and applies missing migrations (a reader only
   * checks). Called once; resolves to this store.
   */
  async open(): Promise<this> {
    if (this.#e.state !== 'new') throw new InvalidArgument(`store ${this.name} was already opened`);
    this.#e.state = 'opening';
    try {
      await this.#e.locked(async () => {
        const { sql } = this.#e.sql;
        if (sql.serverVersion !== null) {
          const row = (await this.#e.query<{ version: SqlValue }>(this.#e.driver, sql.serverVersion)).rows[0];
          const refusal = this.#e.sql.checkServerVersion(String(row?.version ?? ''), row ?? {});
          if (refusal !== null) throw new StoreError(`[kernel] [${this.name}] ${refusal}`, { sql: sql.serverVersion });
          this.#e.serverSeals = this.#e.sql.sealsReceipts?.(String(row?.version ?? '')) === true;
        }
        await migrate(this.#e.driver, this.#e.sql, { clock: () => this.#e.now(), readOnly: this.readOnly });
      });
    } catch (err) {
      this.#e.state = 'new';
      throw this.#e.wrap(err, null);
    }
    this.#e.state = 'open';
    return this;
  }

  // ---------------------------------------------------------------- approvals
  async putApprovalRequest(request: ApprovalRequest): Promise<void> {
    return writes.putApprovalRequest(this.#e, request);
  }

  async getApproval(id: string): Promise<ApprovalRecord | null> {
    return reads.getApproval(this.#e, id);
  }

  async grantApproval(id: string, approver: string, verified?: VerifiedAnswer | null, options?: { onePerUser?: boolean }): Promise<Approval> {
    return writes.grantApproval(this.#e, id, approver, verified, options);
  }

  async denyApproval(id: string, approver: string, verified?: VerifiedAnswer | null): Promise<ApprovalRecord> {
    return writes.denyApproval(this.#e, id, approver, verified);
  }

  async editApproval(edit: ApprovalEditWrite, events?: TrailingEvents<ApprovalEditResult>): Promise<ApprovalEditResult> {
    return writes.editApproval(this.#e, edit, events);
  }

  async consumeApproval(id: string, actionHash: string, precondition?: string | null): Promise<Approval> {
    return writes.consumeApproval(this.#e, id, actionHash, precondition);
  }

  async approvalsFor(actionHash: string): Promise<ApprovalRecord[]> {
    return reads.approvalsFor(this.#e, actionHash);
  }

  async findGrantedApproval(actionHash: string): Promise<Approval | null> {
    return reads.findGrantedApproval(this.#e, actionHash);
  }

  async findDeniedRequest(actionHash: string): Promise<ApprovalRecord | null> {
    return reads.findDeniedRequest(this.#e, actionHash);
  }

  async listApprovals(status?: ApprovalStatus): Promise<ApprovalRecord[]> {
    return reads.listApprovals(this.#e, status);
  }

  // ---------------------------------------------------------------- effects
  // The methods one action calls hand back the write's own promise (writes.* are async, so a
  // refusal is still a rejection): no extra async frame per call.
  reserveEffect(key: string, actionId: string, leaseMs: number, events?: TrailingEvents<Reservation>, charges?: readonly BudgetCharge[]): Promise<Reservation> {
    return writes.reserveEffect(this.#e, key, actionId, leaseMs, events, charges);
  }

  async consumeApprovalAndReserve(
    id: string,
    actionHash: string,
    key: string,
    actionId: string,
    leaseMs: number,
    events?: TrailingEvents<[Approval, Reservation]>,
    precondition?: string | null,
    charges?: readonly BudgetCharge[],
  ): Promise<[Approval, Reservation]> {
    return writes.consumeApprovalAndReserve(this.#e, id, actionHash, key, actionId, leaseMs, events, precondition, charges);
  }

  budgets(): ReturnType<NonNullable<StateStore['budgets']>> {
    const e = this.#e;
    return {
      consumptions: (filter) => ledger.consumptions(e, filter),
      spent: (grantId, metric, window) => ledger.spentInWindow(e, grantId, metric, window),
      overspent: async (charges) => ledger.wouldOverspend(e, checkCharges(charges)),
    };
  }

  reserveForExecution(step: ReservationStep, events?: TrailingEvents<[Approval | null, Reservation]>): Promise<[Approval | null, Reservation]> {
    return writes.reserveForExecution(this.#e, step, events);
  }

  beginExecution(key: string, actionId: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
    return writes.beginExecution(this.#e, key, actionId, events);
  }

  commitEffect(key: string, actionId: string, result: unknown, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
    return writes.commitEffect(this.#e, key, actionId, result, events);
  }

  failEffect(key: string, actionId: string, error: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
    return writes.failEffect(this.#e, key, actionId, error, events);
  }

  markAmbiguous(key: string, actionId: string, error: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
    return writes.markAmbiguous(this.#e, key, actionId, error, events);
  }

  async resolveEffect(key: string, state: 'committed' | 'failed', resolver: string): Promise<EffectRecord> {
    return writes.resolveEffect(this.#e, key, state, resolver);
  }

  async extendLease(key: string, actionId: string, leaseMs: number): Promise<EffectRecord> {
    return writes.extendLease(this.#e, key, actionId, leaseMs);
  }

  async holdContinuation(action: Action, key: string, continuation: string, leaseMs: number): Promise<number> {
    return writes.holdContinuation(this.#e, action, key, continuation, leaseMs);
  }

  async takeContinuation(continuation: string, options: { environment?: string } = {}): Promise<TakenContinuation> {
    return writes.takeContinuation(this.#e, continuation, options);
  }

  async continuationRounds(key: string): Promise<number> {
    return reads.continuationRounds(this.#e, key);
  }

  async getEffect(key: string): Promise<EffectRecord | null> {
    return reads.getEffect(this.#e, key);
  }

  async listEffects(state?: EffectState): Promise<EffectRecord[]> {
    return reads.listEffects(this.#e, state);
  }

  // ---------------------------------------------------------------- evidence
  appendEvent(event: EventDraft): Promise<EventRecord> {
    return writes.appendEvent(this.#e, event);
  }

  appendEvents(events: readonly EventDraft[]): Promise<EventRecord[]> {
    return writes.appendEvents(this.#e, events);
  }

  putReceipt(draft: ReceiptDraft, events?: TrailingEvents<StoredReceipt>): Promise<StoredReceipt> {
    return writes.putReceipt(this.#e, draft, events);
  }

  chainPendingReceipts(): Promise<StoredReceipt[]> {
    return writes.chainPendingReceipts(this.#e);
  }

  async pruneCheckpoint(): Promise<{ seq: number; hash: string } | null> {
    return reads.pruneCheckpoint(this.#e);
  }

  async chainHead(): Promise<ChainHead | null> {
    return reads.chainHead(this.#e);
  }

  async events(): Promise<EventRecord[]> {
    return reads.events(this.#e);
  }

  async lastEvent(actionId: string, type: EventType): Promise<EventRecord | null> {
    return reads.lastEvent(this.#e, actionId, type);
  }

  async lastApprovalEvent(approvalId: string, type: EventType): Promise<EventRecord | null> {
    return reads.lastApprovalEvent(this.#e, approvalId, type);
  }

  async receipts(): Promise<ReceiptRow[]> {
    return reads.receipts(this.#e);
  }

  /**
   * Chained receipt rows with `seq` greater than `after`, by `seq`, at most `limit` (bounded reads
   * for views). Rows are as stored; a `seq` that is not an integer reads as `NaN`.
   */
  async receiptsAfter(after: number, limit: number): Promise<ReceiptRow[]> {
    return reads.receiptsAfter(this.#e, after, limit);
  }

  /** The receipt row stored under `receiptId` (as stored), or `null`. */
  async getReceipt(receiptId: string): Promise<ReceiptRow | null> {
    return reads.getReceipt(this.#e, receiptId);
  }

  /**
   * At most `limit` approvals after `after` (the `createdAt` and `requestId` of the last record
   * of the previous page; `null` for the first), oldest first, optionally only `status`.
   */
  async approvalsPage(options: {
    status?: ApprovalStatus | undefined;
    after?: { createdAt: string; requestId: string } | null;
    limit: number;
  }): Promise<ApprovalRecord[]> {
    return reads.approvalsPage(this.#e, options);
  }

  /** How many unexpired `pending` requests the principal `{ agent, user }` has. */
  async countPendingApprovals(principal: { agent: string; user: string | null }): Promise<number> {
    return reads.countPendingApprovals(this.#e, principal);
  }

  // ---------------------------------------------------------------- delegations
  async putDelegation(record: DelegationRecord): Promise<void> {
    return writes.putDelegation(this.#e, record);
  }

  async getDelegation(id: string): Promise<DelegationRecord | null> {
    return reads.getDelegation(this.#e, id);
  }

  async delegationsFor(parentId: string): Promise<DelegationRecord[]> {
    return reads.delegationsFor(this.#e, parentId);
  }

  async delegations(options: { includeRevoked?: boolean } = {}): Promise<DelegationRecord[]> {
    return reads.delegations(this.#e, options);
  }

  async revokeDelegation(id: string, by: string | null, at: string): Promise<boolean> {
    return writes.revokeDelegation(this.#e, id, by, at);
  }

  // ---------------------------------------------------------------- operator sessions
  async endSession(sessionId: string, expiresAt: number): Promise<void> {
    return sessions.endSession(this.#e, sessionId, expiresAt);
  }

  async sessionEnded(sessionId: string): Promise<boolean> {
    return sessions.sessionEnded(this.#e, sessionId);
  }

  /** The prune, holds and the anchors cache of this store (spec 05 §5.2–§5.4). */
  retention(): RetentionStore {
    this.#e.checkOpen();
    return sqlRetention(this.#e);
  }

  /** The rows of `schema_version`, by id (for operators and the CLI's status). */
  async appliedMigrations(): Promise<AppliedMigration[]> {
    return this.#e.read((ex) => readApplied(ex, this.#e.sql));
  }

  async close(): Promise<void> {
    if (this.#e.state === 'closed') return;
    const wasOpen = this.#e.state !== 'new';
    this.#e.state = 'closed';
    try {
      await this.#e.locked(() => this.#e.driver.close());
    } catch (err) {
      if (wasOpen) throw this.#e.wrap(err, null);
    }
  }

  // ---------------------------------------------------------------- paged reads for streaming views

  /** Receipt rows with an integer `seq`, in `(seq, receipt_id)` order: after `after`, or the newest `limit`. */
  async receiptsInChain(options: { after?: { seq: number; receiptId: string } | null; newest?: boolean; limit: number }): Promise<ReceiptRow[]> {
    return reads.receiptsInChain(this.#e, options);
  }

  /** Receipt rows whose `seq` is not an integer, by `receipt_id` after `after`. */
  async receiptsOffChain(options: { after?: string | null; limit: number }): Promise<ReceiptRow[]> {
    return reads.receiptsOffChain(this.#e, options);
  }

  /** Effect records in `(createdAt, effectKey)` order: after `after`, or the newest `limit`; optionally only `state`. */
  async effectsPage(options: {
    state?: EffectState | undefined;
    after?: { createdAt: string | null; effectKey: string } | null;
    newest?: boolean;
    limit: number;
  }): Promise<EffectRecord[]> {
    return reads.effectsPage(this.#e, options);
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
