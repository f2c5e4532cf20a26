/**
 * Browser-only cases, run by the Chromium harness: the store conformance suite on sql.js
 * persisted to real IndexedDB (reopen = a new store on the same database, as a reload does), and
 * the try-it six steps timed in the tab, in memory and on IndexedDB.
 */
import { describe, expect, it } from 'vitest';
import { createTryIt, type RefundResult } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore, indexedDbPersistence, type SqlJsStore } from '@ctrlrun/store-sqljs';
import { describeStore } from '../../conformance/store.case.js';

const names = new WeakMap<object, string>();
let n = 0;
const fresh = (): string => `ctrlrun-harness-${Date.now()}-${n++}`;

describeStore({
  name: 'sql.js on IndexedDB',
  dialect: 'sqlite',
  open: async (clock) => {
    const name = fresh();
    const store = await createSqlJsStore({ clock, persistence: indexedDbPersistence(name) });
    names.set(store, name);
    return store;
  },
  reopen: async (old, clock) => {
    const name = names.get(old)!;
    const store = await createSqlJsStore({ clock, persistence: indexedDbPersistence(name) });
    names.set(store, name);
    return store;
  },
});

/** Timings the harness reports back to the test (ms). */
export const measurements: Record<string, number> = {};

async function sixSteps(store: SqlJsStore): Promise<RefundResult[]> {
  const { step } = createTryIt({ store });
  const out: RefundResult[] = [];
  out.push(await step({ op: 'refund', payment_id: 'txn_1', amount: 50000 }));
  const asked = await step({ op: 'refund', payment_id: 'txn_2', amount: 200000 });
  out.push(asked);
  await step({ op: 'approve', request_id: asked.request_id! });
  out.push(await step({ op: 'refund', payment_id: 'txn_2', amount: 500000, approval_id: asked.request_id! }));
  out.push(await step({ op: 'refund', payment_id: 'txn_2', amount: 200000, approval_id: asked.request_id! }));
  out.push(await step({ op: 'refund', payment_id: 'txn_2', amount: 200000, approval_id: asked.request_id! }));
  out.push(await step({ op: 'refund', payment_id: 'txn_3', amount: 2000000 }));
  out.push(await step({ op: 'refund', payment_id: 'txn_4', amount: 50000, lose_reply: true }));
  out.push(await step({ op: 'refund', payment_id: 'txn_4', amount: 50000 }));
  out.push(await step({ op: 'refund', payment_id: 'txn_1', amount: 50000 }));
  return out;
}

const EXPECTED = [
  'executed',
  'approval_required',
  'approval_mismatch',
  'executed',
  'approval_mismatch',
  'denied',
  'reply_lost',
  'ambiguous_retry',
  'duplicate',
];

describe('try-it in the tab, timed', () => {
  it('the six steps on an in-memory store', async () => {
    const store = await createSqlJsStore();
    const t0 = performance.now();
    const out = await sixSteps(store);
    measurements['sixStepsInMemoryMs'] = performance.now() - t0;
    expect(out.map((r) => r.outcome)).toEqual(EXPECTED);
    await store.close();
  });

  it('the six steps on IndexedDB, and a new store on the same database sees them', async () => {
    const name = fresh();
    const store = await createSqlJsStore({ persistence: indexedDbPersistence(name) });
    const t0 = performance.now();
    const out = await sixSteps(store);
    measurements['sixStepsIndexedDbMs'] = performance.now() - t0;
    expect(out.map((r) => r.outcome)).toEqual(EXPECTED);
    const receipts = (await store.receipts()).length;
    await store.close();
    const again = await createSqlJsStore({ persistence: indexedDbPersistence(name) });
    expect((await again.receipts()).length).toBe(receipts);
    const retry = await createTryIt({ store: again }).step({ op: 'refund', payment_id: 'txn_1', amount: 50000 });
    expect(retry.outcome).toBe('duplicate');
    await again.close();
  });
});
