/**
 * The Postgres dialect's combined statements (kernel store/combined.ts): an allowed action is two
 * transactions of one write statement each (the outcome compares the row the reservation wrote,
 * unread), with the same evidence as statement by statement; the server-sealed receipt verifies;
 * a chain head the server may not splice, a receipt id already stored, and a failing receipt
 * INSERT (T170) all keep their statement-by-statement behaviour. PGlite always; a real server for
 * 8 concurrent callers.
 */
import { PGlite } from '@electric-sql/pglite';
import { Control, callbackSink, createAction, loadPolicy, sequentialIds, verifyChain, type StateStore } from '@ctrlrun/kernel';
import { SqlStateStore, pendingReceiptDocument, postgresDialect, sealReceipt, type SqlDialect } from '@ctrlrun/kernel/store';
import { PgliteDriver } from '@ctrlrun/store-node/pglite';
import { createPgStore, PgDriver } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { recording } from '../support/recording-driver.js';
import { describePg, freshDatabase } from '../support/pg-cluster.js';

const POLICY = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);

const lite = new PGlite();
afterAll(() => lite.close());
let schemas = 0;

function withoutCombined(d: SqlDialect): SqlDialect {
  const { insertEffectWithEvents: _i, updateEffectWithTrail: _u, ...sql } = d.sql;
  return { ...d, sql };
}

async function scene(combined = true) {
  const schema = `combined_${++schemas}`;
  await lite.exec(`CREATE SCHEMA ${schema}`);
  const driver = new PgliteDriver(lite, { schema });
  await driver.resolveSchema();
  const rec = recording(driver);
  const dialect = postgresDialect(schema);
  const store = await new SqlStateStore(rec.wrapped, { dialect: combined ? dialect : withoutCombined(dialect), logger: { warn() {} } }).open();
  rec.transactions.length = 0;
  const types: string[] = [];
  const control = new Control({ policy: POLICY, store, logger: { warn() {} }, sinks: [callbackSink({ onEvent: (e) => void types.push(e.type) })] });
  const refund = (id: string) =>
    control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 500 }, principal: { agent: 'a' } }), () => ({
      refund_id: `re_${id}`,
    }));
  return { schema, store, control, refund, ...rec, types };
}

async function evidence(store: StateStore) {
  const events = (await store.events()).map((e) => ({ type: e.type, effectKey: e.effectKey, data: e.data }));
  const receipts = await store.receipts();
  return { events, receipts, head: await store.chainHead() };
}

