/**
 * The statements of retention (spec 05 §5.2–§5.4): the prune, its checkpoint, holds and the
 * anchors cache, in each dialect's own text (never translated). The 0008 tables are the
 * original's; on Postgres their time columns are `TIMESTAMPTZ` (bound as a timestamp, read back
 * in the `…+00:00` form), on SQLite `TEXT` in the `…+00:00` form.
 *
 * @module
 */

/** Every statement retention sends; parameters in the order each member's TSDoc gives. */
export interface RetentionSql {
  /** The receipt-write lock, taken first in every retention transaction: `{ seq, hash }` of the head row. */
  readonly lockHead: string;
  /** Params: upper (inclusive), limit. Chained rows (integer `seq`) at or below it, newest first: `{ seq, json, hash }`. */
  readonly newestAtOrBelow: string;
  /** `{ seq, hash, schema, at }` of the checkpoint row. */
  readonly selectCheckpoint: string;
  /** Params: seq, hash, schema, at. Upsert of row 1, applied only when `seq` grows. */
  readonly putCheckpoint: string;
  /** Params: through, limit. Live holds with `from_seq ≤ through`: every hold column. */
  readonly holdsCrossing: string;
  /** Params: through, limit. Effects named by a receipt at or below it that are `ambiguous`, `reserved` or `executing`: `{ effect_key, state }`. */
  readonly unsettledInPrefix: string;
  /** Params: through, floor (a stored time), limit. Committed effects of the prefix with a ledger row consumed after the floor: `{ effect_key, consumed_at }`. */
  readonly chargedInPrefix: string;
  /** Params: through. Deletes the ledger rows of every effect key the prefix names. */
  readonly deletePrefixLedger: string;
  /** Params: through. Deletes the chained receipts at or below it. */
  readonly deletePrefix: string;
  /** Params: hold_id, from_seq, to_seq, reason, placed_by, placed_at. A plain insert (a duplicate id is refused). */
  readonly insertHold: string;
  /** Params: released_at, released_by, hold_id. Only a live hold. */
  readonly releaseHold: string;
  /** Params: hold_id. Every hold column. */
  readonly selectHold: string;
  /** Every hold, by `placed_at`, `hold_id`. */
  readonly listHolds: string;
  /** Params: token, seq, hash, kind, at. `ON CONFLICT (token) DO NOTHING`. */
  readonly insertAnchor: string;
  /** Params: kind. The cached anchor of that kind with the highest `seq`: every anchor column. */
  readonly lastAnchor: string;
  /** Every cached anchor, by `seq`, `token`. */
  readonly listAnchors: string;
  /** Params: seq. `{ hash }` of the chained receipt at that seq (none, or several). */
  readonly hashAt: string;
}

/** The SQLite text (`BEGIN IMMEDIATE` is the receipt-write lock). */
export const sqliteRetention: RetentionSql = Object.freeze({
  lockHead: 'SELECT seq, hash FROM receipt_chain WHERE id = 1',
  newestAtOrBelow: "SELECT seq, json, hash FROM receipts WHERE typeof(seq) = 'integer' AND seq <= ? ORDER BY seq DESC, receipt_id DESC LIMIT ?",
  selectCheckpoint: 'SELECT seq, hash, schema, at FROM prune_checkpoint WHERE id = 1',
  putCheckpoint:
    'INSERT INTO prune_checkpoint(id, seq, hash, schema, at) VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, schema = excluded.schema, at = excluded.at WHERE excluded.seq > prune_checkpoint.seq',
  holdsCrossing:
    'SELECT hold_id, from_seq, to_seq, reason, placed_by, placed_at, released_at, released_by FROM holds WHERE released_at IS NULL AND from_seq <= ? ORDER BY from_seq, hold_id LIMIT ?',
  unsettledInPrefix:
    "SELECT effect_key, state FROM effects WHERE state IN ('ambiguous', 'reserved', 'executing') AND effect_key IN (SELECT effect_key FROM receipts WHERE seq IS NOT NULL AND seq <= ? AND effect_key IS NOT NULL) ORDER BY effect_key LIMIT ?",
  chargedInPrefix:
    "SELECT l.effect_key AS effect_key, MAX(l.consumed_at) AS consumed_at FROM budget_ledger l JOIN effects e ON e.effect_key = l.effect_key WHERE e.state = 'committed' AND l.effect_key IN (SELECT effect_key FROM receipts WHERE seq IS NOT NULL AND seq <= ? AND effect_key IS NOT NULL) AND l.consumed_at > ? GROUP BY l.effect_key ORDER BY l.effect_key LIMIT ?",
  deletePrefixLedger:
    'DELETE FROM budget_ledger WHERE effect_key IN (SELECT effect_key FROM receipts WHERE seq IS NOT NULL AND seq <= ? AND effect_key IS NOT NULL)',
  deletePrefix: 'DELETE FROM receipts WHERE seq IS NOT NULL AND seq <= ?',
  insertHold: 'INSERT INTO holds(hold_id, from_seq, to_seq, reason, placed_by, placed_at) VALUES (?, ?, ?, ?, ?, ?)',
  releaseHold: 'UPDATE holds SET released_at = ?, released_by = ? WHERE hold_id = ? AND released_at IS NULL',
  selectHold: 'SELECT hold_id, from_seq, to_seq, reason, placed_by, placed_at, released_at, released_by FROM holds WHERE hold_id = ?',
  listHolds: 'SELECT hold_id, from_seq, to_seq, reason, placed_by, placed_at, released_at, released_by FROM holds ORDER BY placed_at, hold_id',
  insertAnchor: 'INSERT INTO anchors(token, seq, hash, kind, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (token) DO NOTHING',
  lastAnchor: 'SELECT token, seq, hash, kind, at FROM anchors WHERE kind = ? ORDER BY seq DESC LIMIT 1',
  listAnchors: 'SELECT token, seq, hash, kind, at FROM anchors ORDER BY seq, token',
  hashAt: "SELECT hash FROM receipts WHERE typeof(seq) = 'integer' AND seq = ? LIMIT 2",
});

