import { describe, expect, it } from 'vitest';
import { createTryIt, TRY_IT_POLICY_YAML, type RefundResult } from '@ctrlrun/kernel/try-it';
import { ApprovalMismatch, InvalidArgument, loadPolicy, verifyChain } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

/** The six steps of spec 04 §4, as the page tells the reader to click them. */
async function runSixSteps(step: ReturnType<typeof createTryIt>['step']) {
  const out: Record<string, RefundResult | Awaited<ReturnType<typeof step>>> = {};
  out['1'] = await step({ op: 'refund', payment_id: 'txn_1', amount: 50000 });
  const s2a = await step({ op: 'refund', payment_id: 'txn_2', amount: 200000 });
  out['2a'] = s2a;
  const requestId = (s2a as RefundResult).request_id!;
  out['2b'] = await step({ op: 'approve', request_id: requestId });
  out['2c'] = await step({ op: 'refund', payment_id: 'txn_2', amount: 500000, approval_id: requestId });
  out['2d'] = await step({ op: 'refund', payment_id: 'txn_2', amount: 200000, approval_id: requestId });
  out['3'] = await step({ op: 'refund', payment_id: 'txn_2', amount: 200000, approval_id: requestId });
  out['4'] = await step({ op: 'refund', payment_id: 'txn_3', amount: 2000000 });
  out['5a'] = await step({ op: 'refund', payment_id: 'txn_4', amount: 50000, lose_reply: true });
  out['5b'] = await step({ op: 'refund', payment_id: 'txn_4', amount: 50000 });
  out['6'] = await step({ op: 'refund', payment_id: 'txn_1', amount: 50000 });
  return { out, requestId };
}

describe('try-it', () => {
  it('test_the_playground_runs_the_sequence_the_page_tells_the_reader_to_try', async () => {
    const store = await createSqlJsStore();
    const tryIt = createTryIt({ store });
    const { out, requestId } = await runSixSteps(tryIt.step);
    const r = (k: string) => out[k] as RefundResult;
    expect([r('1').outcome, r('1').receipt?.['decision'], r('1').receipt?.['result'], r('1').remote_calls]).toEqual(['executed', 'allow', 'committed', 1]);
    expect([r('2a').outcome, r('2a').remote_calls, r('2a').receipt]).toEqual(['approval_required', 0, undefined]);
    expect(requestId).toMatch(/^apr_[0-9a-f]{32}$/);
    const granted = out['2b'] as { request_id: string; approval_id: string; action_hash: string; expires_at: string };
    expect(granted.request_id).toBe(requestId);
    expect(granted.approval_id).toBe(requestId);
    // The form of every view (UTC, milliseconds, Z), not the stored column's `+00:00`.
    expect(granted.expires_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(granted.action_hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect([r('2c').outcome, r('2c').reason, r('2c').receipt?.['result'], r('2c').remote_calls]).toEqual(['approval_mismatch', 'mismatch', 'blocked', 0]);
    expect([r('2d').outcome, r('2d').receipt?.['decision'], r('2d').receipt?.['approval_id'], r('2d').remote_calls]).toEqual([
      'executed',
      'approve',
      requestId,
      1,
    ]);
    expect([r('3').outcome, r('3').reason, r('3').remote_calls]).toEqual(['approval_mismatch', 'consumed', 1]);
    expect([r('4').outcome, r('4').error, r('4').request_id, r('4').receipt?.['result'], r('4').remote_calls]).toEqual([
      'denied',
      'ActionDenied',
      undefined,
      'denied',
      0,
    ]);
    expect([r('5a').outcome, r('5a').receipt?.['result'], r('5a').remote_calls]).toEqual(['reply_lost', 'ambiguous', 1]);
    expect([r('5b').outcome, r('5b').error, r('5b').receipt?.['result'], r('5b').remote_calls]).toEqual(['ambiguous_retry', 'AmbiguousEffect', 'blocked', 1]);
    expect([r('6').outcome, r('6').error, r('6').remote_calls]).toEqual(['duplicate', 'DuplicateEffect', 1]);
    const rows = await store.receipts();
    expect(verifyChain(rows, await store.chainHead()).ok).toBe(true);
  });

  it('a negative amount is denied in a fresh session and never reaches the remote', async () => {
    const tryIt = createTryIt({ store: await createSqlJsStore() });
    const res = await tryIt.step({ op: 'refund', payment_id: 'txn_neg', amount: -500 });
    expect([res.outcome, res.remote_calls]).toEqual(['denied', 0]);
  });

  it('the policy text it shows is the text it loads', async () => {
    const tryIt = createTryIt({ store: await createSqlJsStore() });
    expect(tryIt.policyYaml).toBe(TRY_IT_POLICY_YAML);
    expect(tryIt.policyHash).toBe(loadPolicy(TRY_IT_POLICY_YAML).hashFor({ environment: 'production', authority: null }));
  });

  it('bad input is a clear InvalidArgument and writes nothing', async () => {
    const store = await createSqlJsStore();
    const tryIt = createTryIt({ store });
    const bad: unknown[] = [
      { op: 'refund', payment_id: '', amount: 1 },
      { op: 'refund', payment_id: 'x', amount: 1.5 },
      { op: 'refund', payment_id: 'x', amount: '100' },
      { op: 'refund', payment_id: 'x', amount: 1e300 },
      { op: 'refund', payment_id: 'x', amount: 1, lose_reply: 'yes' },
      { op: 'nope' },
      null,
    ];
    for (const b of bad) await expect(tryIt.step(b as never)).rejects.toBeInstanceOf(InvalidArgument);
    await expect(tryIt.step({ op: 'approve', request_id: 'apr_missing' })).rejects.toBeInstanceOf(ApprovalMismatch);
    expect(await store.events()).toEqual([]);
    expect(await store.receipts()).toEqual([]);
  });
});
