/**
 * The better-sqlite3 driver: native SQLite on a file, for one host. WAL mode, `busy_timeout`
 * 5000 ms, and every read-decide-write inside an explicit `BEGIN IMMEDIATE` … `COMMIT`, whose
 * write lock holds across OS processes — so eight processes reserving one effect key get exactly
 * one winner, as in the Python original. Handles on one file in one thread (a process's main
 * thread, or one worker thread) take turns at that lock before `BEGIN IMMEDIATE`, so one never
 * waits out busy_timeout on another with the event loop blocked.
 *
 * better-sqlite3 is an optional peer dependency (version 12), imported on first use.
 *
 * @module
 */
import { closeSync, openSync, readSync, rmSync, statSync, accessSync, constants as fsConstants } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { InvalidArgument, MissingDependency, StoreError, type Clock } from '@ctrlrun/kernel';
import { SqlStateStore, type QueryResult, type SqlDriver, type SqlExecutor, type SqlValue, transactionExecutor } from '@ctrlrun/kernel/store';
import { importOnce } from '../optional-import.js';
import { installNodeSha256 } from '../node-digest.js';

/** The part of a better-sqlite3 `Statement` the driver uses. */
export interface BetterSqlite3Statement {
  /** True when the statement returns rows (a `SELECT`, a `PRAGMA`, or DML with `RETURNING`). */
  readonly reader: boolean;
  run(...params: unknown[]): { changes: number };
  all(...params: unknown[]): unknown[];
  safeIntegers(toggle?: boolean): this;
}

/** The part of a better-sqlite3 `Database` the driver uses. */
export interface BetterSqlite3Database {
  readonly name: string;
  readonly open: boolean;
  readonly memory: boolean;
  readonly readonly: boolean;
  readonly inTransaction: boolean;
  prepare(sql: string): BetterSqlite3Statement;
  exec(sql: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  close(): unknown;
}

/** better-sqlite3's `Database` constructor, as far as the driver calls it. */
export type BetterSqlite3Constructor = new (
  filename: string,
  options?: { readonly?: boolean; fileMustExist?: boolean; timeout?: number },
) => BetterSqlite3Database;

/** Options of {@link createBetterSqlite3Store}. */
export interface BetterSqlite3StoreOptions {
  /** The clock every decision and stored timestamp uses (the only test seam). */
  clock?: Clock;
  /**
   * Open an up-to-date database for reading only: the file is opened read-only, nothing is
   * created or migrated, and every write is refused.
   */
  readOnly?: boolean;
  /**
   * SQLite's `synchronous` for this connection. `NORMAL` (default, as the reference): in WAL
   * mode a commit survives a process crash, and the last commits may be lost on power loss.
   * `FULL`: every commit is synced to disk before it returns (about eight times slower here).
   */
  synchronous?: 'NORMAL' | 'FULL';
  /**
   * Group commit (default `true`): the outcomes (effect row, event, chained receipt) of callers of
   * this store that arrive while another outcome is being written are written together in one
   * transaction, each under its own savepoint, every caller answered after the shared COMMIT.
   * `false`: one transaction, and one commit, per outcome.
   */
  groupCommit?: boolean;
}

/** Milliseconds a connection waits for another process's write lock before `SQLITE_BUSY`. */
export const BUSY_TIMEOUT_MS = 5000;
/** How many times the switch to WAL is tried before the open is refused. */
const WAL_ATTEMPTS = 5;
const SQLITE_HEADER = 'SQLite format 3\0';
const DML = /^\s*(?:INSERT|UPDATE|DELETE|REPLACE)\b/i;

const INSTALL = 'better-sqlite3@12';

/**
 * Refuses what cannot be a shared, durable SQLite file: in-memory names, a directory, a missing
 * parent directory, a file that is not a SQLite database, and (for a writer) a file this process
 * may not write. Checked before the file is opened, so a refused file is never touched.
 * Returns the absolute path and whether the file exists yet.
 */
function checkPath(path: string, readOnly: boolean): { absolute: string; exists: boolean } {
  if (typeof path !== 'string' || path.trim() === '') throw new InvalidArgument('path must be a non-empty file path');
  if (path.includes('\0')) throw new InvalidArgument('path must not contain a NUL character');
  if (path === ':memory:' || /^file::memory:/i.test(path) || /\bmode=memory\b/i.test(path)) {
    throw new InvalidArgument(
      `path ${JSON.stringify(path)} is an in-memory SQLite database, which is refused: reservations must outlive the process and be shared with other processes. Give a file path (or use @ctrlrun/store-sqljs for a store in memory).`,
    );
  }
  // better-sqlite3 is built without URI filenames: `file:x.db` would silently name a file "file:x.db".
  if (/^file:/i.test(path)) throw new InvalidArgument(`path ${JSON.stringify(path)} is a SQLite URI filename, which is not supported: give a plain file path`);
  const absolute = resolve(path);
  let stat;
  try {
    stat = statSync(absolute);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new InvalidArgument(`path ${absolute} cannot be examined: ${(err as Error).message}`);
    }
    stat = null;
  }
  if (stat === null) {
    if (readOnly) throw new InvalidArgument(`path ${absolute} does not exist; a read-only store never creates a database`);
    const parent = dirname(absolute);
    let parentStat;
    try {
      parentStat = statSync(parent);
    } catch {
      throw new InvalidArgument(`path ${absolute}: its directory ${parent} does not exist; create it first (the store creates the file, never directories)`);
    }
    if (!parentStat.isDirectory()) throw new InvalidArgument(`path ${absolute}: ${parent} is not a directory`);
    return { absolute, exists: false };
  }
  if (stat.isDirectory()) throw new InvalidArgument(`path ${absolute} is a directory; give the path of a database file inside it`);
  if (!stat.isFile()) throw new InvalidArgument(`path ${absolute} is not a regular file`);
  if (stat.size > 0) {
    const header = Buffer.alloc(SQLITE_HEADER.length);
    let fd: number | null = null;
    let read = 0;
    try {
      fd = openSync(absolute, 'r');
      read = readSync(fd, header, 0, header.length, 0);
    } catch (err) {
      throw new InvalidArgument(`path ${absolute} cannot be read: ${(err as Error).message}`);
    } finally {
      if (fd !== null) closeSync(fd);
    }
    if (read < header.length || header.toString('latin1') !== SQLITE_HEADER) {
      throw new InvalidArgument(`path ${absolute} is not a SQLite database (it does not start with the SQLite header); it was left untouched`);
    }
  }
  if (!readOnly) {
    try {
      accessSync(absolute, fsConstants.W_OK);
    } catch {
      throw new InvalidArgument(`path ${absolute} is read-only for this process; open it with readOnly: true to read it, or make it writable`);
    }
  }
  return { absolute, exists: true };
}

