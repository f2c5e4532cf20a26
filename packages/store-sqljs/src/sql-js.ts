/**
 * The sql.js driver: SQLite in WebAssembly, one in-memory connection, optionally persisted
 * after every committed transaction. Imports nothing from sql.js at runtime (the caller hands in
 * an initialised module), so it runs unchanged in a browser tab, workerd, Deno and Node.
 *
 * @module
 */
import { InvalidArgument, StoreError, type Clock } from '@ctrlrun/kernel';
import { SqlStateStore, type QueryResult, type SqlDriver, type SqlExecutor, type SqlValue, transactionExecutor } from '@ctrlrun/kernel/store';

/** The part of a sql.js `Statement` the driver uses (sql.js ≥ 1.17). */
export interface SqlJsStatement {
  /** sql.js binds `bigint` too (1.8 and later), though its published types omit it. */
  bind(values?: (string | number | Uint8Array | null)[] | null): boolean;
  step(): boolean;
  get(params?: null, config?: { useBigInt?: boolean }): unknown[];
  getColumnNames(): string[];
  reset(): void;
  free(): boolean;
}

/** The part of a sql.js `Database` the driver uses. */
export interface SqlJsDatabase {
  prepare(sql: string): SqlJsStatement;
  exec(sql: string): unknown;
  getRowsModified(): number;
  export(): Uint8Array;
  close(): void;
}

/** An initialised sql.js module (what `initSqlJs()` resolves to), structurally. */
export interface SqlJsModule {
  Database: new (data?: ArrayLike<number> | null) => SqlJsDatabase;
}

/**
 * Where a persistent store keeps its bytes. `load` runs once at open (`null`: nothing saved
 * yet); `save` runs after every committed transaction that wrote (or, while saves are held, at
 * each checkpoint), with the whole database, and must resolve only once the bytes are durable.
 */
export interface SqlJsPersistence {
  load(): Promise<Uint8Array | null>;
  save(bytes: Uint8Array): Promise<void>;
}

interface Prepared {
  readonly stmt: SqlJsStatement;
  /** INSERT/UPDATE/DELETE: `getRowsModified()` is meaningful after it. */
  readonly dml: boolean;
  /** Anything that can change the database (DML or DDL). */
  readonly writes: boolean;
  names: string[] | null;
}

const DML = /^\s*(?:INSERT|UPDATE|DELETE|REPLACE)\b/i;
const DDL = /^\s*(?:CREATE|DROP|ALTER)\b/i;

/** What {@link connect} sets on every connection. */
const PRAGMAS: readonly string[] = Object.freeze(['PRAGMA journal_mode = MEMORY', 'PRAGMA locking_mode = EXCLUSIVE']);

/**
 * Opens the in-memory database, set up for being its file's only connection. The rollback
 * journal is kept in memory, not as a file in sql.js's in-memory file system (created, written
 * and deleted on every transaction): the database itself is memory, a crash loses it either way,
 * and what survives is only ever a committed state (persistence saves after COMMIT); ROLLBACK
 * works the same. The lock is held exclusively: nothing else can open the file, so each
 * transaction need not look for another's hot journal nor re-read the header to trust its cache.
 */
function connect(SQL: SqlJsModule, bytes: Uint8Array | null): SqlJsDatabase {
  const db = new SQL.Database(bytes);
  try {
    for (const pragma of PRAGMAS) db.exec(pragma);
  } catch {
    // Bytes that are not a database: the store's open reports that, by name, on first use.
  }
  return db;
}

function unsafeInteger(v: unknown): boolean {
  return typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v);
}

/**
 * A {@link SqlDriver} over one sql.js database. Prepared statements are cached by SQL text and
 * reused; integers beyond 2^53 − 1 are read as `bigint`; transactions are `BEGIN IMMEDIATE` …
 * `COMMIT`, followed (when persistence is set and the transaction wrote) by one save.
 */
export class SqlJsDriver implements SqlDriver {
  readonly name: string = 'sql.js';
  readonly dialect = 'sqlite' as const;
  readonly capabilities = Object.freeze({ concurrentConnections: false });
  readonly #SQL: SqlJsModule;
  readonly #persistence: SqlJsPersistence | null;
  #db: SqlJsDatabase;
  /** The bytes last known durable (loaded or saved), to fall back to when a save fails. */
  #durable: Uint8Array | null;
  #cache = new Map<string, Prepared>();
  /** The open transaction's number, or 0; a stale handle is refused. */
  #tx = 0;
  #txCount = 0;
  /** Committed changes not saved yet. */
  #dirty = false;
  /** Open {@link holdSaves} calls: while any is open, commits wait for a checkpoint. */
  #holds = 0;
  /** From BEGIN until the commit is durable (or rolled back). */
  #busy = false;
  #idle: Promise<void> = Promise.resolve();
  #closed = false;

