/**
 * The outcome's compare-and-set on the row the reservation wrote, unread (the dialect's
 * `updateEffectExact`, and on Postgres with one statement per step the combined `exact` update):
 * on a database shared with a second handle, whatever the other handle does to the row while the
 * executor runs, the action ends exactly as it does when the outcome reads the row first — the
 * same result or refusal, the same row, the same events, the same receipts — and an undisturbed
 * outcome reads nothing. better-sqlite3 (two handles on one file), sql.js (two stores on one
 * database), PGlite (two drivers on one instance) and a real PostgreSQL server (two pools),
 * statement by statement and — where the driver writes a step as one statement — combined. (The
 * Durable Object store runs the same SQLite dialect; its conformance suite runs on workerd.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import {
  Control,
  createAction,
  InvalidArgument,
  loadPolicy,
  sequentialIds,
  verifyChain,
  type Clock,
  type EffectRecord,
  type StateStore,
} from '@ctrlrun/kernel';
import { openSqlStateStore, postgresDialect, sqliteDialect, SqlStateStore, type SqlDialect } from '@ctrlrun/kernel/store';
import { BetterSqlite3Driver, createBetterSqlite3Store, type BetterSqlite3Database } from '@ctrlrun/store-node/better-sqlite3';
import { PgliteDriver } from '@ctrlrun/store-node/pglite';
import { createPgStore, PgDriver } from '@ctrlrun/store-node/pg';
import { SqlJsDriver, type SqlJsModule } from '@ctrlrun/store-sqljs';
import initSqlJs from 'sql.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recording } from '../support/recording-driver.js';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

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
const quietLog = { warn() {} };

/** `d` without the statements that let a step skip its read: every outcome reads its row first, statement by statement. */
function readFirst(d: SqlDialect): SqlDialect {
  const { updateEffectExact: _x, insertEffectWithEvents: _i, updateEffectWithTrail: _u, ...sql } = d.sql;
  return { ...d, sql };
}

/** `d` without its one-statement steps: the unread compare-and-set is `updateEffectExact`. */
function statementByStatement(d: SqlDialect): SqlDialect {
  const { insertEffectWithEvents: _i, updateEffectWithTrail: _u, ...sql } = d.sql;
  return { ...d, sql };
}

/** One database for one run: the store under test (recorded) and another handle on the same rows. */
interface Scene {
  store: StateStore;
  transactions: string[][];
  other: StateStore;
  close(): Promise<void>;
}

/** A backend: how a scene is opened, with the outcome unread or read first. */
interface Backend {
  name: string;
  scene(mode: 'unread' | 'read', clock: Clock): Promise<Scene>;
  /** The outcome's first statement when it does not read. */
  unreadCas: RegExp;
  /** The read of the effect row. */
  selectEffect: RegExp;
}

const sqlite: Backend = {
  name: 'better-sqlite3, two handles on one file',
  async scene(mode, clock) {
    const path = join(dir, `r-${++files}.db`);
    await (await createBetterSqlite3Store(path)).close();
    const rec = recording(new BetterSqlite3Driver(new Database(path) as unknown as BetterSqlite3Database));
    const store = await openSqlStateStore(rec.wrapped, { dialect: mode === 'unread' ? sqliteDialect : readFirst(sqliteDialect), clock, logger: quietLog });
    const other = await createBetterSqlite3Store(path, { clock });
    return { store, transactions: rec.transactions, other, close: async () => (await other.close(), await store.close()) };
  },
  unreadCas: /^UPDATE effects SET [\s\S]* AND updated_at IS \?$/,
  selectEffect: /^SELECT [\s\S]* FROM effects WHERE effect_key = \?$/,
};

let SQL: SqlJsModule | null = null;

/** sql.js (the browser store): two stores on one database. */
const sqljs: Backend = {
  name: 'sql.js, two stores on one database',
  async scene(mode, clock) {
    SQL ??= (await initSqlJs()) as unknown as SqlJsModule;
    const driver = await SqlJsDriver.open(SQL);
    const rec = recording(driver);
    const store = await openSqlStateStore(rec.wrapped, { dialect: mode === 'unread' ? sqliteDialect : readFirst(sqliteDialect), clock, logger: quietLog });
    rec.transactions.length = 0;
    const other = await openSqlStateStore(driver, { clock, logger: quietLog });
    return { store, transactions: rec.transactions, other, close: async () => (await other.close(), await store.close()) };
  },
  unreadCas: sqlite.unreadCas,
  selectEffect: sqlite.selectEffect,
};

