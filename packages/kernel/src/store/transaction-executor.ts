/**
 * The handle a driver gives a transaction's `fn`, checked once here for every driver: a
 * statement run through a handle kept past its transaction's end (after COMMIT or ROLLBACK) is
 * refused, never run outside the transaction it was written for.
 *
 * @module
 */
import { StoreError } from '../errors.js';
import type { QueryResult, SqlExecutor, SqlValue } from './driver.js';

/** How a driver runs statements inside one transaction (synchronously or not). */
export interface TransactionStatements {
  query<Row>(sql: string, params: readonly SqlValue[]): QueryResult<Row> | Promise<QueryResult<Row>>;
  exec(sql: string): void | Promise<void>;
}

/**
 * The {@link SqlExecutor} for one transaction: `statements`, each call refused with a
 * `StoreError` (`[name] this transaction has already ended`) once `live()` answers false.
 * `name` is the driver's (`sql.js`, `pg`, …), as its other messages name it.
 */
export function transactionExecutor(name: string, live: () => boolean, statements: TransactionStatements): SqlExecutor {
  const check = (): void => {
    if (!live()) throw new StoreError(`[${name}] this transaction has already ended`);
  };
  return {
    query: async <Row = Record<string, unknown>>(sql: string, params: readonly SqlValue[] = []) => {
      check();
      return statements.query<Row>(sql, params);
    },
    exec: async (sql: string) => {
      check();
      await statements.exec(sql);
    },
  };
}
