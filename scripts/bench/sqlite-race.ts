// Contention on one SQLite file, measured in one run: 8 OS processes race on 500 shared keys
// through Control.execute (4,000 calls: each key executes once, every other call is refused),
// against the same 4,000 calls made one after another by a single process. Timed from each
// worker's barrier release to its last call, so process start-up is not counted.
import { join } from 'node:path';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { lastLine, PROGRESS_EVERY, RENDEZVOUS_TIMEOUT_S, runAll, tempDir } from '../../test/processes/harness.js';

const PROCESSES = 8;
const KEYS = 500;
const work = tempDir('bench-race');
process.on('exit', () => work.remove());

interface Report {
  executed: number;
  duplicate_committed: number;
  duplicate_in_progress: number;
  ambiguous: number;
  doubles: number;
  other: Record<string, number>;
  elapsed_ms: number;
  started_at: number;
}

async function run(name: string, workers: number, keysPerWorker: (keys: string[]) => string[]): Promise<{ calls: number; executed: number; seconds: number }> {
  const path = join(work.dir, `${name}.db`);
  const store = await createBetterSqlite3Store(path);
  const marker = tempDir(`bench-${name}-marker`);
  const rendezvous = tempDir(`bench-${name}-rendezvous`);
  const keys = Array.from({ length: KEYS }, (_, i) => `key-${i}`);
  try {
    const finished = await runAll(
      Array.from({ length: workers }, () => ({
        kind: 'execute-many' as const,
        url: store.url,
        keys: keysPerWorker(keys),
        marker_dir: marker.dir,
        rendezvous_dir: rendezvous.dir,
        contenders: workers,
        rendezvous_timeout: RENDEZVOUS_TIMEOUT_S,
        progress_every: PROGRESS_EVERY,
      })),
    );
    const reports = finished.map(lastLine) as unknown as Report[];
    const doubles = reports.reduce((s, r) => s + r.doubles, 0);
    const executed = reports.reduce((s, r) => s + r.executed, 0);
    if (doubles !== 0 || executed !== KEYS) throw new Error(`${name}: ${executed} executions, ${doubles} doubles: ${JSON.stringify(reports)}`);
    const calls = reports.reduce(
      (s, r) => s + r.executed + r.duplicate_committed + r.duplicate_in_progress + r.ambiguous + Object.values(r.other).reduce((a, b) => a + b, 0),
      0,
    );
    const begin = Math.min(...reports.map((r) => r.started_at));
    const end = Math.max(...reports.map((r) => r.started_at + r.elapsed_ms));
    return { calls, executed, seconds: (end - begin) / 1000 };
  } finally {
    await store.close();
    marker.remove();
    rendezvous.remove();
  }
}

// The same 4,000 calls: one process making every process's calls in turn, then eight at once.
const sequential = await run('sequential', 1, (keys) => keys.flatMap((k) => Array.from({ length: PROCESSES }, () => k)));
const racing = await run('race', PROCESSES, (keys) => keys);

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const seqRate = sequential.calls / sequential.seconds;
const raceRate = racing.calls / racing.seconds;
console.log(
  `sequential, 1 process           ${fmt(seqRate)} calls/s   ${sequential.calls} calls on ${KEYS} keys (${sequential.executed} executed, the rest refused), ${sequential.seconds.toFixed(2)} s`,
);
console.log(
  `racing, ${PROCESSES} processes            ${fmt(raceRate)} calls/s   the same calls, ${PROCESSES} processes on shared keys, ${racing.seconds.toFixed(2)} s; every key executed once`,
);
console.log(`ratio racing / sequential       ${((raceRate / seqRate) * 100).toFixed(0)}%   (target ≥ 25%: contention must not collapse throughput)`);
