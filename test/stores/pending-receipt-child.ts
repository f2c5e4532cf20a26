/**
 * A child process for pending-receipt.test.ts: two allowed actions on a better-sqlite3 file. The
 * second one's receipt cannot be chained with its outcome (the chain head's statements fail twice,
 * as a failing disk would), so the outcome is written with its receipt pending; the process then
 * kills itself at the first statement of the receipt written alone — a crash in that window.
 */
import { writeSync } from 'node:fs';
import Database from 'better-sqlite3';
import { Control, createAction, loadPolicy } from '@ctrlrun/kernel';
import { openSqlStateStore, sqliteDialect, type SqlDriver } from '@ctrlrun/kernel/store';
import { BetterSqlite3Driver, createBetterSqlite3Store, type BetterSqlite3Database } from '@ctrlrun/store-node/better-sqlite3';

const [path] = process.argv.slice(2) as [string];
await (await createBetterSqlite3Store(path)).close();
const inner = new BetterSqlite3Driver(new Database(path) as unknown as BetterSqlite3Database);
let armed = false;
let heads = 0;
const driver: SqlDriver = {
  name: inner.name,
  dialect: inner.dialect,
  capabilities: inner.capabilities,
  query: (sql, params) => inner.query(sql, params),
  exec: (sql) => inner.exec(sql),
  close: () => inner.close(),
  transaction: (fn) =>
    inner.transaction((tx) =>
      fn({
        query: (sql, params) => {
          if (armed && sql.startsWith('UPDATE receipt_chain SET seq')) {
            heads += 1;
            if (heads <= 2) return Promise.reject(new Error('disk I/O error'));
            // The outcome committed with its receipt pending; the lone receipt begins: the process dies here.
            writeSync(1, 'outcome written\n');
            process.kill(process.pid, 'SIGKILL');
          }
          return tx.query(sql, params);
        },
        exec: (sql) => tx.exec(sql),
      }),
    ),
};
const store = await openSqlStateStore(driver, { dialect: sqliteDialect, logger: { warn() {} } });
const control = new Control({
  policy: loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    decision: allow\n'),
  store,
  logger: { warn() {} },
});
const refund = (id: string) =>
  control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 5 }, principal: { agent: 'a' } }), () => ({ id }));
await refund('p1');
armed = true;
await refund('p2');
writeSync(1, 'not killed\n');
