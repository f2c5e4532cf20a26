/**
 * The sql.js driver and what SqlStateStore does on top of it that the conformance suite cannot
 * see from outside: persistence after commit, reload after a failed save, prepared-statement
 * reuse, bigint reads, wrapped driver errors, the per-driver mutex, the PK and renewal guards.
 */
import {
  AmbiguousEffect,
  callbackSink,
  Control,
  createAction,
  DuplicateEffect,
  InvalidArgument,
  loadPolicy,
  StoreClosedError,
  StoreError,
} from '@ctrlrun/kernel';
import { MIGRATION_IDS, SqlStateStore, openSqlStateStore, sqliteDialect, type SqlDriver, type SqlExecutor } from '@ctrlrun/kernel/store';
import {
  SqlJsDriver,
  createSqlJsStore,
  indexedDbPersistence,
  openSqlJsStore,
  PAGE_BYTES,
  type SqlJsDatabase,
  type SqlJsModule,
  type SqlJsPersistence,
} from '@ctrlrun/store-sqljs';
import { IDBDatabase, IDBFactory, IDBObjectStore } from 'fake-indexeddb';
import fc from 'fast-check';
import initSqlJs from 'sql.js';
import { beforeAll, describe, expect, it } from 'vitest';

let SQL: SqlJsModule;
beforeAll(async () => {
  SQL = (await initSqlJs()) as unknown as SqlJsModule;
});

const T0 = new Date('2026-01-01T12:00:00Z');
const LEASE = 300_000;

function slot() {
  const s = { bytes: null as Uint8Array | null, saves: 0, fail: false };
  const persistence: SqlJsPersistence = {
    load: async () => s.bytes,
    save: async (b) => {
      if (s.fail) throw new Error('disk full');
      s.saves += 1;
      s.bytes = b;
    },
  };
  return { s, persistence };
}

/** A driver whose statements can be intercepted by SQL text. */
function intercept(driver: SqlDriver, around: (sql: string, params: readonly unknown[], ex: SqlExecutor) => Promise<unknown> | undefined): SqlDriver {
  const wrap = (ex: SqlExecutor): SqlExecutor => ({
    query: (sql, params = []) => (around(sql, params, ex) as never) ?? ex.query(sql, params),
    exec: (sql) => ex.exec(sql),
  });
  return {
    name: driver.name,
    dialect: driver.dialect,
    capabilities: driver.capabilities,
    ...wrap(driver),
    transaction: (fn) => driver.transaction((tx) => fn(wrap(tx))),
    close: () => driver.close(),
  };
}

describe('persistence', () => {
  it('saves after each committed write, never after a read or a refusal that wrote nothing', async () => {
    const { s, persistence } = slot();
    const store = await createSqlJsStore({ clock: () => T0, persistence });
    const afterOpen = s.saves;
    expect(afterOpen).toBe(MIGRATION_IDS.length); // one per migration transaction
    await store.reserveEffect('k1', 'act_1', LEASE);
    expect(s.saves).toBe(afterOpen + 1);
    await store.getEffect('k1');
    await store.listEffects();
    await store.chainHead();
    await expect(store.reserveEffect('k1', 'act_2', LEASE)).rejects.toBeInstanceOf(DuplicateEffect);
    expect(s.saves).toBe(afterOpen + 1);
    // The saved bytes are the committed state.
    const copy = await openSqlJsStore(SQL, { persistence: { load: async () => s.bytes, save: async () => undefined } });
    expect(await copy.getEffect('k1')).toMatchObject({ state: 'reserved', actionId: 'act_1' });
    await copy.close();
    await store.close();
  });

  it('an allowed action saves twice: the reservation before the executor runs, the outcome and receipt after', async () => {
    const { s, persistence } = slot();
    const store = await createSqlJsStore({ clock: () => T0, persistence });
    const control = new Control({
      policy: loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  pay: {decision: allow, effect: "pay:{id}"}\n'),
      store,
      clock: () => T0,
      principal: { agent: 'a' },
      logger: { warn: () => undefined },
    });
    const reopen = () => openSqlJsStore(SQL, { persistence: { load: async () => s.bytes, save: async () => undefined } });
    const before = s.saves;
    let seenByExecutor: unknown = null;
    await control.execute(createAction({ name: 'pay', arguments: { id: 'p1' }, principal: { agent: 'a' } }), async () => {
      // A reload now (a closed tab, a crash) still holds the reservation: the key is taken.
      const copy = await reopen();
      seenByExecutor = await copy.getEffect('pay:p1');
      await copy.close();
      return 'paid';
    });
    expect(seenByExecutor).toMatchObject({ state: 'executing', attempt: 1 });
    expect(s.saves - before).toBe(2);
    const copy = await reopen();
    expect(await copy.getEffect('pay:p1')).toMatchObject({ state: 'committed' });
    expect((await copy.receipts()).map((r) => r.seq)).toEqual([1]);
    expect((await copy.events()).map((e) => e.type)).toEqual([
      'ACTION_PROPOSED',
      'POLICY_EVALUATED',
      'EFFECT_RESERVED',
      'EXECUTION_STARTED',
      'EXECUTION_COMMITTED',
    ]);
    await copy.close();
    await store.close();
  });

  it('a kept write is saved before its refusal is raised', async () => {
    const { s, persistence } = slot();
    let now = T0;
    const store = await createSqlJsStore({ clock: () => now, persistence });
    await store.reserveEffect('k', 'act_1', LEASE);
    now = new Date(T0.getTime() + LEASE + 1);
    const saves = s.saves;
    await expect(store.reserveEffect('k', 'act_2', LEASE)).rejects.toBeInstanceOf(AmbiguousEffect);
    expect(s.saves).toBe(saves + 1);
    const copy = await openSqlJsStore(SQL, { persistence: { load: async () => s.bytes, save: async () => undefined } });
    expect(await copy.getEffect('k')).toMatchObject({ state: 'ambiguous' });
    await copy.close();
    await store.close();
  });

  it('a failed save raises a StoreError and goes back to the last durable state', async () => {
    const { s, persistence } = slot();
    const store = await createSqlJsStore({ clock: () => T0, persistence });
    await store.reserveEffect('kept', 'act_1', LEASE);
    s.fail = true;
    const err = await store.reserveEffect('lost', 'act_2', LEASE).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StoreError);
    expect(err).toMatchObject({ code: 'ERR_STORE' });
    expect((err as Error).message).toMatch(/could not be saved/);
    expect(((err as Error).cause as Error).message).toBe('disk full');
    expect(await store.getEffect('lost')).toBeNull();
    expect(await store.getEffect('kept')).toMatchObject({ state: 'reserved' });
    s.fail = false;
    await store.reserveEffect('again', 'act_3', LEASE);
    expect(await store.getEffect('again')).toMatchObject({ state: 'reserved' });
    await store.close();
  });

  it('keeps its rollback journal in memory, after a reload too, and a refused write still rolls back', async () => {
    const { s, persistence } = slot();
    const store = await createSqlJsStore({ clock: () => T0, persistence });
    const mode = async () => (await store.driver.query<{ journal_mode: string }>('PRAGMA journal_mode')).rows[0]?.journal_mode;
    expect(await mode()).toBe('memory');
    s.fail = true;
    await expect(store.reserveEffect('lost', 'act_2', LEASE)).rejects.toMatchObject({ code: 'ERR_STORE' });
    s.fail = false;
    // The failed save reopened the last durable bytes: the journal is in memory there too.
    expect(await mode()).toBe('memory');
    // A transaction that fails half-way leaves nothing behind.
    await expect(
      store.driver.transaction(async (tx) => {
        await tx.query("INSERT INTO effects(effect_key, state, action_id) VALUES ('half', 'reserved', 'act_9')");
        throw new Error('refused half-way');
      }),
    ).rejects.toThrow('refused half-way');
    expect(await store.getEffect('half')).toBeNull();
    await store.close();
  });

  it('a failed load is a StoreError at open', async () => {
    const failing: SqlJsPersistence = { load: async () => Promise.reject(new Error('no such file')), save: async () => undefined };
    await expect(createSqlJsStore({ persistence: failing })).rejects.toMatchObject({ code: 'ERR_STORE' });
  });

  it('export() hands out the database bytes between transactions', async () => {
    const store = await createSqlJsStore({ clock: () => T0 });
    await store.reserveEffect('k', 'act_1', LEASE);
    const bytes = await store.export();
    const db = new SQL.Database(bytes);
    const st = db.prepare('SELECT state FROM effects WHERE effect_key = ?');
    st.bind(['k']);
    expect(st.step()).toBe(true);
    expect(st.get()).toEqual(['reserved']);
    st.free();
    db.close();
    await store.close();
  });
});

