// The try-it module's remote-call counter: what the page keeps across a reload.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidArgument } from '@ctrlrun/kernel';
import { createTryIt, memoryRemoteCalls, TRY_IT_OUTCOMES, type RemoteCallCounter } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

describe('try-it remote calls', () => {
  it('a counter handed in carries the counts of an earlier session into the next one', async () => {
    const persistence = (() => {
      let bytes: Uint8Array | null = null;
      return { load: async () => bytes, save: async (b: Uint8Array) => void (bytes = b) };
    })();
    const kept = new Map<string, number>();
    const counter = (): RemoteCallCounter => {
      const inner = memoryRemoteCalls(kept);
      return { get: inner.get, record: async (id) => { await inner.record(id); kept.set(id, inner.get(id)); } };
    };
    const first = createTryIt({ store: await createSqlJsStore({ persistence }), remoteCalls: counter() });
    expect((await first.step({ op: 'refund', payment_id: 'txn_1', amount: 50000 })).remote_calls).toBe(1);
    // A reload: a new store on the same bytes, a new module on the same counts.
    const second = createTryIt({ store: await createSqlJsStore({ persistence }), remoteCalls: counter() });
    const again = await second.step({ op: 'refund', payment_id: 'txn_1', amount: 50000 });
    expect([again.outcome, again.remote_calls]).toEqual(['duplicate', 1]);
  });

  it('the remote is counted before it answers, so a lost reply still counts', async () => {
    const seen: string[] = [];
    const inner = memoryRemoteCalls();
    const tryIt = createTryIt({ store: await createSqlJsStore(), remoteCalls: { get: inner.get, record: (id) => { seen.push(id); return inner.record(id); } } });
    const lost = await tryIt.step({ op: 'refund', payment_id: 'txn_4', amount: 50000, lose_reply: true });
    expect([lost.outcome, lost.remote_calls, seen]).toEqual(['reply_lost', 1, ['txn_4']]);
  });

  it('refuses a counter without get and record, and counts that are not non-negative integers', async () => {
    const store = await createSqlJsStore();
    expect(() => createTryIt({ store, remoteCalls: {} as RemoteCallCounter })).toThrow(InvalidArgument);
    expect(() => memoryRemoteCalls([['txn_1', -1]])).toThrow(InvalidArgument);
    expect(() => memoryRemoteCalls([['txn_1', 1.5]])).toThrow(InvalidArgument);
  });

  it('memoryRemoteCalls starts from any valid counts and adds one per call', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ minLength: 1 }), fc.nat({ max: 1000 })), fc.string({ minLength: 1 }), (counts, id) => {
        const c = memoryRemoteCalls(Object.entries(counts));
        const before = Object.prototype.hasOwnProperty.call(counts, id) ? counts[id]! : 0;
        expect(c.get(id)).toBe(before);
        c.record(id);
        expect(c.get(id)).toBe(before + 1);
      }),
    );
  });

  it('TRY_IT_OUTCOMES lists the seven outcomes of spec 04 §4', () => {
    expect([...TRY_IT_OUTCOMES].sort()).toEqual(['ambiguous_retry', 'approval_mismatch', 'approval_required', 'denied', 'duplicate', 'executed', 'reply_lost']);
  });
});
