// Diagnostic (not a bench section): on a durable throwaway PostgreSQL cluster, N callers of one
// Control for a few seconds, every statement the store sends counted by kind and connection —
// transactions, COMMITs, statements inside each, statements that commit alone, group sizes —
// and the time callers spend waiting in each. `tsx scripts/bench/_diag-pg.ts [callers] [group]`.
import pg from 'pg';
import { Control, createAction } from '@ctrlrun/kernel';
import { createPgStore } from '@ctrlrun/store-node/pg';
import { findServerBinaries, freshDatabase, startCluster } from '../../test/support/pg-cluster.js';
import { ALLOW_REFUND_POLICY as policy, BENCH_PRINCIPAL as principal } from './_allowed-refund.js';

const callers = Number(process.argv[2] ?? 8);
const group = (process.argv[3] ?? 'group') === 'group';
const ms = Number(process.env['DIAG_MS'] ?? 3000);
if (findServerBinaries() === null && !process.env['PG_URL']) throw new Error('no PostgreSQL');
const cluster = process.env['PG_URL'] ? null : await startCluster({ durable: true });
const url = process.env['PG_URL'] ?? cluster!.url;
const db = await freshDatabase(url, 'diag');
await db.createSchema('s');

const counts = new Map<string, number>();
const time = new Map<string, number>();
const bump = (k: string, by = 1) => counts.set(k, (counts.get(k) ?? 0) + by);
const spend = (k: string, t: number) => time.set(k, (time.get(k) ?? 0) + t);
const groupSizes = new Map<number, number>();
const kindOf = (text: string): string => {
  const t = text.trim();
  if (t.startsWith('BEGIN')) return 'BEGIN';
  if (t === 'COMMIT' || t === 'ROLLBACK') return t;
  if (/^SAVEPOINT|^RELEASE|^ROLLBACK TO/.test(t)) return 'savepoint';
  return `${t.slice(0, 60).replace(/\s+/g, ' ')}`;
};
function wrapClient<C extends { query: (...a: any[]) => any }>(client: C, where: string): C {
  const original = client.query.bind(client);
  let inTx = 0;
  (client as any).query = (config: any, ...rest: any[]) => {
    const text = typeof config === 'string' ? config : config.text;
    const kind = kindOf(text);
    if (kind === 'BEGIN') inTx = 0;
    else if (kind === 'COMMIT') groupSizes.set(inTx, (groupSizes.get(inTx) ?? 0) + 1);
    else if (kind !== 'savepoint' && kind !== 'ROLLBACK') inTx++;
    bump(`${where} ${kind === 'BEGIN' || kind === 'COMMIT' || kind === 'savepoint' ? kind : 'stmt'}`);
    const t0 = performance.now();
    const p = original(config, ...rest);
    if (p && typeof p.then === 'function')
      p.then(
        () => spend(`${where} ${kind === 'COMMIT' ? 'COMMIT' : kind === 'BEGIN' ? 'BEGIN' : 'stmt'}`, performance.now() - t0),
        () => undefined,
      );
    return p;
  };
  return client;
}
const pool = new pg.Pool({ connectionString: db.url, max: 40 });
pool.on('error', () => undefined);
const connect = pool.connect.bind(pool);
const wrapped = new WeakSet<object>();
const WRAP = process.env.DIAG_WRAP !== '0';
if (WRAP)
  (pool as any).connect = async (cb?: unknown) => {
    if (typeof cb === 'function') return (connect as any)(cb);
    const c = await connect();
    if (!wrapped.has(c)) {
      wrapped.add(c);
      wrapClient(c, 'tx');
    }
    return c;
  };
// The connection that writes alone, counted as 'alone' (its BEGIN … COMMIT batches included).
const freshClient = () => wrapClient(new pg.Client({ connectionString: db.url, pipeline: true } as pg.ClientConfig), 'alone');
const store = await createPgStore(pool, { schema: 's', logger: { warn() {} }, groupCommit: group, freshClient });
const control = new Control({ policy, store, logger: { warn() {} } });
let n = 0;
const run = async (dur: number) => {
  const start = performance.now();
  let done = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() - start < dur) {
        await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `p${n++}`, amount: 500 }, principal }), () => ({ ok: true }));
        done++;
      }
    }),
  );
  return { done, secs: (performance.now() - start) / 1000 };
};
await run(500);
counts.clear();
time.clear();
groupSizes.clear();
const { done, secs } = await run(ms);
console.log(`${callers} callers, group commit ${group}: ${done} actions in ${secs.toFixed(2)} s = ${(done / secs).toFixed(0)}/s`);
for (const [k, v] of [...counts].sort()) console.log(`  ${k.padEnd(20)} ${(v / done).toFixed(2)} per action   mean ${((time.get(k) ?? 0) / v).toFixed(2)} ms`);
console.log(
  `  statements per COMMIT (tx): ${[...groupSizes]
    .sort((a, b) => a[0] - b[0])
    .map(([s, c]) => `${s}:${c}`)
    .join(' ')}`,
);
await store.close();
await pool.end();
await db.drop();
await cluster?.stop();