describe('held saves', () => {
  it('commits inside holdSaves are saved together: at each checkpoint, and once at the end, whatever the function does', async () => {
    const { s, persistence } = slot();
    const store = await createSqlJsStore({ clock: () => T0, persistence });
    const reopen = () => openSqlJsStore(SQL, { persistence: { load: async () => s.bytes, save: async () => undefined } });
    const before = s.saves;
    const keys = async () => {
      const copy = await reopen();
      const found = (await copy.listEffects()).map((e) => e.effectKey).sort();
      await copy.close();
      return found;
    };
    const result = await store.holdSaves(async () => {
      await store.reserveEffect('a', 'act_a', LEASE);
      await store.reserveEffect('b', 'act_b', LEASE);
      expect(s.saves, 'nothing saved inside the hold').toBe(before);
      await store.checkpoint();
      expect(s.saves).toBe(before + 1);
      expect(await keys(), 'the checkpoint saved both').toEqual(['a', 'b']);
      await store.checkpoint();
      expect(s.saves, 'a checkpoint with nothing new saves nothing').toBe(before + 1);
      await store.reserveEffect('c', 'act_c', LEASE);
      // A refusal inside a hold writes nothing and so adds nothing to save.
      await expect(store.reserveEffect('c', 'act_x', LEASE)).rejects.toBeInstanceOf(DuplicateEffect);
      return 'done';
    });
    expect(result).toBe('done');
    expect(s.saves).toBe(before + 2);
    expect(await keys()).toEqual(['a', 'b', 'c']);
    // Nested holds save once, when the outermost ends; a throwing function still has its commits saved.
    const thrown = await store
      .holdSaves(async () => {
        await store.holdSaves(async () => store.reserveEffect('d', 'act_d', LEASE));
        expect(s.saves).toBe(before + 2);
        throw new Error('refused after writing');
      })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect((thrown as Error).message).toBe('refused after writing');
    expect(s.saves).toBe(before + 3);
    expect(await keys()).toEqual(['a', 'b', 'c', 'd']);
    // Outside a hold, every commit is saved before it returns, as before.
    await store.reserveEffect('e', 'act_e', LEASE);
    expect(s.saves).toBe(before + 4);
    await store.close();
  });

  it('a failed save at the end of a hold raises a StoreError and goes back to the last saved state', async () => {
    const { s, persistence } = slot();
    const store = await createSqlJsStore({ clock: () => T0, persistence });
    await store.reserveEffect('kept', 'act_1', LEASE);
    const err = await store
      .holdSaves(async () => {
        await store.reserveEffect('lost1', 'act_2', LEASE);
        await store.reserveEffect('lost2', 'act_3', LEASE);
        s.fail = true;
      })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toMatch(/could not be saved/);
    s.fail = false;
    expect(await store.getEffect('lost1')).toBeNull();
    expect(await store.getEffect('lost2')).toBeNull();
    expect(await store.getEffect('kept')).toMatchObject({ state: 'reserved' });
    await store.close();
  });

  it('close saves what a hold left unsaved', async () => {
    const { s, persistence } = slot();
    const store = await createSqlJsStore({ clock: () => T0, persistence });
    let release!: () => void;
    const held = store.holdSaves(async () => {
      await store.reserveEffect('k', 'act_1', LEASE);
      await new Promise<void>((r) => (release = r));
    });
    await new Promise((r) => setTimeout(r, 0));
    await store.close();
    release();
    await held;
    const copy = await openSqlJsStore(SQL, { persistence: { load: async () => s.bytes, save: async () => undefined } });
    expect(await copy.getEffect('k')).toMatchObject({ state: 'reserved' });
    await copy.close();
  });

  it('holdSaves wants a function', async () => {
    const store = await createSqlJsStore();
    await expect(store.holdSaves('no' as never)).rejects.toBeInstanceOf(InvalidArgument);
    await store.close();
  });
});

