// Edit-then-approve: a human approves edited arguments; the grant binds to the edited hash, the
// original is denied in the same write, and the agent's own call of the original runs the edit once.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  ActionDenied,
  ApprovalMismatch,
  ApprovalRequired,
  InvalidArgument,
  Suspended,
  actionHash,
  createAction,
  parseReceipt,
  protect,
  verifyChain,
  type ExecutionContext,
  type JsonObject,
  type StateStore,
  Control,
  loadPolicy,
} from '@ctrlrun/kernel';
import { setup } from './harness.js';
import { action as authorityAction, doc, GRANT, rig } from './authority.fixtures.js';

const PRINCIPAL = { agent: 'refund-agent' };

async function proposed(ctx: Awaited<ReturnType<typeof setup>>, args: JsonObject = { payment_id: 'p1', amount: 200000 }) {
  const action = createAction({ name: 'stripe.refund', arguments: args, principal: PRINCIPAL });
  const err = await ctx.control.execute(action, () => 'never').catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApprovalRequired);
  return { action, requestId: (err as ApprovalRequired).requestId };
}

async function snapshot(store: StateStore) {
  return { approvals: JSON.stringify(await store.listApprovals()), events: (await store.events()).length, receipts: (await store.receipts()).length };
}

describe('edit-then-approve', () => {
  it('an edit the policy still approves: the original is denied, a new request is granted for the edited hash, both events written', async () => {
    const ctx = await setup();
    const { action, requestId } = await proposed(ctx);
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', via: 'cli', edit: { arguments: { payment_id: 'p1', amount: 150000 } } });
    expect(approval.approvalId).not.toBe(requestId);
    const edited = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 150000 }, principal: PRINCIPAL });
    expect(approval.actionHash).toBe(edited.actionHash);
    expect(approval.approver).toBe('alice');

    const original = await ctx.store.getApproval(requestId);
    expect(original?.status).toBe('denied');
    expect(original?.approver).toBe('alice');
    const fresh = await ctx.store.getApproval(approval.approvalId);
    expect(fresh?.status).toBe('granted');
    expect(fresh?.request.expiresAt).toBe(original?.request.expiresAt);
    expect(fresh?.request.policyHash).toBe(ctx.control.policyHash);
    expect(fresh?.request.action.canonicalArguments).toEqual({ payment_id: 'p1', amount: 150000 });

    const denied = ctx.events.find((e) => e.type === 'APPROVAL_DENIED');
    const granted = ctx.events.find((e) => e.type === 'APPROVAL_GRANTED');
    expect(denied?.approvalId).toBe(requestId);
    expect(denied?.data).toEqual({ approver: 'alice', edited_to: approval.approvalId, via: 'cli' });
    expect(granted?.approvalId).toBe(approval.approvalId);
    expect(granted?.data).toEqual({
      approver: 'alice',
      action_hash: edited.actionHash,
      edited_from: requestId,
      proposed_hash: action.actionHash,
      proposed_arguments: { payment_id: 'p1', amount: 200000 },
      approved_arguments: { payment_id: 'p1', amount: 150000 },
      via: 'cli',
    });

    // Found from either id.
    for (const id of [requestId, approval.approvalId]) {
      expect(await ctx.control.approvalEdit(id)).toEqual({
        proposed: requestId,
        approved: approval.approvalId,
        editor: 'alice',
        proposedHash: action.actionHash,
        approvedHash: edited.actionHash,
        proposedArguments: { payment_id: 'p1', amount: 200000 },
        approvedArguments: { payment_id: 'p1', amount: 150000 },
      });
    }
  });

  it("an edit the policy denies is refused with the rule's sentence; nothing is written and the request stays pending", async () => {
    const ctx = await setup();
    const { requestId } = await proposed(ctx);
    const before = await snapshot(ctx.store);
    const err = await ctx.control
      .grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 5000000 } } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect((err as ActionDenied).reason).toBe('rule[2]');
    expect((err as Error).message).toContain('denied');
    expect((err as Error).message).toContain('stays pending');
    expect(await snapshot(ctx.store)).toEqual(before);
    expect((await ctx.store.getApproval(requestId))?.status).toBe('pending');
    expect(await ctx.control.approvalEdit(requestId)).toBeNull();
    // Still answerable as proposed.
    expect((await ctx.control.grantApproval(requestId, { approver: 'alice' })).approvalId).toBe(requestId);
  });

  it('an edit of an action the policy denies outright never lifts it (authority of the decision, not of the request)', async () => {
    const ctx = await setup(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    rules:
      - when: {payment_id_eq: "blocked"}
        decision: deny
      - decision: approve
`);
    const { requestId } = await proposed(ctx);
    const err = await ctx.control
      .grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'blocked', amount: 1 } } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect((await ctx.store.getApproval(requestId))?.status).toBe('pending');
  });

  it("the authority in force decides the edit too: beyond the grant's constraint, or a resource the edit re-derives outside it, is refused and nothing is written", async () => {
    const r = await rig(doc(GRANT));
    const proposal = authorityAction({ arguments: { amount: 150000, payment_id: 'EU-42' } });
    const requestId = ((await r.control.execute(proposal, r.executor).catch((e: unknown) => e)) as ApprovalRequired).requestId;
    const before = await snapshot(r.store);
    for (const args of [
      { amount: 300000, payment_id: 'EU-42' },
      { amount: 100000, payment_id: 'US-1' },
    ]) {
      const err = await r.control.grantApproval(requestId, { approver: 'bob', edit: { arguments: args } }).catch((e: unknown) => e);
      expect(err, JSON.stringify(args)).toBeInstanceOf(ActionDenied);
      expect((err as Error).message).toContain('stays pending');
    }
    expect(await snapshot(r.store)).toEqual(before);
    // Within the grant: granted, bound to the re-derived resource.
    const approval = await r.control.grantApproval(requestId, { approver: 'bob', edit: { arguments: { amount: 120000, payment_id: 'EU-7' } } });
    expect((await r.store.getApproval(approval.approvalId))?.request.action.resource).toBe('payment:EU-7');
  });

  it('edited arguments the resource template cannot resolve are refused naming the argument, and nothing is written', async () => {
    const ctx = await setup(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    resource: "payment:{payment_id}"
    decision: approve
`);
    const { requestId } = await proposed(ctx);
    const before = await snapshot(ctx.store);
    await expect(ctx.control.grantApproval(requestId, { approver: 'a', edit: { arguments: { amount: 5 } } })).rejects.toThrow(/payment_id/);
    expect(await snapshot(ctx.store)).toEqual(before);
  });

  it('an edit to the same arguments (any key order) is a plain grant of the same request', async () => {
    const ctx = await setup();
    const { requestId } = await proposed(ctx);
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { amount: 200000, payment_id: 'p1' } } });
    expect(approval.approvalId).toBe(requestId);
    expect((await ctx.store.getApproval(requestId))?.status).toBe('granted');
    expect(await ctx.store.listApprovals()).toHaveLength(1);
    expect(ctx.events.find((e) => e.type === 'APPROVAL_GRANTED')?.data).toEqual({
      approver: 'alice',
      action_hash: (await ctx.store.getApproval(requestId))?.request.actionHash,
    });
  });

  it("an edit of a request whose proposer's credential has since expired is refused as that, not as a deny to lift; nothing written", async () => {
    const ctx = await setup();
    const expiresAt = new Date(ctx.clock().getTime() + 60_000).toISOString();
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 200000 }, principal: { ...PRINCIPAL, expiresAt } });
    const err = await ctx.control.execute(action, () => 'never').catch((e: unknown) => e);
    const requestId = (err as ApprovalRequired).requestId;
    ctx.advance(120_000);
    const before = await snapshot(ctx.store);
    const refused = await ctx.control
      .grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 150000 } } })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ActionDenied);
    expect(refused).toMatchObject({ reason: 'principal_expired' });
    expect((refused as Error).message).toContain(`credential expired (${expiresAt})`);
    expect((refused as Error).message).not.toContain('never lifts a deny');
    expect(await snapshot(ctx.store)).toEqual(before);
    expect((await ctx.store.getApproval(requestId))?.status).toBe('pending');
  });

  it('refuses an edit of an unknown, answered or expired request as a grant does, and bad edits naming what was wrong', async () => {
    const ctx = await setup();
    const edit = { arguments: { payment_id: 'p1', amount: 150000 } };
    await expect(ctx.control.grantApproval('apr_nope', { approver: 'a', edit })).rejects.toMatchObject({ name: 'ApprovalMismatch', reason: 'unknown' });
    const { requestId } = await proposed(ctx);
    await expect(ctx.control.grantApproval(requestId, { approver: 'a', edit: { arguments: [] as unknown as JsonObject } })).rejects.toThrow(/edit\.arguments/);
    await expect(ctx.control.grantApproval(requestId, { approver: 'a', edit: 'x' as unknown as { arguments: JsonObject } })).rejects.toBeInstanceOf(
      InvalidArgument,
    );
    await expect(ctx.control.grantApproval(requestId, { approver: 'a', edit: { arguments: { amount: 1.5 } } })).rejects.toBeInstanceOf(InvalidArgument);
    await expect(ctx.control.grantApproval(requestId, { approver: 'a', edit: { arguments: { data_scope: 'x' } } })).rejects.toThrow(/data_scope/);
    expect((await ctx.store.getApproval(requestId))?.status).toBe('pending');
    await ctx.control.denyApproval(requestId, { approver: 'bob' });
    await expect(ctx.control.grantApproval(requestId, { approver: 'a', edit })).rejects.toMatchObject({ name: 'ApprovalMismatch', reason: 'denied' });
    const second = await proposed(ctx, { payment_id: 'p2', amount: 200000 });
    ctx.advance(16 * 60_000);
    await expect(ctx.control.grantApproval(second.requestId, { approver: 'a', edit })).rejects.toMatchObject({ name: 'ApprovalMismatch', reason: 'expired' });
    expect((await ctx.store.getApproval(second.requestId))?.status).toBe('expired');
  });

  it('a store without editApproval refuses an edit clearly', async () => {
    const ctx = await setup();
    const { requestId } = await proposed(ctx);
    const bare = new Proxy(ctx.store, {
      get: (target, prop) => {
        if (prop === 'editApproval') return undefined;
        const v = Reflect.get(target, prop) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as StateStore;
    const control = new Control({ policy: ctx.control.policy, store: bare, clock: ctx.clock, logger: { warn: () => {} } });
    await expect(control.grantApproval(requestId, { approver: 'a', edit: { arguments: { payment_id: 'p1', amount: 1 } } })).rejects.toThrow(
      /cannot record an edited approval/,
    );
    expect((await ctx.store.getApproval(requestId))?.status).toBe('pending');
  });

  it("the agent's own call of the original, presenting the original request, runs the edited arguments exactly once", async () => {
    const ctx = await setup();
    const calls: unknown[] = [];
    const contexts: ExecutionContext[] = [];
    const refund = protect<{ payment_id: string; amount: number }, string>(
      (a) => {
        calls.push(a);
        return `re_${a.amount}`;
      },
      { control: ctx.control, name: 'stripe.refund' },
    );
    const err = await refund({ payment_id: 'p1', amount: 200000 }).catch((e: unknown) => e);
    const requestId = (err as ApprovalRequired).requestId;
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 120000 } } });
    expect(await refund({ payment_id: 'p1', amount: 200000 }, { approvalId: requestId })).toBe('re_120000');
    expect(calls).toEqual([{ payment_id: 'p1', amount: 120000 }]);
    expect((await ctx.store.getApproval(approval.approvalId))?.status).toBe('consumed');
    // Again: refused as consumed (or the effect as a duplicate), never run twice.
    const again = await refund({ payment_id: 'p1', amount: 200000 }, { approvalId: requestId }).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ApprovalMismatch);
    expect((again as ApprovalMismatch).reason).toBe('consumed');
    expect(calls).toHaveLength(1);

    // Through Control.execute: the executor's context names the edited action.
    const ctx2 = await setup();
    const p = await proposed(ctx2, { payment_id: 'p9', amount: 300000 });
    await ctx2.control.grantApproval(p.requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p9', amount: 250000 } } });
    const got = await ctx2.control.execute(
      p.action,
      (args, c) => {
        contexts.push(c);
        return args;
      },
      { approvalId: p.requestId },
    );
    expect(got).toEqual({ payment_id: 'p9', amount: 250000 });
    expect(contexts[0]!.action.canonicalArguments).toEqual({ payment_id: 'p9', amount: 250000 });
    expect(contexts[0]!.action.actionId).not.toBe(p.action.actionId);
    expect(contexts[0]!.effectKey).toBe('refund:p9');
  });

  it('an edit the policy would allow on its own still runs once in place of the proposal (no effect key to stop a second run)', async () => {
    const ctx = await setup();
    const { action, requestId } = await proposed(ctx);
    await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 50 } } });
    const ran: unknown[] = [];
    const run = () => ctx.control.executeWithReceipt(action, (a) => void ran.push(a), { approvalId: requestId, effectKey: null });
    const { receipt } = await run();
    expect(ran).toEqual([{ payment_id: 'p1', amount: 50 }]);
    expect(receipt.document['decision']).toBe('allow');
    expect((receipt.document['edit'] as Record<string, unknown>)['editor']).toBe('alice');
    await expect(run()).rejects.toMatchObject({ name: 'ApprovalMismatch', reason: 'consumed' });
    expect(ran).toHaveLength(1);
  });

  it('asked again without a request id, the proposal names its request answered with an edit (no second request); presented, it runs the edit', async () => {
    const ctx = await setup();
    const { action, requestId } = await proposed(ctx);
    await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 150000 } } });
    const again = await ctx.control.execute(action, () => 'never').catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ApprovalRequired);
    expect((again as ApprovalRequired).requestId).toBe(requestId);
    expect((again as Error).message).toContain('answered with edited arguments');
    expect(await ctx.store.listApprovals()).toHaveLength(2);
    expect(await ctx.control.execute(action, (a) => a['amount'], { approvalId: (again as ApprovalRequired).requestId })).toBe(150000);
    // Once the edit ran, its key (the proposal's too) is committed: asking again is refused, no new request.
    const third = await ctx.control.execute(action, () => 'never').catch((e: unknown) => e);
    expect(third).toMatchObject({ name: 'DuplicateEffect', state: 'committed', effectKey: 'refund:p1' });
    expect(await ctx.store.listApprovals('pending')).toHaveLength(0);
  });

  it('waiting through an approval provider: the answer is an edit, and the waiting call runs the edit', async () => {
    const ctx = await setup();
    const calls: unknown[] = [];
    let requestId = '';
    const refund = protect<{ payment_id: string; amount: number }, string>(
      (a) => {
        calls.push(a);
        return 'ok';
      },
      {
        control: ctx.control,
        name: 'stripe.refund',
        wait: {
          timeoutMs: 60_000,
          onWaiting: (w) => {
            requestId = w.requestId;
            void ctx.control.grantApproval(w.requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 99 } } });
          },
        },
      },
    );
    expect(await refund({ payment_id: 'p1', amount: 200000 })).toBe('ok');
    expect(calls).toEqual([{ payment_id: 'p1', amount: 99 }]);
    expect((await ctx.store.getApproval(requestId))?.status).toBe('denied');
  });

  it('the edited grant is bound to the edited hash: the original action presenting the new id is a mismatch', async () => {
    const ctx = await setup();
    const { action, requestId } = await proposed(ctx);
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 150000 } } });
    const err = await ctx.control.execute(action, () => 'ran', { approvalId: approval.approvalId }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalMismatch);
    expect((err as ApprovalMismatch).reason).toBe('mismatch');
    expect((await ctx.store.getApproval(approval.approvalId))?.status).toBe('granted');
    // A third action presenting the original id: another hash, refused as a mismatch.
    const other = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 150001 }, principal: PRINCIPAL });
    await expect(ctx.control.execute(other, () => 'ran', { approvalId: requestId })).rejects.toMatchObject({ name: 'ApprovalMismatch', reason: 'mismatch' });
    // The edited action presenting the new id runs, once.
    const edited = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 150000 }, principal: PRINCIPAL });
    expect(await ctx.control.execute(edited, (a) => a['amount'], { approvalId: approval.approvalId })).toBe(150000);
    await expect(ctx.control.execute(edited, (a) => a['amount'], { approvalId: approval.approvalId })).rejects.toBeInstanceOf(ApprovalMismatch);
  });

  it('the receipt of the run records the edit; other receipts have no edit key; the chain verifies and every receipt parses', async () => {
    const ctx = await setup();
    await ctx.control.execute(createAction({ name: 'customer.read', arguments: { id: 'c1' }, principal: PRINCIPAL }), () => 'x', { effectKey: null });
    const { action, requestId } = await proposed(ctx);
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 150000 } } });
    const result = await ctx.control.executeWithReceipt(action, () => 'done', { approvalId: requestId });
    const doc = result.receipt.document;
    expect(doc['edit']).toEqual({
      proposed_request_id: requestId,
      proposed_hash: action.actionHash,
      approved_hash: approval.actionHash,
      editor: 'alice',
      proposed_arguments: { payment_id: 'p1', amount: 200000 },
      approved_arguments: { payment_id: 'p1', amount: 150000 },
    });
    expect(doc['action_hash']).toBe(approval.actionHash);
    expect(doc['arguments']).toEqual({ payment_id: 'p1', amount: 150000 });
    expect(doc['approval_id']).toBe(approval.approvalId);
    expect(doc['approver']).toBe('alice');
    expect(doc['result']).toBe('committed');
    const rows = await ctx.store.receipts();
    expect(rows).toHaveLength(2);
    expect(JSON.parse(rows[0]!.json!)).not.toHaveProperty('edit');
    expect(verifyChain(rows, await ctx.store.chainHead()).ok).toBe(true);
    for (const r of rows) parseReceipt(r.json!);
    expect(parseReceipt(rows[1]!.json!).edit?.editor).toBe('alice');
    // A tampered edit breaks the chain.
    const tampered = rows.map((r, i) => (i === 1 ? { ...r, json: r.json!.replace('"editor":"alice"', '"editor":"mallory"') } : r));
    expect(verifyChain(tampered, await ctx.store.chainHead()).ok).toBe(false);
  });

  it('a suspended run under an edited grant resumes with the edit on its receipt', async () => {
    const ctx = await setup();
    const { action, requestId } = await proposed(ctx);
    await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p1', amount: 150000 } } });
    const err = await ctx.control
      .execute(
        action,
        () => {
          throw new Suspended('cont-edit-1');
        },
        { approvalId: requestId },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Suspended);
    const { value, receipt } = await ctx.control.resumeWithReceipt('cont-edit-1', (args) => args['amount']);
    expect(value).toBe(150000);
    expect(parseReceipt(receipt.json).edit).toMatchObject({
      proposed_request_id: requestId,
      editor: 'alice',
      approved_arguments: { payment_id: 'p1', amount: 150000 },
    });
  });

  it('parseReceipt refuses a malformed edit naming the field', () => {
    const base = {
      schema: 'ctrlrun.receipt/v3',
      receipt_id: 'r',
      action_id: 'a',
      action: 'n',
      action_hash: 'h',
      principal: { agent: 'a', user: null, claims: null, issuer: null, expires_at: null },
      resource: null,
      arguments: {},
      environment: 'production',
      decision: 'approve',
      decision_reason: 'x',
      approval_id: null,
      approver: null,
      effect_key: null,
      attempt: 1,
      result: 'committed',
      execution: null,
      would_have: null,
      error: null,
      started_at: 't',
      finished_at: 't',
      seq: 1,
      prev_hash: 'p',
      policy_hash: null,
      policy_version: null,
      controls: [],
    };
    const edit = { proposed_request_id: 'apr', proposed_hash: 'h1', approved_hash: 'h2', editor: 'e', proposed_arguments: {}, approved_arguments: {} };
    expect(parseReceipt(JSON.stringify({ ...base, edit })).edit).toEqual(edit);
    expect(() => parseReceipt(JSON.stringify({ ...base, edit: { ...edit, editor: 1 } }))).toThrow(/edit\.editor/);
    expect(() => parseReceipt(JSON.stringify({ ...base, edit: { ...edit, extra: 1 } }))).toThrow(/receipt field edit/);
    expect(() => parseReceipt(JSON.stringify({ ...base, edit: null }))).toThrow(/receipt field edit/);
    expect(() => parseReceipt(JSON.stringify({ ...base, edit: { ...edit, approved_arguments: [] } }))).toThrow(/edit\.approved_arguments/);
  });

  it("the resource is derived again from the policy's resource template", async () => {
    const ctx = await setup(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    resource: "payment:{payment_id}"
    decision: approve
`);
    const refund = protect<{ payment_id: string; amount: number }, string | null>((_a) => 'ok', { control: ctx.control, name: 'stripe.refund' });
    const err = await refund({ payment_id: 'p1', amount: 5 }).catch((e: unknown) => e);
    const requestId = (err as ApprovalRequired).requestId;
    const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p2', amount: 5 } } });
    const fresh = await ctx.store.getApproval(approval.approvalId);
    expect(fresh?.request.action.resource).toBe('payment:p2');
    const run = protect<{ payment_id: string; amount: number }, string>((_a) => 'ok', { control: ctx.control, name: 'stripe.refund' });
    await run({ payment_id: 'p1', amount: 5 }, { approvalId: requestId });
    const receipt = (await ctx.store.receipts()).at(-1)!;
    expect(JSON.parse(receipt.json!)['resource']).toBe('payment:p2');
  });

  it('two racing answers of one request (an edit and a grant, or two edits): exactly one wins', async () => {
    const ctx = await setup();
    for (const second of ['grant', 'edit', 'deny'] as const) {
      const { requestId } = await proposed(ctx, { payment_id: `p-${second}`, amount: 200000 });
      const a = ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: `p-${second}`, amount: 150000 } } });
      const b =
        second === 'grant'
          ? ctx.control.grantApproval(requestId, { approver: 'bob' })
          : second === 'deny'
            ? ctx.control.denyApproval(requestId, { approver: 'bob' })
            : ctx.control.grantApproval(requestId, { approver: 'bob', edit: { arguments: { payment_id: `p-${second}`, amount: 140000 } } });
      const settled = await Promise.allSettled([a, b]);
      expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(1);
      const granted = (await ctx.store.listApprovals('granted')).filter((r) => r.request.action.arguments['payment_id'] === `p-${second}`);
      expect(granted.length).toBeLessThanOrEqual(1);
    }
  });
});

describe('edit-then-approve: property', () => {
  const key = fc.oneof(
    fc.constantFrom('__proto__', 'constructor', 'prototype', 'a\u0000b', '\u202e', 'amount', 'payment_id', '\u001b[31m'),
    fc.string({ maxLength: 8 }),
  );
  const value = fc.oneof(fc.string({ maxLength: 12 }), fc.integer({ min: -1000, max: 1000 }), fc.boolean(), fc.constant(null));
  const args = fc
    .dictionary(key, fc.oneof(value, fc.dictionary(key, value, { maxKeys: 3 }), fc.array(value, { maxLength: 3 })), { maxKeys: 5 })
    .filter((a) => !Object.prototype.hasOwnProperty.call(a, 'data_scope'));

  it("the receipt's approved_arguments round-trip exactly and the approved hash is actionHash of the edited action", async () => {
    const ctx = await setup(`schema: ctrlrun.policy/v2
actions:
  tool.run: {decision: approve}
`);
    let n = 0;
    await fc.assert(
      fc.asyncProperty(args, async (edited) => {
        n++;
        const original = createAction({ name: 'tool.run', arguments: { n }, principal: PRINCIPAL });
        const err = await ctx.control.execute(original, () => 'never', { effectKey: null }).catch((e: unknown) => e);
        const requestId = (err as ApprovalRequired).requestId;
        const approval = await ctx.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: edited } });
        const want = createAction({ name: 'tool.run', arguments: edited, principal: PRINCIPAL });
        expect(approval.actionHash).toBe(actionHash(want));
        const { value: ranWith, receipt } = await ctx.control.executeWithReceipt(original, (a) => a, { approvalId: requestId, effectKey: null });
        expect(ranWith).toEqual(want.canonicalArguments);
        const parsed = parseReceipt(receipt.json);
        expect(parsed.edit?.approved_hash).toBe(want.actionHash);
        expect(parsed.action_hash).toBe(want.actionHash);
        expect(createAction({ name: 'tool.run', arguments: parsed.edit!.approved_arguments, principal: PRINCIPAL }).actionHash).toBe(want.actionHash);
        expect(Object.keys(parsed.edit!.approved_arguments).sort()).toEqual(Object.keys(edited).sort());
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});
