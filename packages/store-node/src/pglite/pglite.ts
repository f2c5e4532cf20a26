/**
 * The PGlite driver: the Postgres dialect over `@electric-sql/pglite` (PostgreSQL compiled to
 * WebAssembly), in memory or in a directory. One session, so `concurrentConnections: false` and
 * every transaction goes through PGlite's own `transaction()`, which excludes every other query
 * on the instance (two stores sharing one instance still never interleave). A COMMIT runs
 * in-process, so its outcome is known in the call: this driver never raises `AmbiguousWrite`.
 *
 * `@electric-sql/pglite` is an optional peer dependency: {@link createPgliteStore} takes an
 * instance you built (or a lazy function returning one); {@link openPgliteStore} imports it.
 *
 * @module
 */
import { InvalidArgument, StoreError } from '@ctrlrun/kernel';
import { quoteIdentifier, type QueryResult, type SqlDriver, type SqlExecutor, type SqlValue, transactionExecutor } from '@ctrlrun/kernel/store';
import { importOnce } from '../optional-import.js';
import { SchemaStore, checkSchema, checkStoreOptions, message, openSchemaStore, type PostgresStoreOptions } from '../postgres/postgres-common.js';
import { installNodeSha256 } from '../node-digest.js';

/** What PGlite returns for one statement, as far as the driver reads it. */
export interface PgliteResultLike {
  rows: unknown[];
  affectedRows?: number;
  rowCount?: number;
}

/** A PGlite transaction handle, structurally. */
export interface PgliteTransactionLike {
  query(sql: string, params?: unknown[]): Promise<PgliteResultLike>;
  exec(sql: string): Promise<unknown>;
}

/** A PGlite instance, structurally (`new PGlite()` from `@electric-sql/pglite`). */
export interface PgliteLike extends PgliteTransactionLike {
  transaction<T>(fn: (tx: PgliteTransactionLike) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  readonly waitReady?: Promise<void>;
}

const INSTALL = '@electric-sql/pglite';

function isPglite(v: unknown): v is PgliteLike {
  const p = v as PgliteLike;
  return typeof v === 'object' && v !== null && typeof p.query === 'function' && typeof p.exec === 'function' && typeof p.transaction === 'function';
}

/** Options of {@link PgliteDriver}. */
export interface PgliteDriverOptions {
  /** The schema holding the tables; it must exist. Default: `current_schema()` (normally `public`). */
  schema?: string;
  /** Close the instance on `close()` (only for one the store built itself). */
  ownsInstance?: boolean;
}

/** A {@link SqlDriver} over one PGlite instance. */
export class PgliteDriver implements SqlDriver {
  readonly name: string = 'pglite';
  readonly dialect = 'postgres' as const;
  // In-process: no round trips to save, but one statement per step keeps the WebAssembly crossings few.
  readonly capabilities = Object.freeze({ concurrentConnections: false, oneStatementSteps: true, groupCommit: 'savepoints' });
  readonly #source: PgliteLike | (() => PgliteLike | Promise<PgliteLike>);
  readonly #owns: boolean;
  #db: Promise<PgliteLike> | null = null;
  #schema: string | null;
  #setPath: string | null = null;
  #closed = false;

  constructor(pglite: PgliteLike | (() => PgliteLike | Promise<PgliteLike>), options: PgliteDriverOptions = {}) {
    installNodeSha256();
    if (typeof pglite !== 'function' && !isPglite(pglite))
      throw new InvalidArgument('pglite must be a PGlite instance (query, exec, transaction) or a function returning one');
    this.#source = pglite;
    this.#owns = options.ownsInstance === true;
    this.#schema = options.schema === undefined ? null : checkSchema(options.schema);
  }

  /** The schema holding the tables (resolved by {@link resolveSchema}). */
  get schema(): string {
    if (this.#schema === null) throw new StoreError('[pglite] the schema is not resolved yet: call resolveSchema() first');
    return this.#schema;
  }

  #instance(): Promise<PgliteLike> {
    if (this.#closed) return Promise.reject(new StoreError('[pglite] the driver is closed'));
    return (this.#db ??= (async () => {
      const db = typeof this.#source === 'function' ? await this.#source() : this.#source;
      if (!isPglite(db)) throw new InvalidArgument('the pglite function must return a PGlite instance (query, exec, transaction)');
      await db.waitReady;
      return db;
    })().catch((err: unknown) => {
      this.#db = null;
      throw err;
    }));
  }

  /** Settles the schema: the one given, else `current_schema()` (refused when there is none). */
  async resolveSchema(): Promise<string> {
    if (this.#schema === null) {
      const row = (await this.query<{ schema: string | null }>('SELECT current_schema() AS schema')).rows[0];
      if (typeof row?.schema !== 'string')
        throw new StoreError('[pglite] the search_path names no existing schema: pass { schema } (the store never creates one)');
      this.#schema = row.schema;
    }
    this.#setPath = `SET LOCAL search_path TO ${quoteIdentifier(this.#schema)}`;
    return this.#schema;
  }