/** Imports better-sqlite3 once; a missing package is a {@link MissingDependency} naming the install. */
const loadBetterSqlite3 = importOnce(() => import('better-sqlite3'), {
  name: 'better-sqlite3',
  install: INSTALL,
  label: '[better-sqlite3]',
  neededBy: 'the SQLite file store',
  notFound: /better-sqlite3/,
  pick: (mod: unknown) => {
    const ctor = (mod as { default?: unknown }).default ?? mod;
    if (typeof ctor !== 'function') throw new StoreError('[better-sqlite3] the better-sqlite3 module did not export a Database constructor');
    return ctor as BetterSqlite3Constructor;
  },
});

/** A bound parameter: integers go in as SQLite INTEGER (a JS number alone would bind as REAL). */
function bindable(v: SqlValue): SqlValue {
  return typeof v === 'number' && Number.isSafeInteger(v) ? BigInt(v) : v;
}

/** A row read with safe integers: `bigint` back to `number` wherever that is exact. */
function exactRow(row: unknown): unknown {
  const r = row as Record<string, unknown>;
  for (const k in r) {
    const v = r[k];
    if (typeof v === 'bigint' && v >= -9007199254740991n && v <= 9007199254740991n) r[k] = Number(v);
  }
  return r;
}

/**
 * Turns at a database file's write lock, for the handles this thread has open on it (this module
 * is loaded once per thread). better-sqlite3 is synchronous: a second handle's `BEGIN IMMEDIATE`
 * on a file whose write lock another handle of this thread holds would wait out busy_timeout with
 * the event loop blocked (the holder can never reach its COMMIT), then fail with `database is
 * locked`. The handles of one thread take turns here instead, before `BEGIN IMMEDIATE`; other
 * processes and threads still meet at SQLite's lock (and wait there as before).
 */
class FileTurns {
  #held = false;
  readonly #waiting: { grant: () => void }[] = [];
  /** Open handles on the file. */
  handles = 0;

