/**
 * Crashes (spec 03 §4, T159–T162): a worker OS process reserves and begins an effect through
 * `Control.execute`, says so on stdout, and is killed with SIGKILL while its executor "runs".
 * The parent then opens the same SQLite file with a clock past the lease (the only seam; nothing
 * sleeps) and checks what a restarted process may know: the record's state and whether its lease
 * is live — nothing sweeps it, the next contender makes it ambiguous, a blind retry is refused
 * across restarts, and only a human's resolution moves it.
 */
import { hostname } from 'node:os';
import { join } from 'node:path';
import { AmbiguousEffect, Control, DuplicateEffect, createAction, loadPolicy, type Clock } from '@ctrlrun/kernel';
import { LEASE_EXPIRED, parseTime } from '@ctrlrun/kernel/store';
import { createBetterSqlite3Store, type BetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { start, tempDir } from './harness.js';
import { scaled } from '../support/load.js';
import { PROCESS_POLICY_YAML, PROCESS_PRINCIPAL } from './policy.js';

const LEASE_MS = 60_000;
const work = tempDir('crash');
afterAll(() => work.remove());
let files = 0;

interface Crashed {
  path: string;
  pid: number;
  actionId: string;
  effectKey: string;
  reference: string;
  /** A moment past the crashed worker's lease. */
  after: Clock;
}

/** Runs a worker until its executor is running, then kills it with SIGKILL. */
async function crash(): Promise<Crashed> {
  const path = join(work.dir, `crash-${++files}.db`);
  await (await createBetterSqlite3Store(path)).close();
  const reference = `ref-${files}`;
  const worker = start({ kind: 'hang', url: `sqlite:${path}`, reference, lease_ms: LEASE_MS });
  const line = await worker.line((l) => l['executing'] === true);
  worker.child.kill('SIGKILL');
  const end = await worker.finished;
  expect(end.signal).toBe('SIGKILL');
  const lapsed = new Date(Date.now() + 2 * LEASE_MS);
  return { path, pid: end.pid, actionId: String(line['action_id']), effectKey: String(line['effect_key']), reference, after: () => lapsed };
}

function control(store: BetterSqlite3Store, clock: Clock): Control {
  return new Control({ policy: loadPolicy(PROCESS_POLICY_YAML), store, clock, principal: PROCESS_PRINCIPAL, logger: { warn() {} } });
}

/** The crashed worker's call, retried by another process (same arguments, so the same effect key). */
function retry(c: Control, crashed: Crashed, calls: { n: number }): Promise<unknown> {
  const action = createAction({ name: 'crash.refund', arguments: { reference: crashed.reference, amount: 2500 }, principal: PROCESS_PRINCIPAL });
  return c.execute(action, () => {
    calls.n++;
    return { refunded: true };
  });
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => expect.fail('expected a refusal'),
    (e: unknown) => e as Error,
  );
}

