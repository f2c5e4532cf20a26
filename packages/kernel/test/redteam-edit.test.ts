// Red team of edit-then-approve in the kernel: each case was a hole before its fix.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ApprovalRequired, InvalidArgument, canonicalJson, createAction, parseJson, parseReceipt, protect, verifyChain } from '@ctrlrun/kernel';
import { setup } from './harness.js';

const NO_TEMPLATES = `schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    decision: approve
`;

describe('edit-then-approve, red team', () => {
  it("a resource the policy does not derive (protect's own template) is never kept for edited arguments: the edit is refused, so the edited action cannot reserve the proposal's key", async () => {
    const ctx = await setup(NO_TEMPLATES);
    const ran: unknown[] = [];
    const refund = protect((a: { payment_id: string; amount: number }) => void ran.push(a), {
      control: ctx.control,
      name: 'stripe.refund',
      resource: 'payment:{payment_id}',
      effect: 'refund:{resource}',
    });
    const err = await refund({ payment_id: 'p1', amount: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalRequired);
    const requestId = (err as ApprovalRequired).requestId;
    const edit = await ctx.control
      .grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p2', amount: 400 } } })
      .catch((e: unknown) => e);
    expect(edit).toBeInstanceOf(InvalidArgument);
    expect((edit as Error).message).toMatch(/resource/);
    expect((await ctx.store.getApproval(requestId))?.status).toBe('pending');
    expect(ran).toEqual([]);
    expect(await ctx.store.getEffect('refund:payment:p1')).toBeNull();
  });

  it('an action with no resource keeps none, and an edit of it is granted as before', async () => {
    const ctx = await setup(NO_TEMPLATES);
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500 }, principal: { agent: 'refund-agent' } });
    const requestId = ((await ctx.control.execute(action, () => 'never').catch((e: unknown) => e)) as ApprovalRequired).requestId;
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p2', amount: 400 } } });
    expect((await ctx.store.getApproval(approval.approvalId))?.request.action.resource).toBeNull();
  });
});

describe('edit-then-approve, red team: the proposal again', () => {
  it('"edited" arguments equal to the proposal of an action whose caller gave its resource are a plain grant, not a refusal', async () => {
    const ctx = await setup(NO_TEMPLATES);
    const action = createAction({
      name: 'stripe.refund',
      arguments: { payment_id: 'p1', amount: 500 },
      principal: { agent: 'refund-agent' },
      resource: 'payment:p1',
    });
    const requestId = ((await ctx.control.execute(action, () => 'never').catch((e: unknown) => e)) as ApprovalRequired).requestId;
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { amount: 500, payment_id: 'p1' } } });
    expect(approval.approvalId).toBe(requestId);
  });
});

/** `leaf` inside `n` arrays. */
function nested(n: number, leaf: unknown = 1): unknown {
  let v = leaf;
  for (let i = 0; i < n; i++) v = [v];
  return v;
}

