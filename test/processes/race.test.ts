/**
 * Eight real OS processes race on 500 shared effect keys through `Control.execute` on one SQLite
 * file. The executor is the judge: each execution exclusive-creates `marker/<key>`, so a second
 * execution of a key would fail with EEXIST and be counted. Every key must execute exactly once,
 * every other call be refused as a duplicate, and the receipt chain written by eight processes
 * must verify without a gap.
 */
import { join } from 'node:path';
import { verifyChain } from '@ctrlrun/kernel';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { afterAll, expect, it } from 'vitest';
import { files, lastLine, RENDEZVOUS_TIMEOUT_S, runAll, tempDir } from './harness.js';

const PROCESSES = 8;
const KEYS = 500;
const work = tempDir('race');
afterAll(() => work.remove());

it('test_8_processes_x_500_shared_keys_each_key_executes_exactly_once', { timeout: 120_000 }, async () => {
  const path = join(work.dir, 'race.db');
  const store = await createBetterSqlite3Store(path); // created and migrated before any worker opens it
  const marker = tempDir('race-marker');
  const rendezvous = tempDir('race-rendezvous');
  try {
    const keys = Array.from({ length: KEYS }, (_, i) => `key-${i}`);
    const finished = await runAll(
      Array.from({ length: PROCESSES }, () => ({
        kind: 'execute-many' as const,
        url: store.url,
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

    // The store agrees: 500 committed records, and one receipt per call in one unbroken chain.
    const records = await store.listEffects();
    expect(records).toHaveLength(KEYS);
    expect(records.every((r) => r.state === 'committed' && r.attempt === 1)).toBe(true);
    const receipts = await store.receipts();
    expect(receipts).toHaveLength(PROCESSES * KEYS);
    expect(receipts.filter((r) => r.result === 'committed')).toHaveLength(KEYS);
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