  private constructor(SQL: SqlJsModule, persistence: SqlJsPersistence | null, bytes: Uint8Array | null) {
    this.#SQL = SQL;
    this.#persistence = persistence;
    this.#durable = bytes;
    this.#db = connect(SQL, bytes);
  }

  /** Opens a database: the persisted bytes if `persistence` has some, else an empty one in memory. */
  static async open(SQL: SqlJsModule, persistence?: SqlJsPersistence | null): Promise<SqlJsDriver> {
    if (typeof SQL !== 'object' || SQL === null || typeof SQL.Database !== 'function') {
      throw new InvalidArgument('SQL must be an initialised sql.js module (what initSqlJs() resolves to)');
    }
    if (persistence != null && (typeof persistence.load !== 'function' || typeof persistence.save !== 'function')) {
      throw new InvalidArgument('persistence must have load() and save(bytes)');
    }
    let bytes: Uint8Array | null = null;
    if (persistence) {
      try {
        bytes = await persistence.load();
      } catch (err) {
        throw new StoreError(`[sql.js] loading the persisted database failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
      }
      if (bytes !== null && !(bytes instanceof Uint8Array)) throw new InvalidArgument('persistence.load() must resolve to a Uint8Array or null');
    }
    return new SqlJsDriver(SQL, persistence ?? null, bytes);
  }

  #check(): void {
    if (this.#closed) throw new StoreError('[sql.js] the database is closed');
  }

  #prepared(sql: string): Prepared {
    let p = this.#cache.get(sql);
    if (!p) {
      p = { stmt: this.#db.prepare(sql), dml: DML.test(sql), writes: DML.test(sql) || DDL.test(sql), names: null };
      this.#cache.set(sql, p);
    }
    return p;
  }

  #run<Row>(sql: string, params: readonly SqlValue[]): QueryResult<Row> {
    const p = this.#prepared(sql);
    const { stmt } = p;
    try {
      stmt.bind(params as (string | number | null)[]);
      const rows: Row[] = [];
      while (stmt.step()) {
        const names = (p.names ??= stmt.getColumnNames());
        let values = stmt.get();
        if (values.some(unsafeInteger)) {
          // Re-read this row exactly rather than keep a rounded integer.
          const exact = stmt.get(null, { useBigInt: true });
          values = values.map((v, i) => (unsafeInteger(v) && typeof exact[i] === 'bigint' ? exact[i] : v));
        }
        const row: Record<string, unknown> = {};
        for (let i = 0; i < names.length; i++) row[names[i]!] = values[i];
        rows.push(row as Row);
      }
      const rowsAffected = p.dml ? this.#db.getRowsModified() : 0;
      if (p.writes && (rowsAffected > 0 || !p.dml)) this.#dirty = true;
      return { rows, rowsAffected };
    } finally {
      stmt.reset();
    }
  }

  async query<Row = Record<string, unknown>>(sql: string, params: readonly SqlValue[] = []): Promise<QueryResult<Row>> {
    this.#check();
    const result = this.#run<Row>(sql, params);
    if (!this.#busy && this.#holds === 0) await this.#persistIfDirty();
    return result;
  }

  async exec(sql: string): Promise<void> {
    this.#check();
    this.#db.exec(sql);
    this.#dirty = true;
    if (!this.#busy && this.#holds === 0) await this.#persistIfDirty();
  }

  #executor(id: number): SqlExecutor {
    return transactionExecutor('sql.js', () => this.#tx === id, {
      query: <Row>(sql: string, params: readonly SqlValue[]) => this.#run<Row>(sql, params),
      exec: (sql: string) => {
        this.#db.exec(sql);
        this.#dirty = true;
      },
    });
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.#check();
    if (this.#busy) throw new StoreError('[sql.js] a transaction is already open on this connection: calls must be queued (the kernel store does this)');
    this.#run('BEGIN IMMEDIATE', []);
    const id = ++this.#txCount;
    this.#tx = id;
    this.#busy = true;
    // What a rollback leaves: the changes committed before this transaction, saved or not.
    const dirtyBefore = this.#dirty;
    let release!: () => void;
    this.#idle = new Promise((r) => (release = r));
    try {
      let result: T;
      try {
        result = await fn(this.#executor(id));
        this.#run('COMMIT', []);
      } catch (err) {
        try {
          this.#run('ROLLBACK', []);
        } catch {
          // Already rolled back by SQLite; the original error is what matters.
        }
        this.#dirty = dirtyBefore;
        throw err;
      } finally {
        this.#tx = 0;
      }
      if (this.#holds === 0) await this.#persistIfDirty();
      return result;
    } finally {
      this.#busy = false;
      release();
    }
  }

  async #persistIfDirty(): Promise<void> {
    if (!this.#dirty) return;
    this.#dirty = false;
    if (!this.#persistence) return;
    const bytes = this.#db.export();
    try {
      await this.#persistence.save(bytes);
    } catch (err) {
      this.#reload();
      throw new StoreError(
        `[sql.js] a committed transaction could not be saved (${(err as Error)?.message ?? String(err)}); the store went back to the last saved state`,
        { cause: err },
      );
    }
    this.#durable = bytes;
  }

  /** Replaces the connection with the last durable bytes (statements are per connection). */
  #reload(): void {
    this.#freeStatements();
    this.#db.close();
    this.#db = connect(this.#SQL, this.#durable);
  }

  #freeStatements(): void {
    for (const p of this.#cache.values()) p.stmt.free();
    this.#cache.clear();
  }

  /**
   * Runs `fn` with saves held: the transactions it (or anyone else on this connection) commits
   * meanwhile are kept in memory, and saved together at the next {@link checkpoint} or when the
   * outermost hold ends — whether `fn` resolves or throws. The caller picks the points that must
   * be durable (before an effect leaves the process, before an answer is shown) and calls
   * {@link checkpoint} there. A failed save raises a `StoreError` from that point and takes the
   * connection back to the last saved state, undoing every commit since. Without persistence,
   * this only runs `fn`.
   */
  async holdSaves<T>(fn: () => Promise<T>): Promise<T> {
    this.#check();
    if (typeof fn !== 'function') throw new InvalidArgument('holdSaves needs a function');
    this.#holds++;
    let result: T;
    try {
      result = await fn();
    } finally {
      this.#holds--;
      if (this.#holds === 0 && !this.#closed) await this.checkpoint();
    }
    return result;
  }

  /**
   * Saves now whatever has been committed and not saved yet (nothing to do outside a hold: every
   * commit is saved before it returns). Resolves once the bytes are durable.
   */
  async checkpoint(): Promise<void> {
    while (this.#busy) await this.#idle;
    this.#check();
    await this.#persistIfDirty();
  }

  /** The whole database as SQLite file bytes, taken between transactions. */
  async export(): Promise<Uint8Array> {
    while (this.#busy) await this.#idle;
    this.#check();
    return this.#db.export();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    while (this.#busy) await this.#idle;
    try {
      // Commits held by an open hold are saved, not dropped.
      await this.#persistIfDirty();
    } finally {
      this.#closed = true;
      this.#freeStatements();
      this.#db.close();
    }
  }
}

/** Options of {@link openSqlJsStore}. */
export interface SqlJsStoreOptions {
  /** The clock decisions and stored timestamps use. */
  clock?: Clock;
  /** Open an up-to-date database only and refuse every write. */
  readOnly?: boolean;
  /** Keep the database across restarts (load at open, save after each committed write). */
  persistence?: SqlJsPersistence;
}

/** A state store on sql.js: the kernel's {@link SqlStateStore} plus the database bytes. */
export class SqlJsStore extends SqlStateStore {
  /** The driver underneath (for tests and tools that need raw SQL). */
  readonly driver: SqlJsDriver;

  constructor(driver: SqlJsDriver, options: Omit<SqlJsStoreOptions, 'persistence'> = {}) {
    super(driver, options);
    this.driver = driver;
  }

  /** The whole database as SQLite file bytes (readable by the sqlite3 CLI and the Python original). */
  export(): Promise<Uint8Array> {
    return this.driver.export();
  }

  /** {@link SqlJsDriver.holdSaves}: commits inside `fn` are saved together at checkpoints and at its end. */
  holdSaves<T>(fn: () => Promise<T>): Promise<T> {
    return this.driver.holdSaves(fn);
  }

  /** {@link SqlJsDriver.checkpoint}: saves what is committed and not saved yet. */
  checkpoint(): Promise<void> {
    return this.driver.checkpoint();
  }
}

/**
 * Opens a store on an already-initialised sql.js module (no runtime import of sql.js, no Node
 * APIs): migrates at open, in memory unless `persistence` is given.
 */
export async function openSqlJsStore(SQL: SqlJsModule, options: SqlJsStoreOptions = {}): Promise<SqlJsStore> {
  const driver = await SqlJsDriver.open(SQL, options.persistence);
  const store = new SqlJsStore(driver, { clock: options.clock, readOnly: options.readOnly });
  try {
    return await store.open();
  } catch (err) {
    await driver.close().catch(() => undefined);
    throw err;
  }
}
