/**
 * Persistence for a browser tab: the database bytes in one IndexedDB record, written in one
 * IndexedDB transaction that resolves only when it completes.
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

const STORE = 'sqljs';
const KEY = 'database';

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

/**
 * Keeps a sql.js store in the IndexedDB database `name` (object store `sqljs`, key `database`).
 * Pass it as `persistence` to `createSqlJsStore`.
 */
export function indexedDbPersistence(name: string, options: IndexedDbPersistenceOptions = {}): SqlJsPersistence {
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
  return {
    async load(): Promise<Uint8Array | null> {
      const db = await database();
      const tx = db.transaction(STORE, 'readonly');
      const value = await done(tx.objectStore(STORE).get(KEY));
      if (value === undefined || value === null) return null;
      if (value instanceof Uint8Array) return value;
      if (value instanceof ArrayBuffer) return new Uint8Array(value);
      throw new StoreError(`[sql.js] IndexedDB ${name} holds something other than database bytes under ${KEY}`);
    },
    async save(bytes: Uint8Array): Promise<void> {
      const db = await database();
      const tx = db.transaction(STORE, 'readwrite', { durability: 'strict' });
      const complete = finished(tx);
      tx.objectStore(STORE).put(bytes, KEY);
      await complete;
    },
  };
}
