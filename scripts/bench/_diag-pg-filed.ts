// Diagnostic (not a bench section): PostgreSQL, 8 callers, this checkout against the code as it
// was when the throughput issue was filed — its default path, built from that commit, not the
// concurrency section's stand-in for it ("the path before", which keeps every later change but
// group commit and the reservation standing alone). Both run in one process on one throwaway
// cluster (fsync on), each on a schema of its own, in interleaved slices, so the machine's load
// weighs on both alike.
//
//   tsx scripts/bench/_diag-pg-filed.ts [commit]     (default 3398c0a, the parent of group commit)
//
// The commit is checked out as a git worktree in a temp folder, with a node_modules that links
// this checkout's dependencies and its own workspace packages, and built with `tsc -b` (a few
// minutes the first time; kept in $TMPDIR/ctrlrun-filed-<commit> for the next run).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { Control, createAction, type StateStore } from '@ctrlrun/kernel';
import { createPgStore } from '@ctrlrun/store-node/pg';
import { findServerBinaries, freshDatabase, startCluster } from '../../test/support/pg-cluster.js';
import { ALLOW_REFUND_POLICY as policy, BENCH_PRINCIPAL as principal, ALLOW_REFUND_YAML } from './_allowed-refund.js';

const commit = process.argv[2] ?? '3398c0a';
const CALLERS = Number(process.env['DIAG_CALLERS'] ?? 8);
const ROUNDS = Number(process.env['DIAG_ROUNDS'] ?? 10);
const SLICE_MS = Number(process.env['DIAG_SLICE_MS'] ?? 1500);
const here = resolve(import.meta.dirname, '../..');

/** The worktree of `commit`, built, with a node_modules of its own (this checkout's dependencies, its own packages). */
function filedTree(): string {
  const root = join(tmpdir(), `ctrlrun-filed-${commit}`);
  if (!existsSync(join(root, 'packages/store-node/dist/pg.js'))) {
    if (!existsSync(root)) execFileSync('git', ['-C', here, 'worktree', 'add', '--detach', root, commit], { stdio: 'inherit' });
    const modules = join(root, 'node_modules');
    if (!existsSync(modules)) {
      mkdirSync(join(modules, '@ctrlrun'), { recursive: true });
      for (const entry of readdirSync(join(here, 'node_modules'))) {
        if (entry !== '@ctrlrun') symlinkSync(join(here, 'node_modules', entry), join(modules, entry));
      }
      for (const dir of readdirSync(join(root, 'packages'))) {
        const name = (JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8')) as { name: string }).name;
        symlinkSync(join(root, 'packages', dir), join(modules, name));
      }
    }
    console.log(`building ${commit} in ${root} (tsc -b) …`);
    execFileSync(process.execPath, [join(here, 'node_modules/typescript/bin/tsc'), '-b'], { cwd: root, stdio: 'inherit' });
  }
  return root;
}

type Open = (pool: pg.Pool, options: { schema: string; logger: { warn(): void } }) => Promise<StateStore>;
/** One measured thing: `run(ms)` keeps {@link CALLERS} callers busy for `ms` and resolves to how many actions (or commits) finished. */
interface Subject {
  readonly label: string;
  run(ms: number): Promise<number>;
  actions: number;
  secs: number;
  /** This process's CPU seconds (user + system) over the slices. */
  cpu: number;
  /** The whole machine's busy CPU seconds (every process, the server's included) over the slices. */
  busy: number;
}

/** The machine's busy CPU seconds so far (every core, everything but idle). */
function machineBusy(): number {
  let ms = 0;
  for (const c of cpus()) ms += c.times.user + c.times.nice + c.times.sys + c.times.irq;
  return ms / 1000;
}

/** {@link CALLERS} loops, caller `c` calling `one(i, c)` until `ms` has passed; how many calls finished. */
async function loops(ms: number, one: (i: number, caller: number) => Promise<unknown>): Promise<number> {
  let n = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CALLERS }, async (_, c) => {
      while (performance.now() - start < ms) await one(n++, c);
    }),
  );
  return n;
}

/** Allowed actions on distinct keys through `control`. */
function actions(label: string, control: { execute(action: never, fn: () => unknown): Promise<unknown> }, create: (id: string) => unknown): Subject {
  let slices = 0;
  return {
    label,
    run: (ms) => {
      const tag = `s${slices++}`;
      return loops(ms, (i) => control.execute(create(`${tag}_${i}`) as never, () => ({ ok: true })));
    },
    actions: 0,
    secs: 0,
    cpu: 0,
    busy: 0,
  };
}