  /**
   * The turn: taken at once (`null`) when free, else a promise that resolves once it is the
   * caller's, or rejects after `waitMs` as SQLite's busy_timeout would (the waiter then leaves the
   * queue; a turn that a handle holds for good, such as a transaction waiting on another handle's,
   * is a refusal rather than a hang).
   */
  take(waitMs: number): Promise<void> | null {
    if (!this.#held) {
      this.#held = true;
      return null;
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        const at = this.#waiting.indexOf(waiter);
        if (at < 0) return;
        this.#waiting.splice(at, 1);
        reject(new StoreError(`[better-sqlite3] database is locked: another handle in this thread held the write lock for ${waitMs} ms`));
      }, waitMs);
      this.#waiting.push(waiter);
    });
  }

  /** Hands the turn to the caller waiting longest, or frees it. */
  give(): void {
    const next = this.#waiting.shift();
    if (next) next.grant();
    else this.#held = false;
  }

  get idle(): boolean {
    return !this.#held && this.#waiting.length === 0;
  }
}

/** By file identity (device and inode, so a second path or a link to the file meets the same turns). */
const TURNS = new Map<string, FileTurns>();

/** The file's identity, or null for a database with no file of its own. */
function fileIdentity(db: BetterSqlite3Database): string | null {
  if (db.memory || db.name === '' || db.name === ':memory:') return null;
  try {
    const st = statSync(db.name, { bigint: true });
    return `${st.dev}:${st.ino}`;
  } catch {
    return `path:${resolve(db.name)}`;
  }
}

interface Prepared {
  readonly stmt: BetterSqlite3Statement;
  readonly reader: boolean;
  /** DML with `RETURNING`: its row count is its affected-row count. */
  readonly returning: boolean;
}

/**
 * A {@link SqlDriver} over one better-sqlite3 connection. Statements are prepared once and
 * cached by text; integers are read exactly (beyond 2^53 − 1 as `bigint`); a transaction is
 * `BEGIN IMMEDIATE` … `COMMIT` run as plain statements (better-sqlite3's `transaction()` helper
 * would roll back the writes a refusal must keep), and nothing but the kernel's own synchronous
 * work happens inside one. One connection: the kernel queues calls (`concurrentConnections:
 * false`).
 */
export class BetterSqlite3Driver implements SqlDriver {
  readonly name: string = 'better-sqlite3';
  readonly dialect = 'sqlite' as const;
  readonly capabilities = Object.freeze({ concurrentConnections: false, groupCommit: 'savepoints' });
  /** The connection (for tools and tests that need raw SQL; the store never shares it). */
  readonly db: BetterSqlite3Database;
  readonly #cache = new Map<string, Prepared>();
  readonly #begin: BetterSqlite3Statement;
  readonly #commit: BetterSqlite3Statement;
  readonly #rollback: BetterSqlite3Statement;
  /** The open transaction's number, or 0; a stale handle is refused. */
  #tx = 0;
  /** A transaction is open or waiting for its turn: a second one at once is refused. */
  #busy = false;
  #txCount = 0;
  #closed = false;
  /** This thread's turns at the file's write lock (none for a database without a file). */
  readonly #turns: { key: string; turns: FileTurns } | null;

  constructor(db: BetterSqlite3Database) {
    installNodeSha256();
    this.db = db;
    this.#begin = db.prepare('BEGIN IMMEDIATE');
    this.#commit = db.prepare('COMMIT');
    this.#rollback = db.prepare('ROLLBACK');
    const key = fileIdentity(db);
    if (key === null) this.#turns = null;
    else {
      let turns = TURNS.get(key);
      if (!turns) TURNS.set(key, (turns = new FileTurns()));
      turns.handles++;
      this.#turns = { key, turns };
    }
  }

  #check(): void {
    if (this.#closed || !this.db.open) throw new StoreError('[better-sqlite3] the database is closed');
  }

