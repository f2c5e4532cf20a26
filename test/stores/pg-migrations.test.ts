/**
 * The Postgres dialect's schema (spec 03 §1.2, §2, §3.3), on PGlite and on a real PostgreSQL
 * server: the catalogue after open (every identity/hash column COLLATE "C", BIGSERIAL event ids,
 * the indexes — T154f), the five shapes and three refusals, adoption of an unversioned store, a
 * half-applied migration rolled back, readers never migrating, concurrent opens under the advisory
 * lock, and — on the server — the UTF8 (T154c) and CREATE-privilege checks.
 */
import { PGlite } from '@electric-sql/pglite';
import { GENESIS_HASH, MIGRATION_IDS, SCHEMA_WRITER, postgresDialect, type SqlStateStore } from '@ctrlrun/kernel/store';
import { ApprovalRequired, Control, createAction, InvalidArgument, loadPolicy, NotExecuted, SchemaMismatch, StoreError } from '@ctrlrun/kernel';
import { createPgStore, openPgStore } from '@ctrlrun/store-node/pg';
import { createPgliteStore, openPgliteStore } from '@ctrlrun/store-node/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

const T0 = new Date('2026-01-01T12:00:00Z');
const REFUND_POLICY = loadPolicy(`
schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
`);
const LATER = new Date('2026-03-01T00:00:00Z');

/** Where a case runs: raw SQL as the owner, and stores on a schema. */
interface Backend {
  /** A new empty schema's name. */
  schema(): Promise<string>;
  /** Rows of one statement (`$n` parameters). */
  rows<Row = Record<string, unknown>>(text: string, values?: unknown[]): Promise<Row[]>;
  /** Several statements inside one transaction whose search_path is `schema`. */
  run(schema: string, statements: readonly string[]): Promise<void>;
  open(schema: string, options?: { clock?: () => Date; readOnly?: boolean }): Promise<SqlStateStore>;
  /** Eight opens at once (a pool for the server; PGlite queues them). */
  readonly concurrent: boolean;
}

const DDL = postgresDialect().migrations;
const ddl = (...ids: (typeof MIGRATION_IDS)[number][]) => ids.flatMap((id) => [...DDL[id]]);
const versionRows = (...ids: string[]) => [
  'CREATE TABLE IF NOT EXISTS schema_version(migration_id TEXT PRIMARY KEY, applied_at TEXT NOT NULL, ctrlrun_version TEXT NOT NULL)',
  ...ids.map(
    (id) => `INSERT INTO schema_version VALUES ('${id}', '2025-06-01T00:00:00+00:00', '${id.startsWith('0099') ? 'ctrlrun 0.9.0' : 'ctrlrun 0.6.0'}')`,
  ),
];

/** Every text column the spec gives COLLATE "C", by table. */
const COLLATE_C: Record<string, string[]> = {
  effects: ['effect_key', 'action_id', 'resolved_by'],
  continuations: ['effect_key', 'action_id', 'continuation'],
  approvals: ['approval_id', 'action_hash', 'policy_hash_at_approval', 'precondition_fingerprint', 'approvers', 'required_roles'],
  // 0007 and 0008 (spec 05 §1.3).
  budget_ledger: ['grant_id', 'metric', 'effect_key'],
  budget_anchor: ['grant_id'],
  anchors: ['token', 'hash', 'kind'],
  prune_checkpoint: ['hash', 'schema'],
  holds: ['hold_id', 'reason', 'placed_by', 'released_by'],
  receipts: ['receipt_id', 'action_id', 'effect_key', 'prev_hash', 'hash'],
  events: ['action_id', 'effect_key', 'approval_id'],
  delegations: ['delegation_id', 'parent_id'],
  receipt_chain: ['hash'],
  schema_version: [],
};