describe('combined statements on PGlite', () => {
  it('an allowed action is two transactions of one statement each: the outcome compares the row the reservation wrote, unread', async () => {
    const s = await scene();
    await s.refund('p1');
    expect(s.transactions.map((t) => t.length)).toEqual([1, 1]);
    expect(s.transactions[0]![0]).toMatch(/^WITH r AS \(INSERT INTO "[^"]+"\.effects/);
    expect(s.transactions[1]![0]).toMatch(/^WITH u AS \(UPDATE "[^"]+"\.effects[\s\S]*updated_at IS NOT DISTINCT FROM[\s\S]*INSERT INTO "[^"]+"\.receipts/);
  });

  it('a row that moved on since this store wrote it (its lease extended through another handle): the outcome reads it and decides, with the same evidence', async () => {
    const s = await scene();
    const other = await new SqlStateStore(new PgliteDriver(lite, { schema: s.schema }), { dialect: postgresDialect(s.schema), logger: { warn() {} } }).open();
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p9', amount: 500 }, principal: { agent: 'a' } });
    const result = await s.control.execute(action, async () => {
      // Another handle extends the lease: the row's lease and updated_at are no longer the ones this store wrote.
      await other.extendLease('refund:p9', action.actionId, 600_000);
      return { refund_id: 're_p9' };
    });
    expect(result).toEqual({ refund_id: 're_p9' });
    const outcome = s.transactions.at(-1)!;
    // The unread compare-and-set wrote nothing; the row was read and the outcome written statement by statement.
    expect(outcome[0]).toMatch(/^WITH u AS \(UPDATE [\s\S]*updated_at IS NOT DISTINCT FROM/);
    expect(outcome[1]).toMatch(/^SELECT [\s\S]* FROM "[^"]+"\.effects WHERE effect_key = \$1/);
    expect(outcome.length).toBeGreaterThan(2);
    expect((await s.store.getEffect('refund:p9'))?.state).toBe('committed');
    // The same evidence as an action nobody disturbed.
    await s.refund('p10');
    const e = await evidence(s.store);
    const types = (key: string) => e.events.filter((x) => x.effectKey === key).map((x) => x.type);
    expect(types('refund:p9')).toEqual(types('refund:p10'));
    expect(types('refund:p9')).toContain('EXECUTION_COMMITTED');
    expect(verifyChain(e.receipts, e.head)).toMatchObject({ ok: true, verified: 2 });
    await other.close();
  });

  it('writes the same events and receipts as statement by statement, and the chain verifies', async () => {
    const a = await scene(true);
    const b = await scene(false);
    for (const id of ['p1', 'p2', 'p3']) {
      await a.refund(id);
      await b.refund(id);
    }
    await expect(a.refund('p2')).rejects.toMatchObject({ code: 'ERR_DUPLICATE_EFFECT' });
    await expect(b.refund('p2')).rejects.toMatchObject({ code: 'ERR_DUPLICATE_EFFECT' });
    const ea = await evidence(a.store);
    const eb = await evidence(b.store);
    // Ids and times differ per run; the kinds and order of the evidence do not.
    const shape = (e: typeof ea) => ({
      events: e.events.map((x) => ({ type: x.type, effectKey: x.effectKey })),
      receipts: e.receipts.map((r) => ({ seq: r.seq, result: r.result })),
    });
    expect(shape(ea)).toEqual(shape(eb));
    expect(
      b.transactions.some((t) => t.length > 2),
      'the other store ran statement by statement',
    ).toBe(true);
    expect(verifyChain(ea.receipts, ea.head)).toMatchObject({ ok: true, verified: ea.receipts.length });
    for (const r of ea.receipts) {
      const doc = JSON.parse(r.json!) as Record<string, unknown>;
      const sealed = sealReceipt({ ...doc, seq: null, prev_hash: null }, r.seq!, r.prev_hash!);
      expect(sealed.json).toBe(r.json);
      expect(sealed.hash).toBe(r.hash);
    }
  });

  it('a chain head the server may not splice (not sha256:hex) is chained by the kernel in the same transaction', async () => {
    const s = await scene();
    await lite.exec(`UPDATE ${s.schema}.receipt_chain SET hash = 'odd "head" \\ value' WHERE id = 1`);
    await s.refund('p1');
    // The outcome: the combined statement (no receipt part applied), then lock, insert and hash by the kernel.
    expect(s.transactions.map((t) => t.length)).toEqual([1, 4]);
    const [r] = await s.store.receipts();
    expect(r!.prev_hash).toBe('odd "head" \\ value');
    const doc = JSON.parse(r!.json!) as Record<string, unknown>;
    expect(doc['prev_hash']).toBe('odd "head" \\ value');
    expect(sealReceipt({ ...doc, seq: null, prev_hash: null }, 1, 'odd "head" \\ value').hash).toBe(r!.hash);
    expect(await s.store.chainHead()).toMatchObject({ seq: 1, hash: r!.hash });
  });

  it('test_T170 on the combined statement: a failing receipt INSERT keeps the outcome, raises, and leaves no gap', async () => {
    const s = await scene();
    await s.refund('p1');
    s.state.fail = /INSERT INTO "[^"]+"\.receipts/;
    await expect(s.refund('p2')).rejects.toThrow('disk full');
    expect((await s.store.getEffect('refund:p2'))?.state).toBe('committed');
    expect(s.types).toContain('EXECUTION_COMMITTED');
    s.state.fail = null;
    await s.refund('p3');
    const rows = await s.store.receipts();
    expect(rows.map((r) => r.seq)).toEqual([1, 2]);
    expect(verifyChain(rows, await s.store.chainHead()).ok).toBe(true);
  });

  it('a receipt id already stored: the outcome is kept and the stored receipt stands, as statement by statement', async () => {
    const outcomes = [];
    for (const combined of [true, false]) {
      const s = await scene(combined);
      // Two controls with the same id sequence: the second one's receipt ids are the first one's.
      const act = (ids: ReturnType<typeof sequentialIds>, id: string) =>
        new Control({ policy: POLICY, store: s.store, ids, logger: { warn() {} } })
          .execute(createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 1 }, principal: { agent: 'a' } }), () => ({ id }))
          .then(
            () => 'ok',
            (e: { code?: string }) => e.code ?? 'error',
          );
      const first = await act(sequentialIds(), 'p1');
      const second = await act(sequentialIds(), 'p2');
      const rows = await s.store.receipts();
      outcomes.push({
        first,
        second,
        state: (await s.store.getEffect('refund:p2'))?.state,
        receipts: rows.length,
        ok: verifyChain(rows, await s.store.chainHead()).ok,
      });
    }
    expect(outcomes[0]).toEqual(outcomes[1]);
    expect(outcomes[0]).toMatchObject({ first: 'ok', state: 'committed', receipts: 1, ok: true });
  });

  it('a fresh key taken meanwhile: the reservation statement writes nothing and the step plans on the row (DuplicateEffect)', async () => {
    const s = await scene();
    await s.refund('p1');
    const before = (await s.store.events()).length;
    s.transactions.length = 0;
    await expect(s.refund('p1')).rejects.toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', state: 'committed' });
    // The combined INSERT found the row, then the same transaction read it and refused.
    expect(s.transactions[0]![0]).toMatch(/^WITH r AS \(INSERT/);
    expect(s.transactions[0]![1]).toMatch(/^SELECT .* FROM "[^"]+"\.effects/);
    const types = (await s.store.events()).slice(before).map((e) => e.type);
    expect(types).not.toContain('EFFECT_RESERVED');
  });
});

