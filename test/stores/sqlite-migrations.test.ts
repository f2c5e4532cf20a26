/**
 * Schema versions on SQLite (spec 03 §2): classification at open, the five shapes and three
 * refusals, adoption of unversioned stores, one transaction per migration, readers never migrate.
 * Databases are built with raw sql.js, then opened through the kernel's store.
 */
import { DuplicateEffect, InvalidArgument, SCHEMA_LEVEL, SchemaMismatch } from '@ctrlrun/kernel';
import {
  GENESIS_HASH,
  MIGRATION_IDS,
  SCHEMA_WRITER,
  checkMigrationList,
  classifyUnversioned,
  classifyVersioned,
  openSqlStateStore,
  sqliteDialect,
  type SqlDriver,
  type SqlExecutor,
} from '@ctrlrun/kernel/store';
import { SqlJsDriver, openSqlJsStore, type SqlJsModule, type SqlJsPersistence } from '@ctrlrun/store-sqljs';
import fc from 'fast-check';
import initSqlJs from 'sql.js';
import { beforeAll, describe, expect, it } from 'vitest';

let SQL: SqlJsModule;
beforeAll(async () => {
  SQL = (await initSqlJs()) as unknown as SqlJsModule;
});

const T0 = new Date('2026-01-01T12:00:00Z');
const clockAt = (d: Date) => () => d;

/** Raw SQL against bytes: returns the new bytes. */
function build(statements: string[], from: Uint8Array | null = null): Uint8Array {
  const db = new SQL.Database(from);
  for (const s of statements) db.exec(s);
  const bytes = db.export();
  db.close();
  return bytes;
}

function rows(bytes: Uint8Array, sql: string): Record<string, unknown>[] {
  const db = new SQL.Database(bytes);
  const stmt = db.prepare(sql);
  const out: Record<string, unknown>[] = [];
  while (stmt.step()) {
    const names = stmt.getColumnNames();
    const values = stmt.get();
    out.push(Object.fromEntries(names.map((n, i) => [n, values[i]])));
  }
  stmt.free();
  db.close();
  return out;
}

const tables = (bytes: Uint8Array) =>
  rows(bytes, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").map((r) => r['name']);
const columns = (bytes: Uint8Array, table: string) => rows(bytes, `SELECT name FROM pragma_table_info('${table}')`).map((r) => r['name']);

/** A persistence pair over one bytes slot, counting saves. */
function slot(initial: Uint8Array | null) {
  const s = { bytes: initial, saves: 0 };
  const persistence: SqlJsPersistence = {
    load: async () => s.bytes,
    save: async (b) => {
      s.saves += 1;
      s.bytes = b;
    },
  };
  return { s, persistence };
}

/** Logs every statement a driver runs. */
function spy(driver: SqlDriver, log: string[]): SqlDriver {
  const wrap = (ex: SqlExecutor): SqlExecutor => ({
    query: (sql, params) => (log.push(sql), ex.query(sql, params)),
    exec: (sql) => (log.push(sql), ex.exec(sql)),
  });
  return {
    name: driver.name,
    dialect: driver.dialect,
    capabilities: driver.capabilities,
    ...wrap(driver),
    transaction: (fn) => driver.transaction((tx) => fn(wrap(tx))),
    close: () => driver.close(),
  };
}

const ddl = (...ids: (typeof MIGRATION_IDS)[number][]) => ids.flatMap((id) => [...sqliteDialect.migrations[id]]);
const versionRows = (...ids: string[]) => [
  sqliteDialect.sql.createSchemaVersion,
  ...ids.map(
    (id) => `INSERT INTO schema_version VALUES ('${id}', '2025-06-01T00:00:00+00:00', '${id.startsWith('0099') ? 'ctrlrun 0.9.0' : 'ctrlrun 0.6.0'}')`,
  ),
];
const full = () => build([...ddl(...MIGRATION_IDS), ...versionRows(...MIGRATION_IDS)]);

async function refusal(p: Promise<unknown>): Promise<SchemaMismatch> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SchemaMismatch);
  expect(err).toMatchObject({ code: 'ERR_SCHEMA_MISMATCH', known: [...MIGRATION_IDS], running: SCHEMA_WRITER });
  return err as SchemaMismatch;
}