const COLUMNS: Record<string, string[]> = {
  anchors: ['token', 'seq', 'hash', 'kind', 'at'],
  approvals: [
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
  ],
  budget_anchor: ['grant_id'],
  budget_ledger: ['id', 'grant_id', 'metric', 'amount', 'effect_key', 'attempt', 'consumed_at', 'released_at'],
  continuations: ['effect_key', 'action_id', 'action_json', 'continuation', 'rounds', 'updated_at'],
  delegations: [
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
  ],
  effects: ['effect_key', 'state', 'action_id', 'attempt', 'lease_expires_at', 'result_json', 'error', 'created_at', 'updated_at', 'resolved_by'],
  events: ['event_id', 'ts', 'type', 'action_id', 'effect_key', 'approval_id', 'data_json'],
  holds: ['hold_id', 'from_seq', 'to_seq', 'reason', 'placed_by', 'placed_at', 'released_at', 'released_by'],
  prune_checkpoint: ['id', 'seq', 'hash', 'schema', 'at'],
  receipt_chain: ['id', 'seq', 'hash'],
  receipts: ['receipt_id', 'action_id', 'effect_key', 'result', 'json', 'ts', 'seq', 'prev_hash', 'hash'],
  schema_version: ['migration_id', 'applied_at', 'ctrlrun_version'],
};

async function refusal(p: Promise<unknown>): Promise<SchemaMismatch> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SchemaMismatch);
  expect(err).toMatchObject({ code: 'ERR_SCHEMA_MISMATCH', known: [...MIGRATION_IDS], running: SCHEMA_WRITER });
  return err as SchemaMismatch;
}