describe('nesting: what the kernel writes it can read back', () => {
  it('arguments nested deeper than the kernel reads back inside a receipt are refused at createAction and in an edit, and nothing is written (they made the chain report content_altered)', async () => {
    const ctx = await setup();
    expect(() => createAction({ name: 'customer.read', arguments: { a: nested(511) } as never, principal: { agent: 'x' } })).toThrow(InvalidArgument);
    expect(() => createAction({ name: 'customer.read', arguments: { a: nested(300) } as never, principal: { agent: 'x' } })).toThrow(/nested deeper than 256/);
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: { agent: 'refund-agent' } });
    const requestId = ((await ctx.control.execute(action, () => 'never').catch((e: unknown) => e)) as ApprovalRequired).requestId;
    const events = (await ctx.store.events()).length;
    const err = await ctx.control
      .grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 400000, note: nested(300) } as never } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((await ctx.store.events()).length).toBe(events);
    expect((await ctx.store.getApproval(requestId))?.status).toBe('pending');
  });

  it("arguments at the limit run, and their receipt (the edit's two copies included) parses and the chain verifies", async () => {
    const ctx = await setup();
    const deep = nested(255); // the arguments object is level 0, so this leaf is at 256
    const action = createAction({
      name: 'stripe.refund',
      arguments: { payment_id: 'p1', amount: 500000, note: deep } as never,
      principal: { agent: 'refund-agent' },
    });
    const requestId = ((await ctx.control.execute(action, () => 'never').catch((e: unknown) => e)) as ApprovalRequired).requestId;
    await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 400000, note: deep } as never } });
    await ctx.control.execute(action, () => 'ran', { approvalId: requestId });
    const rows = await ctx.store.receipts();
    for (const r of rows) expect(() => parseReceipt(r.json!)).not.toThrow();
    expect(parseReceipt(rows.at(-1)!.json!).edit).toBeDefined();
    expect(verifyChain(rows, await ctx.store.chainHead()).ok).toBe(true);
  });

  it('a cyclic or absurdly deep value is an InvalidArgument, never a stack overflow', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(InvalidArgument);
    expect(() => canonicalJson(nested(200_000))).toThrow(InvalidArgument);
    expect(() => createAction({ name: 'x', arguments: cyclic as never, principal: { agent: 'a' } })).toThrow(InvalidArgument);
  });

  it('property: whatever canonicalJson writes, parseJson reads back to the same canonical text', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 700 }), fc.boolean(), (n, empty) => {
        const v = empty ? nested(n, []) : nested(n);
        let text: string;
        try {
          text = canonicalJson(v);
        } catch (err) {
          expect(err).toBeInstanceOf(InvalidArgument);
          return;
        }
        expect(canonicalJson(parseJson(text))).toBe(text);
      }),
      { numRuns: 300 },
    );
  });
});

describe('edit-then-approve, red team: only the arguments', () => {
  it('an edit naming a principal, environment, resource or name besides its arguments is refused (it was silently ignored), and nothing is written', async () => {
    const ctx = await setup(NO_TEMPLATES);
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500 }, principal: { agent: 'refund-agent' } });
    const requestId = ((await ctx.control.execute(action, () => 'never').catch((e: unknown) => e)) as ApprovalRequired).requestId;
    for (const extra of [{ principal: { agent: 'root' } }, { environment: 'staging' }, { resource: 'payment:p9' }, { name: 'iam.grant_admin' }]) {
      const edit = { arguments: { payment_id: 'p2', amount: 400 }, ...extra } as unknown as { arguments: Record<string, never> };
      await expect(ctx.control.grantApproval(requestId, { approver: 'alice', edit })).rejects.toThrow(InvalidArgument);
    }
    expect((await ctx.store.getApproval(requestId))?.status).toBe('pending');
    expect(await ctx.control.approvalEdit(requestId)).toBeNull();
  });
});

describe('edit-then-approve, red team: who and how often', () => {
  async function edited(ctx: Awaited<ReturnType<typeof setup>>) {
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: { agent: 'refund-agent' } });
    const requestId = ((await ctx.control.execute(action, () => 'never').catch((e: unknown) => e)) as ApprovalRequired).requestId;
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 400000 } } });
    return { action, requestId, approval };
  }

  it("another principal presenting the proposal's id, or the edited id, runs nothing; another action name with the edited arguments neither", async () => {
    const ctx = await setup();
    const { requestId, approval } = await edited(ctx);
    const ran: unknown[] = [];
    const other = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: { agent: 'other-agent' } });
    const otherEdited = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 400000 }, principal: { agent: 'other-agent' } });
    const renamed = createAction({ name: 'customer.read', arguments: { payment_id: 'p1', amount: 400000 }, principal: { agent: 'refund-agent' } });
    for (const [a, id] of [
      [other, requestId],
      [otherEdited, approval.approvalId],
      [renamed, approval.approvalId],
    ] as const) {
      await ctx.control.execute(a, () => void ran.push(a.name), { approvalId: id }).catch(() => undefined);
    }
    // customer.read is allowed by policy: it runs as itself, and the edited grant is not consumed by it.
    expect(ran).toEqual(['customer.read']);
    expect((await ctx.store.getApproval(approval.approvalId))?.status).toBe('granted');
  });

  it("the proposal's id and the edited id presented at once, many times: the edit runs exactly once", async () => {
    const ctx = await setup();
    const { action, requestId, approval } = await edited(ctx);
    const editedAction = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 400000 }, principal: { agent: 'refund-agent' } });
    const ran: unknown[] = [];
    await Promise.allSettled(
      Array.from({ length: 8 }, (_v, i) =>
        i % 2 === 0
          ? ctx.control.execute(action, (args) => void ran.push(args), { approvalId: requestId })
          : ctx.control.execute(editedAction, (args) => void ran.push(args), { approvalId: approval.approvalId }),
      ),
    );
    expect(ran).toEqual([{ payment_id: 'p1', amount: 400000 }]);
    expect((await ctx.store.getApproval(approval.approvalId))?.status).toBe('consumed');
  });
});