/** The v0.5 schema as the old release wrote it, with one row in each table. */
const V05 = [
  ...ddl('0001_baseline'),
  "INSERT INTO effects VALUES ('refund:old-1', 'committed', 'act_old1', 1, NULL, '{\"refund_id\":\"r-9\"}', NULL, '2025-05-01T10:00:00+00:00', '2025-05-01T10:00:01+00:00')",
  "INSERT INTO effects VALUES ('refund:old-2', 'ambiguous', 'act_old2', 2, NULL, NULL, 'TimeoutError: no reply', '2025-05-01T11:00:00+00:00', '2025-05-01T11:00:05.250000+00:00')",
  "INSERT INTO approvals VALUES ('apr_old', 'sha256:" +
    'e'.repeat(64) +
    "', 'consumed', '{\"action_id\":\"act_old1\"}', 'alice', '2025-05-01T09:00:00+00:00', '2025-05-01T09:01:00+00:00', '2025-05-01T09:15:00+00:00', '2025-05-01T10:00:00+00:00')",
  "INSERT INTO receipts VALUES ('ctr_old', 'act_old1', 'refund:old-1', 'committed', '{\"schema\":\"ctrlrun.receipt/v2\"}', '2025-05-01T10:00:01.000Z')",
  "INSERT INTO events(ts, type, action_id, effect_key, approval_id, data_json) VALUES ('2025-05-01T10:00:00.000Z', 'EXECUTION_COMMITTED', 'act_old1', 'refund:old-1', NULL, '{}')",
];

