import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createAction, InvalidArgument } from '@ctrlrun/kernel';
import { canonicalJson, orderedJson, type JsonObject } from '../src/canonical.js';
import { hashDocument } from '../src/hash.js';
import { buildReceipt, sealReceipt } from '../src/receipt.js';

const text = fc.string({ unit: 'grapheme', maxLength: 12 });
const orNull = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null });
// Keys that V8 lists in index order ('9' before '10') as well as any text; values that read alike
// in both texts and values that do not (a bigint, a nested object with such keys).
const key = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 6 }), fc.nat(20).map(String), fc.constantFrom('__proto__', '"', '\\'));
const args = fc.dictionary(
  key,
  fc.oneof(
    text,
    fc.maxSafeInteger(),
    fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }),
    fc.boolean(),
    fc.constant(null),
    fc.array(text, { maxLength: 3 }),
    fc.dictionary(key, text, { maxKeys: 3 }),
  ),
  { maxKeys: 5 },
);

const receipt = fc
  .record({
    args,
    agent: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }),
    error: orNull(text),
    approver: orNull(text),
    effectKey: orNull(text),
    controls: fc.array(text, { maxLength: 3 }),
    wouldHave: fc.option(fc.record({ decision: text, reason: text, blocked_reason: orNull(text) }), { nil: null }),
    seq: fc.integer({ min: 1, max: 1_000_000 }),
  })
  .map((r) => {
    const action = createAction({ name: 'stripe.refund', arguments: r.args, principal: { agent: r.agent } });
    const draft = buildReceipt(action, {
      receiptId: 'ctr_1',
      decision: 'allow',
      decisionReason: 'rule',
      approvalId: null,
      approver: r.approver,
      effectKey: r.effectKey,
      attempt: 1,
      result: 'committed',
      wouldHave: r.wouldHave,
      error: r.error,
      startedAt: '2026-01-01T00:00:00.000Z',
      finishedAt: '2026-01-01T00:00:00.001Z',
      policyHash: null,
      policyVersion: null,
      controls: r.controls,
    });
    return { document: draft.document, seq: r.seq };
  });

describe('sealReceipt', () => {
  it('property: the hash is that of the canonical form of the sealed document, and json keeps its key order', () => {
    fc.assert(
      fc.property(receipt, ({ document, seq }) => {
        const sealed = sealReceipt(document, seq, 'sha256:prev');
        expect(sealed.document['seq']).toBe(seq);
        expect(sealed.document['prev_hash']).toBe('sha256:prev');
        expect(Object.keys(sealed.document)).toEqual(Object.keys(document));
        expect(sealed.hash).toBe(hashDocument(sealed.document, 'receipt'));
        expect(sealed.json).toBe(orderedJson(sealed.document));
      }),
      { numRuns: 300 },
    );
  });

  it('property: a document with the v3 keys in any order keeps that order in json and hashes the same', () => {
    fc.assert(
      fc.property(
        receipt.chain((r) => fc.shuffledSubarray(Object.keys(r.document), { minLength: Object.keys(r.document).length }).map((order) => ({ ...r, order }))),
        ({ document, seq, order }) => {
          const shuffled: JsonObject = {};
          for (const k of order) Object.defineProperty(shuffled, k, { value: document[k], enumerable: true, writable: true, configurable: true });
          const sealed = sealReceipt(shuffled, seq, 'sha256:prev');
          expect(Object.keys(sealed.document)).toEqual(order);
          expect(sealed.json).toBe(orderedJson(sealed.document));
          expect(sealed.hash).toBe(sealReceipt(document, seq, 'sha256:prev').hash);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a document of another shape (a key more, a key less, __proto__) is hashed the general way', () => {
    const base = { ...fc.sample(receipt, 1)[0]!.document };
    const more: JsonObject = { ...base, extra: 1 };
    const less: JsonObject = { ...base };
    delete less['controls'];
    const proto: JsonObject = JSON.parse(`{"__proto__": 1}`) as JsonObject;
    Object.assign(proto, base);
    for (const doc of [more, less, proto]) {
      const sealed = sealReceipt(doc, 7, 'sha256:prev');
      expect(sealed.hash).toBe(hashDocument(sealed.document, 'receipt'));
      expect(Object.keys(sealed.document)).toContain('seq');
    }
    expect(Object.keys(sealReceipt(proto, 7, 'sha256:prev').document)).toContain('__proto__');
  });

  it('refuses what the canonical form refuses, naming the same path', () => {
    const base = fc.sample(receipt, 1)[0]!.document;
    for (const [key, bad] of [
      ['arguments', { amount: 1.5 }],
      ['error', 'lone \uD800'],
      ['controls', [1.25]],
    ] as const) {
      const doc = { ...base, [key]: bad } as JsonObject;
      const expected = (() => {
        try {
          canonicalJson({ ...doc, seq: 1, prev_hash: 'sha256:prev' }, 'receipt');
        } catch (e) {
          return (e as Error).message;
        }
        return null;
      })();
      expect(expected).not.toBeNull();
      expect(() => sealReceipt(doc, 1, 'sha256:prev')).toThrow(InvalidArgument);
      expect(() => sealReceipt(doc, 1, 'sha256:prev')).toThrow(expected!);
    }
  });
});