  #prepared(sql: string): Prepared {
    let p = this.#cache.get(sql);
    if (!p) {
      const stmt = this.db.prepare(sql);
      if (stmt.reader) stmt.safeIntegers(true);
      p = { stmt, reader: stmt.reader, returning: stmt.reader && DML.test(sql) };
      this.#cache.set(sql, p);
    }
    return p;
  }

  #run<Row>(sql: string, params: readonly SqlValue[]): QueryResult<Row> {
    const p = this.#prepared(sql);
    // Handed over as one array (better-sqlite3 binds an array's items as the anonymous
    // parameters), not spread into arguments.
    const bound = new Array<SqlValue>(params.length);
    for (let i = 0; i < params.length; i++) bound[i] = bindable(params[i]!);
    if (p.reader) {
      const rows = p.stmt.all(bound);
      for (const row of rows) exactRow(row);
      return { rows: rows as Row[], rowsAffected: p.returning ? rows.length : 0 };
    }
    return { rows: [], rowsAffected: p.stmt.run(bound).changes };
  }

  async query<Row = Record<string, unknown>>(sql: string, params: readonly SqlValue[] = []): Promise<QueryResult<Row>> {
    this.#check();
    return this.#run<Row>(sql, params);
  }

  async exec(sql: string): Promise<void> {
    this.#check();
    this.db.exec(sql);
  }

  #executor(id: number): SqlExecutor {
    return transactionExecutor('better-sqlite3', () => this.#tx === id, {
      query: <Row>(sql: string, params: readonly SqlValue[]) => this.#run<Row>(sql, params),
      exec: (sql: string) => void this.db.exec(sql),
    });
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.#check();
    if (this.#busy || this.db.inTransaction) {
      throw new StoreError('[better-sqlite3] a transaction is already open on this connection: calls must be queued (the kernel store does this)');
    }
    this.#busy = true;
    try {
      return await this.#inTurn(fn);
    } finally {
      this.#busy = false;
    }
  }

  /** `fn` in a transaction, once any other handle of this thread on the file is done with its write lock. */
  async #inTurn<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const turns = this.#turns?.turns;
    const wait = turns?.take(BUSY_TIMEOUT_MS);
    if (wait) await wait;
    try {
      this.#check();
      // Waits up to busy_timeout for another process's write lock, then holds it until COMMIT.
      this.#begin.run();
      const id = ++this.#txCount;
      this.#tx = id;
      try {
        const result = await fn(this.#executor(id));
        this.#commit.run();
        return result;
      } catch (err) {
        if (this.db.inTransaction) {
          try {
            this.#rollback.run();
          } catch {
            // SQLite already rolled back; the original error is what matters.
          }
        }
        throw err;
      } finally {
        this.#tx = 0;
      }
    } finally {
      turns?.give();
      // The last handle may have closed while this one waited.
      this.#dropTurnsIfUnused();
    }
  }

  /** Forgets the file's turns once no handle is open on it and none holds or waits for a turn. */
  #dropTurnsIfUnused(): void {
    if (this.#turns !== null && this.#turns.turns.handles === 0 && this.#turns.turns.idle) TURNS.delete(this.#turns.key);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#turns !== null) {
      this.#turns.turns.handles--;
      this.#dropTurnsIfUnused();
    }
    this.#cache.clear();
    if (this.db.open) this.db.close();
  }
}

/** A state store on a SQLite file through better-sqlite3: the kernel's {@link SqlStateStore}. */
export class BetterSqlite3Store extends SqlStateStore {
  /** The driver underneath (raw SQL for tools and tests). */
  readonly driver: BetterSqlite3Driver;
  /** The database file, as an absolute path. */
  readonly path: string;

  constructor(driver: BetterSqlite3Driver, path: string, options: { clock?: Clock; readOnly?: boolean; groupCommit?: boolean } = {}) {
    super(driver, options);
    this.driver = driver;
    this.path = path;
  }

  /** An address another process can open with `openStore` (`sqlite:` + the absolute path). */
  get url(): string {
    return `sqlite:${this.path}`;
  }
}

function checkOptions(options: BetterSqlite3StoreOptions): 'NORMAL' | 'FULL' {
  if (typeof options !== 'object' || options === null) throw new InvalidArgument('createBetterSqlite3Store options must be an object');
  if (options.clock !== undefined && typeof options.clock !== 'function') throw new InvalidArgument('options.clock must be a function returning a Date');
  if (options.readOnly !== undefined && typeof options.readOnly !== 'boolean') throw new InvalidArgument('options.readOnly must be a boolean');
  const sync = options.synchronous ?? 'NORMAL';
  if (sync !== 'NORMAL' && sync !== 'FULL') throw new InvalidArgument(`options.synchronous must be 'NORMAL' or 'FULL', not ${JSON.stringify(sync)}`);
  return sync;
}

function isDatabase(v: unknown): v is BetterSqlite3Database {
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof (v as BetterSqlite3Database).prepare === 'function' &&
    typeof (v as BetterSqlite3Database).pragma === 'function'
  );
}

