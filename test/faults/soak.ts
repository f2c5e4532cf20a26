/**
 * `npm run soak`: the fault campaigns at length, per store, and a table of the figures
 * (operations, faults by kind, anomalies) for docs/reliability.md.
 *
 *   FAULTS_OPS=100000 npm run soak                          # every store, 100,000 operations each
 *   FAULTS_OPS=5000 FAULTS_STORES=sqlite-processes npm run soak
 *
 * PostgreSQL: PG_URL (a superuser URL) or a throwaway cluster started from the installed server
 * binaries (test/support/pg-cluster.ts). The figures are printed as JSON lines and as a
 * Markdown table, and written to test-artifacts/faults/soak-<time>.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase, startCluster, type PgCluster } from '../support/pg-cluster.js';
import { campaign, type StoreKind } from './campaigns.js';
import { runCampaign, type CampaignResult } from './harness.js';

const OPS = Number(process.env['FAULTS_OPS'] ?? 100_000);
const SEED = Number(process.env['FAULTS_SEED'] ?? Date.now() % 1_000_000);
const STORES = (process.env['FAULTS_STORES'] ?? 'sqlite-processes,postgres,pglite').split(',') as StoreKind[];
/** Each campaign runs in rounds of this many operations (a fresh store each), so histories stay a size the checker reads quickly. */
const ROUND = Number(process.env['FAULTS_ROUND'] ?? 5000);

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
      incarnations: 0,
      anomalies: [],
      upstreamRuns: 0,
      elapsedMs: 0,
    };
    for (let done = 0, round = 0; done < OPS; round++) {
      const ops = Math.min(ROUND, OPS - done);
      const dir = mkdtempSync(join(tmpdir(), `ctrlrun-soak-${kind}-`));
      const db = adminUrl ? await freshDatabase(adminUrl, 'soak') : null;
      const url = kind === 'sqlite-processes' ? `sqlite:${join(dir, 'store.db')}` : kind === 'pglite' ? `pglite:${join(dir, 'pgdata')}` : db!.url;
      try {
        const r = await runCampaign({ ...campaign(kind, url, dir, ops, SEED + round, 10 * 60_000), log: () => undefined });
        total.operations += r.operations;
        total.incarnations += r.incarnations;
        total.upstreamRuns += r.upstreamRuns;
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
            seconds: Math.round(r.elapsedMs / 1000),
          }),
        );
      } finally {
        await db?.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    }
    results.push(total);
  }
} finally {
  await cluster?.stop();
}

const out = join(import.meta.dirname, '..', '..', 'test-artifacts', 'faults');
mkdirSync(out, { recursive: true });
writeFileSync(join(out, `soak-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), `${JSON.stringify({ seed: SEED, ops: OPS, results }, null, 2)}\n`);
console.log('\n| store | operations | faults injected | anomalies | minutes |\n|---|---|---|---|---|');
for (const r of results) {
  const faults = Object.entries(r.faults)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  console.log(`| ${r.name} | ${r.operations} | ${faults} | ${r.anomalies.length} | ${(r.elapsedMs / 60_000).toFixed(1)} |`);
}
if (results.some((r) => r.anomalies.length > 0)) process.exitCode = 1;
