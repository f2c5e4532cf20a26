/**
 * Schema versions: which migrations a database has (recorded in `schema_version`, never
 * inferred from its columns), the classification at open (spec 03 §2.1), and applying the
 * missing ones forward-only, one transaction per migration (§2.2). Dialect-neutral: the SQL comes
 * from the {@link SqlDialect}.
 *
 * @module
 */
import { CTRLRunError, SchemaMismatch, StoreError } from '../errors.js';
import { storedTime, type Clock } from '../time.js';
import type { SqlExecutor, SqlDriver, SqlValue } from './driver.js';
import { MIGRATION_IDS, type MigrationId, type SqlDialect } from './dialect.js';
export { MIGRATION_IDS, type MigrationId };

/**
 * The schema level this build reads and writes: its last migration, `0008_anchor_checkpoint_hold`,
 * the schema of the Python original (CTRLRun) 0.11 to 0.12.2. A store either side writes at this
 * level is up to date for the other; an older one of either is migrated forward on open.
 */
export const SCHEMA_LEVEL: MigrationId = MIGRATION_IDS[MIGRATION_IDS.length - 1]!;

/** What a refusal says about the level, so an operator sees where the two implementations part. */
const LEVEL_NOTE = `(this build stops at schema level ${MIGRATION_IDS[MIGRATION_IDS.length - 1]!}, the schema of the Python original CTRLRun 0.11–0.12.2; a store migrated past it, by a later CTRLRun for instance, is not shared)`;

/** What this build records in `schema_version.ctrlrun_version` and reports as `running`. */
export const SCHEMA_WRITER = 'ctrlrun-ts 0.1.0';

const ID_SHAPE = /^\d{4}_[a-z][a-z0-9_]*$/;

/**
 * Checks a compiled-in migration list: every id well-formed, unique, in lexicographic order.
 * Throws a plain `Error` (a build defect, not a user error).
 */
export function checkMigrationList(ids: readonly string[]): void {
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (!ID_SHAPE.test(id)) throw new Error(`[kernel] migration id ${JSON.stringify(id)} does not match ${ID_SHAPE.source}`);
    if (i > 0 && !(ids[i - 1]! < id)) throw new Error(`[kernel] migration ids must be unique and in order: ${ids[i - 1]} then ${id}`);
  }
}
checkMigrationList(MIGRATION_IDS);

/** One row of `schema_version`. */
export interface AppliedMigration {
  readonly migrationId: string;
  readonly appliedAt: string;
  readonly ctrlrunVersion: string;
}

/** The columns that make an unversioned `effects` table a v0.5 (or older) baseline. */
const BASELINE_COLUMNS = ['effect_key', 'state', 'action_id', 'attempt'] as const;

const FORWARD_ONLY = 'Migrations are forward-only: run a ctrlrun build that knows these migrations, or restore the pre-upgrade backup.';

function refuse(message: string, applied: readonly string[], known: readonly string[], running: string, cause?: unknown): SchemaMismatch {
  return new SchemaMismatch(`[kernel] ${message}`, { applied: [...applied], known: [...known], running, cause });
}

/**
 * Classifies a versioned database (spec 03 §2.1, the five shapes) and returns the migrations to
 * apply: none (up to date) or the rest of `known` (forward). The three refusals (gapped,
 * backward, divergent) throw {@link SchemaMismatch} naming the ids involved.
 */
export function classifyVersioned(applied: readonly AppliedMigration[], known: readonly string[], running: string = SCHEMA_WRITER): string[] {
  const ids = applied.map((a) => a.migrationId);
  const knownSet = new Set(known);
  const appliedSet = new Set(ids);
  const unknown = applied.filter((a) => !knownSet.has(a.migrationId));
  if (unknown.length > 0) {
    const named = unknown.map((a) => `${a.migrationId} (recorded by ${a.ctrlrunVersion || 'an unknown version'})`).join(', ');
    const missing = known.filter((id) => !appliedSet.has(id));
    if (missing.length > 0) {
      throw refuse(
        `database schema has diverged from this build: it has ${named}, which ${running} does not know, and lacks ${missing.join(', ')}, which it needs ${LEVEL_NOTE}. Nothing was applied. ${FORWARD_ONLY}`,
        ids,
        known,
        running,
      );
    }
    throw refuse(
      `database schema is newer than this build: it has ${named}, which ${running} does not know ${LEVEL_NOTE}. ${FORWARD_ONLY}`,
      ids,
      known,
      running,
    );
  }
  const prefix = known.slice(0, ids.length);
  if (ids.length === prefix.length && ids.every((id, i) => id === prefix[i])) return known.slice(ids.length);
  const last = Math.max(...ids.map((id) => known.indexOf(id)));
  const missing = known.slice(0, last + 1).filter((id) => !appliedSet.has(id));
  throw refuse(
    `database schema has a gap: it records ${ids.join(', ')} but not ${missing.join(', ')}; a migration cannot be applied out of order. Restore the pre-upgrade backup.`,
    ids,
    known,
    running,
  );
}

