/**
 * The few things a database client must do for {@link SqlStateStore}. A driver file is tens of
 * lines: it maps these onto sql.js, better-sqlite3, pg or PGlite.
 *
 * @module
 */

/** The two SQL families the kernel writes SQL for. */
export type Dialect = 'sqlite' | 'postgres';

/** A parameter value. Integers beyond 2^53 − 1 travel as `bigint`. */
export type SqlValue = string | number | bigint | null;

/** Rows and the affected-row count of one statement. */
export interface QueryResult<Row> {
  /** Result rows (empty for statements that return none). */
  readonly rows: Row[];
  /** Rows inserted, updated or deleted by the statement. */
  readonly rowsAffected: number;
}

/** Runs statements: the driver itself, or the transaction handle inside {@link SqlDriver.transaction}. */
export interface SqlExecutor {
  /**
   * Runs one statement with positional parameters, in the dialect's placeholder style
   * (`?` for SQLite, `$1…` for Postgres), and returns its rows and affected-row count.
   */
  query<Row = Record<string, unknown>>(sql: string, params?: readonly SqlValue[]): Promise<QueryResult<Row>>;
  /** Runs one or more statements with no parameters (DDL). */
  exec(sql: string): Promise<void>;
}

/** What a driver can and cannot do. */
export interface DriverCapabilities {
  /**
   * `false` for engines with one connection (sql.js, PGlite, one better-sqlite3 handle): the
   * kernel then queues transactions so two awaits can never interleave inside one.
   */
  readonly concurrentConnections: boolean;
  /**
   * Send each write step as the dialect's one statement (its effect row, events and chained
   * receipt together) where it has one. Worth it where the statements are prepared: a long
   * statement parsed and planned on every call costs about what the round trips it saves do on a
   * server next door. Default `false`: statement by statement.
   */
  readonly oneStatementSteps?: boolean;
  /**
   * Group commit: the kernel may write the outcomes of concurrent callers in one transaction.
   * `'savepoints'`: each under its own savepoint (`SAVEPOINT`, `RELEASE SAVEPOINT`, `ROLLBACK TO
   * SAVEPOINT` through the handle's `exec`), so one caller's failure is rolled back alone — for
   * engines in the process, where a statement costs no round trip. `'back-to-back'`: no savepoint
   * (two round trips fewer per caller on a server); a failure rolls the group back and every
   * caller is then written alone. Absent: one transaction per outcome.
   */
  readonly groupCommit?: 'savepoints' | 'back-to-back';
}

/** A database client, as the kernel needs it. */
export interface SqlDriver extends SqlExecutor {
  /** Short name for messages, e.g. `sql.js`, `better-sqlite3`, `pg`. */
  readonly name: string;
  /** Which SQL the kernel sends. */
  readonly dialect: Dialect;
  readonly capabilities: DriverCapabilities;
  /**
   * Runs `fn` in one transaction: SQLite `BEGIN IMMEDIATE` (a write lock held across
   * processes); Postgres `BEGIN` on a dedicated connection. Commits when `fn` resolves, rolls
   * back and rethrows when it rejects. A driver that persists (sql.js with `save`) resolves only
   * once the committed bytes are durable. A driver may run `fn` again from the start, once, on a
   * transaction it rolled back because a statement was refused before it ran (`pg`: a prepared
   * statement the server lost); `fn` must not rely on anything an earlier run did.
   */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /**
   * Postgres drivers whose COMMIT can be lost in transit: runs `fn` (reads only) on a fresh
   * connection that never saw the lost COMMIT. A driver that may reject a transaction with
   * `AmbiguousWrite` (an error during or after `COMMIT`, after destroying that connection) must
   * have it; engines whose commit outcome is known in-call (SQLite, PGlite) leave it out.
   */
  reread?<T>(fn: (ex: SqlExecutor) => Promise<T>): Promise<T>;
  /**
   * Optional, Postgres drivers with {@link DriverCapabilities.oneStatementSteps}: runs one write
   * statement in its own implicit transaction (no `BEGIN`/`COMMIT` round trips), on one
   * connection. An error the server reports for it (severity `ERROR`) means nothing was written
   * and is thrown as is; any other failure (the connection lost, a `FATAL`) may have happened
   * after the commit and rejects with `AmbiguousWrite`, after destroying that connection — the
   * kernel then settles it with {@link reread}, as a lost COMMIT.
   */
  writeAlone?<Row = Record<string, unknown>>(sql: string, params: readonly SqlValue[]): Promise<QueryResult<Row>>;
  /** Releases the connection(s). Never fences other users of the same database. */
  close(): Promise<void>;
}
