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
import { AmbiguousEffect, Control, DuplicateEffect, LEASE_EXPIRED, createAction, loadPolicy, verifyChain, type Clock } from '@ctrlrun/kernel';
import { createPgStore, type PgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { files, lastLine, RENDEZVOUS_TIMEOUT_S, runAll, start, tempDir } from '../processes/harness.js';
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

  it('test_8_processes_x_500_shared_keys_each_key_executes_exactly_once (PostgreSQL)', { timeout: 180_000 }, async () => {
    await db.createSchema('race');
    const store = await createPgStore(pool, { schema: 'race' }); // migrated before any worker opens it
    const marker = tempDir('pg-race-marker');
    const rendezvous = tempDir('pg-race-rendezvous');
    try {
      const keys = Array.from({ length: KEYS }, (_, i) => `key-${i}`);
      const finished = await runAll(
        Array.from({ length: PROCESSES }, () => ({
          kind: 'execute-many' as const,
          url: db.urlFor('race'),
          keys,
          marker_dir: marker.dir,
          rendezvous_dir: rendezvous.dir,
          contenders: PROCESSES,
          rendezvous_timeout: RENDEZVOUS_TIMEOUT_S,
        })),
      );
      const reports = finished.map(lastLine) as unknown as {
        executed: number; duplicate_committed: number; duplicate_in_progress: number; ambiguous: number; doubles: number; other: Record<string, number>;
      }[];
      const sum = (k: 'executed' | 'duplicate_committed' | 'duplicate_in_progress' | 'ambiguous' | 'doubles') => reports.reduce((s, r) => s + r[k], 0);
      const seen = JSON.stringify(reports);
      expect(files(rendezvous.dir).filter((f) => f.startsWith('arrived-')), 'every worker reached the barrier').toHaveLength(PROCESSES);
      expect(sum('doubles'), `no key executed twice: ${seen}`).toBe(0);
      expect(sum('executed'), `every key executed once: ${seen}`).toBe(KEYS);
      expect(files(marker.dir), 'the executor ran once per key').toEqual(keys.map((k) => `race:${k}`).sort());
      expect(sum('ambiguous'), `nothing ambiguous without a crash: ${seen}`).toBe(0);
      expect(reports.map((r) => r.other), `no other refusal: ${seen}`).toEqual(reports.map(() => ({})));
      expect(sum('executed') + sum('duplicate_committed') + sum('duplicate_in_progress'), 'every call answered').toBe(PROCESSES * KEYS);

      const records = await store.listEffects();
      expect(records).toHaveLength(KEYS);
      expect(records.every((r) => r.state === 'committed' && r.attempt === 1)).toBe(true);
      const receipts = await store.receipts();
      expect(receipts).toHaveLength(PROCESSES * KEYS);
      const report = verifyChain(receipts, await store.chainHead());
      expect(report.breaks).toEqual([]);
      expect(report).toMatchObject({ ok: true, verified: PROCESSES * KEYS });
      expect((await store.events()).filter((e) => e.type === 'EXECUTION_COMMITTED')).toHaveLength(KEYS);
    } finally {
      await store.close();
      marker.remove();
      rendezvous.remove();
    }
  });

  it('test_T158_a_process_killed_with_sigkill_leaves_executing_then_ambiguous_never_failed (PostgreSQL)', { timeout: 60_000 }, async () => {
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
        .execute(createAction({ name: 'crash.refund', arguments: { reference: 'ref-kill', amount: 2500 }, principal: PROCESS_PRINCIPAL }), () => (calls.n++, { ok: true }))
        .then(() => null, (e: unknown) => e);

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
