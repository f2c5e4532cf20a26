// withContext / withApproval on AsyncLocalStorage, read by protect through the kernel's ambient hook.
import { describe, expect, it } from 'vitest';
import {
  ActionDenied,
  ApprovalRequired,
  DuplicateEffect,
  Control,
  ambientCall,
  callbackSink,
  loadPolicy,
  protect,
  setAmbientCallContext,
  type StoredReceipt,
} from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { currentContext, withApproval, withContext } from '@ctrlrun/store-node';

const POLICY = `schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: {amount_lte: 1000}
        decision: allow
      - decision: approve
`;

async function setup(principal: { agent: string } | null = null) {
  const store = await createSqlJsStore();
  const receipts: StoredReceipt[] = [];
  const control = new Control({
    policy: loadPolicy(POLICY),
    store,
    principal,
    sinks: [callbackSink({ onReceipt: (r) => void receipts.push(r) })],
    logger: { warn: () => {} },
  });
  const runs: string[] = [];
  const refund = protect<{ payment_id: string; amount: number }, string>(
    async (a) => {
      await new Promise((r) => setTimeout(r, 2));
      runs.push(String(a['payment_id']));
      return String(a['payment_id']);
    },
    { control, name: 'stripe.refund' },
  );
  const principalOf = (paymentId: string) => {
    const doc = receipts.find((r) => r.document['effect_key'] === `refund:${paymentId}`)!.document;
    return doc['principal'] as { agent: string; user: string | null };
  };
  return { store, control, refund, runs, receipts, principalOf };
}

const tick = () => new Promise((r) => setTimeout(r, 1));

describe('withContext / withApproval', () => {
  it('the principal flows through awaits, timers and concurrent scopes, each to its own calls', async () => {
    const t = await setup();
    await Promise.all(
      ['ana', 'bo', 'cy'].map((who, i) =>
        withContext({ agent: `agent-${who}`, user: `${who}@example.com` }, async () => {
          await tick();
          await new Promise<void>((resolve) => setTimeout(resolve, 3 - i));
          expect(currentContext()?.principal).toMatchObject({ agent: `agent-${who}` });
          await t.refund({ payment_id: `p-${who}`, amount: 10 });
          await Promise.resolve().then(() => t.refund({ payment_id: `q-${who}`, amount: 10 }));
        }),
      ),
    );
    for (const who of ['ana', 'bo', 'cy']) {
      expect(t.principalOf(`p-${who}`)).toMatchObject({ agent: `agent-${who}`, user: `${who}@example.com` });
      expect(t.principalOf(`q-${who}`)).toMatchObject({ agent: `agent-${who}`, user: `${who}@example.com` });
    }
    // Outside any scope there is none: no principal is refused, as before.
    expect(currentContext()).toBeUndefined();
    await expect(t.refund({ payment_id: 'nobody', amount: 10 })).rejects.toMatchObject({ reason: 'no_principal' });
  });

  it('an explicit per-call principal wins; the ambient one beats the Control default; nesting replaces only what it names', async () => {
    const t = await setup({ agent: 'default-agent' });
    await t.refund({ payment_id: 'd', amount: 1 });
    await withContext({ agent: 'outer' }, async () => {
      await t.refund({ payment_id: 'o', amount: 1 });
      await t.refund({ payment_id: 'x', amount: 1 }, { principal: { agent: 'explicit' } });
      await withApproval('apr_whatever', () =>
        withContext({ agent: 'inner' }, async () => {
          expect(currentContext()).toMatchObject({ approvalId: 'apr_whatever', principal: { agent: 'inner' } });
        }),
      );
    });
    expect(t.principalOf('d').agent).toBe('default-agent');
    expect(t.principalOf('o').agent).toBe('outer');
    expect(t.principalOf('x').agent).toBe('explicit');
  });

  it('withApproval presents the granted approval to the call inside it, which runs once', async () => {
    const t = await setup({ agent: 'refund-agent' });
    const asked = (await t.refund({ payment_id: 'big', amount: 5000 }).catch((e: unknown) => e)) as ApprovalRequired;
    expect(asked).toBeInstanceOf(ApprovalRequired);
    await t.control.grantApproval(asked.requestId, { approver: 'human:ana' });
    expect(
      await withApproval(asked.requestId, async () => {
        await tick();
        return t.refund({ payment_id: 'big', amount: 5000 });
      }),
    ).toBe('big');
    expect(t.runs).toEqual(['big']);
    const doc = t.receipts.at(-1)!.document;
    expect([doc['approval_id'], doc['approver'], doc['result']]).toEqual([asked.requestId, 'human:ana', 'committed']);
    // approvalId: null presents none, even inside withApproval: no grant is used, and since the
    // refund already happened no human is asked again (refused before asking); nothing runs.
    const again = await withApproval(asked.requestId, () => t.refund({ payment_id: 'big', amount: 5000 }, { approvalId: null })).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(DuplicateEffect);
    expect(t.runs).toEqual(['big']);
  });

  it('bad input is refused before anything runs', () => {
    let ran = false;
    expect(() => withContext({ agent: '' }, () => (ran = true))).toThrow('principal.agent');
    expect(() => withContext(null as never, () => (ran = true))).toThrow('principal');
    expect(() => withApproval('', () => (ran = true))).toThrow('approval id');
    expect(() => withContext({ agent: 'a' }, 'nope' as never)).toThrow('function');
    expect(ran).toBe(false);
  });

  it('the kernel hook: a failing provider is no context; null removes it', async () => {
    const t = await setup();
    try {
      setAmbientCallContext(() => {
        throw new Error('broken');
      });
      expect(ambientCall()).toBeUndefined();
      await expect(t.refund({ payment_id: 'h', amount: 1 })).rejects.toBeInstanceOf(ActionDenied);
      setAmbientCallContext(() => ({ principal: { agent: 'from-hook' } }));
      await t.refund({ payment_id: 'h', amount: 1 });
      expect(t.principalOf('h').agent).toBe('from-hook');
      expect(() => setAmbientCallContext('x' as never)).toThrow('function or null');
    } finally {
      setAmbientCallContext(null);
    }
    expect(ambientCall()).toBeUndefined();
    // The next scope installs it again.
    await withContext({ agent: 'back' }, () => t.refund({ payment_id: 'k', amount: 1 }));
    expect(t.principalOf('k').agent).toBe('back');
  });
});