const PG_SELECT = /^SELECT [\s\S]* FROM "[^"]+"\.effects WHERE effect_key = \$1$/;
const PG_EXACT = /^UPDATE "[^"]+"\.effects SET [\s\S]* AND updated_at IS NOT DISTINCT FROM \$15::text$/;
const PG_COMBINED_EXACT = /^WITH u AS \(UPDATE "[^"]+"\.effects SET [\s\S]*updated_at IS NOT DISTINCT FROM/;

function pglite(combined: boolean): Backend {
  let lite: PGlite | null = null;
  let schemas = 0;
  afterAll(() => lite?.close());
  return {
    name: `PGlite, two drivers on one instance (${combined ? 'one statement per step' : 'statement by statement'})`,
    async scene(mode, clock) {
      lite ??= new PGlite();
      const schema = `remembered_${combined ? 'c' : 's'}_${++schemas}`;
      await lite.exec(`CREATE SCHEMA ${schema}`);
      const driver = new PgliteDriver(lite, { schema });
      await driver.resolveSchema();
      const rec = recording(driver);
      const dialect = mode === 'read' ? readFirst(postgresDialect(schema)) : combined ? postgresDialect(schema) : statementByStatement(postgresDialect(schema));
      const store = await new SqlStateStore(rec.wrapped, { dialect, clock, logger: quietLog }).open();
      rec.transactions.length = 0;
      const other = await new SqlStateStore(new PgliteDriver(lite, { schema }), { dialect: postgresDialect(schema), clock, logger: quietLog }).open();
      return { store, transactions: rec.transactions, other, close: async () => (await other.close(), await store.close()) };
    },
    unreadCas: combined ? PG_COMBINED_EXACT : PG_EXACT,
    selectEffect: PG_SELECT,
  };
}

function quiet(pool: pg.Pool): pg.Pool {
  pool.on('error', () => undefined);
  pool.on('connect', (client) => void client.on('error', () => undefined));
  return pool;
}

/** A real server: the store under test on its own pool (`prepare` as given; true is the default), the other handle a `createPgStore` on another. */
function server(db: () => FreshDatabase, prepare: boolean): Backend {
  let schemas = 0;
  return {
    name: `a real PostgreSQL server, two pools (prepare: ${prepare})`,
    async scene(mode, clock) {
      const schema = `remembered_${prepare ? 'p' : 'd'}_${++schemas}`;
      await db().createSchema(schema);
      const mine = quiet(new pg.Pool({ connectionString: db().url, max: 2 }));
      const theirs = quiet(new pg.Pool({ connectionString: db().url, max: 2 }));
      const driver = new PgDriver(mine, { schema, prepare });
      await driver.resolveSchema();
      const rec = recording(driver);
      // The dialect a store on this driver uses (`createPgStore`'s): prepare decides whether steps are combined.
      const dialect = mode === 'read' ? readFirst(postgresDialect(schema)) : postgresDialect(schema);
      const store = await new SqlStateStore(rec.wrapped, { dialect, clock, logger: quietLog }).open();
      rec.transactions.length = 0;
      const other = await createPgStore(theirs, { schema, clock, logger: quietLog });
      return {
        store,
        transactions: rec.transactions,
        other,
        close: async () => {
          await other.close();
          await store.close();
          await Promise.all([mine.end(), theirs.end()]);
        },
      };
    },
    unreadCas: prepare ? PG_COMBINED_EXACT : PG_EXACT,
    selectEffect: PG_SELECT,
  };
}

type Disturbance = (other: StateStore, actionId: string, advance: (ms: number) => void) => Promise<unknown>;

