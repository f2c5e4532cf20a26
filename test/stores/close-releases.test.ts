// T145: close() releases, never fences: closing one handle leaves every other user of the same
// database working (another handle on the file, another store on the same pool), a closed handle
// refuses further calls with StoreClosedError, and closing twice is harmless.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreClosedError, type StateStore } from '@ctrlrun/kernel';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { createPgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

async function closeReleases(a: StateStore, b: StateStore, reopen: () => Promise<StateStore>): Promise<void> {
  await a.reserveEffect('refund:1', 'act_1', 60_000);
  await a.close();
  await a.close(); // twice: harmless
  await expect(a.getEffect('refund:1')).rejects.toBeInstanceOf(StoreClosedError);
  // The other handle never noticed.
  expect((await b.getEffect('refund:1'))?.state).toBe('reserved');
  await b.beginExecution('refund:1', 'act_1');
  await b.commitEffect('refund:1', 'act_1', { ok: true });
  await b.reserveEffect('refund:2', 'act_2', 60_000);
  // And a new handle opens on the same database.
  const c = await reopen();
  try {
    expect((await c.getEffect('refund:1'))?.state).toBe('committed');
  } finally {
    await c.close();
  }
  await b.close();
}

describe('T145 close() releases, never fences', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-close-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('test_T145_better_sqlite3_closing_one_handle_leaves_the_other_working', async () => {
    const path = join(dir, 'state.db');
    await closeReleases(await createBetterSqlite3Store(path), await createBetterSqlite3Store(path), () => createBetterSqlite3Store(path));
  });
});

describePg('T145 on PostgreSQL', (server) => {
  let db: FreshDatabase;
  let pool: pg.Pool;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'close');
    pool = new pg.Pool({ connectionString: db.url, max: 4 });
    pool.on('error', () => undefined);
    await db.createSchema('closing');
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('test_T145_postgres_closing_a_store_leaves_the_pool_it_was_given_and_the_other_store_working', async () => {
    await closeReleases(await createPgStore(pool, { schema: 'closing' }), await createPgStore(pool, { schema: 'closing' }), () =>
      createPgStore(pool, { schema: 'closing' }),
    );
    // The pool the caller owns is still open.
    expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});