describe('indexedDbPersistence', () => {
  it('keeps the store across a reopen (an in-memory IndexedDB)', async () => {
    const factory = new IDBFactory();
    const store = await createSqlJsStore({ clock: () => T0, persistence: indexedDbPersistence('ctrlrun', { indexedDB: factory }) });
    await store.reserveEffect('k', 'act_1', LEASE);
    await store.close();
    const again = await createSqlJsStore({ clock: () => T0, persistence: indexedDbPersistence('ctrlrun', { indexedDB: factory }) });
    expect(await again.getEffect('k')).toMatchObject({ state: 'reserved', actionId: 'act_1' });
    await again.close();
    const other = await createSqlJsStore({ persistence: indexedDbPersistence('another', { indexedDB: factory }) });
    expect(await other.getEffect('k')).toBeNull();
    await other.close();
  });

  /** What the object store holds, by key (numbers are pages). */
  async function kept(factory: IDBFactory, name: string): Promise<Map<IDBValidKey, unknown>> {
    const db = await new Promise<IDBDatabase>((ok, fail) => {
      const r = factory.open(name, 1);
      r.onupgradeneeded = () => r.result.createObjectStore('sqljs');
      r.onsuccess = () => ok(r.result);
      r.onerror = () => fail(r.error);
    });
    const store = db.transaction('sqljs', 'readonly').objectStore('sqljs');
    const get = <T>(r: IDBRequest<T>) => new Promise<T>((ok) => (r.onsuccess = () => ok(r.result)));
    const [keys, values] = await Promise.all([get(store.getAllKeys()), get(store.getAll())]);
    db.close();
    return new Map(keys.map((k, i) => [k, values[i]]));
  }

  /** Counts the puts into IndexedDB objects stores made while `fn` runs. */
  async function puts(fn: () => Promise<void>): Promise<IDBValidKey[]> {
    const seen: IDBValidKey[] = [];
    const original = IDBObjectStore.prototype.put;
    IDBObjectStore.prototype.put = function (this: IDBObjectStore, value: unknown, key?: IDBValidKey) {
      seen.push(key!);
      return original.call(this, value, key);
    };
    try {
      await fn();
    } finally {
      IDBObjectStore.prototype.put = original;
    }
    return seen;
  }

  it('a save writes only the pages that changed since the last save, in one transaction', async () => {
    const factory = new IDBFactory();
    const p = indexedDbPersistence('paged', { indexedDB: factory });
    const bytes = new Uint8Array(10 * PAGE_BYTES).map((_, i) => i % 251);
    expect(await puts(() => p.save(bytes))).toEqual([...Array.from({ length: 10 }, (_, i) => i), 'length', 'generation']);
    const next = bytes.slice();
    for (const at of [3 * PAGE_BYTES + 17, 7 * PAGE_BYTES]) next[at] = next[at]! ^ 1;
    expect(await puts(() => p.save(next))).toEqual([3, 7, 'length', 'generation']);
    // Shorter: the pages past the end go; longer: only the new pages come.
    const shorter = next.slice(0, 6 * PAGE_BYTES);
    expect(await puts(() => p.save(shorter))).toEqual(['length', 'generation']);
    expect([...(await kept(factory, 'paged')).keys()].filter((k) => typeof k === 'number')).toEqual([0, 1, 2, 3, 4, 5]);
    const longer = new Uint8Array(8 * PAGE_BYTES);
    longer.set(shorter);
    longer.fill(9, 6 * PAGE_BYTES);
    expect(await puts(() => p.save(longer))).toEqual([6, 7, 'length', 'generation']);
    // Each page is stored as its own bytes, not a view of the whole database.
    const page = (await kept(factory, 'paged')).get(7) as Uint8Array;
    expect([page.length, page.buffer.byteLength]).toEqual([PAGE_BYTES, PAGE_BYTES]);
    expect(await indexedDbPersistence('paged', { indexedDB: factory }).load()).toEqual(longer);
  });

  /** The readwrite transactions begun while `fn` runs, each as the keys it put (numbers are pages), and how many reads each made. */
  async function transactions(fn: () => Promise<void>): Promise<{ puts: IDBValidKey[]; reads: number }[]> {
    const seen: { puts: IDBValidKey[]; reads: number }[] = [];
    const original = IDBDatabase.prototype.transaction;
    const put = IDBObjectStore.prototype.put;
    const get = IDBObjectStore.prototype.get;
    const getAllKeys = IDBObjectStore.prototype.getAllKeys;
    const current = new WeakMap<object, { puts: IDBValidKey[]; reads: number }>();
    IDBDatabase.prototype.transaction = function (this: IDBDatabase, ...args: Parameters<IDBDatabase['transaction']>) {
      const tx = original.apply(this, args);
      if (args[1] === 'readwrite') {
        const entry = { puts: [], reads: 0 };
        seen.push(entry);
        current.set(tx, entry);
      }
      return tx;
    } as IDBDatabase['transaction'];
    IDBObjectStore.prototype.put = function (this: IDBObjectStore, value: unknown, key?: IDBValidKey) {
      current.get(this.transaction)?.puts.push(key!);
      return put.call(this, value, key);
    };
    IDBObjectStore.prototype.get = function (this: IDBObjectStore, key: IDBValidKey | IDBKeyRange) {
      const entry = current.get(this.transaction);
      if (entry) entry.reads++;
      return get.call(this, key);
    };
    IDBObjectStore.prototype.getAllKeys = function (this: IDBObjectStore, ...args: Parameters<IDBObjectStore['getAllKeys']>) {
      const entry = current.get(this.transaction);
      if (entry) entry.reads++;
      return getAllKeys.apply(this, args);
    };
    try {
      await fn();
    } finally {
      IDBDatabase.prototype.transaction = original;
      IDBObjectStore.prototype.put = put;
      IDBObjectStore.prototype.get = get;
      IDBObjectStore.prototype.getAllKeys = getAllKeys;
    }
    return seen;
  }

  it('a save by the last writer reads one value (the generation), and reads all keys only when another writer came between', async () => {
    const factory = new IDBFactory();
    const a = indexedDbPersistence('reads', { indexedDB: factory });
    const b = indexedDbPersistence('reads', { indexedDB: factory });
    const bytes = new Uint8Array(3 * PAGE_BYTES).fill(7);
    // The first save knows nothing kept: every page, then a look for stale keys.
    expect((await transactions(() => a.save(bytes))).map((t) => t.reads)).toEqual([2]);
    const next = bytes.slice();
    next[5] = 1;
    expect(await transactions(() => a.save(next))).toEqual([{ puts: [0, 'length', 'generation'], reads: 1 }]);
    // Another writer's save in between: the next save of `a` writes every page and looks for stale keys.
    await b.save(new Uint8Array(5 * PAGE_BYTES).fill(3));
    const last = next.slice();
    last[PAGE_BYTES] = 9;
    const after = await transactions(() => a.save(last));
    expect(after).toHaveLength(1);
    expect(after[0]!.reads).toBe(2);
    expect(after[0]!.puts.filter((k) => typeof k === 'number').sort()).toEqual([0, 1, 2]);
    expect(await indexedDbPersistence('reads', { indexedDB: factory }).load()).toEqual(last);
    expect([...(await kept(factory, 'reads')).keys()].filter((k) => typeof k === 'number')).toEqual([0, 1, 2]);
  });

  it("a record written in the task a save starts in goes out in that save's transaction; otherwise in its own", async () => {
    const factory = new IDBFactory();
    const p = indexedDbPersistence('records', { indexedDB: factory });
    const bytes = new Uint8Array(2 * PAGE_BYTES).fill(1);
    await p.save(bytes);
    const next = bytes.slice();
    next[0] = 2;
    let together!: Promise<void>;
    const tx = await transactions(async () => {
      together = p.writeRecord('page', { log: ['one'] });
      await p.save(next);
      await together;
    });
    expect(tx).toEqual([{ puts: [0, 'length', 'record:page', 'generation'], reads: 1 }]);
    // No save follows: written alone, and the promise waits for it.
    const alone = await transactions(() => p.writeRecord('page', { log: ['one', 'two'] }));
    expect(alone).toEqual([{ puts: ['record:page'], reads: 0 }]);
    // The last value written under a key wins; both promises resolve when it is durable.
    const first = p.writeRecord('other', 1);
    const second = p.writeRecord('other', 2);
    await Promise.all([first, second]);
    const reopened = indexedDbPersistence('records', { indexedDB: factory });
    expect([await reopened.readRecord('page'), await reopened.readRecord('other'), await reopened.readRecord('none')]).toEqual([
      { log: ['one', 'two'] },
      2,
      undefined,
    ]);
    // Records are not pages: the database loads as saved, and a shorter save leaves them alone.
    expect(await reopened.load()).toEqual(next);
    await reopened.save(new Uint8Array(PAGE_BYTES));
    expect(await indexedDbPersistence('records', { indexedDB: factory }).readRecord('page')).toEqual({ log: ['one', 'two'] });
    expect(() => p.writeRecord('', 1)).toThrow(InvalidArgument);
    await expect(p.readRecord(7 as never)).rejects.toBeInstanceOf(InvalidArgument);
  });

  it('a record that cannot be cloned is refused at once, and later changes to a kept value are not written', async () => {
    const factory = new IDBFactory();
    const p = indexedDbPersistence('unclonable', { indexedDB: factory });
    expect(() => p.writeRecord('page', () => 1)).toThrow(InvalidArgument);
    expect(() => p.writeRecord('page', { s: Symbol('no') })).toThrow(/the record page cannot be kept in IndexedDB/);
    const value = { log: ['one'] };
    const written = p.writeRecord('page', value);
    value.log.push('changed after');
    const tx = await transactions(async () => {
      await p.save(new Uint8Array(PAGE_BYTES).fill(4));
      await written;
    });
    expect(tx).toEqual([{ puts: [0, 'length', 'record:page', 'generation'], reads: 2 }]);
    expect(await indexedDbPersistence('unclonable', { indexedDB: factory }).readRecord('page')).toEqual({ log: ['one'] });
  });

  it('whatever is saved, by one writer or two taking turns, the next load gives the last bytes saved', async () => {
    const page = fc.uint8Array({ minLength: PAGE_BYTES, maxLength: PAGE_BYTES });
    const edit = fc.record({
      writer: fc.integer({ min: 0, max: 1 }),
      pages: fc.integer({ min: 0, max: 5 }),
      touch: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }),
      tail: fc.nat(PAGE_BYTES - 1),
    });
    let n = 0;
    await fc.assert(
      fc.asyncProperty(page, fc.array(edit, { minLength: 1, maxLength: 8 }), async (seed, edits) => {
        const factory = new IDBFactory();
        const name = `prop-${n++}`;
        const writers = [indexedDbPersistence(name, { indexedDB: factory }), indexedDbPersistence(name, { indexedDB: factory })];
        let last: Uint8Array = new Uint8Array(0);
        for (const e of edits) {
          // Page-multiple lengths as SQLite writes, and now and then one that is not.
          const length = e.pages * PAGE_BYTES + (e.touch.length === 3 ? e.tail : 0);
          const bytes = new Uint8Array(length);
          for (let i = 0; i < length; i += PAGE_BYTES) bytes.set(seed.subarray(0, Math.min(PAGE_BYTES, length - i)), i);
          for (const [at, v] of e.touch) if (length > 0) bytes[at % length] = v;
          await writers[e.writer]!.save(bytes);
          last = bytes;
        }
        expect(await indexedDbPersistence(name, { indexedDB: factory }).load()).toEqual(last);
      }),
      { numRuns: 60 },
    );
  }, 120_000);

  it('reads a database an earlier version kept whole, then keeps it in pages from the first save', async () => {
    const factory = new IDBFactory();
    const old = await createSqlJsStore({ clock: () => T0 });
    await old.reserveEffect('k', 'act_1', LEASE);
    const whole = await old.export();
    await old.close();
    const db = await new Promise<IDBDatabase>((ok) => {
      const r = factory.open('earlier', 1);
      r.onupgradeneeded = () => r.result.createObjectStore('sqljs');
      r.onsuccess = () => ok(r.result);
    });
    await new Promise<void>((ok) => {
      const tx = db.transaction('sqljs', 'readwrite');
      tx.objectStore('sqljs').put(whole, 'database');
      tx.oncomplete = () => ok();
    });
    db.close();
    const store = await createSqlJsStore({ clock: () => T0, persistence: indexedDbPersistence('earlier', { indexedDB: factory }) });
    expect(await store.getEffect('k')).toMatchObject({ state: 'reserved' });
    await store.reserveEffect('k2', 'act_2', LEASE);
    await store.close();
    const now = await kept(factory, 'earlier');
    expect(now.has('database')).toBe(false);
    expect(now.get('length')).toBe((await indexedDbPersistence('earlier', { indexedDB: factory }).load())!.length);
    const again = await createSqlJsStore({ clock: () => T0, persistence: indexedDbPersistence('earlier', { indexedDB: factory }) });
    expect((await again.listEffects()).map((e) => e.effectKey).sort()).toEqual(['k', 'k2']);
    await again.close();
  });

  it('a save by the last writer still removes a whole database an earlier version wrote meanwhile (an old tab still open)', async () => {
    const factory = new IDBFactory();
    const p = indexedDbPersistence('mixed', { indexedDB: factory });
    await p.save(new Uint8Array(2 * PAGE_BYTES).fill(1));
    // An earlier version, still open elsewhere, writes the database whole and leaves the generation alone.
    const db = await new Promise<IDBDatabase>((ok) => {
      const r = factory.open('mixed', 1);
      r.onsuccess = () => ok(r.result);
    });
    await new Promise<void>((ok) => {
      const tx = db.transaction('sqljs', 'readwrite');
      tx.objectStore('sqljs').put(new Uint8Array(PAGE_BYTES).fill(2), 'database');
      tx.oncomplete = () => ok();
    });
    db.close();
    // This writer's generation is still the stored one: its next save is the quick one, and it is the newest.
    const last = new Uint8Array(2 * PAGE_BYTES).fill(1);
    last[0] = 3;
    await p.save(last);
    expect(await indexedDbPersistence('mixed', { indexedDB: factory }).load()).toEqual(last);
    expect((await kept(factory, 'mixed')).has('database')).toBe(false);
  });

  it('a missing or wrong-sized page is a StoreError that names it, not a damaged database', async () => {
    const factory = new IDBFactory();
    await indexedDbPersistence('holes', { indexedDB: factory }).save(new Uint8Array(3 * PAGE_BYTES).fill(1));
    const db = await new Promise<IDBDatabase>((ok) => {
      const r = factory.open('holes', 1);
      r.onsuccess = () => ok(r.result);
    });
    const change = (fn: (s: IDBObjectStore) => void) =>
      new Promise<void>((ok) => {
        const tx = db.transaction('sqljs', 'readwrite');
        fn(tx.objectStore('sqljs'));
        tx.oncomplete = () => ok();
      });
    await change((s) => s.delete(1));
    await expect(indexedDbPersistence('holes', { indexedDB: factory }).load()).rejects.toThrow(/page 1 missing/);
    await change((s) => s.put(new Uint8Array(10), 1));
    await expect(indexedDbPersistence('holes', { indexedDB: factory }).load()).rejects.toThrow(/page 1 of 10 bytes, not 4096/);
    await change((s) => s.put(new Uint8Array(PAGE_BYTES), 1));
    // A length far beyond the pages stored: refused by the first missing page, never allocated.
    await change((s) => s.put(2 ** 40, 'length'));
    await expect(indexedDbPersistence('holes', { indexedDB: factory }).load()).rejects.toThrow(/page 3 missing/);
    await change((s) => s.put('x', 'length'));
    await expect(indexedDbPersistence('holes', { indexedDB: factory }).load()).rejects.toBeInstanceOf(StoreError);
    db.close();
  });

  it('says so when there is no IndexedDB', () => {
    expect('indexedDB' in globalThis).toBe(false);
    expect(() => indexedDbPersistence('ctrlrun')).toThrow(/IndexedDB is not available/);
    expect(() => indexedDbPersistence('')).toThrow(InvalidArgument);
  });
});

