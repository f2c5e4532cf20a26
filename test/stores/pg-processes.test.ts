/**
 * Real OS processes against a real PostgreSQL server (the worker is `test/processes/worker.ts`,
 * opening `postgres://…?options=-c search_path=<schema>` with `openStore`):
 *
 * - 8 processes × 500 shared keys through `Control.execute`: the executor exclusive-creates
 *   `marker/<key>`, so a second execution of any key would be counted. Every key executes exactly
 *   once, and the receipt chain eight processes wrote under the head row's lock verifies.
 * - A process killed with SIGKILL while its executor runs (T158): its record stays `executing`;
 *   past the lease the next contender makes it `ambiguous` and is refused; nothing is `failed`.
 *
 * (T3, one key × 8 processes, runs as the conformance case e1-cross-process in pg.test.ts.)
 */
import { AmbiguousEffect, Control, DuplicateEffect, createAction, loadPolicy, type Clock } from '@ctrlrun/kernel';
import { LEASE_EXPIRED } from '@ctrlrun/kernel/store';
import { createPgStore, type PgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { raceTimeout, start } from '../processes/harness.js';
import { scaled } from '../support/load.js';
import { raceSharedKeys } from '../processes/race.js';
import { PROCESS_POLICY_YAML, PROCESS_PRINCIPAL } from '../processes/policy.js';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

const PROCESSES = 8;
const KEYS = 500;

describePg('real processes on PostgreSQL', (server) => {
  let db: FreshDatabase;
  let pool: pg.Pool;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'processes');
    pool = new pg.Pool({ connectionString: db.url, max: 4 });
    pool.on('error', () => undefined);
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('test_8_processes_x_500_shared_keys_each_key_executes_exactly_once (PostgreSQL)', { timeout: raceTimeout(PROCESSES, KEYS) }, async () => {
    await db.createSchema('race');
    const store = await createPgStore(pool, { schema: 'race' }); // migrated before any worker opens it
    try {
      await raceSharedKeys(store, db.urlFor('race'), { processes: PROCESSES, keys: KEYS, tempPrefix: 'pg-race' });
    } finally {
      await store.close();
    }
  });

  it('test_T158_a_process_killed_with_sigkill_leaves_executing_then_ambiguous_never_failed (PostgreSQL)', { timeout: scaled(60_000) }, async () => {
    const LEASE_MS = 60_000;
    await db.createSchema('crash');
    await (await createPgStore(pool, { schema: 'crash' })).close();
    const worker = start({ kind: 'hang', url: db.urlFor('crash'), reference: 'ref-kill', lease_ms: LEASE_MS });
    const line = await worker.line((l) => l['executing'] === true);
    worker.child.kill('SIGKILL');
    expect((await worker.finished).signal).toBe('SIGKILL');
    const key = String(line['effect_key']);
    const actionId = String(line['action_id']);

    const calls = { n: 0 };
    const retry = (store: PgStore, clock: Clock) =>
      new Control({ policy: loadPolicy(PROCESS_POLICY_YAML), store, clock, principal: PROCESS_PRINCIPAL, logger: { warn() {} } })
        .execute(
          createAction({ name: 'crash.refund', arguments: { reference: 'ref-kill', amount: 2500 }, principal: PROCESS_PRINCIPAL }),
          () => (calls.n++, { ok: true }),
        )
        .then(
          () => null,
          (e: unknown) => e,
        );

    // Live lease: the dead worker's record, a contender refused as in progress.
    const live = await createPgStore(pool, { schema: 'crash' });
    expect(await live.getEffect(key)).toMatchObject({ state: 'executing', actionId, attempt: 1 });
    const busy = await retry(live, () => new Date());
    expect(busy).toBeInstanceOf(DuplicateEffect);
    expect(busy).toMatchObject({ state: 'in_progress' });
    await live.close();

    // Past the lease: nothing swept it; the next contender ambiguates it and is refused.
    const lapsed = new Date(Date.now() + 2 * LEASE_MS);
    const later = await createPgStore(pool, { schema: 'crash', clock: () => lapsed });
    expect(await later.getEffect(key)).toMatchObject({ state: 'executing' });
    expect(await retry(later, () => lapsed)).toBeInstanceOf(AmbiguousEffect);
    expect(await later.getEffect(key)).toMatchObject({ state: 'ambiguous', actionId, error: LEASE_EXPIRED, resolvedBy: null });
    expect(await later.listEffects('failed')).toEqual([]);
    expect(calls.n).toBe(0);
    await later.close();
  });
});
