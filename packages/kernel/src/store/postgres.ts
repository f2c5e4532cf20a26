/**
 * The Postgres dialect: every statement {@link SqlStateStore} sends to PostgreSQL (the `pg`
 * driver, PGlite), and the migration DDL of spec 03 §1.2 as written there — `COLLATE "C"` on every
 * identity and hash column (byte comparison, so no locale can merge two keys), `BIGSERIAL` event
 * ids, `IF NOT EXISTS` everywhere.
 *
 * Atomicity here is not a lock but the unique key: a reservation is `INSERT … ON CONFLICT
 * (effect_key) DO NOTHING` with its row count checked, and every later write is a
 * compare-and-set on the row as read. Data statements name their tables schema-qualified, so a
 * read needs no session state; DDL and the catalogue run inside a transaction whose driver has set
 * `SET LOCAL search_path` to the store's schema (nothing session-scoped, so it works behind a
 * transaction-mode pooler).
 *
 * @module
 */
import { GENESIS_HASH } from '../hash.js';
import { APPROVAL_COLUMNS, CONTINUATION_COLUMNS, DELEGATION_COLUMNS, EFFECT_COLUMNS, RECEIPT_COLUMNS } from './columns.js';
import { postgresBudget } from './budget-sql.js';
import type { SqlDialect } from './dialect.js';
import { postgresRetention } from './retention-sql.js';

/**
 * The migration lock key: 0x43545252554E, "CTRRUN". Transaction-scoped
 * (`pg_advisory_xact_lock`), so it can never outlive the migrating transaction — a session lock
 * would be released exactly when the connection dies.
 */
export const MIGRATION_LOCK_KEY = 74029437441358;

/** The oldest server with `ON CONFLICT` and `ADD COLUMN IF NOT EXISTS`. */
const MIN_SERVER_VERSION_NUM = 90600;

/**
 * SQLSTATEs that mean a statement — even `COMMIT` — definitely did not commit: serialization
 * failure and deadlock. A closed set: `57014` (query cancelled) is not in it, because a
 * cancellation racing a COMMIT may still have committed.
 */
export const FAILED_WRITE_SQLSTATES: readonly string[] = Object.freeze(['40001', '40P01']);

/** Walks an error and its `cause` chain. */
function* causes(err: unknown): Generator<unknown> {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    yield e;
    e = (e as { cause?: unknown }).cause;
  }
}

