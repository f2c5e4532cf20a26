/**
 * The pg and PGlite drivers themselves: the optional peers (a missing one is MissingDependency,
 * through openStore too), argument checks, who owns the pool, a lazy pool, the URL form with a
 * schema in `options`, and Table A's first row on a real server — a connection killed before
 * COMMIT is a failed write (rolled back, raised, not ambiguous) and the pool recovers.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { AmbiguousWrite, InvalidArgument, StoreError, createAction } from '@ctrlrun/kernel';
import { buildReceipt, openSqlStateStore } from '@ctrlrun/kernel/store';
import { openStore } from '@ctrlrun/store-node';
import { PgDriver, PgStore, createPgStore, openPgStore } from '@ctrlrun/store-node/pg';
import { createPgliteStore } from '@ctrlrun/store-node/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const NODE_FLAGS = ['--conditions=@ctrlrun/source', '--import', 'tsx'];
/** Resolution hooks that make `pg` and `@electric-sql/pglite` unresolvable, as where they were never installed. */
const HIDE = `
export async function resolve(specifier, context, next) {
  if (specifier === 'pg' || specifier.startsWith('pg/') || specifier.startsWith('@electric-sql/pglite')) {
    const err = new Error("Cannot find package '" + specifier + "' imported from " + context.parentURL);
    err.code = 'ERR_MODULE_NOT_FOUND';
    throw err;
  }
  return next(specifier, context);
}`;
const HIDE_IMPORT = `data:text/javascript,${encodeURIComponent(`import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HIDE)}`)});`)}`;

describe('the optional peers', () => {
  it('a missing pg or PGlite is MissingDependency naming the install, through openStore', () => {
    const script = `
      import { openStore } from '@ctrlrun/store-node';
      const out = [];
      for (const url of ['postgres://nobody@127.0.0.1:1/none', 'pglite:']) {
        try { await openStore(url); out.push({ opened: url }); }
        catch (e) { out.push({ name: e.name, code: e.code, message: e.message }); }
      }
      console.log(JSON.stringify(out));`;
    const r = spawnSync(process.execPath, [...NODE_FLAGS, '--import', HIDE_IMPORT, '--input-type=module', '-e', script], { encoding: 'utf8', cwd: ROOT });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toEqual([
      { name: 'MissingDependency', code: 'ERR_MISSING_DEPENDENCY', message: 'pg is not installed; the PostgreSQL store needs it: npm install pg@8' },
      {
        name: 'MissingDependency',
        code: 'ERR_MISSING_DEPENDENCY',
        message: '@electric-sql/pglite is not installed; the PGlite store needs it: npm install @electric-sql/pglite',
      },
    ]);
  });
});

describe('arguments', () => {
  it('refuses what is not a pool, a PGlite, an options object or a schema name', async () => {
    await expect(createPgStore({} as never)).rejects.toBeInstanceOf(InvalidArgument);
    await expect(createPgStore(null as never)).rejects.toBeInstanceOf(InvalidArgument);
    await expect(createPgliteStore({ query() {} } as never)).rejects.toBeInstanceOf(InvalidArgument);
    const pool = new pg.Pool();
    await expect(createPgStore(pool, null as never)).rejects.toBeInstanceOf(InvalidArgument);
    await expect(createPgStore(pool, { schema: '' })).rejects.toThrow(/schema "" is not a usable name/);
    await expect(createPgStore(pool, { schema: 'a\u0000b' })).rejects.toBeInstanceOf(InvalidArgument);
    await expect(createPgStore(pool, { readOnly: 'yes' as never })).rejects.toThrow(/readOnly must be a boolean/);
    await expect(openPgStore('mysql://x')).rejects.toThrow(/postgres:\/\/ or postgresql:\/\//);
    await pool.end();
  });

  it('a lazy pool function that returns something else is refused when first used', async () => {
    await expect(createPgStore(async () => ({}) as never)).rejects.toThrow(/must return a pg.Pool/);
  });
});

describePg('the pg driver on a server', (server) => {
  let db: FreshDatabase;
  let pool: pg.Pool;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'driver');
    pool = new pg.Pool({ connectionString: db.url, max: 4 });
    pool.on('error', () => undefined);
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('a pool passed in stays the caller\u2019s; a lazy pool is asked for once', async () => {
    await db.createSchema('owned');
    let asked = 0;
    const store = await createPgStore(async () => (asked++, pool), { schema: 'owned' });
    await store.reserveEffect('refund:o', 'act_o', 60_000);
    await store.getEffect('refund:o');
    await store.close();
    expect(asked).toBe(1);
    expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]); // not ended
  });

  it('without a schema the role\u2019s current schema is used; a URL can name one in options', async () => {
    const inPublic = await createPgStore(pool);
    expect(inPublic.schema).toBe('public');
    await inPublic.close();
    await db.createSchema('by_url');
    const store = await openStore(db.urlFor('by_url'));
    expect(store).toBeInstanceOf(PgStore);
    expect((store as PgStore).schema).toBe('by_url');
    await store.reserveEffect('refund:u', 'act_u', 60_000);
    await store.close();
    expect(await db.sql('SELECT effect_key FROM by_url.effects')).toEqual([{ effect_key: 'refund:u' }]);
  });

  it("a URL's connect_timeout opens as any other URL (pg and the server take it)", async () => {
    const store = await openPgStore(`${db.url}${db.url.includes('?') ? '&' : '?'}connect_timeout=5`);
    await store.reserveEffect('refund:connect_timeout', 'act_ct', 60_000);
    expect(await store.getEffect('refund:connect_timeout')).toMatchObject({ state: 'reserved' });
    await store.close();
  });

  it('the kernel alone opens a pg driver with the default (public) dialect', async () => {
    const driver = new PgDriver(pool);
    const store = await openSqlStateStore(driver);
    expect(store.dialect).toBe('postgres');
    await store.close();
  });

  it('a transaction an error aborted, which fn caught and went past, is a failed write: COMMIT answered ROLLBACK, nothing written, never its value', async () => {
    await db.createSchema('aborted');
    await db.sql('CREATE TABLE aborted.t(v int PRIMARY KEY)');
    for (const prepare of [true, false]) {
      const driver = new PgDriver(pool, { schema: 'aborted', prepare });
      await driver.resolveSchema();
      const err = await driver
        .transaction(async (tx) => {
          await tx.query('INSERT INTO t VALUES ($1)', [1]);
          // A duplicate key aborts the transaction; caught, and the body resolves as if all went well.
          await tx.query('INSERT INTO t VALUES ($1)', [1]).catch(() => undefined);
          return 'written';
        })
        .then(
          (v) => v,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(StoreError);
      expect(err).not.toBeInstanceOf(AmbiguousWrite);
      expect((err as Error).message).toMatch(/COMMIT rolled it back; nothing was written/);
      expect(await db.sql('SELECT v FROM aborted.t WHERE v = 1')).toEqual([]);
      // The connection is fine: the next transaction commits.
      await driver.transaction(async (tx) => void (await tx.query('INSERT INTO t VALUES ($1)', [prepare ? 2 : 3])));
      await driver.close();
    }
    expect(await db.sql('SELECT v FROM aborted.t ORDER BY v')).toEqual([{ v: 2 }, { v: 3 }]);
  });

  it('Table A, row 1: a connection killed before COMMIT is a failed write — rolled back, raised, never ambiguous — and the pool recovers', async () => {
    await db.createSchema('killed');
    const store = await createPgStore(pool, { schema: 'killed' });
    const action = createAction({ name: 'stripe.refund', arguments: { amount: 1 }, principal: { agent: 'a' } });
    const draft = (id: string) => ({
      receiptId: id,
      actionId: action.actionId,
      effectKey: null,
      result: 'committed',
      finishedAt: '2026-01-01T12:00:01.000Z',
      document: buildReceipt(action, {
        receiptId: id,
        decision: 'allow',
        decisionReason: 'rule[0]',
        approvalId: null,
        approver: null,
        effectKey: null,
        attempt: 1,
        result: 'committed',
        execution: 'committed',
        error: null,
        startedAt: '2026-01-01T12:00:00.000Z',
        finishedAt: '2026-01-01T12:00:01.000Z',
        policyHash: `sha256:${'a'.repeat(64)}`,
        policyVersion: null,
        controls: [],
      }).document,
    });
    // Hold the head row's lock so the receipt write waits inside its transaction, then kill that backend.
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('UPDATE killed.receipt_chain SET seq = seq WHERE id = 1');
    const write = store.putReceipt(draft('ctr_killed')).then(
      () => null,
      (e: unknown) => e,
    );
    // The store tries a receipt written alone once more after a failure that rolled it back: both
    // tries wait on the lock, and both backends are killed there.
    const killed: number[] = [];
    while (killed.length < 2) {
      const rows = await db.sql<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%receipt_chain%'",
      );
      const victim = rows.map((r) => r.pid).find((pid) => !killed.includes(pid));
      if (victim === undefined) continue;
      await db.sql('SELECT pg_terminate_backend($1)', [victim]);
      killed.push(victim);
    }
    const err = await write;
    expect(err).toBeInstanceOf(StoreError);
    expect(err).not.toBeInstanceOf(AmbiguousWrite);
    await holder.query('ROLLBACK');
    await holder.end();
    expect(await store.chainHead()).toMatchObject({ seq: 0 });
    expect(await db.sql('SELECT receipt_id FROM killed.receipts')).toEqual([]);
    // The pool dropped the dead client: the next writes go through.
    const stored = await store.putReceipt(draft('ctr_after'));
    expect(stored.seq).toBe(1);
    // The same receipt id again: ON CONFLICT rolls the head back and returns the stored row.
    expect(await store.putReceipt(draft('ctr_after'))).toEqual(stored);
    expect(await store.chainHead()).toMatchObject({ seq: 1, hash: stored.hash });
    await store.close();
  });
});

describe('the connection that writes alone', () => {
  // A client that answers each query when the test says so, and tells whether it is held open (ref'd).
  function fakeClient() {
    type Result = { rows: unknown[]; rowCount: number };
    const pending: { resolve: (r: Result) => void; reject: (e: unknown) => void }[] = [];
    const client = {
      held: false,
      ended: false,
      pending,
      connect: async () => undefined,
      end: async () => {
        client.ended = true;
      },
      on: () => client,
      ref: () => {
        client.held = true;
      },
      unref: () => {
        client.held = false;
      },
      query: () => new Promise<Result>((resolve, reject) => pending.push({ resolve, reject })),
    };
    return client;
  }
  const until = async (ok: () => boolean): Promise<void> => {
    for (let i = 0; i < 1000 && !ok(); i++) await new Promise((r) => setTimeout(r, 1));
    expect(ok()).toBe(true);
  };

  function scene(groupCommit?: boolean, logger?: { warn(message: string): void }) {
    const clients: ReturnType<typeof fakeClient>[] = [];
    const pool = {
      connect: async () => Promise.reject(new Error('no pool client here')),
      query: async () => ({ rows: [], rowCount: 0 }),
      end: async () => undefined,
    };
    const driver = new PgDriver(pool, {
      prepare: true,
      ...(groupCommit === undefined ? {} : { groupCommit }),
      ...(logger === undefined ? {} : { logger }),
      freshClient: () => {
        const c = fakeClient();
        clients.push(c);
        return c;
      },
    });
    return { clients, driver };
  }
  const serverError = (code: string) => Object.assign(new Error(`server said ${code}`), { code, severity: 'ERROR' });

  /**
   * One write out and answered while `sqls` arrive: they go as one batch (BEGIN, each, COMMIT),
   * its `sqls.length + 2` answers left pending; each write's outcome (its value or its error).
   */
  async function batchOf(clients: ReturnType<typeof fakeClient>[], driver: PgDriver, sqls: readonly string[]): Promise<Promise<unknown>[]> {
    const first = driver.writeAlone('SELECT 1', [1]);
    await until(() => clients[0]?.pending.length === 1);
    const writes = sqls.map((sql, i) => driver.writeAlone(sql, [i]).catch((e: unknown) => e));
    clients[0]!.pending[0]!.resolve({ rows: [], rowCount: 1 });
    await first;
    await until(() => clients[0]!.pending.length === sqls.length + 3);
    return writes;
  }

  it('writes that arrive while one is out wait, then commit together (BEGIN, each in call order, COMMIT), answered after the COMMIT; held open only while out', async () => {
    const { clients, driver } = scene();
    const a = driver.writeAlone('SELECT 1', [1]);
    await until(() => clients[0]?.pending.length === 1);
    const b = driver.writeAlone('SELECT 2', [2]);
    const c = driver.writeAlone('SELECT 3', [3]);
    await new Promise((r) => setTimeout(r, 5));
    expect(clients[0]!.pending, 'b and c wait for a').toHaveLength(1);
    expect(clients[0]!.held).toBe(true);
    clients[0]!.pending[0]!.resolve({ rows: [{ v: 1 }], rowCount: 1 });
    expect((await a).rows).toEqual([{ v: 1 }]);
    await until(() => clients[0]!.pending.length === 5);
    const answered = { b: false, c: false };
    void b.then(() => (answered.b = true));
    void c.then(() => (answered.c = true));
    clients[0]!.pending[1]!.resolve({ rows: [], rowCount: 0, command: 'BEGIN' } as never);
    clients[0]!.pending[2]!.resolve({ rows: [{ v: 2 }], rowCount: 1 });
    clients[0]!.pending[3]!.resolve({ rows: [{ v: 3 }], rowCount: 1 });
    await new Promise((r) => setTimeout(r, 5));
    expect(answered, 'nobody answered before the COMMIT').toEqual({ b: false, c: false });
    clients[0]!.pending[4]!.resolve({ rows: [], rowCount: 0, command: 'COMMIT' } as never);
    expect((await b).rows).toEqual([{ v: 2 }]);
    expect((await c).rows).toEqual([{ v: 3 }]);
    expect(clients[0]!.held, 'idle: not held open').toBe(false);
    expect(clients).toHaveLength(1);
    await driver.close();
    expect(clients[0]!.ended).toBe(true);
  });

  it('a write refused by the server in a batch gets its error; the others are told nothing was written (never ambiguous)', async () => {
    const { clients, driver } = scene();
    const [b, c, d] = await batchOf(clients, driver, ['SELECT 2', 'SELECT 3', 'SELECT 4']);
    clients[0]!.pending[1]!.resolve({ rows: [], rowCount: 0 });
    clients[0]!.pending[2]!.resolve({ rows: [], rowCount: 1 });
    clients[0]!.pending[3]!.reject(serverError('23505'));
    clients[0]!.pending[4]!.reject(serverError('25P02'));
    clients[0]!.pending[5]!.resolve({ rows: [], rowCount: 0, command: 'ROLLBACK' } as never);
    const [eb, ec, ed] = await Promise.all([b, c, d]);
    expect((ec as { code?: string }).code).toBe('23505');
    for (const e of [eb, ed]) {
      expect(e).toBeInstanceOf(StoreError);
      expect(e).not.toBeInstanceOf(AmbiguousWrite);
      expect((e as Error).message).toMatch(/nothing was written.*server said 23505/);
    }
    expect(clients[0]!.ended, 'the connection stays').toBe(false);
    await driver.close();
  });

  it('a statement whose name the server does not know, after an earlier one in its batch failed, is not taken for a lost statement: the store goes on naming, nothing warned', async () => {
    const warnings: string[] = [];
    const { clients, driver } = scene(undefined, { warn: (m: string) => void warnings.push(m) });
    const [b, c, d] = await batchOf(clients, driver, ['SELECT 2', 'SELECT 3', 'SELECT 3']);
    const name = `ctrlrun_${createHash('sha256').update('SELECT 3', 'utf8').digest('hex').slice(0, 32)}`;
    clients[0]!.pending[1]!.resolve({ rows: [], rowCount: 0 });
    clients[0]!.pending[2]!.reject(serverError('23505'));
    // The next one's Parse refused in the aborted transaction (pg forgets the name), and the one
    // after it, sent by name, meets that: 26000 before 25P02.
    clients[0]!.pending[3]!.reject(serverError('25P02'));
    clients[0]!.pending[4]!.reject(Object.assign(new Error(`prepared statement "${name}" does not exist`), { code: '26000', severity: 'ERROR' }));
    clients[0]!.pending[5]!.resolve({ rows: [], rowCount: 0, command: 'ROLLBACK' } as never);
    const [eb, ec, ed] = await Promise.all([b, c, d]);
    expect((eb as { code?: string }).code).toBe('23505');
    for (const e of [ec, ed]) expect((e as Error).message).toMatch(/nothing was written.*server said 23505/);
    expect(driver.prepared, 'still naming').toBe(true);
    expect(warnings).toEqual([]);
    await driver.close();
  });

  it('close() while a batch is out: the connection stays held open until it has ended', async () => {
    const { clients, driver } = scene();
    const a = driver.writeAlone('SELECT 1', [1]).catch((e: unknown) => e);
    await until(() => clients[0]?.pending.length === 1);
    let ended: () => void = () => undefined;
    clients[0]!.end = () => new Promise<void>((resolve) => (ended = resolve));
    const closing = driver.close();
    await new Promise((r) => setTimeout(r, 5));
    clients[0]!.pending[0]!.resolve({ rows: [], rowCount: 1 });
    await a;
    await new Promise((r) => setTimeout(r, 5));
    expect(clients[0]!.held, 'held while it ends').toBe(true);
    ended();
    await closing;
  });

  it('a write refused under a COMMIT that says it committed is never told "nothing was written": every write in the batch is AmbiguousWrite', async () => {
    const { clients, driver } = scene();
    const [b, c] = await batchOf(clients, driver, ['SELECT 2', 'SELECT 3']);
    clients[0]!.pending[1]!.resolve({ rows: [], rowCount: 0 });
    clients[0]!.pending[2]!.resolve({ rows: [], rowCount: 1 });
    clients[0]!.pending[3]!.reject(serverError('23505'));
    clients[0]!.pending[4]!.resolve({ rows: [], rowCount: 0, command: 'COMMIT' } as never);
    for (const e of await Promise.all([b, c])) expect(e).toBeInstanceOf(AmbiguousWrite);
    await driver.close();
  });

  it('a connection that breaks under a batch: every write in it is AmbiguousWrite, and the next goes on a new connection', async () => {
    const { clients, driver } = scene();
    const [b, c] = await batchOf(clients, driver, ['SELECT 2', 'SELECT 3']);
    clients[0]!.pending[1]!.resolve({ rows: [], rowCount: 0 });
    clients[0]!.pending[2]!.resolve({ rows: [], rowCount: 1 });
    clients[0]!.pending[3]!.resolve({ rows: [], rowCount: 1 });
    clients[0]!.pending[4]!.reject(new Error('socket reset')); // the COMMIT's answer never came
    for (const e of await Promise.all([b, c])) {
      expect(e).toBeInstanceOf(AmbiguousWrite);
      expect((e as Error).message).toMatch(/transaction of 2 writes that commit together.*socket reset/);
    }
    expect(clients[0]!.ended).toBe(true);
    const next = driver.writeAlone('SELECT 4', [4]);
    await until(() => clients[1]?.pending.length === 1);
    expect(clients[1]!.held).toBe(true);
    clients[1]!.pending[0]!.resolve({ rows: [], rowCount: 1 });
    await next;
    expect(clients[1]!.held).toBe(false);
    await driver.close();
  });

  it('groupCommit: false sends each write at once, pipelined, its own commit; held open until the last answers', async () => {
    const { clients, driver } = scene(false);
    const a = driver.writeAlone('SELECT 1', [1]);
    const b = driver.writeAlone('SELECT 2', [2]);
    await until(() => clients[0]?.pending.length === 2);
    clients[0]!.pending[0]!.resolve({ rows: [], rowCount: 1 });
    await a;
    expect(clients[0]!.held, 'b is still out').toBe(true);
    clients[0]!.pending[1]!.resolve({ rows: [], rowCount: 1 });
    await b;
    expect(clients[0]!.held).toBe(false);
    await driver.close();
  });
});
