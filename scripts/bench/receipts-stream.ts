// The CLI's streamed receipt views, measured (not a timed test): writes a SQLite store with N valid
// chained receipts (sealed by the kernel, inserted bare in one transaction), then runs the built
// `ctrlrun` (packages/cli/dist, so run `npx tsc -b` first) under `/usr/bin/time -v` for
// `receipts --verify-chain`, `receipts` (the newest page), `receipts --all --json`, `effects` and
// `effects --all` (as many effect records), and prints
// wall time, receipts/s and the peak RSS of each. Beside the CLI's verify figure it prints, in this
// process, the kernel's ChainVerifier over the store's pages and the floor for the same check: the
// same rows read bare in the same pages (better-sqlite3, the store's own SELECT) and SHA-256 over
// each stored json text by Node's crypto (the digest the Node stores give the kernel), nothing else.
//
//   npx tsc -b && node --import tsx scripts/bench/receipts-stream.ts [N ...]   (default 100000)
//   … receipts-stream.ts --seed PATH N   (only write the store)
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ChainVerifier, createAction, sequentialIds } from '@ctrlrun/kernel';
import { GENESIS_HASH, buildReceipt, sealReceipt, sqliteDialect } from '@ctrlrun/kernel/store';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';

const root = join(import.meta.dirname, '..', '..');
const cli = join(root, 'packages', 'cli', 'dist', 'bin.js');
if (!existsSync(cli)) throw new Error(`${cli} is missing: run npx tsc -b first`);

/** A store file holding `n` chained receipts and its head. */
async function seed(path: string, n: number): Promise<void> {
  await (await createBetterSqlite3Store(path)).close(); // migrated
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const insert = db.prepare(
    'INSERT INTO receipts(receipt_id, action_id, effect_key, result, json, ts, seq, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const action = createAction(
    {
      name: 'stripe.refund',
      arguments: { payment_id: 'txn_1', amount: 50000, currency: 'EUR' },
      principal: { agent: 'bench-agent', user: 'alice@example.com' },
    },
    { ids: sequentialIds() },
  );
  let prev = GENESIS_HASH;
  const write = db.transaction((from: number, to: number) => {
    for (let seq = from; seq <= to; seq++) {
      const at = new Date(Date.UTC(2026, 0, 1) + seq * 1000).toISOString();
      const draft = buildReceipt(action, {
        receiptId: `rcp_${String(seq).padStart(8, '0')}`,
        decision: 'allow',
        decisionReason: 'rule[0]',
        approvalId: null,
        approver: null,
        effectKey: `refund:txn_${seq}`,
        attempt: 1,
        result: 'committed',
        error: null,
        startedAt: at,
        finishedAt: at,
        policyHash: `sha256:${'a'.repeat(64)}`,
        policyVersion: '1',
        controls: ['SOC2-CC6.1'],
      });
      const sealed = sealReceipt(draft.document, seq, prev);
      insert.run(draft.receiptId, draft.actionId, draft.effectKey, draft.result, sealed.json, at, seq, prev, sealed.hash);
      prev = sealed.hash;
    }
  });
  for (let from = 1; from <= n; from += 50_000) write(from, Math.min(n, from + 49_999));
  // As many committed effect records, for the effects listing.
  const effect = db.prepare(
    "INSERT INTO effects(effect_key, state, action_id, attempt, lease_expires_at, result_json, error, created_at, updated_at) VALUES (?, 'committed', ?, 1, NULL, '{\"ok\":true}', NULL, ?, ?)",
  );
  db.transaction(() => {
    for (let i = 1; i <= n; i++) {
      const at = new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString().replace('Z', '+00:00');
      effect.run(`refund:txn_${i}`, `act_${String(i).padStart(32, '0')}`, at, at);
    }
  })();
  db.prepare('UPDATE receipt_chain SET seq = ?, hash = ? WHERE id = 1').run(n, prev);
  db.close();
}

/** Runs the CLI under /usr/bin/time -v: wall seconds, peak RSS in MB, exit code, stdout size. */
function measure(args: string[], dir: string): { s: number; cpu: number; mb: number; code: number; bytes: number } {
  // stdout goes to a file: a million receipts as JSON lines is more than one string can hold.
  const out = join(dir, 'stdout');
  const fd = openSync(out, 'w');
  const start = performance.now();
  const r = spawnSync('/usr/bin/time', ['-v', process.execPath, cli, ...args], { encoding: 'utf8', stdio: ['ignore', fd, 'pipe'] });
  const s = (performance.now() - start) / 1000;
  closeSync(fd);
  const bytes = statSync(out).size;
  rmSync(out);
  const kb = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(r.stderr)?.[1] ?? NaN);
  const cpu = Number(/User time \(seconds\): ([\d.]+)/.exec(r.stderr)?.[1] ?? NaN) + Number(/System time \(seconds\): ([\d.]+)/.exec(r.stderr)?.[1] ?? NaN);
  return { s, cpu, mb: kb / 1024, code: r.status ?? -1, bytes };
}

/** Rows per page, as the CLI reads them. */
const PAGE = 1000;

/** Wall and CPU seconds of `fn`, run in this process. */
async function timed(fn: () => Promise<void> | void): Promise<{ s: number; cpu: number }> {
  const start = performance.now();
  const cpu0 = process.cpuUsage();
  await fn();
  const cpu = process.cpuUsage(cpu0);
  return { s: (performance.now() - start) / 1000, cpu: (cpu.user + cpu.system) / 1e6 };
}

