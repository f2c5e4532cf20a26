/**
 * The operator's Resolve control in try-it: an AMBIGUOUS effect (step 5) moves on only by a
 * human's `resolve` step — committed makes the retry a duplicate, failed lets it run again —
 * through the kernel's `resolveEffect`, attributed to the operator; nothing else resolves.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createTryIt, TRY_IT_OPERATOR } from '@ctrlrun/kernel/try-it';
import { InvalidArgument, CTRLRunError, verifyChain } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

async function ambiguous() {
  const store = await createSqlJsStore();
  const tryIt = createTryIt({ store });
  const lost = await tryIt.step({ op: 'refund', payment_id: 'txn_4', amount: 50000, lose_reply: true });
  expect(lost.outcome).toBe('reply_lost');
  return { store, tryIt };
}

describe('try-it: the operator resolves an AMBIGUOUS effect', () => {
  it('committed: the effect is committed, by the operator, and the retry is a duplicate that never calls the remote', async () => {
    const { store, tryIt } = await ambiguous();
    const res = await tryIt.step({ op: 'resolve', effect_key: 'refund:txn_4', state: 'committed' });
    expect(res).toEqual({ outcome: 'resolved', effect_key: 'refund:txn_4', state: 'committed', resolved_by: TRY_IT_OPERATOR });
    expect((await store.getEffect('refund:txn_4'))?.resolvedBy).toBe(TRY_IT_OPERATOR);
    const retry = await tryIt.step({ op: 'refund', payment_id: 'txn_4', amount: 50000 });
    expect([retry.outcome, retry.reason, retry.remote_calls]).toEqual(['duplicate', 'committed', 1]);
    const events = (await store.events()).filter((e) => e.type === 'EFFECT_RESOLVED');
    expect(events).toHaveLength(1);
    expect(verifyChain(await store.receipts(), await store.chainHead()).ok).toBe(true);
  });

  it('failed: the retry runs again (attempt 2) and the remote is called a second time', async () => {
    const { tryIt } = await ambiguous();
    expect((await tryIt.step({ op: 'resolve', effect_key: 'refund:txn_4', state: 'failed' })).state).toBe('failed');
    const retry = await tryIt.step({ op: 'refund', payment_id: 'txn_4', amount: 50000 });
    expect([retry.outcome, retry.remote_calls, retry.receipt?.['attempt']]).toEqual(['executed', 2, 2]);
  });

  it("only an AMBIGUOUS effect resolves; resolving twice or an unknown or committed effect is the kernel's error, nothing written", async () => {
    const { store, tryIt } = await ambiguous();
    await tryIt.step({ op: 'refund', payment_id: 'txn_1', amount: 50000 });
    const before = (await store.events()).length;
    for (const key of ['refund:txn_1', 'refund:nope']) {
      const err = await tryIt.step({ op: 'resolve', effect_key: key, state: 'failed' }).catch((e: unknown) => e);
      expect(err, key).toBeInstanceOf(CTRLRunError);
    }
    expect((await store.events()).length).toBe(before);
    await tryIt.step({ op: 'resolve', effect_key: 'refund:txn_4', state: 'committed' });
    await expect(tryIt.step({ op: 'resolve', effect_key: 'refund:txn_4', state: 'failed' })).rejects.toBeInstanceOf(CTRLRunError);
    expect((await store.getEffect('refund:txn_4'))?.state).toBe('committed');
  });

  it('bad resolve requests are InvalidArgument and write nothing (any state but committed/failed, any key that is not a string)', async () => {
    const { store, tryIt } = await ambiguous();
    const before = (await store.events()).length;
    await fc.assert(
      fc.asyncProperty(
        fc.anything().filter((s) => s !== 'committed' && s !== 'failed'),
        async (state) => {
          await expect(tryIt.step({ op: 'resolve', effect_key: 'refund:txn_4', state } as never)).rejects.toBeInstanceOf(InvalidArgument);
        },
      ),
      { numRuns: 60 },
    );
    for (const [i, key] of ['', 42, null, { __proto__: null }, 'x'.repeat(301)].entries()) {
      await expect(tryIt.step({ op: 'resolve', effect_key: key, state: 'failed' } as never), `bad key #${i}`).rejects.toBeInstanceOf(InvalidArgument);
    }
    expect((await store.events()).length).toBe(before);
    expect((await store.getEffect('refund:txn_4'))?.state).toBe('ambiguous');
  });
});
