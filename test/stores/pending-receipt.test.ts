/**
 * An outcome whose receipt cannot be chained with it (T170) is kept with its receipt pending: the
 * receipt's row with no chain columns, written in the outcome's own transaction. The receipt
 * written alone after it chains that row; when the writer stops first (a crash), nothing of the
 * receipt is lost: verify reports it off the chain (never a pass), and `chainPendingReceipts`
 * (`ctrlrun receipts --chain-pending`) chains it with the seal it would have had. On every SQL
 * backend: sql.js, a better-sqlite3 file, PGlite and a real PostgreSQL server (statement by
 * statement and one statement per step), alone and in a group; and a real process killed
 * between the outcome and its lone receipt.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { Control, createAction, loadPolicy, StoreError, verifyChain, type ReceiptRow, type StateStore } from '@ctrlrun/kernel';
import { openSqlStateStore, pendingReceiptDocument, postgresDialect, sealReceipt, sqliteDialect, SqlStateStore, type SqlDriver } from '@ctrlrun/kernel/store';
import { BetterSqlite3Driver, createBetterSqlite3Store, type BetterSqlite3Database } from '@ctrlrun/store-node/better-sqlite3';
import { PgliteDriver } from '@ctrlrun/store-node/pglite';
import { PgDriver } from '@ctrlrun/store-node/pg';
import { SqlJsDriver, type SqlJsModule } from '@ctrlrun/store-sqljs';
import initSqlJs from 'sql.js';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, NODE_TS, ROOT } from '../mcp/support.js';
import { NODE_FLAGS } from '../processes/harness.js';
import { scaled } from '../support/load.js';
import { recording } from '../support/recording-driver.js';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

const POLICY = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);
const quiet = { warn() {} };
const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-pending-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** The statements that lock and advance the chain head: failing them fails every chaining of a receipt. */
const CHAIN_HEAD = /receipt_chain/;

interface Scene {
  store: StateStore;
  /** Fails the next `n` statements that touch the chain head (Infinity: until set again), once `after` more have passed. */
  failChain(n: number, after?: number): void;
  close(): Promise<void>;
}

function failing(driver: SqlDriver): { wrapped: SqlDriver; failChain(n: number, after?: number): void } {
  const rec = recording(driver);
  let [passing, left] = [0, 0];
  rec.state.fail = { test: (sql: string) => CHAIN_HEAD.test(sql) && passing-- <= 0 && left-- > 0 } as unknown as RegExp;
  return { wrapped: rec.wrapped, failChain: (n, after = 0) => void ([passing, left] = [after, n]) };
}

let SQL: SqlJsModule | null = null;
let lite: PGlite | null = null;
afterAll(() => lite?.close());
let schemas = 0;

const backends: { name: string; scene(): Promise<Scene> }[] = [
  {
    name: 'sql.js',
    async scene() {
      SQL ??= (await initSqlJs()) as unknown as SqlJsModule;
      const f = failing(await SqlJsDriver.open(SQL));
      const store = await openSqlStateStore(f.wrapped, { dialect: sqliteDialect, logger: quiet });
      return { store, failChain: f.failChain, close: () => store.close() };
    },
  },
  {
    name: 'a better-sqlite3 file',
    async scene() {
      const path = join(dir, `s-${++files}.db`);
      await (await createBetterSqlite3Store(path)).close();
      const f = failing(new BetterSqlite3Driver(new Database(path) as unknown as BetterSqlite3Database));
      const store = await openSqlStateStore(f.wrapped, { dialect: sqliteDialect, logger: quiet });
      return { store, failChain: f.failChain, close: () => store.close() };
    },
  },
  ...[false, true].map((combined) => ({
    name: `PGlite (${combined ? 'one statement per step' : 'statement by statement'})`,
    async scene(): Promise<Scene> {
      lite ??= new PGlite();
      const schema = `pending_${++schemas}`;
      await lite.exec(`CREATE SCHEMA ${schema}`);
      const driver = new PgliteDriver(lite, { schema });
      await driver.resolveSchema();
      const f = failing(driver);
      const dialect = postgresDialect(schema);
      const sql = combined ? dialect.sql : (({ insertEffectWithEvents: _i, updateEffectWithTrail: _u, ...rest }) => rest)(dialect.sql);
      const store = await new SqlStateStore(f.wrapped, { dialect: { ...dialect, sql }, logger: quiet }).open();
      return { store, failChain: f.failChain, close: () => store.close() };
    },
  })),
];

const action = (id: string) => createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 1 }, principal: { agent: 'a' } });