/** Switches the file to WAL, retrying a bounded number of times while another process holds it. */
async function enableWal(db: BetterSqlite3Database, path: string): Promise<void> {
  let last: unknown = null;
  for (let attempt = 1; attempt <= WAL_ATTEMPTS; attempt++) {
    try {
      const mode = String(db.pragma('journal_mode = WAL', { simple: true })).toLowerCase();
      if (mode === 'wal') return;
      last = new Error(`journal_mode is ${mode}`);
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 20 * attempt));
  }
  throw new StoreError(
    `[better-sqlite3] ${path} could not be switched to WAL mode after ${WAL_ATTEMPTS} attempts: ${(last as Error)?.message ?? String(last)}`,
    { cause: last },
  );
}

/**
 * Opens a ctrlrun state store on a SQLite file through better-sqlite3, migrated and ready.
 *
 * `pathOrDb` is a file path (created if missing, unless `readOnly`) or an open better-sqlite3
 * `Database` on a file, which the store then owns and closes. In-memory databases are refused
 * (`InvalidArgument`): reservations must survive the process and be visible to other processes.
 * The engine must be SQLite 3.35 or newer. An existing file is put in WAL mode only after it is
 * recognised as a ctrlrun store, so a refused file (not a database, someone else's schema, a
 * newer ctrlrun schema, read-only for this process) is left untouched; a file this call created
 * is removed again if the open fails before anything is migrated into it. Failures are typed:
 * `InvalidArgument` (the path), `SchemaMismatch` (the schema), `MissingDependency` (no
 * better-sqlite3), `StoreError` (the engine).
 *
 * @example
 * const store = await createBetterSqlite3Store('./ctrlrun.db');
 */
export async function createBetterSqlite3Store(pathOrDb: string | BetterSqlite3Database, options: BetterSqlite3StoreOptions = {}): Promise<BetterSqlite3Store> {
  const synchronous = checkOptions(options);
  let readOnly = options.readOnly === true;
  let db: BetterSqlite3Database;
  let path: string;
  let created = false;
  if (isDatabase(pathOrDb)) {
    db = pathOrDb;
    if (!db.open) throw new InvalidArgument('the better-sqlite3 database is closed');
    if (db.memory || db.name === '' || db.name === ':memory:') throw new InvalidArgument('an in-memory better-sqlite3 database is refused: open one on a file');
    if (db.readonly && options.readOnly === false) throw new InvalidArgument('the better-sqlite3 database was opened readonly, but options.readOnly is false');
    if (db.readonly) readOnly = true;
    path = resolve(db.name);
  } else {
    if (typeof pathOrDb !== 'string') throw new InvalidArgument('createBetterSqlite3Store needs a file path or a better-sqlite3 Database');
    const checked = checkPath(pathOrDb, readOnly);
    path = checked.absolute;
    const Database = await loadBetterSqlite3();
    try {
      db = new Database(path, { readonly: readOnly, fileMustExist: readOnly || checked.exists, timeout: BUSY_TIMEOUT_MS });
    } catch (err) {
      throw new StoreError(`[better-sqlite3] could not open ${path}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
    }
    created = !checked.exists;
  }
  try {
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    if (!readOnly) db.pragma(`synchronous = ${synchronous}`);
    // The first read opens the file for real (and, for WAL, its -shm index).
    db.prepare('SELECT 1 FROM sqlite_master LIMIT 1').all();
  } catch (err) {
    db.close();
    const code = String((err as { code?: unknown })?.code ?? '');
    if (readOnly && /^SQLITE_(READONLY|CANTOPEN)/.test(code)) {
      throw new StoreError(
        `[better-sqlite3] ${path} cannot be read read-only here (${code}): a WAL database needs its -wal and -shm files beside it, or a directory this process may create them in`,
        { cause: err },
      );
    }
    throw new StoreError(`[better-sqlite3] could not open ${path}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }
  const driver = new BetterSqlite3Driver(db);
  const store = new BetterSqlite3Store(driver, path, { clock: options.clock, readOnly, groupCommit: options.groupCommit });
  try {
    // A file this call created holds nobody's data: WAL first, so the migrations commit cheaply.
    // Any other file is switched only once it is known to be a ctrlrun store.
    if (created) await enableWal(db, path);
    await store.open();
    if (!readOnly && !created) await enableWal(db, path);
    return store;
  } catch (err) {
    // A file this call created and left without a table goes away again.
    const remove = created && !hasTables(db);
    await driver.close().catch(() => undefined);
    if (remove) for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
    throw err;
  }
}

function hasTables(db: BetterSqlite3Database): boolean {
  try {
    return db.prepare('SELECT 1 FROM sqlite_master LIMIT 1').all().length > 0;
  } catch {
    return true;
  }
}