/** The SQLSTATE of a driver error (pg and PGlite both set `code`), or `null`. */
export function sqlState(err: unknown): string | null {
  for (const e of causes(err)) {
    const code = (e as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return null;
}

/**
 * Table A for an error raised by `COMMIT`: `'failed'` when the server says it rolled back
 * (SQLSTATE 40001/40P01), `'ambiguous'` for anything else — a terminated connection, a reset, a
 * cancellation, a client timeout: the COMMIT may have landed.
 */
export function commitErrorOutcome(err: unknown): 'failed' | 'ambiguous' {
  const state = sqlState(err);
  return state !== null && FAILED_WRITE_SQLSTATES.includes(state) ? 'failed' : 'ambiguous';
}

/**
 * For a write statement that stands alone (its own implicit transaction): `'failed'` when the
 * server reported (an error with a SQLSTATE and a severity) an error that rolls the statement back — any SQLSTATE but a lost or broken
 * connection's (class 08), an operator's or a crash's (class 57 except 57014, a cancelled
 * statement), a system or internal error (58, XX) or a resource one (53), any of which may come
 * after the commit — else `'ambiguous'`: a re-read decides.
 */
export function standaloneErrorOutcome(err: unknown): 'failed' | 'ambiguous' {
  // The server's own report only (pg's DatabaseError carries a severity): a socket error's code
  // can look like a SQLSTATE (`EPIPE`), and one may come after the commit.
  let state: string | null = null;
  for (const e of causes(err)) {
    const { code, severity } = (e ?? {}) as { code?: unknown; severity?: unknown };
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && typeof severity === 'string') {
      state = code;
      break;
    }
  }
  if (state === null) return 'ambiguous';
  if (state === '57014') return 'failed';
  return ['08', '57', '58', 'XX', '53'].includes(state.slice(0, 2)) ? 'ambiguous' : 'failed';
}

/** `name` as a Postgres identifier, double-quoted (so any schema name is safe and case-kept). */
export function quoteIdentifier(name: string): string {
  if (typeof name !== 'string' || name === '' || name.includes('\u0000')) throw new TypeError('schema must be a non-empty string without NUL characters');
  return `"${name.replaceAll('"', '""')}"`;
}

/** Spec 03 §1.2, statement by statement. Unqualified: run under `SET LOCAL search_path`. */
const MIGRATIONS: SqlDialect['migrations'] = Object.freeze({
  '0001_baseline': Object.freeze([
    `CREATE TABLE IF NOT EXISTS effects(effect_key TEXT COLLATE "C" PRIMARY KEY, state TEXT NOT NULL,
  action_id TEXT COLLATE "C" NOT NULL, attempt INTEGER NOT NULL DEFAULT 1,
  lease_expires_at TEXT, result_json TEXT, error TEXT, created_at TEXT, updated_at TEXT)`,
    `CREATE TABLE IF NOT EXISTS continuations(effect_key TEXT COLLATE "C" PRIMARY KEY,
  action_id TEXT COLLATE "C" NOT NULL, action_json TEXT NOT NULL,
  continuation TEXT COLLATE "C" NOT NULL, rounds INTEGER NOT NULL DEFAULT 0, updated_at TEXT)`,
    `CREATE UNIQUE INDEX IF NOT EXISTS continuations_by_value ON continuations(continuation)
  WHERE continuation <> ''`,
    `CREATE TABLE IF NOT EXISTS approvals(approval_id TEXT COLLATE "C" PRIMARY KEY,
  action_hash TEXT COLLATE "C" NOT NULL, status TEXT NOT NULL, action_json TEXT NOT NULL,
  approver TEXT, created_at TEXT, granted_at TEXT, expires_at TEXT, consumed_at TEXT)`,
    `CREATE TABLE IF NOT EXISTS receipts(receipt_id TEXT COLLATE "C" PRIMARY KEY,
  action_id TEXT COLLATE "C", effect_key TEXT COLLATE "C", result TEXT, json TEXT, ts TEXT)`,
    `CREATE TABLE IF NOT EXISTS events(event_id BIGSERIAL PRIMARY KEY, ts TEXT, type TEXT,
  action_id TEXT COLLATE "C", effect_key TEXT COLLATE "C", approval_id TEXT COLLATE "C",
  data_json TEXT)`,
    `CREATE TABLE IF NOT EXISTS delegations(delegation_id TEXT COLLATE "C" PRIMARY KEY,
  parent_id TEXT COLLATE "C" NOT NULL, depth INTEGER NOT NULL, grant_json TEXT NOT NULL,
  created_by_agent TEXT NOT NULL, created_by_user TEXT, created_via TEXT NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT, revoked_by TEXT)`,
    `CREATE INDEX IF NOT EXISTS delegations_by_parent ON delegations(parent_id)`,
  ]),
  '0002_receipt_chain': Object.freeze([
    `ALTER TABLE receipts ADD COLUMN IF NOT EXISTS seq BIGINT`,
    `ALTER TABLE receipts ADD COLUMN IF NOT EXISTS prev_hash TEXT COLLATE "C"`,
    `ALTER TABLE receipts ADD COLUMN IF NOT EXISTS hash TEXT COLLATE "C"`,
    `CREATE UNIQUE INDEX IF NOT EXISTS receipts_by_seq ON receipts(seq) WHERE seq IS NOT NULL`,
    `CREATE TABLE IF NOT EXISTS receipt_chain(id INTEGER PRIMARY KEY CHECK (id = 1),
  seq BIGINT NOT NULL, hash TEXT COLLATE "C" NOT NULL)`,
    `INSERT INTO receipt_chain(id, seq, hash) VALUES(1, 0, '${GENESIS_HASH}') ON CONFLICT (id) DO NOTHING`,
  ]),
  '0003_resolved_by': Object.freeze([`ALTER TABLE effects ADD COLUMN IF NOT EXISTS resolved_by TEXT COLLATE "C"`]),
  '0004_policy_provenance': Object.freeze([`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS policy_hash_at_approval TEXT COLLATE "C"`]),
  // 0005–0008: the original's (0.7–0.11), additive; its time columns here are TIMESTAMPTZ (spec 05 §1.3).
  '0005_precondition_fingerprint': Object.freeze([`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS precondition_fingerprint TEXT COLLATE "C"`]),
  '0006_verified_approver': Object.freeze([
    `ALTER TABLE approvals ADD COLUMN IF NOT EXISTS approvers TEXT COLLATE "C"`,
    `ALTER TABLE approvals ADD COLUMN IF NOT EXISTS required_roles TEXT COLLATE "C"`,
    `ALTER TABLE approvals ADD COLUMN IF NOT EXISTS approvals_required INTEGER`,
  ]),
  '0007_budget_ledger': Object.freeze([
    `CREATE TABLE IF NOT EXISTS budget_ledger(id BIGSERIAL PRIMARY KEY, grant_id TEXT NOT NULL COLLATE "C",
  metric TEXT NOT NULL COLLATE "C", amount BIGINT NOT NULL, effect_key TEXT NOT NULL COLLATE "C",
  attempt INTEGER NOT NULL, consumed_at TIMESTAMPTZ NOT NULL, released_at TIMESTAMPTZ,
  UNIQUE (effect_key, attempt, grant_id, metric))`,
    `CREATE INDEX IF NOT EXISTS ix_budget_ledger_window ON budget_ledger(grant_id, metric, consumed_at)`,
    `CREATE TABLE IF NOT EXISTS budget_anchor(grant_id TEXT PRIMARY KEY COLLATE "C")`,
  ]),
  '0008_anchor_checkpoint_hold': Object.freeze([
    `CREATE TABLE IF NOT EXISTS anchors(token TEXT PRIMARY KEY COLLATE "C", seq BIGINT NOT NULL,
  hash TEXT NOT NULL COLLATE "C", kind TEXT NOT NULL COLLATE "C", at TIMESTAMPTZ NOT NULL)`,
    `CREATE INDEX IF NOT EXISTS ix_anchors_seq ON anchors(kind, seq)`,
    `CREATE TABLE IF NOT EXISTS prune_checkpoint(id INTEGER PRIMARY KEY CHECK (id = 1), seq BIGINT NOT NULL,
  hash TEXT NOT NULL COLLATE "C", schema TEXT NOT NULL COLLATE "C", at TIMESTAMPTZ NOT NULL)`,
    `CREATE TABLE IF NOT EXISTS holds(hold_id TEXT PRIMARY KEY COLLATE "C", from_seq BIGINT NOT NULL,
  to_seq BIGINT, reason TEXT NOT NULL COLLATE "C", placed_by TEXT NOT NULL COLLATE "C",
  placed_at TIMESTAMPTZ NOT NULL, released_at TIMESTAMPTZ, released_by TEXT COLLATE "C")`,
    `CREATE INDEX IF NOT EXISTS ix_holds_range ON holds(from_seq, to_seq)`,
  ]),
});

/**
 * The CTE `ev` inserting `n` events (parameters from `$first`, six per row, row after row) in row
 * order, only if the CTE `gate` returned a row.
 */
function eventsAfter(events: string, gate: string, first: number, n: number): string {
  const values = Array.from({ length: n }, (_, r) => `(${r + 1}, ${Array.from({ length: 6 }, (_, c) => `$${first + r * 6 + c}::text`).join(', ')})`).join(', ');
  return `v(ord, ts, type, action_id, effect_key, approval_id, data_json) AS (VALUES ${values}), ev AS (INSERT INTO ${events}(ts, type, action_id, effect_key, approval_id, data_json) SELECT ts, type, action_id, effect_key, approval_id, data_json FROM v WHERE EXISTS (SELECT 1 FROM ${gate}) ORDER BY ord RETURNING event_id)`;
}

/** `sha256()` is in the server from PostgreSQL 11. */
const SEALS_FROM_VERSION_NUM = 110000;

/** The encoding row's value a store accepts (T154c). */
const REQUIRED_ENCODING = 'UTF8';

function build(schema: string): SqlDialect {
  const s = quoteIdentifier(schema);
  const t = (table: string): string => `${s}.${table}`;
  return Object.freeze({
    name: 'postgres',
    migrations: MIGRATIONS,
    migrateInOneTransaction: true,
    sql: Object.freeze({
      // One row at connect: the server version and the database's encoding (must be UTF8).
      serverVersion:
        "SELECT current_setting('server_version_num') AS version, pg_encoding_to_char(encoding) AS encoding FROM pg_catalog.pg_database WHERE datname = current_database()",
      // The catalogue over current_schemas(false): the driver's SET LOCAL search_path makes that the store's schema.
      schemaVersionExists: "SELECT tablename AS name FROM pg_catalog.pg_tables WHERE schemaname = ANY(current_schemas(false)) AND tablename = 'schema_version'",
      listTables: 'SELECT tablename AS name FROM pg_catalog.pg_tables WHERE schemaname = ANY(current_schemas(false)) ORDER BY tablename',
      tableColumns:
        'SELECT column_name AS name FROM information_schema.columns WHERE table_schema = ANY(current_schemas(false)) AND table_name = $1 ORDER BY ordinal_position',
      createSchemaVersion:
        'CREATE TABLE IF NOT EXISTS schema_version(\n  migration_id TEXT PRIMARY KEY, applied_at TEXT NOT NULL, ctrlrun_version TEXT NOT NULL)',
      readSchemaVersion: `SELECT migration_id, applied_at, ctrlrun_version FROM ${t('schema_version')} ORDER BY migration_id`,
      insertSchemaVersion: `INSERT INTO ${t('schema_version')}(migration_id, applied_at, ctrlrun_version) VALUES ($1, $2, $3)`,
      migrationLock: `SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`,
      migrationPrivilege: "SELECT current_schema() AS schema, current_user AS role, has_schema_privilege(current_schema(), 'CREATE') AS allowed",

      selectEffect: `SELECT ${EFFECT_COLUMNS} FROM ${t('effects')} WHERE effect_key = $1`,
      // The unique key decides: a collision affects 0 rows (no error, so the transaction lives on).
      insertEffect: `INSERT INTO ${t('effects')}(effect_key, state, action_id, attempt, lease_expires_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (effect_key) DO NOTHING`,
      renewEffect: `UPDATE ${t('effects')} SET state=$1, action_id=$2, attempt=$3, lease_expires_at=$4, result_json=NULL, error=NULL, resolved_by=NULL, updated_at=$5 WHERE effect_key=$6 AND state='failed' AND attempt=$7`,
      updateEffect: `UPDATE ${t('effects')} SET state = $1, action_id = $2, attempt = $3, lease_expires_at = $4, result_json = $5, error = $6, updated_at = $7, resolved_by = $8 WHERE effect_key = $9 AND state = $10 AND action_id = $11 AND attempt = $12`,
      updateEffectExact: `UPDATE ${t('effects')} SET state = $1, action_id = $2, attempt = $3, lease_expires_at = $4, result_json = $5, error = $6, updated_at = $7, resolved_by = $8 WHERE effect_key = $9 AND state = $10 AND action_id = $11 AND attempt = $12 AND lease_expires_at IS NOT DISTINCT FROM $13::text AND created_at IS NOT DISTINCT FROM $14::text AND updated_at IS NOT DISTINCT FROM $15::text`,
      listEffects: `SELECT ${EFFECT_COLUMNS} FROM ${t('effects')} ORDER BY created_at, effect_key`,
      listEffectsInState: `SELECT ${EFFECT_COLUMNS} FROM ${t('effects')} WHERE state = $1 ORDER BY created_at, effect_key`,

      insertApproval: `INSERT INTO ${t('approvals')}(approval_id, action_hash, status, action_json, created_at, expires_at, policy_hash_at_approval, approvals_required, precondition_fingerprint, required_roles) VALUES ($1, $2, 'pending', $3, $4, $5, $6, $7, $8, $9)`,
      selectApproval: `SELECT ${APPROVAL_COLUMNS} FROM ${t('approvals')} WHERE approval_id = $1`,
      answerApproval: `UPDATE ${t('approvals')} SET status = $1, approver = $2, granted_at = $3 WHERE approval_id = $4 AND status = 'pending'`,
      countApproval: `UPDATE ${t('approvals')} SET status = $1, approver = $2, granted_at = $3, approvers = $4 WHERE approval_id = $5 AND status = 'pending' AND approvers IS NOT DISTINCT FROM $6::text`,
      expireApproval: `UPDATE ${t('approvals')} SET status = 'expired' WHERE approval_id = $1 AND status = $2`,
      consumeApproval: `UPDATE ${t('approvals')} SET status = 'consumed', consumed_at = $1 WHERE approval_id = $2 AND status = 'granted'`,
      approvalsFor: `SELECT ${APPROVAL_COLUMNS} FROM ${t('approvals')} WHERE action_hash = $1 ORDER BY created_at, approval_id`,
      newestApprovalsFor: `SELECT ${APPROVAL_COLUMNS} FROM ${t('approvals')} WHERE action_hash = $1 AND status = $2 ORDER BY created_at DESC, approval_id DESC`,
      listApprovals: `SELECT ${APPROVAL_COLUMNS} FROM ${t('approvals')} ORDER BY created_at, approval_id`,
      listApprovalsInStatus: `SELECT ${APPROVAL_COLUMNS} FROM ${t('approvals')} WHERE status = $1 ORDER BY created_at, approval_id`,

      insertEvent: `INSERT INTO ${t('events')}(ts, type, action_id, effect_key, approval_id, data_json) VALUES ($1, $2, $3, $4, $5, $6) RETURNING event_id`,
      insertEvents: (n: number): string =>
        `INSERT INTO ${t('events')}(ts, type, action_id, effect_key, approval_id, data_json) VALUES ${Array.from({ length: n }, (_, r) => `(${Array.from({ length: 6 }, (_, c) => `$${r * 6 + c + 1}`).join(', ')})`).join(', ')} RETURNING event_id`,
      insertEffectWithEvents: (n: number): string => {
        const r = `r AS (INSERT INTO ${t('effects')}(effect_key, state, action_id, attempt, lease_expires_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (effect_key) DO NOTHING RETURNING 1)`;
        const rows = "SELECT 'effect' AS k, NULL::bigint AS n FROM r";
        if (n === 0) return `WITH ${r} ${rows}`;
        return `WITH ${r}, ${eventsAfter(t('events'), 'r', 8, n)} ${rows} UNION ALL SELECT 'event', event_id FROM ev`;
      },
      updateEffectWithTrail: (n: number, withReceipt: boolean, exact = false): string => {
        // `exact`: three more parameters after every other one, the prior's remaining written columns.
        const x = 12 + 6 * n + (withReceipt ? 13 : 0);
        const also = exact
          ? ` AND lease_expires_at IS NOT DISTINCT FROM $${x + 1}::text AND created_at IS NOT DISTINCT FROM $${x + 2}::text AND updated_at IS NOT DISTINCT FROM $${x + 3}::text`
          : '';
        const u = `u AS (UPDATE ${t('effects')} SET state = $1, action_id = $2, attempt = $3, lease_expires_at = $4, result_json = $5, error = $6, updated_at = $7, resolved_by = $8 WHERE effect_key = $9 AND state = $10 AND action_id = $11 AND attempt = $12${also} RETURNING 1)`;
        const ctes = [u];
        const rows = ["SELECT 'effect' AS k, NULL::bigint AS n, NULL::text AS a, NULL::text AS b, NULL::text AS j FROM u"];
        if (n > 0) {
          ctes.push(eventsAfter(t('events'), 'u', 13, n));
          rows.push("SELECT 'event', event_id, NULL, NULL, NULL FROM ev");
        }
        if (withReceipt) {
          const $ = (i: number): string => `$${12 + 6 * n + i}`;
          const spliced = (p: number, seq: string, prev: string): string =>
            `CASE WHEN ${$(p + 3)}::int = 1 THEN ${$(p)}::text || ${seq} || ${$(p + 1)}::text || ${prev} || ${$(p + 2)}::text ELSE ${$(p)}::text || ${prev} || ${$(p + 1)}::text || ${seq} || ${$(p + 2)}::text END`;
          // The head row locked only once the change applied (effect row first, as statement by statement).
          ctes.push(
            `h AS (SELECT seq, hash FROM ${t('receipt_chain')} WHERE id = 1 AND EXISTS (SELECT 1 FROM u) FOR UPDATE)`,
            `s AS (SELECT seq + 1 AS seq, hash AS prev FROM h WHERE seq >= -9007199254740991 AND seq < 9007199254740991 AND hash ~ '^sha256:[0-9a-f]{64}$')`,
            `p AS (SELECT seq, prev, ${spliced(6, 'seq::text', 'prev')} AS json, ${spliced(10, 'seq::text', 'prev')} AS canon FROM s)`,
            `rc AS (INSERT INTO ${t('receipts')}(${RECEIPT_COLUMNS}) SELECT ${$(1)}, ${$(2)}, ${$(3)}, ${$(4)}, p.json, ${$(5)}, p.seq, p.prev, 'sha256:' || encode(sha256(convert_to(p.canon, 'UTF8')), 'hex') FROM p ON CONFLICT (receipt_id) DO NOTHING RETURNING seq, prev_hash, hash, json)`,
            `c AS (UPDATE ${t('receipt_chain')} SET seq = rc.seq, hash = rc.hash FROM rc WHERE ${t('receipt_chain')}.id = 1 RETURNING 1)`,
          );
          rows.push("SELECT 'head', NULL, NULL, NULL, NULL FROM s", "SELECT 'receipt', seq, prev_hash, hash, json FROM rc");
        }
        return `WITH ${ctes.join(', ')} ${rows.join(' UNION ALL ')}`;
      },
      appendOutcome: (n: number): string => {
        const $ = (i: number): string => `$${i}`;
        const r = 17 + 6 * n; // the receipt's nine parameters start here
        const ctes = [
          // The head first, locked: every appender queues here, and the one that finds the head it sealed on proceeds.
          `h AS (SELECT seq, hash FROM ${t('receipt_chain')} WHERE id = 1 FOR UPDATE)`,
          `ok AS (SELECT 1 FROM h WHERE seq = $1::bigint AND hash = $2::text)`,
          `u AS (UPDATE ${t('effects')} SET state = $3, action_id = $4, attempt = $5, lease_expires_at = $6, result_json = $7, error = $8, updated_at = $9, resolved_by = $10 WHERE effect_key = $11 AND state = $12 AND action_id = $13 AND attempt = $14 AND lease_expires_at IS NOT DISTINCT FROM $15::text AND created_at IS NOT DISTINCT FROM $16::text AND updated_at IS NOT DISTINCT FROM $17::text AND EXISTS (SELECT 1 FROM ok) RETURNING 1)`,
        ];
        const rows = ["SELECT 'head' AS k, seq AS n, hash AS a FROM h", "SELECT 'effect', NULL, NULL FROM u"];
        if (n > 0) {
          ctes.push(eventsAfter(t('events'), 'u', 18, n));
          rows.push("SELECT 'event', event_id, NULL FROM ev");
        }
        ctes.push(
          `rc AS (INSERT INTO ${t('receipts')}(${RECEIPT_COLUMNS}) SELECT ${$(r + 1)}, ${$(r + 2)}, ${$(r + 3)}, ${$(r + 4)}, ${$(r + 5)}, ${$(r + 6)}, ${$(r + 7)}::bigint, ${$(r + 8)}, ${$(r + 9)} WHERE EXISTS (SELECT 1 FROM u) RETURNING 1)`,
          `c AS (UPDATE ${t('receipt_chain')} SET seq = ${$(r + 7)}::bigint, hash = ${$(r + 9)}::text WHERE id = 1 AND EXISTS (SELECT 1 FROM rc) RETURNING 1)`,
        );
        rows.push("SELECT 'receipt', NULL, NULL FROM rc", "SELECT 'advanced', NULL, NULL FROM c");
        return `WITH ${ctes.join(', ')} ${rows.join(' UNION ALL ')}`;
      },
      listEvents: `SELECT event_id, ts, type, action_id, effect_key, approval_id, data_json FROM ${t('events')} ORDER BY event_id`,
      // The newest `$2` events of an action, newest first (the events a lost-reply outcome wrote, if it landed).
      newestEventsOf: `SELECT event_id, ts, type, action_id, effect_key, approval_id, data_json FROM ${t('events')} WHERE action_id = $1 ORDER BY event_id DESC LIMIT $2`,
      lastEvent: `SELECT event_id, ts, type, action_id, effect_key, approval_id, data_json FROM ${t('events')} WHERE action_id = $1 AND type = $2 ORDER BY event_id DESC LIMIT 1`,
      lastApprovalEvent: `SELECT event_id, ts, type, action_id, effect_key, approval_id, data_json FROM ${t('events')} WHERE approval_id = $1 AND type = $2 ORDER BY event_id DESC LIMIT 1`,

      // The row lock on the head serialises receipt writers; RETURNING gives the new seq and the previous hash.
      lockChainHead: `UPDATE ${t('receipt_chain')} SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash`,
      insertReceipt: `INSERT INTO ${t('receipts')}(${RECEIPT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (receipt_id) DO NOTHING`,
      selectReceipt: `SELECT ${RECEIPT_COLUMNS} FROM ${t('receipts')} WHERE receipt_id = $1`,
      chainPendingReceipt: `UPDATE ${t('receipts')} SET json = $1, seq = $2, prev_hash = $3, hash = $4 WHERE receipt_id = $5 AND seq IS NULL AND prev_hash IS NULL AND json = $6 AND hash = $7`,
      setChainHash: `UPDATE ${t('receipt_chain')} SET hash = $1 WHERE id = 1`,
      selectChainHead: `SELECT seq, hash FROM ${t('receipt_chain')} WHERE id = 1`,
      selectPruneCheckpoint: `SELECT seq, hash FROM ${t('prune_checkpoint')} WHERE id = 1`,
      listReceipts: `SELECT ${RECEIPT_COLUMNS} FROM ${t('receipts')} ORDER BY seq NULLS FIRST, ts, receipt_id`,
      receiptsAfter: `SELECT ${RECEIPT_COLUMNS} FROM ${t('receipts')} WHERE seq > $1 ORDER BY seq LIMIT $2`,
      receiptById: `SELECT ${RECEIPT_COLUMNS} FROM ${t('receipts')} WHERE receipt_id = $1`,
      receiptsInChain: `SELECT ${RECEIPT_COLUMNS} FROM ${t('receipts')} WHERE seq BETWEEN -9007199254740991 AND 9007199254740991 AND seq >= $1::bigint AND (seq > $2::bigint OR receipt_id > $3::text) ORDER BY seq, receipt_id LIMIT $4`,
      newestReceiptsInChain: `SELECT * FROM (SELECT ${RECEIPT_COLUMNS} FROM ${t('receipts')} WHERE seq BETWEEN -9007199254740991 AND 9007199254740991 ORDER BY seq DESC, receipt_id DESC LIMIT $1) AS newest ORDER BY seq, receipt_id`,
      receiptsOffChain: `SELECT ${RECEIPT_COLUMNS} FROM ${t('receipts')} WHERE (seq IS NULL OR seq NOT BETWEEN -9007199254740991 AND 9007199254740991) AND receipt_id > $1::text ORDER BY receipt_id LIMIT $2`,
      effectsPage: `SELECT ${EFFECT_COLUMNS} FROM ${t('effects')} WHERE ($1::text IS NULL OR state = $2::text) AND (COALESCE(created_at, '') COLLATE "C", effect_key) > ($3::text COLLATE "C", $4::text) ORDER BY COALESCE(created_at, '') COLLATE "C", effect_key LIMIT $5`,
      newestEffects: `SELECT * FROM (SELECT ${EFFECT_COLUMNS} FROM ${t('effects')} WHERE ($1::text IS NULL OR state = $2::text) ORDER BY COALESCE(created_at, '') COLLATE "C" DESC, effect_key DESC LIMIT $3) AS newest ORDER BY COALESCE(created_at, '') COLLATE "C", effect_key`,
      approvalsPage: `SELECT ${APPROVAL_COLUMNS} FROM ${t('approvals')} WHERE (COALESCE(created_at, ''), approval_id) > ($1::text, $2::text) ORDER BY COALESCE(created_at, ''), approval_id LIMIT $3`,
      approvalsPageInStatus: `SELECT ${APPROVAL_COLUMNS} FROM ${t('approvals')} WHERE status = $1 AND (COALESCE(created_at, ''), approval_id) > ($2::text, $3::text) ORDER BY COALESCE(created_at, ''), approval_id LIMIT $4`,
      // Stored timestamps compare as text in the "C" order (fixed format, UTC).
      countPendingFor: `SELECT COUNT(*) AS n FROM ${t('approvals')} WHERE status = 'pending' AND expires_at COLLATE "C" > $1::text
  AND (action_json::jsonb #>> '{principal,agent}') = $2::text AND (action_json::jsonb #>> '{principal,user}') IS NOT DISTINCT FROM $3::text`,

      // A plain INSERT, never an upsert: a second act under one id is a unique violation, refused.
      insertDelegation: `INSERT INTO ${t('delegations')}(${DELEGATION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      selectDelegation: `SELECT ${DELEGATION_COLUMNS} FROM ${t('delegations')} WHERE delegation_id = $1`,
      delegationsFor: `SELECT ${DELEGATION_COLUMNS} FROM ${t('delegations')} WHERE parent_id = $1 ORDER BY created_at, delegation_id`,
      listDelegations: `SELECT ${DELEGATION_COLUMNS} FROM ${t('delegations')} ORDER BY created_at, delegation_id`,
      listLiveDelegations: `SELECT ${DELEGATION_COLUMNS} FROM ${t('delegations')} WHERE revoked_at IS NULL ORDER BY created_at, delegation_id`,
      revokeDelegation: `UPDATE ${t('delegations')} SET revoked_at = $1, revoked_by = $2 WHERE delegation_id = $3 AND revoked_at IS NULL`,

      selectContinuation: `SELECT ${CONTINUATION_COLUMNS} FROM ${t('continuations')} WHERE effect_key = $1`,
      selectContinuationByValue: `SELECT ${CONTINUATION_COLUMNS} FROM ${t('continuations')} WHERE continuation = $1 AND continuation <> ''`,
      // No conflict target: a collision on the key or on the held value affects 0 rows (no error, the transaction lives on).
      insertContinuation: `INSERT INTO ${t('continuations')}(effect_key, action_id, action_json, continuation, rounds, updated_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
      updateContinuation: `UPDATE ${t('continuations')} SET action_id = $1, action_json = $2, continuation = $3, rounds = $4, updated_at = $5 WHERE effect_key = $6 AND action_id = $7 AND rounds = $8`,
      takeContinuation: `UPDATE ${t('continuations')} SET continuation = '', updated_at = $1 WHERE effect_key = $2 AND continuation = $3 AND continuation <> ''`,

      // released_at is TIMESTAMPTZ here (spec 05 §1.3): the stored text is bound as a timestamp.
      releaseCharges: `UPDATE ${t('budget_ledger')} SET released_at = $1::timestamptz WHERE effect_key = $2 AND released_at IS NULL`,
      budget: postgresBudget(t),
      retention: postgresRetention(t),

      sessionsEnded: Object.freeze({
        // Qualified by name as text: a read runs outside the transaction that sets search_path.
        exists: `SELECT 1 AS name WHERE to_regclass('${t('inbox_sessions_ended').replace(/'/g, "''")}') IS NOT NULL`,
        create: `CREATE TABLE IF NOT EXISTS ${t('inbox_sessions_ended')}(session_id TEXT PRIMARY KEY COLLATE "C", ended_at TEXT NOT NULL COLLATE "C", expires_ms BIGINT NOT NULL)`,
        insert: `INSERT INTO ${t('inbox_sessions_ended')}(session_id, ended_at, expires_ms) VALUES ($1, $2, $3) ON CONFLICT (session_id) DO NOTHING`,
        prune: `DELETE FROM ${t('inbox_sessions_ended')} WHERE expires_ms < $1`,
        select: `SELECT session_id FROM ${t('inbox_sessions_ended')} WHERE session_id = $1`,
      }),
    }),

    checkServerVersion(version: string, row?: Readonly<Record<string, unknown>>): string | null {
      const num = Number.parseInt(version, 10);
      if (!Number.isSafeInteger(num) || num < MIN_SERVER_VERSION_NUM) {
        return `PostgreSQL server_version_num ${version || '(unknown)'} is too old: ctrlrun needs 9.6 or newer (ON CONFLICT, ADD COLUMN IF NOT EXISTS)`;
      }
      const encoding = row?.['encoding'];
      if (row !== undefined && encoding !== REQUIRED_ENCODING) {
        return `the database encoding is ${String(encoding)}, not UTF8: ctrlrun stores text as UTF-8 and refuses to open it. Create the database with ENCODING 'UTF8' (TEMPLATE template0)`;
      }
      return null;
    },

    checkMigrationPrivilege(row: Readonly<Record<string, unknown>>): string | null {
      const role = String(row['role'] ?? 'the current role');
      if (row['schema'] === null || row['schema'] === undefined) {
        return `schema ${s} does not exist: the store never creates its schema. Create it first: CREATE SCHEMA ${s} AUTHORIZATION ${quoteIdentifier(role)}`;
      }
      if (row['allowed'] !== true) {
        return `role ${role} lacks the CREATE privilege on schema ${s}, which migrating needs: GRANT CREATE ON SCHEMA ${s} TO ${quoteIdentifier(role)} (or open with a role that has it)`;
      }
      return null;
    },

    isUniqueViolation(err: unknown): boolean {
      return sqlState(err) === '23505';
    },

    sealsReceipts(version: string): boolean {
      const num = Number.parseInt(version, 10);
      return Number.isSafeInteger(num) && num >= SEALS_FROM_VERSION_NUM;
    },
  } satisfies SqlDialect);
}

const BY_SCHEMA = new Map<string, SqlDialect>();

/**
 * The Postgres dialect for the tables in `schema` (default `public`): data statements are
 * schema-qualified; DDL and catalogue queries run under the driver's `SET LOCAL search_path`.
 * One frozen object per schema.
 */
export function postgresDialect(schema: string = 'public'): SqlDialect {
  quoteIdentifier(schema);
  let d = BY_SCHEMA.get(schema);
  if (!d) BY_SCHEMA.set(schema, (d = build(schema)));
  return d;
}
