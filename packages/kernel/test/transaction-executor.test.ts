// The one "transaction has already ended" check every driver hands its transactions through
// (sql.js, better-sqlite3, pg, PGlite, the Durable Object): statements run while the transaction
// is live; a handle kept past its end is refused, naming the driver, and runs nothing.
import { describe, expect, it } from 'vitest';
import { StoreError } from '@ctrlrun/kernel';
import { transactionExecutor } from '@ctrlrun/kernel/store';

describe('transactionExecutor', () => {
  it('runs statements while live, refuses them once the transaction ended', async () => {
    let live = true;
    const ran: string[] = [];
    const tx = transactionExecutor('sql.js', () => live, {
      query: <Row>(sql: string) => {
        ran.push(sql);
        return { rows: [{ one: 1 }] as Row[], rowsAffected: 0 };
      },
      exec: async (sql: string) => void ran.push(sql),
    });
    expect(await tx.query('SELECT 1 AS one')).toEqual({ rows: [{ one: 1 }], rowsAffected: 0 });
    await tx.exec('CREATE TABLE t (v)');
    live = false;
    const refused = tx.query('INSERT INTO t VALUES (1)');
    await expect(refused).rejects.toThrow(new StoreError('[sql.js] this transaction has already ended'));
    await expect(tx.exec('DROP TABLE t')).rejects.toBeInstanceOf(StoreError);
    expect(ran).toEqual(['SELECT 1 AS one', 'CREATE TABLE t (v)']);
  });
});
