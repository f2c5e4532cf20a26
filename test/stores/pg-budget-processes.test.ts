/**
 * Eight real OS processes race refunds against one budget on a real PostgreSQL server (each
 * charged grant serialised on its `budget_anchor` row inside the reservation transaction): the
 * committed refunds never sum past the limit, every refused refund left no charge, every failed
 * effect's charge is released. The worker is `test/processes/worker.ts`, opening
 * `postgres://…?options=-c search_path=<schema>` with `openStore`.
 */
import { createPgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { afterAll, beforeAll, it } from 'vitest';
import { raceTimeout } from '../processes/harness.js';
import { raceBudget } from '../processes/budget-race.js';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

const PROCESSES = 8;
const REFUNDS = 30;

describePg('refunds racing one budget on PostgreSQL', (server) => {
  let db: FreshDatabase;
  let pool: pg.Pool;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'budget');
    pool = new pg.Pool({ connectionString: db.url, max: 4 });
    pool.on('error', () => undefined);
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('test_T409_N_processes_racing_one_budget_spend_at_most_the_limit (8 processes, PostgreSQL)', { timeout: raceTimeout(PROCESSES, REFUNDS) }, async () => {
    await db.createSchema('budget');
    const store = await createPgStore(pool, { schema: 'budget' }); // migrated before any worker opens it
    try {
      await raceBudget(store, db.urlFor('budget'), { processes: PROCESSES, refunds: REFUNDS, limit: 12_000, tempPrefix: 'pg-budget' });
    } finally {
      await store.close();
    }
  });
});
