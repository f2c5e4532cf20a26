/**
 * Receipt views read the hashed document, never the columns beside it (issue 10, finding 5),
 * and a damaged row (a `seq` that is not an integer, `json` that is not JSON) is a named break in
 * the answer of every receipt route, never a 500 (finding 8).
 */
import { describe, expect, it } from 'vitest';
import { AGENT, harness, OPERATOR, type Harness } from './harness.js';

type Json = Record<string, unknown>;
const refund = (payment_id: string, amount: number) => ({ name: 'stripe.refund', arguments: { payment_id, amount } });

async function sql(h: Harness, text: string): Promise<void> {
  const driver = (h.store as unknown as { driver: { query(sql: string, params: unknown[]): Promise<unknown> } }).driver;
  await driver.query(text, []);
}

/** Three receipts: committed (seq 1), denied (seq 2), committed (seq 3). */
async function three(): Promise<{ h: Harness; ids: string[] }> {
  const h = await harness();
  await h.call('POST', '/v1/actions', AGENT, refund('v1', 1));
  await h.call('POST', '/v1/actions', AGENT, refund('v2', 5_000_000));
  await h.call('POST', '/v1/actions', AGENT, refund('v3', 1));
  const ids = (await h.store.receipts()).map((r) => r.receipt_id);
  return { h, ids };
}

describe('receipt views come from the hashed document', () => {
  it("an edited result, effect_key, action_id or ts column is never served as the receipt's", async () => {
    const { h, ids } = await three();
    await sql(
      h,
      `UPDATE receipts SET result = 'committed', effect_key = 'refund:forged', action_id = 'act_forged', ts = '2000-01-01T00:00:00+00:00' WHERE seq = 2`,
    );
    const list = await h.call('GET', '/v1/receipts', OPERATOR);
    expect(list.status).toBe(200);
    const shown = (list.json['receipts'] as Json[])[1]!;
    const document = shown['receipt'] as Json;
    expect(shown).toMatchObject({
      seq: 2,
      receiptId: ids[1],
      result: 'denied',
      effectKey: 'refund:v2',
      actionId: document['action_id'],
      ts: document['finished_at'],
    });
    // The forged values appear only where the break names them, never as a served field.
    const served = (v: Json) => JSON.stringify({ ...v, breaks: undefined });
    expect(served(shown)).not.toContain('forged');
    expect(shown).toMatchObject({ intact: false, breaks: [expect.objectContaining({ name: 'column_mismatch', seq: 2 })] });
    const one = await h.call('GET', `/v1/receipts/${ids[1]}`, OPERATOR);
    expect(one.json).toMatchObject({ result: 'denied', effectKey: 'refund:v2' });
    expect(served(one.json)).not.toContain('forged');
  });

  it('an altered document is shown as altered: intact false and a content_altered break', async () => {
    const { h, ids } = await three();
    await sql(h, `UPDATE receipts SET json = replace(json, '"amount":1', '"amount":9') WHERE seq = 3`);
    const one = await h.call('GET', `/v1/receipts/${ids[2]}`, OPERATOR);
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({ seq: 3, intact: false, breaks: [expect.objectContaining({ name: 'content_altered', seq: 3 })] });
    const list = await h.call('GET', '/v1/receipts', OPERATOR);
    expect((list.json['receipts'] as Json[]).map((r) => r['intact'])).toEqual([true, true, false]);
  });
});

describe('a damaged receipt row is a named break, never a 500', () => {
  for (const [what, value] of [
    ['a string', `'abc'`],
    ['a fraction', '2.5'],
    ['a blob', `x'00ff'`],
  ] as const) {
    it(`a seq column holding ${what}`, async () => {
      const { h, ids } = await three();
      await sql(h, `UPDATE receipts SET seq = ${value} WHERE seq = 2`);
      const list = await h.call('GET', '/v1/receipts', OPERATOR);
      expect(list.status, JSON.stringify(list.json)).toBe(200);
      const damaged = (list.json['receipts'] as Json[]).find((r) => r['receiptId'] === ids[1])!;
      expect(damaged).toMatchObject({
        intact: false,
        breaks: [expect.objectContaining({ name: 'content_altered', seq: null, detail: expect.stringContaining('not an integer') })],
      });
      const one = await h.call('GET', `/v1/receipts/${ids[1]}`, OPERATOR);
      expect(one.status).toBe(200);
      expect(one.json).toMatchObject({ intact: false, breaks: [expect.objectContaining({ name: 'content_altered' })] });
      const verify = await h.call('GET', '/v1/receipts/verify', OPERATOR);
      expect(verify.status).toBe(200);
      expect(verify.json).toMatchObject({ ok: false, breaks: expect.arrayContaining([expect.objectContaining({ name: 'content_altered', seq: null })]) });
    });
  }

  it('a json column that is not JSON: listed with receipt null and the columns that locate it', async () => {
    const { h, ids } = await three();
    await sql(h, `UPDATE receipts SET json = '{broken' WHERE seq = 1`);
    const list = await h.call('GET', '/v1/receipts', OPERATOR);
    expect(list.status).toBe(200);
    expect((list.json['receipts'] as Json[])[0]).toMatchObject({
      receipt: null,
      result: null,
      intact: false,
      unverifiedColumns: { receiptId: ids[0], seq: '1' },
      breaks: [expect.objectContaining({ name: 'content_altered', seq: 1 })],
    });
    expect((await h.call('GET', `/v1/receipts/${ids[0]}`, OPERATOR)).json).toMatchObject({ receipt: null, intact: false });
    const verify = await h.call('GET', '/v1/receipts/verify', OPERATOR);
    expect(verify.status).toBe(200);
    expect(verify.json).toMatchObject({ ok: false });
  });

  it('paging through damaged seqs always ends, and says where it stopped', async () => {
    const { h } = await three();
    await sql(h, `UPDATE receipts SET seq = 'zz' || seq WHERE seq >= 2`);
    const seen: unknown[] = [];
    let after = 0;
    for (let pages = 0; ; pages++) {
      expect(pages).toBeLessThan(10);
      const r = await h.call('GET', `/v1/receipts?after=${after}&limit=1`, OPERATOR);
      expect(r.status).toBe(200);
      seen.push(...(r.json['receipts'] as Json[]).map((x) => x['seq']));
      if (r.json['next'] === null) {
        if (seen.length < 3)
          expect(r.json['breaks']).toEqual([expect.objectContaining({ name: 'content_altered', detail: expect.stringContaining('no integer seq') })]);
        break;
      }
      after = r.json['next'] as number;
    }
    expect(seen[0]).toBe(1);
  });
});
