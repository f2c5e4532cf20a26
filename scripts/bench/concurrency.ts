// Concurrent callers of one Control, per store, measured in one run: 1, 8 and 32 callers on
// distinct keys, allowed actions/s and each call's latency (p50, p99) — with group commit and
// with one commit per outcome (`groupCommit: false`, the path before it) — beside the shared-row
// commit floor measured on the same store in the same run — one row updated in its own
// transaction, which is what every receipt's chain head costs at the least: the outcome commits
// of one chain queue on that row, so no number of callers commits receipts faster than it.
//
// Stores: a better-sqlite3 file (WAL, synchronous=NORMAL and FULL), a real PostgreSQL server (PG_URL, or a
// throwaway cluster started here with fsync on; skipped with the reason when neither exists), and
// PGlite in memory. Every figure is the mean over interleaved short slices (each subject takes a
// turn, round after round), so a change in the machine's load weighs on all of them alike. The
// machine may be shared: read the ratios, which survive load far better than the rates.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { Control, createAction, type StateStore } from '@ctrlrun/kernel';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { createPgStore } from '@ctrlrun/store-node/pg';
import { createPgliteStore } from '@ctrlrun/store-node/pglite';
import { findServerBinaries, freshDatabase, startCluster, type PgCluster } from '../../test/support/pg-cluster.js';
import { ALLOW_REFUND_POLICY as policy, BENCH_PRINCIPAL as principal } from './_allowed-refund.js';

const CALLERS = [1, 8, 32] as const;
/** Control on a store with group commit, each store's default (pg: on the connection that writes alone). */
const GROUP = 'Control, group commit';
/** The same on a store with one transaction, one commit, per outcome (`groupCommit: false`): the path before group commit. */
const OPT_OUT = 'Control, one commit each';
/**
 * PostgreSQL only: the default path before group commit and before the reservation stood alone —
 * each reservation a transaction of the pool (BEGIN, the statement, COMMIT), each outcome one
 * statement alone, one commit each. The issue's baseline ("today's default path"), kept measurable
 * by refusing the reservation's statement alone before it is sent (the store then writes it in a
 * transaction, as it does for a key with a row).
 */
const BEFORE = 'Control, the path before';
const ROUNDS = Number(process.env['BENCH_CONC_ROUNDS'] ?? 6);
const SLICE_MS = Number(process.env['BENCH_CONC_SLICE_MS'] ?? 400);

/** One measured thing: `run(ms, callers)` resolves to the latencies (ms) of the calls that finished, and the wall time taken. */
interface Subject {
  readonly store: string;
  readonly label: string;
  readonly floor: boolean;
  run(ms: number, callers: number): Promise<{ latencies: number[]; secs: number }>;
}

/** `callers` loops calling `one(i)` until `ms` has passed; every call's latency. */
async function loops(ms: number, callers: number, one: (i: number) => Promise<unknown>): Promise<{ latencies: number[]; secs: number }> {
  const latencies: number[] = [];
  let n = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() - start < ms) {
        const t0 = performance.now();
        await one(n++);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return { latencies, secs: (performance.now() - start) / 1000 };
}

let tags = 0;
/** Allowed actions through one Control on `store`, every call on a key of its own. */
function controlSubject(storeName: string, label: string, store: StateStore): Subject {
  const control = new Control({ policy, store, logger: { warn() {} } });
  return {
    store: storeName,
    label,
    floor: false,
    run: (ms, callers) => {
      const tag = `t${tags++}`;
      return loops(ms, callers, (i) =>
        control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `${tag}_${i}`, amount: 500 }, principal }), () => ({ ok: true })),
      );
    },
  };
}

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-bench-conc-'));
/** Run at the end, in order: the stores and connections first, then the database, the cluster, the folder. */
const cleanups: (() => Promise<void> | void)[] = [];
const finals: (() => Promise<void> | void)[] = [() => rmSync(dir, { recursive: true, force: true })];
const subjects: Subject[] = [];
const notes: string[] = [];

