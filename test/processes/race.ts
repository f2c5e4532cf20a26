/**
 * The shared-keys race, for any store a worker can open by URL: `processes` real OS processes
 * race on `keys` shared effect keys through `Control.execute`. The executor is the judge: each
 * execution exclusive-creates `marker/<key>`, so a second execution of a key would fail with
 * EEXIST and be counted. Every key must execute exactly once, every other call be refused as a
 * duplicate, and the receipt chain the processes wrote must verify without a gap.
 */
import { verifyChain, type StateStore } from '@ctrlrun/kernel';
import { expect } from 'vitest';
import { files, lastLine, PROGRESS_EVERY, RENDEZVOUS_TIMEOUT_S, runAll, tempDir } from './harness.js';

/** Runs the race on `store` (already created and migrated), the workers opening it at `url`, and asserts the outcome. */
export async function raceSharedKeys(store: StateStore, url: string, opts: { processes: number; keys: number; tempPrefix: string }): Promise<void> {
  const { processes: PROCESSES, keys: KEYS } = opts;
  const marker = tempDir(`${opts.tempPrefix}-marker`);
  const rendezvous = tempDir(`${opts.tempPrefix}-rendezvous`);
  try {
    const keys = Array.from({ length: KEYS }, (_, i) => `key-${i}`);
    const finished = await runAll(
      Array.from({ length: PROCESSES }, () => ({
        kind: 'execute-many' as const,
        url,
        keys,
        marker_dir: marker.dir,
        rendezvous_dir: rendezvous.dir,
        contenders: PROCESSES,
        rendezvous_timeout: RENDEZVOUS_TIMEOUT_S,
        progress_every: PROGRESS_EVERY,
      })),
    );
    const reports = finished.map(lastLine) as unknown as {
      executed: number;
      duplicate_committed: number;
      duplicate_in_progress: number;
      ambiguous: number;
      doubles: number;
      other: Record<string, number>;
    }[];
    const sum = (k: 'executed' | 'duplicate_committed' | 'duplicate_in_progress' | 'ambiguous' | 'doubles') => reports.reduce((s, r) => s + r[k], 0);
    const seen = JSON.stringify(reports);
    expect(
      files(rendezvous.dir).filter((f) => f.startsWith('arrived-')),
      'every worker reached the barrier',
    ).toHaveLength(PROCESSES);
    expect(sum('doubles'), `no key executed twice: ${seen}`).toBe(0);
    expect(sum('executed'), `every key executed once: ${seen}`).toBe(KEYS);
    expect(files(marker.dir), 'the executor ran once per key').toEqual(keys.map((k) => `race:${k}`).sort());
    expect(sum('ambiguous'), `nothing ambiguous without a crash: ${seen}`).toBe(0);
    expect(
      reports.map((r) => r.other),
      `no other refusal: ${seen}`,
    ).toEqual(reports.map(() => ({})));
    expect(sum('executed') + sum('duplicate_committed') + sum('duplicate_in_progress'), 'every call answered').toBe(PROCESSES * KEYS);

    // The store agrees: one committed record per key, and one receipt per call in one unbroken chain.
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
    marker.remove();
    rendezvous.remove();
  }
}
