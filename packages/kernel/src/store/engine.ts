/**
 * The SQL store's transaction engine: reads queued behind a single connection's transactions,
 * read-decide-write transactions with the clock read inside them, refusals whose write is kept
 * (raised after commit), events and a receipt written with a state change, and the lost-COMMIT
 * rule (spec 03 §3.4: a re-read on a fresh connection, one named branch, at most one re-issue).
 *
 * @module
 */
import { AmbiguousWrite, CTRLRunError, InvalidArgument, StoreClosedError, StoreError } from '../errors.js';
import { shownId } from '../visible.js';
import type { ApprovalRecord, EffectRecord, EventRecord, StoredReceipt } from '../model.js';
import { pendingReceipt, sealReceipt } from '../receipt.js';
import type { Clock } from '../time.js';
import type { SqlDriver, SqlExecutor, SqlValue } from './driver.js';
import type { SqlDialect } from './dialect.js';
import { Mutex } from './mutex.js';
import {
  EDIT_FOUND_OTHER,
  EDIT_LANDED,
  EDIT_LOST_REISSUE,
  INSERT_FOUND_OTHER,
  INSERT_LANDED,
  INSERT_LOST_REISSUE,
  UPDATE_FOUND_OTHER,
  UPDATE_LANDED,
  UPDATE_LOST_REISSUE,
  LANDED_LATE,
  lostCommitBranch,
  lostEditBranch,
  type EditWriteIntent,
  type EffectWriteIntent,
} from './lost-commit.js';
import type { Logger } from '../control/types.js';
import type { TrailingEvents } from './state-store.js';
import { receiptFields, eventFields, type EffectRow, type ApprovalRow, int, effectFromRow, approvalFromRow, effectParams } from './rows.js';

/** A refusal whose write must be kept: returned out of the transaction, thrown after commit. */
export class RaiseAfterCommit {
  constructor(readonly error: Error) {}
}

/**
 * One write attempt's declaration: the effect row it is about to write, so that a lost COMMIT
 * ({@link AmbiguousWrite} from the driver) can be resolved by a re-read (spec 03 §3.4).
 */
export interface WriteRun {
  intent: EffectWriteIntent | null;
  /** A write that touches no effect row but answers an approval with an edit (settled by {@link SqlEngine.settleLostEdit}). */
  edit?: EditWriteIntent | null;
}

/** A write's result with the events it stored in its own transaction (see {@link TrailingEvents}). */
export interface Trailed<R> {
  readonly value: R;
  readonly events: EventRecord[];
  readonly receipt: StoredReceipt | null;
}

/**
 * A write step as one statement (see `combined.ts`), tried first inside the write's transaction:
 * its value, the events it stored and the receipt it chained (`'unchained'`: chain it statement by
 * statement; `'already-stored'`: the receipt id exists, the receipt part fails). `null`: nothing was
 * written, and the step runs statement by statement in the same transaction.
 */
export type CombinedStep<R> = (
  tx: SqlExecutor,
  now: Date,
  run: WriteRun,
  fieldsOf: (value: R) => ReturnType<typeof eventFields>[],
  receipt: ReturnType<typeof receiptFields> | null,
) => Promise<{ value: R; events: EventRecord[]; receipt: StoredReceipt | 'unchained' | 'already-stored' | null } | null>;

/**
 * After a re-issue was refused (`refusal`): one more re-read, `landed`, tells whether the first
 * write landed late (what it wrote, or `null`). A re-read that fails leaves it unknown: reported as
 * such, never as the refusal.
 */
async function lateLanding<T>(name: string, what: string, refusal: unknown, landed: () => Promise<T | null>): Promise<T | null> {
  try {
    return await landed();
  } catch (err) {
    throw new AmbiguousWrite(
      `[kernel] [${name}] ${what}: the re-issue after a lost COMMIT was refused (${(refusal as Error)?.message ?? String(refusal)}) and the second re-read on a fresh connection failed (${(err as Error)?.message ?? String(err)}); whether the first write landed is unknown, and nothing more was written`,
      { cause: err },
    );
  }
}

/** Whether a re-issue's failure is a refusal, which may be our own late write met again (a store failure is reported as it is). */
function mayBeOurOwn(err: unknown): boolean {
  return !(err instanceof AmbiguousWrite || err instanceof StoreError);
}

/**
 * A write step as one statement that stands alone, outside any transaction (see
 * `appendOutcome` in combined.ts): what it wrote; `null` when it wrote nothing and the step
 * runs in a transaction as usual; `{ reissueAt }` when its reply was lost, a re-read showed it did
 * not land, and the step runs in a transaction once, at that time, as the re-issue.
 */
export type AloneStep<R> = (
  now: Date,
  fieldsOf: (value: R) => ReturnType<typeof eventFields>[],
  receipt: ReturnType<typeof receiptFields> | null,
) => Promise<Trailed<R> | { reissueAt: Date; late?: () => Promise<Trailed<R> | null> } | null>;