/** The database is dropped at the end of each case: a client ending meanwhile hears "terminating connection", harmlessly. */
/**
 * The store holds one unbroken chain of seq 1…n, every effect committed, and each receipt is the
 * kernel's own seal of its document on the seq and prev_hash it holds.
 */
async function oneKernelSealedChain(store: StateStore, n: number): Promise<void> {
  const rows = await store.receipts();
  expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
  expect(verifyChain(rows, await store.chainHead())).toMatchObject({ ok: true, verified: n, breaks: [] });
  expect((await store.listEffects()).every((e) => e.state === 'committed')).toBe(true);
  for (const r of rows) {
    const doc = JSON.parse(r.json!) as Record<string, unknown>;
    const sealed = sealReceipt({ ...doc, seq: null, prev_hash: null }, r.seq!, r.prev_hash!);
    expect([sealed.json, sealed.hash]).toEqual([r.json, r.hash]);
  }
}

/** Refunds through a Control, counting how often each payment's executor ran. */
function countedRefunds(): { refund: (control: Control, id: string) => Promise<unknown>; ranOnceEach: (n: number) => void } {
  const calls = new Map<string, number>();
  return {
    refund: (control, id) =>
      control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 1 }, principal: { agent: 'a' } }), () => {
        calls.set(id, (calls.get(id) ?? 0) + 1);
        return { id };
      }),
    ranOnceEach: (n) => {
      expect(calls.size).toBe(n);
      expect([...calls.values()].every((c) => c === 1)).toBe(true);
    },
  };
}

