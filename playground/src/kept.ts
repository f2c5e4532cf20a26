/**
 * What the page keeps in IndexedDB besides the store: the fake remote's call counts (they are
 * the "payment provider's", not ctrlrun's), the policy text in force, the last request and
 * approval ids, and the output so far. One record, rewritten whole (it is small), kept beside the
 * store's pages in the store's own IndexedDB database: written with the store's save at the end of
 * a step, so the step's commit and its entry become durable in one transaction.
 *
 * @module
 */
import type { ApproveRequest, ApproveResult, RefundRequest, RefundResult, ResolveRequest, ResolveResult } from '@ctrlrun/kernel/try-it';

/** One output entry as kept: the request and what came back (JSON), or the refusal. */
export type LogItem =
  | { kind: 'refund'; request: RefundRequest; result: RefundResult }
  | { kind: 'approve'; request: ApproveRequest; result: ApproveResult }
  | { kind: 'resolve'; request: ResolveRequest; result: ResolveResult }
  | { kind: 'refused'; asked: string; error: { name: string; message: string } }
  | { kind: 'note'; text: string };

/** The page's record. */
export interface PageState {
  calls: Record<string, number>;
  /** The policy text in force if the reader loaded an edit; `null`: the module's own. */
  policyYaml: string | null;
  requestId: string | null;
  approvalId: string | null;
  log: LogItem[];
}

/** How many output entries are kept across a reload. */
export const LOG_LIMIT = 200;

const STORE = 'page';
const KEY = 'state';

/** A fresh record. */
export function emptyState(): PageState {
  // Keyed by payment ids the reader types: a prototype-free record, so `__proto__` is a payment like any other.
  return { calls: Object.create(null) as Record<string, number>, policyYaml: null, requestId: null, approvalId: null, log: [] };
}

function request<T>(r: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error ?? new Error('IndexedDB request failed'));
  });
}

/** A kept record as far as it has the right shape; anything else starts fresh rather than breaking the page. */
export function readState(value: unknown): PageState {
  const state = emptyState();
  if (typeof value !== 'object' || value === null) return state;
  const v = value as Record<string, unknown>;
  if (typeof v['calls'] === 'object' && v['calls'] !== null) {
    for (const [id, n] of Object.entries(v['calls'])) if (Number.isSafeInteger(n) && (n as number) >= 0) state.calls[id] = n as number;
  }
  if (typeof v['policyYaml'] === 'string') state.policyYaml = v['policyYaml'];
  if (typeof v['requestId'] === 'string') state.requestId = v['requestId'];
  if (typeof v['approvalId'] === 'string') state.approvalId = v['approvalId'];
  if (Array.isArray(v['log']))
    state.log = (v['log'] as unknown[]).filter((x): x is LogItem => typeof x === 'object' && x !== null && typeof (x as { kind?: unknown }).kind === 'string');
  return state;
}

/** Keeps {@link PageState} in the IndexedDB database `name`, or nowhere when IndexedDB is missing. */
export interface Keeper {
  load(): Promise<PageState>;
  save(state: PageState): Promise<void>;
}

/** The record's key beside the store's pages. */
const RECORD = 'page';

/** Where this record lives: the store's persistence (`@ctrlrun/store-sqljs`'s `indexedDbPersistence`). */
export interface RecordShelf {
  readRecord(key: string): Promise<unknown>;
  writeRecord(key: string, value: unknown): Promise<void>;
}

/**
 * A keeper beside the store's pages. A save made while a step holds the store's saves goes out
 * with the store's save at the end of that hold; one made at any other time (the fake remote's
 * count, a note) is written in a transaction of its own before it resolves. A page that has no
 * record there yet reads the one an earlier version kept in its own database, `legacy`.
 */
export function shelfKeeper(shelf: RecordShelf, legacy?: () => Promise<PageState | null>): Keeper {
  return {
    async load() {
      const value = await shelf.readRecord(RECORD);
      if (value !== undefined) return readState(value);
      return (await legacy?.()) ?? emptyState();
    },
    save(state) {
      // writeRecord clones the value at once: later changes to `state` are not written.
      return shelf.writeRecord(RECORD, { ...state, log: state.log.slice(-LOG_LIMIT) });
    },
  };
}

/**
 * The record an earlier version of the page kept in the IndexedDB database `name`, or `null` when
 * there is none; the database is not created when it does not exist.
 */
export async function legacyRecord(name: string, factory: IDBFactory = indexedDB): Promise<PageState | null> {
  const known = (await factory.databases?.()) ?? null;
  if (known !== null && !known.some((d) => d.name === name)) return null;
  const db = await new Promise<IDBDatabase | null>((resolve, reject) => {
    const r = factory.open(name);
    // Not there after all: give up the creation.
    r.onupgradeneeded = () => r.transaction?.abort();
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => (r.error?.name === 'AbortError' ? resolve(null) : reject(r.error ?? new Error('IndexedDB open failed')));
  });
  if (db === null) return null;
  try {
    if (!db.objectStoreNames.contains(STORE)) return null;
    const value = await request(db.transaction(STORE, 'readonly').objectStore(STORE).get(KEY));
    return value === undefined ? null : readState(value);
  } finally {
    db.close();
  }
}

/** A keeper that keeps nothing (no IndexedDB: private windows in some browsers). */
export function memoryKeeper(): Keeper {
  let kept = emptyState();
  return {
    load: async () => structuredClone(kept),
    save: async (state) => void (kept = structuredClone(state)),
  };
}

/**
 * Removes the store's bytes from the database `indexedDbPersistence(name)` uses (everything in its
 * object store `sqljs`, whatever layout the bytes are kept in), so the next open starts empty.
 */
export async function forgetStore(name: string, factory: IDBFactory = indexedDB): Promise<void> {
  const r = factory.open(name, 1);
  r.onupgradeneeded = () => {
    if (!r.result.objectStoreNames.contains('sqljs')) r.result.createObjectStore('sqljs');
  };
  const db = await request(r);
  try {
    const tx = db.transaction('sqljs', 'readwrite', { durability: 'strict' });
    const done = new Promise<void>((resolve, reject) => {
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error ?? new Error('IndexedDB transaction failed'));
    });
    tx.objectStore('sqljs').clear();
    await done;
  } finally {
    db.close();
  }
}
