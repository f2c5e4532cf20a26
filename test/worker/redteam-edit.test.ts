/**
 * Red team of edit-then-approve over HTTP: an edited receipt (hostile keys and values included)
 * is shown by the worker exactly as hashed, parses back, and the chain verifies through
 * `GET /v1/receipts/verify` beside receipts that have no `edit` key.
 */
import { describe, expect, it } from 'vitest';
import { canonicalJson, parseJson, parseReceipt, verifyChain, type JsonObject } from '@ctrlrun/kernel';
import { AGENT, harness, OPERATOR } from './harness.js';

describe('edited receipts through the worker, red team', () => {
  it('an edit holding __proto__, an invisible character and an integer beyond 2^53 runs once; the receipt view shows it as hashed; /verify and verifyChain pass beside a receipt without edit', async () => {
    const h = await harness();
    // A receipt without `edit` first (the original's shape).
    expect((await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: { x: 1 } })).status).toBe(200);
    const asked = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'e9', amount: 500000 } });
    expect(asked.status).toBe(202);
    const id = String(asked.json['requestId']);
    const editText =
      '{"edit":{"arguments":{"payment_id":"e9","amount":400000,"__proto__":{"admin":true},"memo":"a\\u202eb","ref":123456789012345678901234567890}}}';
    const granted = await h.app.request('http://worker.test/v1/approvals/' + id + '/grant', {
      method: 'POST',
      headers: { authorization: `Bearer ${OPERATOR}`, 'content-type': 'application/json' },
      body: editText,
    });
    expect(granted.status).toBe(200);
    const approvedArgs = ((parseJson(editText) as JsonObject)['edit'] as JsonObject)['arguments'] as JsonObject;
    const reply = parseJson(await granted.text()) as JsonObject;
    expect(canonicalJson((reply['edit'] as JsonObject)['approvedArguments'])).toBe(canonicalJson(approvedArgs));

    const run = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'e9', amount: 500000 }, approvalId: id });
    expect(run.status).toBe(200);
    const rows = await h.store.receipts();
    const last = rows.at(-1)!;
    const doc = parseReceipt(last.json!);
    expect(canonicalJson(doc.edit!.approved_arguments)).toBe(canonicalJson(approvedArgs));
    expect(canonicalJson(doc.arguments)).toBe(canonicalJson(approvedArgs));
    expect(rows.filter((r) => parseReceipt(r.json!).edit === undefined).length).toBeGreaterThan(0);

    const view = await h.app.request(`http://worker.test/v1/receipts/${last.receipt_id}`, { headers: { authorization: `Bearer ${OPERATOR}` } });
    expect(view.status).toBe(200);
    const text = await view.text();
    const shown = parseJson(text, { floats: 'allow' }) as JsonObject;
    expect(text).not.toContain('content_altered');
    const receipt = shown['receipt'] as JsonObject;
    expect(shown['intact']).toBe(true);
    expect(canonicalJson((receipt['edit'] as JsonObject)['approved_arguments'])).toBe(canonicalJson(approvedArgs));
    expect(text).toContain('"__proto__"');
    expect(text).toContain('123456789012345678901234567890');

    const verified = await h.call('GET', '/v1/receipts/verify', OPERATOR);
    expect(verified.status).toBe(200);
    expect(verified.json['ok']).toBe(true);
    expect(verifyChain(rows, await h.store.chainHead()).ok).toBe(true);
  });
});
