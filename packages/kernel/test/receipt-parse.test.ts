// T11: a stored receipt reads back into a typed ReceiptDocument — every field the spec lists, of
// its type — and anything else is an InvalidArgument naming the field.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { callbackSink, createAction, InvalidArgument, parseReceipt, type ReceiptDocument, type StoredReceipt } from '@ctrlrun/kernel';
import { RECEIPT_KEYS } from '@ctrlrun/kernel/store';
import { runDemo } from '@ctrlrun/kernel/demo';
import { buildReceipt, sealReceipt, GENESIS_HASH } from '@ctrlrun/kernel/store';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

function sealed(over: Partial<Parameters<typeof buildReceipt>[1]> = {}, principal: object = { agent: 'a', user: 'u' }): string {
  const action = createAction({
    name: 'stripe.refund',
    arguments: { payment_id: 'txn_1', amount: 5 },
    principal: principal as { agent: string },
    resource: 'payment:txn_1',
  });
  const draft = buildReceipt(action, {
    receiptId: 'ctr_1',
    decision: 'allow',
    decisionReason: 'rule[0]',
    approvalId: null,
    approver: null,
    effectKey: 'refund:txn_1',
    attempt: 1,
    result: 'committed',
    error: null,
    startedAt: '2026-01-01T12:00:00.000Z',
    finishedAt: '2026-01-01T12:00:01.000Z',
    policyHash: `sha256:${'a'.repeat(64)}`,
    policyVersion: '1',
    controls: ['SOC2'],
    ...over,
  });
  return sealReceipt(draft.document, 1, GENESIS_HASH).json;
}

describe('T11 a typed receipt parse-back', () => {
  it('test_T11_every_demo_receipt_reads_back_as_a_typed_document', async () => {
    const store = await createSqlJsStore();
    const receipts: StoredReceipt[] = [];
    await runDemo({ store, write: () => undefined, sinks: [callbackSink({ onReceipt: (r) => void receipts.push(r) })] });
    expect(receipts.length).toBeGreaterThan(5);
    for (const r of receipts) {
      const doc: ReceiptDocument = parseReceipt(r.json);
      expect(doc).toEqual(r.document);
      expect(Object.keys(doc)).toEqual(RECEIPT_KEYS);
      expect(doc.seq).toBe(r.seq);
      expect(typeof doc.principal.agent).toBe('string');
    }
    // The stored rows too.
    for (const row of await store.receipts()) expect(parseReceipt(row.json!).receipt_id).toBe(row.receipt_id);
  });

  it('property: whatever buildReceipt writes, parseReceipt reads back unchanged', () => {
    fc.assert(
      fc.property(
        fc.record({
          decision: fc.constantFrom('allow', 'approve', 'deny'),
          result: fc.constantFrom('committed', 'failed', 'ambiguous', 'denied', 'blocked', 'observed' as const),
          approvalId: fc.option(fc.string(), { nil: null }),
          approver: fc.option(fc.string(), { nil: null }),
          effectKey: fc.option(fc.string(), { nil: null }),
          attempt: fc.nat(1000),
          error: fc.option(fc.string(), { nil: null }),
          controls: fc.array(fc.string(), { maxLength: 3 }),
          wouldHave: fc.option(fc.record({ decision: fc.string(), reason: fc.string(), blocked_reason: fc.option(fc.string(), { nil: null }) }), { nil: null }),
        }),
        fc.option(fc.dictionary(fc.string({ minLength: 1 }), fc.oneof(fc.string(), fc.integer(), fc.boolean()), { maxKeys: 3 }), { nil: null }),
        (f, claims) => {
          const json = sealed(f, { agent: 'a', user: null, claims, issuer: claims ? 'idp' : null });
          expect(parseReceipt(json)).toEqual(JSON.parse(json));
        },
      ),
    );
  });

  it('a missing, extra or mistyped field is an InvalidArgument naming it; so is a schema that is not a label', () => {
    const base = JSON.parse(sealed()) as Record<string, unknown>;
    const refused = (doc: unknown, message: RegExp) => {
      expect(() => parseReceipt(JSON.stringify(doc))).toThrow(InvalidArgument);
      expect(() => parseReceipt(JSON.stringify(doc))).toThrow(message);
    };
    for (const k of RECEIPT_KEYS) {
      const { [k]: _gone, ...rest } = base;
      refused(rest, new RegExp(`missing: ${k}`));
    }
    refused({ ...base, schema: 2 }, /schema must be a string/);
    // An older label holds fewer keys: v7's are unknown to it (spec 05 §2.1; receipt-v7.test.ts reads each label).
    refused({ ...base, schema: 'ctrlrun.receipt/v3' }, /unknown fields for "ctrlrun\.receipt\/v3": "precondition_at_request"/);
    refused({ ...base, attempt: '1' }, /attempt/);
    refused({ ...base, attempt: 1.5 }, /strict JSON|attempt/);
    refused({ ...base, seq: 0 }, /seq/);
    refused({ ...base, result: 'allowed' }, /result/);
    refused({ ...base, execution: 'done' }, /execution/);
    refused({ ...base, controls: [1] }, /controls/);
    refused({ ...base, principal: { agent: 'a' } }, /principal/);
    refused({ ...base, principal: { agent: 7, user: null, claims: null, issuer: null, expires_at: null } }, /principal\.agent/);
    refused({ ...base, would_have: { decision: 'deny' } }, /would_have/);
    refused({ ...base, arguments: [] }, /arguments/);
    refused({ ...base, extra: 1 }, /unknown field for "ctrlrun\.receipt\/v7": "extra"/);
    // A __proto__ key is data, and not a receipt field.
    expect(() => parseReceipt(sealed().replace('{"schema"', '{"__proto__":{"x":1},"schema"'))).toThrow(/unknown field for "ctrlrun\.receipt\/v7": "__proto__"/);
    expect(() => parseReceipt('{"schema": ')).toThrow(InvalidArgument);
    expect(() => parseReceipt('[]')).toThrow(/must be an object/);
    expect(() => parseReceipt(42 as never)).toThrow(InvalidArgument);
  });
});
