/**
 * The receipt template of the combined statements (store/combined.ts): the server splices `seq`
 * and `prev_hash` into two texts split around random markers, and must end with exactly the
 * stored JSON and the canonical text the kernel's own seal writes — for any document the kernel
 * can build, keys such as `seq` or `__proto__` inside the arguments included.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, createAction } from '@ctrlrun/kernel';
import { buildReceipt, sealReceipt, sha256Tagged } from '@ctrlrun/kernel/store';
import { receiptTemplate, splice } from '../src/store/combined.js';

const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.string(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.string(), fc.constantFrom('seq', 'prev_hash', '__proto__')), tie('value'), { maxKeys: 4 }),
  ),
})).value;

function receiptFor(args: Record<string, unknown>, receiptId: string) {
  const action = createAction({ name: 'stripe.refund', arguments: args, principal: { agent: 'agent-1' } });
  return buildReceipt(action, {
    receiptId,
    decision: 'allow',
    decisionReason: 'policy',
    approvalId: null,
    approver: null,
    effectKey: 'refund:x',
    attempt: 1,
    result: 'committed',
    error: null,
    startedAt: '2026-01-01T12:00:00.000Z',
    finishedAt: '2026-01-01T12:00:01.000Z',
    policyHash: null,
    policyVersion: null,
    controls: [],
  });
}

describe('receiptTemplate + splice', () => {
  it("property: the spliced texts are the seal's stored JSON and canonical text, for any arguments, seq and hash", () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.oneof(fc.string(), fc.constantFrom('seq', 'prev_hash', '__proto__')), jsonValue, { maxKeys: 5 }),
        fc.string(),
        fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
        fc.stringMatching(/^[0-9a-f]{64}$/),
        (args, receiptId, seq, hex) => {
          let draft;
          try {
            draft = receiptFor(args, receiptId === '' ? 'r' : receiptId);
          } catch {
            return; // arguments the kernel refuses never reach a store
          }
          const template = receiptTemplate(draft.document);
          expect(template).not.toBeNull();
          const prev = `sha256:${hex}`;
          const sealed = sealReceipt(draft.document, seq, prev);
          expect(splice(template!.json, seq, prev)).toBe(sealed.json);
          const canonical = splice(template!.canonical, seq, prev);
          expect(canonical).toBe(canonicalJson(sealed.document));
          expect(sha256Tagged(new TextEncoder().encode(canonical))).toBe(sealed.hash);
        },
      ),
      { numRuns: 300 },
    );
  });
});
