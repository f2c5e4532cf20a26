import { describe, expect, it } from 'vitest';
import { ApprovalMismatch, ApprovalTimeout, InvalidArgument, createAction } from '@ctrlrun/kernel';
import { LocalApprovalProvider, ScriptedApprovalProvider } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { T0 } from './harness.js';

const MIN = 60_000;

async function fixture() {
  let now = T0.getTime();
  const clock = () => new Date(now);
  const store = await createSqlJsStore({ clock });
  // The "sleep" moves the clock instead of waiting: tests never sleep.
  const sleep = async (ms: number) => void (now += ms);
  const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p', amount: 200000 }, principal: { agent: 'a' } });
  return { store, clock, sleep, action, advance: (ms: number) => void (now += ms) };
}

describe('approval providers', () => {
  it('the local provider stores a pending request and returns the grant once a human answers', async () => {
    const f = await fixture();
    const p = new LocalApprovalProvider(f.store, {
      clock: f.clock,
      sleep: async (ms) => {
        await f.sleep(ms);
        if ((await f.store.getApproval(req.requestId))?.status === 'pending') await f.store.grantApproval(req.requestId, 'human:ana');
      },
    });
    const req = await p.request(f.action, 15 * MIN, { policyHash: 'sha256:x' });
    expect((await f.store.getApproval(req.requestId))?.status).toBe('pending');
    const approval = await p.wait(req.requestId, 5 * MIN);
    expect(approval?.approver).toBe('human:ana');
    expect(approval?.actionHash).toBe(f.action.actionHash);
    expect((await f.store.getApproval(req.requestId))?.status).toBe('granted');
  });

  it('an answer of no is null, never "still waiting"; unanswered is ApprovalTimeout; unknown is ApprovalMismatch', async () => {
    const f = await fixture();
    const p = new LocalApprovalProvider(f.store, { clock: f.clock, sleep: f.sleep });
    const denied = await p.request(f.action, 15 * MIN);
    await f.store.denyApproval(denied.requestId, 'human:ana');
    expect(await p.wait(denied.requestId)).toBeNull();
    const open = await p.request(f.action, 15 * MIN);
    await expect(p.wait(open.requestId, 2 * MIN)).rejects.toBeInstanceOf(ApprovalTimeout);
    // With no timeout, the request's own expiry ends the wait.
    await expect(p.wait(open.requestId)).rejects.toBeInstanceOf(ApprovalTimeout);
    const err = await p.wait('apr_missing').catch((e: unknown) => e);
    expect((err as ApprovalMismatch).reason).toBe('unknown');
  });

  it('the scripted provider answers in order and times out when exhausted', async () => {
    const f = await fixture();
    const p = new ScriptedApprovalProvider(f.store, ['grant', 'deny', 'pending'], { clock: f.clock });
    const a = await p.request(f.action, 15 * MIN);
    expect((await p.wait(a.requestId))?.approver).toBe('cli:scripted');
    const b = await p.request(f.action, 15 * MIN);
    expect(await p.wait(b.requestId)).toBeNull();
    expect((await f.store.getApproval(b.requestId))?.status).toBe('denied');
    const c = await p.request(f.action, 15 * MIN);
    await expect(p.wait(c.requestId)).rejects.toBeInstanceOf(ApprovalTimeout);
    await expect(p.wait(c.requestId)).rejects.toBeInstanceOf(ApprovalTimeout);
    expect(() => new ScriptedApprovalProvider(f.store, ['maybe' as never])).toThrow(InvalidArgument);
  });

  it('a scripted step after the request expired is a timeout, and nothing is granted', async () => {
    const f = await fixture();
    const p = new ScriptedApprovalProvider(f.store, ['grant'], { clock: f.clock });
    const a = await p.request(f.action, 15 * MIN);
    f.advance(16 * MIN);
    await expect(p.wait(a.requestId)).rejects.toBeInstanceOf(ApprovalTimeout);
    expect((await f.store.getApproval(a.requestId))?.status).toBe('pending');
  });
});