/** The chain's rows with the pending ones found, and whether it verifies. */
async function chainOf(store: StateStore) {
  const rows = await store.receipts();
  const report = verifyChain(rows, await store.chainHead());
  return { rows, pending: rows.filter((r) => pendingReceiptDocument(r) !== null), report };
}

/** `row`'s stored hash is the seal of `pending`'s document on the row's own position. */
function sealedFrom(row: ReceiptRow, pending: ReceiptRow): void {
  expect(row.receipt_id).toBe(pending.receipt_id);
  const sealed = sealReceipt(pendingReceiptDocument(pending)!, row.seq!, row.prev_hash!);
  expect({ json: row.json, hash: row.hash }).toEqual({ json: sealed.json, hash: sealed.hash });
}

async function scenarios(open: () => Promise<Scene>) {
  it('a receipt that cannot be chained with its outcome, nor alone: the outcome is kept, the receipt pending (verify: unchained), then chained by chainPendingReceipts', async () => {
    const s = await open();
    try {
      const warnings: string[] = [];
      const control = new Control({ policy: POLICY, store: s.store, logger: { warn: (m: string) => void warnings.push(m) } });
      await control.execute(action('p1'), () => ({ id: 'p1' }));
      s.failChain(Infinity);
      await expect(control.execute(action('p2'), () => ({ id: 'p2' }))).rejects.toThrow('disk full');
      // The caller is told where the receipt is, beside the store's error.
      expect(warnings.filter((w) => w.includes('ctrlrun receipts --chain-pending'))).toEqual([
        expect.stringMatching(/^\[ctrlrun\] stripe\.refund: the outcome of refund:p2 is stored, its receipt ctr_\S+ is not chained \(.*disk full/),
      ]);
      expect((await s.store.getEffect('refund:p2'))?.state).toBe('committed');
      const before = await chainOf(s.store);
      expect(before.rows.map((r) => [r.seq, r.effect_key, r.result])).toEqual([
        [null, 'refund:p2', 'committed'],
        [1, 'refund:p1', 'committed'],
      ]);
      expect(before.pending).toHaveLength(1);
      expect(before.report.ok).toBe(false);
      expect(before.report.breaks.map((b) => b.name)).toEqual(['unchained']);
      // The chain goes on meanwhile; the pending receipt waits, whole.
      s.failChain(0);
      await control.execute(action('p3'), () => ({ id: 'p3' }));
      const chained = await s.store.chainPendingReceipts!();
      expect(chained.map((r) => [r.seq, r.document['effect_key'], r.document['result']])).toEqual([[3, 'refund:p2', 'committed']]);
      const after = await chainOf(s.store);
      expect(after.report.ok).toBe(true);
      expect(after.rows.map((r) => [r.seq, r.effect_key])).toEqual([
        [1, 'refund:p1'],
        [2, 'refund:p3'],
        [3, 'refund:p2'],
      ]);
      sealedFrom(after.rows[2]!, before.pending[0]!);
      expect(await s.store.chainHead()).toMatchObject({ seq: 3, hash: after.rows[2]!.hash });
      // Once: nothing is left to chain.
      expect(await s.store.chainPendingReceipts!()).toEqual([]);
      expect((await chainOf(s.store)).rows).toHaveLength(3);
    } finally {
      await s.close();
    }
  });

  /**
   * p1 chained, then p2 whose receipt part fails twice with its outcome (so it is kept pending) on
   * `store` (the scene's, or one wrapping it): the caller gets its result and the one row its sink saw.
   */
  async function pendedThenChained(s: Scene, store: StateStore): Promise<void> {
    await new Control({ policy: POLICY, store: s.store, logger: quiet }).execute(action('p1'), () => ({ id: 'p1' }));
    let receiptId: unknown = null;
    const sinks = [{ onEvent() {}, onReceipt: (r: { document: Record<string, unknown> }) => void (receiptId = r.document['receipt_id']) }];
    const control = new Control({ policy: POLICY, store, logger: quiet, sinks });
    s.failChain(2);
    expect(await control.execute(action('p2'), () => ({ id: 'p2' }))).toEqual({ id: 'p2' });
    const { rows, pending, report } = await chainOf(s.store);
    expect(report.ok).toBe(true);
    expect(pending).toEqual([]);
    expect(rows.map((r) => [r.seq, r.effect_key])).toEqual([
      [1, 'refund:p1'],
      [2, 'refund:p2'],
    ]);
    expect(rows[1]!.receipt_id).toBe(receiptId);
    const types = (await s.store.events()).filter((e) => e.effectKey === 'refund:p2').map((e) => e.type);
    expect(types).toContain('EXECUTION_COMMITTED');
  }

  it('a receipt part that fails twice with the outcome: the outcome is written with it pending, and the receipt written alone chains that row (one row, the caller gets it)', async () => {
    const s = await open();
    try {
      await pendedThenChained(s, s.store);
    } finally {
      await s.close();
    }
  });

  it('chainPendingReceipts run while the writer is still on its way: the receipt written alone finds its row chained, and the caller gets that row', async () => {
    const s = await open();
    try {
      // Another process's recovery pass chains the pending receipt between the outcome and the receipt written alone.
      const racing = new Proxy(s.store, {
        get(target, key) {
          if (key === 'putReceipt')
            return async (...args: Parameters<StateStore['putReceipt']>) => {
              expect((await target.chainPendingReceipts!()).map((r) => r.document['effect_key'])).toEqual(['refund:p2']);
              return target.putReceipt(...args);
            };
          const value = Reflect.get(target, key, target) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
      await pendedThenChained(s, racing);
    } finally {
      await s.close();
    }
  });

  it('in a group: eight outcomes whose receipts cannot be chained are each kept with their receipt pending, and chained oldest first', async () => {
    const s = await open();
    try {
      const control = new Control({ policy: POLICY, store: s.store, logger: quiet });
      s.failChain(Infinity);
      const settled = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => control.execute(action(`g${i}`), () => ({ id: i }))));
      expect(settled.every((r) => r.status === 'rejected')).toBe(true);
      expect((await s.store.listEffects('committed')).length).toBe(8);
      const { pending } = await chainOf(s.store);
      expect(pending).toHaveLength(8);
      s.failChain(0);
      const chained = await s.store.chainPendingReceipts!();
      expect(chained.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      const finished = chained.map((r) => r.document['finished_at'] as string);
      expect([...finished].sort()).toEqual(finished);
      expect((await chainOf(s.store)).report.ok).toBe(true);
    } finally {
      await s.close();
    }
  });

  it('a chaining pass that fails part-way names how many it chained and which failed; those stay chained, the rest pending, and a second pass chains them', async () => {
    const s = await open();
    try {
      const control = new Control({ policy: POLICY, store: s.store, logger: quiet });
      s.failChain(Infinity);
      for (const id of ['w1', 'w2', 'w3']) await expect(control.execute(action(id), () => ({ id }))).rejects.toThrow();
      const pending = (await chainOf(s.store)).pending.sort((a, b) => (a.ts! < b.ts! ? -1 : a.ts! > b.ts! ? 1 : a.receipt_id < b.receipt_id ? -1 : 1));
      expect(pending).toHaveLength(3);
      // The first receipt's two chain-head statements pass (lock, then seal), the second's lock fails.
      s.failChain(1, 2);
      const err = await s.store.chainPendingReceipts!().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StoreError);
      expect((err as Error).message).toContain(`chainPendingReceipts: chained 1 of 3 (the last at seq 1), then ${pending[1]!.receipt_id} failed: `);
      expect((err as Error).message).toContain('disk full');
      expect((err as Error).message).toMatch(/the rest stay pending$/);
      const between = await chainOf(s.store);
      expect(between.rows.filter((r) => r.seq !== null).map((r) => r.receipt_id)).toEqual([pending[0]!.receipt_id]);
      expect(between.pending.map((r) => r.receipt_id).sort()).toEqual([pending[1]!.receipt_id, pending[2]!.receipt_id].sort());
      s.failChain(0);
      const rest = await s.store.chainPendingReceipts!();
      expect(rest.map((r) => [r.seq, r.document['receipt_id']])).toEqual([
        [2, pending[1]!.receipt_id],
        [3, pending[2]!.receipt_id],
      ]);
      expect((await chainOf(s.store)).report.ok).toBe(true);
    } finally {
      await s.close();
    }
  });

  it("an older store's unchained row (written before the chain), or a pending row altered since, is not chained", async () => {
    const s = await open();
    try {
      const control = new Control({ policy: POLICY, store: s.store, logger: quiet });
      s.failChain(Infinity);
      await expect(control.execute(action('p1'), () => ({ id: 'p1' }))).rejects.toThrow();
      s.failChain(0);
      const [row] = (await chainOf(s.store)).pending;
      // The same row as a pre-chain writer left it: its own schema label, no seq keys.
      const old = JSON.parse(row!.json!) as Record<string, unknown>;
      delete old['seq'];
      delete old['prev_hash'];
      old['schema'] = 'ctrlrun.receipt/v2';
      expect(pendingReceiptDocument({ ...row!, json: JSON.stringify(old) })).toBeNull();
      // Nor is a pending row altered since it was written (its hash is the pending document's).
      expect(pendingReceiptDocument(row!)).not.toBeNull();
      expect(pendingReceiptDocument({ ...row!, json: row!.json!.replace('"p1"', '"p9"') })).toBeNull();
      expect(pendingReceiptDocument({ ...row!, hash: 'sha256:00' })).toBeNull();
      expect(pendingReceiptDocument({ ...row!, hash: null })).toBeNull();
      // Nor one whose columns are not its document's (the chain would vouch for a row that lies).
      expect(pendingReceiptDocument({ ...row!, effect_key: 'refund:p9' })).toBeNull();
      expect(pendingReceiptDocument({ ...row!, action_id: 'act_other' })).toBeNull();
      expect(pendingReceiptDocument({ ...row!, result: 'failed' })).toBeNull();
      expect(pendingReceiptDocument({ ...row!, ts: '2000-01-01T00:00:00.000000Z' })).toBeNull();
    } finally {
      await s.close();
    }
  });
}

for (const b of backends) describe(`pending receipts: ${b.name}`, () => scenarios(() => b.scene()));

describePg('pending receipts: a real PostgreSQL server', (server) => {
  let db: FreshDatabase | null = null;
  const pools: pg.Pool[] = [];
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await db?.drop();
  });
  for (const prepare of [false, true]) {
    describe(`prepare: ${prepare}`, () =>
      scenarios(async () => {
        db ??= await freshDatabase(server.url, 'pending');
        const schema = `pending_${prepare ? 'p' : 'd'}_${++schemas}`;
        await db.createSchema(schema);
        const pool = new pg.Pool({ connectionString: db.url, max: 4 });
        pool.on('error', () => undefined);
        pools.push(pool);
        const driver = new PgDriver(pool, { schema, prepare });
        await driver.resolveSchema();
        const f = failing(driver);
        const store = await new SqlStateStore(f.wrapped, { dialect: postgresDialect(schema), logger: quiet }).open();
        return { store, failChain: f.failChain, close: () => store.close() };
      }));
  }
});

