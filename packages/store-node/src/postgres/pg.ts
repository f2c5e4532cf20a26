/**
 * The `pg` driver: PostgreSQL through a `pg.Pool`, for many hosts. Each transaction pins one
 * pooled client for `BEGIN; SET LOCAL search_path` … `COMMIT`, and nothing it needs is
 * session-scoped — its named prepared statements (`prepare`, the default) are a cache it stops
 * using when a server has lost one — so it works behind a transaction-mode pooler; reads are single
 * autocommit statements on schema-qualified tables.
 *
 * Lost COMMIT (docs/spec/03-production.md §3.4, Table A): an error before `COMMIT` is a failed write (rolled back,
 * raised); SQLSTATE 40001/40P01 at `COMMIT` is a failed write too; any other error during or after
 * `COMMIT` destroys that client and rejects with {@link AmbiguousWrite}, which the kernel's store
 * settles by re-reading on a fresh, non-pooled client ({@link PgDriver.reread}).
 *
 * `pg` is an optional peer dependency: {@link createPgStore} takes a pool you built (or a lazy
 * function returning one) and never imports it; {@link openPgStore} imports it for a URL.
 *
 * @module
 */
import { AmbiguousWrite, InvalidArgument, maskUrl, StoreError, type Logger } from '@ctrlrun/kernel';
import {
  commitErrorOutcome,
  quoteIdentifier,
  standaloneErrorOutcome,
  type DriverCapabilities,
  type QueryResult,
  type SqlDriver,
  type SqlExecutor,
  type SqlValue,
  transactionExecutor,
} from '@ctrlrun/kernel/store';
import { importOnce } from '../optional-import.js';
import { SchemaStore, checkSchema, checkStoreOptions, message, openSchemaStore, type PostgresStoreOptions } from './postgres-common.js';
import { installNodeSha256 } from '../node-digest.js';
import { createHash } from 'node:crypto';

/** What `pg` returns for one statement, as far as the driver reads it. */
export interface PgResultLike {
  rows: unknown[];
  rowCount: number | null;
  /** The command tag's verb (`COMMIT`, or `ROLLBACK` for a COMMIT that ended an aborted transaction). */
  command?: string | null;
  fields?: readonly { name: string; dataTypeID: number }[];
}

