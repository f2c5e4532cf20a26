/**
 * A child process for pg-close.test.ts: one allowed action on a PostgreSQL store (its reservation
 * and outcome written on the store's own connection), the caller's pool ended, then the store
 * closed — and a line printed after `close()`, which a process that exits inside it never prints.
 */
import { Control, createAction, loadPolicy } from '@ctrlrun/kernel';
import { createPgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';

const [url, schema] = process.argv.slice(2) as [string, string];
const pool = new pg.Pool({ connectionString: url, max: 2 });
const store = await createPgStore(pool, { schema, logger: { warn() {} } });
const control = new Control({
  policy: loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    decision: allow\n'),
  store,
  logger: { warn() {} },
});
await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 5 }, principal: { agent: 'a' } }), () => ({ ok: true }));
await pool.end();
// The pool's sockets all closed: nothing else holds the process open while the store closes.
await new Promise((resolve) => setTimeout(resolve, 300));
await store.close();
console.log('after close');
