/**
 * Group commit (SqlEngine.grouped): the outcomes of concurrent callers of one Control that arrive
 * while another outcome is being written share one transaction, in arrival order, each under its
 * own savepoint (better-sqlite3, PGlite) or back to back (pg, asked for); every caller is answered
 * after the shared COMMIT, one caller's failure touches no other's, and the chain verifies.
 * Counted through a driver that records its transactions; the same run with `groupCommit: false`
 * takes one transaction per outcome.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { Control, createAction, loadPolicy, verifyChain, type StateStore } from '@ctrlrun/kernel';
import { openSqlStateStore, type SqlDriver, type SqlExecutor } from '@ctrlrun/kernel/store';
import { BetterSqlite3Driver, createBetterSqlite3Store, type BetterSqlite3Database } from '@ctrlrun/store-node/better-sqlite3';
import { createPgStore } from '@ctrlrun/store-node/pg';
import { createPgliteStore } from '@ctrlrun/store-node/pglite';
import { afterAll, describe, expect, it } from 'vitest';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

const POLICY = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);
const principal = { agent: 'refund-agent' };
const CALLERS = 8;

/** A driver that counts its transactions and the savepoints run in them. */
function counting(inner: SqlDriver): { driver: SqlDriver; counts: { transactions: number; savepoints: number } } {
  const counts = { transactions: 0, savepoints: 0 };
  const wrap = (ex: SqlExecutor): SqlExecutor => ({
    query: (sql, params) => ex.query(sql, params),
    exec: (sql) => {
      if (/^SAVEPOINT /.test(sql)) counts.savepoints++;
      return ex.exec(sql);
    },
  });
  const driver: SqlDriver = {
    name: inner.name,
    dialect: inner.dialect,
    capabilities: inner.capabilities,
    query: (sql, params) => inner.query(sql, params),
    exec: (sql) => inner.exec(sql),
    close: () => inner.close(),
    transaction: (fn) => {
      counts.transactions++;
      return inner.transaction((tx) => fn(wrap(tx)));
    },
  };
  return { driver, counts };
}

/** A gate every executor waits at until all `n` are inside: their outcomes then arrive together. */
function gate(n: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return async () => {
    if (++arrived === n) open();
    await opened;
  };
}

/**
 * CALLERS concurrent allowed actions on distinct keys, their executors held until all have started.
 * `spoil(i, key)` runs in caller i's executor (a row moved on under it, say).
 */
async function together(store: StateStore, tag: string, spoil?: (i: number, key: string) => Promise<void> | void) {
  const control = new Control({ policy: POLICY, store, logger: { warn: () => undefined } });
  const inside = gate(CALLERS);
  return Promise.allSettled(
    Array.from({ length: CALLERS }, (_, i) =>
      control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `${tag}_${i}`, amount: 500 }, principal }), async () => {
        await inside();
        await spoil?.(i, `refund:${tag}_${i}`);
        return { refund: i };
      }),
    ),
  );
}

async function states(store: StateStore, tag: string): Promise<(string | null)[]> {
  return Promise.all(Array.from({ length: CALLERS }, async (_, i) => (await store.getEffect(`refund:${tag}_${i}`))?.state ?? null));
}