describe('edit-then-approve, red team: the link from the proposal', () => {
  it("a failed presentation of the proposal's id (another principal) writes no answer on it, and the edit still runs for the agent that proposed it, once", async () => {
    const ctx = await setup();
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: { agent: 'refund-agent' } });
    const requestId = ((await ctx.control.execute(action, () => 'never').catch((e: unknown) => e)) as ApprovalRequired).requestId;
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 400000 } } });
    // Another principal presents the proposal's id: a mismatch (the hash is checked before the
    // status), so no second APPROVAL_DENIED hides the edit's (the one approvalEdit reads).
    const other = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: { agent: 'other-agent' } });
    await expect(ctx.control.execute(other, () => 'never', { approvalId: requestId })).rejects.toThrow();
    expect((await ctx.store.events()).filter((e) => e.type === 'APPROVAL_DENIED' && e.approvalId === requestId)).toHaveLength(1);
    // The edit is still found from the proposal, and the proposer's call runs it.
    expect((await ctx.control.approvalEdit(requestId))?.approved).toBe(approval.approvalId);
    const ran: unknown[] = [];
    await ctx.control.execute(action, (args) => void ran.push(args), { approvalId: requestId });
    expect(ran).toEqual([{ payment_id: 'p1', amount: 400000 }]);
  });
});

describe('edit-then-approve, red team: the effect key a caller gave', () => {
  it("a caller's effectKey that is the policy template's key for the proposal is rendered again for the edit: the edit never reserves the proposal's key", async () => {
    const ctx = await setup(); // REFUND_POLICY: effect "refund:{payment_id}"
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: { agent: 'refund-agent' } });
    const requestId = ((await ctx.control.execute(action, () => 'never', { effectKey: 'refund:p1' }).catch((e: unknown) => e)) as ApprovalRequired).requestId;
    await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p2', amount: 400000 } } });
    const keys: (string | null)[] = [];
    await ctx.control.execute(action, (_a, c) => void keys.push(c.effectKey), { approvalId: requestId, effectKey: 'refund:p1' });
    expect(keys).toEqual(['refund:p2']);
    expect(await ctx.store.getEffect('refund:p1')).toBeNull();
    // p1 itself can still be refunded (allowed amount), under its own key.
    const p1 = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 100 }, principal: { agent: 'refund-agent' } });
    await ctx.control.execute(p1, () => void keys.push('p1 ran'));
    expect(keys).toEqual(['refund:p2', 'p1 ran']);
  });

  it("a caller's own key (not the template's for the proposal) is kept for the edit: it names the caller's request, not the arguments", async () => {
    const ctx = await setup();
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: { agent: 'refund-agent' } });
    const requestId = ((await ctx.control.execute(action, () => 'never', { effectKey: 'order-77' }).catch((e: unknown) => e)) as ApprovalRequired).requestId;
    await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p2', amount: 400000 } } });
    const keys: (string | null)[] = [];
    await ctx.control.execute(action, (_a, c) => void keys.push(c.effectKey), { approvalId: requestId, effectKey: 'order-77' });
    expect(keys).toEqual(['order-77']);
  });
});

describe('edit-then-approve, red team: an edit that could never run', () => {
  it("edited arguments the policy's effect template cannot render are refused naming the placeholder, and nothing is written (they were granted, the proposal denied, and the run refused)", async () => {
    const ctx = await setup(); // effect "refund:{payment_id}"
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: { agent: 'refund-agent' } });
    const requestId = ((await ctx.control.execute(action, () => 'never').catch((e: unknown) => e)) as ApprovalRequired).requestId;
    const events = (await ctx.store.events()).length;
    const err = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { amount: 400000 } } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(/payment_id/);
    expect((await ctx.store.events()).length).toBe(events);
    expect((await ctx.store.getApproval(requestId))?.status).toBe('pending');
  });
});
