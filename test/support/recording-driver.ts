/**
 * A driver that records the statements of each transaction it runs (in order, one list per
 * transaction), and can fail matching statements as a full disk would (`state.fail`).
 */
import type { SqlDriver, SqlExecutor } from '@ctrlrun/kernel/store';

export interface RecordingDriver {
  readonly wrapped: SqlDriver;
  readonly transactions: string[][];
  readonly state: { fail: RegExp | null };
}

export function recording(driver: SqlDriver): RecordingDriver {
  const transactions: string[][] = [];
  const state = { fail: null as RegExp | null };
  const wrapped: SqlDriver = {
    name: driver.name,
    dialect: driver.dialect,
    capabilities: driver.capabilities,
    query: (sql, params) => driver.query(sql, params),
    exec: (sql) => driver.exec(sql),
    close: () => driver.close(),
    transaction: <T>(fn: (tx: SqlExecutor) => Promise<T>) =>
      driver.transaction((tx) => {
        const statements: string[] = [];
        transactions.push(statements);
        return fn({
          query: (sql, params) => {
            statements.push(sql);
            return state.fail?.test(sql) ? Promise.reject(new Error('disk full')) : tx.query(sql, params);
          },
          exec: (sql) => tx.exec(sql),
        });
      }),
  };
  return { wrapped, transactions, state };
}