function schemaCases(name: string, backend: () => Backend): void {
  describe(name, () => {
    const b = () => backend();
    const tables = async (schema: string) =>
      (await b().rows<{ t: string }>('SELECT tablename AS t FROM pg_catalog.pg_tables WHERE schemaname = $1 ORDER BY tablename', [schema])).map((r) => r.t);
    const applied = async (schema: string) =>
      (await b().rows<{ id: string; at: string }>(`SELECT migration_id AS id, applied_at AS at FROM "${schema}".schema_version ORDER BY migration_id`)).map(
        (r) => [r.id, r.at],
      );

    it('test_T154f_every_identity_and_hash_column_is_collate_c_in_the_catalogue', async () => {
      const schema = await b().schema();
      await (await b().open(schema, { clock: () => T0 })).close();
      expect(await tables(schema)).toEqual(Object.keys(COLUMNS));
      const cols = await b().rows<{ table_name: string; column_name: string; data_type: string; collation_name: string | null; column_default: string | null }>(
        'SELECT table_name, column_name, data_type, collation_name, column_default FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position',
        [schema],
      );
      for (const [table, expected] of Object.entries(COLUMNS)) {
        expect(
          cols.filter((c) => c.table_name === table).map((c) => c.column_name),
          table,
        ).toEqual(expected);
      }
      for (const c of cols) {
        const wantC = COLLATE_C[c.table_name]!.includes(c.column_name);
        expect(c.collation_name, `${c.table_name}.${c.column_name}`).toBe(wantC ? 'C' : null);
      }
      const col = (t: string, n: string) => cols.find((c) => c.table_name === t && c.column_name === n)!;
      expect(col('events', 'event_id')).toMatchObject({ data_type: 'bigint' });
      expect(col('events', 'event_id').column_default).toMatch(/^nextval\(/); // BIGSERIAL
      expect(col('receipts', 'seq').data_type).toBe('bigint');
      expect(col('receipt_chain', 'seq').data_type).toBe('bigint');
      expect(col('effects', 'attempt').data_type).toBe('integer');
      // The original's 0007/0008 types: BIGSERIAL and BIGINT, and TIMESTAMPTZ for their times (TEXT before 0007).
      expect(col('budget_ledger', 'id')).toMatchObject({ data_type: 'bigint', column_default: expect.stringMatching(/^nextval\(/) });
      expect(col('budget_ledger', 'amount').data_type).toBe('bigint');
      expect(col('approvals', 'approvals_required').data_type).toBe('integer');
      for (const [t, n] of [
        ['budget_ledger', 'consumed_at'],
        ['budget_ledger', 'released_at'],
        ['anchors', 'at'],
        ['prune_checkpoint', 'at'],
        ['holds', 'placed_at'],
        ['holds', 'released_at'],
      ] as const)
        expect(col(t, n).data_type, `${t}.${n}`).toBe('timestamp with time zone');
      for (const [t, n] of [
        ['anchors', 'seq'],
        ['prune_checkpoint', 'seq'],
        ['holds', 'from_seq'],
        ['holds', 'to_seq'],
      ] as const)
        expect(col(t, n).data_type, `${t}.${n}`).toBe('bigint');
      const indexes = await b().rows<{ indexname: string; indexdef: string }>(
        "SELECT indexname, indexdef FROM pg_catalog.pg_indexes WHERE schemaname = $1 AND indexname NOT LIKE '%_pkey' ORDER BY indexname",
        [schema],
      );
      expect(indexes.map((i) => i.indexname)).toEqual([
        'budget_ledger_effect_key_attempt_grant_id_metric_key',
        'continuations_by_value',
        'delegations_by_parent',
        'ix_anchors_seq',
        'ix_budget_ledger_window',
        'ix_holds_range',
        'receipts_by_seq',
      ]);
      const def = (name: string) => indexes.find((i) => i.indexname === name)!.indexdef;
      expect(def('continuations_by_value')).toMatch(/CREATE UNIQUE INDEX .* \(continuation\) WHERE \(continuation <> ''::text\)/);
      expect(def('receipts_by_seq')).toMatch(/CREATE UNIQUE INDEX .* \(seq\) WHERE \(seq IS NOT NULL\)/);
      // The constraint the original's ON CONFLICT (effect_key, attempt, grant_id, metric) names.
      expect(def('budget_ledger_effect_key_attempt_grant_id_metric_key')).toMatch(/CREATE UNIQUE INDEX .* \(effect_key, attempt, grant_id, metric\)/);
      expect(def('ix_budget_ledger_window')).toMatch(/\(grant_id, metric, consumed_at\)/);
      expect(def('ix_anchors_seq')).toMatch(/\(kind, seq\)/);
      expect(def('ix_holds_range')).toMatch(/\(from_seq, to_seq\)/);
      expect(await b().rows(`SELECT id, seq::int AS seq, hash FROM "${schema}".receipt_chain`)).toEqual([{ id: 1, seq: 0, hash: GENESIS_HASH }]);
      expect(await applied(schema)).toEqual(MIGRATION_IDS.map((id) => [id, '2026-01-01T12:00:00+00:00']));
    });

    it('test_T154f_keys_compare_byte_for_byte (case and accents never merge two effect keys)', async () => {
      const schema = await b().schema();
      const store = await b().open(schema, { clock: () => T0 });
      for (const key of ['refund:a', 'refund:A', 'refund:\u00e9', 'refund:e\u0301']) await store.reserveEffect(key, `act_${key.length}`, 60_000);
      expect((await store.listEffects()).map((e) => e.effectKey).sort()).toEqual(['refund:A', 'refund:a', 'refund:e\u0301', 'refund:\u00e9']);
      await store.close();
    });

    it('test_T150_a_reopen_applies_nothing_and_leaves_applied_at_unchanged', async () => {
      const schema = await b().schema();
      await (await b().open(schema, { clock: () => T0 })).close();
      await (await b().open(schema, { clock: () => LATER })).close();
      expect(await applied(schema)).toEqual(MIGRATION_IDS.map((id) => [id, '2026-01-01T12:00:00+00:00']));
    });

    it('a forward database gets the rest, automatically, its rows kept', async () => {
      const schema = await b().schema();
      await b().run(schema, [
        ...ddl('0001_baseline', '0002_receipt_chain'),
        ...versionRows('0001_baseline', '0002_receipt_chain'),
        "INSERT INTO effects VALUES ('refund:old', 'committed', 'act_old', 1, NULL, '{}', NULL, '2025-05-01T10:00:00+00:00', '2025-05-01T10:00:01+00:00')",
      ]);
      const store = await b().open(schema, { clock: () => T0 });
      expect(await applied(schema)).toEqual([
        ['0001_baseline', '2025-06-01T00:00:00+00:00'],
        ['0002_receipt_chain', '2025-06-01T00:00:00+00:00'],
        ...MIGRATION_IDS.slice(2).map((id) => [id, '2026-01-01T12:00:00+00:00']),
      ]);
      expect(await store.getEffect('refund:old')).toMatchObject({ state: 'committed', resolvedBy: null });
      await store.close();
    });

    it('test_T152_an_unversioned_v05_store_is_adopted_by_running_0001_and_the_rest', async () => {
      const schema = await b().schema();
      // v0.1-shaped: only effects (no continuations, no delegations): 0001 is executed, not just recorded.
      await b().run(schema, [
        'CREATE TABLE effects(effect_key TEXT PRIMARY KEY, state TEXT NOT NULL, action_id TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 1, lease_expires_at TEXT, result_json TEXT, error TEXT, created_at TEXT, updated_at TEXT)',
        "INSERT INTO effects VALUES ('refund:v01', 'ambiguous', 'act_v01', 1, NULL, NULL, 'TimeoutError', '2025-01-01T00:00:00+00:00', '2025-01-01T00:00:01+00:00')",
      ]);
      const store = await b().open(schema, { clock: () => T0 });
      expect(await tables(schema)).toEqual(Object.keys(COLUMNS));
      expect((await applied(schema)).map(([id]) => id)).toEqual([...MIGRATION_IDS]);
      expect(await store.getEffect('refund:v01')).toMatchObject({ state: 'ambiguous', error: 'TimeoutError' });
      await store.close();
    });

    it('a foreign database is refused untouched: nothing created', async () => {
      const schema = await b().schema();
      await b().run(schema, ['CREATE TABLE customers(id INT PRIMARY KEY)']);
      const err = await refusal(b().open(schema));
      expect(err.message).toMatch(/not a ctrlrun store/);
      expect(await tables(schema)).toEqual(['customers']);
    });

    it('a foreign database with an empty schema_version is refused untouched: nothing created or migrated', async () => {
      for (const foreign of [['CREATE TABLE customers(id INT PRIMARY KEY)'], ddl('0001_baseline')]) {
        const schema = await b().schema();
        await b().run(schema, [versionRows()[0]!, ...foreign]);
        const before = await tables(schema);
        for (const readOnly of [false, true]) {
          const err = await refusal(b().open(schema, { readOnly }));
          expect(err.message).toMatch(/not a ctrlrun store: its schema_version is empty, yet it has other tables/);
          expect(await tables(schema)).toEqual(before);
          expect(await applied(schema)).toEqual([]);
        }
      }
    });

    it('test_T151_a_gapped_database_is_refused_naming_the_missing_migration', async () => {
      const schema = await b().schema();
      await b().run(schema, [...ddl('0001_baseline', '0002_receipt_chain', '0003_resolved_by'), ...versionRows('0001_baseline', '0003_resolved_by')]);
      const err = await refusal(b().open(schema));
      expect(err.applied).toEqual(['0001_baseline', '0003_resolved_by']);
      expect(err.message).toContain('0002_receipt_chain');
      expect((await applied(schema)).map(([id]) => id)).toEqual(['0001_baseline', '0003_resolved_by']);
    });

    it('test_T148_a_newer_database_is_refused_naming_the_unknown_id_and_its_version', async () => {
      const schema = await b().schema();
      await b().run(schema, [...ddl(...MIGRATION_IDS), ...versionRows(...MIGRATION_IDS, '0099_future')]);
      const err = await refusal(b().open(schema));
      expect(err.applied).toEqual([...MIGRATION_IDS, '0099_future']);
      expect(err.message).toContain('0099_future');
      expect(err.message).toContain('ctrlrun 0.9.0');
      expect(err.message).toContain('forward-only');
    });

    it('test_T151_a_divergent_database_is_refused_naming_both_and_applies_nothing', async () => {
      const schema = await b().schema();
      await b().run(schema, [...ddl('0001_baseline'), ...versionRows('0001_baseline', '0099_future')]);
      const err = await refusal(b().open(schema));
      expect(err.message).toContain('0099_future');
      expect(err.message).toContain('0002_receipt_chain');
      const cols = await b().rows<{ c: string }>(
        "SELECT column_name AS c FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'receipts'",
        [schema],
      );
      expect(cols.map((c) => c.c)).not.toContain('seq');
    });

    it('test_T149_a_half_applied_migration_rolls_back_and_the_database_is_unchanged', async () => {
      const schema = await b().schema();
      // A receipt_chain of someone else's shape: 0002's INSERT of the head row fails.
      await b().run(schema, [
        ...ddl('0001_baseline'),
        ...versionRows('0001_baseline'),
        'CREATE TABLE receipt_chain(id INTEGER PRIMARY KEY, note TEXT NOT NULL)',
      ]);
      const err = await refusal(b().open(schema, { clock: () => T0 }));
      expect(err.message).toMatch(/migration 0002_receipt_chain could not be applied/);
      expect(err.message).toMatch(/unchanged/);
      expect((await applied(schema)).map(([id]) => id)).toEqual(['0001_baseline']);
      const cols = await b().rows<{ c: string }>(
        "SELECT column_name AS c FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'receipts'",
        [schema],
      );
      expect(
        cols.map((c) => c.c),
        'the ALTERs of 0002 were rolled back with it',
      ).not.toContain('seq');
    });

    it('readers never migrate: an empty or a forward database is refused and nothing is created', async () => {
      const empty = await b().schema();
      const e1 = await refusal(b().open(empty, { readOnly: true }));
      expect(e1.message).toMatch(/a reader never migrates/);
      expect(await tables(empty)).toEqual([]);

      const forward = await b().schema();
      await b().run(forward, [
        ...ddl('0001_baseline', '0002_receipt_chain', '0003_resolved_by'),
        ...versionRows('0001_baseline', '0002_receipt_chain', '0003_resolved_by'),
      ]);
      const e2 = await refusal(b().open(forward, { readOnly: true }));
      expect(e2.message).toContain('0004_policy_provenance');
      expect((await applied(forward)).map(([id]) => id)).toEqual(['0001_baseline', '0002_receipt_chain', '0003_resolved_by']);

      const current = await b().schema();
      await (await b().open(current, { clock: () => T0 })).close();
      const reader = await b().open(current, { readOnly: true });
      expect(await reader.listEffects()).toEqual([]);
      await expect(reader.reserveEffect('refund:r', 'act_r', 60_000)).rejects.toBeInstanceOf(InvalidArgument);
      await reader.close();
    });

    it('concurrent opens of an empty schema apply each migration exactly once (advisory lock)', async () => {
      const schema = await b().schema();
      const stores = await Promise.all(Array.from({ length: 8 }, (_, i) => b().open(schema, { clock: () => new Date(T0.getTime() + i * 1000) })));
      const rows = await applied(schema);
      expect(rows.map(([id]) => id)).toEqual([...MIGRATION_IDS]);
      expect(new Set(rows.map(([, at]) => at)).size, 'one opener applied them all, in one transaction').toBe(1);
      await Promise.all(stores.map((s) => s.close()));
    });

    it('the migration lock is the transaction-scoped advisory lock of the spec', () => {
      expect(postgresDialect().sql.migrationLock).toBe('SELECT pg_advisory_xact_lock(74029437441358)');
      expect(0x43545252554e).toBe(74029437441358);
    });

    it('test_T414_a_store_the_original_migrated_to_0008_opens_and_keeps_its_invariants: one answer never grants 2-of-N, a fingerprinted request is not used, a fail releases the charges', async () => {
      // Ours at 0004, then 0005–0008 applied and recorded as the original 0.12.2 applies them (spec 05 §1.3).
      const schema = await b().schema();
      await b().run(schema, [
        ...ddl('0001_baseline', '0002_receipt_chain', '0003_resolved_by', '0004_policy_provenance'),
        ...versionRows('0001_baseline', '0002_receipt_chain', '0003_resolved_by', '0004_policy_provenance'),
      ]);
      await b().run(schema, [
        ...ddl('0005_precondition_fingerprint', '0006_verified_approver', '0007_budget_ledger', '0008_anchor_checkpoint_hold'),
        ...['0005_precondition_fingerprint', '0006_verified_approver', '0007_budget_ledger', '0008_anchor_checkpoint_hold'].map(
          (id) => `INSERT INTO schema_version VALUES ('${id}', '2026-12-04T19:07:15.837933+00:00', '0.12.2')`,
        ),
        "INSERT INTO budget_ledger(grant_id, metric, amount, effect_key, attempt, consumed_at) VALUES ('g-refunds', 'amount', 700, 'refund:p_fail', 1, '2026-12-01T10:00:00.123456+00:00')",
        "INSERT INTO budget_ledger(grant_id, metric, amount, effect_key, attempt, consumed_at) VALUES ('g-refunds', 'amount', 900, 'refund:p_ok', 1, '2026-12-01T10:00:00+00:00')",
      ]);
      const at = new Date('2026-12-04T09:30:00.250Z');
      const store = await b().open(schema, { clock: () => at });
      try {
        expect((await store.appliedMigrations()).map((m) => [m.migrationId, m.ctrlrunVersion])).toEqual(
          MIGRATION_IDS.map((id, i) => [id, i < 4 ? 'ctrlrun 0.6.0' : '0.12.2']),
        );
        const control = new Control({ policy: REFUND_POLICY, store, logger: { warn: () => {} }, clock: () => at });
        const refund = (p: string, amount: number) =>
          createAction({ name: 'stripe.refund', arguments: { payment_id: p, amount }, principal: { agent: 'a' }, environment: control.environment });
        // The write of every request carries the threshold, 1.
        const asked = (await control.execute(refund('p_two', 90_000), () => 1).catch((e: unknown) => e)) as ApprovalRequired;
        expect(asked).toBeInstanceOf(ApprovalRequired);
        expect(await b().rows(`SELECT approvals_required FROM "${schema}".approvals WHERE approval_id = $1`, [asked.requestId])).toEqual([
          { approvals_required: 1 },
        ]);
        await b().run(schema, [`UPDATE approvals SET approvals_required = 2 WHERE approval_id = '${asked.requestId}'`]);
        await expect(control.grantApproval(asked.requestId, { approver: 'bob' })).rejects.toMatchObject({ name: 'ApprovalMismatch', reason: 'pending' });
        expect((await store.getApproval(asked.requestId))?.status).toBe('pending');
        // A fingerprinted request, granted, is not used.
        const pre = (await control.execute(refund('p_pre', 90_000), () => 1).catch((e: unknown) => e)) as ApprovalRequired;
        await b().run(schema, [`UPDATE approvals SET precondition_fingerprint = 'sha256:${'ab'.repeat(32)}' WHERE approval_id = '${pre.requestId}'`]);
        await control.grantApproval(pre.requestId, { approver: 'bob' });
        await expect(control.execute(refund('p_pre', 90_000), () => 1, { approvalId: pre.requestId })).rejects.toMatchObject({
          reason: 'precondition_missing',
        });
        expect((await store.getApproval(pre.requestId))?.status).toBe('granted');
        // A fail releases its charges, in its transaction; a commit holds them.
        await expect(
          control.execute(refund('p_fail', 700), () => {
            throw new NotExecuted('card declined');
          }),
        ).rejects.toThrow(/card declined/);
        await control.execute(refund('p_ok', 900), () => 'ok');
        const ledger = await b().rows<{ effect_key: string; released: string | null }>(
          `SELECT effect_key, to_char(released_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS released FROM "${schema}".budget_ledger ORDER BY id`,
        );
        expect(ledger).toEqual([
          { effect_key: 'refund:p_fail', released: '2026-12-04T09:30:00.250000' },
          { effect_key: 'refund:p_ok', released: null },
        ]);
      } finally {
        await store.close();
      }
    });

    it('a missing schema is refused, never created', async () => {
      const err = await b()
        .open('no_such_schema')
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(SchemaMismatch);
      expect((err as Error).message).toMatch(/schema "no_such_schema" does not exist: the store never creates its schema/);
      expect(await b().rows("SELECT nspname FROM pg_catalog.pg_namespace WHERE nspname = 'no_such_schema'")).toEqual([]);
    });
  });
}

// ------------------------------------------------------------------ PGlite

let pglite: PGlite;
let pgliteSchemas = 0;
beforeAll(async () => {
  pglite = new PGlite();
  await pglite.waitReady;
}, 120_000); // PGlite compiles its WebAssembly and runs initdb: seconds, more on a busy machine
afterAll(() => pglite?.close());

schemaCases('Postgres schema on PGlite', () => ({
  concurrent: false,
  async schema() {
    const s = `m_${++pgliteSchemas}`;
    await pglite.exec(`CREATE SCHEMA ${s}`);
    return s;
  },
  async rows<Row>(text: string, values: unknown[] = []) {
    return (await pglite.query<Row>(text, values)).rows;
  },
  async run(schema: string, statements: readonly string[]) {
    await pglite.exec(`BEGIN; SET LOCAL search_path TO "${schema}"; ${statements.join(';\n')}; COMMIT;`);
  },
  open: (schema, options = {}) => createPgliteStore(pglite, { schema, ...options }),
}));

describe('PGlite store', () => {
  it('opens by directory, keeps its data across a reopen, and owns the instance it built', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-pglite-'));
    try {
      // Seeded from this file's instance (PGlite's initdb into a fresh directory takes seconds).
      const seed = new PGlite(join(dir, 'data'), { loadDataDir: await pglite.dumpDataDir('none') });
      await seed.waitReady;
      await seed.exec('DROP SCHEMA public CASCADE; CREATE SCHEMA public');
      await seed.close();
      const a = await openPgliteStore(join(dir, 'data'), { clock: () => T0 });
      await a.reserveEffect('refund:kept', 'act_k', 60_000);
      await a.close();
      const again = await openPgliteStore(join(dir, 'data'), { clock: () => T0 });
      expect(await again.getEffect('refund:kept')).toMatchObject({ state: 'reserved', actionId: 'act_k' });
      await again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a caller-owned instance stays open after the store closes', async () => {
    await pglite.exec('CREATE SCHEMA owned_check');
    const store = await createPgliteStore(pglite, { schema: 'owned_check' });
    await store.close();
    expect((await pglite.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});

// ------------------------------------------------------------------ a real server

describePg('Postgres schema on a server', (server) => {
  let db: FreshDatabase;
  let pool: pg.Pool;
  let schemas = 0;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'migrations');
    pool = new pg.Pool({ connectionString: db.url, max: 16 });
    pool.on('error', () => undefined);
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  schemaCases('pg Pool', () => ({
    concurrent: true,
    async schema() {
      const s = `m_${++schemas}`;
      await db.createSchema(s);
      return s;
    },
    rows: (text, values) => db.sql(text, values),
    async run(schema, statements) {
      await pool.query(`BEGIN; SET LOCAL search_path TO "${schema}"; ${statements.join(';\n')}; COMMIT;`);
    },
    open: (schema, options = {}) => createPgStore(pool, { schema, ...options }),
  }));

  it('test_T154c_a_database_that_is_not_utf8_is_refused_at_connect', async () => {
    const latin = await freshDatabase(server.url, 'sql_ascii', { encoding: 'SQL_ASCII' });
    try {
      const err = await openPgStore(latin.url).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StoreError);
      expect((err as Error).message).toMatch(/encoding is SQL_ASCII, not UTF8/);
      expect(await latin.sql("SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = 'public'")).toEqual([]);
    } finally {
      await latin.drop();
    }
  });

  it('test_T154f_migrating_needs_create_on_the_schema_and_the_refusal_names_the_grant', async () => {
    const schema = `m_${++schemas}`;
    await db.createSchema(schema);
    const role = `ctrlrun_role_${schemas}`;
    await db.sql(`CREATE ROLE ${role} LOGIN`);
    await db.sql(`GRANT USAGE ON SCHEMA "${schema}" TO ${role}`);
    const asRole = new URL(db.url);
    asRole.username = role;
    const url = asRole.toString();
    const err = await openPgStore(url, { schema }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SchemaMismatch);
    expect((err as Error).message).toContain(`GRANT CREATE ON SCHEMA "${schema}" TO "${role}"`);
    expect(await db.sql('SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = $1', [schema])).toEqual([]);
    // Granted, the same role migrates; a reader needs no CREATE at all.
    await db.sql(`GRANT CREATE ON SCHEMA "${schema}" TO ${role}`);
    await (await openPgStore(url, { schema })).close();
    await db.sql(`REVOKE CREATE ON SCHEMA "${schema}" FROM ${role}`);
    const reader = await openPgStore(url, { schema, readOnly: true });
    expect(await reader.listEffects()).toEqual([]);
    await reader.close();
  });

  it('a URL whose server refuses the connection is a StoreError naming the address', async () => {
    const refused = new URL(db.url);
    refused.port = '1';
    refused.password = 'secret';
    const err = await openPgStore(refused.toString()).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toContain('127.0.0.1:1');
    expect((err as Error).message).not.toContain('secret');
  });
});
