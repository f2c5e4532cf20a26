// What a model is told when a human edited the arguments before approving (editedToolResult), and
// how an adapter re-finds an unused edit for a proposed action (unusedEditFor).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  ApprovalRequired,
  canonicalJson,
  createAction,
  editedToolResult,
  isEditedToolResult,
  unusedEditFor,
  type ApprovalEdit,
  type JsonObject,
} from '@ctrlrun/kernel';
import { setup } from './harness.js';

const PRINCIPAL = { agent: 'refund-agent' };

function edit(proposedArguments: JsonObject, approvedArguments: JsonObject): ApprovalEdit {
  return { proposed: 'apr_1', approved: 'apr_2', editor: 'human:ana', proposedHash: 'h1', approvedHash: 'h2', proposedArguments, approvedArguments };
}

describe('editedToolResult', () => {
  it('names who edited and the changed arguments, gives both argument sets and the result', () => {
    const out = editedToolResult(edit({ payment_id: 'p1', amount: 500000, note: 'x' }, { payment_id: 'p1', amount: 300000, reason: 'partial' }), {
      id: 're_p1',
    });
    expect(out).toEqual({
      edited: true,
      message:
        'human:ana edited the arguments before approving (changed: "amount", "note", "reason"); the tool ran once, with approved_arguments, not the arguments proposed.',
      approved_arguments: { payment_id: 'p1', amount: 300000, reason: 'partial' },
      proposed_arguments: { payment_id: 'p1', amount: 500000, note: 'x' },
      editor: 'human:ana',
      result: { id: 're_p1' },
    });
    expect(isEditedToolResult(out)).toBe(true);
    expect(isEditedToolResult({ edited: 'yes', message: 'x' })).toBe(false);
    expect(isEditedToolResult(null)).toBe(false);
  });

  it('a key named __proto__ is compared like any other', () => {
    const a = JSON.parse('{"__proto__": 1, "b": 2}') as JsonObject;
    const b = JSON.parse('{"__proto__": 5, "b": 2}') as JsonObject;
    expect(editedToolResult(edit(a, b), null).message).toContain('(changed: "__proto__")');
  });

  it('property: the changed arguments are exactly those whose canonical values differ', () => {
    // Values the canonical form accepts (no floats): what arguments are.
    const json = fc.oneof(
      fc.integer(),
      fc.string({ maxLength: 4 }),
      fc.boolean(),
      fc.constant(null),
      fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 3 }),
      fc.dictionary(fc.string({ maxLength: 2 }), fc.integer({ min: 0, max: 3 }), { maxKeys: 2 }),
    );
    const args = fc
      .dictionary(fc.constantFrom('a', 'b', 'c', '__proto__', 'constructor'), json, { maxKeys: 5 })
      .map((o) => JSON.parse(JSON.stringify(o)) as JsonObject);
    fc.assert(
      fc.property(args, args, (p, q) => {
        const keys = [...new Set([...Object.keys(p), ...Object.keys(q)])];
        const differ = keys.filter((k) => !Object.hasOwn(p, k) || !Object.hasOwn(q, k) || canonicalJson(p[k]) !== canonicalJson(q[k])).sort();
        const message = editedToolResult(edit(p, q), 0).message;
        expect(message).toContain(`(changed: ${differ.map((k) => JSON.stringify(k)).join(', ')})`);
      }),
      { numRuns: 200 },
    );
  });
});

describe('unusedEditFor', () => {
  async function proposed(ctx: Awaited<ReturnType<typeof setup>>) {
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: PRINCIPAL });
    const err = await ctx.control.execute(action, () => 'never').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalRequired);
    return { action, requestId: (err as ApprovalRequired).requestId };
  }

  it('null while pending or plainly answered; the edit once a human edited; null again once the edit ran', async () => {
    const ctx = await setup();
    const { action, requestId } = await proposed(ctx);
    expect(await unusedEditFor(ctx.control, action)).toBeNull();
    await ctx.control.grantApproval(requestId, { approver: 'human:ana', edit: { arguments: { payment_id: 'p1', amount: 300000 } } });
    const found = await unusedEditFor(ctx.control, action);
    expect(found).toMatchObject({ proposed: requestId, editor: 'human:ana', approvedArguments: { payment_id: 'p1', amount: 300000 } });
    const ran: unknown[] = [];
    await ctx.control.execute(action, (args) => void ran.push(args), { approvalId: found!.proposed });
    expect(ran).toEqual([{ payment_id: 'p1', amount: 300000 }]);
    expect(await unusedEditFor(ctx.control, action)).toBeNull();
  });

  it('null for a plain denial, and once the edited grant expired', async () => {
    const ctx = await setup();
    const first = await proposed(ctx);
    await ctx.control.denyApproval(first.requestId, { approver: 'human:ana' });
    expect(await unusedEditFor(ctx.control, first.action)).toBeNull();

    const other = await setup();
    const { action, requestId } = await proposed(other);
    await other.control.grantApproval(requestId, { approver: 'human:ana', edit: { arguments: { payment_id: 'p1', amount: 300000 } } });
    other.advance(other.control.approvalTtl + 1);
    expect(await unusedEditFor(other.control, action)).toBeNull();
  });

  it("only for the proposed action: another principal's identical arguments find nothing", async () => {
    const ctx = await setup();
    const { requestId } = await proposed(ctx);
    await ctx.control.grantApproval(requestId, { approver: 'human:ana', edit: { arguments: { payment_id: 'p1', amount: 300000 } } });
    const someoneElse = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500000 }, principal: { agent: 'other-agent' } });
    expect(await unusedEditFor(ctx.control, someoneElse)).toBeNull();
  });

  it('names what the control path names when the action is asked for again: a newer plain denial of the same call outranks an older edit', async () => {
    const ctx = await setup();
    const { action, requestId } = await proposed(ctx);
    // A second request for the same hash (filed before the one-request rule, or by a racing caller).
    const later = 'apr_later';
    const created = new Date(ctx.control.clock().getTime() + 1);
    ctx.advance(1);
    await ctx.store.putApprovalRequest({
      requestId: later,
      actionHash: action.actionHash,
      action,
      createdAt: created.toISOString(),
      expiresAt: new Date(created.getTime() + ctx.control.approvalTtl).toISOString(),
      policyHash: null,
    });
    await ctx.control.grantApproval(requestId, { approver: 'human:ana', edit: { arguments: { payment_id: 'p1', amount: 300000 } } });
    await ctx.control.denyApproval(later, { approver: 'human:bo' });
    // The control path files a new request rather than pointing at the older edit …
    const again = await ctx.control.execute(action, () => 'never').catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ApprovalRequired);
    expect((again as ApprovalRequired).requestId).not.toBe(requestId);
    // … and so the adapters' lookup does not run that edit either.
    expect(await unusedEditFor(ctx.control, action)).toBeNull();
  });
});