describe('group commit on a better-sqlite3 file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-group-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let files = 0;
  async function open(groupCommit?: boolean) {
    const path = join(dir, `g${files++}.db`);
    await (await createBetterSqlite3Store(path)).close();
    const db = new Database(path) as unknown as BetterSqlite3Database;
    const { driver, counts } = counting(new BetterSqlite3Driver(db));
    const store = await openSqlStateStore(driver, groupCommit === undefined ? {} : { groupCommit });
    return { store, counts, db };
  }

  it('writes the outcomes that arrive together in fewer transactions, every caller answered, the chain intact', async () => {
    const { store, counts } = await open();
    const results = await together(store, 'g');
    expect(results.map((r) => r.status)).toEqual(Array(CALLERS).fill('fulfilled'));
    expect(results.map((r) => (r as PromiseFulfilledResult<unknown>).value)).toEqual(Array.from({ length: CALLERS }, (_, i) => ({ refund: i })));
    expect(await states(store, 'g')).toEqual(Array(CALLERS).fill('committed'));
    // The first reservation alone, the other seven in one group; the same for the outcomes: each under its own savepoint.
    // Without group commit: 2 × CALLERS (the next test); with the reservations alone, CALLERS + 2.
    expect(counts.transactions).toBeLessThanOrEqual(CALLERS);
    expect(counts.savepoints).toBeGreaterThanOrEqual(2);
    const receipts = await store.receipts();
    expect(receipts).toHaveLength(CALLERS);
    expect(verifyChain(receipts, await store.chainHead())).toMatchObject({ ok: true, verified: CALLERS });
    await store.close();
  });

  it("the reservations that arrive together share a transaction too; one refused (its key taken) touches no other's", async () => {
    const { store, counts } = await open();
    const control = new Control({ policy: POLICY, store, logger: { warn: () => undefined } });
    let ran = 0;
    // Callers 0 and 1 propose the same payment: one key, reserved at most once.
    const results = await Promise.allSettled(
      Array.from({ length: CALLERS }, (_, i) =>
        control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `r_${Math.max(i, 1)}`, amount: 500 }, principal }), () => ({
          refund: ++ran,
        })),
      ),
    );
    const refused = results.filter((r) => r.status === 'rejected');
    expect(refused).toHaveLength(1);
    expect((refused[0] as PromiseRejectedResult).reason).toMatchObject({ code: expect.stringMatching(/DUPLICATE/i) });
    expect(ran).toBe(CALLERS - 1);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(CALLERS - 1);
    // Seven reservations in one group: a savepoint each, far fewer transactions than one per reservation.
    expect(counts.savepoints).toBeGreaterThanOrEqual(CALLERS - 1);
    expect(counts.transactions).toBeLessThan(CALLERS);
    const receipts = await store.receipts();
    expect(receipts.filter((r) => r.result === 'committed')).toHaveLength(CALLERS - 1);
    expect(verifyChain(receipts, await store.chainHead())).toMatchObject({ ok: true });
    await store.close();
  });

  it('groupCommit: false writes one transaction per outcome', async () => {
    const { store, counts } = await open(false);
    const results = await together(store, 'n');
    expect(results.map((r) => r.status)).toEqual(Array(CALLERS).fill('fulfilled'));
    expect(counts.transactions).toBe(2 * CALLERS);
    expect(counts.savepoints).toBe(0);
    expect(verifyChain(await store.receipts(), await store.chainHead())).toMatchObject({ ok: true, verified: CALLERS });
    await store.close();
  });

  it("one caller's failure in a group touches no other's: its savepoint is rolled back, the others commit", async () => {
    const { store, counts, db } = await open();
    const bad = CALLERS - 1;
    // The last caller's row moves on while its executor runs (another writer took it over): its
    // outcome's compare-and-set is refused inside the group, under its own savepoint.
    const results = await together(store, 'f', (i, key) => {
      if (i === bad) db.prepare("UPDATE effects SET action_id = 'act_someone_else' WHERE effect_key = ?").run(key);
    });
    expect(counts.savepoints).toBeGreaterThanOrEqual(2);
    for (let i = 0; i < CALLERS; i++) expect(results[i]!.status, `caller ${i}`).toBe(i === bad ? 'rejected' : 'fulfilled');
    const s = await states(store, 'f');
    expect(s.slice(0, bad)).toEqual(Array(bad).fill('committed'));
    expect(s[bad]).toBe('executing');
    const receipts = await store.receipts();
    expect(receipts.filter((r) => r.result === 'committed')).toHaveLength(bad);
    expect(verifyChain(receipts, await store.chainHead())).toMatchObject({ ok: true });
    await store.close();
  });

  it('a single caller is written as before: no savepoint', async () => {
    const { store, counts } = await open();
    const control = new Control({ policy: POLICY, store, logger: { warn: () => undefined } });
    for (let i = 0; i < 3; i++)
      await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `s_${i}`, amount: 5 }, principal }), () => i);
    expect(counts.transactions).toBe(6);
    expect(counts.savepoints).toBe(0);
    await store.close();
  });
});

describe('group commit on PGlite', () => {
  it('the outcomes that arrive together share a transaction; the chain verifies', async () => {
    const lite = new PGlite();
    const store = await createPgliteStore(lite);
    const results = await together(store, 'p');
    expect(results.map((r) => r.status)).toEqual(Array(CALLERS).fill('fulfilled'));
    expect(await states(store, 'p')).toEqual(Array(CALLERS).fill('committed'));
    expect(verifyChain(await store.receipts(), await store.chainHead())).toMatchObject({ ok: true, verified: CALLERS });
    await store.close();
    await lite.close();
  });
});