// 1. better-sqlite3, a file: synchronous=NORMAL (the store's default: a WAL commit is not synced,
// so a COMMIT costs a write of the pages and no flush) and FULL (every commit synced, as a
// durable server's). Group commit saves BEGIN and COMMIT per caller and nothing else: every
// statement still runs, and the kernel's own work is the same per action. So beside each store
// the bench measures that share of one caller's time, and the most any number of callers could
// then reach (1 / (1 − share); less the savepoint each caller in a group costs).
/** Seconds spent in BEGIN and COMMIT on the connections whose statements are timed, and whether they are timed now. */
const txEnds = { secs: 0, on: false };
/** `prepare` with every BEGIN … and COMMIT it prepares timed into {@link txEnds} (only while `txEnds.on`). */
function timingTransactionEnds(prepare: Database.Database['prepare']): Database.Database['prepare'] {
  return function (this: Database.Database, sql: string) {
    const statement = prepare.call(this, sql);
    if (/^(BEGIN|COMMIT)\b/.test(sql.trim())) {
      const run = statement.run.bind(statement) as () => Database.RunResult;
      statement.run = (() => {
        if (!txEnds.on) return run();
        const t0 = performance.now();
        try {
          return run();
        } finally {
          txEnds.secs += (performance.now() - t0) / 1000;
        }
      }) as typeof statement.run;
    }
    return statement;
  } as Database.Database['prepare'];
}
/** Stores whose share of BEGIN and COMMIT is measured after the rounds: one caller of `subject`. */
const shares: { store: string; subject: Subject }[] = [];
for (const synchronous of ['NORMAL', 'FULL'] as const) {
  const storeName = `better-sqlite3 file, ${synchronous}`;
  // The store's driver prepares its BEGIN and COMMIT when it is built: those are timed.
  const prototypePrepare = Database.prototype.prepare;
  Database.prototype.prepare = timingTransactionEnds(prototypePrepare);
  let store: StateStore;
  try {
    store = await createBetterSqlite3Store(join(dir, `control-${synchronous}.db`), { synchronous });
  } finally {
    Database.prototype.prepare = prototypePrepare;
  }
  cleanups.unshift(() => store.close());
  const group = controlSubject(storeName, GROUP, store);
  subjects.push(group);
  shares.push({ store: storeName, subject: group });
  const each = await createBetterSqlite3Store(join(dir, `each-${synchronous}.db`), { groupCommit: false, synchronous });
  cleanups.unshift(() => each.close());
  subjects.push(controlSubject(storeName, OPT_OUT, each));
  // The floor: one shared row, BEGIN IMMEDIATE; UPDATE; COMMIT, on a file with the store's pragmas.
  // One connection, in-call: callers cannot overlap, so every caller count runs the same loop.
  const db = new Database(join(dir, `floor-${synchronous}.db`), { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.exec('CREATE TABLE head(id INTEGER PRIMARY KEY, n INTEGER NOT NULL, v TEXT); INSERT INTO head VALUES (1, 0, NULL)');
  const [begin, update, commit] = [db.prepare('BEGIN IMMEDIATE'), db.prepare('UPDATE head SET n = n + 1, v = ? WHERE id = 1'), db.prepare('COMMIT')];
  cleanups.unshift(() => void db.close());
  subjects.push({
    store: storeName,
    label: 'shared-row commit floor',
    floor: true,
    run: (ms, callers) =>
      loops(ms, callers, async (i) => {
        begin.run();
        update.run(String(i));
        commit.run();
      }),
  });
}

// 2. A real PostgreSQL server, durable.
let cluster: PgCluster | null = null;
let url = process.env['PG_URL'] ?? null;
let where = 'PG_URL';
if (url === null && findServerBinaries() !== null) {
  cluster = await startCluster({ durable: true });
  finals.unshift(() => cluster!.stop());
  url = cluster.url;
  where = `${cluster.version}, throwaway cluster, fsync on`;
}
if (url === null) {
  notes.push('PostgreSQL: skipped — no PG_URL and no server binaries (/usr/lib/postgresql/<n>/bin)');
} else {
  const db = await freshDatabase(url, 'bench_conc');
  finals.unshift(() => db.drop());
  await db.createSchema('bench');
  await db.createSchema('floor');
  await db.sql('CREATE TABLE floor.head(id INTEGER PRIMARY KEY, n BIGINT NOT NULL, v TEXT)');
  await db.sql('INSERT INTO floor.head VALUES (1, 0, NULL)');
  const pool = new pg.Pool({ connectionString: db.url, max: 40 });
  pool.on('error', () => undefined);
  const store = await createPgStore(pool, { schema: 'bench', logger: { warn() {} } }); // the default: group commit
  cleanups.unshift(async () => (await store.close(), await pool.end()));
  subjects.push(controlSubject('PostgreSQL, durable', GROUP, store));
  await db.createSchema('each');
  const eachPool = new pg.Pool({ connectionString: db.url, max: 40 });
  eachPool.on('error', () => undefined);
  const each = await createPgStore(eachPool, { schema: 'each', logger: { warn() {} }, groupCommit: false });
  cleanups.unshift(async () => (await each.close(), await eachPool.end()));
  subjects.push(controlSubject('PostgreSQL, durable', OPT_OUT, each));
  await db.createSchema('before');
  const beforePool = new pg.Pool({ connectionString: db.url, max: 40 });
  beforePool.on('error', () => undefined);
  const before = await createPgStore(beforePool, { schema: 'before', logger: { warn() {} }, groupCommit: false });
  const send = before.driver.writeAlone.bind(before.driver);
  before.driver.writeAlone = (sql, params) =>
    /^WITH r AS \(INSERT /.test(sql) ? Promise.reject(new Error('the reservation goes in a transaction (the path before)')) : send(sql, params);
  cleanups.unshift(async () => (await before.close(), await beforePool.end()));
  subjects.push(controlSubject('PostgreSQL, durable', BEFORE, before));
  notes.push(
    'PostgreSQL "the path before": each reservation a transaction of the pool, each outcome one statement alone, one commit each (the default before group commit)',
  );
  const floorPool = new pg.Pool({ connectionString: db.url, max: 40 });
  floorPool.on('error', () => undefined);
  cleanups.unshift(() => floorPool.end());
  subjects.push({
    store: 'PostgreSQL, durable',
    label: 'shared-row commit floor',
    floor: true,
    run: async (ms, callers) => {
      // One connection per caller, held for the slice: each UPDATE its own (implicit) transaction.
      const clients = await Promise.all(Array.from({ length: callers }, () => floorPool.connect()));
      let c = 0;
      try {
        const latencies: number[] = [];
        const start = performance.now();
        await Promise.all(
          clients.map(async (client) => {
            while (performance.now() - start < ms) {
              const t0 = performance.now();
              await client.query({ text: 'UPDATE floor.head SET n = n + 1, v = $1 WHERE id = 1', values: [String(c++)] });
              latencies.push(performance.now() - t0);
            }
          }),
        );
        return { latencies, secs: (performance.now() - start) / 1000 };
      } finally {
        for (const client of clients) client.release();
      }
    },
  });
  notes.push(`PostgreSQL server: ${where}; the store on a pg Pool of 40, the floor on one connection per caller`);
}

// 3. PGlite in memory: one session, so callers queue.
{
  const lite = new PGlite();
  await lite.waitReady;
  const store = await createPgliteStore(lite);
  cleanups.unshift(async () => (await store.close(), await lite.close()));
  subjects.push(controlSubject('PGlite in memory', GROUP, store));
  const eachLite = new PGlite();
  await eachLite.waitReady;
  const each = await createPgliteStore(eachLite, { groupCommit: false });
  cleanups.unshift(async () => (await each.close(), await eachLite.close()));
  subjects.push(controlSubject('PGlite in memory', OPT_OUT, each));
  const floorLite = new PGlite();
  await floorLite.waitReady;
  await floorLite.exec('CREATE TABLE head(id INTEGER PRIMARY KEY, n BIGINT NOT NULL, v TEXT); INSERT INTO head VALUES (1, 0, NULL)');
  cleanups.unshift(() => floorLite.close());
  subjects.push({
    store: 'PGlite in memory',
    label: 'shared-row commit floor',
    floor: true,
    run: (ms, callers) => loops(ms, callers, (i) => floorLite.query('UPDATE head SET n = n + 1, v = $1 WHERE id = 1', [String(i)])),
  });
}

try {
  // Warm-up: every subject, every caller count, once.
  for (const s of subjects) for (const callers of CALLERS) await s.run(300, callers);
  const results = new Map<string, { n: number; secs: number; latencies: number[] }>();
  const keyOf = (s: Subject, callers: number) => `${s.store}|${s.label}|${callers}`;
  for (let r = 0; r < ROUNDS; r++) {
    // Each round starts one subject further on, and every other round takes the caller counts
    // from 32 down: no slice always runs first, or right after the same one (a slice after a busy
    // one meets the server still flushing what that one wrote).
    const order = [...subjects.slice(r % subjects.length), ...subjects.slice(0, r % subjects.length)];
    for (const s of order) {
      for (const callers of r % 2 === 0 ? CALLERS : [...CALLERS].reverse()) {
        const { latencies, secs } = await s.run(SLICE_MS, callers);
        const acc = results.get(keyOf(s, callers)) ?? { n: 0, secs: 0, latencies: [] };
        acc.n += latencies.length;
        acc.secs += secs;
        for (const l of latencies) acc.latencies.push(l);
        results.set(keyOf(s, callers), acc);
      }
    }
  }
  // One caller of each better-sqlite3 store, its BEGIN and COMMIT timed: their share of the time.
  const shareOf = new Map<string, number>();
  for (let r = 0; r < ROUNDS; r++) {
    for (const { store: storeName, subject } of shares) {
      txEnds.secs = 0;
      txEnds.on = true;
      const { secs } = await subject.run(SLICE_MS, 1);
      txEnds.on = false;
      shareOf.set(storeName, (shareOf.get(storeName) ?? 0) + txEnds.secs / secs / ROUNDS);
    }
  }
  const fmt = (x: number) => Math.round(x).toLocaleString('en-US').padStart(7);
  const ms = (x: number) => (x < 10 ? x.toFixed(2) : x.toFixed(1)).padStart(6);
  const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
  const rateOf = (k: string) => {
    const acc = results.get(k)!;
    return acc.n / acc.secs;
  };
  for (const storeName of [...new Set(subjects.map((s) => s.store))]) {
    console.log(`${storeName}`);
    for (const s of subjects.filter((x) => x.store === storeName)) {
      for (const callers of CALLERS) {
        const acc = results.get(keyOf(s, callers))!;
        const sorted = acc.latencies.sort((a, b) => a - b);
        const unit = s.floor ? 'commits/s' : 'actions/s';
        console.log(
          `  ${s.label.padEnd(25)} ${String(callers).padStart(2)} caller${callers === 1 ? ' ' : 's'} ${fmt(acc.n / acc.secs)} ${unit.padEnd(9)}  p50 ${ms(pct(sorted, 50))} ms  p99 ${ms(pct(sorted, 99))} ms`,
        );
      }
    }
    const floor = subjects.find((x) => x.store === storeName && x.floor)!;
    const f = CALLERS.map((n) => rateOf(keyOf(floor, n)));
    const ratesOf = (label: string) =>
      CALLERS.map((n) =>
        rateOf(
          keyOf(
            subjects.find((x) => x.store === storeName && x.label === label)!,
            n,
          ),
        ),
      );
    const [c, o] = [ratesOf(GROUP), ratesOf(OPT_OUT)];
    for (const [label, r] of [
      [GROUP, c],
      [OPT_OUT, o],
    ] as const) {
      console.log(
        `  ${label}: / shared-row floor ${CALLERS.map((n, i) => `${n}: ${((100 * r[i]!) / f[i]!).toFixed(0)}%`).join(', ')};  8 callers / 1: ${(r[1]! / r[0]!).toFixed(2)}x, 32 / 8: ${(r[2]! / r[1]!).toFixed(2)}x`,
      );
    }
    console.log(`  group commit / one commit each: ${CALLERS.map((n, i) => `${n}: ${(c[i]! / o[i]!).toFixed(2)}x`).join(', ')}`);
    const share = shareOf.get(storeName);
    if (share !== undefined) {
      console.log(
        `  one caller spends ${(100 * share).toFixed(0)}% of its time in BEGIN and COMMIT, all group commit saves: at most ${(1 / (1 - share)).toFixed(2)}x one caller, with any number of callers`,
      );
    }
    if (subjects.some((x) => x.store === storeName && x.label === BEFORE)) {
      const b = ratesOf(BEFORE);
      console.log(`  group commit / ${BEFORE}: ${CALLERS.map((n, i) => `${n}: ${(c[i]! / b[i]!).toFixed(2)}x`).join(', ')}`);
    }
  }
  for (const n of notes) console.log(n);
  console.log(
    `(each figure: ${ROUNDS} interleaved ${SLICE_MS} ms slices; load average at the end ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} on ${cpus().length} CPUs)`,
  );
} finally {
  for (const c of [...cleanups, ...finals]) await c();
}