describe('migrations at open', () => {
  it('test_T150_an_empty_database_gets_all_eight_migrations_in_the_exact_schema', async () => {
    const { s, persistence } = slot(null);
    const store = await openSqlJsStore(SQL, { clock: clockAt(T0), persistence });
    expect(await store.appliedMigrations()).toEqual(
      MIGRATION_IDS.map((id) => ({ migrationId: id, appliedAt: '2026-01-01T12:00:00+00:00', ctrlrunVersion: SCHEMA_WRITER })),
    );
    await store.close();
    const b = s.bytes!;
    // Column for column, what the Python original creates (so either can open the file).
    expect(tables(b)).toEqual([
      'anchors',
      'approvals',
      'budget_ledger',
      'continuations',
      'delegations',
      'effects',
      'events',
      'holds',
      'prune_checkpoint',
      'receipt_chain',
      'receipts',
      'schema_version',
    ]);
    expect(columns(b, 'effects')).toEqual([
      'effect_key',
      'state',
      'action_id',
      'attempt',
      'lease_expires_at',
      'result_json',
      'error',
      'created_at',
      'updated_at',
      'resolved_by',
    ]);
    expect(columns(b, 'approvals')).toEqual([
      'approval_id',
      'action_hash',
      'status',
      'action_json',
      'approver',
      'created_at',
      'granted_at',
      'expires_at',
      'consumed_at',
      'policy_hash_at_approval',
      'precondition_fingerprint',
      'approvers',
      'required_roles',
      'approvals_required',
    ]);
    // 0007 and 0008, the original's (spec 05 §1.2): no budget_anchor on SQLite.
    expect(columns(b, 'budget_ledger')).toEqual(['id', 'grant_id', 'metric', 'amount', 'effect_key', 'attempt', 'consumed_at', 'released_at']);
    expect(columns(b, 'anchors')).toEqual(['token', 'seq', 'hash', 'kind', 'at']);
    expect(columns(b, 'prune_checkpoint')).toEqual(['id', 'seq', 'hash', 'schema', 'at']);
    expect(columns(b, 'holds')).toEqual(['hold_id', 'from_seq', 'to_seq', 'reason', 'placed_by', 'placed_at', 'released_at', 'released_by']);
    expect(columns(b, 'receipts')).toEqual(['receipt_id', 'action_id', 'effect_key', 'result', 'json', 'ts', 'seq', 'prev_hash', 'hash']);
    expect(columns(b, 'events')).toEqual(['event_id', 'ts', 'type', 'action_id', 'effect_key', 'approval_id', 'data_json']);
    expect(columns(b, 'continuations')).toEqual(['effect_key', 'action_id', 'action_json', 'continuation', 'rounds', 'updated_at']);
    expect(columns(b, 'delegations')).toEqual([
      'delegation_id',
      'parent_id',
      'depth',
      'grant_json',
      'created_by_agent',
      'created_by_user',
      'created_via',
      'created_at',
      'revoked_at',
      'revoked_by',
    ]);
    expect(columns(b, 'schema_version')).toEqual(['migration_id', 'applied_at', 'ctrlrun_version']);
    expect(columns(b, 'receipt_chain')).toEqual(['id', 'seq', 'hash']);
    expect(rows(b, "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name").map((r) => r['name'])).toEqual([
      'continuations_by_value',
      'delegations_by_parent',
      'ix_anchors_seq',
      'ix_budget_ledger_window',
      'ix_holds_range',
      'receipts_by_seq',
    ]);
    expect(rows(b, 'SELECT id, seq, hash FROM receipt_chain')).toEqual([{ id: 1, seq: 0, hash: GENESIS_HASH }]);
    // The version is recorded, never PRAGMA user_version.
    expect(rows(b, 'PRAGMA user_version')).toEqual([{ user_version: 0 }]);
  });

  it('test_T150_a_reopen_applies_nothing_and_leaves_applied_at_unchanged', async () => {
    const { s, persistence } = slot(null);
    await (await openSqlJsStore(SQL, { clock: clockAt(T0), persistence })).close();
    const savesAfterFirst = s.saves;
    const later = new Date('2026-03-01T00:00:00Z');
    const log: string[] = [];
    const driver = spy(await SqlJsDriver.open(SQL, persistence), log);
    const store = await openSqlStateStore(driver, { clock: clockAt(later) });
    expect((await store.appliedMigrations()).map((m) => m.appliedAt)).toEqual(MIGRATION_IDS.map(() => '2026-01-01T12:00:00+00:00'));
    expect(log.filter((q) => /^\s*(CREATE|ALTER|INSERT)/i.test(q))).toEqual([]);
    expect(s.saves).toBe(savesAfterFirst);
    await store.close();
  });

  it('test_T148_a_newer_database_is_refused_before_any_other_table_is_read', async () => {
    for (const bytes of [
      build([...ddl(...MIGRATION_IDS), ...versionRows(...MIGRATION_IDS, '0099_future')]),
      build(versionRows(...MIGRATION_IDS, '0099_future')),
    ]) {
      const log: string[] = [];
      const { s, persistence } = slot(bytes);
      const err = await refusal(openSqlStateStore(spy(await SqlJsDriver.open(SQL, persistence), log)));
      expect(err.applied).toEqual([...MIGRATION_IDS, '0099_future']);
      expect(err.message).toContain('0099_future');
      expect(err.message).toContain('ctrlrun 0.9.0'); // the version recorded for the unknown id
      // The level this build stops at, named, and what it is in the original's terms.
      expect(SCHEMA_LEVEL).toBe('0008_anchor_checkpoint_hold');
      expect(err.message).toContain('this build stops at schema level 0008_anchor_checkpoint_hold, the schema of the Python original CTRLRun 0.11–0.12.2');
      expect(err.message).toContain('forward-only');
      expect(err.message).toContain('backup');
      for (const q of log) {
        expect(q, 'only the catalogue and schema_version are read').not.toMatch(
          /\b(effects|approvals|receipts|receipt_chain|events|continuations|delegations|budget_ledger|anchors|holds|prune_checkpoint)\b/,
        );
      }
      expect(s.saves).toBe(0);
    }
  });

  it('test_T151_a_gapped_database_is_refused_naming_the_missing_migration', async () => {
    const bytes = build([...ddl('0001_baseline', '0002_receipt_chain', '0003_resolved_by'), ...versionRows('0001_baseline', '0003_resolved_by')]);
    const { s, persistence } = slot(bytes);
    const err = await refusal(openSqlJsStore(SQL, { persistence }));
    expect(err.applied).toEqual(['0001_baseline', '0003_resolved_by']);
    expect(err.message).toContain('0002_receipt_chain');
    expect(err.message).not.toContain('0004_policy_provenance');
    expect(s.saves).toBe(0);
    expect(rows(s.bytes!, 'SELECT migration_id FROM schema_version ORDER BY migration_id').map((r) => r['migration_id'])).toEqual([
      '0001_baseline',
      '0003_resolved_by',
    ]);
  });

  it('test_T151_a_divergent_database_is_refused_naming_both_and_applies_nothing', async () => {
    const bytes = build([...ddl('0001_baseline'), ...versionRows('0001_baseline', '0099_future')]);
    const { s, persistence } = slot(bytes);
    const err = await refusal(openSqlJsStore(SQL, { persistence }));
    expect(err.message).toContain('0099_future');
    expect(err.message).toContain('0002_receipt_chain');
    expect(s.saves).toBe(0);
    expect(columns(s.bytes!, 'receipts')).not.toContain('seq');
  });

  it('a forward database gets the rest, automatically', async () => {
    const bytes = build([...ddl('0001_baseline', '0002_receipt_chain'), ...versionRows('0001_baseline', '0002_receipt_chain'), ...V05.slice(-5, -4)]);
    const { s, persistence } = slot(bytes);
    const store = await openSqlJsStore(SQL, { clock: clockAt(T0), persistence });
    const applied = await store.appliedMigrations();
    expect(applied.map((m) => [m.migrationId, m.appliedAt])).toEqual([
      ['0001_baseline', '2025-06-01T00:00:00+00:00'],
      ['0002_receipt_chain', '2025-06-01T00:00:00+00:00'],
      ...MIGRATION_IDS.slice(2).map((id) => [id, '2026-01-01T12:00:00+00:00']),
    ]);
    expect(await store.getEffect('refund:old-1')).toMatchObject({ state: 'committed', resolvedBy: null });
    await store.close();
    expect(columns(s.bytes!, 'approvals')).toContain('policy_hash_at_approval');
  });

  it('test_T152_a_foreign_database_is_refused_and_left_untouched', async () => {
    for (const foreign of [
      ['CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)', "INSERT INTO users VALUES (1, 'ada')"],
      ['CREATE TABLE effects(id INTEGER PRIMARY KEY, name TEXT)'], // an effects table that is not ours
    ]) {
      const bytes = build(foreign);
      const log: string[] = [];
      const { s, persistence } = slot(bytes);
      const err = await refusal(openSqlStateStore(spy(await SqlJsDriver.open(SQL, persistence), log)));
      expect(err.message).toMatch(/not a ctrlrun store/);
      expect(err.applied).toEqual([]);
      expect(log.filter((q) => /^\s*(CREATE|ALTER|INSERT|UPDATE|DELETE|DROP)/i.test(q))).toEqual([]);
      expect(s.saves).toBe(0);
      expect(tables(s.bytes!)).not.toContain('schema_version');
    }
  });

  it('a foreign database with an empty schema_version is refused and left untouched; an empty schema_version alone is migrated', async () => {
    for (const foreign of [
      ['CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)', "INSERT INTO users VALUES (1, 'ada')"],
      ddl('0001_baseline'), // our tables, but no migration recorded: the history is missing
    ]) {
      const bytes = build([sqliteDialect.sql.createSchemaVersion, ...foreign]);
      for (const readOnly of [false, true]) {
        const log: string[] = [];
        const { s, persistence } = slot(bytes);
        const err = await refusal(openSqlStateStore(spy(await SqlJsDriver.open(SQL, persistence), log), { readOnly }));
        expect(err.message).toMatch(/not a ctrlrun store: its schema_version is empty, yet it has other tables/);
        expect(err.applied).toEqual([]);
        expect(log.filter((q) => /^\s*(CREATE|ALTER|INSERT|UPDATE|DELETE|DROP)/i.test(q))).toEqual([]);
        expect(s.saves).toBe(0);
        expect(s.bytes).toBe(bytes);
      }
    }
    const { s, persistence } = slot(build([sqliteDialect.sql.createSchemaVersion]));
    const store = await openSqlStateStore(await SqlJsDriver.open(SQL, persistence), { clock: clockAt(T0) });
    await store.close();
    expect(rows(s.bytes!, 'SELECT migration_id FROM schema_version ORDER BY migration_id').map((r) => r['migration_id'])).toEqual([...MIGRATION_IDS]);
  });

  it('test_T147_a_v05_database_migrates_and_keeps_every_row', async () => {
    const bytes = build(V05);
    const before = {
      effects: rows(bytes, 'SELECT * FROM effects ORDER BY effect_key'),
      approvals: rows(bytes, 'SELECT * FROM approvals'),
      receipts: rows(bytes, 'SELECT * FROM receipts'),
      events: rows(bytes, 'SELECT * FROM events'),
    };
    const { s, persistence } = slot(bytes);
    const store = await openSqlJsStore(SQL, { clock: clockAt(T0), persistence });
    expect((await store.appliedMigrations()).map((m) => m.migrationId)).toEqual([...MIGRATION_IDS]);
    // The old rows live on, as they were, with the new columns NULL (never backfilled).
    expect(await store.getEffect('refund:old-2')).toEqual({
      effectKey: 'refund:old-2',
      state: 'ambiguous',
      actionId: 'act_old2',
      attempt: 2,
      leaseExpiresAt: null,
      resultJson: null,
      error: 'TimeoutError: no reply',
      createdAt: '2025-05-01T11:00:00+00:00',
      updatedAt: '2025-05-01T11:00:05.250000+00:00',
      resolvedBy: null,
    });
    await expect(store.reserveEffect('refund:old-1', 'act_new', 300_000)).rejects.toBeInstanceOf(DuplicateEffect);
    expect(await store.chainHead()).toEqual({ seq: 0, hash: GENESIS_HASH });
    expect((await store.receipts()).map((r) => [r.receipt_id, r.seq, r.hash])).toEqual([['ctr_old', null, null]]);
    await store.close();
    const after = s.bytes!;
    expect(rows(after, 'SELECT * FROM effects ORDER BY effect_key')).toEqual(before.effects.map((r) => ({ ...r, resolved_by: null })));
    expect(rows(after, 'SELECT * FROM approvals')).toEqual(
      before.approvals.map((r) => ({
        ...r,
        policy_hash_at_approval: null,
        precondition_fingerprint: null,
        approvers: null,
        required_roles: null,
        approvals_required: null,
      })),
    );
    expect(rows(after, 'SELECT * FROM receipts')).toEqual(before.receipts.map((r) => ({ ...r, seq: null, prev_hash: null, hash: null })));
    expect(rows(after, 'SELECT * FROM events')).toEqual(before.events);
  });

  it('test_T152_a_v01_database_without_continuations_or_delegations_is_adopted', async () => {
    // v0.1/v0.2 had no continuations or delegations: 0001 is executed, not just recorded.
    const v01 = V05.filter((q) => !/continuations|delegations/.test(q));
    const { s, persistence } = slot(build(v01));
    expect(tables(s.bytes!)).not.toContain('delegations');
    const store = await openSqlJsStore(SQL, { persistence });
    await store.close();
    expect(tables(s.bytes!)).toEqual(expect.arrayContaining(['continuations', 'delegations', 'receipt_chain', 'schema_version']));
  });

  it('test_T149_a_migration_that_fails_rolls_back_whole_and_raises_SchemaMismatch', async () => {
    // receipts already has prev_hash: 0002 adds seq, then fails on prev_hash; seq must vanish with it.
    const bytes = build([...V05, 'ALTER TABLE receipts ADD COLUMN prev_hash TEXT']);
    const { s, persistence } = slot(bytes);
    const err = await refusal(openSqlJsStore(SQL, { persistence }));
    expect(err.message).toMatch(/0002_receipt_chain could not be applied/);
    expect(err.message).toMatch(/unchanged/);
    expect(err.cause).toBeDefined();
    expect(err.applied).toEqual(['0001_baseline']);
    // 0001 committed on its own; 0002 left nothing behind.
    expect(rows(s.bytes!, 'SELECT migration_id FROM schema_version').map((r) => r['migration_id'])).toEqual(['0001_baseline']);
    expect(columns(s.bytes!, 'receipts')).not.toContain('seq');
    expect(tables(s.bytes!)).not.toContain('receipt_chain');
  });

  it('re-reads schema_version under the lock and skips a migration another process applied meanwhile', async () => {
    const driver = await SqlJsDriver.open(SQL, null);
    let raced = false;
    const racing: SqlDriver = {
      name: driver.name,
      dialect: driver.dialect,
      capabilities: driver.capabilities,
      query: (q, p) => driver.query(q, p),
      exec: (q) => driver.exec(q),
      close: () => driver.close(),
      transaction: (fn) =>
        driver.transaction(async (tx) => {
          if (!raced) {
            // Another process got the lock first and applied 0001.
            raced = true;
            for (const q of [...ddl('0001_baseline'), ...versionRows('0001_baseline')]) await tx.exec(q);
          }
          return fn(tx);
        }),
    };
    const store = await openSqlStateStore(racing, { clock: clockAt(T0) });
    expect((await store.appliedMigrations()).map((m) => [m.migrationId, m.ctrlrunVersion])).toEqual([
      ['0001_baseline', 'ctrlrun 0.6.0'],
      ...MIGRATION_IDS.slice(1).map((id) => [id, SCHEMA_WRITER]),
    ]);
    await store.close();
  });
});

