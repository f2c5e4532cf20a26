import { describe, expect, it } from 'vitest';
import { emptyState, readState } from '../src/kept.js';

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
});
