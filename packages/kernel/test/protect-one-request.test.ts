// protect's oneRequest: a function that sends one request gets the kernel's one never-sent list,
// as the worker's forwarder and the MCP gateway do; without it every error but NotExecuted stays
// AMBIGUOUS (spec 01), since the function may have acted before it threw.
import { describe, expect, it } from 'vitest';
import { InvalidArgument, NotExecuted, protect } from '@ctrlrun/kernel';
import { setup } from './harness.js';

/** A fetch rejection as Node's undici makes one: `TypeError: fetch failed` over the socket's error. */
const fetchFailed = (code: string, syscall: string) =>
  new TypeError('fetch failed', { cause: Object.assign(new Error(`${syscall} ${code} 192.0.2.9:443`), { code, syscall }) });

describe('protect({ oneRequest })', () => {
  it('a connect that failed is FAILED (NotExecuted naming the code); the same code from read stays AMBIGUOUS', async () => {
    const { control, store } = await setup();
    let error: Error = fetchFailed('EHOSTUNREACH', 'connect');
    const refund = protect(
      () => {
        throw error;
      },
      { control, name: 'stripe.refund', oneRequest: true },
    );
    const failed = await refund({ payment_id: 'p1', amount: 5 }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(NotExecuted);
    expect((failed as NotExecuted).message).toBe('stripe.refund: the request was never sent (TypeError: fetch failed, EHOSTUNREACH)');
    expect((failed as NotExecuted).cause).toBe(error);
    expect((await store.getEffect('refund:p1'))?.state).toBe('failed');

    error = fetchFailed('EHOSTUNREACH', 'read');
    await expect(refund({ payment_id: 'p2', amount: 5 })).rejects.toBe(error);
    expect((await store.getEffect('refund:p2'))?.state).toBe('ambiguous');

    // A NotExecuted of the function's own passes through unchanged.
    const own = new NotExecuted('declined before sending');
    error = own;
    await expect(refund({ payment_id: 'p3', amount: 5 })).rejects.toBe(own);
    expect((await store.getEffect('refund:p3'))?.state).toBe('failed');
  });

  it('without it, the same failed connect is AMBIGUOUS; a value that is not a boolean is refused', async () => {
    const { control, store } = await setup();
    const error = fetchFailed('ECONNREFUSED', 'connect');
    const refund = protect(
      () => {
        throw error;
      },
      { control, name: 'stripe.refund' },
    );
    await expect(refund({ payment_id: 'p1', amount: 5 })).rejects.toBe(error);
    expect((await store.getEffect('refund:p1'))?.state).toBe('ambiguous');
    expect(() => protect(() => 1, { control, name: 'stripe.refund', oneRequest: 'yes' as unknown as boolean })).toThrow(
      new InvalidArgument('oneRequest must be a boolean'),
    );
  });
});
