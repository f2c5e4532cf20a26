/**
 * Prepared statements (the PostgreSQL store's default) behind a connection that does not keep
 * them, as a transaction-mode pooler without prepared-statement support does: a later call
 * reaches a server backend that never prepared the statement (SQLSTATE 26000), or one where that
 * name is prepared already (42P05). Simulated on a real server: `DEALLOCATE ALL` behind `pg`'s
 * back (it still thinks the statements are there), or the names prepared first by hand. Each
 * action still runs its executor once and ends committed with its receipt chained; the driver
 * warns once and stops naming; the transaction that met the loss ran again from the start.
 */
import { Control, NotExecuted, SchemaMismatch, StoreError, createAction, loadPolicy, verifyChain, type StateStore } from '@ctrlrun/kernel';
import { quoteIdentifier } from '@ctrlrun/kernel/store';
import { createPgStore, type PgPoolLike, type PgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { expect, it } from 'vitest';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

const POLICY = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);

function quiet(pool: pg.Pool): pg.Pool {
  pool.on('error', () => undefined);
  return pool;
}

/**
 * A store on `pool` with its warnings kept, and a refund that counts its executor's calls.
 * `renewed(id)`: the refund's first attempt reports it never ran (failed), the second runs — a
 * renewal, which is written in a transaction on the pool (a fresh key's reservation and every
 * outcome go alone, on the store's own connection).
 */
function scene(store: PgStore, warnings: string[], before?: () => Promise<void>) {
  const control = new Control({ policy: POLICY, store, logger: { warn() {} } });
  const ran = new Map<string, number>();
  const refund = (id: string, fail = false) =>
    control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 500 }, principal: { agent: 'a' } }), async () => {
      ran.set(id, (ran.get(id) ?? 0) + 1);
      if (fail) throw new NotExecuted('the provider refused it before it ran');
      await before?.();
      return { refund_id: `re_${id}` };
    });
  const renewed = async (id: string) => {
    await expect(refund(id, true)).rejects.toBeInstanceOf(NotExecuted);
    return refund(id);
  };
  return { refund, renewed, ran, warnings };
}

/** Each id committed; the receipts (a renewed id's failed one first) chained in the order written. */
async function committedAndChained(store: StateStore, ids: readonly string[], renewed: readonly string[] = []): Promise<void> {
  for (const id of ids) expect((await store.getEffect(`refund:${id}`))?.state).toBe('committed');
  const rows = await store.receipts();
  const expected = ids.flatMap((id) => (renewed.includes(id) ? [`refund:${id}`, `refund:${id}`] : [`refund:${id}`]));
  expect(rows.map((r) => r.effect_key)).toEqual(expected);
  expect(verifyChain(rows, await store.chainHead())).toMatchObject({ ok: true, verified: expected.length });
}

/**
 * What a server with `lc_messages = 'de_DE.UTF-8'` says instead of the English message (its words
 * and its »quotes«, exactly as PostgreSQL 15 sends them); the SQLSTATE is the same.
 */
function inGerman<T>(p: Promise<T>): Promise<T> {
  return p.catch((err: { code?: string; message: string }) => {
    if (err?.code === '26000' || err?.code === '42P05') {
      err.message = err.message.replace(
        /^prepared statement "(.+)" (does not exist|already exists)$/,
        (_, name: string, what: string) => `vorbereitete Anweisung »${name}« existiert ${what === 'does not exist' ? 'nicht' : 'bereits'}`,
      );
    }
    throw err;
  });
}

