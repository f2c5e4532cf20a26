// One request per action: asking again for the same action hash while its request is pending
// gets that request back (the same id), never a second one that nobody will answer.
import { describe, expect, it } from 'vitest';
import { ApprovalRequired, protect } from '@ctrlrun/kernel';
import { setup } from './harness.js';

const MIN = 60_000;

function refunder(ctx: Awaited<ReturnType<typeof setup>>) {
  const calls: unknown[] = [];
  const fn = protect<{ payment_id: string; amount: number }, string>(
    (a) => {
      calls.push(a);
      return `re_${String(a['payment_id'])}`;
    },
    { control: ctx.control, name: 'stripe.refund' },
  );
  return { fn, calls };
}

async function requestIdOf(p: Promise<unknown>): Promise<string> {
  const err = await p.catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApprovalRequired);
  return (err as ApprovalRequired).requestId;
}

describe('one approval request per action', () => {
  it('a retry of the same action while its request is pending gets the same request id, and one APPROVAL_REQUESTED', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx);
    const first = await requestIdOf(fn({ payment_id: 'p1', amount: 200000 }));
    const second = await requestIdOf(fn({ payment_id: 'p1', amount: 200000 }));
    expect(second).toBe(first);
    expect(await ctx.store.listApprovals()).toHaveLength(1);
    expect(ctx.types().filter((t) => t === 'APPROVAL_REQUESTED')).toHaveLength(1);
    // The retry is still on record: proposed and evaluated.
    expect(ctx.types().filter((t) => t === 'ACTION_PROPOSED')).toHaveLength(2);
    expect(ctx.types().filter((t) => t === 'POLICY_EVALUATED')).toHaveLength(2);
    expect(calls).toEqual([]);
  });

  it('different arguments are a different action: their own request', async () => {
    const ctx = await setup();
    const { fn } = refunder(ctx);
    const a = await requestIdOf(fn({ payment_id: 'p1', amount: 200000 }));
    const b = await requestIdOf(fn({ payment_id: 'p1', amount: 200001 }));
    expect(b).not.toBe(a);
    expect(await ctx.store.listApprovals('pending')).toHaveLength(2);
  });

  it('a different principal is a different action: its own request', async () => {
    const ctx = await setup();
    const { fn } = refunder(ctx);
    const a = await requestIdOf(fn({ payment_id: 'p1', amount: 200000 }));
    const b = await requestIdOf(fn({ payment_id: 'p1', amount: 200000 }, { principal: { agent: 'other-agent' } }));
    expect(b).not.toBe(a);
  });

  it('a granted, unused request is still the one: asked again it is named, not refiled; presented it runs once; once it ran, asking again is DuplicateEffect, nothing filed', async () => {
    const ctx = await setup();
    const { fn, calls } = refunder(ctx);
    const id = await requestIdOf(fn({ payment_id: 'p2', amount: 200000 }));
    expect(await requestIdOf(fn({ payment_id: 'p2', amount: 200000 }))).toBe(id);
    await ctx.control.grantApproval(id, { approver: 'human:ana' });
    // Granted and not yet used is still open: asking again names it (present it), files nothing.
    const granted = await fn({ payment_id: 'p2', amount: 200000 }).catch((e: unknown) => e);
    expect((granted as ApprovalRequired).requestId).toBe(id);
    expect((granted as ApprovalRequired).message).toMatch(/already granted for this action; present it/);
    expect(await ctx.store.listApprovals()).toHaveLength(1);
    expect(calls).toHaveLength(0);
    expect(await fn({ payment_id: 'p2', amount: 200000 }, { approvalId: id })).toBe('re_p2');
    expect(calls).toHaveLength(1);
    // Consumed, and its effect committed: asking again is refused as the duplicate it is, no new request.
    await expect(fn({ payment_id: 'p2', amount: 200000 })).rejects.toMatchObject({ name: 'DuplicateEffect', state: 'committed' });
    expect(await ctx.store.listApprovals()).toHaveLength(1);
  });

  it('an answered (denied) or expired request is not reused', async () => {
    const ctx = await setup();
    const { fn } = refunder(ctx);
    const denied = await requestIdOf(fn({ payment_id: 'p3', amount: 200000 }));
    await ctx.control.denyApproval(denied, { approver: 'human:ana' });
    const afterDeny = await requestIdOf(fn({ payment_id: 'p3', amount: 200000 }));
    expect(afterDeny).not.toBe(denied);
    ctx.advance(16 * MIN); // past the 15-minute request TTL
    const afterExpiry = await requestIdOf(fn({ payment_id: 'p3', amount: 200000 }));
    expect(afterExpiry).not.toBe(afterDeny);
  });

  it('openApproval(action) finds the open request for exactly that action hash and writes nothing', async () => {
    const ctx = await setup();
    const { fn } = refunder(ctx);
    const id = await requestIdOf(fn({ payment_id: 'p4', amount: 200000 }));
    const before = ctx.events.length;
    const same = await fn.action({ payment_id: 'p4', amount: 200000 });
    const other = await fn.action({ payment_id: 'p4', amount: 999 });
    expect((await ctx.control.openApproval(same))?.request.requestId).toBe(id);
    expect(await ctx.control.openApproval(other)).toBeNull();
    expect(ctx.events.length).toBe(before);
    ctx.advance(16 * MIN);
    expect(await ctx.control.openApproval(same)).toBeNull();
  });
});
