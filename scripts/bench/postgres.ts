// PostgreSQL figures, measured in one run: allowed actions/s through Control.execute on a real
// server with a pg Pool — one caller at a time, and 8 callers at once on distinct keys — and on
// PGlite in memory. The server is PG_URL, or a throwaway cluster started here (durable defaults:
// fsync on), stopped at the end. Without either, the server lines say why and PGlite still runs.
// Beside them, in the same run: the same store with prepare: false (statement by statement, in
// transactions, nothing named), the older path with one state change per transaction, and the floor — a bare one-row INSERT
// committed on its own (one WAL flush, one round trip), 1 and 8 callers.
import { PGlite } from '@electric-sql/pglite';
import { Control, createAction, loadPolicy, type StateStore } from '@ctrlrun/kernel';
import { createPgStore } from '@ctrlrun/store-node/pg';
import { createPgliteStore } from '@ctrlrun/store-node/pglite';
import { fork } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { findServerBinaries, freshDatabase, startCluster, type PgCluster } from '../../test/support/pg-cluster.js';
import { ALLOW_REFUND_POLICY as policy, BENCH_PRINCIPAL as principal } from './_allowed-refund.js';

/** Actions/s for `ms`, with `callers` concurrent loops on distinct keys. */
async function actionsPerSecond(store: StateStore, ms: number, callers: number, tag: string): Promise<number> {
  const control = new Control({ policy, store, logger: { warn() {} } });
  let n = 0;
  const one = (i: number) =>
    control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `${tag}_${i}`, amount: 500 }, principal }), () => ({ ok: true }));
  const start = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() - start < ms) await one(n++);
    }),
  );
  return n / ((performance.now() - start) / 1000);
}

/**
 * The same store, one state change per transaction: no `reserveForExecution`, and no receipt
 * written with the outcome — the path before both existed (4 transactions per allowed action;
 * before the pending events rode with the reservation, 5). Measured beside the real one, in the
 * same run, so that the ratio survives the machine's load.
 */
function stepwise(store: StateStore): StateStore {
  type Trailing = { drafts: (r: unknown) => unknown[]; stored?: unknown[] };
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'reserveForExecution') return undefined;
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      const fn = v as (...a: unknown[]) => Promise<unknown>;
      if (prop === 'putReceipt') return (draft: unknown) => fn.call(target, draft);
      if (prop === 'commitEffect' || prop === 'failEffect' || prop === 'markAmbiguous') {
        return async (key: unknown, actionId: unknown, x: unknown, events?: Trailing) => {
          const without: Trailing | undefined = events && { drafts: events.drafts };
          const out = await fn.call(target, key, actionId, x, without);
          if (events && without?.stored) events.stored = without.stored;
          return out;
        };
      }
      return fn.bind(target);
    },
  });
}

/** Commits/s of `text` (default: a bare one-row INSERT) in its own (implicit) transaction: one round trip and one WAL flush each. */
async function insertFloor(pool: pg.Pool, ms: number, callers: number, text = 'INSERT INTO floor.t(v) VALUES ($1)'): Promise<number> {
  let n = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      const client = await pool.connect();
      try {
        while (performance.now() - start < ms) {
          await client.query({ text, values: ['x'] });
          n++;
        }
      } finally {
        client.release();
      }
    }),
  );
  return n / ((performance.now() - start) / 1000);
}

const fmt = (x: number) => Math.round(x).toLocaleString('en-US').padStart(6);
const lines: string[] = [];

