/**
 * The Durable Object driver: the kernel's SQL store on a SQLite-backed Durable Object's own
 * storage (`ctx.storage.sql`). One Durable Object is one store: every request that reaches it is
 * served by its single instance, so every isolate of a deployment that routes to the same object
 * shares one reservation table, and one effect runs at most once.
 *
 * Durable Object SQL refuses `BEGIN`/`COMMIT`/`SAVEPOINT`; a transaction is
 * `ctx.storage.transaction(async fn)`, which commits when `fn` resolves and rolls back every
 * statement `fn` ran when it rejects, across awaits (checked with workerd 1.20260426 under
 * miniflare 4.20260426.0). Web-standard globals only; the storage API is typed structurally, so
 * no Cloudflare types are needed.
 *
 * @module
 */
import { InvalidArgument, StoreError, type Clock } from '@ctrlrun/kernel';
import {
  SqlStateStore,
  sqliteDialect,
  type SqlDialect,
  type QueryResult,
  type SqlDriver,
  type SqlExecutor,
  type SqlValue,
  transactionExecutor,
} from '@ctrlrun/kernel/store';

/** What `ctx.storage.sql.exec` returns, as far as the driver uses it. */
export interface DurableObjectSqlCursor {
  toArray(): Record<string, unknown>[];
}

/** The part of a SQLite-backed Durable Object's `ctx.storage` the driver uses. */
export interface DurableObjectSqlStorage {
  readonly sql: { exec(query: string, ...bindings: unknown[]): DurableObjectSqlCursor };
  /** Runs `fn` in one transaction: rolled back entirely if it rejects. */
  transaction<T>(fn: () => Promise<T>): Promise<T>;
}

const DML = /^\s*(?:INSERT|UPDATE|DELETE|REPLACE)\b/i;

/** Durable Object SQL binds numbers, strings, `ArrayBuffer`s and null; never a `bigint`. */
function binding(v: SqlValue): unknown {
  if (typeof v !== 'bigint') return v;
  // In the safe range a number is exact; beyond it, decimal text: INTEGER affinity stores it as
  // the same 64-bit integer, and a TEXT column keeps the digits.
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
}

/**
 * A {@link SqlDriver} over a Durable Object's SQL storage. Statements are synchronous there; the
 * driver still answers with promises, as the kernel expects. `rowsAffected` is SQLite's
 * `changes()` after an INSERT/UPDATE/DELETE.
 */
export class DurableObjectSqlDriver implements SqlDriver {
  readonly name: string = 'durable-object';
  readonly dialect = 'sqlite' as const;
  /** One connection: the kernel queues transactions so two awaits never interleave inside one. */
  readonly capabilities = Object.freeze({ concurrentConnections: false });
  readonly #storage: DurableObjectSqlStorage;
  /** The open transaction's number, or 0; a stale handle is refused. */
  #tx = 0;
  #txCount = 0;
  #closed = false;

  constructor(storage: DurableObjectSqlStorage) {
    if (typeof storage !== 'object' || storage === null || typeof storage.sql?.exec !== 'function' || typeof storage.transaction !== 'function') {
      throw new InvalidArgument(
        'storage must be a SQLite-backed Durable Object storage (ctx.storage, with sql.exec and transaction): declare the class under new_sqlite_classes',
      );
    }
    this.#storage = storage;
  }

  #check(): void {
    if (this.#closed) throw new StoreError('[durable-object] the store is closed');
  }

  #run<Row>(sql: string, params: readonly SqlValue[]): QueryResult<Row> {
    // SQLite's own errors pass through as they are (the kernel reads "UNIQUE constraint failed").
    const rows = this.#storage.sql.exec(sql, ...params.map(binding)).toArray();
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) {
        // Durable Object SQL reads every INTEGER as a JS number: beyond 2^53 it would be rounded.
        if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) {
          throw new StoreError(`[durable-object] column ${column} holds an integer beyond 2^53 − 1, which Durable Object SQL cannot read exactly`, { sql });
        }
      }
    }
    const rowsAffected = DML.test(sql) ? Number(this.#storage.sql.exec('SELECT changes() AS n').toArray()[0]?.['n'] ?? 0) : 0;
    return { rows: rows as Row[], rowsAffected };
  }

  async query<Row = Record<string, unknown>>(sql: string, params: readonly SqlValue[] = []): Promise<QueryResult<Row>> {
    this.#check();
    return this.#run<Row>(sql, params);
  }

  async exec(sql: string): Promise<void> {
    this.#check();
    this.#run(sql, []);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.#check();
    if (this.#tx !== 0) throw new StoreError('[durable-object] a transaction is already open: calls must be queued (the kernel store does this)');
    const id = ++this.#txCount;
    const tx = transactionExecutor('durable-object', () => this.#tx === id, {
      query: <Row>(sql: string, params: readonly SqlValue[]) => this.#run<Row>(sql, params),
      exec: (sql: string) => void this.#run(sql, []),
    });
    this.#tx = id;
    try {
      return await this.#storage.transaction(() => fn(tx));
    } finally {
      this.#tx = 0;
    }
  }

  /** Nothing to release: the storage belongs to the Durable Object. Later calls are refused. */
  async close(): Promise<void> {
    this.#closed = true;
  }
}

/**
 * The kernel's SQLite dialect with one change: no engine version query. Durable Object SQL
 * refuses `sqlite_version()` ("not authorized to use function"); the platform's SQLite is a
 * current one with `RETURNING`, which every write of the store uses (the conformance suite runs
 * them all inside workerd).
 */
export const durableObjectDialect: SqlDialect = Object.freeze({ ...sqliteDialect, sql: Object.freeze({ ...sqliteDialect.sql, serverVersion: null }) });

/** Options of {@link openDurableObjectStore}. */
export interface DurableObjectStoreOptions {
  /** The clock decisions and stored timestamps use. */
  clock?: Clock;
  /** Open an up-to-date database only and refuse every write. */
  readOnly?: boolean;
}

/**
 * Opens the store on a Durable Object's storage (`ctx.storage`): migrates at open (the schema
 * lives in the object's own SQLite database), then serves the kernel's {@link SqlStateStore}.
 */
export async function openDurableObjectStore(storage: DurableObjectSqlStorage, options: DurableObjectStoreOptions = {}): Promise<SqlStateStore> {
  const driver = new DurableObjectSqlDriver(storage);
  return new SqlStateStore(driver, {
    dialect: durableObjectDialect,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.readOnly ? { readOnly: true } : {}),
  }).open();
}
export { AnchorLedger } from './anchors.js';
