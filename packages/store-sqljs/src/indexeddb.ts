/**
 * Persistence for a browser tab: the database bytes in IndexedDB, kept in pages of
 * {@link PAGE_BYTES} so that a save writes only the pages that changed since the last one, all in
 * one IndexedDB transaction that resolves only when it completes.
 *
 * @module
 */
import { InvalidArgument, StoreError } from '@ctrlrun/kernel';
import type { SqlJsPersistence } from './sql-js.js';

/** Options of {@link indexedDbPersistence}. */
export interface IndexedDbPersistenceOptions {
  /** The IndexedDB factory; defaults to `globalThis.indexedDB`. */
  indexedDB?: IDBFactory;
}

/**
 * An IndexedDB persistence, which can also keep an application's own records beside the
 * database: written in the same IndexedDB transaction as the database's next save when one starts
 * within the same task, so a page's own state and the store's commit become durable together.
 */
export interface IndexedDbPersistence extends SqlJsPersistence {
  /** The record kept under `key` by {@link writeRecord}, or `undefined`. */
  readRecord(key: string): Promise<unknown>;
  /**
   * Keeps `value` under `key`, replacing what was kept there. The value is cloned at once (later
   * changes to it are not kept); one that cannot be cloned throws `InvalidArgument`. It is written with
   * the next save of the database if one starts before the current task ends, or else in its own
   * transaction; the promise resolves once that transaction is durable, and rejects if it fails.
   */
  writeRecord(key: string, value: unknown): Promise<void>;
}

/** The size of one kept page: SQLite's default page size, so a changed database page is one kept page. */
export const PAGE_BYTES = 4096;

const STORE = 'sqljs';
/** Where earlier versions kept the whole database (read, then replaced by pages at the first save). */
const WHOLE = 'database';
/** The database's length in bytes; the pages are the keys 0, 1, … (numbers sort before these strings). */
const LENGTH = 'length';
/** Bumped by every save, so a save that finds another writer's number rewrites every page. */
const GENERATION = 'generation';

/** Where {@link IndexedDbPersistence.writeRecord} keeps a record: beside the pages, never one of the store's own keys. */
const RECORD = 'record:';

interface StagedRecord {
  value: unknown;
  /** `null`: written and durable; anything else: why not. */
  settle(err: unknown): void;
}

function checkRecordKey(key: unknown): asserts key is string {
  if (typeof key !== 'string' || key === '') throw new InvalidArgument('a record key must be a non-empty string');
}

function done<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error ?? new Error('IndexedDB request failed'));
  });
}

function finished(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error ?? new Error('IndexedDB transaction failed'));
    tx.onabort = () => reject(tx.error ?? new Error('IndexedDB transaction aborted'));
  });
}

function asBytes(value: unknown): Uint8Array | null {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  return null;
}

/** Whether page `i` of `now` is byte for byte page `i` of `before`. */
function samePage(before: Uint8Array, now: Uint8Array, i: number): boolean {
  const start = i * PAGE_BYTES;
  const end = Math.min(start + PAGE_BYTES, now.length);
  // The kept page must end where this one does (a last page can be short).
  if (Math.min(start + PAGE_BYTES, before.length) !== end) return false;
  if ((before.byteOffset + start) % 4 === 0 && (now.byteOffset + start) % 4 === 0 && (end - start) % 4 === 0) {
    const a = new Uint32Array(before.buffer, before.byteOffset + start, (end - start) / 4);
    const b = new Uint32Array(now.buffer, now.byteOffset + start, (end - start) / 4);
    for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) return false;
    return true;
  }
  for (let k = start; k < end; k++) if (before[k] !== now[k]) return false;
  return true;
}

/**
 * Keeps a sql.js store in the IndexedDB database `name` (object store `sqljs`: the pages under
 * the keys 0, 1, …, the byte length under `length`, records of {@link IndexedDbPersistence.writeRecord}
 * under `record:<key>`). Pass it as `persistence` to `createSqlJsStore`. A save writes the pages
 * that differ from the last save or load, the length and a generation number in one transaction,
 * without waiting for a read first; if the generation it finds there is not the one it last wrote
 * (another writer, or nothing loaded yet), it writes every page in the same transaction. A database an earlier
 * version kept whole under the key `database` is loaded from there and kept in pages from the
 * first save on.
 */
