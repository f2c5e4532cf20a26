// Red team of edit-then-approve in the AI SDK adapter: the client's history names the tool, and
// an edit may come from any surface (CLI, worker, inbox) that never saw the tool's input schema.
import { describe, expect, it } from 'vitest';
import { generateText, tool, type ModelMessage } from 'ai';
import { z } from 'zod';
import { ApprovalMismatch } from '@ctrlrun/kernel';
import { approveWithEdit, isToolRefusal, protectTools } from '@ctrlrun/ai-sdk';
import { callsTool, says, scriptedModel, setup } from './support.js';

function tools() {
  const refunds: unknown[] = [];
  const notes: unknown[] = [];
  return {
    refunds,
    notes,
    tools: {
      refund: tool({
        description: 'Refund a payment',
        inputSchema: z.object({ payment_id: z.string().regex(/^p_/), amount: z.number().int() }),
        execute: async (input) => {
          refunds.push(input);
          return { ok: true };
        },
      }),
      note: tool({
        description: 'Write a note',
        inputSchema: z.record(z.string(), z.unknown()),
        execute: async (input) => {
          notes.push(input);
          return { ok: true };
        },
      }),
    },
  };
}

const NAMES = { refund: 'stripe.refund', note: 'notes.write' };

async function asked(ctx: Awaited<ReturnType<typeof setup>>, set: ReturnType<typeof tools>, model: ReturnType<typeof scriptedModel>) {
  const protectedTools = protectTools(set.tools, { control: ctx.control, names: NAMES });
  const first = await generateText({ model, tools: protectedTools, prompt: 'refund' });
  const request = first.content.find((p) => p.type === 'tool-approval-request') as { approvalId: string } | undefined;
  expect(request).toBeDefined();
  return { protectedTools, messages: [{ role: 'user', content: 'refund' } as ModelMessage, ...first.response.messages], approvalId: request!.approvalId };
}

describe('AI SDK edit-then-approve, red team', () => {
  it('approveWithEdit refuses a history that relabels the tool call as another protected tool (whose schema would admit the edit); nothing is granted', async () => {
    const ctx = await setup();
    const set = tools();
    const { protectedTools, messages, approvalId } = await asked(ctx, set, scriptedModel([callsTool('c1', 'refund', { payment_id: 'p_1', amount: 500000 })]));
    // The client renames the call's tool to the lax `note`: its schema admits a payment_id refund's refuses.
    const relabelled = structuredClone(messages).map((m) =>
      m.role !== 'assistant' || typeof m.content === 'string'
        ? m
        : { ...m, content: m.content.map((p) => (p.type === 'tool-call' ? { ...p, toolName: 'note' } : p)) },
    );
    const err = await approveWithEdit(protectedTools, {
      messages: relabelled,
      approvalId,
      arguments: { payment_id: 'x', amount: 300000 },
      approver: 'human:ana',
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalMismatch);
    expect((err as Error).message).toMatch(/stripe\.refund/);
    expect((await ctx.approvals()).map((r) => r.status)).toEqual(['pending']);
  });

  it("an edit made through another surface (CLI, worker, inbox) that the tool's input schema refuses never reaches execute: a readable refusal, the grant unused", async () => {
    const ctx = await setup();
    const set = tools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p_1', amount: 500000 }), says('done')]);
    const { protectedTools, messages, approvalId } = await asked(ctx, set, model);
    const [pending] = await ctx.approvals('pending');
    // What `ctrlrun approve --edit` does: the kernel decides the policy, not the tool's schema.
    const edited = await ctx.control.grantApproval(pending!.request.requestId, {
      approver: 'ops:bob',
      edit: { arguments: { payment_id: 'x', amount: 300000 } },
    });
    messages.push({ role: 'tool', content: [{ type: 'tool-approval-response', approvalId, approved: true }] });
    const second = await generateText({ model, tools: protectedTools, messages });
    expect(set.refunds).toEqual([]);
    const output = second.response.messages.flatMap((m) => (m.role === 'tool' ? m.content : [])).find((p) => p.type === 'tool-result') as {
      output: { value: unknown };
    };
    expect(isToolRefusal(output.output.value)).toBe(true);
    expect(JSON.stringify(output.output.value)).toMatch(/input schema/);
    expect((await ctx.store.getApproval(edited.approvalId))?.status).toBe('granted');
  });

  it('an edit made through another surface that the schema admits unchanged still runs once', async () => {
    const ctx = await setup();
    const set = tools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p_1', amount: 500000 }), says('done')]);
    const { protectedTools, messages, approvalId } = await asked(ctx, set, model);
    const [pending] = await ctx.approvals('pending');
    await ctx.control.grantApproval(pending!.request.requestId, { approver: 'ops:bob', edit: { arguments: { payment_id: 'p_2', amount: 300000 } } });
    messages.push({ role: 'tool', content: [{ type: 'tool-approval-response', approvalId, approved: true }] });
    await generateText({ model, tools: protectedTools, messages });
    expect(set.refunds).toEqual([{ payment_id: 'p_2', amount: 300000 }]);
  });
});

describe('AI SDK edit-then-approve: a schema that changes types', () => {
  it('approveWithEdit of a tool whose schema turns a string into a number runs its own output once (the execute-time check does not refuse it)', async () => {
    const ctx = await setup();
    const refunds: unknown[] = [];
    const set = {
      refund: tool({
        description: 'Refund a payment',
        inputSchema: z.object({ payment_id: z.string(), amount: z.string().transform(Number) }),
        execute: async (input) => {
          refunds.push(input);
          return { ok: true };
        },
      }),
    };
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p1', amount: '500000' }), says('done')]);
    const protectedTools = protectTools(set, { control: ctx.control, names: { refund: 'stripe.refund' } });
    const first = await generateText({ model, tools: protectedTools, prompt: 'refund' });
    const request = first.content.find((p) => p.type === 'tool-approval-request') as { approvalId: string };
    const messages: ModelMessage[] = [{ role: 'user', content: 'refund' }, ...first.response.messages];
    messages.push(
      await approveWithEdit(protectedTools, {
        messages,
        approvalId: request.approvalId,
        arguments: { payment_id: 'p1', amount: '300000' },
        approver: 'human:ana',
      }),
    );
    await generateText({ model, tools: protectedTools, messages });
    expect(refunds).toEqual([{ payment_id: 'p1', amount: 300000 }]);
  });
});