/** A `pg` client, structurally (a pooled client or a `new pg.Client()`). */
export interface PgClientLike {
  query(config: { text: string; values?: unknown[] } | string): Promise<PgResultLike | PgResultLike[]>;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/** A client checked out of a pool: `release(err)` with an error destroys it. */
export interface PgPoolClientLike extends PgClientLike {
  release(destroy?: Error | boolean): void;
}

/** A non-pooled client, for the re-read after a lost COMMIT. */
export interface PgStandaloneClientLike extends PgClientLike {
  connect(): Promise<unknown>;
  end(): Promise<void>;
}

/** A `pg.Pool`, structurally. `options` and `Client` (both on a real pool) build the fresh re-read client. */
export interface PgPoolLike {
  connect(): Promise<PgPoolClientLike>;
  query(config: { text: string; values?: unknown[] } | string): Promise<PgResultLike | PgResultLike[]>;
  end(): Promise<void>;
  readonly options?: object;
  readonly Client?: new (config?: object) => PgStandaloneClientLike;
}

/** Options of {@link PgDriver}. */
export interface PgDriverOptions {
  /** The schema holding the store's tables; the store never creates it. Default: the role's `current_schema()`. */
  schema?: string;
  /** A fresh, unconnected client for the re-read after a lost COMMIT; default `new pool.Client(pool.options)`. */
  freshClient?: () => PgStandaloneClientLike | Promise<PgStandaloneClientLike>;
  /** End the pool on `close()` (only for a pool the store built itself). */
  ownsPool?: boolean;
  /**
   * Send the store's statements as named prepared statements (parsed and planned once per
   * connection, not on every call), and each write step as one statement (its effect row,
   * events and chained receipt together) — the outcome one that commits on its own, on a
   * connection of the store's own (`writeAlone`), its receipt sealed by the kernel: 4 round trips
   * per allowed action instead of 12. That connection is the store's own, beside the pool's (one
   * more than the pool's `max`), opened at the first outcome and closed by `close()`. Default `true`.
   *
   * Behind a transaction-mode pooler that does not keep protocol-level prepared statements
   * (PgBouncer before 1.21, or `max_prepared_statements = 0`) a later call may reach a server
   * connection that does not have the statement (SQLSTATE 26000) or has it already (42P05). Both
   * are reports that nothing ran: the driver then stops naming statements for good (one warning),
   * and runs the statement again unnamed — or, inside a transaction, rolls it back and runs the
   * transaction again from the start, once. A name is its text's SHA-256, the same in every process
   * and version, so a statement another client prepared under it is the very same text. `false`:
   * statement by statement, in transactions, nothing named.
   */
  prepare?: boolean;
  /** Where the warning goes when a pooler loses a prepared statement (`ctrlrun.postgres`); default `console`. */
  logger?: Logger;
  /**
   * With `prepare`: writes that commit on their own and arrive while one is out go together in
   * one transaction (see {@link PgDriver.writeAlone}); default `true`. `false`: each its own commit.
   */
  groupCommit?: boolean;
}

const INT8_OID = 20;
/** Prepared-statement names by SQL text, shared by every driver. */
const PREPARED = new Map<string, string>();
/** At most this many distinct texts are prepared; any further one is sent unnamed. */
const MAX_PREPARED = 200;

/**
 * The name a text is prepared under: `ctrlrun_` and the first 128 bits of the text's SHA-256,
 * so a name means one text in every process and every version. Behind a pooler, a connection
 * may reach a server backend where another client prepared that name: it is the same statement.
 */
function preparedName(sql: string): string | undefined {
  let name = PREPARED.get(sql);
  if (name === undefined && PREPARED.size < MAX_PREPARED) {
    PREPARED.set(sql, (name = `ctrlrun_${createHash('sha256').update(sql, 'utf8').digest('hex').slice(0, 32)}`));
  }
  return name;
}

/**
 * The server has no statement named `name` (26000), or has one already (42P05): a pooler gave
 * this connection another server backend. The server reports it before running anything of the
 * statement. The message is matched on the bare name only: its wording and quotes follow the
 * server's `lc_messages` (`vorbereitete Anweisung »ctrlrun_…« existiert nicht`).
 */
function lostPrepared(err: unknown, name: string): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  return (code === '26000' || code === '42P05') && typeof message === 'string' && message.includes(name);
}
/** How long the re-read after a lost COMMIT may take to connect, and to answer, unless the pool says otherwise. */
const REREAD_TIMEOUT_MS = 10_000;
const INSTALL = 'pg@8';

/** `int8` arrives as text: a number when exact, else a `bigint`. */
function int8(v: unknown): unknown {
  if (typeof v !== 'string' || !/^-?\d+$/.test(v)) return v;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : BigInt(v);
}

function single(r: PgResultLike | PgResultLike[]): PgResultLike {
  return Array.isArray(r) ? (r[r.length - 1] ?? { rows: [], rowCount: 0 }) : r;
}

/** The socket under a `pg` client, where it has one (pg's `connection.stream`); anything else: none. */
function socketOf(client: PgClientLike): { cork(): void; uncork(): void } | null {
  const stream = (client as { connection?: { stream?: unknown } }).connection?.stream as { cork?: unknown; uncork?: unknown } | undefined;
  return typeof stream?.cork === 'function' && typeof stream.uncork === 'function' ? (stream as { cork(): void; uncork(): void }) : null;
}

/**
 * Sends one query with the socket corked: `pg` writes an extended query as five messages (Parse,
 * Bind, Describe, Execute, Sync), each its own socket write, i.e. its own system call; corked, they
 * leave in one. A pool (no socket of its own) or a client that queues the query is unaffected.
 */
function corked<R>(client: PgClientLike, send: () => R): R {
  const socket = socketOf(client);
  if (socket === null) return send();
  socket.cork();
  try {
    return send();
  } finally {
    socket.uncork();
  }
}

