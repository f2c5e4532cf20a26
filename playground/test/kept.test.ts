import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { indexedDbPersistence } from '@ctrlrun/store-sqljs';
import { emptyState, readState, shelfKeeper } from '../src/kept.js';

describe('the kept page state', () => {
  it('counts a payment id named __proto__ or constructor like any other, fresh or read back', () => {
    const fresh = emptyState();
    for (const id of ['__proto__', 'constructor', 'txn_1']) {
      expect(fresh.calls[id] ?? 0).toBe(0);
      fresh.calls[id] = (fresh.calls[id] ?? 0) + 1;
    }
    expect(Object.keys(fresh.calls).sort()).toEqual(['__proto__', 'constructor', 'txn_1']);
    const kept = readState(JSON.parse('{"calls":{"__proto__":2,"constructor":3,"txn_1":1}}'));
    expect(Object.keys(kept.calls).sort()).toEqual(['__proto__', 'constructor', 'txn_1']);
    expect([kept.calls['__proto__'], kept.calls['constructor'], kept.calls['txn_1']]).toEqual([2, 3, 1]);
  });

  it('kept beside the store and read back: the counts (__proto__ too), the ids and the log, as they were when saved', async () => {
    const persistence = indexedDbPersistence('page-shelf', { indexedDB: new IDBFactory() });
    const keeper = shelfKeeper(persistence);
    expect(await keeper.load()).toEqual(emptyState());
    const state = emptyState();
    state.calls['__proto__'] = 2;
    state.calls['txn_1'] = 1;
    state.requestId = 'apr_1';
    state.log.push({ kind: 'note', text: 'a "quoted"\u0007 note' });
    const saved = keeper.save(state);
    state.calls['txn_1'] = 9; // after the save: not what was kept
    await saved;
    const back = await shelfKeeper(persistence).load();
    expect(Object.keys(back.calls).sort()).toEqual(['__proto__', 'txn_1']);
    expect([back.calls['__proto__'], back.calls['txn_1'], back.requestId, back.log]).toEqual([
      2,
      1,
      'apr_1',
      [{ kind: 'note', text: 'a "quoted"\u0007 note' }],
    ]);
  });
});