function quiet(pool: pg.Pool): pg.Pool {
  pool.on('error', () => undefined);
  pool.on('connect', (client) => void client.on('error', () => undefined));
  return pool;
}

describePg('combined statements on a real server', (server) => {
  it.each([false, true])(
    '8 concurrent callers (prepare: %s): every receipt chained once, in one unbroken chain',
    async (prepare) => {
      const db = await freshDatabase(server.url, 'combined');
      const pool = quiet(new pg.Pool({ connectionString: db.url, max: 10 }));
      try {
        await db.createSchema('c8');
        const store = await createPgStore(pool, { schema: 'c8', prepare, logger: { warn() {} } });
        const control = new Control({ policy: POLICY, store, logger: { warn() {} } });
        let n = 0;
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            for (let i = 0; i < 15; i++) {
              const id = `p_${n++}`;
              await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 1 }, principal: { agent: 'a' } }), () => ({
                id,
              }));
            }
          }),
        );
        const rows = await store.receipts();
        expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));
        expect(verifyChain(rows, await store.chainHead())).toMatchObject({ ok: true, verified: 120, breaks: [] });
        await store.close();
      } finally {
        await pool.end();
        await db.drop();
      }
    },
    120_000,
  );

  it('with prepare: true, three stores (three engines, each sealing on the head it expects) on one schema, 6 callers each: every receipt chained once, one unbroken chain, every action committed', async () => {
    const db = await freshDatabase(server.url, 'alone');
    const pools = [0, 1, 2].map(() => quiet(new pg.Pool({ connectionString: db.url, max: 6 })));
    try {
      await db.createSchema('a3');
      const stores = await Promise.all(pools.map((pool) => createPgStore(pool, { schema: 'a3', prepare: true, logger: { warn() {} } })));
      let n = 0;
      const { refund, ranOnceEach } = countedRefunds();
      await Promise.all(
        stores.flatMap((store) => {
          const control = new Control({ policy: POLICY, store, logger: { warn() {} } });
          return Array.from({ length: 6 }, async () => {
            for (let i = 0; i < 10; i++) await refund(control, `p_${n++}`);
          });
        }),
      );
      ranOnceEach(180);
      await oneKernelSealedChain(stores[0]!, 180);
      await Promise.all(stores.map((s) => s.close()));
    } finally {
      await Promise.all(pools.map((p) => p.end()));
      await db.drop();
    }
  }, 120_000);

  it('two stores taking turns on one chain: after the head moved under it, a store chains its next outcomes in the transaction (no outcome sent alone to miss again), then stands alone again once it writes on its own', async () => {
    const db = await freshDatabase(server.url, 'turns');
    const pools = [0, 1].map(() => quiet(new pg.Pool({ connectionString: db.url, max: 2 })));
    try {
      await db.createSchema('turns');
      // Outcomes sent alone, and reservations (each action's fresh row, always alone), per store.
      const alone = [0, 0];
      const reservations = [0, 0];
      const stores = await Promise.all(
        pools.map(async (pool, i) => {
          const driver = new PgDriver(pool, { schema: 'turns' });
          const send = driver.writeAlone.bind(driver);
          driver.writeAlone = (sql, params) => (/^WITH r AS \(INSERT /.test(sql) ? reservations[i]!++ : alone[i]!++, send(sql, params));
          await driver.resolveSchema();
          return new SqlStateStore(driver, { dialect: postgresDialect('turns'), logger: { warn() {} } }).open();
        }),
      );
      const controls = stores.map((store) => new Control({ policy: POLICY, store, logger: { warn() {} } }));
      const counted = countedRefunds();
      const refund = (i: number, id: string) => counted.refund(controls[i]!, id);
      for (let t = 0; t < 10; t++) {
        await refund(0, `a_${t}`);
        await refund(1, `b_${t}`);
      }
      // Each store's first outcome stood alone on the head it read; its second found the head the
      // other had moved: one miss, then the transaction for every turn after (sealing again on the
      // head the answer gave would have sent two statements alone per turn: 19).
      expect(alone).toEqual([2, 2]);
      expect(reservations).toEqual([10, 10]);
      // Alone again: after its rest, the store's outcomes stand alone once more.
      for (let t = 0; t < 200; t++) await refund(0, `solo_${t}`);
      expect(alone[0]).toBeGreaterThan(2 + 100);
      counted.ranOnceEach(220);
      await oneKernelSealedChain(stores[0]!, 220);
      await Promise.all(stores.map((s) => s.close()));
    } finally {
      await Promise.all(pools.map((p) => p.end()));
      await db.drop();
    }
  }, 120_000);

  it('test_T170 with prepare: true: a chain head no receipt can be sealed on (seq past the safe range, or no head row) never loses the outcome, whether the head was known or not', async () => {
    const db = await freshDatabase(server.url, 'alone_head');
    const pool = quiet(new pg.Pool({ connectionString: db.url, max: 4 }));
    try {
      const cases = [
        { name: 'unsafe_known', corrupt: (s: string) => `UPDATE ${s}.receipt_chain SET seq = 9007199254740993 WHERE id = 1`, known: true },
        { name: 'unsafe_fresh', corrupt: (s: string) => `UPDATE ${s}.receipt_chain SET seq = 9007199254740993 WHERE id = 1`, known: false },
        { name: 'gone_known', corrupt: (s: string) => `DELETE FROM ${s}.receipt_chain WHERE id = 1`, known: true },
      ];
      for (const c of cases) {
        await db.createSchema(c.name);
        const open = () => createPgStore(pool, { schema: c.name, prepare: true, logger: { warn() {} } });
        const refund = (store: StateStore, id: string) =>
          new Control({ policy: POLICY, store, logger: { warn() {} } }).execute(
            createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 1 }, principal: { agent: 'a' } }),
            () => ({ id }),
          );
        let store = await open();
        // The store's engine now expects the head its first outcome left.
        await refund(store, 'p1');
        await pool.query(c.corrupt(`"${c.name}"`));
        if (!c.known) {
          await store.close();
          store = await open();
        }
        // As statement by statement: the receipt cannot be chained and the step raises, but the
        // outcome is written, its receipt kept pending (off the chain, which verify reports).
        await expect(refund(store, 'p2'), c.name).rejects.toThrow();
        expect((await store.getEffect('refund:p2'))?.state, c.name).toBe('committed');
        const rows = await store.receipts();
        expect(
          rows.map((r) => [r.seq === null, r.effect_key, r.result]),
          c.name,
        ).toEqual([
          [true, 'refund:p2', 'committed'],
          [false, 'refund:p1', 'committed'],
        ]);
        expect(pendingReceiptDocument(rows[0]!)?.['effect_key'], c.name).toBe('refund:p2');
        await store.close();
      }
    } finally {
      await pool.end();
      await db.drop();
    }
  }, 120_000);

  it('with prepare: true, a failing read of the chain head (the alone step\u2019s seed) never loses the outcome: the transaction writes it, receipt and all', async () => {
    const db = await freshDatabase(server.url, 'alone_seed');
    const pool = quiet(new pg.Pool({ connectionString: db.url, max: 4 }));
    try {
      await db.createSchema('seed');
      const store = await createPgStore(pool, { schema: 'seed', prepare: true, logger: { warn() {} } });
      // The next plain read of the head on the pool fails (a transient error), once.
      const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
      let failed = 0;
      (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text;
        if (failed === 0 && /^SELECT seq, hash FROM .*receipt_chain/.test(text ?? '')) {
          failed++;
          return Promise.reject(new Error('the pool could not connect (transient)'));
        }
        return query(...args);
      };
      await new Control({ policy: POLICY, store, logger: { warn() {} } }).execute(
        createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 1 }, principal: { agent: 'a' } }),
        () => 1,
      );
      expect(failed).toBe(1);
      expect((await store.getEffect('refund:p1'))?.state).toBe('committed');
      const rows = await store.receipts();
      expect(verifyChain(rows, await store.chainHead())).toMatchObject({ ok: true, verified: 1 });
      await store.close();
    } finally {
      await pool.end();
      await db.drop();
    }
  }, 120_000);

  it('with prepare: false a store goes statement by statement; with prepare (the default) each write step is one statement', async () => {
    const db = await freshDatabase(server.url, 'steps');
    const pool = quiet(new pg.Pool({ connectionString: db.url, max: 2 }));
    try {
      const shapes: Record<string, number[]> = {};
      for (const prepare of [false, true]) {
        const schema = `steps_${prepare}`;
        await db.createSchema(schema);
        const driver = new PgDriver(pool, { schema, prepare });
        expect(driver.capabilities.oneStatementSteps).toBe(prepare);
        expect(driver.prepared).toBe(prepare);
        expect(new PgDriver(pool, { schema }).capabilities.oneStatementSteps).toBe(true);
        await driver.resolveSchema();
        const rec = recording(driver);
        const store = await new SqlStateStore(rec.wrapped, { dialect: postgresDialect(schema), logger: { warn() {} } }).open();
        const control = new Control({ policy: POLICY, store, logger: { warn() {} } });
        rec.transactions.length = 0;
        await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 1 }, principal: { agent: 'a' } }), () => 1);
        shapes[String(prepare)] = rec.transactions.map((t) => t.length);
        expect(rec.transactions.flat().some((sql) => sql.startsWith('WITH '))).toBe(prepare);
        expect(verifyChain(await store.receipts(), await store.chainHead())).toMatchObject({ ok: true, verified: 1 });
        await store.close();
      }
      expect(shapes['true']).toEqual([1, 1]);
      expect(shapes['false']!.reduce((a, b) => a + b, 0)).toBeGreaterThan(3);
    } finally {
      await pool.end();
      await db.drop();
    }
  }, 120_000);

  it("prepare: true sends the store's statements prepared (once per connection); prepare of another type is refused", async () => {
    const db = await freshDatabase(server.url, 'prepared');
    const pool = quiet(new pg.Pool({ connectionString: db.url, max: 1 }));
    try {
      await db.createSchema('p1');
      await expect(createPgStore(pool, { schema: 'p1', prepare: 'yes' as unknown as boolean })).rejects.toThrow(/prepare must be a boolean/);
      const store = await createPgStore(pool, { schema: 'p1', prepare: true, logger: { warn() {} } });
      const control = new Control({ policy: POLICY, store, logger: { warn() {} } });
      for (const id of ['a', 'b', 'c'])
        await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 1 }, principal: { agent: 'a' } }), () => ({ id }));
      await expect(
        control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: 'a', amount: 1 }, principal: { agent: 'a' } }), () => 1),
      ).rejects.toMatchObject({ code: 'ERR_DUPLICATE_EFFECT' });
      // The pool's one connection: the reservation's combined statement is among its prepared
      // statements; the outcomes went out on the store's own connection, alone (appendOutcome).
      const prepared = (await pool.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements WHERE name LIKE 'ctrlrun\\_%'")).rows.map(
        (r) => r.statement,
      );
      expect(prepared.some((t) => t.startsWith('WITH r AS (INSERT INTO "p1".effects'))).toBe(true);
      expect(prepared.some((t) => t.startsWith('WITH h AS (SELECT seq, hash FROM "p1".receipt_chain'))).toBe(false);
      const rows = await store.receipts();
      expect(verifyChain(rows, await store.chainHead())).toMatchObject({ ok: true, verified: rows.length });
      await store.close();
    } finally {
      await pool.end();
      await db.drop();
    }
  }, 120_000);
});