/** A `TIMESTAMPTZ` column read back in the stored `…+00:00` form, whatever the session's time zone. */
const pgTime = (column: string, expr = column): string => `to_char(${expr} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"') AS ${column}`;

/** The Postgres text, tables qualified by `t` (the store's schema); the head row's `FOR UPDATE` is the receipt-write lock. */
export function postgresRetention(t: (table: string) => string): RetentionSql {
  const holdColumns = `hold_id, from_seq, to_seq, reason, placed_by, ${pgTime('placed_at')}, ${pgTime('released_at')}, released_by`;
  const prefixKeys = `SELECT effect_key FROM ${t('receipts')} WHERE seq IS NOT NULL AND seq <= $1::bigint AND effect_key IS NOT NULL`;
  return Object.freeze({
    lockHead: `SELECT seq, hash FROM ${t('receipt_chain')} WHERE id = 1 FOR UPDATE`,
    newestAtOrBelow: `SELECT seq, json, hash FROM ${t('receipts')} WHERE seq IS NOT NULL AND seq <= $1::bigint ORDER BY seq DESC, receipt_id DESC LIMIT $2`,
    selectCheckpoint: `SELECT seq, hash, schema, ${pgTime('at')} FROM ${t('prune_checkpoint')} WHERE id = 1`,
    putCheckpoint: `INSERT INTO ${t('prune_checkpoint')}(id, seq, hash, schema, at) VALUES (1, $1, $2, $3, $4::timestamptz) ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, schema = excluded.schema, at = excluded.at WHERE excluded.seq > ${t('prune_checkpoint')}.seq`,
    holdsCrossing: `SELECT ${holdColumns} FROM ${t('holds')} WHERE released_at IS NULL AND from_seq <= $1::bigint ORDER BY from_seq, hold_id LIMIT $2`,
    unsettledInPrefix: `SELECT effect_key, state FROM ${t('effects')} WHERE state IN ('ambiguous', 'reserved', 'executing') AND effect_key IN (${prefixKeys}) ORDER BY effect_key LIMIT $2`,
    chargedInPrefix: `SELECT l.effect_key AS effect_key, ${pgTime('consumed_at', 'MAX(l.consumed_at)')} FROM ${t('budget_ledger')} l JOIN ${t('effects')} e ON e.effect_key = l.effect_key WHERE e.state = 'committed' AND l.effect_key IN (${prefixKeys}) AND l.consumed_at > $2::timestamptz GROUP BY l.effect_key ORDER BY l.effect_key LIMIT $3`,
    deletePrefixLedger: `DELETE FROM ${t('budget_ledger')} WHERE effect_key IN (${prefixKeys})`,
    deletePrefix: `DELETE FROM ${t('receipts')} WHERE seq IS NOT NULL AND seq <= $1::bigint`,
    insertHold: `INSERT INTO ${t('holds')}(hold_id, from_seq, to_seq, reason, placed_by, placed_at) VALUES ($1, $2, $3, $4, $5, $6::timestamptz)`,
    releaseHold: `UPDATE ${t('holds')} SET released_at = $1::timestamptz, released_by = $2 WHERE hold_id = $3 AND released_at IS NULL`,
    selectHold: `SELECT ${holdColumns} FROM ${t('holds')} WHERE hold_id = $1`,
    listHolds: `SELECT ${holdColumns} FROM ${t('holds')} ORDER BY placed_at, hold_id`,
    insertAnchor: `INSERT INTO ${t('anchors')}(token, seq, hash, kind, at) VALUES ($1, $2, $3, $4, $5::timestamptz) ON CONFLICT (token) DO NOTHING`,
    lastAnchor: `SELECT token, seq, hash, kind, ${pgTime('at')} FROM ${t('anchors')} WHERE kind = $1 ORDER BY seq DESC LIMIT 1`,
    listAnchors: `SELECT token, seq, hash, kind, ${pgTime('at')} FROM ${t('anchors')} ORDER BY seq, token`,
    hashAt: `SELECT hash FROM ${t('receipts')} WHERE seq = $1::bigint LIMIT 2`,
  });
}
