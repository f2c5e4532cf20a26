/**
 * Sixteen real OS processes race refunds against one budget on one SQLite file (better-sqlite3,
 * `BEGIN IMMEDIATE` serialising the predicate and the charge): the committed refunds never sum
 * past the limit, every refused refund left no charge, every failed effect's charge is released.
 */
import { join } from 'node:path';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { afterAll, it } from 'vitest';
import { raceTimeout, tempDir } from './harness.js';
import { raceBudget } from './budget-race.js';

const PROCESSES = 16;
const REFUNDS = 25;
const work = tempDir('budget-race');
afterAll(() => work.remove());

it('test_T409_N_processes_racing_one_budget_spend_at_most_the_limit (16 processes, SQLite file)', { timeout: raceTimeout(PROCESSES, REFUNDS) }, async () => {
  const path = join(work.dir, 'budget.db');
  const store = await createBetterSqlite3Store(path); // created and migrated before any worker opens it
  try {
    await raceBudget(store, store.url, { processes: PROCESSES, refunds: REFUNDS, limit: 20_000, tempPrefix: 'budget' });
  } finally {
    await store.close();
  }
});