/** `client` with every query's error in German (see {@link inGerman}); everything else its own. */
function germanClient<C extends object>(client: C): C {
  return new Proxy(client, {
    get(target, key) {
      const value = Reflect.get(target, key, target) as unknown;
      if (key === 'query') return (...args: unknown[]) => inGerman((value as (...a: unknown[]) => Promise<unknown>).apply(target, args));
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** `pool` as a `PgPoolLike` whose clients and queries answer in German. */
function germanPool(pool: pg.Pool): PgPoolLike {
  return {
    connect: async () => germanClient(await pool.connect()),
    query: (config) => inGerman(pool.query(config as pg.QueryConfig)),
    end: () => pool.end(),
    options: pool.options,
  } as PgPoolLike;
}

describePg('PostgreSQL prepared statements behind a connection that loses them', (server) => {
  const open = async (name: string, max = 1) => {
    const db = await freshDatabase(server.url, name);
    await db.createSchema('s');
    return { db, pool: quiet(new pg.Pool({ connectionString: db.url, max })) };
  };
  const logger = (warnings: string[]) => ({ warn: (m: string) => void warnings.push(m) });
  const done = async ({ db, pool }: { db: FreshDatabase; pool: pg.Pool }, store?: StateStore) => {
    await store?.close();
    await pool.end();
    await db.drop();
  };

  it('a logger that throws on the warning does not stop the transaction from running again unnamed', async () => {
    const s = await open('lost_logger');
    let warned = 0;
    const store = await createPgStore(s.pool, {
      schema: 's',
      logger: {
        warn: () => {
          warned++;
          throw new Error('the log sink is down');
        },
      },
    });
    try {
      const { renewed, ran } = scene(store, []);
      // A renewal prepares its transaction's statements on the pool's one connection; then it forgets them.
      await renewed('a');
      await s.pool.query('DEALLOCATE ALL');
      await renewed('b');
      expect([...ran]).toEqual([
        ['a', 2],
        ['b', 2],
      ]);
      expect(warned).toBe(1);
      await committedAndChained(store, ['a', 'b'], ['a', 'b']);
    } finally {
      await done(s, store);
    }
  }, 120_000);

  it('42P05: a backend where the name is prepared already (by another client, with the same text) refuses the Parse; the store goes on unnamed', async () => {
    const first = await open('taken', 1);
    const warnings: string[] = [];
    let learned: { name: string; statement: string }[] = [];
    const store1 = await createPgStore(first.pool, { schema: 's', logger: logger(warnings) });
    try {
      // A renewal: its transaction's statements are prepared on the pool's one connection.
      await scene(store1, warnings).renewed('a');
      learned = (await first.pool.query("SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'ctrlrun\\_%'")).rows;
      expect(learned.length).toBeGreaterThan(0);
    } finally {
      await store1.close();
    }
    // Another pool of one connection on the same schema: its backend gets every name first, by hand.
    const pool2 = quiet(new pg.Pool({ connectionString: first.db.url, max: 1 }));
    try {
      for (const { name, statement } of learned) await pool2.query(`PREPARE ${quoteIdentifier(name)} AS ${statement}`);
      const store2 = await createPgStore(pool2, { schema: 's', logger: logger(warnings) });
      const { refund, renewed, ran } = scene(store2, warnings);
      await renewed('b');
      await refund('c');
      expect([...ran]).toEqual([
        ['b', 2],
        ['c', 1],
      ]);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/prepared statement "ctrlrun_[0-9a-f]{32}" already exists/);
      await committedAndChained(store2, ['a', 'b', 'c'], ['a', 'b']);
      await store2.close();
    } finally {
      await pool2.end();
      await done(first);
    }
  }, 120_000);

  /** The warning's report of a lost statement, in each language a server may speak (see {@link inGerman}). */
  const LOST = {
    English: /does not keep this driver's prepared statements .*prepared statement "ctrlrun_[0-9a-f]{32}" does not exist/,
    German: /vorbereitete Anweisung »ctrlrun_[0-9a-f]{32}« existiert nicht/,
  };
  for (const language of ['English', 'German'] as const)
    for (const where of ['a transaction', 'the outcome that commits on its own'] as const)
      it(`26000 in ${where}, reported in ${language}: known by its SQLSTATE and our name; ${where === 'a transaction' ? 'the transaction rolled back and run again unnamed, once' : 'the statement sent again unnamed'}; each executor runs once`, async () => {
        const s = await open(`lost_${language === 'English' ? 'en' : 'de'}_${where === 'a transaction' ? 'tx' : 'alone'}`);
        const speak = <C extends object>(client: C): C => (language === 'German' ? germanClient(client) : client);
        const warnings: string[] = [];
        // The store's own connections (the one that writes alone, and any re-read): kept to make them forget.
        const own: pg.Client[] = [];
        const store = await createPgStore(language === 'German' ? germanPool(s.pool) : s.pool, {
          schema: 's',
          logger: logger(warnings),
          freshClient: () => {
            const c = new pg.Client({ connectionString: s.db.url });
            own.push(c);
            return speak(c);
          },
        });
        try {
          let forget = false;
          const { refund, renewed, ran } = scene(store, warnings, async () => {
            if (forget && where !== 'a transaction') for (const c of own) await c.query('DEALLOCATE ALL');
          });
          // In a transaction: a renewal's (a fresh key's reservation and every outcome go alone).
          const act = where === 'a transaction' ? renewed : refund;
          await act('a');
          expect(own).toHaveLength(1); // the outcome went out alone, on the store's own connection
          // The pool's one connection (or the store's own, inside the next executor) forgets every
          // statement it prepared; pg still thinks they are there.
          if (where === 'a transaction') await s.pool.query('DEALLOCATE ALL');
          forget = true;
          await act('b');
          await refund('c');
          const tries = where === 'a transaction' ? 2 : 1;
          expect([...ran]).toEqual([
            ['a', tries],
            ['b', tries],
            ['c', 1],
          ]);
          expect(warnings).toHaveLength(1);
          expect(warnings[0]).toMatch(LOST[language]);
          expect(store.driver.prepared).toBe(false);
          expect(own).toHaveLength(1); // not a lost reply: no re-read, no new connection
          await committedAndChained(store, ['a', 'b', 'c'], where === 'a transaction' ? ['a', 'b'] : []);
          // Nothing named since: the pool's connection holds no statement of ours.
          if (where === 'a transaction')
            expect((await s.pool.query("SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'ctrlrun\\_%'")).rows[0].n).toBe(0);
        } finally {
          await done(s, store);
        }
      }, 120_000);

  it('the migrations run again from the start after a loss: a failure to read the schema in the second run is StoreError, not a migration refused (SchemaMismatch)', async () => {
    const s = await open('migrate_again');
    const warnings: string[] = [];
    try {
      // The pool's one connection prepares the schema's migration statements; the schema is then
      // emptied, and the connection forgets them behind pg's back.
      await (await createPgStore(s.pool, { schema: 's', logger: { warn() {} } })).close();
      await s.pool.query('DROP SCHEMA s CASCADE');
      await s.db.createSchema('s');
      await s.pool.query('DEALLOCATE ALL');
      // The second run of the migrations' transaction meets a connection that fails on its first read of the schema.
      let rolledBack = false;
      let failed = false;
      const flaky = (client: pg.PoolClient): pg.PoolClient =>
        new Proxy(client, {
          get(target, key) {
            const value = Reflect.get(target, key, target) as unknown;
            if (key !== 'query') return typeof value === 'function' ? value.bind(target) : value;
            return (config: string | { text: string }) => {
              const text = typeof config === 'string' ? config : config.text;
              if (text === 'ROLLBACK') rolledBack = true;
              else if (rolledBack && !failed && text.includes("tablename = 'schema_version'")) {
                failed = true;
                return Promise.reject(new Error('Connection terminated unexpectedly'));
              }
              return (value as (c: unknown) => Promise<unknown>).call(target, config);
            };
          },
        });
      const pool = {
        connect: async () => flaky(await s.pool.connect()),
        query: (c: never) => s.pool.query(c),
        end: async () => undefined,
        options: s.pool.options,
      };
      const err = await createPgStore(pool as PgPoolLike, { schema: 's', logger: logger(warnings) }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(warnings).toHaveLength(1); // the first run lost a prepared statement
      expect(failed).toBe(true); // and the second failed reading the schema
      expect(err).not.toBeInstanceOf(SchemaMismatch);
      expect(err).toBeInstanceOf(StoreError);
      expect((err as Error).message).toMatch(/reading the schema failed: Connection terminated unexpectedly/);
      // Nothing was applied: the next open migrates the schema from the start.
      const store = await createPgStore(s.pool, { schema: 's', prepare: false, logger: { warn() {} } });
      await store.close();
    } finally {
      await done(s);
    }
  }, 120_000);

  it("a statement's name is its text's SHA-256: the same in every process, a different text never under it", async () => {
    const s = await open('names', 1);
    const store = await createPgStore(s.pool, { schema: 's', logger: { warn() {} } });
    try {
      await scene(store, []).refund('a');
      const rows: { name: string; statement: string }[] = (
        await s.pool.query("SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'ctrlrun\\_%'")
      ).rows;
      expect(rows.length).toBeGreaterThan(0);
      const { createHash } = await import('node:crypto');
      for (const r of rows) expect(r.name).toBe(`ctrlrun_${createHash('sha256').update(r.statement).digest('hex').slice(0, 32)}`);
    } finally {
      await done(s, store);
    }
  }, 120_000);
});
