import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Grant, InvalidArgument, stats, type JsonObject, type StateStore } from '@ctrlrun/kernel';
import { sealReceipt } from '@ctrlrun/kernel/store';

/**
 * `out[k] = v` into a `{}` literal turns `__proto__` into a prototype change and drops the key.
 * Each copy the kernel makes of caller- or agent-supplied keys must keep every key as data.
 */
const KEY = fc.oneof(fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString'), fc.string({ maxLength: 6 }));

describe('object copies keep __proto__, constructor and prototype as keys', () => {
  it('sealReceipt keeps every key of the document (property)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(KEY, fc.integer()), { selector: ([k]) => k, maxLength: 6 }), (entries) => {
        const document = Object.fromEntries(entries) as JsonObject;
        const sealed = sealReceipt(document, 3, 'sha256:prev');
        const expected = [...Object.keys(document)];
        for (const k of ['seq', 'prev_hash']) if (!expected.includes(k)) expected.push(k);
        expect(Object.keys(sealed.document)).toEqual(expected);
        expect(Object.keys(JSON.parse(sealed.json) as object)).toEqual(expected);
      }),
      { numRuns: 200 },
    );
  });

  it('a grant constraint named __proto__ is refused, never silently dropped', () => {
    const input = JSON.parse('{"subject":{"agent":"a"},"actions":["x"],"constraints":{"__proto__":5}}') as ConstructorParameters<typeof Grant>[0];
    expect(() => new Grant(input)).toThrow(InvalidArgument);
    expect(() => new Grant(input)).toThrow(/condition '__proto__'/);
  });

  it('a top-level __proto__ in a grant input is an unknown key', () => {
    const input = JSON.parse('{"subject":{"agent":"a"},"actions":["x"],"__proto__":{"delegable":true}}') as ConstructorParameters<typeof Grant>[0];
    expect(() => new Grant(input)).toThrow(/unknown key\(s\) '__proto__'/);
  });

  it('stats counts a reason named __proto__ under that key', async () => {
    const receipt = (reason: string) => ({
      json: JSON.stringify({ finished_at: '2026-01-01T00:00:00.000Z', result: 'denied', decision_reason: reason }),
    });
    const store = {
      receipts: async () => [receipt('__proto__'), receipt('__proto__'), receipt('constructor')],
      listApprovals: async () => [],
    } as unknown as StateStore;
    const s = await stats(store, { mode: 'enforce' });
    expect(Object.keys(s.denied_by_reason)).toEqual(['__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(s.denied_by_reason, '__proto__')?.value).toBe(2);
    expect(Object.getOwnPropertyDescriptor(s.enforced_denied_by_reason, '__proto__')?.value).toBe(2);
  });
});
