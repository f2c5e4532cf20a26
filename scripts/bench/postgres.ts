// PostgreSQL figures, measured in one run: allowed actions/s through Control.execute on a real
// server with a pg Pool — one caller at a time, and 8 callers at once on distinct keys — and on
// PGlite in memory. The server is PG_URL, or a throwaway cluster started here (durable defaults:
// fsync on), stopped at the end. Without either, the server lines say why and PGlite still runs.
import { PGlite } from '@electric-sql/pglite';
import { Control, createAction, loadPolicy, type StateStore } from '@ctrlrun/kernel';
import { createPgStore } from '@ctrlrun/store-node/pg';
import { createPgliteStore } from '@ctrlrun/store-node/pglite';
import pg from 'pg';
import { findServerBinaries, freshDatabase, startCluster, type PgCluster } from '../../test/support/pg-cluster.js';

const policy = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);
const principal = { agent: 'bench-agent' };

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
  const commits = async () => Number((await db.sql<{ n: string }>('SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()'))[0]!.n);
  try {
    await db.createSchema('bench');
    // Durable commits as configured, then with synchronous_commit off (the commit no longer waits for the WAL flush).
    const off = `${db.url}?options=${encodeURIComponent('-c synchronous_commit=off')}`;
    for (const [label, connectionString, wrap] of [
      ['durable', db.url, null],
      ['durable, one state change per transaction (before)', db.url, stepwise],
      ['synchronous_commit=off', off, null],
    ] as const) {
      const pool = new pg.Pool({ connectionString, max: 16 });
      pool.on('error', () => undefined);
      const real = await createPgStore(pool, { schema: 'bench' });
      const store = wrap === null ? real : wrap(real);
      await actionsPerSecond(store, 500, 1, `warm_${label}`);
      const before = await commits();
      const t0 = performance.now();
      const sequential = await actionsPerSecond(store, 2500, 1, `seq_${label}`);
      const done = Math.round((sequential * (performance.now() - t0)) / 1000);
      const perAction = (await commits()) - before;
      const concurrent = await actionsPerSecond(store, 2500, 8, `par_${label}`);
      lines.push(`PostgreSQL, pg Pool, 1 caller   ${fmt(sequential)} allowed actions/s   (${label}; ${(perAction / Math.max(1, done)).toFixed(1)} committed transactions per action)`);
      lines.push(`PostgreSQL, pg Pool, 8 callers  ${fmt(concurrent)} allowed actions/s   (${label}; distinct keys, one process, pool of 16)`);
      await real.close();
      await pool.end();
    }
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
