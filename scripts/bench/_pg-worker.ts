// One OS process of the PostgreSQL bench's many-process figure (scripts/bench/postgres.ts): opens
// the store on the schema given, warms up, says `ready`, waits for `go`, runs `callers` loops of
// allowed actions on keys of its own for `ms`, sends its rate, and exits.
import { Control, createAction } from '@ctrlrun/kernel';
import { createPgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { ALLOW_REFUND_POLICY as policy, BENCH_PRINCIPAL as principal } from './_allowed-refund.js';

const [url, schema, prepare, tag, callers, ms] = process.argv.slice(2) as [string, string, string, string, string, string];
const pool = new pg.Pool({ connectionString: url, max: 8 });
pool.on('error', () => undefined);
const store = await createPgStore(pool, { schema, prepare: prepare === 'true', logger: { warn() {} } });
const control = new Control({ policy, store, logger: { warn() {} } });
const one = (id: string) =>
  control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 500 }, principal }), () => ({
    ok: true,
  }));
for (let i = 0; i < 100; i++) await one(`${tag}_warm_${i}`);
process.send!('ready');
await new Promise<void>((go) => process.once('message', () => go()));
let n = 0;
const start = performance.now();
await Promise.all(
  Array.from({ length: Number(callers) }, async () => {
    while (performance.now() - start < Number(ms)) await one(`${tag}_${n++}`);
  }),
);
process.send!(n / ((performance.now() - start) / 1000), () => undefined);
await store.close();
await pool.end();
process.exit(0);
