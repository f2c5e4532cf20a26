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
      return {
        get: inner.get,
        record: async (id) => {
          await inner.record(id);
          kept.set(id, inner.get(id));
        },
      };
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
    const tryIt = createTryIt({
      store: await createSqlJsStore(),
      remoteCalls: {
        get: inner.get,
        record: (id) => {
          seen.push(id);
          return inner.record(id);
        },
      },
    });
    const lost = await tryIt.step({ op: 'refund', payment_id: 'txn_4', amount: 50000, lose_reply: true });
    expect([lost.outcome, lost.remote_calls, seen]).toEqual(['reply_lost', 1, ['txn_4']]);
  });

  it('on a persisted store, a step saves where it matters: the reservation before the remote is called, the rest once the step is over', async () => {
    let saved: Uint8Array | null = null;
    let saves = 0;
    const store = await createSqlJsStore({ persistence: { load: async () => null, save: async (b) => void ((saved = b), saves++) } });
    /** What a reload would find now: the state of an effect in the last saved bytes. */
    const onReload = async (key: string) => {
      const copy = await createSqlJsStore({ persistence: { load: async () => saved, save: async () => undefined } });
      const found = (await copy.getEffect(key))?.state ?? null;
      await copy.close();
      return found;
    };
    const atTheRemote: (string | null)[] = [];
    const inner = memoryRemoteCalls();
    const { step } = createTryIt({
      store,
      remoteCalls: { get: inner.get, record: async (id) => void (atTheRemote.push(await onReload(`refund:${id}`)), inner.record(id)) },
    });
    const perStep: [string, number][] = [];
    const run = async <R extends { outcome: string }>(p: Promise<R>): Promise<R> => {
      const before = saves;
      const r = await p;
      perStep.push([r.outcome, saves - before]);
      return r;
    };
    await run(step({ op: 'refund', payment_id: 'txn_1', amount: 50000 }));
    const asked = await run(step({ op: 'refund', payment_id: 'txn_2', amount: 200000 }));
    await run(step({ op: 'approve', request_id: asked.request_id! }));
    await run(step({ op: 'refund', payment_id: 'txn_2', amount: 500000, approval_id: asked.request_id! }));
    await run(step({ op: 'refund', payment_id: 'txn_2', amount: 200000, approval_id: asked.request_id! }));
    await run(step({ op: 'refund', payment_id: 'txn_2', amount: 200000, approval_id: asked.request_id! }));
    await run(step({ op: 'refund', payment_id: 'txn_3', amount: 2000000 }));
    await run(step({ op: 'refund', payment_id: 'txn_4', amount: 50000, lose_reply: true }));
    await run(step({ op: 'refund', payment_id: 'txn_4', amount: 50000 }));
    await run(step({ op: 'refund', payment_id: 'txn_1', amount: 50000 }));
    // Two saves where the remote runs, one for every other step: never one per transaction.
    expect(perStep).toEqual([
      ['executed', 2],
      ['approval_required', 1],
      ['approved', 1],
      ['approval_mismatch', 1],
      ['executed', 2],
      ['approval_mismatch', 1],
      ['denied', 1],
      ['reply_lost', 2],
      ['ambiguous_retry', 1],
      ['duplicate', 1],
    ]);
    // When the remote was called, a reload would already have found the key taken.
    expect(atTheRemote).toEqual(['executing', 'executing', 'executing']);
    // And once a step is over, a reload finds what it wrote.
    expect(await onReload('refund:txn_4')).toBe('ambiguous');
    const copy = await createSqlJsStore({ persistence: { load: async () => saved, save: async () => undefined } });
    expect((await copy.receipts()).length).toBe((await store.receipts()).length);
    await copy.close();
  });

  it('a save that fails before the remote is called leaves the remote uncalled and says so', async () => {
    let fail = false;
    const store = await createSqlJsStore({
      persistence: {
        load: async () => null,
        save: async () => {
          if (fail) throw new Error('quota exceeded');
        },
      },
    });
    const calls = memoryRemoteCalls();
    const { step } = createTryIt({ store, remoteCalls: calls });
    fail = true;
    const outcome = await step({ op: 'refund', payment_id: 'txn_1', amount: 50000 }).then(
      (r) => r,
      (e: unknown) => e,
    );
    expect(calls.get('txn_1'), 'no money moved').toBe(0);
    expect(String((outcome as Error).message ?? JSON.stringify(outcome))).toMatch(/could not be saved/);
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