describePg('group commit on PostgreSQL (groupCommit: true, back to back)', (server) => {
  let db: FreshDatabase;
  const pools: pg.Pool[] = [];
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await db?.drop();
  });
  async function open(schema: string, prepare: boolean) {
    db ??= await freshDatabase(server.url, 'group_commit');
    await db.createSchema(schema);
    const pool = new pg.Pool({ connectionString: db.url, max: 12 });
    pool.on('error', () => undefined);
    pools.push(pool);
    return createPgStore(pool, { schema, prepare, groupCommit: true, logger: { warn: () => undefined } });
  }
  const commits = async (schema: string) => Number((await db.sql<{ n: string }>(`SELECT count(*)::text AS n FROM "${schema}".receipts`))[0]!.n);

  for (const prepare of [true, false]) {
    it(`every caller committed and answered, the chain intact (prepare: ${prepare})`, async () => {
      const schema = `gc_ok_${prepare}`;
      const store = await open(schema, prepare);
      const results = await together(store, 'q');
      expect(results.map((r) => r.status)).toEqual(Array(CALLERS).fill('fulfilled'));
      expect(await states(store, 'q')).toEqual(Array(CALLERS).fill('committed'));
      expect(await commits(schema)).toBe(CALLERS);
      expect(verifyChain(await store.receipts(), await store.chainHead())).toMatchObject({ ok: true, verified: CALLERS });
      await store.close();
    });

    it(`one caller's failure rolls the group back and every caller is written alone: the others commit (prepare: ${prepare})`, async () => {
      const schema = `gc_fail_${prepare}`;
      const store = await open(schema, prepare);
      const bad = CALLERS - 1;
      const results = await together(store, 'r', async (i, key) => {
        if (i === bad) await db.sql(`UPDATE "${schema}".effects SET action_id = 'act_someone_else' WHERE effect_key = $1`, [key]);
      });
      for (let i = 0; i < CALLERS; i++) expect(results[i]!.status, `caller ${i}`).toBe(i === bad ? 'rejected' : 'fulfilled');
      const s = await states(store, 'r');
      expect(s.slice(0, bad)).toEqual(Array(bad).fill('committed'));
      expect(s[bad]).toBe('executing');
      expect(verifyChain(await store.receipts(), await store.chainHead())).toMatchObject({ ok: true });
      await store.close();
    });
  }
});

describePg('group commit on PostgreSQL by default (prepare: the connection that writes alone)', (server) => {
  let db: FreshDatabase;
  const pools: pg.Pool[] = [];
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await db?.drop();
  });
  /** A store on the default path; the connection that writes alone counts its transactions and the writes in them. */
  async function open(schema: string) {
    db ??= await freshDatabase(server.url, 'group_alone');
    await db.createSchema(schema);
    const pool = new pg.Pool({ connectionString: db.url, max: 12 });
    pool.on('error', () => undefined);
    pools.push(pool);
    // transactions: a write outside BEGIN … COMMIT is one, a BEGIN … COMMIT is one.
    const seen = { begins: 0, commits: 0, alone: 0, reservations: 0, transactions: 0 };
    let open = false;
    const freshClient = () => {
      const client = new pg.Client({ connectionString: db.url, pipeline: true } as pg.ClientConfig);
      const query = client.query.bind(client) as (config: unknown) => Promise<unknown>;
      (client as unknown as { query: (config: unknown) => Promise<unknown> }).query = (config: unknown) => {
        const text = typeof config === 'string' ? config : (config as { text: string }).text;
        if (text === 'BEGIN') (seen.begins++, seen.transactions++, (open = true));
        else if (text === 'COMMIT') (seen.commits++, (open = false));
        else if (/^WITH r AS \(INSERT /.test(text)) (seen.reservations++, open || seen.transactions++);
        else if (/^WITH /.test(text)) (seen.alone++, open || seen.transactions++);
        return query(config);
      };
      return client;
    };
    const store = await createPgStore(pool, { schema, freshClient, logger: { warn: () => undefined } });
    return { store, seen };
  }

  it('the outcomes that arrive together commit in one transaction (BEGIN … COMMIT, sent back to back), every caller answered, the chain intact', async () => {
    const { store, seen } = await open('ga_ok');
    const results = await together(store, 'a');
    expect(results.map((r) => r.status)).toEqual(Array(CALLERS).fill('fulfilled'));
    expect(await states(store, 'a')).toEqual(Array(CALLERS).fill('committed'));
    expect(seen.alone, 'every outcome one statement').toBe(CALLERS);
    expect(seen.reservations, 'every reservation one statement, on the same connection').toBe(CALLERS);
    expect(seen.commits, 'at least one batch').toBeGreaterThan(0);
    expect(seen.commits).toBe(seen.begins);
    // The first write goes at once; those that arrive while it is out go together.
    expect(seen.transactions, 'fewer transactions than writes').toBeLessThan(2 * CALLERS);
    expect(verifyChain(await store.receipts(), await store.chainHead())).toMatchObject({ ok: true, verified: CALLERS });
    await store.close();
  });

  it("one caller's row moved on in a batch: it writes nothing, the statements sealed behind it write nothing either and are written again on their own; the others commit", async () => {
    const { store } = await open('ga_moved');
    const bad = 3;
    const results = await together(store, 'm', async (i, key) => {
      if (i === bad) await db.sql(`UPDATE "ga_moved".effects SET action_id = 'act_someone_else' WHERE effect_key = $1`, [key]);
    });
    for (let i = 0; i < CALLERS; i++) expect(results[i]!.status, `caller ${i}`).toBe(i === bad ? 'rejected' : 'fulfilled');
    const s = await states(store, 'm');
    expect(s.filter((x) => x === 'committed')).toHaveLength(CALLERS - 1);
    expect(verifyChain(await store.receipts(), await store.chainHead())).toMatchObject({ ok: true });
    await store.close();
  });
});
