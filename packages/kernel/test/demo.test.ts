import { describe, expect, it } from 'vitest';
import { callbackSink, verifyChain, type StoredReceipt } from '@ctrlrun/kernel';
import { runDemo } from '@ctrlrun/kernel/demo';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { SPEC_RECEIPT_KEYS } from './receipt.fixtures.js';

async function demo() {
  const store = await createSqlJsStore();
  const lines: string[] = [];
  const receipts: StoredReceipt[] = [];
  const report = await runDemo({ store, write: (l) => void lines.push(l), sinks: [callbackSink({ onReceipt: (r) => void receipts.push(r) })] });
  return { store, lines, receipts, report };
}

describe('the demo', () => {
  it('every scenario that runs is refused, and the run says so', async () => {
    const { report, lines } = await demo();
    expect(report.failures).toEqual([]);
    expect(report.ok).toBe(true);
    expect(lines.filter((l) => l.startsWith('   ✗ BLOCKED — ')).length).toBe(5 - report.skipped.length);
    for (const token of ['(mismatch)', '(in_progress)', 'consumed']) expect(lines.join('\n')).toContain(token);
  });

  it('test_T3_the_fake_remote_is_called_exactly_once', async () => {
    const { lines, store } = await demo();
    expect(lines).toContain('   remote refund calls: 1');
    for (const key of ['refund:txn_1', 'refund:txn_123', 'refund:txn_4']) {
      const started = (await store.events()).filter((e) => e.type === 'EXECUTION_STARTED' && e.effectKey === key);
      expect(started, key).toHaveLength(1);
    }
  });

  it('test_T11_every_demo_receipt_carries_every_field_in_the_spec', async () => {
    const { receipts, report, store } = await demo();
    expect(receipts).toHaveLength(report.receipts);
    const results = receipts.map((r) => r.document['result']);
    // 1: ambiguous + blocked; 2: blocked; 3: committed + blocked; 4: committed + blocked; 5: denied.
    expect(results.slice(0, 7)).toEqual(['ambiguous', 'blocked', 'blocked', 'blocked', 'committed', 'committed', 'blocked']);
    for (const r of receipts) {
      const d = r.document;
      expect(Object.keys(d)).toEqual(SPEC_RECEIPT_KEYS);
      expect(d['schema']).toBe('ctrlrun.receipt/v7');
      expect(d['receipt_id']).toMatch(/^ctr_[0-9a-f]{32}$/);
      expect(d['action_id']).toMatch(/^act_[0-9a-f]{32}$/);
      expect(d['action_hash']).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(Object.keys(d['principal'] as object)).toEqual(['agent', 'user', 'claims', 'issuer', 'expires_at']);
      expect(d['started_at']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(d['finished_at']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(d['policy_hash']).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(typeof d['attempt']).toBe('number');
      expect(Array.isArray(d['controls'])).toBe(true);
      expect(d['seq']).toBe(r.seq);
      expect(d['prev_hash']).toBe(r.prevHash);
      // v4–v7 (spec 05 §2.1): what this build does not do is null or [], never absent.
      expect(d).toMatchObject({ precondition_at_request: null, precondition_at_recheck: null, approvers: [], authority_grant_id: null });
      expect(d).toMatchObject({ task: null, scope_hash: null, budget_charges: [], hop: null });
      expect((d['principal'] as { claims: unknown }).claims).toEqual({});
    }
    expect(verifyChain(await store.receipts(), await store.chainHead()).ok).toBe(true);
  });
});