/** Refuses a malformed `events` argument before any transaction starts. */
export function checkTrailing<R>(events: TrailingEvents<R> | undefined): TrailingEvents<R> | undefined {
  if (events === undefined || events === null) return undefined;
  if (typeof events !== 'object' || typeof events.drafts !== 'function') throw new InvalidArgument('events must be { drafts: (result) => EventDraft[] }');
  return events;
}

/** The receipt part of an outcome's transaction failed: the transaction is rolled back and the outcome written without it. */
export class ReceiptPartFailed extends StoreError {
  constructor(readonly failure: unknown) {
    super(`[kernel] the receipt written with an outcome failed: ${failure instanceof Error ? failure.message : String(failure)}`, { cause: failure });
  }
}

/** Rolls back a receipt write whose id is already stored (where the dialect can, the stored row is returned instead). */
export class ReceiptAlreadyStored extends InvalidArgument {
  constructor(readonly receiptId: string) {
    super(`receipt ${receiptId} is already stored`);
  }
}

/** The largest multi-row event insert whose SQL text is kept. */
const EVENTS_SQL_KEPT = 16;

/**
 * How many effect rows {@link SqlEngine.hint} remembers per generation: the newest generation
 * and the one before it are kept, so between this many and twice this many of the latest rows.
 */
const HINTS_KEPT = 512;

/** The savepoint each caller's outcome is written under in a group (see {@link SqlEngine.grouped}); SQLite and PostgreSQL spell it alike. */
const SAVEPOINT = 'SAVEPOINT ctrlrun_outcome';
const RELEASE_SAVEPOINT = 'RELEASE SAVEPOINT ctrlrun_outcome';
const ROLLBACK_TO_SAVEPOINT = 'ROLLBACK TO SAVEPOINT ctrlrun_outcome';

/**
 * How an outcome's receipt is written with it: `chained` (the chain head locked and advanced,
 * the row sealed), `pending` (the row with no chain columns, chained later: see
 * `pendingReceipt`), or `none` (not written; the receipt is then written alone, T170).
 */
export type ReceiptMode = 'chained' | 'pending' | 'none';
/** Alone, a failed receipt part is tried chained twice (the first failure may be its connection's, and a fresh one passes). */
const RECEIPT_MODES: readonly ReceiptMode[] = ['chained', 'chained', 'pending', 'none'];
/** In a group, each under its savepoint on the group's one connection: a failure there is the receipt's own. */
const GROUP_RECEIPT_MODES: readonly ReceiptMode[] = ['chained', 'pending', 'none'];

/** One caller's outcome waiting for a group (see {@link SqlEngine.grouped}). */
export interface GroupMember<T> {
  readonly what: string;
  /** The outcome written alone, as without group commit. */
  readonly solo: () => Promise<T>;
  /** The outcome's transaction body, its receipt written as `mode` says. */
  readonly step: (mode: ReceiptMode) => (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<T | RaiseAfterCommit>;
  readonly resolve: (value: T) => void;
  readonly reject: (err: unknown) => void;
}

/** One mutex per driver, so two stores on one single-connection driver still never interleave. */
const MUTEXES = new WeakMap<SqlDriver, Mutex>();

/**
 * A frozen copy of an effect record, written field by field: records reach {@link SqlEngine.hint}
 * in several shapes (built by different steps), and a spread of many shapes takes V8's slow path.
 */
function frozenEffect(r: EffectRecord): EffectRecord {
  return Object.freeze({
    effectKey: r.effectKey,
    state: r.state,
    actionId: r.actionId,
    attempt: r.attempt,
    leaseExpiresAt: r.leaseExpiresAt,
    resultJson: r.resultJson,
    error: r.error,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    resolvedBy: r.resolvedBy,
  });
}

/** A stored event: its id, then its fields in the order they are listed (and serialised). */
function storedEvent(eventId: number, f: Omit<EventRecord, 'eventId'>): EventRecord {
  return { eventId, ts: f.ts, type: f.type, actionId: f.actionId, effectKey: f.effectKey, approvalId: f.approvalId, data: f.data };
}

/** One store's connection to its database: the driver, its dialect, its clock, its lock. */
export class SqlEngine {
  readonly name: string;
  readonly driver: SqlDriver;
  readonly sql: SqlDialect;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly readOnly: boolean;
  readonly mutex: Mutex | null;
  state: 'new' | 'opening' | 'open' | 'closed' = 'new';
  /** Whether the server seals chained receipts inside a combined statement (the dialect decides on the server's version at open). */
  serverSeals = false;
  readonly #eventsSql: string[] = [];
  /** What {@link hint} remembers: the newest generation, then the one before it (dropped whole, never scanned). */
  #hints = new Map<string, EffectRecord>();
  #olderHints = new Map<string, EffectRecord>();
  /**
   * The chain head this engine expects next: the last receipt it chained (see `appendOutcome`
   * in combined.ts). Never trusted: a statement sealed on it applies only
   * where the locked head is exactly this. `null`: unknown.
   */
  chainTip: { seq: number; hash: string } | null = null;
  /** The one read of the chain head under way for outcomes that found {@link chainTip} unknown. */
  tipRead: Promise<void> | null = null;
  /** Outcomes left to chain in the transaction before one stands alone again (see `ALONE_REST` in combined.ts). */
  aloneRest = 0;
  /**
   * Group commit (see {@link grouped}): outcomes with a chained receipt that arrive while another
   * is being written are written together, in one transaction. `false`: one transaction each.
   */
  groupCommit = true;
  /** Outcomes waiting for the next group, in arrival order; `null` when no group is being written. */
  #queued: GroupMember<unknown>[] | null = null;

