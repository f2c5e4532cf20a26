// A wrong answer to the SDK's approval request (a stale tab, a second screen) is refused and leaves
// the ctrlrun request waiting: the right answer then runs the call once. The real `ai` package
// (generateText, its approval collection and re-validation) with its mock model.
import { describe, expect, it } from 'vitest';
import { generateText, tool, type ModelMessage } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { protectTools } from '@ctrlrun/ai-sdk';
import { callsTool, lastPrompt, says, scriptedModel, setup } from './support.js';

function refundTools() {
  const refunds: unknown[] = [];
  const tools = {
    refund: tool({
      description: 'Refund a payment',
      inputSchema: z.object({ payment_id: z.string(), amount: z.number().int() }),
      execute: async ({ payment_id, amount }) => {
        refunds.push({ payment_id, amount });
        return { id: `re_${payment_id}`, amount };
      },
    }),
  };
  return { tools, refunds };
}

const user = (content: string): ModelMessage => ({ role: 'user', content });
const answer = (approvalId: string, approved: boolean): ModelMessage => ({ role: 'tool', content: [{ type: 'tool-approval-response', approvalId, approved }] });
const approvalIdOf = (result: { content: readonly { type: string }[] }) =>
  (result.content.find((p) => p.type === 'tool-approval-request') as { approvalId: string } | undefined)?.approvalId;

describe('a wrong answer leaves the call waiting', () => {
  it('a stale tab approving a call the SDK already denied is refused, nothing recorded; the approval of the retried call then runs it once', async () => {
    const ctx = await setup();
    const { tools, refunds } = refundTools();
    const model = scriptedModel([
      callsTool('c1', 'refund', { payment_id: 'p1', amount: 500000 }),
      says('Not refunded.'),
      callsTool('c2', 'refund', { payment_id: 'p1', amount: 500000 }),
      says('That answer was for an earlier call.'),
      says('Refunded.'),
    ]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: { refund: 'stripe.refund' }, approver: 'app:ana' });
    const messages: ModelMessage[] = [user('refund p1')];
    const first = await generateText({ model, tools: protectedTools, messages });
    const x = approvalIdOf(first)!;
    // The human says no: the SDK answers the call itself (execution-denied); ctrlrun's request waits.
    messages.push(...first.response.messages, answer(x, false));
    const denied = await generateText({ model, tools: protectedTools, messages });
    expect(denied.text).toBe('Not refunded.');
    messages.push(...denied.response.messages);
    const staleTab = [...messages]; // a second tab, still showing the first call's buttons
    // Asked again, the model retries: the same ctrlrun request, a new SDK approval request.
    messages.push(user('please refund p1 after all'));
    const retried = await generateText({ model, tools: protectedTools, messages });
    const y = approvalIdOf(retried)!;
    expect(y).not.toBe(x);
    const [request] = await ctx.approvals();
    expect((await ctx.approvals()).map((r) => r.status)).toEqual(['pending']);
    messages.push(...retried.response.messages);

    // The stale tab approves the first call: the SDK executes that call again (its result is not
    // in the last message), on the history the tab holds.
    const stale = await generateText({ model, tools: protectedTools, messages: [...staleTab, answer(x, true)] });
    expect(stale.text).toBe('That answer was for an earlier call.');
    expect(lastPrompt(model)).toContain('ApprovalMismatch');
    expect(lastPrompt(model)).toContain('tool call \\"c1\\" was already answered');
    expect(refunds).toEqual([]);
    expect((await ctx.approvals()).map((r) => [r.request.requestId, r.status])).toEqual([[request!.request.requestId, 'pending']]);

    // The right answer, to the call the human is shown now, runs it once.
    const done = await generateText({ model, tools: protectedTools, messages: [...messages, answer(y, true)] });
    expect(done.text).toBe('Refunded.');
    expect(refunds).toEqual([{ payment_id: 'p1', amount: 500000 }]);
    expect((await ctx.approvals()).map((r) => [r.request.requestId, r.status, r.approver])).toEqual([[request!.request.requestId, 'consumed', 'app:ana']]);
    expect(ctx.receipts.filter((r) => r.document['result'] === 'committed')).toHaveLength(1);
  });

  it('the answer the SDK acts on is the one recorded: an earlier answer a failed call left in the history is not read in its place', async () => {
    const ctx = await setup();
    const { tools, refunds } = refundTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p2', amount: 500000 }), says('Refunded.')]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: { refund: 'stripe.refund' }, approver: 'app:ana' });
    const messages: ModelMessage[] = [user('refund p2')];
    const first = await generateText({ model, tools: protectedTools, messages });
    const x = approvalIdOf(first)!;
    messages.push(...first.response.messages);
    // A wrong click (deny) is sent, and the call fails before the SDK answered it (the provider is down).
    const down = new MockLanguageModelV3({
      doGenerate: async () => {
        throw new Error('provider unavailable');
      },
    });
    messages.push(answer(x, false));
    await expect(generateText({ model: down, tools: protectedTools, messages, maxRetries: 0 })).rejects.toThrow(/provider unavailable/);
    expect((await ctx.approvals()).map((r) => r.status)).toEqual(['pending']);
    // The human corrects it: the client appends the approval, which the SDK acts on.
    messages.push(answer(x, true));
    const done = await generateText({ model, tools: protectedTools, messages });
    expect(done.text).toBe('Refunded.');
    expect(refunds).toEqual([{ payment_id: 'p2', amount: 500000 }]);
    expect((await ctx.approvals()).map((r) => [r.status, r.approver])).toEqual([['consumed', 'app:ana']]);
  });

  it('an answer refused as mismatched (the history changed the arguments) records nothing; the retried call, answered, runs once', async () => {
    const ctx = await setup();
    const { tools, refunds } = refundTools();
    const model = scriptedModel([
      callsTool('c1', 'refund', { payment_id: 'p3', amount: 200000 }),
      says('The approval did not match; asking again.'),
      callsTool('c2', 'refund', { payment_id: 'p3', amount: 200000 }),
      says('Refunded.'),
    ]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: { refund: 'stripe.refund' } });
    const messages: ModelMessage[] = [user('refund p3')];
    const first = await generateText({ model, tools: protectedTools, messages });
    const x = approvalIdOf(first)!;
    // The history comes back with another amount in the call the human approved.
    const tampered = structuredClone(first.response.messages).map((m) =>
      m.role === 'assistant' && typeof m.content !== 'string'
        ? { ...m, content: m.content.map((p) => (p.type === 'tool-call' ? { ...p, input: { payment_id: 'p3', amount: 900000 } } : p)) }
        : m,
    );
    const refused = await generateText({ model, tools: protectedTools, messages: [...messages, ...tampered, answer(x, true)] });
    expect(lastPrompt(model)).toContain('the approval was asked for other arguments');
    expect(refunds).toEqual([]);
    const [request] = await ctx.approvals();
    expect(request!.status).toBe('pending');
    // The model asks again for the same call: the same ctrlrun request, answered now, runs it once.
    messages.push(...tampered, answer(x, true), ...refused.response.messages, user('try again'));
    const retried = await generateText({ model, tools: protectedTools, messages });
    messages.push(...retried.response.messages, answer(approvalIdOf(retried)!, true));
    const done = await generateText({ model, tools: protectedTools, messages });
    expect(done.text).toBe('Refunded.');
    expect(refunds).toEqual([{ payment_id: 'p3', amount: 200000 }]);
    expect((await ctx.approvals()).map((r) => [r.request.requestId, r.status])).toEqual([[request!.request.requestId, 'consumed']]);
  });
});
