/**
 * The store conformance suite inside workerd, on a SQLite-backed Durable Object: this module is
 * bundled with `vitest` replaced by the Chromium harness's stand-in (Vitest's own `expect`), and
 * run in one object, whose `fetch` registers the suite, runs it and answers with the outcomes.
 *
 * Fresh, private storage per `open()`: every table of the object's database is dropped first
 * (the suite holds one store at a time, apart from the durability cases, which `reopen` the same
 * storage). The storage outlives its handle, and other isolates reach it by the object's name
 * (`url`), so the suite's declaration check does not apply; the race between isolates is
 * `test/worker/durable-object.test.ts`' two-isolates test, not an OS-process race.
 */
import { describe, expect, it } from 'vitest';
import { StoreError } from '@ctrlrun/kernel';
import type { SqlExecutor } from '@ctrlrun/kernel/store';
import { DurableObjectSqlDriver, durableObjectDialect, openDurableObjectStore, type DurableObjectSqlStorage } from '@ctrlrun/store-do';
import { beginFile, runAll } from '../../browser/harness/vitest-shim.js';
import { describeStore } from '../../conformance/store.case.js';

interface Ctx {
  storage: DurableObjectSqlStorage & { sql: { exec(q: string, ...b: unknown[]): { toArray(): Record<string, unknown>[] } } };
}

/** Drops every table the store's own catalogue query lists (never SQLite's or the platform's). */
function wipe(ctx: Ctx): void {
  const tables = ctx.storage.sql.exec(durableObjectDialect.sql.listTables).toArray();
  for (const t of tables) ctx.storage.sql.exec(`DROP TABLE IF EXISTS "${String(t['name']).replace(/"/g, '""')}"`);
}

export class ConformanceRunner {
  readonly #ctx: Ctx;
  constructor(ctx: Ctx) {
    this.#ctx = ctx;
  }

  async fetch(): Promise<Response> {
    const ctx = this.#ctx;
    beginFile('test/worker/durable-object/conformance-entry.ts');
    describeStore({
      name: 'Durable Object SQLite (workerd)',
      dialect: 'sqlite',
      open: async (clock) => {
        wipe(ctx);
        return openDurableObjectStore(ctx.storage, clock ? { clock } : {});
      },
      reopen: async (_old, clock) => openDurableObjectStore(ctx.storage, clock ? { clock } : {}),
      url: () => 'durable-object:conformance',
      processes: async () => {
        throw new Error('no OS processes in workerd');
      },
      skip: [
        {
          reason: 'isolates, not OS processes, share a Durable Object: the race is the two-isolates test in test/worker/durable-object.test.ts',
          cases: ['e1-cross-process'],
        },
      ],
    });
    describe('DurableObjectSqlDriver on ctx.storage', () => {
      const fresh = async (): Promise<DurableObjectSqlDriver> => {
        wipe(ctx);
        const d = new DurableObjectSqlDriver(ctx.storage);
        await d.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, n INTEGER)');
        return d;
      };
      const count = async (d: DurableObjectSqlDriver): Promise<unknown> => (await d.query<{ c: number }>('SELECT count(*) AS c FROM t')).rows[0]!.c;

      it('a transaction that rejects leaves nothing, though it awaited between its writes', async () => {
        const d = await fresh();
        const boom = new Error('refused after two writes');
        await expect(
          d.transaction(async (tx) => {
            await tx.query('INSERT INTO t (v) VALUES (?)', ['a']);
            await new Promise((r) => setTimeout(r, 5));
            expect((await tx.query('UPDATE t SET v = ? WHERE v = ?', ['b', 'a'])).rowsAffected).toBe(1);
            throw boom;
          }),
        ).rejects.toBe(boom);
        expect(await count(d)).toBe(0);
        await d.transaction(async (tx) => void (await tx.query('INSERT INTO t (v) VALUES (?)', ['c'])));
        expect(await count(d)).toBe(1);
      });

      it('a handle used after its transaction ended is refused', async () => {
        const d = await fresh();
        let kept: SqlExecutor | null = null;
        await d.transaction(async (tx) => {
          kept = tx;
        });
        await expect(kept!.query('INSERT INTO t (v) VALUES (?)', ['late'])).rejects.toThrow(/already ended/);
        expect(await count(d)).toBe(0);
      });

      it('a bigint beyond 2^53 is stored exactly (as its digits, INTEGER affinity); reading it back is refused, never rounded', async () => {
        const d = await fresh();
        await d.query('INSERT INTO t (v, n) VALUES (?, ?)', ['big', 9007199254740993n]);
        expect((await d.query<{ n: string; ty: string }>("SELECT CAST(n AS TEXT) AS n, typeof(n) AS ty FROM t WHERE v = 'big'")).rows[0]).toEqual({
          n: '9007199254740993',
          ty: 'integer',
        });
        await expect(d.query("SELECT n FROM t WHERE v = 'big'")).rejects.toThrow(StoreError);
        await d.query('INSERT INTO t (v, n) VALUES (?, ?)', ['small', 42n]);
        expect((await d.query<{ n: number }>("SELECT n FROM t WHERE v = 'small'")).rows[0]!.n).toBe(42);
      });

      it('the platform refuses BEGIN, so the driver never sends it; a closed driver refuses calls', async () => {
        const d = await fresh();
        expect(() => ctx.storage.sql.exec('BEGIN')).toThrow(/transaction/);
        await d.close();
        await expect(d.query('SELECT 1')).rejects.toThrow(/closed/);
      });
    });
    const results = await runAll();
    return new Response(JSON.stringify(results), { headers: { 'content-type': 'application/json' } });
  }
}

export default {
  fetch(_request: Request, env: { RUNNER: { newUniqueId(): unknown; get(id: unknown): { fetch(r: Request): Promise<Response> } } }): Promise<Response> {
    return env.RUNNER.get(env.RUNNER.newUniqueId()).fetch(new Request('http://runner.invalid/'));
  },
};
