/**
 * The SQLite dialect: every statement {@link SqlStateStore} sends to a SQLite engine (sql.js,
 * better-sqlite3), and the migration DDL of spec 03 §1.1, byte for byte where it names tables,
 * columns and indexes, so a database is interchangeable with the Python original's.
 *
 * SQL is written per dialect and never translated at runtime; a Postgres dialect is another
 * object of the same shape ({@link SqlDialect}) with its own text and the same parameter order.
 *
 * @module
 */
import { GENESIS_HASH } from '../hash.js';
import { APPROVAL_COLUMNS, CONTINUATION_COLUMNS, DELEGATION_COLUMNS, EFFECT_COLUMNS, RECEIPT_COLUMNS } from './columns.js';
import { sqliteBudget } from './budget-sql.js';
import type { SqlDialect } from './dialect.js';
import { sqliteRetention } from './retention-sql.js';

/** Walks an error and its `cause` chain. */
function* causes(err: unknown): Generator<unknown> {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    yield e;
    e = (e as { cause?: unknown }).cause;
  }
}

/** The oldest SQLite with `RETURNING`. */
const MIN_VERSION = [3, 35, 0] as const;

/**
 * Name prefixes of tables that belong to the engine or the host platform, never to a store:
 * SQLite's own (`sqlite_…`), and Cloudflare's in a SQLite-backed Durable Object, where the KV API
 * keeps its data in `_cf_KV` and alarms in `_cf_METADATA` (workerd reserves `_cf_` for itself;
 * Cloudflare's documentation calls the KV table `__cf_kv`), and where miniflare, under
 * `wrangler dev`, records the object's name in `__miniflare_do_name`. Such tables are not
 * listed, so they never make a database look foreign (nor hide one that is). `LIKE` compares
 * ASCII case-insensitively, as the platform's reservation does.
 */
const PLATFORM_TABLE_PREFIXES = ['sqlite_', '_cf_', '__cf_', '__miniflare_'] as const;

const notPlatformTable = PLATFORM_TABLE_PREFIXES.map((p) => `name NOT LIKE '${p.replace(/[_%\\]/g, '\\$&')}%' ESCAPE '\\'`).join(' AND ');

