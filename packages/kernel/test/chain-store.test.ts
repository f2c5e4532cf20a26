import { describe, expect, it } from 'vitest';
import { createAction, receiptView, verifyChain } from '@ctrlrun/kernel';
import { setup } from './harness.js';

/** A sql.js store holding three chained receipts, and its driver for tampering. */
async function threeReceipts() {
  const h = await setup();
  for (const id of ['p1', 'p2', 'p3']) {
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 100 }, principal: { agent: 'refund-agent' } });
    await h.control.execute(action, async () => ({ refund: id }));
  }
  const driver = (h.store as unknown as { driver: { exec(sql: string): Promise<void> } }).driver;
  return { ...h, driver };
}

describe('a tampered receipts table read through a real store', () => {
  for (const [what, value] of [
    ['a string', "'two'"],
    ['a fraction', '1.5'],
    ['an integer beyond 2^53', '1152921504606846976'],
    ['an empty string', "''"],
  ] as const) {
    it(`a seq column holding ${what} is a named break, never a throw`, async () => {
      const { store, driver } = await threeReceipts();
      await driver.exec(`UPDATE receipts SET seq = ${value} WHERE seq = 2`);
      const rows = await store.receipts();
      expect(rows).toHaveLength(3);
      const report = verifyChain(rows, await store.chainHead());
      expect(report.ok).toBe(false);
      expect(report.breaks).toContainEqual({ name: 'content_altered', seq: null, detail: expect.stringContaining('not an integer') });
      expect(report.breaks.map((b) => b.name)).toEqual(['content_altered', 'missing', 'link_broken']);
    });
  }

  it('a chain head whose seq is not an integer is head_mismatch, never a throw', async () => {
    const { store, driver } = await threeReceipts();
    await driver.exec("UPDATE receipt_chain SET seq = 'x' WHERE id = 1");
    const report = verifyChain(await store.receipts(), await store.chainHead());
    expect(report.breaks).toEqual([{ name: 'head_mismatch', seq: null, detail: expect.stringContaining("the chain head's seq") }]);
  });

  it('an edited result or effect_key column is a column_mismatch finding beside the intact verdict, and the view shows the document', async () => {
    const { store, driver } = await threeReceipts();
    expect(verifyChain(await store.receipts(), await store.chainHead()).ok).toBe(true);
    await driver.exec("UPDATE receipts SET result = 'failed', effect_key = 'refund:other' WHERE seq = 2");
    const rows = await store.receipts();
    const report = verifyChain(rows, await store.chainHead());
    // The original's verdict: intact (it hashes the document only); ours shows the columns apart.
    expect(report.ok).toBe(true);
    expect(report.breaks).toEqual([]);
    expect(report.column_findings.map((b) => [b.name, b.seq])).toEqual([['column_mismatch', 2]]);
    expect(report.column_findings[0]?.detail).toMatch(
      /column effect_key is "refund:other" but the document's effect_key is "refund:p2"; column result is "failed" but the document's result is "committed"/,
    );
    const view = receiptView(rows[1]!);
    expect(view).toMatchObject({ result: 'committed', effect_key: 'refund:p2', mismatched: ['effect_key', 'result'] });
  });
});
