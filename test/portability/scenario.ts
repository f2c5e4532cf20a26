/**
 * The scenario every runtime runs, written once. Runtime-agnostic: Web-standard globals only, no
 * `node:*`, no `Deno`, no `process`; each host hands in how sql.js finds its `.wasm`.
 *
 * TEMPORARY: until `@ctrlrun/kernel/try-it` and `@ctrlrun/store-sqljs` exist, this runs what does
 * exist (an action hash from the kernel and a SELECT through sql.js), so the harness is proven.
 */
import initSqlJs, { type SqlJsConfig } from 'sql.js';
import { createAction } from '@ctrlrun/kernel';

/** What a host reports: which runtime ran, and the raw step results (ids not yet masked). */
export interface ScenarioReport {
  runtime: { name: string; version: string };
  steps: unknown[];
}

/** Runs the scenario; `sqlJs` is what the host needs sql.js to be initialised with. */
export async function runScenario(sqlJs?: SqlJsConfig): Promise<unknown[]> {
  const SQL = await initSqlJs(sqlJs);
  const db = new SQL.Database();
  try {
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_1', amount: 50000 }, principal: { agent: 'try-it' } });
    const rows = db.exec("SELECT 1 + 1 AS two, 'é' || 'x' AS text, length(x'00ff') AS blob_len");
    return [
      { step: 'action', action_id: action.actionId, action_hash: action.actionHash },
      { step: 'sql', columns: rows[0]?.columns, values: rows[0]?.values },
    ];
  } finally {
    db.close();
  }
}
