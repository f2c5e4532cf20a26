/**
 * What the two Postgres-dialect drivers (`pg`, PGlite) share above the connection: the schema-name
 * check, the store options check, the store class over a schema, and opening with cleanup.
 * Internal to `@ctrlrun/store-node`; each driver keeps its own connection handling.
 *
 * @module
 */
import { CTRLRunError, InvalidArgument, StoreError, type Clock, type Logger } from '@ctrlrun/kernel';
import { SqlStateStore, postgresDialect, quoteIdentifier, type SqlDriver } from '@ctrlrun/kernel/store';

/** An error's message, or the thrown value as text. */
export function message(err: unknown): string {
  return (err as Error)?.message ?? String(err);
}

/** Returns `schema` when it is a string the dialect can quote; else an {@link InvalidArgument}. */
export function checkSchema(schema: unknown): string {
  if (typeof schema !== 'string') throw new InvalidArgument('schema must be a string');
  try {
    quoteIdentifier(schema);
  } catch (err) {
    throw new InvalidArgument(`schema ${JSON.stringify(schema)} is not a usable name: ${message(err)}`);
  }
  return schema;
}

/** The options every Postgres-dialect store takes. */
export interface PostgresStoreOptions {
  /** The clock every decision and stored timestamp uses (the only test seam). */
  clock?: Clock;
  /** Open an up-to-date store for reading only: nothing migrated, every write refused. */
  readOnly?: boolean;
  /** The schema holding the tables; it must exist (never created). */
  schema?: string;
  /** Where the store's warnings go; default `console`. */
  logger?: Logger;
  /**
   * Group commit: the outcomes (effect row, event, chained receipt) of callers of this store that
   * arrive while another outcome is being written are written together in one transaction, in
   * arrival order, every caller answered after the shared COMMIT. PGlite (default `true`) writes
   * each under its own savepoint. pg (default `true`) with `prepare` (its default) sends them back
   * to back on its own connection between one `BEGIN` and `COMMIT`; with `prepare: false` only
   * when asked (`true`), back to back in a transaction of the pool. A failure there writes every
   * caller of the group again on its own. `false`: one commit per outcome.
   */
  groupCommit?: boolean;
}

/** Refuses options that are not an object, or a `clock`, `readOnly` or `schema` of the wrong kind; `what` names the caller. */
export function checkStoreOptions(options: unknown, what: string): asserts options is PostgresStoreOptions {
  if (typeof options !== 'object' || options === null) throw new InvalidArgument(`${what} options must be an object`);
  const o = options as PostgresStoreOptions;
  if (o.clock !== undefined && typeof o.clock !== 'function') throw new InvalidArgument(`${what}: clock must be a function returning a Date`);
  if (o.readOnly !== undefined && typeof o.readOnly !== 'boolean') throw new InvalidArgument(`${what}: readOnly must be a boolean`);
  if (o.schema !== undefined) checkSchema(o.schema);
}

/** A Postgres-dialect driver whose schema is settled before the store is built. */
export interface SchemaDriver extends SqlDriver {
  readonly schema: string;
  resolveSchema(): Promise<string>;
  close(): Promise<void>;
}

/** A state store on a Postgres-dialect driver, its SQL qualified by the driver's schema. */
export class SchemaStore<D extends SchemaDriver> extends SqlStateStore {
  /** The driver underneath. */
  readonly driver: D;

  constructor(driver: D, options: Omit<PostgresStoreOptions, 'schema'> = {}) {
    super(driver, {
      clock: options.clock,
      readOnly: options.readOnly,
      logger: options.logger,
      groupCommit: options.groupCommit,
      dialect: postgresDialect(driver.schema),
    });
    this.driver = driver;
  }

  /** The schema holding the tables. */
  get schema(): string {
    return this.driver.schema;
  }
}

/**
 * Settles the driver's schema, builds the store and opens it; on any failure closes the driver
 * and rethrows (a non-ctrlrun error as a {@link StoreError} prefixed with `label`).
 */
export async function openSchemaStore<S extends SqlStateStore>(driver: SchemaDriver, build: () => S, label: string): Promise<S> {
  try {
    await driver.resolveSchema();
    return await build().open();
  } catch (err) {
    await driver.close().catch(() => undefined);
    if (err instanceof CTRLRunError) throw err;
    throw new StoreError(`${label} opening the store failed: ${message(err)}`, { cause: err });
  }
}
