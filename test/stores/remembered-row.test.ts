/**
 * The outcome's compare-and-set on the row the reservation wrote, unread (SQLite's
 * `updateEffectExact`): on a real file shared by two handles, whatever the other handle does to
 * the row while the executor runs, the action ends exactly as it does when the outcome reads the
 * row first — the same result or refusal, the same row, the same events, the same receipts — and
 * an undisturbed outcome reads nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Control, createAction, loadPolicy, sequentialIds, verifyChain, type StateStore } from '@ctrlrun/kernel';
import { openSqlStateStore, sqliteDialect, type SqlDialect, type SqlDriver, type SqlExecutor } from '@ctrlrun/kernel/store';
import { BetterSqlite3Driver, createBetterSqlite3Store, type BetterSqlite3Database } from '@ctrlrun/store-node/better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';

const POLICY = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);
const KEY = 'refund:p1';
const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-remembered-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** Records the statements of each transaction. */
function recording(driver: SqlDriver): { wrapped: SqlDriver; transactions: string[][] } {
  const transactions: string[][] = [];
  const wrapped: SqlDriver = {
    name: driver.name,
    dialect: driver.dialect,
    capabilities: driver.capabilities,
    query: (sql, params) => driver.query(sql, params),
    exec: (sql) => driver.exec(sql),
    close: () => driver.close(),
    transaction: <T>(fn: (tx: SqlExecutor) => Promise<T>) =>
      driver.transaction((tx) => {
        const statements: string[] = [];
        transactions.push(statements);
        return fn({ query: (sql, params) => (statements.push(sql), tx.query(sql, params)), exec: (sql) => tx.exec(sql) });
      }),
  };
  return { wrapped, transactions };
}

const READ_FIRST: SqlDialect = (() => {
  const { updateEffectExact: _, ...sql } = sqliteDialect.sql;
  return { ...sqliteDialect, sql };
})();

type Disturbance = (other: StateStore, actionId: string, advance: (ms: number) => void) => Promise<unknown>;

/** One allowed action on a fresh file; `disturb` runs through a second handle while the executor runs. */
async function run(dialect: SqlDialect, disturb: Disturbance) {
  const path = join(dir, `r-${++files}.db`);
  let t = Date.parse('2026-01-01T12:00:00Z');
  const clock = () => new Date(t);
  await (await createBetterSqlite3Store(path)).close();
  const rec = recording(new BetterSqlite3Driver(new Database(path) as unknown as BetterSqlite3Database));
  const store = await openSqlStateStore(rec.wrapped, { dialect, clock, logger: { warn() {} } });
  const other = await createBetterSqlite3Store(path, { clock });
  const ids = sequentialIds();
  const control = new Control({ policy: POLICY, store, clock, ids, logger: { warn() {} } });
  const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500 }, principal: { agent: 'a' } }, { ids });
  const outcome = await control
    .execute(action, async () => {
      await disturb(other, action.actionId, (ms) => (t += ms)).catch((err: unknown) => `the other handle was refused: ${(err as Error).name}`);
      t += 1000;
      return { refund_id: 're_1' };
    })
    .then(
      (value) => ({ value }),
      (err: Error & { code?: string }) => ({ error: err.name, code: err.code, message: err.message }),
    );
  const effect = await other.getEffect(KEY);
  const events = (await other.events()).map((e) => ({ type: e.type, effectKey: e.effectKey, data: e.data }));
  const receipts = await other.receipts();
  const head = await other.chainHead();
  const chain = verifyChain(receipts, head);
  await other.close();
  await store.close();
  return {
    evidence: { outcome, effect, events, receipts: receipts.map((r) => r.json), chain: { ok: chain.ok, verified: chain.verified } },
    transactions: rec.transactions,
  };
}

const disturbances: [string, Disturbance][] = [
  ['nothing', async () => undefined],
  ['its lease extended', (other, id) => other.extendLease(KEY, id, 600_000)],
  ['its lease extended after a while', async (other, id, advance) => (advance(30_000), other.extendLease(KEY, id, 600_000))],
  ['marked ambiguous', (other, id) => other.markAmbiguous(KEY, id, 'swept by another worker')],
  ['failed', (other, id) => other.failEffect(KEY, id, 'failed by another worker')],
  ['committed', (other, id) => other.commitEffect(KEY, id, { refund_id: 're_other' })],
  ['resolved after being marked ambiguous', async (other, id) => (await other.markAmbiguous(KEY, id, 'swept'), other.resolveEffect(KEY, 'committed', 'ops'))],
  ['lapsed and taken over', async (other, _id, advance) => (advance(10 * 60_000), other.reserveEffect(KEY, 'act_other', 300_000))],
];

describe('the outcome on the row the reservation wrote (better-sqlite3, two handles on one file)', () => {
  for (const [name, disturb] of disturbances) {
    it(`the other handle did ${name}: the same end as reading the row first`, async () => {
      const unread = await run(sqliteDialect, disturb);
      const read = await run(READ_FIRST, disturb);
      expect(unread.evidence).toEqual(read.evidence);
      const outcome = unread.transactions[1]!;
      expect(outcome[0]).toMatch(/^UPDATE effects SET [\s\S]* AND updated_at IS \?$/);
      if (name === 'nothing') {
        expect(unread.evidence.outcome).toEqual({ value: { refund_id: 're_1' } });
        expect(
          outcome.some((s) => /^SELECT/.test(s)),
          'an undisturbed outcome reads nothing',
        ).toBe(false);
        expect(read.transactions[1]![0]).toMatch(/^SELECT /);
      } else {
        // The row moved on: the unread compare-and-set wrote nothing, and the row was read.
        expect(outcome[1]).toMatch(/^SELECT [\s\S]* FROM effects WHERE effect_key = \?$/);
      }
    });
  }
});