/**
 * Classifies a database without `schema_version`: no tables → `empty`; an `effects` table with
 * at least the baseline columns → `baseline` (a v0.1–v0.5 store, adopted by running `0001` and
 * the rest); anything else is someone else's database and is refused untouched.
 */
export function classifyUnversioned(
  tables: readonly string[],
  effectsColumns: readonly string[] | null,
  known: readonly string[] = MIGRATION_IDS,
  running: string = SCHEMA_WRITER,
): 'empty' | 'baseline' {
  if (tables.length === 0) return 'empty';
  if (effectsColumns !== null && BASELINE_COLUMNS.every((c) => effectsColumns.includes(c))) return 'baseline';
  throw refuse(
    `refusing to open a database that is not a ctrlrun store: it has no schema_version and its tables (${tables.join(', ')}) are not a ctrlrun schema (an effects table with ${BASELINE_COLUMNS.join(', ')}). Nothing was created.`,
    [],
    known,
    running,
  );
}

/**
 * A `schema_version` table with no row, beside `otherTables`: alone it is an empty database (a
 * writer migrates it); beside any other table it is refused untouched — the rows that would make
 * those tables a ctrlrun store are missing, so they are someone else's, or a store whose history
 * was erased, and migrating would write into them.
 */
function refuseEmptyVersionBeside(otherTables: readonly string[], known: readonly string[], running: string): void {
  if (otherTables.length === 0) return;
  throw refuse(
    `refusing to open a database that is not a ctrlrun store: its schema_version is empty, yet it has other tables (${otherTables.join(', ')}); a ctrlrun store records every migration it applied. Nothing was created or migrated.`,
    [],
    known,
    running,
  );
}

async function run<Row>(ex: SqlExecutor, sql: string, params: readonly SqlValue[] = []): Promise<Row[]> {
  try {
    return (await ex.query<Row>(sql, params)).rows;
  } catch (err) {
    throw err instanceof CTRLRunError
      ? err
      : new StoreError(`[kernel] reading the schema failed: ${(err as Error)?.message ?? String(err)}`, { sql, cause: err });
  }
}

/** Reads `schema_version` (by `migration_id`). */
export async function readApplied(ex: SqlExecutor, dialect: SqlDialect): Promise<AppliedMigration[]> {
  const rows = await run<{ migration_id: string; applied_at: string; ctrlrun_version: string }>(ex, dialect.sql.readSchemaVersion);
  return rows.map((r) => ({ migrationId: String(r.migration_id), appliedAt: String(r.applied_at), ctrlrunVersion: String(r.ctrlrun_version ?? '') }));
}

/**
 * Classifies the database `ex` sees (only `schema_version` or the catalogue is read) and returns
 * what it records and what is missing. A reader is refused unless nothing is missing.
 */
async function classifyAt(
  ex: SqlExecutor,
  dialect: SqlDialect,
  known: readonly string[],
  running: string,
  readOnly: boolean,
): Promise<{ applied: string[]; pending: string[] }> {
  const { sql } = dialect;
  let pending: string[];
  let applied: string[] = [];
  if ((await run(ex, sql.schemaVersionExists)).length > 0) {
    const rows = await readApplied(ex, dialect);
    if (rows.length === 0) {
      // An empty schema_version records nothing: it does not make the tables beside it ours.
      const others = (await run<{ name: string }>(ex, sql.listTables)).map((r) => String(r.name)).filter((t) => t !== 'schema_version');
      refuseEmptyVersionBeside(others, known, running);
    }
    applied = rows.map((r) => r.migrationId);
    pending = classifyVersioned(rows, known, running);
  } else {
    const tables = (await run<{ name: string }>(ex, sql.listTables)).map((r) => String(r.name));
    const effects = tables.includes('effects') ? (await run<{ name: string }>(ex, sql.tableColumns, ['effects'])).map((r) => String(r.name)) : null;
    const kind = classifyUnversioned(tables, effects, known, running);
    if (readOnly) {
      throw refuse(
        kind === 'empty'
          ? 'a reader never migrates: this database has no ctrlrun schema; open it once with a writer'
          : 'a reader never migrates: this database has no schema_version (an older ctrlrun store); open it once with a writer to adopt it',
        [],
        known,
        running,
      );
    }
    pending = [...known];
  }
  if (pending.length > 0 && readOnly) {
    throw refuse(
      `a reader never migrates: this database lacks ${pending.join(', ')}; a writer applies ${pending.length === 1 ? 'it' : 'them'} on open`,
      applied,
      known,
      running,
    );
  }
  return { applied, pending };
}