/** One allowed action on a fresh database; `disturb` runs through the other handle while the executor runs. */
async function run(backend: Backend, mode: 'unread' | 'read', disturb: Disturbance) {
  let t = Date.parse('2026-01-01T12:00:00Z');
  const clock = () => new Date(t);
  const s = await backend.scene(mode, clock);
  try {
    const ids = sequentialIds();
    const control = new Control({ policy: POLICY, store: s.store, clock, ids, logger: quietLog });
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500 }, principal: { agent: 'a' } }, { ids });
    const outcome = await control
      .execute(action, async () => {
        await disturb(s.other, action.actionId, (ms) => (t += ms)).catch((err: unknown) => `the other handle was refused: ${(err as Error).name}`);
        t += 1000;
        return { refund_id: 're_1' };
      })
      .then(
        (value) => ({ value }),
        (err: Error & { code?: string }) => ({ error: err.name, code: err.code, message: err.message }),
      );
    const effect = await s.other.getEffect(KEY);
    const events = (await s.other.events()).map((e) => ({ type: e.type, effectKey: e.effectKey, data: e.data }));
    const receipts = await s.other.receipts();
    const head = await s.other.chainHead();
    const chain = verifyChain(receipts, head);
    return {
      evidence: { outcome, effect, events, receipts: receipts.map((r) => r.json), chain: { ok: chain.ok, verified: chain.verified } },
      transactions: s.transactions,
    };
  } finally {
    await s.close();
  }
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
  // Rewritten by the other handle to exactly what this store remembers writing: the unread
  // compare-and-set applies, and reading first finds the very same row.
  // (A lease is never shortened: asked for 1 ms, it stays as it was, and updated_at is the same millisecond.)
  ['a rewrite of the row as it was', (other, id) => other.extendLease(KEY, id, 1)],
  // The clock going back: the compare-and-set compares the remembered stamps for equality, never order.
  ['nothing, while the clock went back a minute', async (_other, _id, advance) => advance(-61_000)],
  ['its lease extended after the clock went back a minute', async (other, id, advance) => (advance(-61_000), other.extendLease(KEY, id, 600_000))],
];

/** The store's own steps on ids with a lone surrogate, each as its result or the refusal's name. */
async function loneSurrogates(backend: Backend, mode: 'unread' | 'read') {
  const t = Date.parse('2026-01-01T12:00:00Z');
  const s = await backend.scene(mode, () => new Date(t));
  try {
    const steps: unknown[] = [];
    const step = (p: Promise<unknown>) =>
      p.then(
        (v) => steps.push(v),
        (err: Error) => steps.push(err.name),
      );
    for (const [key, actionId] of [
      [KEY, 'act_\uD800'],
      ['refund:\uDC00', 'act_2'],
    ] as const) {
      await step(s.store.reserveEffect(key, actionId, 300_000));
      await step(s.store.beginExecution(key, actionId));
      await step(s.store.commitEffect(key, actionId, { refund_id: 're_1' }));
      await step(s.store.markAmbiguous(key, actionId, 'timed out'));
    }
    return { steps, effects: await s.other.listEffects() };
  } finally {
    await s.close();
  }
}

/**
 * A caller changes the records the store hands back (they are its own objects); the store's next
 * step on the key writes what it would have written had it read the row.
 */
async function callerChangesRecords(backend: Backend, mode: 'unread' | 'read') {
  let t = Date.parse('2026-01-01T12:00:00Z');
  const s = await backend.scene(mode, () => new Date(t));
  try {
    const tamper = (r: EffectRecord) => {
      const w = r as { -readonly [K in keyof EffectRecord]: EffectRecord[K] };
      w.error = 'written by the caller';
      w.resolvedBy = 'mallory';
      w.resultJson = '{"forged":true}';
    };
    await s.store.reserveEffect(KEY, 'act_1', 300_000);
    t += 1000;
    tamper(await s.store.beginExecution(KEY, 'act_1'));
    t += 1000;
    tamper(await s.store.markAmbiguous(KEY, 'act_1', 'timed out'));
    t += 1000;
    const last = await s.store.markAmbiguous(KEY, 'act_1', 'timed out again');
    return { last, row: await s.other.getEffect(KEY) };
  } finally {
    await s.close();
  }
}

/**
 * A write of ours that rolled back after its compare-and-set applied (its events were refused
 * inside the transaction) leaves the store remembering a row that is not there; the next step
 * passes its check on that row, and must still decide on the row that is.
 */
async function afterRollback(backend: Backend, mode: 'unread' | 'read') {
  let t = Date.parse('2026-01-01T12:00:00Z');
  const s = await backend.scene(mode, () => new Date(t));
  try {
    await s.store.reserveEffect(KEY, 'act_1', 300_000);
    t += 1000;
    await s.store.beginExecution(KEY, 'act_1');
    t += 1000;
    const refused = await s.store.markAmbiguous(KEY, 'act_1', 'timed out', { drafts: () => [{ type: 'EXECUTION_AMBIGUOUS' } as never] }).then(
      () => 'written',
      (err: Error) => err.name,
    );
    const between = await s.other.getEffect(KEY);
    t += 1000;
    const again = await s.store.markAmbiguous(KEY, 'act_1', 'timed out again');
    return { refused, between, again, row: await s.other.getEffect(KEY), events: (await s.other.events()).length, transactions: s.transactions.slice(-2) };
  } finally {
    await s.close();
  }
}