describe('pending receipts: a process killed between its outcome and the receipt written alone', () => {
  it('the outcome stands with its receipt pending; ctrlrun receipts --verify-chain counts it, --chain-pending chains it, and the chain verifies', async () => {
    const path = join(dir, 'killed.db');
    const child = spawnSync(process.execPath, [...NODE_FLAGS, join(import.meta.dirname, 'pending-receipt-child.ts'), path], {
      encoding: 'utf8',
      timeout: scaled(60_000),
    });
    // Killed by its own hand, at the lone receipt's first statement.
    expect({ signal: child.signal, stdout: child.stdout.trim() }).toEqual({ signal: 'SIGKILL', stdout: 'outcome written' });
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, [...NODE_TS, CLI, 'receipts', ...args, '--store-url', `sqlite://${path}`], { cwd: ROOT, encoding: 'utf8' });
    const before = cli('--verify-chain');
    expect(before.status).toBe(1);
    expect(before.stdout).toContain('1 pending: an outcome kept with its receipt off the chain');
    expect(before.stdout).toContain('ctrlrun receipts --chain-pending');
    expect(before.stdout).not.toContain('written before the chain existed');
    const chain = cli('--chain-pending');
    expect(chain.stderr).toBe('');
    expect(chain.status).toBe(0);
    expect(chain.stdout).toMatch(/^seq 2 {2}\S+ {2}stripe\.refund {2}committed {2}refund:p2$/m);
    expect(chain.stdout).toContain('chained 1 pending receipt');
    const after = execFileSync(process.execPath, [...NODE_TS, CLI, 'receipts', '--verify-chain', '--json', '--store-url', `sqlite://${path}`], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(JSON.parse(after)).toMatchObject({ ok: true, verified: 2, unchained: 0, pending: 0 });
    expect(cli('--chain-pending').stdout).toContain('no pending receipts');
    const mixed = cli('--chain-pending', '--verify-chain');
    expect({ status: mixed.status, stderr: mixed.stderr.trim() }).toEqual({
      status: 2,
      stderr: expect.stringContaining('--chain-pending writes and takes no listing option; drop --verify-chain'),
    });
    const store = await createBetterSqlite3Store(path);
    try {
      expect((await store.getEffect('refund:p2'))?.state).toBe('committed');
    } finally {
      await store.close();
    }
  }, 120_000);
});
