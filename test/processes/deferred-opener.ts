/**
 * Test-only broken store (T143): the better-sqlite3 store with `BEGIN` (deferred) instead of
 * `BEGIN IMMEDIATE`. In one process the kernel's mutex hides the difference; across processes two
 * readers both plan a win and only the database's lock upgrade stops the second — with
 * `SQLITE_BUSY`, not a refusal. A short pause after each read inside a transaction widens that
 * window, so the race shows on any machine. Its dialect has no `updateEffectExact`, so that an
 * outcome reads its row before it writes, as every step of such a store would: with it, the
 * allowed path's transactions all begin with a write, which takes the lock as `BEGIN IMMEDIATE`
 * would, and the race this fixture is about would not show. Workers load it as `opener`.
 */
import { openSqlStateStore, sqliteDialect, type SqlDriver, type SqlStateStore, type SqlValue } from '@ctrlrun/kernel/store';
import { type Clock } from '@ctrlrun/kernel';
import { BetterSqlite3Driver, type BetterSqlite3Database } from '@ctrlrun/store-node/better-sqlite3';
import Database from 'better-sqlite3';

function deferred(inner: BetterSqlite3Driver): SqlDriver {
  const { db } = inner;
  return {
    name: 'better-sqlite3 (deferred)',
    dialect: 'sqlite',
    capabilities: inner.capabilities,
    query: (sql, params) => inner.query(sql, params),
    exec: (sql) => inner.exec(sql),
    close: () => inner.close(),
    async transaction(fn) {
      db.exec('BEGIN');
      let paused = false;
      try {
        const result = await fn({
          async query<Row>(sql: string, params?: readonly SqlValue[]) {
            const out = await inner.query<Row>(sql, params);
            // Widen the check-then-write window (once per transaction) so the race shows on any machine.
            if (!paused && /^\s*SELECT/i.test(sql)) {
              paused = true;
              await new Promise((r) => setTimeout(r, 3));
            }
            return out;
          },
          exec: (sql) => inner.exec(sql),
        });
        db.exec('COMMIT');
        return result;
      } catch (err) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw err;
      }
    },
  };
}

/** Opens `sqlite:PATH` (or PATH) with deferred transactions. */
export async function openStore(url: string, options: { clock?: Clock } = {}): Promise<SqlStateStore> {
  const db = new Database(url.replace(/^sqlite:/, ''), { timeout: 250 }) as unknown as BetterSqlite3Database; // a short wait: this fixture is about the missing lock, not the wait
  db.pragma('journal_mode = WAL');
  const { updateEffectExact: _, ...sql } = sqliteDialect.sql;
  return openSqlStateStore(deferred(new BetterSqlite3Driver(db)), { ...options, dialect: { ...sqliteDialect, sql } });
}