/** Errors a client emits while checked out land here instead of crashing the process; the pending query rejects anyway. */
const ARMED = new WeakSet<object>();
function arm(client: PgClientLike): void {
  if (ARMED.has(client)) return;
  ARMED.add(client);
  client.on('error', () => undefined);
}

/** A write waiting to go on the connection that writes alone (see {@link PgDriver.writeAlone}). */
interface AloneWrite {
  readonly sql: string;
  readonly params: readonly SqlValue[];
  resolve(result: QueryResult<unknown>): void;
  reject(err: unknown): void;
}

/** At most this many writes commit together in one transaction of the connection that writes alone. */
const ALONE_BATCH = 64;

/** The server refused a statement because an earlier one aborted the transaction (25P02): not its own failure. */
function inFailedTransaction(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '25P02';
}

/** A {@link SqlDriver} over a `pg.Pool` (or a lazy function returning one). */
export class PgDriver implements SqlDriver {
  readonly name: string = 'pg';
  readonly dialect = 'postgres' as const;
  /** With `prepare` (the default), each write step is one (prepared) statement; with `prepare: false`, statement by statement. */
  readonly capabilities: DriverCapabilities;
  readonly #source: PgPoolLike | (() => PgPoolLike | Promise<PgPoolLike>);
  readonly #options: PgDriverOptions;
  #pool: Promise<PgPoolLike> | null = null;
  #alone: Promise<PgStandaloneClientLike & { ref?(): void; unref?(): void }> | null = null;
  /** Writes waiting for the batch out on the connection that writes alone; `null`: none is out. */
  #waiting: AloneWrite[] | null = null;
  /** Batches out on each connection that writes alone (several with `groupCommit: false`): held open while above 0. */
  readonly #aloneBusy = new WeakMap<object, number>();
  #schema: string | null;
  #begin: string | null = null;
  #closed = false;
  /** Statements go out named until a server proves it does not keep them. */
  #named: boolean;

  constructor(pool: PgPoolLike | (() => PgPoolLike | Promise<PgPoolLike>), options: PgDriverOptions = {}) {
    installNodeSha256();
    if (typeof pool !== 'function' && (typeof pool !== 'object' || pool === null || typeof pool.connect !== 'function' || typeof pool.query !== 'function')) {
      throw new InvalidArgument('pool must be a pg.Pool (connect, query, end) or a function returning one');
    }
    if (options.schema !== undefined) checkSchema(options.schema);
    if (options.prepare !== undefined && typeof options.prepare !== 'boolean') throw new InvalidArgument('prepare must be a boolean');
    if (options.groupCommit !== undefined && typeof options.groupCommit !== 'boolean') throw new InvalidArgument('groupCommit must be a boolean');
    this.#source = pool;
    this.#options = options;
    this.capabilities = Object.freeze({ concurrentConnections: true, oneStatementSteps: options.prepare !== false, groupCommit: 'back-to-back' });
    this.#named = options.prepare !== false;
    this.#schema = options.schema ?? null;
  }

  /** Whether statements are still sent named (see {@link PgDriverOptions.prepare}). */
  get prepared(): boolean {
    return this.#named;
  }

  /** A server lost one of our prepared statements: from now on nothing is named (warned once). */
  #unname(err: unknown): void {
    if (!this.#named) return;
    this.#named = false;
    const warn = this.#options.logger ?? console;
    try {
      warn.warn(
        `[pg] the server does not keep this driver's prepared statements (${message(err)}): a transaction-mode pooler without prepared-statement support? From now on the statements go unnamed; open the store with { prepare: false } to say so from the start`,
        { logger: 'ctrlrun.postgres', level: 'WARNING' },
      );
    } catch {
      // A logger that throws must not stop the statement from being sent again.
    }
  }

