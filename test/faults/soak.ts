/**
 * `npm run soak`: the fault campaigns at length, per store, and a table of the figures
 * (operations, faults by kind, anomalies) for docs/reliability.md.
 *
 *   FAULTS_OPS=100000 npm run soak                          # every store, 100,000 operations each
 *   FAULTS_OPS=5000 FAULTS_STORES=sqlite-processes npm run soak
 *   FAULTS_OPS=100000 FAULTS_MINUTES=40 npm run soak        # stop starting rounds after 40 minutes per store
 *
 * PostgreSQL: PG_URL (a superuser URL) or a throwaway cluster started from the installed server
 * binaries (test/support/pg-cluster.ts). The figures are printed as JSON lines and as a
 * Markdown table, and written to test-artifacts/faults/soak-<time>.json after every round (a run
 * cut short keeps the figures of the rounds it finished).
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freshDatabase, startCluster, type PgCluster } from '../support/pg-cluster.js';
import { campaign, type StoreKind } from './campaigns.js';
import { mountSmallDisk } from './disk.js';
import { durableObjectCampaign, runDurableObjectCampaign } from './durable-object.js';
import { runCampaign, type CampaignResult } from './harness.js';

const OPS = Number(process.env['FAULTS_OPS'] ?? 100_000);
const SEED = Number(process.env['FAULTS_SEED'] ?? Date.now() % 1_000_000);
const STORES = (process.env['FAULTS_STORES'] ?? 'sqlite-processes,postgres,pglite,durable-object').split(',') as (StoreKind | 'durable-object')[];
/** Each campaign runs in rounds of this many operations (a fresh store each), so histories stay a size the checker reads quickly. */
const ROUND = Number(process.env['FAULTS_ROUND'] ?? 5000);
/** Per store, no new round starts after this many minutes (0: no limit): the figures say how far it got. */
const MINUTES = Number(process.env['FAULTS_MINUTES'] ?? 0);

const out = join(import.meta.dirname, '..', '..', 'test-artifacts', 'faults');
mkdirSync(out, { recursive: true });
const artifact = join(out, `soak-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
const command = `FAULTS_OPS=${OPS} FAULTS_SEED=${SEED} FAULTS_STORES=${STORES.join(',')} FAULTS_ROUND=${ROUND}${MINUTES ? ` FAULTS_MINUTES=${MINUTES}` : ''} npm run soak`;
const save = (results: readonly CampaignResult[]) => writeFileSync(artifact, `${JSON.stringify({ seed: SEED, ops: OPS, command, results }, null, 2)}\n`);

/** A PostgreSQL round's store tables as JSON files in `dir` (the database is dropped after the round). */
async function dumpTables(url: string, dir: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const table of ['events', 'effects', 'approvals', 'receipts']) {
      const { rows } = await client.query(`SELECT * FROM ${table}`);
      writeFileSync(join(dir, `${table}.json`), `${JSON.stringify(rows, null, 1)}\n`);
    }
  } finally {
    await client.end();
  }
}

const results: CampaignResult[] = [];
let cluster: PgCluster | null = null;
try {
  for (const kind of STORES) {
    let adminUrl: string | null = null;
    if (kind === 'postgres') {
      adminUrl = process.env['PG_URL'] ?? (cluster ??= await startCluster()).url;
    }
    const total: { -readonly [K in keyof CampaignResult]: CampaignResult[K] } = {
      name: kind,
      operations: 0,
      outcomes: {},
      faults: {},
      answersWithoutEvent: 0,
      incarnations: 0,
      anomalies: [],
      upstreamRuns: 0,
      elapsedMs: 0,
    };
    const storeStarted = Date.now();
    for (let done = 0, round = 0; done < OPS; round++) {
      if (MINUTES > 0 && Date.now() - storeStarted > MINUTES * 60_000) {
        console.log(JSON.stringify({ store: kind, stopped: `time limit of ${MINUTES} minutes`, total: total.operations }));
        break;
      }
      const ops = Math.min(ROUND, OPS - done);
      const dir = mkdtempSync(join(tmpdir(), `ctrlrun-soak-${kind}-`));
      const db = adminUrl ? await freshDatabase(adminUrl, 'soak') : null;
      // sqlite-full-disk: the store on a small tmpfs of its own (root only; else the soak stops saying why).
      const disk = kind === 'sqlite-full-disk' ? mountSmallDisk(64) : null;
      if (disk && 'skip' in disk) throw new Error(`sqlite-full-disk: ${disk.skip}`);
      const storeDir = disk ? disk.dir : dir;
      const url = kind.startsWith('sqlite-')
        ? `sqlite:${join(storeDir, 'store.db')}`
        : kind === 'pglite'
          ? `pglite:${join(dir, 'pgdata')}`
          : kind === 'durable-object'
            ? ''
            : db!.url;
      try {
        const r =
          kind === 'durable-object'
            ? await runDurableObjectCampaign(durableObjectCampaign(dir, ops, SEED + round))
            : await runCampaign({ ...campaign(kind, url, dir, ops, SEED + round, 10 * 60_000, disk?.dir), lateCommits: true, log: () => undefined });
        if (r.anomalies.length > 0) {
          // Keep what the checker read: the history, the upstream's ledger and the store.
          const kept = join(out, `round-${kind}-${SEED + round}`);
          writeFileSync(join(dir, 'anomalies.json'), `${JSON.stringify(r.anomalies, null, 2)}\n`);
          if (db) await dumpTables(db.url, dir);
          if (disk) cpSync(disk.dir, join(dir, 'store'), { recursive: true });
          cpSync(dir, kept, { recursive: true });
          console.log(JSON.stringify({ store: kind, round, kept }));
        }
        total.operations += r.operations;
        total.incarnations += r.incarnations;
        total.upstreamRuns += r.upstreamRuns;
        total.answersWithoutEvent += r.answersWithoutEvent;
        total.elapsedMs += r.elapsedMs;
        total.anomalies.push(...r.anomalies);
        for (const [k, v] of Object.entries(r.outcomes)) total.outcomes[k] = (total.outcomes[k] ?? 0) + v;
        for (const [k, v] of Object.entries(r.faults)) total.faults[k] = (total.faults[k] ?? 0) + v;
        done += Math.max(1, r.operations);
        console.log(
          JSON.stringify({
            store: kind,
            round,
            operations: r.operations,
            total: total.operations,
            anomalies: r.anomalies,
            faults: r.faults,
            answersWithoutEvent: r.answersWithoutEvent,
            seconds: Math.round(r.elapsedMs / 1000),
          }),
        );
        save([...results, total]);
      } finally {
        await db?.drop();
        disk?.unmount();
        rmSync(dir, { recursive: true, force: true });
      }
    }
    results.push(total);
  }
} finally {
  await cluster?.stop();
}

save(results);
console.log(`\n${command}`);
console.log('\n| store | operations | faults injected | anomalies | minutes |\n|---|---|---|---|---|');
for (const r of results) {
  const faults = Object.entries(r.faults)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  console.log(`| ${r.name} | ${r.operations} | ${faults} | ${r.anomalies.length} | ${(r.elapsedMs / 60_000).toFixed(1)} |`);
}
if (results.some((r) => r.anomalies.length > 0)) process.exitCode = 1;