/** The kernel's streamed verification in this process: ChainVerifier over the store's pages. */
async function verifyInProcess(path: string): Promise<boolean> {
  const store = await createBetterSqlite3Store(path);
  try {
    const verifier = new ChainVerifier(await store.chainHead());
    for (let after: { seq: number; receiptId: string } | null = null; ;) {
      const page = await store.receiptsInChain!({ after, limit: PAGE });
      verifier.push(page);
      if (page.length < PAGE) break;
      const end = page[page.length - 1]!;
      after = { seq: end.seq as number, receiptId: end.receipt_id };
    }
    return verifier.finish().ok;
  } finally {
    await store.close();
  }
}

/**
 * The floor: the least any verifier must do, in the same pages — read the same rows with the
 * store's own SELECT (bare better-sqlite3, no row mapping) and SHA-256 (the kernel's hash
 * library) over each stored json text. No parse, no canonical form, no link or column check.
 */
function floor(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    const select = db.prepare(sqliteDialect.sql.receiptsInChain);
    let last = '';
    for (let after: [number, number, string] = [Number.MIN_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, '']; ;) {
      const page = select.all(...after, PAGE) as { seq: number; receipt_id: string; json: string }[];
      for (const row of page) last = `sha256:${createHash('sha256').update(row.json).digest('hex')}`;
      if (page.length < PAGE) break;
      const end = page[page.length - 1]!;
      after = [end.seq, end.seq, end.receipt_id];
    }
    return last;
  } finally {
    db.close();
  }
}

// `--seed PATH N` only writes the store (for profiling by hand).
if (process.argv[2] === '--seed') {
  await seed(process.argv[3]!, Number(process.argv[4]));
  process.exit(0);
}
const sizes = process.argv.slice(2).map(Number);
const load = (await import('node:os')).loadavg()[0]!.toFixed(1);
console.log(`load average ${load} on ${(await import('node:os')).availableParallelism()} cores`);
for (const n of sizes.length > 0 ? sizes : [100_000]) {
  const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-bench-receipts-'));
  try {
    const path = join(dir, 'state.db');
    const t0 = performance.now();
    await seed(path, n);
    console.log(`${n} receipts written in ${((performance.now() - t0) / 1000).toFixed(1)} s (${(statSync(path).size / 2 ** 20).toFixed(0)} MB file)`);
    const url = `sqlite:${path}`;
    // In this process, floor first then the kernel, then the floor again: the better of the two
    // floor runs is the bar (the first pays for a cold page cache and JIT).
    const floor1 = await timed(() => void floor(path));
    let ok = false;
    const kernel = await timed(async () => {
      ok = await verifyInProcess(path);
    });
    const floor2 = await timed(() => void floor(path));
    const bar = floor1.cpu < floor2.cpu ? floor1 : floor2;
    const rate = (t: { s: number; cpu: number }): string => `${Math.round(n / t.s)} receipts/s wall, ${Math.round(n / t.cpu)} per CPU-second`;
    console.log(`  floor (same rows and pages read bare, SHA-256 of each json): ${rate(bar)}`);
    console.log(
      `  ChainVerifier over the store, in process:                     ${rate(kernel)}, ${ok ? 'intact' : 'NOT INTACT'}; ${Math.round((100 * bar.cpu) / kernel.cpu)}% of the floor (CPU)`,
    );
    const verify = measure(['receipts', '--verify-chain', '--store-url', url], dir);
    // CPU seconds beside wall seconds: on a shared machine the wall figure measures the load too.
    console.log(
      `  receipts --verify-chain: ${verify.s.toFixed(1)} s wall (${Math.round(n / verify.s)} receipts/s), ${verify.cpu.toFixed(1)} s CPU (${Math.round(n / verify.cpu)} receipts per CPU-second), peak RSS ${verify.mb.toFixed(0)} MB, exit ${verify.code}`,
    );
    const newest = measure(['receipts', '--store-url', url], dir);
    console.log(`  receipts (newest page):  ${newest.s.toFixed(2)} s, peak RSS ${newest.mb.toFixed(0)} MB, exit ${newest.code}`);
    const all = measure(['receipts', '--all', '--json', '--store-url', url], dir);
    console.log(
      `  receipts --all --json:   ${all.s.toFixed(1)} s, peak RSS ${all.mb.toFixed(0)} MB, ${(all.bytes / 2 ** 20).toFixed(0)} MB written, exit ${all.code}`,
    );
    const effects = measure(['effects', '--store-url', url], dir);
    console.log(`  effects (newest page):   ${effects.s.toFixed(2)} s, peak RSS ${effects.mb.toFixed(0)} MB, exit ${effects.code}`);
    if (n > 200_000) {
      // Each SQLite effects page scans and sorts the whole table (no index on its keyset order), so
      // --all is quadratic: minutes at this size. Measured at 100,000.
      console.log('  effects --all:           not measured above 200,000 (each SQLite page scans the whole effects table)');
    } else {
      const allEffects = measure(['effects', '--all', '--store-url', url], dir);
      console.log(
        `  effects --all:           ${allEffects.s.toFixed(1)} s, peak RSS ${allEffects.mb.toFixed(0)} MB, ${(allEffects.bytes / 2 ** 20).toFixed(0)} MB written, exit ${allEffects.code}`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