// Each case spawns a worker: generous timeouts, since a loaded machine starts processes slowly.
describe('a worker killed with SIGKILL while its executor runs', { timeout: scaled(120_000) }, () => {
  it('test_T160_there_is_no_reaper', async () => {
    const crashed = await crash();
    expect(crashed.effectKey).toBe(`crash:${crashed.reference}`);
    // While the lease is live, the record is the dead worker's and a contender is told so.
    const live = await createBetterSqlite3Store(crashed.path);
    const calls = { n: 0 };
    const err = await rejection(
      retry(
        control(live, () => new Date()),
        crashed,
        calls,
      ),
    );
    expect(err).toBeInstanceOf(DuplicateEffect);
    expect(err).toMatchObject({ state: 'in_progress' });
    await live.close();

    // Past the lease: reads, listings and reopening never transition it.
    let store = await createBetterSqlite3Store(crashed.path, { clock: crashed.after });
    const record = await store.getEffect(crashed.effectKey);
    expect(record).toMatchObject({ state: 'executing', actionId: crashed.actionId, attempt: 1, error: null });
    expect(parseTime(record!.leaseExpiresAt!).getTime()).toBeLessThan(crashed.after().getTime()); // executing (lease expired)
    expect((await store.listEffects('executing')).map((r) => r.effectKey)).toEqual([crashed.effectKey]);
    expect(await store.listEffects('ambiguous')).toEqual([]);
    // Other work on the same store sweeps nothing either.
    const other = createAction({ name: 'crash.refund', arguments: { reference: 'unrelated', amount: 100 }, principal: PROCESS_PRINCIPAL });
    await control(store, crashed.after).execute(other, () => ({ ok: true }));
    await store.close();
    store = await createBetterSqlite3Store(crashed.path, { clock: crashed.after });
    expect(await store.getEffect(crashed.effectKey)).toEqual(record);
    expect(calls.n).toBe(0);
    await store.close();
  });

  it('test_T159_the_lapsed_record_becomes_ambiguous_survives_restart_and_refuses_a_blind_retry', async () => {
    const crashed = await crash();
    const calls = { n: 0 };
    let store = await createBetterSqlite3Store(crashed.path, { clock: crashed.after });
    const err = await rejection(retry(control(store, crashed.after), crashed, calls));
    expect(err).toBeInstanceOf(AmbiguousEffect);
    expect(err).toMatchObject({ code: 'ERR_AMBIGUOUS_EFFECT', effectKey: crashed.effectKey, actionId: crashed.actionId });
    const ambiguous = await store.getEffect(crashed.effectKey);
    expect(ambiguous).toMatchObject({
      state: 'ambiguous',
      actionId: crashed.actionId,
      attempt: 1,
      leaseExpiresAt: null,
      error: LEASE_EXPIRED,
      resolvedBy: null,
    });
    await store.close();
    // A restart (a new handle, later still) finds it ambiguous and refuses again; nothing ran.
    const later = new Date(crashed.after().getTime() + 24 * 3600_000);
    store = await createBetterSqlite3Store(crashed.path, { clock: () => later });
    expect(await store.getEffect(crashed.effectKey)).toEqual(ambiguous);
    expect(
      await rejection(
        retry(
          control(store, () => later),
          crashed,
          calls,
        ),
      ),
    ).toBeInstanceOf(AmbiguousEffect);
    expect(await store.getEffect(crashed.effectKey)).toEqual(ambiguous);
    expect(calls.n, 'the executor never ran again').toBe(0);
    await store.close();
  });

  it('test_T161_a_human_resolution_moves_it_and_records_who', async () => {
    const crashed = await crash();
    const calls = { n: 0 };
    const store = await createBetterSqlite3Store(crashed.path, { clock: crashed.after });
    const c = control(store, crashed.after);
    await rejection(retry(c, crashed, calls));
    const resolved = await c.resolveEffect(crashed.effectKey, 'failed', { by: 'cli:local' });
    expect(resolved).toMatchObject({ state: 'failed', resolvedBy: 'cli:local', error: `resolved failed by cli:local (was: ${LEASE_EXPIRED})` });
    expect(await store.getEffect(crashed.effectKey)).toMatchObject({ state: 'failed', resolvedBy: 'cli:local', actionId: crashed.actionId });
    const events = (await store.events()).filter((e) => e.type === 'EFFECT_RESOLVED');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ effectKey: crashed.effectKey, data: { state: 'failed', resolver: 'cli:local', resolved_by: 'human' } });
    // resolved failed permits the retry: attempt 2 runs once.
    await retry(c, crashed, calls);
    expect(calls.n).toBe(1);
    expect(await store.getEffect(crashed.effectKey)).toMatchObject({ state: 'committed', attempt: 2, resolvedBy: null });
    // No receipt carries resolved_by.
    const receipts = await store.receipts();
    expect(receipts.length).toBeGreaterThan(0);
    for (const r of receipts) expect(r.json).not.toContain('resolved_by');
    await store.close();
  });

  it('test_T162_no_host_or_pid_is_stored', async () => {
    const crashed = await crash();
    const store = await createBetterSqlite3Store(crashed.path, { clock: crashed.after });
    await rejection(retry(control(store, crashed.after), crashed, { n: 0 }));
    const { db } = store.driver;
    const columns = (table: string) => (db.prepare(`SELECT name FROM pragma_table_info('${table}')`).all() as { name: string }[]).map((c) => c.name);
    expect(columns('effects')).toEqual([
      'effect_key',
      'state',
      'action_id',
      'attempt',
      'lease_expires_at',
      'result_json',
      'error',
      'created_at',
      'updated_at',
      'resolved_by',
    ]);
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as { name: string }[]).map(
      (t) => t.name,
    );
    const host = hostname();
    for (const table of tables) {
      for (const column of columns(table)) expect(column, `${table}.${column}`).not.toMatch(/host|pid|holder|owner|worker/i);
      for (const row of db.prepare(`SELECT * FROM "${table}"`).all() as Record<string, unknown>[]) {
        for (const [column, value] of Object.entries(row)) {
          const text = String(value);
          expect(text === String(crashed.pid), `${table}.${column} holds the worker's pid`).toBe(false);
          if (host.length >= 4) expect(text.includes(host), `${table}.${column} holds the host name`).toBe(false);
          expect(text, `${table}.${column}`).not.toMatch(/"(host|hostname|pid|holder)"\s*:/);
        }
      }
    }
    await store.close();
  });
});