  constructor(driver: SqlDriver, dialect: SqlDialect, options: { clock: Clock; logger: Logger; readOnly: boolean }) {
    this.name = driver.name;
    this.driver = driver;
    this.sql = dialect;
    this.clock = options.clock;
    this.logger = options.logger;
    this.readOnly = options.readOnly;
    if (driver.capabilities.concurrentConnections) {
      this.mutex = null;
    } else {
      let m = MUTEXES.get(driver);
      if (!m) MUTEXES.set(driver, (m = new Mutex()));
      this.mutex = m;
    }
  }

  // ---------------------------------------------------------------- effect rows this engine wrote
  /**
   * Remembers `record` as the row this engine last wrote under its key, so a later step can use
   * it as the prior of a compare-and-set instead of reading it first. Never trusted: that
   * compare-and-set requires all seven written columns to be equal (`exact`), and a row that
   * moved on in any of them (another writer, a lease extended, a write that rolled back) makes
   * the step read the row and decide as it always did. A frozen copy is kept: the record itself
   * is handed to the caller, whose changes to it (an `error`, a `resolvedBy` — columns the
   * compare-and-set does not compare) must not be written by the next step.
   */
  hint(record: EffectRecord): void {
    // A copy of the key still in the older generation is shadowed by this one (read newest first)
    // and dropped with that generation when this one takes its place: never read again.
    this.#hints.set(record.effectKey, frozenEffect(record));
    if (this.#hints.size >= HINTS_KEPT) {
      this.#olderHints = this.#hints;
      this.#hints = new Map();
    }
  }

  /** Notes a receipt chained in a committed write as the head to expect, unless a later one is noted. */
  noteChained(receipt: StoredReceipt): void {
    if (this.chainTip === null || receipt.seq > this.chainTip.seq) this.chainTip = { seq: receipt.seq, hash: receipt.hash };
  }

  /** Forgets what {@link hint} remembers for `key` (it proved not to be the row). */
  forget(key: string): void {
    this.#hints.delete(key);
    this.#olderHints.delete(key);
  }

  /** What {@link hint} remembers for `key`, if anything. */
  hinted(key: string): EffectRecord | undefined {
    return this.#hints.get(key) ?? this.#olderHints.get(key);
  }

  // ---------------------------------------------------------------- plumbing
  now(): Date {
    const d = this.clock();
    if (!(d instanceof Date) || Number.isNaN(d.getTime())) throw new InvalidArgument('clock must return a valid Date');
    return d;
  }

  locked<T>(fn: () => Promise<T>): Promise<T> {
    return this.mutex ? this.mutex.run(fn) : fn();
  }

  checkOpen(): void {
    if (this.state === 'closed') throw new StoreClosedError(`[kernel] [${this.name}] store is closed`);
    if (this.state !== 'open') throw new StoreError(`[kernel] [${this.name}] store is not open: use openSqlStateStore or the driver's factory`);
  }

  wrap(err: unknown, sql: string | null): Error {
    if (err instanceof CTRLRunError) return err;
    const message = err instanceof Error ? err.message : String(err);
    return new StoreError(`[kernel] [${this.name}] ${message}`, { sql, cause: err });
  }

  async query<Row>(ex: SqlExecutor, sql: string, params: readonly SqlValue[] = []): Promise<{ rows: Row[]; rowsAffected: number }> {
    try {
      return await ex.query<Row>(sql, params);
    } catch (err) {
      throw this.wrap(err, sql);
    }
  }

  /** A read: one statement, no transaction, but queued behind any transaction on a single connection. */
  async read<T>(fn: (ex: SqlExecutor, now: () => Date) => Promise<T>): Promise<T> {
    this.checkOpen();
    try {
      return await this.locked(() => fn(this.driver, () => this.now()));
    } catch (err) {
      throw this.wrap(err, null);
    }
  }

