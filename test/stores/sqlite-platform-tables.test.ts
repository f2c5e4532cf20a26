/**
 * The SQLite dialect's foreign-table check ignores the tables a host platform keeps in the same
 * database — a Cloudflare Durable Object's `_cf_KV` (its KV API) and `_cf_METADATA` (alarms),
 * the documented name `__cf_kv`, miniflare's `__miniflare_do_name` — in any case, as the
 * platform reserves them, so a database holding only those opens as empty (a file copied from a
 * Durable Object's local state, say). A table of anyone else's still refuses it untouched, and
 * the refusal names that table only; a name that only resembles a platform prefix under `LIKE`'s
 * wildcards (`Xcf_KV`) is not ignored. The same check inside workerd is
 * test/worker/durable-object-platform-tables.test.ts.
 */
import { SchemaMismatch } from '@ctrlrun/kernel';
import { MIGRATION_IDS, openSqlStateStore, sqliteDialect } from '@ctrlrun/kernel/store';
import { SqlJsDriver, type SqlJsModule, type SqlJsPersistence } from '@ctrlrun/store-sqljs';
import initSqlJs, { type SqlJsStatic } from 'sql.js';
import { beforeAll, describe, expect, it } from 'vitest';

/** sql.js as its own types describe it (raw databases), and as the driver takes it. */
let RAW: SqlJsStatic;
let SQL: SqlJsModule;
beforeAll(async () => {
  RAW = await initSqlJs();
  SQL = RAW as unknown as SqlJsModule;
});

const PLATFORM = [
  'CREATE TABLE _cf_KV (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID',
  "INSERT INTO _cf_KV VALUES ('greeting', 'kept')",
  'CREATE TABLE _cf_METADATA (key INTEGER PRIMARY KEY, value BLOB)',
  'CREATE TABLE __cf_kv (key TEXT PRIMARY KEY, value BLOB)',
  'CREATE TABLE __miniflare_do_name (id INTEGER PRIMARY KEY, name TEXT)',
  "INSERT INTO __miniflare_do_name VALUES (1, 'default')",
  'CREATE TABLE _CF_Upper (a)',
];

function database(statements: readonly string[]): { bytes: () => Uint8Array | null; saves: () => number; persistence: SqlJsPersistence } {
  const db = new RAW.Database();
  for (const s of statements) db.exec(s);
  let bytes: Uint8Array | null = db.export();
  db.close();
  let saves = 0;
  return {
    bytes: () => bytes,
    saves: () => saves,
    persistence: {
      load: async () => bytes,
      save: async (b) => {
        saves += 1;
        bytes = b;
      },
    },
  };
}

function tablesOf(bytes: Uint8Array): string[] {
  const db = new RAW.Database(bytes);
  const names = (db.exec("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")[0]?.values ?? []).map((r) => String(r[0]));
  db.close();
  return names;
}

async function refusal(p: Promise<unknown>): Promise<SchemaMismatch> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SchemaMismatch);
  return err as SchemaMismatch;
}

describe('SQLite: the platform tables beside a store', () => {
  it('a database holding only platform tables opens as empty, is migrated, and keeps those tables and their rows', async () => {
    const d = database(PLATFORM);
    const store = await openSqlStateStore(await SqlJsDriver.open(SQL, d.persistence));
    expect(await store.reserveEffect('refund:p1', 'act_p1', 60_000)).toMatchObject({ effectKey: 'refund:p1', actionId: 'act_p1', attempt: 1 });
    expect(await store.getEffect('refund:p1')).toMatchObject({ state: 'reserved' });
    await store.close();
    const after = tablesOf(d.bytes()!);
    expect(after).toEqual(expect.arrayContaining(['_cf_KV', '_cf_METADATA', '__cf_kv', '__miniflare_do_name', '_CF_Upper', 'effects', 'schema_version']));
    const db = new RAW.Database(d.bytes()!);
    expect(db.exec("SELECT value FROM _cf_KV WHERE key = 'greeting'")[0]?.values).toEqual([['kept']]);
    expect((db.exec('SELECT migration_id FROM schema_version ORDER BY migration_id')[0]?.values ?? []).map((v) => v[0])).toEqual([...MIGRATION_IDS]);
    db.close();
  });

  it('an empty schema_version beside platform tables only is migrated by a writer', async () => {
    const d = database([...PLATFORM, sqliteDialect.sql.createSchemaVersion]);
    const store = await openSqlStateStore(await SqlJsDriver.open(SQL, d.persistence));
    await store.close();
    expect(tablesOf(d.bytes()!)).toContain('effects');
  });

  it("someone else's table beside the platform's is refused untouched, naming only that table", async () => {
    for (const foreign of ['CREATE TABLE invoices (id INTEGER PRIMARY KEY)', 'CREATE TABLE Xcf_KV (a)', 'CREATE TABLE a__miniflare_b (a)']) {
      const name = /CREATE TABLE (\S+)/.exec(foreign)![1]!;
      for (const versioned of [false, true]) {
        const d = database([...PLATFORM, ...(versioned ? [sqliteDialect.sql.createSchemaVersion] : []), foreign]);
        const before = d.bytes();
        const err = await refusal(openSqlStateStore(await SqlJsDriver.open(SQL, d.persistence)));
        expect(err.message).toContain('not a ctrlrun store');
        expect(err.message).toContain(`tables (${name})`);
        expect(d.saves()).toBe(0);
        expect(d.bytes()).toBe(before);
      }
    }
  });
});