describe('readers never migrate', () => {
  it('refuse an empty, an unversioned and a forward database, and write nothing', async () => {
    const forward = build([...ddl('0001_baseline', '0002_receipt_chain'), ...versionRows('0001_baseline', '0002_receipt_chain')]);
    for (const [bytes, says] of [
      [null, /no ctrlrun schema/],
      [build(V05), /no schema_version/],
      [
        forward,
        /lacks 0003_resolved_by, 0004_policy_provenance, 0005_precondition_fingerprint, 0006_verified_approver, 0007_budget_ledger, 0008_anchor_checkpoint_hold/,
      ],
    ] as const) {
      const log: string[] = [];
      const { s, persistence } = slot(bytes);
      const err = await refusal(openSqlStateStore(spy(await SqlJsDriver.open(SQL, persistence), log), { readOnly: true }));
      expect(err.message).toMatch(says);
      expect(err.message).toMatch(/never migrates/);
      expect(log.filter((q) => /^\s*(CREATE|ALTER|INSERT|UPDATE|DELETE|BEGIN)/i.test(q))).toEqual([]);
      expect(s.saves).toBe(0);
    }
  });

  it('open an up-to-date database, read it, and refuse writes', async () => {
    const { s, persistence } = slot(full());
    const store = await openSqlJsStore(SQL, { persistence, readOnly: true });
    expect(store.readOnly).toBe(true);
    expect(await store.listEffects()).toEqual([]);
    expect(await store.chainHead()).toEqual({ seq: 0, hash: GENESIS_HASH });
    await expect(store.reserveEffect('k', 'act_1', 1000)).rejects.toBeInstanceOf(InvalidArgument);
    await store.close();
    expect(s.saves).toBe(0);
  });
});