  /** A read-decide-write: one transaction, the clock read inside it; a kept refusal is thrown after commit. */
  async write<T>(
    what: string,
    fn: (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<T | RaiseAfterCommit>,
    reissue: { now: Date } | null = null,
  ): Promise<T> {
    // A re-issue (of a write whose reply was lost and did not land) writes at the same time, and is never re-issued again.
    const out = await this.writing(what, () => this.attempt(what, fn, reissue?.now ?? null, reissue === null));
    if (out instanceof RaiseAfterCommit) throw out.error;
    return out;
  }

  /**
   * One transaction of a write. When the driver reports that its COMMIT was lost
   * ({@link AmbiguousWrite}) and the attempt declared the effect row it wrote, the outcome is
   * settled by a re-read on a fresh connection (spec 03 §3.4); `now` is kept so that a re-issue
   * writes exactly the same values.
   */
  async attempt<T>(
    what: string,
    fn: (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<T | RaiseAfterCommit>,
    now: Date | null,
    mayReissue: boolean,
  ): Promise<T | RaiseAfterCommit> {
    const run: WriteRun = { intent: null };
    let at = now;
    const done: { value?: T | RaiseAfterCommit } = {};
    try {
      return await this.driver.transaction(async (tx) => {
        // A driver may run this again from the start on a transaction it rolled back: nothing of
        // an earlier run is declared.
        run.intent = null;
        run.edit = null;
        at ??= this.now();
        const value = await fn(tx, at, run);
        done.value = value;
        return value;
      });
    } catch (err) {
      if (!(err instanceof AmbiguousWrite) || !('value' in done) || at === null) throw err;
      if (run.intent !== null) return this.settleLostCommit(what, fn, at, run.intent, done.value as T | RaiseAfterCommit, mayReissue, err);
      if (run.edit) return this.settleLostEdit(what, fn, at, run.edit, done.value as T | RaiseAfterCommit, mayReissue, err);
      throw err;
    }
  }

  /**
   * An edit-then-approve's lost COMMIT: both approval rows re-read on a fresh connection, one
   * named branch ({@link lostEditBranch}), logged as the effect branches are, then acted on:
   * landed → what the transaction produced; lost → the same write re-issued once; another answer
   * won → its refusal.
   */
  async settleLostEdit<T>(
    what: string,
    fn: (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<T | RaiseAfterCommit>,
    now: Date,
    intent: EditWriteIntent,
    produced: T | RaiseAfterCommit,
    mayReissue: boolean,
    lost: AmbiguousWrite,
  ): Promise<T | RaiseAfterCommit> {
    const driver = this.driver;
    let found: { original: ApprovalRecord | null; edited: ApprovalRecord | null };
    try {
      if (driver.reread === undefined) throw new StoreError(`the ${this.name} driver cannot re-read on a fresh connection`);
      found = await driver.reread(async (ex) => ({
        original: await this.approval(ex, intent.requestId),
        edited: await this.approval(ex, intent.editedRequestId),
      }));
    } catch (err) {
      throw new AmbiguousWrite(
        `[kernel] [${this.name}] ${what} of ${shownId(intent.requestId)}: the connection was lost during COMMIT (${lost.message}) and the re-read on a fresh connection failed (${(err as Error)?.message ?? String(err)}); whether the edit landed is unknown, and nothing more was written`,
        { cause: err },
      );
    }
    const branch = lostEditBranch(intent, found.original, found.edited);
    const log = (branch: string, lost: string) =>
      this.logger.warn(`[kernel] [${this.name}] ${what} of ${shownId(intent.requestId)}: ${lost}; the re-read on a fresh connection took branch ${branch}`, {
        logger: 'ctrlrun.postgres',
        level: 'WARNING',
        branch,
        approvalId: intent.requestId,
        operation: what,
      });
    log(branch, 'COMMIT lost');
    switch (branch) {
      case EDIT_LANDED:
        return produced;
      case EDIT_LOST_REISSUE:
        if (!mayReissue) {
          throw new StoreError(
            `[kernel] [${this.name}] ${what} of ${shownId(intent.requestId)}: the COMMIT was lost again after one re-issue, and the re-read shows it did not land; nothing was written`,
            { cause: lost },
          );
        }
        return this.reissue(what, fn, now, produced, async () => {
          const again = await driver.reread!(async (ex) => ({
            original: await this.approval(ex, intent.requestId),
            edited: await this.approval(ex, intent.editedRequestId),
          }));
          const late = lostEditBranch(intent, again.original, again.edited) === EDIT_LANDED;
          if (late) log(EDIT_LANDED, LANDED_LATE);
          return late;
        });
      case EDIT_FOUND_OTHER:
        throw intent.refuse(found.original);
    }
  }

  /**
   * The one re-issue of a write whose COMMIT was lost and which the re-read showed had not landed.
   * That COMMIT may still have been on its way (sent, not yet applied when the re-read looked); it
   * then lands while the re-issue waits on the row it locked, and the re-issue meets our own write
   * and refuses. So a re-issue refused is followed by one more re-read (`landed`): when it shows the
   * first write after all, that write stands, and its caller is answered as if its reply had come.
   */
  async reissue<T>(
    what: string,
    fn: (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<T | RaiseAfterCommit>,
    now: Date,
    produced: T | RaiseAfterCommit,
    landed: () => Promise<boolean>,
  ): Promise<T | RaiseAfterCommit> {
    try {
      return await this.attempt(what, fn, now, false);
    } catch (err) {
      if (!mayBeOurOwn(err) || (await lateLanding(this.name, what, err, async () => ((await landed()) ? { produced } : null))) === null) throw err;
      return produced;
    }
  }

  /** The branch a re-read after a lost write took on the effect row `key`, logged once at WARNING (`ctrlrun.postgres`). */
  logBranch(what: string, key: string, lost: string, branch: string): void {
    this.logger.warn(`[kernel] [${this.name}] ${what} on ${shownId(key)}: ${lost}; the re-read on a fresh connection took branch ${branch}`, {
      logger: 'ctrlrun.postgres',
      level: 'WARNING',
      branch,
      effectKey: key,
      operation: what,
    });
  }

  /** Tables A1/A2: re-read the row, take one named branch, log it, act on it. */
  async settleLostCommit<T>(
    what: string,
    fn: (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<T | RaiseAfterCommit>,
    now: Date,
    intent: EffectWriteIntent,
    produced: T | RaiseAfterCommit,
    mayReissue: boolean,
    lost: AmbiguousWrite,
  ): Promise<T | RaiseAfterCommit> {
    const key = intent.kind === 'insert' ? intent.record.effectKey : intent.prior.effectKey;
    const driver = this.driver;
    let found: EffectRecord | null;
    try {
      if (driver.reread === undefined) throw new StoreError(`the ${this.name} driver cannot re-read on a fresh connection`);
      found = await driver.reread<EffectRecord | null>((ex) => this.effect(ex, key));
    } catch (err) {
      // Availability, never a double execution: nothing more is written, and the caller learns the outcome is unknown.
      throw new AmbiguousWrite(
        `[kernel] [${this.name}] ${what} on ${shownId(key)}: the connection was lost during COMMIT (${lost.message}) and the re-read on a fresh connection failed (${(err as Error)?.message ?? String(err)}); whether the write landed is unknown, and nothing more was written`,
        { cause: err },
      );
    }
    const branch = lostCommitBranch(intent, found);
    this.logBranch(what, key, 'COMMIT lost', branch);
    switch (branch) {
      case INSERT_LANDED:
      case UPDATE_LANDED:
        return produced;
      case INSERT_LOST_REISSUE:
      case UPDATE_LOST_REISSUE:
        if (!mayReissue) {
          throw new StoreError(
            `[kernel] [${this.name}] ${what} on ${shownId(key)}: the COMMIT was lost again after one re-issue, and the re-read shows it did not land; nothing was written`,
            { cause: lost },
          );
        }
        return this.reissue(what, fn, now, produced, async () => {
          const late = lostCommitBranch(intent, await driver.reread!<EffectRecord | null>((ex) => this.effect(ex, key)));
          if (late !== INSERT_LANDED && late !== UPDATE_LANDED) return false;
          this.logBranch(what, key, LANDED_LATE, late);
          return true;
        });
      case INSERT_FOUND_OTHER:
      case UPDATE_FOUND_OTHER:
        throw intent.refuse(found);
    }
  }

  /**
   * A write whose events (if any) are appended in its own transaction once it succeeded (see
   * {@link TrailingEvents}). A kept refusal writes none. A landed lost COMMIT returns the events
   * the landed transaction stored; a re-issue runs `fn` again, and with it the inserts, once.
   */
  async writeTrailed<R>(
    what: string,
    events: TrailingEvents<R> | undefined,
    fn: (tx: SqlExecutor, now: Date, run: WriteRun) => Promise<R | RaiseAfterCommit>,
    combined?: CombinedStep<R>,
    alone?: AloneStep<R>,
    /**
     * Joins a group (see {@link grouped}) even without a chained receipt, on a single connection
     * only: there every write queues anyway, and a shared COMMIT only saves. Where connections are
     * many (pg), such steps run side by side on the pool and the server flushes their COMMITs
     * together itself; in the group they would queue (measured: 8 callers on pg, slower).
     */
    joinsGroup = false,
  ): Promise<R> {
    const trailing = checkTrailing(events);
    if (trailing === undefined) return this.write(what, fn);
    const receipt = trailing.receipt === undefined ? null : receiptFields(trailing.receipt);
    const fieldsOf = (value: R): ReturnType<typeof eventFields>[] => {
      const drafts = trailing.drafts(value);
      if (!Array.isArray(drafts)) throw new InvalidArgument(`${what}: events.drafts must return an array of event drafts`);
      return drafts.map((draft, i) => eventFields(draft, 'events.drafts(…)', i));
    };
    const chain = async (tx: SqlExecutor, r: NonNullable<typeof receipt>): Promise<StoredReceipt> => {
      try {
        return await this.chainReceipt(tx, r);
      } catch (err) {
        // Rolled back whole, and written again without it: the outcome is never lost to its receipt.
        throw new ReceiptPartFailed(err);
      }
    };
    const pend = async (tx: SqlExecutor, r: NonNullable<typeof receipt>): Promise<void> => {
      try {
        await this.pendReceipt(tx, r);
      } catch (err) {
        throw new ReceiptPartFailed(err);
      }
    };
    const step =
      (mode: ReceiptMode) =>
      async (tx: SqlExecutor, now: Date, run: WriteRun): Promise<Trailed<R> | RaiseAfterCommit> => {
        const r = mode === 'chained' ? receipt : null;
        const one = combined === undefined ? null : await combined(tx, now, run, fieldsOf, r);
        let out: Trailed<R>;
        if (one !== null) {
          if (r !== null && one.receipt !== null) {
            if (one.receipt === 'already-stored') throw new ReceiptPartFailed(new ReceiptAlreadyStored(r.receiptId));
            return { value: one.value, events: one.events, receipt: one.receipt === 'unchained' ? await chain(tx, r) : one.receipt };
          }
          out = { value: one.value, events: one.events, receipt: null };
        } else {
          const value = await fn(tx, now, run);
          if (value instanceof RaiseAfterCommit) return value;
          const stored = await this.insertEvents(tx, fieldsOf(value));
          if (r !== null) return { value, events: stored, receipt: await chain(tx, r) };
          out = { value, events: stored, receipt: null };
        }
        if (mode === 'pending' && receipt !== null) await pend(tx, receipt);
        return out;
      };
    const run = (mode: ReceiptMode, reissue: { now: Date } | null) => this.write<Trailed<R>>(what, step(mode), reissue);
    const inTransaction = async (reissue: { now: Date } | null): Promise<Trailed<R>> => {
      // Twice with the receipt chained: a receipt part that failed because its connection did
      // (rolled back, nothing written) passes on a fresh one. A second failure is the receipt's
      // own (T170): the outcome is written with the receipt pending (off the chain, chained by the
      // receipt written alone after it, or after a crash by `chainPendingReceipts`), and only
      // when even that fails, without it.
      for (const mode of RECEIPT_MODES) {
        try {
          return await run(mode, reissue);
        } catch (err) {
          if (!(err instanceof ReceiptPartFailed) || mode === 'none') throw err;
        }
      }
      throw new StoreError(`[kernel] [${this.name}] ${what}: no receipt mode was left`);
    };
    // A step that can stand alone is tried first; it answers `null` when nothing was written and
    // the transaction should decide, or a re-issue after a lost reply that did not land.
    const solo = async (): Promise<Trailed<R>> => {
      const first = alone === undefined ? null : await this.writing(what, () => alone(this.now(), fieldsOf, receipt));
      if (first === null) return inTransaction(null);
      if (!('reissueAt' in first)) return first;
      try {
        return await inTransaction({ now: first.reissueAt });
      } catch (err) {
        // Refused: the lost statement may have landed after the re-read (see {@link SqlEngine.reissue}).
        const landed = first.late === undefined || !mayBeOurOwn(err) ? null : await lateLanding(this.name, what, err, first.late);
        if (landed === null) throw err;
        return landed;
      }
    };
    // An outcome with a chained receipt (or a step that asks to) joins the writes that arrive with it (see {@link grouped}).
    const out = (receipt !== null || (joinsGroup && this.mutex !== null)) && this.groupCommit ? await this.grouped<Trailed<R>>(what, solo, step) : await solo();
    trailing.stored = out.events;
    if (out.receipt !== null) {
      trailing.storedReceipt = out.receipt;
      this.noteChained(out.receipt);
    }
    return out.value;
  }

  /**
   * Group commit for the outcome steps (outcome, events, chained receipt) of concurrent callers.
   * The first outcome to arrive while none is being written is written at once, as it always was
   * (`solo`). Those that arrive meanwhile wait, and are then written together: one transaction,
   * each in arrival order under its own savepoint, so that one caller's failure (a refusal, a
   * receipt part that fails and is written again without it) is rolled back to its savepoint and
   * touches no other's. Every caller is answered only after the shared COMMIT. A lost COMMIT is
   * settled caller by caller, each by its own re-read and branch (spec 03 §3.4), a re-issue alone.
   * A group that fails whole (nothing committed, known) is written again caller by caller, each
   * `solo`. A group of one is `solo`. One group is written at a time per engine.
   */
  async grouped<T>(what: string, solo: () => Promise<T>, step: GroupMember<T>['step']): Promise<T> {
    if (this.#queued !== null) {
      const queued = this.#queued;
      return new Promise<T>((resolve, reject) => queued.push({ what, solo, step, resolve, reject } as GroupMember<unknown>));
    }
    // None in flight: written at once, alone; those that arrive meanwhile are written after it.
    this.#queued = [];
    try {
      return await solo();
    } finally {
      void this.#drain();
    }
  }

  /** Writes the queued outcomes, group after group, until none is left; then the next outcome is written at once again. */
  async #drain(): Promise<void> {
    while (this.#queued !== null && this.#queued.length > 0) {
      const members = this.#queued;
      this.#queued = [];
      if (members.length === 1) {
        const m = members[0]!;
        await m.solo().then(m.resolve, m.reject);
        continue;
      }
      await this.#writeGroup(members);
    }
    this.#queued = null;
  }

  /** One group: its transaction, then each caller answered (see {@link grouped}). */
  async #writeGroup(members: GroupMember<unknown>[]): Promise<void> {
    type Done = { fn: ReturnType<GroupMember<unknown>['step']>; run: WriteRun; at: Date; value?: unknown; error?: unknown };
    const done: (Done | null)[] = members.map(() => null);
    const savepoints = this.driver.capabilities.groupCommit !== 'back-to-back';
    let settled: { value?: unknown; error?: unknown }[] | null = null;
    try {
      settled = await this.writing('group commit', async () => {
        try {
          await this.driver.transaction(async (tx) => {
            // A driver may run this again from the start on a transaction it rolled back.
            done.fill(null);
            for (let i = 0; i < members.length; i++) {
              const m = members[i]!;
              const at = this.now();
              if (!savepoints) {
                // Back to back, no savepoint: a failure rolls the whole group back, and every
                // caller is then written alone (below), so none is answered by another's failure.
                const fn = m.step('chained');
                const run: WriteRun = { intent: null, edit: null };
                done[i] = { fn, run, at, value: await fn(tx, at, run) };
                continue;
              }
              for (const mode of GROUP_RECEIPT_MODES) {
                const fn = m.step(mode);
                const run: WriteRun = { intent: null, edit: null };
                await tx.exec(SAVEPOINT);
                try {
                  const value = await fn(tx, at, run);
                  await tx.exec(RELEASE_SAVEPOINT);
                  done[i] = { fn, run, at, value };
                  break;
                } catch (err) {
                  // Its own writes undone, the others' kept; a receipt part that failed is written again without it.
                  await tx.exec(ROLLBACK_TO_SAVEPOINT);
                  await tx.exec(RELEASE_SAVEPOINT);
                  if (mode !== 'none' && err instanceof ReceiptPartFailed) continue;
                  done[i] = { fn, run, at, error: err };
                  break;
                }
              }
            }
          });
          return done.map((d) => (d === null ? { error: new StoreError(`[kernel] [${this.name}] group commit: a step did not run`) } : d));
        } catch (err) {
          if (!(err instanceof AmbiguousWrite) || done.some((d) => d === null)) throw err;
          // The COMMIT was lost: each caller's write is settled by its own re-read, as alone.
          const out: { value?: unknown; error?: unknown }[] = [];
          for (let i = 0; i < members.length; i++) {
            const d = done[i]!;
            if ('error' in d) {
              out.push({ error: d.error });
              continue;
            }
            try {
              const produced = d.value as unknown;
              const what = members[i]!.what;
              if (d.run.intent !== null) out.push({ value: await this.settleLostCommit(what, d.fn, d.at, d.run.intent, produced, true, err) });
              else if (d.run.edit) out.push({ value: await this.settleLostEdit(what, d.fn, d.at, d.run.edit, produced, true, err) });
              else out.push({ error: err });
            } catch (failure) {
              out.push({ error: failure });
            }
          }
          return out;
        }
      });
    } catch {
      settled = null;
    }
    if (settled === null) {
      // Nothing of the group was committed (a known failure, `whole`): each caller is written
      // alone, as without group commit, and answered by its own outcome.
      for (const m of members) await m.solo().then(m.resolve, m.reject);
      return;
    }
    for (let i = 0; i < members.length; i++) {
      const m = members[i]!;
      const r = settled[i]!;
      if ('error' in r) m.reject(this.wrap(r.error, null));
      else if (r.value instanceof RaiseAfterCommit) m.reject(r.value.error);
      else m.resolve(r.value);
    }
  }

  /** What every write shares, in a transaction or standing alone (see {@link AloneStep}): the store open and writable, queued on a single connection, errors wrapped. */
  async writing<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.checkOpen();
    if (this.readOnly) throw new InvalidArgument(`store ${this.name} was opened read-only: ${what} writes`);
    try {
      return await this.locked(fn);
    } catch (err) {
      throw this.wrap(err, null);
    }
  }

  /** Inserts events in order — in one statement where the dialect can — and returns them with their ids. */
  async insertEvents(tx: SqlExecutor, all: readonly ReturnType<typeof eventFields>[]): Promise<EventRecord[]> {
    if (all.length === 0) return [];
    const many = this.sql.sql.insertEvents;
    if (all.length === 1 || many === undefined) {
      const stored: EventRecord[] = [];
      for (const fields of all) stored.push(await this.insertEvent(tx, fields));
      return stored;
    }
    const params: SqlValue[] = [];
    for (const f of all) params.push(...f.params);
    const rows = (await this.query<{ event_id: SqlValue }>(tx, this.insertEventsSql(all.length, many), params)).rows;
    if (rows.length !== all.length) throw new StoreError(`[kernel] [${this.name}] ${all.length} events inserted, ${rows.length} ids returned`);
    // Ids follow row order; RETURNING's own order is not promised, so they are sorted (when not already).
    const ids = new Array<number>(rows.length);
    let ascending = true;
    for (let i = 0; i < rows.length; i++) {
      ids[i] = int(rows[i]!.event_id, 'events.event_id');
      if (i > 0 && ids[i]! < ids[i - 1]!) ascending = false;
    }
    if (!ascending) ids.sort((a, b) => a - b);
    const stored = new Array<EventRecord>(all.length);
    for (let i = 0; i < all.length; i++) stored[i] = storedEvent(ids[i]!, all[i]!.record);
    return stored;
  }

  /**
   * The dialect's `n`-row event insert; the few sizes one step writes are built once (a driver
   * then finds its prepared statement by the very same string), a long batch each time.
   */
  insertEventsSql(n: number, many: (n: number) => string): string {
    if (n > EVENTS_SQL_KEPT) return many.call(this.sql.sql, n);
    let text = this.#eventsSql[n];
    if (text === undefined) this.#eventsSql[n] = text = many.call(this.sql.sql, n);
    return text;
  }

  async insertEvent(tx: SqlExecutor, fields: ReturnType<typeof eventFields>): Promise<EventRecord> {
    const row = (await this.query<{ event_id: SqlValue }>(tx, this.sql.sql.insertEvent, fields.params)).rows[0];
    return storedEvent(int(row?.event_id, 'events.event_id'), fields.record);
  }

  /**
   * Chains a receipt (spec 03 §5.2): the head row locked and advanced first, so concurrent
   * writers queue rather than race; the row; the head's hash. Throws {@link ReceiptAlreadyStored}
   * on an id already stored (the transaction must roll back: the head never advances without its row).
   */
  async chainReceipt(tx: SqlExecutor, r: ReturnType<typeof receiptFields>): Promise<StoredReceipt> {
    const { sql } = this.sql;
    const head = (await this.query<{ seq: SqlValue; hash: string }>(tx, sql.lockChainHead)).rows[0];
    if (!head) throw new InvalidArgument('the receipt chain has no head row (receipt_chain id = 1)');
    const seq = int(head.seq, 'receipt_chain.seq');
    const prevHash = String(head.hash);
    const sealed = sealReceipt(r.document, seq, prevHash);
    let inserted: number;
    try {
      ({ rowsAffected: inserted } = await this.query(tx, sql.insertReceipt, [
        r.receiptId,
        r.actionId,
        r.effectKey,
        r.result,
        sealed.json,
        r.finishedAt,
        seq,
        prevHash,
        sealed.hash,
      ]));
    } catch (err) {
      if (!this.sql.isUniqueViolation(err)) throw err;
      inserted = 0;
    }
    if (inserted !== 1) {
      // The id is stored: chained here when it is this receipt, pending (see {@link pendReceipt}).
      const pending = pendingReceipt(r.document);
      const params = [sealed.json, seq, prevHash, sealed.hash, r.receiptId, pending.json, pending.hash];
      if ((await this.query(tx, sql.chainPendingReceipt, params)).rowsAffected !== 1) throw new ReceiptAlreadyStored(r.receiptId);
    }
    await this.query(tx, sql.setChainHash, [sealed.hash]);
    return { seq, prevHash, hash: sealed.hash, json: sealed.json, document: sealed.document };
  }

  /**
   * Writes a receipt pending: its row with no chain columns, the document as
   * {@link pendingReceipt} renders it. Throws {@link ReceiptAlreadyStored} on an id already stored.
   */
  async pendReceipt(tx: SqlExecutor, r: ReturnType<typeof receiptFields>): Promise<void> {
    const pending = pendingReceipt(r.document);
    const params = [r.receiptId, r.actionId, r.effectKey, r.result, pending.json, r.finishedAt, null, null, pending.hash];
    let inserted: number;
    try {
      ({ rowsAffected: inserted } = await this.query(tx, this.sql.sql.insertReceipt, params));
    } catch (err) {
      if (!this.sql.isUniqueViolation(err)) throw err;
      inserted = 0;
    }
    if (inserted !== 1) throw new ReceiptAlreadyStored(r.receiptId);
  }

  async effect(ex: SqlExecutor, key: string): Promise<EffectRecord | null> {
    const row = (await this.query<EffectRow>(ex, this.sql.sql.selectEffect, [key])).rows[0];
    return row ? effectFromRow(row) : null;
  }

  async approval(ex: SqlExecutor, id: string): Promise<ApprovalRecord | null> {
    const row = (await this.query<ApprovalRow>(ex, this.sql.sql.selectApproval, [id])).rows[0];
    return row ? approvalFromRow(row) : null;
  }

  /**
   * Writes `next` over `prior` only if the row is still `prior`. Anything else means it moved on:
   * the row is re-read and `refuse` (the operation's own predicate) names the refusal. The write
   * is declared on `run` first, so a lost COMMIT can be settled (Table A2).
   */
  async cas(tx: SqlExecutor, prior: EffectRecord, next: EffectRecord, run: WriteRun, refuse: (found: EffectRecord | null) => Error): Promise<EffectRecord> {
    run.intent = { kind: 'update', prior, target: next, refuse };
    const { rowsAffected } = await this.query(tx, this.sql.sql.updateEffect, effectParams(next, prior));
    if (rowsAffected !== 1) throw refuse(await this.effect(tx, prior.effectKey));
    return next;
  }
}