/** SQLite: `?` placeholders, `rowid` tie-breaks, `BEGIN IMMEDIATE` as the migration lock. */
export const sqliteDialect: SqlDialect = Object.freeze({
  name: 'sqlite',
  migrations: Object.freeze({
    '0001_baseline': Object.freeze([
      `CREATE TABLE IF NOT EXISTS effects(effect_key TEXT PRIMARY KEY, state TEXT NOT NULL,
  action_id TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 1, lease_expires_at TEXT,
  result_json TEXT, error TEXT, created_at TEXT, updated_at TEXT)`,
      `CREATE TABLE IF NOT EXISTS continuations(effect_key TEXT PRIMARY KEY, action_id TEXT NOT NULL,
  action_json TEXT NOT NULL, continuation TEXT NOT NULL, rounds INTEGER NOT NULL DEFAULT 0,
  updated_at TEXT)`,
      `CREATE UNIQUE INDEX IF NOT EXISTS continuations_by_value ON continuations(continuation)
  WHERE continuation <> ''`,
      `CREATE TABLE IF NOT EXISTS approvals(approval_id TEXT PRIMARY KEY, action_hash TEXT NOT NULL,
  status TEXT NOT NULL, action_json TEXT NOT NULL, approver TEXT, created_at TEXT,
  granted_at TEXT, expires_at TEXT, consumed_at TEXT)`,
      `CREATE TABLE IF NOT EXISTS receipts(receipt_id TEXT PRIMARY KEY, action_id TEXT,
  effect_key TEXT, result TEXT, json TEXT, ts TEXT)`,
      `CREATE TABLE IF NOT EXISTS events(event_id INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT,
  type TEXT, action_id TEXT, effect_key TEXT, approval_id TEXT, data_json TEXT)`,
      `CREATE TABLE IF NOT EXISTS delegations(delegation_id TEXT PRIMARY KEY, parent_id TEXT NOT NULL,
  depth INTEGER NOT NULL, grant_json TEXT NOT NULL, created_by_agent TEXT NOT NULL,
  created_by_user TEXT, created_via TEXT NOT NULL, created_at TEXT NOT NULL,
  revoked_at TEXT, revoked_by TEXT)`,
      `CREATE INDEX IF NOT EXISTS delegations_by_parent ON delegations(parent_id)`,
    ]),
    // No backfill: pre-chain rows keep seq/prev_hash/hash NULL.
    '0002_receipt_chain': Object.freeze([
      `ALTER TABLE receipts ADD COLUMN seq INTEGER`,
      `ALTER TABLE receipts ADD COLUMN prev_hash TEXT`,
      `ALTER TABLE receipts ADD COLUMN hash TEXT`,
      `CREATE UNIQUE INDEX IF NOT EXISTS receipts_by_seq ON receipts(seq) WHERE seq IS NOT NULL`,
      `CREATE TABLE IF NOT EXISTS receipt_chain(id INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL, hash TEXT NOT NULL)`,
      `INSERT OR IGNORE INTO receipt_chain(id, seq, hash) VALUES(1, 0, '${GENESIS_HASH}')`,
    ]),
    // Nullable, never backfilled.
    '0003_resolved_by': Object.freeze([`ALTER TABLE effects ADD COLUMN resolved_by TEXT`]),
    '0004_policy_provenance': Object.freeze([`ALTER TABLE approvals ADD COLUMN policy_hash_at_approval TEXT`]),
    // 0005–0008: the original's (0.7–0.11), additive; plain CREATE as it writes them (spec 05 §1.2).
    '0005_precondition_fingerprint': Object.freeze([`ALTER TABLE approvals ADD COLUMN precondition_fingerprint TEXT`]),
    '0006_verified_approver': Object.freeze([
      `ALTER TABLE approvals ADD COLUMN approvers TEXT`,
      `ALTER TABLE approvals ADD COLUMN required_roles TEXT`,
      `ALTER TABLE approvals ADD COLUMN approvals_required INTEGER`,
    ]),
    '0007_budget_ledger': Object.freeze([
      `CREATE TABLE budget_ledger(id INTEGER PRIMARY KEY AUTOINCREMENT, grant_id TEXT NOT NULL,
  metric TEXT NOT NULL, amount INTEGER NOT NULL, effect_key TEXT NOT NULL, attempt INTEGER NOT NULL,
  consumed_at TEXT NOT NULL, released_at TEXT, UNIQUE (effect_key, attempt, grant_id, metric))`,
      `CREATE INDEX ix_budget_ledger_window ON budget_ledger(grant_id, metric, consumed_at)`,
    ]),
    '0008_anchor_checkpoint_hold': Object.freeze([
      `CREATE TABLE anchors(token TEXT PRIMARY KEY, seq INTEGER NOT NULL, hash TEXT NOT NULL,
  kind TEXT NOT NULL, at TEXT NOT NULL)`,
      `CREATE INDEX ix_anchors_seq ON anchors(kind, seq)`,
      `CREATE TABLE prune_checkpoint(id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL,
  hash TEXT NOT NULL, schema TEXT NOT NULL, at TEXT NOT NULL)`,
      `CREATE TABLE holds(hold_id TEXT PRIMARY KEY, from_seq INTEGER NOT NULL, to_seq INTEGER,
  reason TEXT NOT NULL, placed_by TEXT NOT NULL, placed_at TEXT NOT NULL, released_at TEXT,
  released_by TEXT)`,
      `CREATE INDEX ix_holds_range ON holds(from_seq, to_seq)`,
    ]),
  }),
  sql: Object.freeze({
    serverVersion: 'SELECT sqlite_version() AS version',
    schemaVersionExists: "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
    listTables: `SELECT name FROM sqlite_master WHERE type = 'table' AND ${notPlatformTable} ORDER BY name`,
    tableColumns: 'SELECT name FROM pragma_table_info(?)',
    createSchemaVersion:
      'CREATE TABLE IF NOT EXISTS schema_version(\n  migration_id TEXT PRIMARY KEY, applied_at TEXT NOT NULL, ctrlrun_version TEXT NOT NULL)',
    readSchemaVersion: 'SELECT migration_id, applied_at, ctrlrun_version FROM schema_version ORDER BY migration_id',
    insertSchemaVersion: 'INSERT INTO schema_version(migration_id, applied_at, ctrlrun_version) VALUES (?, ?, ?)',
    // BEGIN IMMEDIATE (the driver's transaction) already serialises migrators across processes.
    migrationLock: null,

    selectEffect: `SELECT ${EFFECT_COLUMNS} FROM effects WHERE effect_key = ?`,
    insertEffect: 'INSERT INTO effects(effect_key, state, action_id, attempt, lease_expires_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    insertEffectIfAbsent:
      'INSERT INTO effects(effect_key, state, action_id, attempt, lease_expires_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(effect_key) DO NOTHING',
    // Spec 03 §3.2, verbatim: the renewal is conditional on the prior attempt.
    renewEffect:
      "UPDATE effects SET state=?, action_id=?, attempt=?, lease_expires_at=?, result_json=NULL, error=NULL, resolved_by=NULL, updated_at=? WHERE effect_key=? AND state='failed' AND attempt=?",
    updateEffect:
      'UPDATE effects SET state = ?, action_id = ?, attempt = ?, lease_expires_at = ?, result_json = ?, error = ?, updated_at = ?, resolved_by = ? WHERE effect_key = ? AND state = ? AND action_id = ? AND attempt = ?',
    updateEffectExact:
      'UPDATE effects SET state = ?, action_id = ?, attempt = ?, lease_expires_at = ?, result_json = ?, error = ?, updated_at = ?, resolved_by = ? WHERE effect_key = ? AND state = ? AND action_id = ? AND attempt = ? AND lease_expires_at IS ? AND created_at IS ? AND updated_at IS ?',
    listEffects: `SELECT ${EFFECT_COLUMNS} FROM effects ORDER BY created_at, rowid`,
    listEffectsInState: `SELECT ${EFFECT_COLUMNS} FROM effects WHERE state = ? ORDER BY created_at, rowid`,

    // approvals_required is always written (1 unless pinned higher), as the original writes it (spec 05 §4.5).
    insertApproval:
      "INSERT INTO approvals(approval_id, action_hash, status, action_json, created_at, expires_at, policy_hash_at_approval, approvals_required, precondition_fingerprint, required_roles) VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?)",
    selectApproval: `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE approval_id = ?`,
    answerApproval: "UPDATE approvals SET status = ?, approver = ?, granted_at = ? WHERE approval_id = ? AND status = 'pending'",
    countApproval:
      "UPDATE approvals SET status = ?, approver = ?, granted_at = ?, approvers = ? WHERE approval_id = ? AND status = 'pending' AND approvers IS ?",
    expireApproval: "UPDATE approvals SET status = 'expired' WHERE approval_id = ? AND status = ?",
    consumeApproval: "UPDATE approvals SET status = 'consumed', consumed_at = ? WHERE approval_id = ? AND status = 'granted'",
    approvalsFor: `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE action_hash = ? ORDER BY created_at, rowid`,
    newestApprovalsFor: `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE action_hash = ? AND status = ? ORDER BY created_at DESC, rowid DESC`,
    listApprovals: `SELECT ${APPROVAL_COLUMNS} FROM approvals ORDER BY created_at, rowid`,
    listApprovalsInStatus: `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE status = ? ORDER BY created_at, rowid`,

    insertEvent: 'INSERT INTO events(ts, type, action_id, effect_key, approval_id, data_json) VALUES (?, ?, ?, ?, ?, ?) RETURNING event_id',
    insertEvents: (n: number): string =>
      `INSERT INTO events(ts, type, action_id, effect_key, approval_id, data_json) VALUES ${Array.from({ length: n }, () => '(?, ?, ?, ?, ?, ?)').join(', ')} RETURNING event_id`,
    listEvents: 'SELECT event_id, ts, type, action_id, effect_key, approval_id, data_json FROM events ORDER BY event_id',
    lastEvent:
      'SELECT event_id, ts, type, action_id, effect_key, approval_id, data_json FROM events WHERE action_id = ? AND type = ? ORDER BY event_id DESC LIMIT 1',
    newestEventsOf: 'SELECT event_id, ts, type, action_id, effect_key, approval_id, data_json FROM events WHERE action_id = ? ORDER BY event_id DESC LIMIT ?',
    lastApprovalEvent:
      'SELECT event_id, ts, type, action_id, effect_key, approval_id, data_json FROM events WHERE approval_id = ? AND type = ? ORDER BY event_id DESC LIMIT 1',

    lockChainHead: 'UPDATE receipt_chain SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash',
    insertReceipt: `INSERT INTO receipts(${RECEIPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    chainPendingReceipt:
      'UPDATE receipts SET json = ?, seq = ?, prev_hash = ?, hash = ? WHERE receipt_id = ? AND seq IS NULL AND prev_hash IS NULL AND json = ? AND hash = ?',
    setChainHash: 'UPDATE receipt_chain SET hash = ? WHERE id = 1',
    selectChainHead: 'SELECT seq, hash FROM receipt_chain WHERE id = 1',
    selectPruneCheckpoint: 'SELECT seq, hash FROM prune_checkpoint WHERE id = 1',
    // NULL seq (pre-chain rows) sorts first in SQLite.
    listReceipts: `SELECT ${RECEIPT_COLUMNS} FROM receipts ORDER BY seq, rowid`,
    receiptsAfter: `SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE seq > ? ORDER BY seq LIMIT ?`,
    receiptById: `SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE receipt_id = ?`,
    // One lower bound on seq, so that the index range starts at the page (with two, SQLite started every page at the chain's first row).
    receiptsInChain: `SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE typeof(seq) = 'integer' AND seq >= max(?, -9007199254740991) AND seq <= 9007199254740991 AND (seq > ? OR receipt_id > ?) ORDER BY seq, receipt_id LIMIT ?`,
    newestReceiptsInChain: `SELECT * FROM (SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE typeof(seq) = 'integer' AND seq BETWEEN -9007199254740991 AND 9007199254740991 ORDER BY seq DESC, receipt_id DESC LIMIT ?) ORDER BY seq, receipt_id`,
    receiptsOffChain: `SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE NOT (typeof(seq) = 'integer' AND seq BETWEEN -9007199254740991 AND 9007199254740991) AND receipt_id > ? ORDER BY receipt_id LIMIT ?`,
    effectsPage: `SELECT ${EFFECT_COLUMNS} FROM effects WHERE (? IS NULL OR state = ?) AND (COALESCE(created_at, ''), effect_key) > (?, ?) ORDER BY COALESCE(created_at, ''), effect_key LIMIT ?`,
    newestEffects: `SELECT * FROM (SELECT ${EFFECT_COLUMNS} FROM effects WHERE (? IS NULL OR state = ?) ORDER BY COALESCE(created_at, '') DESC, effect_key DESC LIMIT ?) ORDER BY COALESCE(created_at, ''), effect_key`,
    approvalsPage: `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE (COALESCE(created_at, ''), approval_id) > (?, ?) ORDER BY COALESCE(created_at, ''), approval_id LIMIT ?`,
    approvalsPageInStatus: `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE status = ? AND (COALESCE(created_at, ''), approval_id) > (?, ?) ORDER BY COALESCE(created_at, ''), approval_id LIMIT ?`,
    // CASE, not AND: json_extract raises on text that is not JSON, and AND does not promise an order.
    countPendingFor: `SELECT COUNT(*) AS n FROM approvals WHERE status = 'pending' AND expires_at > ?
  AND CASE WHEN json_valid(action_json) THEN json_extract(action_json, '$.principal.agent') END = ?
  AND CASE WHEN json_valid(action_json) THEN json_extract(action_json, '$.principal.user') END IS ?`,

    insertDelegation: `INSERT INTO delegations(${DELEGATION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    selectDelegation: `SELECT ${DELEGATION_COLUMNS} FROM delegations WHERE delegation_id = ?`,
    delegationsFor: `SELECT ${DELEGATION_COLUMNS} FROM delegations WHERE parent_id = ? ORDER BY created_at, rowid`,
    listDelegations: `SELECT ${DELEGATION_COLUMNS} FROM delegations ORDER BY created_at, rowid`,
    listLiveDelegations: `SELECT ${DELEGATION_COLUMNS} FROM delegations WHERE revoked_at IS NULL ORDER BY created_at, rowid`,
    revokeDelegation: 'UPDATE delegations SET revoked_at = ?, revoked_by = ? WHERE delegation_id = ? AND revoked_at IS NULL',

    selectContinuation: `SELECT ${CONTINUATION_COLUMNS} FROM continuations WHERE effect_key = ?`,
    selectContinuationByValue: `SELECT ${CONTINUATION_COLUMNS} FROM continuations WHERE continuation = ? AND continuation <> ''`,
    // OR IGNORE: a collision on the key or on the held value affects 0 rows, and the store refuses.
    insertContinuation: 'INSERT OR IGNORE INTO continuations(effect_key, action_id, action_json, continuation, rounds, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
    updateContinuation:
      'UPDATE OR IGNORE continuations SET action_id = ?, action_json = ?, continuation = ?, rounds = ?, updated_at = ? WHERE effect_key = ? AND action_id = ? AND rounds = ?',
    takeContinuation: "UPDATE continuations SET continuation = '', updated_at = ? WHERE effect_key = ? AND continuation = ? AND continuation <> ''",

    // The +00:00 text form, as the original writes: its window compares consumed_at as text.
    releaseCharges: 'UPDATE budget_ledger SET released_at = ? WHERE effect_key = ? AND released_at IS NULL',
    budget: sqliteBudget,
    retention: sqliteRetention,

    sessionsEnded: Object.freeze({
      exists: "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'inbox_sessions_ended'",
      create: 'CREATE TABLE IF NOT EXISTS inbox_sessions_ended(session_id TEXT PRIMARY KEY, ended_at TEXT NOT NULL, expires_ms INTEGER NOT NULL)',
      insert: 'INSERT OR IGNORE INTO inbox_sessions_ended(session_id, ended_at, expires_ms) VALUES (?, ?, ?)',
      prune: 'DELETE FROM inbox_sessions_ended WHERE expires_ms < ?',
      select: 'SELECT session_id FROM inbox_sessions_ended WHERE session_id = ?',
    }),
  }),

  checkServerVersion(version: string): string | null {
    const parts = version.split('.').map((p) => Number.parseInt(p, 10));
    for (let i = 0; i < MIN_VERSION.length; i++) {
      const have = parts[i] ?? 0;
      if (have > MIN_VERSION[i]!) return null;
      if (have < MIN_VERSION[i]!) return `SQLite ${version} is too old: ctrlrun needs ${MIN_VERSION.join('.')} or newer (RETURNING)`;
    }
    return null;
  },

  isUniqueViolation(err: unknown): boolean {
    for (const e of causes(err)) {
      const code = (e as { code?: unknown }).code;
      if (typeof code === 'string' && (code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE')) return true;
      if (e instanceof Error && /UNIQUE constraint failed/.test(e.message)) return true;
    }
    return false;
  },
});