describe('classification is a pure function of the recorded ids', () => {
  const known = [...MIGRATION_IDS];
  const row = (id: string) => ({ migrationId: id, appliedAt: '2025-01-01T00:00:00+00:00', ctrlrunVersion: 'x' });

  it('every subset of known ids plus unknown ones lands in exactly one of the five shapes', () => {
    fc.assert(
      fc.property(fc.subarray(known), fc.uniqueArray(fc.constantFrom('0099_future', '0005_other', '0003_other'), { maxLength: 2 }), (sub, unknown) => {
        const ids = [...sub, ...unknown].sort();
        const isPrefix = unknown.length === 0 && sub.every((id, i) => id === known[i]);
        let result: string[] | SchemaMismatch;
        try {
          result = classifyVersioned(ids.map(row), known);
        } catch (e) {
          result = e as SchemaMismatch;
        }
        if (isPrefix) {
          expect(result).toEqual(known.slice(sub.length)); // up to date or forward
        } else {
          expect(result).toBeInstanceOf(SchemaMismatch);
          const msg = (result as SchemaMismatch).message;
          for (const u of unknown) expect(msg).toContain(u); // backward and divergent name the unknown ids
          if (unknown.length > 0 && sub.length < known.length) expect(msg).toMatch(/diverged/);
          if (unknown.length > 0 && sub.length === known.length) expect(msg).toMatch(/newer/);
          if (unknown.length === 0) expect(msg).toMatch(/gap/);
          expect((result as SchemaMismatch).applied).toEqual(ids);
        }
      }),
    );
  });

  it('unversioned: empty, baseline, or refused', () => {
    expect(classifyUnversioned([], null)).toBe('empty');
    expect(classifyUnversioned(['effects', 'receipts'], ['effect_key', 'state', 'action_id', 'attempt', 'error'])).toBe('baseline');
    expect(() => classifyUnversioned(['effects'], ['effect_key', 'state', 'action_id'])).toThrow(SchemaMismatch);
    expect(() => classifyUnversioned(['users'], null)).toThrow(/users/);
  });

  it('the compiled-in list is self-checked: shape, uniqueness, order', () => {
    expect(() => checkMigrationList(MIGRATION_IDS)).not.toThrow();
    expect(() => checkMigrationList(['0002_b', '0001_a'])).toThrow(/order/);
    expect(() => checkMigrationList(['0001_a', '0001_a'])).toThrow(/unique/);
    expect(() => checkMigrationList(['1_a'])).toThrow(/does not match/);
    expect(() => checkMigrationList(['0001_Baseline'])).toThrow(/does not match/);
  });

  it('SQLite older than 3.35 (no RETURNING) is refused', () => {
    expect(sqliteDialect.checkServerVersion('3.34.1')).toMatch(/too old/);
    expect(sqliteDialect.checkServerVersion('2.8.17')).toMatch(/too old/);
    expect(sqliteDialect.checkServerVersion('3.35.0')).toBeNull();
    expect(sqliteDialect.checkServerVersion('3.54.1')).toBeNull();
    expect(sqliteDialect.checkServerVersion('4.0.0')).toBeNull();
  });
});