  static async #run<Row>(ex: PgliteTransactionLike, sql: string, params: readonly SqlValue[]): Promise<QueryResult<Row>> {
    const values = params.map((p) => (typeof p === 'bigint' ? p.toString() : p));
    const r = await ex.query(sql, values);
    return { rows: r.rows as Row[], rowsAffected: r.affectedRows ?? r.rowCount ?? 0 };
  }

  async query<Row = Record<string, unknown>>(sql: string, params: readonly SqlValue[] = []): Promise<QueryResult<Row>> {
    return PgliteDriver.#run<Row>(await this.#instance(), sql, params);
  }

  async exec(sql: string): Promise<void> {
    await (await this.#instance()).exec(sql);
  }

  /** `fn` inside PGlite's `transaction()` (BEGIN … COMMIT, ROLLBACK on throw), with `SET LOCAL search_path`. */
  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const db = await this.#instance();
    const setPath = this.#setPath ?? (await this.resolveSchema(), this.#setPath!);
    let live = true;
    return db.transaction(async (t) => {
      await t.exec(setPath);
      try {
        return await fn(
          transactionExecutor('pglite', () => live, {
            query: <Row>(sql: string, params: readonly SqlValue[]) => PgliteDriver.#run<Row>(t, sql, params),
            exec: async (sql: string) => void (await t.exec(sql)),
          }),
        );
      } finally {
        live = false;
      }
    });
  }

  /** Closes the instance only if the store built it; an instance you passed in stays yours. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const db = this.#db;
    this.#db = null;
    if (this.#owns && db) await (await db).close();
  }
}

/** Options of {@link createPgliteStore}. */
export interface PgliteStoreOptions extends PostgresStoreOptions {
  /** The schema holding the tables; it must exist (never created). Default: `current_schema()`. */
  schema?: string;
}

/** A state store on PGlite. */
export class PgliteStore extends SchemaStore<PgliteDriver> {
  constructor(driver: PgliteDriver, options: Omit<PgliteStoreOptions, 'schema'> = {}) {
    super(driver, options);
  }
}

function openOn(driver: PgliteDriver, options: PgliteStoreOptions): Promise<PgliteStore> {
  return openSchemaStore(driver, () => new PgliteStore(driver, options), '[pglite]');
}

/**
 * Creates a ctrlrun state store on a PGlite instance (or a function returning one), migrated and
 * ready. The instance stays yours: `close()` does not close it.
 *
 * @example
 * import { PGlite } from '@electric-sql/pglite';
 * const store = await createPgliteStore(new PGlite());          // in memory
 */
export async function createPgliteStore(pglite: PgliteLike | (() => PgliteLike | Promise<PgliteLike>), options: PgliteStoreOptions = {}): Promise<PgliteStore> {
  checkStoreOptions(options, 'createPgliteStore');
  return openOn(new PgliteDriver(pglite, { schema: options.schema }), options);
}

type PgliteConstructor = new (dataDir?: string) => PgliteLike;

/** Imports PGlite once; a missing package is a {@link MissingDependency} naming the install. */
const loadPglite = importOnce(() => import('@electric-sql/pglite'), {
  name: '@electric-sql/pglite',
  install: INSTALL,
  label: '[pglite]',
  neededBy: 'the PGlite store',
  notFound: /['"]@electric-sql\/pglite['"]/,
  pick: (mod: unknown) => {
    const ctor = (mod as { PGlite?: unknown }).PGlite;
    if (typeof ctor !== 'function') throw new StoreError('[pglite] @electric-sql/pglite did not export PGlite');
    return ctor as PgliteConstructor;
  },
});

/**
 * Opens a PGlite store: in memory (`dir` null) or in the directory `dir` (created by PGlite if
 * missing, kept across runs). The store owns the instance and closes it on `close()`.
 */
export async function openPgliteStore(dir: string | null = null, options: PgliteStoreOptions = {}): Promise<PgliteStore> {
  if (dir !== null && (typeof dir !== 'string' || dir === '')) throw new InvalidArgument('dir must be a non-empty path, or null for memory');
  checkStoreOptions(options, 'openPgliteStore');
  const PGlite = await loadPglite();
  let db: PgliteLike;
  try {
    db = dir === null ? new PGlite() : new PGlite(dir);
    await db.waitReady;
  } catch (err) {
    throw new StoreError(`[pglite] cannot open ${dir === null ? 'an in-memory database' : `the directory ${dir}`}: ${message(err)}`, { cause: err });
  }
  return openOn(new PgliteDriver(db, { schema: options.schema, ownsInstance: true }), options);
}