function equivalence(backend: Backend, timeout?: number) {
  it(
    'a write of ours that rolled back: the next step decides on the row that is there, not the one remembered',
    async () => {
      const unread = await afterRollback(backend, 'unread');
      const read = await afterRollback(backend, 'read');
      const { transactions: _u, ...u } = unread;
      const { transactions: _r, ...r } = read;
      expect(u).toEqual(r);
      expect(u.refused).toBe(InvalidArgument.name);
      expect(u.between).toMatchObject({ state: 'executing', error: null });
      expect(u.row).toMatchObject({ state: 'ambiguous', error: 'timed out again' });
      // A step with no events is statement by statement on every backend: updateEffectExact first.
      const exact = /^UPDATE [\s\S]* AND updated_at IS (?:\?|NOT DISTINCT FROM \$15::text)$/;
      const [rolledBack, next] = unread.transactions as [string[], string[]];
      expect(next[0]).toMatch(exact);
      if (rolledBack.some((x) => exact.test(x))) {
        // Statement by statement the rolled-back compare-and-set had applied: the row remembered is
        // not there, the unread compare-and-set applies nothing, and the row is read.
        expect(next[1]).toMatch(backend.selectEffect);
      }
    },
    timeout,
  );

  it(
    'a caller that changes a record a step returned does not change what the next step writes',
    async () => {
      const unread = await callerChangesRecords(backend, 'unread');
      const read = await callerChangesRecords(backend, 'read');
      expect(unread).toEqual(read);
      expect(unread.row).toMatchObject({ state: 'ambiguous', error: 'timed out again', resolvedBy: null, resultJson: null });
    },
    timeout,
  );

  for (const [name, disturb] of disturbances) {
    it(
      `the other handle did ${name}: the same end as reading the row first`,
      async () => {
        const unread = await run(backend, 'unread', disturb);
        const read = await run(backend, 'read', disturb);
        expect(unread.evidence).toEqual(read.evidence);
        const outcome = unread.transactions[1]!;
        expect(outcome[0]).toMatch(backend.unreadCas);
        expect(read.transactions[1]![0]).toMatch(backend.selectEffect);
        if (name === 'nothing' || name === 'a rewrite of the row as it was' || name === 'nothing, while the clock went back a minute') {
          expect(unread.evidence.outcome).toEqual({ value: { refund_id: 're_1' } });
          expect(
            outcome.some((s) => /^SELECT/.test(s)),
            'an outcome whose row is as this store wrote it reads nothing',
          ).toBe(false);
        } else {
          // The row moved on: the unread compare-and-set wrote nothing, and the row was read.
          expect(outcome[1]).toMatch(backend.selectEffect);
        }
      },
      timeout,
    );
  }

  it(
    'ids with a lone surrogate (no UTF-8 form: the database keeps U+FFFD) are refused before anything is written, unread or read first',
    async () => {
      const unread = await loneSurrogates(backend, 'unread');
      const read = await loneSurrogates(backend, 'read');
      expect(unread).toEqual(read);
      expect(unread.steps).toEqual(Array(8).fill(InvalidArgument.name));
      expect(unread.effects).toEqual([]);
    },
    timeout,
  );
}

describe('the outcome on the row the reservation wrote (better-sqlite3, two handles on one file)', () => {
  equivalence(sqlite);
});

describe('the outcome on the row the reservation wrote (sql.js, two stores on one database)', () => {
  equivalence(sqljs, 30_000);
});

describe('the outcome on the row the reservation wrote (PGlite, statement by statement)', () => {
  equivalence(pglite(false), 30_000);
});

describe('the outcome on the row the reservation wrote (PGlite, one statement per step)', () => {
  equivalence(pglite(true), 30_000);
});

describePg('the outcome on the row the reservation wrote (a real server)', (url) => {
  let db: FreshDatabase | null = null;
  beforeAll(async () => {
    db = await freshDatabase(url.url, 'remembered');
  }, 60_000);
  afterAll(async () => db?.drop());
  describe('prepare: false (statement by statement)', () =>
    equivalence(
      server(() => db!, false),
      30_000,
    ));
  describe('prepare: true (one statement per step)', () =>
    equivalence(
      server(() => db!, true),
      30_000,
    ));
});
