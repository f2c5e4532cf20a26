/**
 * Eight real OS processes race on 500 shared effect keys through `Control.execute` on one SQLite
 * file. The executor is the judge: each execution exclusive-creates `marker/<key>`, so a second
 * execution of a key would fail with EEXIST and be counted. Every key must execute exactly once,
 * every other call be refused as a duplicate, and the receipt chain written by eight processes
 * must verify without a gap.
 */
import { join } from 'node:path';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { afterAll, it } from 'vitest';
import { raceTimeout, tempDir } from './harness.js';
import { raceSharedKeys } from './race.js';

const PROCESSES = 8;
const KEYS = 500;
const work = tempDir('race');
afterAll(() => work.remove());

it('test_8_processes_x_500_shared_keys_each_key_executes_exactly_once', { timeout: raceTimeout(PROCESSES, KEYS) }, async () => {
  const path = join(work.dir, 'race.db');
  const store = await createBetterSqlite3Store(path); // created and migrated before any worker opens it
  try {
    await raceSharedKeys(store, store.url, { processes: PROCESSES, keys: KEYS, tempPrefix: 'race' });
  } finally {
    await store.close();
  }
});
