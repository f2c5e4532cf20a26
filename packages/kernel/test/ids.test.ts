import { randomIds } from '@ctrlrun/kernel';
import { describe, expect, it, vi } from 'vitest';

describe('randomIds', () => {
  it('draws ids from a pooled 4 KiB buffer: one getRandomValues call per 256 ids, every id distinct', () => {
    const spy = vi.spyOn(globalThis.crypto, 'getRandomValues');
    try {
      const ids = Array.from({ length: 1024 }, () => randomIds('act'));
      expect(new Set(ids).size).toBe(1024);
      for (const id of ids) expect(id).toMatch(/^act_[0-9a-f]{32}$/);
      // The pool may hold up to 255 ids from before the spy; 1,024 more need at most 4 + 1 refills.
      expect(spy.mock.calls.length).toBeLessThanOrEqual(5);
      expect(spy.mock.calls.length).toBeGreaterThanOrEqual(3);
      for (const [buffer] of spy.mock.calls) expect((buffer as Uint8Array).byteLength).toBe(4096);
    } finally {
      spy.mockRestore();
    }
  });
});