// 1. A real server with a pool.
let cluster: PgCluster | null = null;
let url = process.env['PG_URL'] ?? null;
let where = 'PG_URL';
if (url === null && findServerBinaries() !== null) {
  cluster = await startCluster({ durable: true });
  url = cluster.url;
  where = `${cluster.version}, throwaway cluster, fsync on`;
}
if (url === null) {
  lines.push('PostgreSQL: skipped — no PG_URL and no server binaries (/usr/lib/postgresql/<n>/bin)');
} else {
  const db = await freshDatabase(url, 'bench');
  const commits = async () =>
    Number((await db.sql<{ n: string }>('SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()'))[0]!.n);
  try {
    await db.createSchema('bench');
    // Durable commits as configured, then with synchronous_commit off (the commit no longer waits for the WAL flush).
    const off = `${db.url}?options=${encodeURIComponent('-c synchronous_commit=off')}`;
    await db.createSchema('floor'); // its own schema: the store's is refused with a foreign table in it
    await db.sql('CREATE TABLE floor.t(id BIGSERIAL PRIMARY KEY, v TEXT)');
    type Subject = {
      label: string;
      pool: pg.Pool;
      run: (ms: number, callers: number, tag: string) => Promise<number>;
      close: () => Promise<void>;
      perAction?: number;
    };
    const subjects: Subject[] = [];
    /** Actions run to count the committed transactions of one (the few reads around them count too: under 1%). */
    const COUNTED = 300;
    const perActionOf = new Map<string, number>();
    const FLOOR = 'floor: a bare one-row INSERT, its own transaction (one WAL flush + one round trip)';
    // Every receipt advances the one chain head row, whose lock is held until the commit is flushed:
    // receipts commit one flush after another, whatever the callers. This floor is that alone.
    const SHARED = 'floor: one shared row updated, its own transaction (the chain head: flushes one after another)';
    await db.sql('CREATE TABLE floor.head(id INTEGER PRIMARY KEY, n BIGINT NOT NULL, v TEXT)');
    await db.sql('INSERT INTO floor.head VALUES (1, 0, NULL)');
    for (const [label, connectionString, build] of [
      ['durable', db.url, null],
      ['durable, prepare: false (statement by statement)', db.url, 'unprepared'],
      ['durable, one state change per transaction (older)', db.url, 'stepwise'],
      ['synchronous_commit=off', off, null],
      [FLOOR, db.url, 'floor'],
      [SHARED, db.url, 'shared'],
    ] as const) {
      const pool = new pg.Pool({ connectionString, max: 16 });
      pool.on('error', () => undefined);
      if (build === 'floor' || build === 'shared') {
        const text = build === 'floor' ? undefined : 'UPDATE floor.head SET n = n + 1, v = $1 WHERE id = 1';
        subjects.push({ label, pool, run: (ms, callers) => insertFloor(pool, ms, callers, text), close: () => pool.end() });
        continue;
      }
      const open = async (on: pg.Pool): Promise<[StateStore, StateStore]> => {
        // The older path was statement by statement, nothing named: so is its stand-in.
        const real = await createPgStore(on, { schema: 'bench', prepare: build === null });
        return [real, build === 'stepwise' ? stepwise(real) : real];
      };
      // Committed transactions per action, from the server's counter (autocommit reads count too),
      // on a pool of its own that is closed before the counter is read: a backend reports its
      // counts lazily (up to seconds later) but always as it exits.
      {
        const countPool = new pg.Pool({ connectionString, max: 16 });
        const [real, store] = await open(countPool);
        const before = await commits();
        let done = 0;
        const control = new Control({ policy, store, logger: { warn() {} } });
        for (; done < COUNTED; done++) {
          const action = createAction({ name: 'stripe.refund', arguments: { payment_id: `count_${label}_${done}`, amount: 500 }, principal });
          await control.execute(action, () => ({ ok: true }));
        }
        await real.close();
        await countPool.end();
        // Until the count holds still for half a second (at most 10 s): the store's own connection,
        // which commits each outcome alone, reports as it exits, possibly after the pool's backends.
        let after = await commits();
        for (let still = 0, wait = 0; still < 5 && wait < 100; wait++) {
          await new Promise((r) => setTimeout(r, 100));
          const now = await commits();
          still = now === after ? still + 1 : 0;
          after = now;
        }
        perActionOf.set(label, (after - before) / done);
      }
      const [real, store] = await open(pool);
      await actionsPerSecond(store, 300, 1, `warm_${label}`);
      const perAction = perActionOf.get(label)!;
      subjects.push({
        label,
        pool,
        perAction,
        run: (ms, callers, tag) => actionsPerSecond(store, ms, callers, `${tag}_${label}`),
        close: async () => (await real.close(), await pool.end()),
      });
    }
    // Interleaved: every subject runs a short slice in turn, round after round, so that the
    // machine's load (shared, changing) weighs on all of them alike; each figure is the mean rate.
    const ROUNDS = Number(process.env['BENCH_PG_ROUNDS'] ?? 8);
    const SLICE_MS = Number(process.env['BENCH_PG_SLICE_MS'] ?? 350);
    const sums = new Map<string, [number, number]>(subjects.map((x) => [x.label, [0, 0]]));
    // This process's CPU per action (pg's JavaScript included): far less sensitive to the machine's load than rates.
    const cpu = new Map<string, { ms: number; actions: number }>(subjects.map((x) => [x.label, { ms: 0, actions: 0 }]));
    const timed = async (x: Subject, callers: number, tag: string): Promise<number> => {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const rate = await x.run(SLICE_MS, callers, tag);
      const used = process.cpuUsage(c0);
      const acc = cpu.get(x.label)!;
      acc.ms += (used.user + used.system) / 1000;
      acc.actions += (rate * (performance.now() - t0)) / 1000;
      return rate;
    };
    for (let r = 0; r < ROUNDS; r++) {
      for (const x of subjects) {
        const one = await timed(x, 1, `r${r}s`);
        const eight = await timed(x, 8, `r${r}p`);
        const acc = sums.get(x.label)!;
        acc[0] += one / ROUNDS;
        acc[1] += eight / ROUNDS;
      }
    }
    const cpuPer = (label: string): string => {
      const c = cpu.get(label)!;
      return `${(c.ms / Math.max(1, c.actions)).toFixed(2)} ms CPU here per action`;
    };
    for (const x of subjects) await x.close();
    for (const x of subjects) {
      const [one, eight] = sums.get(x.label)!;
      if (x.label === FLOOR || x.label === SHARED) continue;
      lines.push(
        `PostgreSQL, pg Pool, 1 caller   ${fmt(one)} allowed actions/s   (${x.label}; ${x.perAction!.toFixed(1)} committed transactions per action; ${cpuPer(x.label)})`,
      );
      lines.push(`PostgreSQL, pg Pool, 8 callers  ${fmt(eight)} allowed actions/s   (${x.label}; distinct keys, one process, pool of 16)`);
      if (x.label === 'durable')
        lines.push('  (target for durable, the default: >= 566 / 1,424, twice the 283 / 712 measured before the control path was rebuilt)');
    }
    const now = sums.get('durable')!;
    for (const [mine, label] of [
      ['durable', 'durable, prepare: false (statement by statement)'],
      ['durable', 'durable, one state change per transaction (older)'],
    ] as const) {
      const [a, b] = [sums.get(mine)!, sums.get(label)!];
      lines.push(`  ${mine} vs ${label.slice('durable, '.length)}: ${(a[0] / b[0]).toFixed(2)}x (1 caller), ${(a[1] / b[1]).toFixed(2)}x (8 callers)`);
    }
    const [floor1, floor8] = sums.get(FLOOR)!;
    lines.push(
      `PostgreSQL floor, 1 caller      ${fmt(floor1)} commits/s           (${FLOOR}; an allowed action needs 2 flushes -> at most ${fmt(floor1 / 2)} actions/s)`,
    );
    lines.push(`PostgreSQL floor, 8 callers     ${fmt(floor8)} commits/s           (the same on 8 connections: concurrent commits share flushes)`);
    const [, shared8] = sums.get(SHARED)!;
    lines.push(
      `PostgreSQL floor, 8 callers     ${fmt(shared8)} commits/s           (${SHARED}: an allowed action's outcome commit is one of these -> at most ${fmt(shared8)} actions/s)`,
    );
    lines.push(
      `  durable / (floor / 2): ${((2 * now[0]) / floor1).toFixed(2)} (1 caller); durable / shared-row floor: ${(now[1] / shared8).toFixed(2)} (8 callers)`,
    );
    lines.push(`  (each figure: the mean of ${ROUNDS} interleaved ${SLICE_MS} ms slices)`);

    // Many processes on one chain: every receipt of every process chains on the one head, so the
    // processes contend for its lock. PROCESSES OS processes of CALLERS callers each, the default
    // and prepare: false taking turns, each turn on a fresh schema; the figure is their sum.
    const PROCESSES = 2;
    const CALLERS = 8;
    const TURNS = Number(process.env['BENCH_PG_PROCESS_TURNS'] ?? 3);
    const TURN_MS = 1500;
    const worker = join(import.meta.dirname, '_pg-worker.ts');
    const many = new Map<string, number>([
      ['true', 0],
      ['false', 0],
    ]);
    for (let turn = 0; turn < TURNS; turn++) {
      for (const prepare of ['true', 'false']) {
        const schema = `procs_${turn}_${prepare}`;
        await db.createSchema(schema);
        const migrate = new pg.Pool({ connectionString: db.url, max: 1 });
        await (await createPgStore(migrate, { schema })).close();
        await migrate.end();
        const kids = Array.from({ length: PROCESSES }, (_, k) =>
          fork(worker, [db.url, schema, prepare, `p${k}`, String(CALLERS), String(TURN_MS)], { execArgv: ['--import', 'tsx'], stdio: 'inherit' }),
        );
        try {
          await Promise.all(kids.map((k) => new Promise((ready) => k.once('message', ready))));
          const rates = kids.map((k) => new Promise<number>((done) => k.once('message', (m) => done(Number(m)))));
          for (const k of kids) k.send('go');
          many.set(prepare, many.get(prepare)! + (await Promise.all(rates)).reduce((a, b) => a + b, 0) / TURNS);
        } finally {
          for (const k of kids) if (k.exitCode === null) k.kill();
        }
      }
    }
    lines.push(
      `PostgreSQL, ${PROCESSES} processes x ${CALLERS}  ${fmt(many.get('true')!)} allowed actions/s   (durable, the default; ${PROCESSES} OS processes on one schema, one chain head; the mean of ${TURNS} turns of ${TURN_MS} ms)`,
    );
    lines.push(
      `PostgreSQL, ${PROCESSES} processes x ${CALLERS}  ${fmt(many.get('false')!)} allowed actions/s   (durable, prepare: false; taking turns with the line above)`,
    );
    lines.push(`  default vs prepare: false, ${PROCESSES} processes: ${(many.get('true')! / many.get('false')!).toFixed(2)}x`);
    lines.push(`  server: ${where}`);
  } finally {
    await db.drop();
    await cluster?.stop();
  }
}

// 2. PGlite in memory (one session: callers queue).
const lite = new PGlite();
await lite.waitReady;
const liteStore = await createPgliteStore(lite);
await actionsPerSecond(liteStore, 1000, 1, 'warm');
const liteRate = await actionsPerSecond(liteStore, 3000, 1, 'seq');
lines.push(`PGlite in memory, 1 caller      ${fmt(liteRate)} allowed actions/s   (one WebAssembly session)`);
await liteStore.close();
await lite.close();

for (const l of lines) console.log(l);
