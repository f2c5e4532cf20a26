/**
 * The statements of the budget ledger (spec 05 §5.1), in each dialect's own text. The ledger is
 * the original's `budget_ledger`: on SQLite `consumed_at`/`released_at` are `TEXT` in the
 * `…+00:00` form (the window compares them as text, as the original does); on Postgres
 * `TIMESTAMPTZ` (bound as a timestamp, read back in the `…+00:00` form), and each charged grant
 * is serialised on its `budget_anchor` row. Amounts are bound and read as decimal text, so a sum
 * past 2^53 is exact.
 *
 * @module
 */

/** Every statement the ledger sends; parameters in the order each member's TSDoc gives. */
export interface BudgetSql {
  /** Postgres only. Params: grant_id. Creates the grant's lock row if absent. */
  readonly anchor: string | null;
  /** Postgres only. Params: grant_id. Locks the grant's row until the transaction ends. */
  readonly lockAnchor: string | null;
  /** Params: grant_id, metric, floor (a stored time). `{ spent }` (decimal text): unreleased amounts consumed at or after the floor. */
  readonly spent: string;
  /** Params: grant_id, metric, amount (decimal text), effect_key, attempt, consumed_at. A row already there for the unique key is left as it is. */
  readonly insertCharge: string;
  /**
   * Params: grant_id, grant_id, metric, metric, since, since, effect_key, effect_key, limit (each
   * pair: the value or null for any). Rows in insertion (`id`) order, `since` closed.
   */
  readonly consumptions: string;
}

const COLUMNS = 'id, grant_id, metric, CAST(amount AS TEXT) AS amount, effect_key, attempt, consumed_at, released_at';

/** The SQLite text (`BEGIN IMMEDIATE` serialises every writer, so no lock row). */
export const sqliteBudget: BudgetSql = Object.freeze({
  anchor: null,
  lockAnchor: null,
  spent:
    'SELECT CAST(COALESCE(SUM(amount), 0) AS TEXT) AS spent FROM budget_ledger WHERE grant_id = ? AND metric = ? AND released_at IS NULL AND consumed_at >= ?',
  insertCharge:
    'INSERT INTO budget_ledger(grant_id, metric, amount, effect_key, attempt, consumed_at) VALUES (?, ?, CAST(? AS INTEGER), ?, ?, ?) ON CONFLICT (effect_key, attempt, grant_id, metric) DO NOTHING',
  consumptions: `SELECT ${COLUMNS} FROM budget_ledger WHERE (? IS NULL OR grant_id = ?) AND (? IS NULL OR metric = ?) AND (? IS NULL OR consumed_at >= ?) AND (? IS NULL OR effect_key = ?) ORDER BY id LIMIT ?`,
});

/** A `TIMESTAMPTZ` column read back in the stored `…+00:00` form, whatever the session's time zone. */
const pgTime = (column: string): string => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"') AS ${column}`;

/** The Postgres text, tables qualified by `t` (the store's schema). */
export function postgresBudget(t: (table: string) => string): BudgetSql {
  return Object.freeze({
    anchor: `INSERT INTO ${t('budget_anchor')}(grant_id) VALUES ($1) ON CONFLICT DO NOTHING`,
    lockAnchor: `SELECT grant_id FROM ${t('budget_anchor')} WHERE grant_id = $1 FOR UPDATE`,
    spent: `SELECT COALESCE(SUM(amount), 0)::text AS spent FROM ${t('budget_ledger')} WHERE grant_id = $1 AND metric = $2 AND released_at IS NULL AND consumed_at >= $3::timestamptz`,
    insertCharge: `INSERT INTO ${t('budget_ledger')}(grant_id, metric, amount, effect_key, attempt, consumed_at) VALUES ($1, $2, $3::bigint, $4, $5, $6::timestamptz) ON CONFLICT (effect_key, attempt, grant_id, metric) DO NOTHING`,
    consumptions: `SELECT id, grant_id, metric, amount::text AS amount, effect_key, attempt, ${pgTime('consumed_at')}, ${pgTime('released_at')} FROM ${t('budget_ledger')} WHERE ($1::text IS NULL OR grant_id = $2) AND ($3::text IS NULL OR metric = $4) AND ($5::timestamptz IS NULL OR consumed_at >= $6::timestamptz) AND ($7::text IS NULL OR effect_key = $8) ORDER BY id LIMIT $9`,
  });
}