async function slice(s: Subject, ms: number): Promise<void> {
  const start = performance.now();
  const cpu = process.cpuUsage();
  const busy = machineBusy();
  s.actions += await s.run(ms);
  s.secs += (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  s.cpu += (used.user + used.system) / 1e6;
  s.busy += machineBusy() - busy;
}

const root = filedTree();
const old = {
  kernel: (await import(pathToFileURL(join(root, 'packages/kernel/dist/index.js')).href)) as typeof import('@ctrlrun/kernel'),
  pg: (await import(pathToFileURL(join(root, 'packages/store-node/dist/pg.js')).href)) as { createPgStore: Open },
};

let url = process.env['PG_URL'] ?? null;
let cluster: Awaited<ReturnType<typeof startCluster>> | null = null;
if (url === null) {
  if (findServerBinaries() === null) throw new Error('no PG_URL and no PostgreSQL server binaries');
  cluster = await startCluster({ durable: true });
  url = cluster.url;
}
const db = await freshDatabase(url, 'diag_filed');
const pools: pg.Pool[] = [];
const stores: StateStore[] = [];
const pool = () => {
  const p = new pg.Pool({ connectionString: db.url, max: 40 });
  p.on('error', () => undefined);
  pools.push(p);
  return p;
};
const subjects: Subject[] = [];
try {
  await db.createSchema('filed');
  const filedStore = await old.pg.createPgStore(pool(), { schema: 'filed', logger: { warn() {} } });
  stores.push(filedStore);
  const filedControl = new old.kernel.Control({ policy: old.kernel.loadPolicy(ALLOW_REFUND_YAML), store: filedStore as never, logger: { warn() {} } });
  subjects.push(
    actions(`${commit} (filed), its default`, filedControl, (id) =>
      old.kernel.createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 500 }, principal }),
    ),
  );
  await db.createSchema('head');
  const headStore = await createPgStore(pool(), { schema: 'head', logger: { warn() {} } });
  stores.push(headStore);
  const headControl = new Control({ policy, store: headStore, logger: { warn() {} } });
  subjects.push(
    actions('this checkout, its default', headControl, (id) => createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 500 }, principal })),
  );
  // The shared-row commit floor, as the concurrency section measures it: one row updated in its own
  // transaction by each caller on a connection of its own — what every receipt's chain head costs at
  // the least, so no store that chains each receipt through one head row commits faster.
  await db.createSchema('floor');
  await db.sql('CREATE TABLE floor.head(id INTEGER PRIMARY KEY, n BIGINT NOT NULL, v TEXT)');
  await db.sql('INSERT INTO floor.head VALUES (1, 0, NULL)');
  const floorPool = pool();
  subjects.push({
    label: 'shared-row commit floor',
    run: async (ms) => {
      const clients = await Promise.all(Array.from({ length: CALLERS }, () => floorPool.connect()));
      try {
        return await loops(ms, (i, c) => clients[c]!.query({ text: 'UPDATE floor.head SET n = n + 1, v = $1 WHERE id = 1', values: [String(i)] }));
      } finally {
        for (const client of clients) client.release();
      }
    },
    actions: 0,
    secs: 0,
    cpu: 0,
    busy: 0,
  });
  for (const s of subjects) await slice(s, 300); // warm-up
  for (const s of subjects) ((s.actions = 0), (s.secs = 0), (s.cpu = 0), (s.busy = 0));
  for (let r = 0; r < ROUNDS; r++) for (const s of r % 2 === 0 ? subjects : [...subjects].reverse()) await slice(s, SLICE_MS);
  console.log(`PostgreSQL ${cluster?.version ?? 'PG_URL'}, ${CALLERS} callers, ${ROUNDS} rounds of ${SLICE_MS} ms each, interleaved`);
  const rate = subjects.map((s) => s.actions / s.secs);
  for (let i = 0; i < subjects.length; i++) {
    const s = subjects[i]!;
    const each = ((s.cpu / s.actions) * 1e6).toFixed(0);
    console.log(
      `  ${s.label.padEnd(36)} ${Math.round(rate[i]!).toLocaleString('en-US').padStart(7)}/s   this process ${each} µs CPU each, ${(s.cpu / s.secs).toFixed(2)} of a core; the machine ${(s.busy / s.secs).toFixed(2)} of ${cpus().length}`,
    );
  }
  console.log(`  ratio this checkout / filed          ${(rate[1]! / rate[0]!).toFixed(2)}x   (the issue's target: 3x)`);
  console.log(`  ratio this checkout / floor          ${((rate[1]! / rate[2]!) * 100).toFixed(0)}%    (the issue's target: >= 50%)`);
  console.log(
    `  (load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')})`,
  );
} finally {
  for (const s of stores) await s.close();
  for (const p of pools) await p.end();
  await db.drop();
  await cluster?.stop();
}
