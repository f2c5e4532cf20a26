/**
 * The fault campaigns per store, sized by a scale (the CI slice is 1; `npm run soak` passes
 * FAULTS_OPS / FAULTS_SCALE), shared by the test file and the soak script.
 */
import type { CampaignOptions, ClientHost } from './harness.js';

export type StoreKind = 'sqlite-processes' | 'sqlite-threads' | 'sqlite-full-disk' | 'pglite' | 'postgres' | 'postgres-two-hosts';

/** CI-slice operations per store at scale 1 (a loaded 2-core machine runs all three in about 3 minutes). */
export const SLICE_OPS: Record<StoreKind, number> = {
  'sqlite-processes': 1200,
  'sqlite-threads': 600,
  'sqlite-full-disk': 600,
  pglite: 160,
  postgres: 800,
  'postgres-two-hosts': 400,
};

/**
 * The campaign for `kind` on `url`, with about `operations` operations in total (`sqlite-full-disk`:
 * `smallDisk` is the small file system `url`'s file is on, see disk.ts; `postgres-two-hosts`:
 * `hosts` are the hosts the clients run on, see test/support/netns.ts).
 */
export function campaign(
  kind: StoreKind,
  url: string,
  dir: string,
  operations: number,
  seed: number,
  stallMs: number,
  smallDisk?: string,
  hosts?: readonly ClientHost[],
): CampaignOptions {
  if (kind === 'sqlite-full-disk' && !smallDisk) throw new Error('sqlite-full-disk needs the small disk its store is on');
  if (kind === 'postgres-two-hosts' && !hosts?.length) throw new Error('postgres-two-hosts needs the hosts its clients run on');
  const clients = kind === 'pglite' ? 1 : 4;
  return {
    name: kind,
    url,
    dir,
    operator: kind === 'pglite' ? 'embedded' : 'separate',
    clients,
    // sqlite-threads: three clients are worker threads of the harness's process, one a process.
    threads: kind === 'sqlite-threads' ? 3 : 0,
    concurrency: kind === 'pglite' ? 4 : 1,
    opsPerClient: Math.max(1, Math.ceil(operations / clients)),
    // Keys collide: about three operations per ref.
    refs: Math.max(10, Math.ceil(operations / 3)),
    // PGlite restarts take seconds (WASM start-up): fewer kills there.
    killRate: kind === 'pglite' ? 0.015 : 0.02,
    externalKillEveryMs: kind === 'pglite' ? 0 : 4000,
    jumpRate: 0.02,
    maxJumpMs: 90_000,
    // PostgreSQL: a COMMIT lost about every half second (dropped, or landed with its reply
    // withheld), and every connection cut about every 6 s.
    lostCommitEveryMs: kind === 'postgres' ? 500 : 0,
    cutEveryMs: kind === 'postgres' ? 6000 : 0,
    // The store's disk filled to ENOSPC about 1.5 s after it was last freed, for 1 s each time.
    ...(kind === 'sqlite-full-disk' ? { fullDisk: { dir: smallDisk!, everyMs: 1500, forMs: 1000 } } : {}),
    // Two hosts: partitioned in turn from the server about every second, for 0.5 s, mid-COMMIT
    // or wherever its clients are (its connections closed on the server's side). The CI slice
    // runs for about 6 s on a quiet machine: every 2 s left one host uncut in one run of two.
    ...(kind === 'postgres-two-hosts' ? { hosts: { list: hosts!, everyMs: 1000, forMs: 500 } } : {}),
    leaseMs: 60_000,
    answerWaitMs: 3000,
    stallMs,
    seed,
  };
}
