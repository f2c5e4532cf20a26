/**
 * The better-sqlite3 store beyond the conformance suite: pragmas and the transaction protocol,
 * exact integers, the prepared-statement cache, in-memory refusals, bad input that leaves the
 * file untouched, readers, the missing optional peer, and `openStore` addresses.
 */
import { spawnSync } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import {
  AmbiguousEffect,
  Control,
  DuplicateEffect,
  InvalidArgument,
  SchemaMismatch,
  StoreClosedError,
  StoreError,
  createAction,
  loadPolicy,
} from '@ctrlrun/kernel';
import { MIGRATION_IDS, type SqlValue } from '@ctrlrun/kernel/store';
import { ACCEPTED_STORE_URLS, openStore, parseStoreUrl } from '@ctrlrun/store-node';
import {
  BUSY_TIMEOUT_MS,
  BetterSqlite3Driver,
  BetterSqlite3Store,
  createBetterSqlite3Store,
  type BetterSqlite3Database,
} from '@ctrlrun/store-node/better-sqlite3';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '../processes/harness.js';

const T0 = new Date('2026-01-01T12:00:00Z');
const LEASE = 5 * 60_000;
const clock = () => T0;
const root = mkdtempSync(join(tmpdir(), 'ctrlrun-bs3-driver-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = (name = 'store') => join(root, `${name}-${++n}.db`);

/** Bytes and mtime of a file, to prove a refusal left it untouched. */
function fingerprint(path: string): { bytes: string; mtimeMs: number; size: number } {
  const st = statSync(path);
  return { bytes: readFileSync(path).toString('base64'), mtimeMs: st.mtimeMs, size: st.size };
}

async function refusal(p: Promise<unknown>): Promise<Error> {
  const out = await p.then(
    (v) => ({ ok: true as const, v }),
    (e: unknown) => ({ ok: false as const, e }),
  );
  if (out.ok) expect.fail('expected a refusal, but it opened');
  return out.e as Error;
}

/** Builds a database with raw better-sqlite3 (journal mode left as SQLite's default). */
function rawDatabase(path: string, statements: string[]): void {
  const db = new Database(path);
  for (const s of statements) db.exec(s);
  db.close();
}

describe('createBetterSqlite3Store: the connection', () => {
  it('puts the file in WAL mode, waits 5 s for a lock, and syncs NORMAL (FULL on request)', async () => {
    const store = await createBetterSqlite3Store(fresh(), { clock });
    const { db } = store.driver;
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('busy_timeout', { simple: true })).toBe(BUSY_TIMEOUT_MS);
    expect(BUSY_TIMEOUT_MS).toBe(5000);
    expect(db.pragma('synchronous', { simple: true })).toBe(1);
    await store.close();
    const full = await createBetterSqlite3Store(fresh(), { clock, synchronous: 'FULL' });
    expect(full.driver.db.pragma('synchronous', { simple: true })).toBe(2);
    await full.close();
    await expect(createBetterSqlite3Store(fresh(), { synchronous: 'OFF' as 'FULL' })).rejects.toThrow(InvalidArgument);
  });

  it('migrates a new file to this build and records every migration', async () => {
    const store = await createBetterSqlite3Store(fresh(), { clock });
    expect((await store.appliedMigrations()).map((m) => m.migrationId)).toEqual([...MIGRATION_IDS]);
    expect(store.path).toBe(resolve(store.path));
    expect(store.url).toBe(`sqlite:${store.path}`);
    expect(store.name).toBe('better-sqlite3');
    await store.close();
  });

  it('runs every write as explicit BEGIN IMMEDIATE … COMMIT statements, never the transaction() helper', async () => {
    const path = fresh();
    const log: string[] = [];
    const real = new Database(path);
    const spied = new Proxy(real, {
      get(target, prop) {
        if (prop === 'transaction') throw new Error('the transaction() helper must not be used');
        if (prop === 'prepare') return (sql: string) => (log.push(sql), target.prepare(sql));
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as unknown as BetterSqlite3Database;
    const store = await createBetterSqlite3Store(spied, { clock });
    await store.reserveEffect('k', 'act_1', LEASE);
    expect(log.filter((sql) => /^\s*(BEGIN|COMMIT|ROLLBACK|END|SAVEPOINT|RELEASE)\b/i.test(sql)).sort()).toEqual(['BEGIN IMMEDIATE', 'COMMIT', 'ROLLBACK']);
    // A kept refusal: the ambiguation is committed before AmbiguousEffect is raised.
    const later = await createBetterSqlite3Store(path, { clock: () => new Date(T0.getTime() + LEASE + 1) });
    await expect(later.reserveEffect('k', 'act_2', LEASE)).rejects.toBeInstanceOf(AmbiguousEffect);
    expect(await store.getEffect('k')).toMatchObject({ state: 'ambiguous' });
    await later.close();
    await store.close();
    expect(real.open).toBe(false); // the store owns a Database it is handed
  });

  it('prepares each statement once: the control path reuses constant SQL text', async () => {
    let prepares = 0;
    const real = new Database(fresh());
    const counting = new Proxy(real, {
      get(target, prop) {
        if (prop === 'prepare') return (sql: string) => (prepares++, target.prepare(sql));
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as unknown as BetterSqlite3Database;
    const store = await createBetterSqlite3Store(counting, { clock });
    const warm = async (i: number) => {
      await store.reserveEffect(`k${i}`, `act_${i}`, LEASE);
      await store.beginExecution(`k${i}`, `act_${i}`);
      await store.commitEffect(`k${i}`, `act_${i}`, { i });
      await store.appendEvent({
        ts: '2026-01-01T12:00:00.000Z',
        type: 'EXECUTION_COMMITTED',
        actionId: `act_${i}`,
        effectKey: `k${i}`,
        approvalId: null,
        data: {},
      });
    };
    await warm(0);
    const afterOne = prepares;
    for (let i = 1; i <= 20; i++) await warm(i);
    expect(prepares).toBe(afterOne);
    await store.close();
  });

  it('a second handle on the same file sees each commit at once, and the lock is shared', async () => {
    const path = fresh();
    const a = await createBetterSqlite3Store(path, { clock });
    const b = await createBetterSqlite3Store(path, { clock });
    await a.reserveEffect('shared', 'act_a', LEASE);
    expect(await b.getEffect('shared')).toMatchObject({ state: 'reserved', actionId: 'act_a' });
    await expect(b.reserveEffect('shared', 'act_b', LEASE)).rejects.toMatchObject({ name: 'DuplicateEffect', state: 'in_progress' });
    await a.beginExecution('shared', 'act_a');
    await a.commitEffect('shared', 'act_a', { ok: true });
    const err = await refusal(b.reserveEffect('shared', 'act_b', LEASE));
    expect(err).toBeInstanceOf(DuplicateEffect);
    expect(err).toMatchObject({ state: 'committed' });
    await a.close();
    await b.close();
  });

  /** A fresh migrated file, and a way to open another raw driver on it (each its own connection). */
  async function driversOnOneFile(): Promise<() => BetterSqlite3Driver> {
    const path = fresh();
    await (await createBetterSqlite3Store(path)).close();
    return () => new BetterSqlite3Driver(new Database(path) as unknown as BetterSqlite3Database);
  }

  it('handles on one file in one process take turns at its write lock: every concurrent write lands, none waits out busy_timeout', async () => {
    const path = fresh();
    const a = await createBetterSqlite3Store(path);
    const b = await createBetterSqlite3Store(path);
    // A third handle through a symbolic link: the same file, met by its identity, not its path.
    const link = `${path}.link`;
    symlinkSync(path, link);
    const c = await createBetterSqlite3Store(link);
    try {
      const policy = loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    decision: allow\n');
      const controls = [a, b, c].map((store) => new Control({ policy, store, logger: { warn: () => undefined } }));
      const runs = new Map<string, number>();
      const refund = (control: Control, payment: string) =>
        control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: payment, amount: 100 }, principal: { agent: 'agent' } }), () => {
          runs.set(payment, (runs.get(payment) ?? 0) + 1);
          return { ok: true };
        });
      // Thirty refunds of their own, ten per handle, and ten asked through all three handles at once.
      const own = controls.flatMap((control, h) => Array.from({ length: 10 }, (_, i) => refund(control, `own_${h}_${i}`)));
      const shared = Array.from({ length: 10 }, (_, i) => controls.map((control) => refund(control, `shared_${i}`)));
      const settled = await Promise.allSettled([...own, ...shared.flat()]);
      const failures = settled.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
      // Before, a second handle's BEGIN IMMEDIATE blocked the event loop for 5 s and failed: "database is locked".
      expect(failures.filter((e) => !(e instanceof DuplicateEffect)).map((e) => `${e.name}: ${e.message}`)).toEqual([]);
      expect(settled.slice(0, 30).every((r) => r.status === 'fulfilled')).toBe(true);
      expect(failures).toHaveLength(20);
      for (let i = 0; i < 10; i++) expect(runs.get(`shared_${i}`), `shared_${i}`).toBe(1);
      expect([...runs.values()].reduce((x, y) => x + y, 0)).toBe(40);
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });

  it('a handle closed while it waits for its turn is refused as closed, and the turn passes on', async () => {
    const open = await driversOnOneFile();
    const [first, second] = [open(), open()];
    let release!: () => void;
    const holding = first.transaction(async (tx) => {
      await tx.query('SELECT 1');
      await new Promise<void>((r) => (release = r));
      return 'first';
    });
    const waiting = second.transaction(async () => 'second');
    await second.close();
    release();
    expect(await holding).toBe('first');
    await expect(waiting).rejects.toThrow(/closed/);
    // Free again: another handle's transaction runs at once.
    const third = open();
    expect(await third.transaction(async (tx) => (await tx.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one)).toBe(1);
    await Promise.all([first.close(), third.close()]);
  });

  it('a second transaction at once on one handle is refused, whether or not the first waits for its turn', async () => {
    const open = await driversOnOneFile();
    const [holder, d] = [open(), open()];
    let release!: () => void;
    const holding = holder.transaction(async () => new Promise<void>((r) => (release = r)));
    // d's first transaction waits for holder's turn; a second one on d is a misuse all the same.
    const first = d.transaction(async () => 'first');
    await expect(d.transaction(async () => 'second')).rejects.toThrow(/already open on this connection/);
    release();
    await holding;
    expect(await first).toBe('first');
    expect(await d.transaction(async () => 'again')).toBe('again');
    await Promise.all([holder.close(), d.close()]);
  });

  it('a handle that waits on another handle of this thread for busy_timeout is refused as locked, the event loop running meanwhile', async () => {
    const open = await driversOnOneFile();
    const [outer, inner] = [open(), open()];
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 50);
    try {
      // A transaction that waits for another handle's write on the same file can never get it:
      // that handle is refused after busy_timeout, as SQLite refuses another process's writer.
      const refused = await outer.transaction(async (tx) => {
        await tx.query('SELECT 1');
        return inner
          .transaction(async () => 'never')
          .then(
            () => null,
            (err: unknown) => err,
          );
      });
      expect(refused).toBeInstanceOf(StoreError);
      expect((refused as Error).message).toMatch(new RegExp(`database is locked: another handle in this thread held the write lock for ${BUSY_TIMEOUT_MS} ms`));
      // Before, the wait was SQLite's busy_timeout inside BEGIN IMMEDIATE: the event loop stood still.
      expect(ticks).toBeGreaterThan(0);
      // The refused waiter left the queue: the next write through it runs.
      expect(await inner.transaction(async () => 'after')).toBe('after');
    } finally {
      clearInterval(ticker);
      await Promise.all([outer.close(), inner.close()]);
    }
  }, 60_000);

  it('refuses calls after close', async () => {
    const store = await createBetterSqlite3Store(fresh(), { clock });
    await store.close();
    await expect(store.getEffect('k')).rejects.toBeInstanceOf(StoreClosedError);
    await store.close(); // idempotent
  });
});

describe('BetterSqlite3Driver', () => {
  const driver = async () => new BetterSqlite3Driver(new Database(fresh('driver')) as unknown as BetterSqlite3Database);

  it('reads integers beyond 2^53 - 1 as bigint and the rest as number, and binds integers as INTEGER', async () => {
    const d = await driver();
    expect(
      (await d.query('SELECT 9007199254740993 AS big, -9007199254740993 AS neg, 5 AS small, ? AS bound, typeof(?) AS t, 1.5 AS real', [2n ** 62n, 7])).rows,
    ).toEqual([{ big: 9007199254740993n, neg: -9007199254740993n, small: 5, bound: 2n ** 62n, t: 'integer', real: 1.5 }]);
    await d.close();
  });

  it('property: any safe or big integer round-trips exactly', async () => {
    const d = await driver();
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.maxSafeInteger(), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })), async (v: number | bigint) => {
        const { rows } = await d.query<{ v: SqlValue }>('SELECT ? AS v', [v]);
        const expected = typeof v === 'bigint' && v >= -(2n ** 53n - 1n) && v <= 2n ** 53n - 1n ? Number(v) : v;
        expect(rows[0]!.v).toBe(expected);
      }),
      { numRuns: 200 },
    );
    await d.close();
  });

  it('reports rows affected for writes, RETURNING included', async () => {
    const d = await driver();
    await d.exec('CREATE TABLE t(a INTEGER)');
    expect((await d.query('INSERT INTO t VALUES (1), (2), (3)')).rowsAffected).toBe(3);
    expect((await d.query('SELECT * FROM t')).rowsAffected).toBe(0);
    expect(await d.query('UPDATE t SET a = a + 1 WHERE a > ? RETURNING a', [1])).toEqual({ rows: [{ a: 3 }, { a: 4 }], rowsAffected: 2 });
    expect((await d.query('DELETE FROM t WHERE a = 99')).rowsAffected).toBe(0);
    await d.close();
  });

  it('commits on resolve, rolls back on reject, refuses a nested or stale transaction', async () => {
    const d = await driver();
    await d.exec('CREATE TABLE t(a INTEGER)');
    await d.transaction(async (tx) => void (await tx.query('INSERT INTO t VALUES (1)')));
    await expect(
      d.transaction(async (tx) => {
        await tx.query('INSERT INTO t VALUES (2)');
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect((await d.query('SELECT a FROM t')).rows).toEqual([{ a: 1 }]);
    expect(d.db.inTransaction).toBe(false);
    let release!: () => void;
    let stale: Parameters<Parameters<typeof d.transaction>[0]>[0] | undefined;
    const first = d.transaction(async (tx) => {
      stale = tx;
      await new Promise<void>((r) => (release = r));
    });
    await expect(d.transaction(async () => undefined)).rejects.toThrow(/already open/);
    release();
    await first;
    await expect(stale!.query('SELECT 1')).rejects.toThrow(/already ended/);
    await d.close();
    await expect(d.query('SELECT 1')).rejects.toBeInstanceOf(StoreError);
  });
});

describe('createBetterSqlite3Store: refusals', () => {
  it('refuses in-memory databases (InvalidArgument), creating nothing', async () => {
    for (const path of [':memory:', 'file::memory:', 'file::memory:?cache=shared', join(root, 'x.db?mode=memory'), 'file:x.db?mode=memory', 'file:x.db']) {
      const err = await refusal(createBetterSqlite3Store(path));
      expect(err, path).toBeInstanceOf(InvalidArgument);
      expect(existsSync(path), path).toBe(false);
    }
    const memory = new Database(':memory:') as unknown as BetterSqlite3Database;
    expect(await refusal(createBetterSqlite3Store(memory))).toBeInstanceOf(InvalidArgument);
    for (const bad of ['', '   ', 42, null, { prepare: 1 }]) {
      expect(await refusal(createBetterSqlite3Store(bad as string)), String(bad)).toBeInstanceOf(InvalidArgument);
    }
  });

  it('a file that is not a database: InvalidArgument, file untouched, nothing beside it', async () => {
    const path = fresh('notes');
    writeFileSync(path, 'shopping list\n- milk\n- eggs, lots of eggs, enough eggs to pass 100 bytes of text for sure\n');
    const before = fingerprint(path);
    const err = await refusal(createBetterSqlite3Store(path));
    expect(err).toBeInstanceOf(InvalidArgument);
    expect(err.message).toContain('is not a SQLite database');
    expect(fingerprint(path)).toEqual(before);
    expect(existsSync(`${path}-wal`) || existsSync(`${path}-shm`) || existsSync(`${path}-journal`)).toBe(false);
  });

  it("someone else's database (a users table): SchemaMismatch, file untouched, journal mode kept", async () => {
    const path = fresh('crm');
    rawDatabase(path, ['CREATE TABLE users(id INTEGER PRIMARY KEY, email TEXT)', "INSERT INTO users(email) VALUES ('a@example.com')"]);
    const before = fingerprint(path);
    const err = await refusal(createBetterSqlite3Store(path));
    expect(err).toBeInstanceOf(SchemaMismatch);
    expect(err.message).toMatch(/not a ctrlrun store.*users/);
    expect(fingerprint(path)).toEqual(before);
    const db = new Database(path, { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('delete');
    expect(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all()).toEqual([{ name: 'users' }]);
    db.close();
  });

  it("someone else's database that merely has an empty schema_version: SchemaMismatch, file untouched (writer, reader, openStore)", async () => {
    for (const others of [
      ['CREATE TABLE users(id INTEGER PRIMARY KEY, email TEXT)', "INSERT INTO users(email) VALUES ('a@example.com')"],
      // Even tables named like ours: without a recorded migration nothing says they are ours.
      ['CREATE TABLE effects(effect_key TEXT PRIMARY KEY, state TEXT, action_id TEXT, attempt INTEGER)'],
    ]) {
      const path = fresh('empty-version');
      rawDatabase(path, ['CREATE TABLE schema_version(migration_id TEXT PRIMARY KEY, applied_at TEXT NOT NULL, ctrlrun_version TEXT NOT NULL)', ...others]);
      const before = fingerprint(path);
      for (const open of [() => createBetterSqlite3Store(path), () => openStore(`sqlite:${path}`), () => openStore(path, { readOnly: true })]) {
        const err = await refusal(open());
        expect(err).toBeInstanceOf(SchemaMismatch);
        expect(err.message).toMatch(/not a ctrlrun store: its schema_version is empty, yet it has other tables \((users|effects)\)/);
        expect(fingerprint(path)).toEqual(before);
        expect(existsSync(`${path}-wal`) || existsSync(`${path}-shm`) || existsSync(`${path}-journal`)).toBe(false);
      }
    }
    // An empty schema_version alone holds nothing: a writer migrates it like an empty file.
    const alone = fresh('empty-version-alone');
    rawDatabase(alone, ['CREATE TABLE schema_version(migration_id TEXT PRIMARY KEY, applied_at TEXT NOT NULL, ctrlrun_version TEXT NOT NULL)']);
    const store = await createBetterSqlite3Store(alone, { clock });
    expect(await store.listEffects()).toEqual([]);
    await store.close();
  });

  it('a database from a newer ctrlrun: SchemaMismatch naming the unknown migration, file untouched', async () => {
    const path = fresh('newer');
    const store = await createBetterSqlite3Store(path, { clock });
    await store.driver.query("INSERT INTO schema_version VALUES ('0099_from_the_future', '2027-01-01T00:00:00+00:00', 'ctrlrun 9.9')");
    await store.close();
    const before = fingerprint(path);
    const err = await refusal(createBetterSqlite3Store(path, { clock }));
    expect(err).toBeInstanceOf(SchemaMismatch);
    expect(err.message).toContain('0099_from_the_future');
    expect(err.message).toContain('ctrlrun 9.9');
    expect(fingerprint(path)).toEqual(before);
  });

  it('a directory, or a file in a missing directory: InvalidArgument, nothing created', async () => {
    const dir = join(root, `dir-${++n}`);
    mkdirSync(dir);
    const err = await refusal(createBetterSqlite3Store(dir));
    expect(err).toBeInstanceOf(InvalidArgument);
    expect(err.message).toContain('is a directory');
    const missing = join(root, `missing-${++n}`, 'deeper', 'store.db');
    const err2 = await refusal(createBetterSqlite3Store(missing));
    expect(err2).toBeInstanceOf(InvalidArgument);
    expect(err2.message).toContain('does not exist');
    expect(existsSync(dirname(dirname(missing)))).toBe(false);
  });

  it('an engine older than SQLite 3.35 is refused at open (StoreError), and a file it created is removed', async () => {
    const path = fresh('old-engine');
    const real = new Database(path);
    const old = new Proxy(real, {
      get(target, prop) {
        if (prop === 'prepare') return (sql: string) => target.prepare(sql === 'SELECT sqlite_version() AS version' ? "SELECT '3.34.1' AS version" : sql);
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as unknown as BetterSqlite3Database;
    const err = await refusal(createBetterSqlite3Store(old, { clock }));
    expect(err).toBeInstanceOf(StoreError);
    expect(err.message).toContain('SQLite 3.34.1 is too old');
    const check = new Database(path, { readonly: true });
    expect(check.prepare('SELECT name FROM sqlite_master').all()).toEqual([]); // nothing migrated
    check.close();
  });
});

describe('readers', () => {
  it('readOnly opens an up-to-date file, refuses every write, and leaves the file untouched', async () => {
    const path = fresh('reader');
    const writer = await createBetterSqlite3Store(path, { clock });
    await writer.reserveEffect('k', 'act_1', LEASE);
    await writer.close();
    const before = fingerprint(path);
    const reader = await createBetterSqlite3Store(path, { clock, readOnly: true });
    expect(reader.readOnly).toBe(true);
    expect(await reader.getEffect('k')).toMatchObject({ state: 'reserved', actionId: 'act_1' });
    const err = await refusal(reader.reserveEffect('k2', 'act_2', LEASE));
    expect(err).toBeInstanceOf(InvalidArgument);
    expect(err.message).toContain('read-only');
    await reader.close();
    expect(fingerprint(path)).toEqual(before);
  });

  it('readOnly never creates, migrates or adopts: missing file, empty file, old schema', async () => {
    const missing = fresh('absent');
    expect(await refusal(createBetterSqlite3Store(missing, { readOnly: true }))).toBeInstanceOf(InvalidArgument);
    expect(existsSync(missing)).toBe(false);
    const empty = fresh('empty');
    writeFileSync(empty, '');
    const err = await refusal(createBetterSqlite3Store(empty, { readOnly: true }));
    expect(err).toBeInstanceOf(SchemaMismatch);
    expect(statSync(empty).size).toBe(0);
    const v05 = fresh('v05');
    rawDatabase(v05, ['CREATE TABLE effects(effect_key TEXT PRIMARY KEY, state TEXT NOT NULL, action_id TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 1)']);
    const before = fingerprint(v05);
    expect(await refusal(createBetterSqlite3Store(v05, { readOnly: true }))).toBeInstanceOf(SchemaMismatch);
    expect(fingerprint(v05)).toEqual(before);
  });

  // Root writes through chmod 0444, so as root the check runs in a child process as `nobody`.
  const asRoot = process.getuid?.() === 0;
  const repo = resolve(import.meta.dirname, '..', '..');
  const othersCanRead = (() => {
    // Every ancestor of the checkout and of the temp dir must be searchable by others, and the
    // sources and the native module readable.
    for (const start of [repo, dirname(root)]) {
      for (let d = start; ; d = dirname(d)) {
        if ((statSync(d).mode & 0o001) === 0) return false;
        if (dirname(d) === d) break;
      }
    }
    const native = join(repo, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node');
    return [native, join(repo, 'packages', 'store-node', 'src', 'sqlite', 'better-sqlite3.ts')].every((f) => existsSync(f) && (statSync(f).mode & 0o004) !== 0);
  })();
  const skipReason = asRoot && !othersCanRead ? ' — skipped: running as root (chmod does not stop root) and the checkout is not readable by nobody' : '';

  it.skipIf(skipReason !== '')(
    `a read-only file (chmod 0444): a writer is refused (InvalidArgument), a reader opens it, the file is untouched${skipReason}`,
    { timeout: 120_000 },
    async () => {
      chmodSync(root, 0o755);
      const dir = join(root, `ro-${++n}`);
      mkdirSync(dir);
      chmodSync(dir, 0o1777); // the reader may create the WAL index beside the file
      const path = join(dir, 'store.db');
      const writer = await createBetterSqlite3Store(path, { clock });
      await writer.reserveEffect('k', 'act_1', LEASE);
      await writer.close();
      chmodSync(path, 0o444);
      const before = fingerprint(path);
      const script = `
      import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
      const path = ${JSON.stringify(path)};
      const out = {};
      try { await createBetterSqlite3Store(path); out.writer = 'opened'; } catch (e) { out.writer = { name: e.name, message: e.message }; }
      const reader = await createBetterSqlite3Store(path, { readOnly: true });
      out.reader = (await reader.getEffect('k')).state;
      await reader.close();
      console.log(JSON.stringify(out));`;
      const r = spawnSync(process.execPath, [...NODE_FLAGS, '--input-type=module', '-e', script], {
        cwd: repo,
        encoding: 'utf8',
        ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
      });
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { writer: { name: string; message: string } | string; reader: string };
      expect(out.writer).toMatchObject({ name: 'InvalidArgument' });
      expect((out.writer as { message: string }).message).toContain('read-only');
      expect(out.reader).toBe('reserved');
      expect(fingerprint(path)).toEqual(before);
      if (!asRoot) expect(() => accessSync(path, constants.W_OK)).toThrow();
    },
  );
});

describe('the optional peer', () => {
  it('a missing better-sqlite3 is MissingDependency naming npm install better-sqlite3@12, and creates nothing', { timeout: 120_000 }, () => {
    const path = fresh('no-driver');
    const hide = join(import.meta.dirname, '..', 'processes', 'hide-better-sqlite3.mjs');
    const script = `
      import { openStore } from '@ctrlrun/store-node';
      try { await openStore(${JSON.stringify(path)}); console.log('{"opened":true}'); }
      catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); }`;
    const r = spawnSync(process.execPath, [...NODE_FLAGS, '--import', hide, '--input-type=module', '-e', script], {
      encoding: 'utf8',
      cwd: resolve(import.meta.dirname, '..', '..'),
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toEqual({
      name: 'MissingDependency',
      code: 'ERR_MISSING_DEPENDENCY',
      message: 'better-sqlite3 is not installed; the SQLite file store needs it: npm install better-sqlite3@12',
    });
    expect(existsSync(path)).toBe(false);
  });
});

describe('openStore(url)', () => {
  it('opens a SQLite file from a bare path, sqlite:PATH and sqlite://PATH', async () => {
    const path = fresh('url');
    for (const url of [path, `sqlite:${path}`, `sqlite://${path}`]) {
      const store = await openStore(url, { clock });
      expect(store).toBeInstanceOf(BetterSqlite3Store);
      expect((store as BetterSqlite3Store).path).toBe(path);
      await store.close();
    }
    const reader = await openStore(`sqlite:${path}`, { readOnly: true });
    expect(reader.readOnly).toBe(true);
    await reader.close();
  });

  it('parses each accepted address', () => {
    expect(parseStoreUrl('./data/ctrlrun.db')).toEqual({ kind: 'sqlite', path: './data/ctrlrun.db' });
    expect(parseStoreUrl('sqlite:data/ctrlrun.db')).toEqual({ kind: 'sqlite', path: 'data/ctrlrun.db' });
    expect(parseStoreUrl('sqlite:///srv/ctrlrun.db')).toEqual({ kind: 'sqlite', path: '/srv/ctrlrun.db' });
    expect(parseStoreUrl('SQLITE:/srv/ctrlrun.db')).toEqual({ kind: 'sqlite', path: '/srv/ctrlrun.db' });
    expect(parseStoreUrl('C:\\ctrlrun\\state.db')).toEqual({ kind: 'sqlite', path: 'C:\\ctrlrun\\state.db' });
    expect(parseStoreUrl('postgres://u@127.0.0.1:5432/db')).toEqual({ kind: 'postgres', url: 'postgres://u@127.0.0.1:5432/db' });
    expect(parseStoreUrl('postgresql://u@h/db?sslmode=disable')).toEqual({ kind: 'postgres', url: 'postgresql://u@h/db?sslmode=disable' });
    expect(parseStoreUrl('pglite:')).toEqual({ kind: 'pglite', dir: null });
    expect(parseStoreUrl('pglite:./pgdata')).toEqual({ kind: 'pglite', dir: './pgdata' });
    expect(parseStoreUrl('pglite:///var/pgdata')).toEqual({ kind: 'pglite', dir: '/var/pgdata' });
  });

  it('an unknown scheme is InvalidArgument naming the accepted ones', async () => {
    for (const url of ['mysql://root@localhost/db', 'redis://x', 'http://example.com/store', 'mongodb+srv://c/x']) {
      const err = await refusal(openStore(url));
      expect(err, url).toBeInstanceOf(InvalidArgument);
      expect(err.message).toContain(ACCEPTED_STORE_URLS);
    }
    for (const url of ['', 'sqlite:', 'sqlite://', 'postgres:localhost']) expect(await refusal(openStore(url)), url).toBeInstanceOf(InvalidArgument);
    expect(await refusal(openStore(':memory:'))).toBeInstanceOf(InvalidArgument);
    expect(await refusal(openStore('sqlite::memory:'))).toBeInstanceOf(InvalidArgument);
  });

  it('a query string or fragment is refused, naming it; no file is created and an existing one is untouched', async () => {
    const dir = mkdtempSync(join(root, 'query-'));
    const existing = join(dir, 'q.db');
    await (await openStore(existing, { clock })).close();
    const before = fingerprint(existing);
    for (const suffix of ['?mode=ro', '?immutable=1', '#main', '?']) {
      for (const url of [`sqlite:${existing}${suffix}`, `sqlite://${existing}${suffix}`, `${existing}${suffix}`, `sqlite:${join(dir, 'new.db')}${suffix}`]) {
        const err = await refusal(openStore(url));
        expect(err, url).toBeInstanceOf(InvalidArgument);
        expect(err.message).toMatch(suffix.startsWith('?') ? /has a query string/ : /has a fragment/);
        expect(err.message).toContain(JSON.stringify(suffix));
        expect(() => parseStoreUrl(url)).toThrow(InvalidArgument);
      }
    }
    expect(() => parseStoreUrl(`pglite:${dir}/pgdata?x=1`)).toThrow(/query string/);
    expect(readdirSync(dir).sort()).toEqual(['q.db']);
    expect(fingerprint(existing)).toEqual(before);
  });

  it('property: any string parses to a store address or is refused with InvalidArgument', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.webUrl(),
          fc.constantFrom('sqlite:', 'pglite:', 'postgres://', 'x:').chain((p) => fc.string().map((s) => p + s)),
        ),
        (url) => {
          let address;
          try {
            address = parseStoreUrl(url);
          } catch (err) {
            expect(err).toBeInstanceOf(InvalidArgument);
            return;
          }
          if (address.kind === 'sqlite') expect(url.endsWith(address.path)).toBe(true);
          if (address.kind === 'sqlite') expect(address.path).not.toMatch(/[?#]/);
          if (!/^[A-Za-z][A-Za-z0-9+.-]+:/.test(url)) expect(address).toEqual({ kind: 'sqlite', path: url });
        },
      ),
      { numRuns: 500 },
    );
  });
});