export function indexedDbPersistence(name: string, options: IndexedDbPersistenceOptions = {}): IndexedDbPersistence {
  if (typeof name !== 'string' || name === '') throw new InvalidArgument('indexedDbPersistence needs a non-empty database name');
  const factory = options.indexedDB ?? (globalThis as { indexedDB?: IDBFactory }).indexedDB;
  if (!factory) throw new StoreError('[sql.js] IndexedDB is not available here: pass options.indexedDB, or use another persistence');
  let opened: Promise<IDBDatabase> | null = null;
  const database = (): Promise<IDBDatabase> => {
    if (!opened) {
      const request = factory.open(name, 1);
      request.onupgradeneeded = () => {
        if (!request.result.objectStoreNames.contains(STORE)) request.result.createObjectStore(STORE);
      };
      opened = done(request).catch((err: unknown) => {
        opened = null;
        throw err;
      });
    }
    return opened;
  };
  /** The bytes as last loaded or saved, and the generation then: what the next save compares against. */
  let kept: { bytes: Uint8Array; generation: number } | null = null;
  /** Records waiting for the next transaction: the next save, or their own one when none starts first. */
  let staged = new Map<string, StagedRecord>();
  let flushing: ReturnType<typeof setTimeout> | null = null;
  const flushRecords = (): void => {
    flushing = null;
    if (staged.size === 0) return;
    const records = staged;
    staged = new Map();
    database()
      .then((db) => {
        const tx = db.transaction(STORE, 'readwrite', { durability: 'strict' });
        const complete = finished(tx);
        const store = tx.objectStore(STORE);
        try {
          for (const [key, r] of records) store.put(r.value, RECORD + key);
        } catch (err) {
          tx.abort();
          complete.catch(() => undefined);
          throw err;
        }
        return complete;
      })
      .then(
        () => records.forEach((r) => r.settle(null)),
        (err: unknown) => records.forEach((r) => r.settle(err)),
      );
  };
  const corrupt = (what: string) => new StoreError(`[sql.js] IndexedDB ${name} holds ${what}: not a database this store saved`);
  return {
    async load(): Promise<Uint8Array | null> {
      const db = await database();
      const store = db.transaction(STORE, 'readonly').objectStore(STORE);
      const [keys, values] = await Promise.all([done(store.getAllKeys()), done(store.getAll())]);
      const byKey = new Map<IDBValidKey, unknown>();
      keys.forEach((k, i) => byKey.set(k, values[i]));
      kept = null;
      if (byKey.has(WHOLE)) {
        // Written whole by an earlier version (one that also ignores the pages): that is the newest.
        const whole = asBytes(byKey.get(WHOLE));
        if (whole === null) throw corrupt(`something other than database bytes under ${WHOLE}`);
        return whole;
      }
      if (!byKey.has(LENGTH)) return null;
      const length = byKey.get(LENGTH);
      const generation = byKey.get(GENERATION);
      if (typeof length !== 'number' || !Number.isSafeInteger(length) || length < 0) throw corrupt(`a length of ${String(length)}`);
      if (typeof generation !== 'number' || !Number.isSafeInteger(generation)) throw corrupt(`a generation of ${String(generation)}`);
      const count = Math.ceil(length / PAGE_BYTES);
      // Every page checked before anything is allocated: a length no stored pages add up to is refused, not attempted.
      const pages: Uint8Array[] = [];
      for (let i = 0; i < count; i++) {
        const page = asBytes(byKey.get(i));
        const want = Math.min(PAGE_BYTES, length - i * PAGE_BYTES);
        if (page === null || page.length !== want) throw corrupt(`page ${i} ${page === null ? 'missing' : `of ${page.length} bytes, not ${want}`}`);
        pages.push(page);
      }
      const bytes = new Uint8Array(length);
      pages.forEach((page, i) => bytes.set(page, i * PAGE_BYTES));
      kept = { bytes, generation };
      return bytes;
    },
    async save(bytes: Uint8Array): Promise<void> {
      // The records written so far go out with these bytes, taken now, before any wait.
      const records = staged;
      staged = new Map();
      let db: IDBDatabase;
      let tx: IDBTransaction;
      try {
        db = await database();
        tx = db.transaction(STORE, 'readwrite', { durability: 'strict' });
      } catch (err) {
        for (const r of records.values()) r.settle(err);
        throw err;
      }
      const complete = finished(tx);
      const store = tx.objectStore(STORE);
      const before = kept;
      const count = Math.ceil(bytes.length / PAGE_BYTES);
      // A copy of the page alone: a view would store the whole buffer under it.
      const page = (i: number) => bytes.slice(i * PAGE_BYTES, (i + 1) * PAGE_BYTES);
      // Written at once, without reading anything first: the pages that differ from the last save
      // or load (every page when nothing was), the pages past a shorter end, the length.
      const written = new Uint8Array(count);
      for (let i = 0; i < count; i++) {
        if (before !== null && samePage(before.bytes, bytes, i)) continue;
        store.put(page(i), i);
        written[i] = 1;
      }
      if (before !== null) for (let i = count; i < Math.ceil(before.bytes.length / PAGE_BYTES); i++) store.delete(i);
      store.put(bytes.length, LENGTH);
      // A database kept whole is read before the pages: one an earlier version (an old tab still
      // open) wrote since would hide this save from every load. Deleting no key costs no read.
      store.delete(WHOLE);
      try {
        for (const [key, r] of records) store.put(r.value, RECORD + key);
      } catch (err) {
        // Nothing of this save may land without all of it.
        tx.abort();
        complete.catch(() => undefined);
        for (const r of records.values()) r.settle(err);
        throw err;
      }
      // The generation is read in the same transaction, after those writes were queued: if it is
      // not the one this writer last saw, another writer came between, and every page it skipped
      // may differ there, so they are written too, and any page past this end goes, as does a
      // database an earlier version kept whole.
      let generation = 0;
      const found = store.get(GENERATION);
      found.onsuccess = () => {
        const stored = typeof found.result === 'number' && Number.isSafeInteger(found.result) ? found.result : -1;
        generation = stored + 1;
        store.put(generation, GENERATION);
        if (before !== null && before.generation === stored) return;
        for (let i = 0; i < count; i++) if (!written[i]) store.put(page(i), i);
        const keys = store.getAllKeys();
        keys.onsuccess = () => {
          for (const key of keys.result) if ((typeof key === 'number' && key >= count) || key === WHOLE) store.delete(key);
        };
      };
      try {
        await complete;
      } catch (err) {
        for (const r of records.values()) r.settle(err);
        throw err;
      }
      kept = { bytes, generation };
      for (const r of records.values()) r.settle(null);
    },

    async readRecord(key: string): Promise<unknown> {
      checkRecordKey(key);
      const db = await database();
      return done(
        db
          .transaction(STORE, 'readonly')
          .objectStore(STORE)
          .get(RECORD + key),
      );
    },

    writeRecord(key: string, value: unknown): Promise<void> {
      checkRecordKey(key);
      let copy: unknown;
      try {
        copy = structuredClone(value);
      } catch (err) {
        throw new InvalidArgument(`the record ${key} cannot be kept in IndexedDB: ${(err as Error)?.message ?? String(err)}`, { cause: err });
      }
      return new Promise((resolve, reject) => {
        const earlier = staged.get(key);
        staged.set(key, {
          value: copy,
          settle: (err) => {
            earlier?.settle(err);
            if (err === null) resolve();
            else reject(err instanceof Error ? err : new StoreError(`[sql.js] IndexedDB ${name}: the record ${key} could not be written`, { cause: err }));
          },
        });
        if (flushing === null) flushing = setTimeout(flushRecords, 0);
      });
    },
  };
}