  /** The schema holding the tables (resolved by {@link resolveSchema}). */
  get schema(): string {
    if (this.#schema === null) throw new StoreError('[pg] the schema is not resolved yet: call resolveSchema() first');
    return this.#schema;
  }

  #getPool(): Promise<PgPoolLike> {
    if (this.#closed) return Promise.reject(new StoreError('[pg] the driver is closed'));
    return (this.#pool ??= (async () => {
      const pool = typeof this.#source === 'function' ? await this.#source() : this.#source;
      if (typeof pool !== 'object' || pool === null || typeof pool.connect !== 'function' || typeof pool.query !== 'function') {
        throw new InvalidArgument('the pool function must return a pg.Pool (connect, query, end)');
      }
      return pool;
    })().catch((err: unknown) => {
      this.#pool = null;
      throw err;
    }));
  }

  /** Settles the schema: the one given, else the role's `current_schema()` (refused when there is none). */
  async resolveSchema(): Promise<string> {
    if (this.#schema === null) {
      const row = (await this.query<{ schema: string | null }>('SELECT current_schema() AS schema')).rows[0];
      if (typeof row?.schema !== 'string') {
        throw new StoreError("[pg] the role's search_path names no existing schema: pass { schema } (the store never creates one)");
      }
      this.#schema = row.schema;
    }
    this.#begin = `BEGIN; SET LOCAL search_path TO ${quoteIdentifier(this.#schema)}`;
    return this.#schema;
  }

  /**
   * One statement on `client`. A named statement the server lost (see {@link lostPrepared}) ran
   * nothing: naming stops, and outside a transaction the statement is sent again, unnamed; inside
   * one (`tx`) the transaction is aborted, so it is marked to be run again from the start.
   */
  async #run<Row>(
    client: PgClientLike,
    sql: string,
    params: readonly SqlValue[],
    tx?: { lostStatement: boolean; failed?: boolean },
  ): Promise<QueryResult<Row>> {
    const values = params.map((p) => (typeof p === 'bigint' ? p.toString() : p));
    const name = this.#named && values.length > 0 ? preparedName(sql) : undefined;
    const config = values.length === 0 ? { text: sql } : name === undefined ? { text: sql, values } : { text: sql, values, name };
    let raw: PgResultLike | PgResultLike[];
    try {
      raw = await corked(client, () => client.query(config));
    } catch (err) {
      // After an earlier statement of the same transaction failed, the server may report a name
      // `pg` forgot on that failure (26000) before the aborted transaction: not a lost statement.
      const after = tx?.failed === true;
      if (tx !== undefined) tx.failed = true;
      if (name === undefined || after || !lostPrepared(err, name)) throw err;
      this.#unname(err);
      if (tx === undefined) return this.#run<Row>(client, sql, params);
      tx.lostStatement = true;
      throw err;
    }
    const result = single(raw);
    const wide = (result.fields ?? []).filter((f) => f.dataTypeID === INT8_OID).map((f) => f.name);
    if (wide.length > 0) {
      for (const row of result.rows as Record<string, unknown>[]) for (const name of wide) row[name] = int8(row[name]);
    }
    return { rows: result.rows as Row[], rowsAffected: result.rowCount ?? 0 };
  }

  /** One autocommit statement on any pooled connection. */
  async query<Row = Record<string, unknown>>(sql: string, params: readonly SqlValue[] = []): Promise<QueryResult<Row>> {
    const pool = await this.#getPool();
    return this.#run<Row>(pool as unknown as PgClientLike, sql, params);
  }

  async exec(sql: string): Promise<void> {
    const pool = await this.#getPool();
    await pool.query(sql);
  }

  /**
   * `fn` on one pinned client between `BEGIN; SET LOCAL search_path` and `COMMIT`. Table A: a
   * failure before COMMIT rolls back and rethrows (a failed write); at COMMIT, 40001/40P01 is a
   * failed write, anything else destroys the client and rejects with {@link AmbiguousWrite}; a
   * COMMIT the server answers as ROLLBACK (an error `fn` caught aborted it) is a failed write. A
   * transaction that failed because the server lost a prepared statement of ours (nothing of that
   * statement ran) is rolled back and run again from the start, once, with nothing named.
   */
  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const pool = await this.#getPool();
    const begin = this.#begin ?? (await this.resolveSchema(), this.#begin!);
    const client = await pool.connect();
    arm(client);
    let broken: Error | undefined;
    try {
      for (let attempt = 1; ; attempt++) {
        let live = true;
        const aborted = { lostStatement: false };
        const tx = transactionExecutor('pg', () => live, {
          query: <Row>(sql: string, params: readonly SqlValue[]) => this.#run<Row>(client, sql, params, aborted),
          exec: async (sql: string) => void (await client.query(sql)),
        });
        let result: T;
        try {
          await client.query(begin);
          result = await fn(tx);
          // A refusal `fn` caught and went past still aborted the transaction: COMMIT would roll it back.
          if (aborted.lostStatement) throw new StoreError('[pg] a prepared statement was lost and the transaction aborted');
        } catch (err) {
          live = false;
          try {
            await client.query('ROLLBACK');
          } catch (rollbackErr) {
            broken = rollbackErr as Error; // the connection is gone; the server rolls back on its own
          }
          // Rolled back, and what failed never ran: the same transaction again, unnamed (`#named` is off now).
          if (aborted.lostStatement && attempt === 1 && broken === undefined) continue;
          throw err;
        } finally {
          live = false;
        }
        let committed: PgResultLike | PgResultLike[];
        try {
          committed = await client.query('COMMIT');
        } catch (err) {
          broken = err as Error;
          if (commitErrorOutcome(err) === 'failed') {
            throw new StoreError(`[pg] COMMIT failed and the server rolled the transaction back (${message(err)}); nothing was written`, {
              sql: 'COMMIT',
              cause: err,
            });
          }
          throw new AmbiguousWrite(`[pg] the connection failed during COMMIT (${message(err)}): the write may or may not have landed`, { cause: err });
        }
        // A transaction an error aborted — one `fn` caught and went past — ends at COMMIT without an
        // error, as a ROLLBACK: nothing was written, so `fn`'s value is not the outcome.
        if (single(committed).command === 'ROLLBACK') {
          throw new StoreError('[pg] the transaction was aborted by an error that was caught and gone past: COMMIT rolled it back; nothing was written', {
            sql: 'COMMIT',
          });
        }
        return result;
      }
    } finally {
      client.release(broken ?? undefined);
    }
  }

  /**
   * One write statement on the store's own connection, committed on its own (with `prepare`
   * only). Statements written while another is out wait, and then go together: `BEGIN`, each in
   * call order, `COMMIT`, sent back to back on the pipelined connection — one round trip and one
   * WAL flush for them all (group commit), each answered only after that COMMIT. An error the
   * server reports rolls back what it went with: that statement gets its error, the others a
   * {@link StoreError} saying nothing was written (so each is written again on its own); any other
   * failure (see {@link standaloneErrorOutcome}) destroys the connection and rejects each with
   * {@link AmbiguousWrite}: they may have committed.
   */
  writeAlone<Row = Record<string, unknown>>(sql: string, params: readonly SqlValue[]): Promise<QueryResult<Row>> {
    return new Promise<QueryResult<Row>>((resolve, reject) => {
      const write: AloneWrite = { sql, params, resolve: resolve as AloneWrite['resolve'], reject };
      if (this.#options.groupCommit === false) {
        // One commit each: sent at once, pipelined behind any still out.
        void this.#writeBatch([write]);
        return;
      }
      if (this.#waiting !== null) {
        this.#waiting.push(write);
        return;
      }
      // None out: sent at once; those written meanwhile wait for it.
      this.#waiting = [];
      void this.#sendAlone([write]);
    });
  }

  /** Sends `batch`, then whatever waited meanwhile (at most {@link ALONE_BATCH} a transaction), until none is left. */
  async #sendAlone(batch: AloneWrite[]): Promise<void> {
    for (;;) {
      await this.#writeBatch(batch);
      const waiting = this.#waiting ?? [];
      if (waiting.length === 0) {
        this.#waiting = null;
        return;
      }
      batch = waiting.splice(0, ALONE_BATCH);
    }
  }

  /** One batch on the connection that writes alone; every write in it is answered, nothing thrown. */
  async #writeBatch(batch: AloneWrite[]): Promise<void> {
    const connection = (this.#alone ??= this.#openAlone());
    let client: Awaited<typeof connection>;
    try {
      client = await connection;
    } catch (err) {
      if (this.#alone === connection) this.#alone = null;
      for (const w of batch) w.reject(err);
      return;
    }
    // Held open only while a batch is out: an idle connection never keeps the process alive.
    const busy = this.#aloneBusy.get(client) ?? 0;
    this.#aloneBusy.set(client, busy + 1);
    if (busy === 0) client.ref?.();
    const lost = (err: unknown, what: string) => {
      if (this.#alone === connection) this.#alone = null;
      void client.end().catch(() => undefined);
      return new AmbiguousWrite(`[pg] the connection failed during ${what} (${message(err)}): the write may or may not have landed`, { cause: err });
    };
    try {
      if (batch.length === 1) {
        const w = batch[0]!;
        try {
          w.resolve(await this.#run(client, w.sql, w.params));
        } catch (err) {
          w.reject(standaloneErrorOutcome(err) === 'failed' ? err : lost(err, 'a write that commits on its own'));
        }
        return;
      }
      const aborted = { lostStatement: false };
      // Sent back to back, in this order, before any answer is awaited.
      const sent: Promise<unknown>[] = [
        corked(client, () => client.query('BEGIN')),
        ...batch.map((w) => this.#run(client, w.sql, w.params, aborted)),
        corked(client, () => client.query('COMMIT')),
      ];
      const settled = await Promise.allSettled(sent);
      const answers = settled.slice(1, -1);
      const commit = settled.at(-1)!;
      const committed = commit.status === 'fulfilled' && single(commit.value as PgResultLike | PgResultLike[]).command === 'COMMIT';
      const broken = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected' && standaloneErrorOutcome(r.reason) === 'ambiguous');
      // A server error aborts the transaction (its COMMIT answers ROLLBACK): a write refused under a
      // COMMIT that committed cannot be told apart, and is settled by its re-read as a lost one.
      const unexplained = committed ? answers.find((a): a is PromiseRejectedResult => a.status === 'rejected') : undefined;
      if (broken !== undefined || unexplained !== undefined) {
        const err = lost((broken ?? unexplained)!.reason, `a transaction of ${batch.length} writes that commit together`);
        for (const w of batch) w.reject(err);
        return;
      }
      if (committed) {
        batch.forEach((w, i) => w.resolve((answers[i] as PromiseFulfilledResult<QueryResult<unknown>>).value));
        return;
      }
      // Rolled back whole: the write that failed gets its own error, the others say nothing was written.
      const failure = answers.find((a): a is PromiseRejectedResult => a.status === 'rejected' && !inFailedTransaction(a.reason));
      const why = failure === undefined ? (commit.status === 'rejected' ? message(commit.reason) : 'COMMIT rolled it back') : message(failure.reason);
      batch.forEach((w, i) => {
        const a = answers[i]!;
        if (a === failure) w.reject(a.reason);
        else
          w.reject(
            new StoreError(
              `[pg] nothing was written: this write went in one transaction with ${batch.length - 1} others, and one failed (${why}); it rolled back whole`,
              {
                cause: failure?.reason,
              },
            ),
          );
      });
    } finally {
      const left = (this.#aloneBusy.get(client) ?? 1) - 1;
      this.#aloneBusy.set(client, left);
      // Once the store is closing, `close()` holds the connection open until it has ended.
      if (left === 0 && !this.#closed) client.unref?.();
    }
  }

  /**
   * The one connection that writes alone: `freshClient`'s, else the pool's `Client` with its
   * options and `pipeline` (statements sent back to back where `pg` can, 8.23 on; in turn
   * otherwise — in order either way). Dropped when it ends, so the next write opens another.
   */
  async #openAlone(): Promise<PgStandaloneClientLike & { ref?(): void; unref?(): void; on(event: 'end', listener: () => void): unknown }> {
    const pool = await this.#getPool();
    let client: PgStandaloneClientLike;
    if (this.#options.freshClient) client = await this.#options.freshClient();
    else if (typeof pool.Client === 'function') client = new pool.Client({ ...(pool.options ?? {}), pipeline: true });
    else throw new StoreError('[pg] cannot open a connection of its own: the pool has no Client/options; pass freshClient');
    arm(client);
    await client.connect();
    const opened = client as PgStandaloneClientLike & { ref?(): void; unref?(): void; on(event: 'end', listener: () => void): unknown };
    opened.unref?.();
    opened.on('end', () => {
      if (this.#alone !== null) void this.#alone.then((c) => c === opened && (this.#alone = null)).catch(() => undefined);
    });
    return opened;
  }

  /** Runs `fn` on a fresh, non-pooled client (never one that saw the lost COMMIT), then ends it. */
  async reread<T>(fn: (ex: SqlExecutor) => Promise<T>): Promise<T> {
    const pool = await this.#getPool();
    let client: PgStandaloneClientLike;
    if (this.#options.freshClient) client = await this.#options.freshClient();
    else if (typeof pool.Client === 'function') {
      // Bounded: a re-read that cannot connect or answer must fail (and raise), not hang the caller.
      const options = (pool.options ?? {}) as Record<string, unknown>;
      client = new pool.Client({
        ...options,
        connectionTimeoutMillis: options['connectionTimeoutMillis'] || REREAD_TIMEOUT_MS,
        query_timeout: options['query_timeout'] || REREAD_TIMEOUT_MS,
      });
    } else throw new StoreError('[pg] cannot open a fresh connection for the re-read: the pool has no Client/options; pass freshClient');
    arm(client);
    try {
      await client.connect();
      return await fn({
        query: <Row = Record<string, unknown>>(sql: string, params: readonly SqlValue[] = []) => this.#run<Row>(client, sql, params),
        exec: async (sql: string) => {
          await client.query(sql);
        },
      });
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** Ends the pool only if the store built it; a pool you passed in stays yours. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const alone = this.#alone;
    this.#alone = null;
    // Held open while it ends: unreferenced when idle, its socket would let the process exit
    // before `end()` settles, and nothing after `await close()` would run.
    if (alone)
      await alone
        .then((client) => {
          client.ref?.();
          return client.end();
        })
        .catch(() => undefined);
    const pool = this.#pool;
    this.#pool = null;
    if (this.#options.ownsPool && pool) await (await pool).end();
  }
}

/** Options of {@link createPgStore}. */
export interface PgStoreOptions extends PostgresStoreOptions {
  /** The schema holding the tables; it must exist (never created). Default: the role's `current_schema()`. */
  schema?: string;
  /** Where warnings go, including the lost-COMMIT branch taken (`ctrlrun.postgres`); default `console`. */
  logger?: Logger;
  /** A fresh, unconnected client for the re-read after a lost COMMIT; default `new pool.Client(pool.options)`. */
  freshClient?: () => PgStandaloneClientLike | Promise<PgStandaloneClientLike>;
  /** Named prepared statements and one statement per write step (see {@link PgDriverOptions.prepare}); default `true`. */
  prepare?: boolean;
}

/** A state store on PostgreSQL through `pg`. */
export class PgStore extends SchemaStore<PgDriver> {
  constructor(driver: PgDriver, options: Omit<PgStoreOptions, 'schema' | 'freshClient'> = {}) {
    // With `prepare` the driver groups the outcomes (they commit on its own connection); statement
    // by statement, the kernel groups them in a transaction of the pool, when asked (`true`).
    super(driver, { ...options, groupCommit: driver.capabilities.oneStatementSteps === true ? false : options.groupCommit === true });
  }
}

function openOn(driver: PgDriver, options: PgStoreOptions): Promise<PgStore> {
  return openSchemaStore(driver, () => new PgStore(driver, options), '[pg]');
}

/**
 * Creates a ctrlrun state store on PostgreSQL over `pool` (a `pg.Pool`, or a function returning
 * one), migrated and ready; a reader only opens an up-to-date one. The pool stays yours: `close()`
 * does not end it.
 *
 * @example
 * import pg from 'pg';
 * const store = await createPgStore(new pg.Pool({ connectionString: process.env.DATABASE_URL }));
 */
export async function createPgStore(pool: PgPoolLike | (() => PgPoolLike | Promise<PgPoolLike>), options: PgStoreOptions = {}): Promise<PgStore> {
  checkStoreOptions(options, 'createPgStore');
  return openOn(new PgDriver(pool, driverOptions(options)), options);
}

/** What of the store's options the driver takes. */
function driverOptions(options: PgStoreOptions): PgDriverOptions {
  const { schema, freshClient, prepare, logger, groupCommit } = options;
  return { schema, freshClient, prepare, logger, groupCommit };
}

/** Imports `pg` once; a missing package is a {@link MissingDependency} naming the install. */
const loadPg = importOnce(() => import('pg'), {
  name: 'pg',
  install: INSTALL,
  label: '[pg]',
  neededBy: 'the PostgreSQL store',
  notFound: /['"]pg['"]/,
  pick: (mod: unknown) => {
    const m = ((mod as { default?: unknown }).default ?? mod) as { Pool?: unknown; Client?: unknown };
    if (typeof m.Pool !== 'function' || typeof m.Client !== 'function') throw new StoreError('[pg] the pg module did not export Pool and Client');
    return m as { Pool: new (config: object) => PgPoolLike; Client: new (config?: object) => object };
  },
});

/**
 * How long a new connection of a pool the store builds may take (TCP, TLS, the server's greeting,
 * authentication) before it is refused, unless the URL says otherwise (`connect_timeout`, in
 * seconds; `0` waits for ever). Waiting for a free client of the pool is not bounded by it.
 */
const CONNECT_TIMEOUT_MS = 10_000;

/** The URL's `connect_timeout` in milliseconds, else {@link CONNECT_TIMEOUT_MS}; anything but a whole number of seconds is refused. */
function connectTimeoutOf(url: string): number {
  let given: string | null = null;
  try {
    given = new URL(url).searchParams.get('connect_timeout');
  } catch {
    // pg reads the URL itself and names what is wrong with it.
  }
  if (given === null) return CONNECT_TIMEOUT_MS;
  if (!/^\d{1,6}$/.test(given)) throw new InvalidArgument(`connect_timeout must be a whole number of seconds, got ${JSON.stringify(given)}`);
  return Number(given) * 1000;
}

/** pg's `Client`, its connection attempts given up after `timeoutMs` (0: never) unless a config sets its own. */
function boundedClient(Client: new (config?: object) => object, timeoutMs: number): new (config?: object) => object {
  return class extends Client {
    constructor(config: { connectionTimeoutMillis?: number } = {}) {
      super({ ...config, connectionTimeoutMillis: config.connectionTimeoutMillis || timeoutMs });
    }
  };
}

/**
 * Opens the store at a `postgres://` / `postgresql://` URL: imports `pg`, builds a pool the store
 * owns (ended by `close()`), and opens as {@link createPgStore}. A server that refuses the
 * connection, or does not answer it within {@link CONNECT_TIMEOUT_MS} (the URL's
 * `connect_timeout` seconds, if given), is a {@link StoreError} naming the address.
 */
export async function openPgStore(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
  if (typeof url !== 'string' || !/^postgres(?:ql)?:\/\//i.test(url))
    throw new InvalidArgument(`url must be a postgres:// or postgresql:// URL, got ${typeof url === 'string' ? JSON.stringify(maskUrl(url)) : typeof url}`);
  checkStoreOptions(options, 'openPgStore');
  const { Pool, Client } = await loadPg();
  // A server that accepts the connection and never answers is refused after the connect timeout,
  // not waited on for ever; the pool's own clients, its re-read's and its pipelined one alike.
  const connectMs = connectTimeoutOf(url);
  const pool = new Pool({ connectionString: url, Client: boundedClient(Client, connectMs) });
  // An idle pooled client whose server goes away emits 'error' on the pool; it is dropped, not fatal.
  (pool as unknown as { on?: (e: string, l: () => void) => void }).on?.('error', () => undefined);
  try {
    return await openOn(new PgDriver(pool, { ...driverOptions(options), ownsPool: true }), options);
  } catch (err) {
    // Name the address (without its password) in connection failures.
    if (err instanceof StoreError) {
      // pg says only "timeout expired": say how long, and what sets it.
      const waited =
        connectMs > 0 && /timeout expired|connection timeout/i.test(message(err))
          ? ` (no answer within ${connectMs / 1000} s; connect_timeout in the URL sets it)`
          : '';
      throw new StoreError(`[pg] ${maskUrl(url)}: ${message(err)}${waited}`, { sql: err.sql, cause: err });
    }
    throw err;
  }
}