describe('the driver', () => {
  it('reads integers beyond 2^53 - 1 as bigint and the rest as number', async () => {
    const d = await SqlJsDriver.open(SQL);
    expect((await d.query('SELECT 9007199254740993 AS big, 5 AS small, ? AS bound', [2n ** 62n])).rows).toEqual([
      { big: 9007199254740993n, small: 5, bound: 2n ** 62n },
    ]);
    await d.close();
  });

  it('reports rows affected for writes only', async () => {
    const d = await SqlJsDriver.open(SQL);
    await d.exec('CREATE TABLE t(a INTEGER)');
    expect((await d.query('INSERT INTO t VALUES (1), (2), (3)')).rowsAffected).toBe(3);
    expect((await d.query('SELECT * FROM t')).rowsAffected).toBe(0);
    expect((await d.query('UPDATE t SET a = a + 1 WHERE a > ? RETURNING a', [1])).rowsAffected).toBe(2);
    expect((await d.query('DELETE FROM t WHERE a = 99')).rowsAffected).toBe(0);
    await d.close();
  });

  it('prepares each statement once: the control path reuses constant SQL text', async () => {
    let prepares = 0;
    const Counting = class extends SQL.Database {
      override prepare(sql: string) {
        prepares += 1;
        return super.prepare(sql);
      }
    } as unknown as SqlJsModule['Database'];
    const store = await openSqlJsStore({ Database: Counting }, { clock: () => T0 });
    const warm = async (i: number) => {
      const key = `k${i}`;
      const a = `act_${i}`;
      await store.reserveEffect(key, a, LEASE);
      await store.beginExecution(key, a);
      await store.commitEffect(key, a, { i });
    };
    await warm(0);
    const afterOne = prepares;
    for (let i = 1; i <= 20; i++) await warm(i);
    expect(prepares).toBe(afterOne);
    await store.close();
  });

  it('refuses a second transaction while one is open (the kernel queues them)', async () => {
    const d = await SqlJsDriver.open(SQL);
    let release!: () => void;
    const first = d.transaction(() => new Promise<void>((r) => (release = r)));
    await expect(d.transaction(async () => undefined)).rejects.toThrow(/already open/);
    release();
    await first;
    await d.close();
  });

  it('rolls back when the transaction body throws', async () => {
    const d = await SqlJsDriver.open(SQL);
    await d.exec('CREATE TABLE t(a INTEGER)');
    await expect(
      d.transaction(async (tx) => {
        await tx.query('INSERT INTO t VALUES (1)');
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect((await d.query('SELECT count(*) AS n FROM t')).rows).toEqual([{ n: 0 }]);
    await d.close();
  });
});

describe('SqlStateStore on a driver', () => {
  it("gives a step's events their ids in the order written, whatever order the driver returns the inserted ids in", async () => {
    // RETURNING's order is not promised: the multi-row insert's rows come back reversed here.
    let reversed = 0;
    const driver = intercept(await SqlJsDriver.open(SQL), (sql, params, ex) => {
      if (!/^\s*INSERT INTO events/i.test(sql) || (sql.match(/\(\?/g) ?? []).length < 2) return undefined;
      reversed++;
      return ex.query(sql, params as never).then((r) => ({ ...r, rows: [...r.rows].reverse() }));
    });
    const store = await openSqlStateStore(driver);
    const seen: { id: number; type: string }[] = [];
    const control = new Control({
      policy: loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  pay: {decision: allow, effect: "pay:{id}"}\n'),
      store,
      logger: { warn() {} },
      sinks: [callbackSink({ onEvent: (e) => void seen.push({ id: e.eventId, type: e.type }) })],
    });
    await control.execute(createAction({ name: 'pay', arguments: { id: 'p1' }, principal: { agent: 'a' } }), () => 'ok');
    expect(reversed).toBeGreaterThan(0);
    // What the sinks were told is what the table holds, id for id, in the order the steps wrote them.
    const stored = (await store.events()).map((e) => ({ id: e.eventId, type: e.type }));
    expect(seen).toEqual(stored);
    expect(stored.map((e) => e.id)).toEqual([...stored.map((e) => e.id)].sort((a, b) => a - b));
    expect(stored[0]!.type).toBe('ACTION_PROPOSED');
    await store.close();
  });

  it('wraps raw driver errors as StoreError with the SQL and the cause', async () => {
    const store = await createSqlJsStore();
    await store.driver.exec('DROP TABLE effects');
    const err = await store.getEffect('k').then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StoreError);
    expect(err).toMatchObject({ code: 'ERR_STORE', sql: sqliteDialect.sql.selectEffect });
    expect(((err as StoreError).cause as Error).message).toMatch(/no such table: effects/);
    expect((err as Error).message).toMatch(/^\[kernel\] \[sql\.js\]/);
    // A reservation's first statement on SQLite is the insert (the key is read only if taken).
    await expect(store.reserveEffect('k', 'act_1', LEASE)).rejects.toMatchObject({ code: 'ERR_STORE', sql: sqliteDialect.sql.insertEffectIfAbsent });
    await store.close();
  });

  it('a malformed event draft is refused by its place in the batch and field, and nothing of the batch is written', async () => {
    const store = await createSqlJsStore({ clock: () => T0 });
    const ok = { ts: '2026-01-01T12:00:00.000Z', type: 'ACTION_PROPOSED', actionId: 'act_1', effectKey: null, approvalId: null, data: {} } as const;
    const cases: [Record<string, unknown>, string][] = [
      [{ type: '' }, 'events[1].type must be a non-empty string'],
      [{ ts: 5 }, 'events[1].ts must be a non-empty string'],
      [{ actionId: '' }, 'events[1].actionId must be a non-empty string'],
      [{ effectKey: 7 }, 'events[1].effectKey must be a non-empty string'],
      [{ approvalId: '' }, 'events[1].approvalId must be a non-empty string'],
      [{ data: [] }, 'events[1].data must be a plain object'],
      [{ data: { amount: 1.5 } }, 'at events[1].data.amount'],
    ];
    for (const [change, message] of cases) {
      const err = await store.appendEvents([ok, { ...ok, ...change } as never]).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidArgument);
      expect((err as Error).message).toContain(message);
    }
    await expect(store.appendEvent({ ...ok, type: '' } as never)).rejects.toThrow('event.type must be a non-empty string');
    expect(await store.events()).toEqual([]);
    await store.close();
  });

  it('a primary-key collision on insert is DuplicateEffect(in_progress)', async () => {
    // A driver that hides the row from the first read, as if another writer's insert landed after it.
    const driver = await SqlJsDriver.open(SQL);
    const store0 = await openSqlStateStore(driver, { clock: () => T0 });
    await store0.reserveEffect('k', 'act_1', LEASE);
    let hidden = 0;
    const blind = intercept(driver, (sql) =>
      sql === sqliteDialect.sql.selectEffect && hidden++ === 0 ? Promise.resolve({ rows: [], rowsAffected: 0 }) : undefined,
    );
    const store = await openSqlStateStore(blind, { clock: () => T0 });
    await expect(store.reserveEffect('k', 'act_2', LEASE)).rejects.toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', state: 'in_progress', effectKey: 'k' });
    expect(await store.getEffect('k')).toMatchObject({ actionId: 'act_1', state: 'reserved' });
    await store.close();
  });

  it('inserting the key first ends every reservation exactly as reading it first does: new, held, lapsed, failed, committed, ambiguous', async () => {
    // The same dialect without insertEffectIfAbsent reads the key before it inserts (the order Postgres keeps).
    const readFirst = {
      ...sqliteDialect,
      sql: Object.fromEntries(Object.entries(sqliteDialect.sql).filter(([k]) => k !== 'insertEffectIfAbsent')),
    } as typeof sqliteDialect;
    const run = async (dialect?: typeof sqliteDialect) => {
      let now = T0;
      const sent: string[] = [];
      const driver = intercept(await SqlJsDriver.open(SQL), (sql) => void sent.push(sql) as undefined);
      const store = await openSqlStateStore(driver, { clock: () => now, ...(dialect ? { dialect } : {}) });
      const outcome = (p: Promise<unknown>) =>
        p.then(
          (r) => ({ ok: r }),
          (e: { code: string; state?: string }) => ({ refused: e.code, state: e.state ?? null }),
        );
      const seen: unknown[] = [];
      seen.push(await outcome(store.reserveEffect('new', 'act_1', LEASE)));
      await store.reserveEffect('held', 'act_1', LEASE);
      seen.push(await outcome(store.reserveEffect('held', 'act_2', LEASE)));
      await store.reserveEffect('lapsed', 'act_1', LEASE);
      await store.reserveEffect('failed', 'act_1', LEASE);
      await store.beginExecution('failed', 'act_1');
      await store.failEffect('failed', 'act_1', 'NotExecuted: declined');
      await store.reserveEffect('committed', 'act_1', LEASE);
      await store.beginExecution('committed', 'act_1');
      await store.commitEffect('committed', 'act_1', { id: 1 });
      await store.reserveEffect('ambiguous', 'act_1', LEASE);
      await store.markAmbiguous('ambiguous', 'act_1', 'Error: lost');
      now = new Date(T0.getTime() + LEASE + 1);
      for (const key of ['lapsed', 'failed', 'committed', 'ambiguous']) seen.push(await outcome(store.reserveEffect(key, 'act_2', LEASE)));
      const effects = await store.listEffects();
      await store.close();
      return { seen, effects, insertedFirst: sent.includes(sqliteDialect.sql.insertEffectIfAbsent!) };
    };
    const insertFirst = await run();
    const readingFirst = await run(readFirst);
    expect(insertFirst.insertedFirst).toBe(true);
    expect(readingFirst.insertedFirst).toBe(false);
    expect(insertFirst.seen).toEqual(readingFirst.seen);
    expect(insertFirst.effects).toEqual(readingFirst.effects);
    expect(insertFirst.seen.map((o) => ('ok' in (o as object) ? 'ok' : (o as { refused: string }).refused))).toEqual([
      'ok',
      'ERR_DUPLICATE_EFFECT',
      'ERR_AMBIGUOUS_EFFECT',
      'ok',
      'ERR_DUPLICATE_EFFECT',
      'ERR_AMBIGUOUS_EFFECT',
    ]);
  });

  it('the renewal is conditional on the prior attempt, and a lost race is DuplicateEffect(in_progress)', async () => {
    const driver = await SqlJsDriver.open(SQL);
    const seen: unknown[][] = [];
    const racing = intercept(driver, (sql, params, ex) => {
      if (sql !== sqliteDialect.sql.renewEffect) return undefined;
      seen.push([...params]);
      // Another worker renews first (attempt 2); our UPDATE … AND attempt = 1 must then hit no row.
      return ex
        .query("UPDATE effects SET attempt = 2, state = 'reserved', action_id = 'act_other' WHERE effect_key = ?", ['k'])
        .then(() => ex.query(sql, params as never));
    });
    const store = await openSqlStateStore(racing, { clock: () => T0 });
    await store.reserveEffect('k', 'act_1', LEASE);
    await store.beginExecution('k', 'act_1');
    await store.failEffect('k', 'act_1', 'NotExecuted: declined');
    await expect(store.reserveEffect('k', 'act_2', LEASE)).rejects.toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', state: 'in_progress' });
    expect(seen).toEqual([['reserved', 'act_2', 2, '2026-01-01T12:05:00+00:00', '2026-01-01T12:00:00+00:00', 'k', 1]]);
    // The simulated rival ran inside our transaction, so the refusal rolled it back with ours.
    expect(await store.getEffect('k')).toMatchObject({ state: 'failed', actionId: 'act_1', attempt: 1 });
    await store.close();
  });

  it('two stores on one single-connection driver share its mutex', async () => {
    const driver = await SqlJsDriver.open(SQL);
    const a = await openSqlStateStore(driver, { clock: () => T0 });
    const b = new SqlStateStore(driver, { clock: () => T0 });
    await b.open();
    const calls = Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).reserveEffect('k', `act_${i}`, LEASE));
    const settled = await Promise.allSettled(calls);
    expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(1);
    for (const s of settled) if (s.status === 'rejected') expect(s.reason).toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', state: 'in_progress' });
    await a.close();
  });

  it('refuses calls before open and after close', async () => {
    const driver = await SqlJsDriver.open(SQL);
    const unopened = new SqlStateStore(driver);
    await expect(unopened.getEffect('k')).rejects.toMatchObject({ code: 'ERR_STORE' });
    const store = await createSqlJsStore();
    await store.close();
    await expect(store.getEffect('k')).rejects.toBeInstanceOf(StoreClosedError);
    await expect(store.reserveEffect('k', 'act_1', LEASE)).rejects.toMatchObject({ code: 'ERR_STORE_CLOSED' });
    await store.close(); // idempotent
  });

  it('bad arguments are InvalidArgument, never a driver crash', async () => {
    const store = await createSqlJsStore();
    for (const call of [
      () => store.getEffect(42 as unknown as string),
      () => store.reserveEffect({} as unknown as string, 'act_1', LEASE),
      () => store.listEffects('done' as never),
      () => store.listApprovals('maybe' as never),
      () => store.appendEvent({ ts: 'x', type: 'ACTION_PROPOSED', actionId: null, effectKey: null, approvalId: null, data: { f: 1.5 } }),
      () => store.failEffect('k', 'act_1', ''),
      () => store.putReceipt({} as never),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    }
    await store.close();
  });

  it('createSqlJsStore takes a module, a promise of one, or an init function', async () => {
    const viaPromise = await createSqlJsStore({ SQL: Promise.resolve(SQL) });
    expect(viaPromise.dialect).toBe('sqlite');
    await viaPromise.close();
    const seen: unknown[] = [];
    const viaInit = await createSqlJsStore({ initSqlJs: async (config) => (seen.push(config), SQL), locateFile: (f) => `/assets/${f}` });
    expect((seen[0] as { locateFile(f: string): string }).locateFile('sql-wasm.wasm')).toBe('/assets/sql-wasm.wasm');
    await viaInit.close();
    await expect(createSqlJsStore({ SQL: {} as SqlJsModule })).rejects.toBeInstanceOf(InvalidArgument);
  });

  it('transitions write what the planners say: lease kept into executing, cleared after, never shortened', async () => {
    let now = T0;
    const store = await createSqlJsStore({ clock: () => now });
    await store.reserveEffect('k', 'act_1', LEASE);
    await expect(store.extendLease('k', 'act_1', LEASE)).rejects.toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', state: 'in_progress' });
    now = new Date(T0.getTime() + 60_000);
    expect(await store.beginExecution('k', 'act_1')).toMatchObject({
      state: 'executing',
      leaseExpiresAt: '2026-01-01T12:05:00+00:00',
      updatedAt: '2026-01-01T12:01:00+00:00',
    });
    expect(await store.extendLease('k', 'act_1', 1000)).toMatchObject({ leaseExpiresAt: '2026-01-01T12:05:00+00:00' }); // never shorter
    expect(await store.extendLease('k', 'act_1', 10 * 60_000)).toMatchObject({ leaseExpiresAt: '2026-01-01T12:11:00+00:00' });
    expect(await store.markAmbiguous('k', 'act_1', 'TimeoutError: one')).toMatchObject({ state: 'ambiguous', leaseExpiresAt: null });
    expect(await store.markAmbiguous('k', 'act_1', 'TimeoutError: two')).toMatchObject({ state: 'ambiguous', error: 'TimeoutError: two' }); // idempotent
    await expect(store.markAmbiguous('k', 'act_2', 'x')).rejects.toMatchObject({ code: 'ERR_AMBIGUOUS_EFFECT' });
    await store.reserveEffect('c', 'act_3', LEASE);
    await store.beginExecution('c', 'act_3');
    const committed = await store.commitEffect('c', 'act_3', { when: new Date(T0), n: Number.NaN, nested: [undefined] });
    expect(committed).toMatchObject({ state: 'committed', leaseExpiresAt: null, resultJson: '{"when":"2026-01-01T12:00:00.000Z","n":"NaN","nested":[null]}' });
    expect(await store.getEffect('c')).toEqual(committed);
    await store.close();
  });

  it('free text with a lone surrogate is stored escaped rather than failing', async () => {
    const store = await createSqlJsStore({ clock: () => T0 });
    await store.reserveEffect('k', 'act_1', LEASE);
    await store.beginExecution('k', 'act_1');
    const r = await store.markAmbiguous('k', 'act_1', 'TimeoutError: half \uD800 a pair');
    expect(r.error).toBe('TimeoutError: half \\ud800 a pair');
    expect((await store.getEffect('k'))!.error).toBe('TimeoutError: half \\ud800 a pair');
    await store.close();
  });
});

// Keep the structural type honest: a real sql.js Database satisfies the driver's subset.
const _typecheck: (db: InstanceType<Awaited<ReturnType<typeof initSqlJs>>['Database']>) => SqlJsDatabase = (db) => db as unknown as SqlJsDatabase;
void _typecheck;
