// Typed protect: the argument type comes from the function (a misspelt argument does not
// compile: the @ts-expect-error lines below fail `tsc -b` if it ever does), an optional field
// left undefined is absent rather than refused, and a Date is refused naming what to pass.
import { describe, expect, expectTypeOf, it } from 'vitest';
import { ActionDenied, InvalidArgument, protect, type Protected } from '@ctrlrun/kernel';
import { setup } from './harness.js';

interface RefundArgs {
  payment_id: string;
  amount: number;
  note?: string;
  meta?: { reason?: string; ticket?: number };
}

async function refunder() {
  const ctx = await setup();
  const seen: RefundArgs[] = [];
  const refund = protect(
    async (args: RefundArgs) => {
      seen.push(args);
      return `re_${args.payment_id}`;
    },
    { control: ctx.control, name: 'stripe.refund' },
  );
  return { ctx, refund, seen };
}

describe('protect infers its arguments from the function', () => {
  it('the protected function takes exactly the arguments fn declares', async () => {
    const { refund } = await refunder();
    expectTypeOf(refund).toEqualTypeOf<Protected<RefundArgs, string>>();
    expectTypeOf(refund).parameter(0).toEqualTypeOf<RefundArgs>();
    // @ts-expect-error a misspelt argument does not compile
    const misspelt = refund({ payment_id: 'p0', amuont: 500 });
    // At run time the policy never saw an amount: no rule matches it.
    await expect(misspelt).rejects.toBeInstanceOf(ActionDenied);
    // @ts-expect-error a wrong type does not compile
    await expect(refund({ payment_id: 'p0', amount: '500' })).rejects.toBeInstanceOf(ActionDenied);
  });

  it('an optional field left undefined is absent, at any depth: same action hash as leaving it out, and it runs', async () => {
    const { ctx, refund, seen } = await refunder();
    const plain = await refund.action({ payment_id: 'p1', amount: 500 });
    const withUndefined = await refund.action({ payment_id: 'p1', amount: 500, note: undefined, meta: { reason: undefined } });
    expect(withUndefined.canonicalArguments).toEqual({ payment_id: 'p1', amount: 500, meta: {} });
    const noMeta = await refund.action({ payment_id: 'p1', amount: 500, note: undefined });
    expect(noMeta.actionHash).toBe(plain.actionHash);
    expect(await refund({ payment_id: 'p1', amount: 500, note: undefined })).toBe('re_p1');
    expect(seen).toEqual([{ payment_id: 'p1', amount: 500 }]);
    expect(ctx.receipts.at(-1)!.document['result']).toBe('committed');
  });

  it('undefined does not hide a default, and a __proto__ argument is still hashed', async () => {
    const ctx = await setup();
    const refund = protect((a: { payment_id: string; amount?: number }) => a.amount, {
      control: ctx.control,
      name: 'stripe.refund',
      defaults: { amount: 700 },
    });
    expect((await refund.action({ payment_id: 'p2', amount: undefined })).canonicalArguments).toEqual({ payment_id: 'p2', amount: 700 });
    const sneaky = JSON.parse('{"payment_id":"p2","amount":5,"__proto__":{"x":1}}') as { payment_id: string; amount: number };
    const hashed = await refund.action(sneaky);
    expect(Object.keys(hashed.canonicalArguments).sort()).toEqual(['__proto__', 'amount', 'payment_id']);
    expect(hashed.actionHash).not.toBe((await refund.action({ payment_id: 'p2', amount: 5 })).actionHash);
  });

  it('undefined inside a list is still refused, naming its path', async () => {
    const ctx = await setup();
    const send = protect((a: { to: (string | undefined)[] }) => a.to.length, { control: ctx.control, name: 'customer.read' });
    await expect(send({ to: ['a', undefined] })).rejects.toThrow(/undefined is not an allowed argument type at arguments\.to\[1\]/);
  });

  it('a Date is refused with what to pass instead', async () => {
    const ctx = await setup();
    const schedule = protect((a: { at: Date | string }) => a.at, { control: ctx.control, name: 'customer.read' });
    const err = await schedule({ at: new Date(0) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toBe(
      'Date is not an allowed argument type at arguments.at: pass date.toISOString() (a string such as "2026-01-01T12:00:00.000Z") or date.getTime() (integer milliseconds)',
    );
    expect(await schedule({ at: new Date(0).toISOString() })).toBe('1970-01-01T00:00:00.000Z');
  });
});