/**
 * Postgres (spec 03 §2.2): take the transaction-scoped advisory lock, then classify and apply
 * every missing migration in that one transaction, each with its `schema_version` row. A
 * concurrent opener waits on the lock and then finds nothing left to do; a failure rolls the
 * whole open back. Readers take no lock and write nothing. Before any DDL the role's right to
 * create in the schema is checked (the refusal names the grant).
 */
async function migrateInOneTransaction(driver: SqlDriver, dialect: SqlDialect, options: MigrateOptions): Promise<string[]> {
  const running = options.running ?? SCHEMA_WRITER;
  const known: readonly string[] = MIGRATION_IDS;
  const { sql } = dialect;
  let current: string[] = [];
  let applying: string | null = null;
  try {
    return await driver.transaction(async (tx) => {
      // A driver may run this again from the start (see SqlDriver.transaction): nothing of an
      // earlier run is applying, so a failure to read the schema is not a migration's failure.
      current = [];
      applying = null;
      if (!options.readOnly && sql.migrationLock !== null) await tx.query(sql.migrationLock);
      const { applied, pending } = await classifyAt(tx, dialect, known, running, options.readOnly);
      current = applied;
      if (pending.length === 0) return [];
      if (sql.migrationPrivilege && dialect.checkMigrationPrivilege) {
        const row = (await run<Record<string, unknown>>(tx, sql.migrationPrivilege))[0] ?? {};
        const refusal = dialect.checkMigrationPrivilege(row);
        if (refusal !== null) throw refuse(`cannot migrate: ${refusal}. Nothing was applied.`, applied, known, running);
      }
      applying = pending[0]!;
      await tx.exec(sql.createSchemaVersion);
      for (const id of pending) {
        applying = id;
        const statements = (dialect.migrations as Readonly<Record<string, readonly string[]>>)[id];
        if (!statements) throw new Error(`[kernel] the ${dialect.name} dialect has no migration ${id}`);
        for (const statement of statements) await tx.exec(statement);
        await tx.query(sql.insertSchemaVersion, [id, storedTime(options.clock()), running]);
      }
      return pending;
    });
  } catch (err) {
    if (err instanceof SchemaMismatch) throw err;
    if (applying === null)
      throw err instanceof CTRLRunError ? err : new StoreError(`[kernel] reading the schema failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
    throw refuse(
      `migration ${applying} could not be applied (${(err as Error)?.message ?? String(err)}); it was rolled back together with this open's other migrations, and the database is unchanged. ${FORWARD_ONLY}`,
      current,
      known,
      running,
      err,
    );
  }
}

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** Stamps `applied_at`. */
  readonly clock: Clock;
  /** A reader never migrates: it opens only an up-to-date database. */
  readonly readOnly: boolean;
  /** Recorded as `ctrlrun_version`; defaults to {@link SCHEMA_WRITER}. */
  readonly running?: string;
}

/**
 * Brings the database to this build's schema at open. Classifies first (reading only
 * `schema_version` or the catalogue), then applies each missing migration in its own
 * transaction together with its `schema_version` row, re-reading `schema_version` under the
 * lock so that a migration another process applied meanwhile is skipped. Returns the ids applied.
 */
export async function migrate(driver: SqlDriver, dialect: SqlDialect, options: MigrateOptions): Promise<string[]> {
  if (dialect.migrateInOneTransaction === true) return migrateInOneTransaction(driver, dialect, options);
  const running = options.running ?? SCHEMA_WRITER;
  const known: readonly string[] = MIGRATION_IDS;
  const { sql } = dialect;
  const { applied, pending } = await classifyAt(driver, dialect, known, running, options.readOnly);
  if (pending.length === 0) return [];
  const done: string[] = [];
  for (const id of pending) {
    const statements = (dialect.migrations as Readonly<Record<string, readonly string[]>>)[id];
    if (!statements) throw new Error(`[kernel] the ${dialect.name} dialect has no migration ${id}`);
    let current: string[] = applied;
    try {
      const ran = await driver.transaction(async (tx) => {
        if (sql.migrationLock !== null) await tx.query(sql.migrationLock);
        await tx.exec(sql.createSchemaVersion);
        const now = await readApplied(tx, dialect);
        current = now.map((r) => r.migrationId);
        if (current.includes(id)) return false; // another process applied it meanwhile
        const rest = classifyVersioned(now, known, running);
        if (rest[0] !== id) throw refuse(`migration ${id} is not next: the database now records ${current.join(', ') || 'nothing'}`, current, known, running);
        for (const statement of statements) await tx.exec(statement);
        await tx.query(sql.insertSchemaVersion, [id, storedTime(options.clock()), running]);
        return true;
      });
      if (ran) done.push(id);
    } catch (err) {
      if (err instanceof SchemaMismatch) throw err;
      throw refuse(
        `migration ${id} could not be applied (${(err as Error)?.message ?? String(err)}); it was rolled back and the database is unchanged by it. ${FORWARD_ONLY}`,
        current,
        known,
        running,
        err,
      );
    }
  }
  return done;
}
