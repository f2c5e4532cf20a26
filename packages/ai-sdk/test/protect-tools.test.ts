// @ctrlrun/ai-sdk against the real `ai` package: generateText driving the SDK's mock model,
// multi-step, with the SDK's own tool-approval flow in the middle.
import { describe, expect, it } from 'vitest';
import { generateText, stepCountIs, streamText, tool, type ModelMessage } from 'ai';
import { z } from 'zod';
import { ActionDenied, InvalidArgument } from '@ctrlrun/kernel';
import { approveWithEdit, isEditedToolResult, isToolRefusal, memoryBindings, protectTool, protectTools, type ToolRefusal } from '@ctrlrun/ai-sdk';
import { callsTool, lastPrompt, says, scriptedModel, scriptedStreamingModel, setup } from './support.js';

function supportTools() {
  const refunds: unknown[] = [];
  const lookups: unknown[] = [];
  const tools = {
    lookup: tool({
      description: 'Look a customer up',
      inputSchema: z.object({ customer_id: z.string() }),
      execute: async ({ customer_id }) => {
        lookups.push(customer_id);
        return { customer_id, plan: 'pro' };
      },
    }),
    refund: tool({
      description: 'Refund a payment',
      inputSchema: z.object({ payment_id: z.string(), amount: z.number().int() }),
      execute: async ({ payment_id, amount }) => {
        refunds.push({ payment_id, amount });
        return { id: `re_${payment_id}`, amount };
      },
    }),
  };
  return { tools, refunds, lookups };
}

const NAMES = { lookup: 'customer.read', refund: 'stripe.refund' };
const user = (content: string): ModelMessage => ({ role: 'user', content });

/** The approval requests the SDK emitted in a result. */
function approvalRequests(result: { content: readonly { type: string }[] }) {
  return result.content.filter(
    (p): p is { type: 'tool-approval-request'; approvalId: string; toolCall: { toolCallId: string; input: unknown } } => p.type === 'tool-approval-request',
  );
}

/** A copy of `messages` whose tool calls carry `input` instead: a client changing the history. */
function withToolInput(messages: readonly ModelMessage[], input: Record<string, unknown>): ModelMessage[] {
  return structuredClone(messages).map((m) => {
    if (m.role !== 'assistant' || typeof m.content === 'string') return m;
    return { ...m, content: m.content.map((p) => (p.type === 'tool-call' ? { ...p, input } : p)) };
  });
}

function answer(approvalId: string, approved: boolean, reason?: string): ModelMessage {
  return { role: 'tool', content: [{ type: 'tool-approval-response', approvalId, approved, ...(reason ? { reason } : {}) }] };
}

describe('protectTools with generateText', () => {
  it('a multi-step call: an allowed tool runs, the refund waits for the SDK approval, the approval becomes a ctrlrun grant, the refund runs once', async () => {
    const ctx = await setup();
    const { tools, refunds, lookups } = supportTools();
    const model = scriptedModel([
      callsTool('c1', 'lookup', { customer_id: 'cus_1' }),
      callsTool('c2', 'refund', { payment_id: 'p1', amount: 500000 }),
      says('Refunded 5000.00.'),
    ]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES, approver: (c) => `app:${(c as { user: string }).user}` });
    const messages: ModelMessage[] = [user('refund p1 for cus_1')];

    const first = await generateText({ model, tools: protectedTools, messages, stopWhen: stepCountIs(5), experimental_context: { user: 'ana' } });
    expect(lookups).toEqual(['cus_1']);
    expect(refunds).toEqual([]);
    const [request] = approvalRequests(first);
    expect(request?.toolCall.toolCallId).toBe('c2');
    // The SDK's request is backed by one ctrlrun request, filed for exactly these arguments.
    const pending = await ctx.approvals('pending');
    expect(pending).toHaveLength(1);
    expect(pending[0]!.request.action.name).toBe('stripe.refund');
    expect(pending[0]!.request.action.canonicalArguments).toEqual({ payment_id: 'p1', amount: 500000 });

    messages.push(...first.response.messages, answer(request!.approvalId, true));
    const second = await generateText({ model, tools: protectedTools, messages, stopWhen: stepCountIs(5), experimental_context: { user: 'ana' } });
    expect(refunds).toEqual([{ payment_id: 'p1', amount: 500000 }]);
    expect(second.text).toBe('Refunded 5000.00.');
    expect(lastPrompt(model)).toContain('re_p1');

    const [record] = await ctx.approvals();
    expect([record!.status, record!.approver]).toEqual(['consumed', 'app:ana']);
    const receipt = ctx.receipts.at(-1)!.document;
    expect([receipt['action'], receipt['result'], receipt['decision'], receipt['approval_id'], receipt['approver']]).toEqual([
      'stripe.refund',
      'committed',
      'approve',
      record!.request.requestId,
      'app:ana',
    ]);
  });

  it('a policy denial reaches the model as a readable result naming ActionDenied and its reason; the refund never runs', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p9', amount: 5000000 }), says('I cannot refund that much.')]);
    const result = await generateText({
      model,
      tools: protectTools(tools, { control: ctx.control, names: NAMES }),
      prompt: 'refund p9',
      stopWhen: stepCountIs(3),
    });
    expect(refunds).toEqual([]);
    expect(approvalRequests(result)).toEqual([]); // a deny is never put to a human
    const output = result.steps[0]!.toolResults[0]!.output;
    expect(isToolRefusal(output)).toBe(true);
    expect(output).toMatchObject({ refused: true, error: 'ActionDenied', code: 'ERR_ACTION_DENIED', reason: 'rule[2]' });
    // The sentence is built from the rules: what they asked for, and what the model passed.
    expect((output as ToolRefusal).message).toBe(
      'ActionDenied: denied: no earlier rule of stripe.refund matched: rule[0] needs amount at least 0 and amount at most 100000, rule[1] needs amount at least 0 and amount at most 1000000; amount 5000000 (rule[2]). The tool did not run.',
    );
    // The model's next call saw the refusal.
    expect(lastPrompt(model)).toContain('ActionDenied');
    expect(ctx.receipts.at(-1)!.document['result']).toBe('denied');
  });

  it('a retried call with the same arguments files no second ctrlrun request; answering either SDK request grants the one', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([
      callsTool('c1', 'refund', { payment_id: 'p2', amount: 200000 }),
      callsTool('c2', 'refund', { payment_id: 'p2', amount: 200000 }),
      says('done'),
    ]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES });
    const first = await generateText({ model, tools: protectedTools, prompt: 'refund p2' });
    const second = await generateText({ model, tools: protectedTools, prompt: 'refund p2, again' });
    const [a] = approvalRequests(first);
    const [b] = approvalRequests(second);
    expect(a!.approvalId).not.toBe(b!.approvalId); // two SDK requests …
    expect(await ctx.approvals()).toHaveLength(1); // … one ctrlrun request

    const messages: ModelMessage[] = [user('refund p2, again'), ...second.response.messages, answer(b!.approvalId, true)];
    const third = await generateText({ model, tools: protectedTools, messages });
    expect(third.text).toBe('done');
    expect(refunds).toEqual([{ payment_id: 'p2', amount: 200000 }]);
    expect((await ctx.approvals()).map((r) => r.status)).toEqual(['consumed']);
  });

  it('arguments changed after the approval was asked: nothing is granted and the refund never runs', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p3', amount: 200000 }), says('ok')]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES });
    const first = await generateText({ model, tools: protectedTools, prompt: 'refund p3' });
    const [request] = approvalRequests(first);

    // The history comes back with a bigger amount in the tool call the human approved.
    const tampered = withToolInput(first.response.messages, { payment_id: 'p3', amount: 900000 });
    const second = await generateText({ model, tools: protectedTools, messages: [user('refund p3'), ...tampered, answer(request!.approvalId, true)] });
    expect(refunds).toEqual([]);
    expect(second.text).toBe('ok');
    expect(lastPrompt(model)).toContain('ApprovalMismatch');
    expect(lastPrompt(model)).toContain('the approval was asked for other arguments than the ones in this tool call now');
    // The request for the arguments actually shown is still pending, not granted.
    expect((await ctx.approvals()).map((r) => r.status)).toEqual(['pending']);
  });

  it('a history edited to carry the arguments of another pending request grants neither request, and the refund never runs', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([
      callsTool('c1', 'refund', { payment_id: 'p12', amount: 200000 }),
      callsTool('c2', 'refund', { payment_id: 'p12', amount: 900000 }),
      says('ok'),
    ]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES });
    const small = await generateText({ model, tools: protectedTools, prompt: 'refund 2000.00 of p12' });
    // Another conversation asked for 9000.00; nobody has approved that one.
    const big = await generateText({ model, tools: protectedTools, prompt: 'refund 9000.00 of p12' });
    expect(approvalRequests(big)).toHaveLength(1);
    expect((await ctx.approvals('pending')).map((r) => r.request.action.canonicalArguments['amount'])).toEqual([200000, 900000]);

    // The human approves 2000.00; the history comes back with 9000.00 in that tool call.
    const [request] = approvalRequests(small);
    const tampered = withToolInput(small.response.messages, { payment_id: 'p12', amount: 900000 });
    const third = await generateText({
      model,
      tools: protectedTools,
      messages: [user('refund 2000.00 of p12'), ...tampered, answer(request!.approvalId, true)],
    });
    expect(third.text).toBe('ok');
    expect(refunds).toEqual([]);
    expect(lastPrompt(model)).toContain('ApprovalMismatch');
    expect(lastPrompt(model)).toContain('the approval was asked for other arguments');
    expect((await ctx.approvals()).map((r) => [r.request.action.canonicalArguments['amount'], r.status, r.approver])).toEqual([
      [200000, 'pending', null],
      [900000, 'pending', null],
    ]);
    expect(ctx.receipts.filter((r) => r.document['result'] === 'committed')).toEqual([]);
  });

  it('an approval for a tool call this process never asked about grants nothing (bindings are per tool call)', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p13', amount: 200000 }), says('ok')]);
    const asking = protectTools(tools, { control: ctx.control, names: NAMES });
    const first = await generateText({ model, tools: asking, prompt: 'refund p13' });
    const [request] = approvalRequests(first);
    // Another process, with its own (empty) bindings, receives the answer.
    const answering = protectTools(tools, { control: ctx.control, names: NAMES, bindings: memoryBindings() });
    await generateText({ model, tools: answering, messages: [user('refund p13'), ...first.response.messages, answer(request!.approvalId, true)] });
    expect(refunds).toEqual([]);
    expect(lastPrompt(model)).toContain('no approval request was asked for tool call');
    expect((await ctx.approvals()).map((r) => r.status)).toEqual(['pending']);
  });

  it('shared bindings carry the answer to another process', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p14', amount: 200000 }), says('ok')]);
    const shared = memoryBindings();
    const first = await generateText({ model, tools: protectTools(tools, { control: ctx.control, names: NAMES, bindings: shared }), prompt: 'refund p14' });
    const [request] = approvalRequests(first);
    await generateText({
      model,
      tools: protectTools(tools, { control: ctx.control, names: NAMES, bindings: shared }),
      messages: [user('refund p14'), ...first.response.messages, answer(request!.approvalId, true)],
    });
    expect(refunds).toEqual([{ payment_id: 'p14', amount: 200000 }]);
  });

  it('the same effect twice: the second call is a readable DuplicateEffect, and the refund ran once', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([
      callsTool('c1', 'refund', { payment_id: 'p4', amount: 500 }),
      callsTool('c2', 'refund', { payment_id: 'p4', amount: 500 }),
      says('done'),
    ]);
    const result = await generateText({
      model,
      tools: protectTools(tools, { control: ctx.control, names: NAMES }),
      prompt: 'refund p4',
      stopWhen: stepCountIs(4),
    });
    expect(refunds).toEqual([{ payment_id: 'p4', amount: 500 }]);
    expect(result.steps[0]!.toolResults[0]!.output).toEqual({ id: 're_p4', amount: 500 });
    expect(result.steps[1]!.toolResults[0]!.output).toMatchObject({ refused: true, error: 'DuplicateEffect', reason: 'committed' });
  });

  it('refuse before asking: after an approved refund committed, the model proposing it again gets DuplicateEffect with no SDK approval request and no ctrlrun request filed; the refund ran once', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const call = { payment_id: 'p20', amount: 500000 }; // needs a human under the refund policy
    const model = scriptedModel([callsTool('c1', 'refund', call), callsTool('c2', 'refund', call), says('done')]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES });
    const messages: ModelMessage[] = [user('refund p20')];
    const first = await generateText({ model, tools: protectedTools, messages, stopWhen: stepCountIs(5) });
    const [request] = approvalRequests(first);
    messages.push(...first.response.messages, answer(request!.approvalId, true));

    const second = await generateText({ model, tools: protectedTools, messages, stopWhen: stepCountIs(5) });
    expect(second.text).toBe('done');
    expect(refunds).toEqual([call]);
    // The repeat reached the model's second turn and was run through the tool, not put to anyone.
    expect(approvalRequests(second)).toEqual([]);
    expect((await ctx.approvals()).map((r) => r.status)).toEqual(['consumed']);
    const repeat = second.steps.flatMap((s) => s.toolResults).find((r) => r.toolCallId === 'c2');
    expect(repeat!.output).toMatchObject({ refused: true, error: 'DuplicateEffect', reason: 'committed' });
    expect(lastPrompt(model)).toContain('DuplicateEffect');
  });

  it('a denial in the SDK is never executed', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p5', amount: 200000 }), says('understood')]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES });
    const first = await generateText({ model, tools: protectedTools, prompt: 'refund p5' });
    const [request] = approvalRequests(first);
    const second = await generateText({
      model,
      tools: protectedTools,
      messages: [user('refund p5'), ...first.response.messages, answer(request!.approvalId, false, 'not this one')],
    });
    expect(second.text).toBe('understood');
    expect(refunds).toEqual([]);
    expect(lastPrompt(model)).toContain('not this one');
  });
});

describe('edit, then approve (approveWithEdit)', () => {
  it('the human approves other arguments: decided again, run once with them, and the model is told what ran', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'e1', amount: 500000 }), says('Refunded 3000.00.')]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES, approver: 'app:unused' });
    const messages: ModelMessage[] = [user('refund e1')];
    const first = await generateText({ model, tools: protectedTools, messages });
    const [request] = approvalRequests(first);
    messages.push(...first.response.messages);
    const reply = await approveWithEdit(protectedTools, {
      messages,
      approvalId: request!.approvalId,
      arguments: { payment_id: 'e1', amount: 300000 },
      approver: 'human:ana',
    });
    expect(reply).toMatchObject({ role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request!.approvalId, approved: true }] });
    messages.push(reply);
    const second = await generateText({ model, tools: protectedTools, messages });
    expect(second.text).toBe('Refunded 3000.00.');
    expect(refunds).toEqual([{ payment_id: 'e1', amount: 300000 }]);
    const output = second.response.messages.flatMap((m) => (m.role === 'tool' ? m.content : [])).find((p) => p.type === 'tool-result')!;
    const told = (output as { output: { value: unknown } }).output.value;
    expect(isEditedToolResult(told)).toBe(true);
    expect(told).toMatchObject({
      editor: 'human:ana',
      approved_arguments: { payment_id: 'e1', amount: 300000 },
      proposed_arguments: { payment_id: 'e1', amount: 500000 },
      result: { id: 're_e1', amount: 300000 },
    });
    expect(lastPrompt(model)).toContain('human:ana edited the arguments before approving (changed: \\"amount\\")');
    expect((await ctx.approvals()).map((r) => [r.request.action.canonicalArguments['amount'], r.status, r.approver])).toEqual([
      [500000, 'denied', 'human:ana'],
      [300000, 'consumed', 'human:ana'],
    ]);
    expect(ctx.receipts.at(-1)!.document).toMatchObject({
      result: 'committed',
      edit: { editor: 'human:ana', proposed_arguments: { amount: 500000 }, approved_arguments: { amount: 300000 } },
    });
  });

  it("an edit the policy denies fails the human's call with the rule's sentence; nothing is written and nothing runs", async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'e2', amount: 500000 }), says('ok')]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES });
    const first = await generateText({ model, tools: protectedTools, prompt: 'refund e2' });
    const [request] = approvalRequests(first);
    const messages = [user('refund e2'), ...first.response.messages];
    const err = await approveWithEdit(protectedTools, {
      messages,
      approvalId: request!.approvalId,
      arguments: { payment_id: 'e2', amount: 5000000 },
      approver: 'human:ana',
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect((err as Error).message).toMatch(/is refused: denied: .*amount 5000000.*an edit never lifts a deny/);
    expect((await ctx.approvals()).map((r) => r.status)).toEqual(['pending']);
    expect(refunds).toEqual([]);
  });

  it("edited arguments go through the tool's input schema, and the approval must be one of this set's tool calls", async () => {
    const ctx = await setup();
    const { tools } = supportTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'e3', amount: 500000 })]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES });
    const first = await generateText({ model, tools: protectedTools, prompt: 'refund e3' });
    const [request] = approvalRequests(first);
    const messages = [user('refund e3'), ...first.response.messages];
    const edit = (args: unknown, approvalId = request!.approvalId) =>
      approveWithEdit(protectedTools, { messages, approvalId, arguments: args as Record<string, unknown>, approver: 'human:ana' });
    await expect(edit({ payment_id: 'e3', amount: 'lots' })).rejects.toThrow(/input schema refuses the edited arguments/);
    await expect(edit({ payment_id: 'e3', amount: 1.5 })).rejects.toBeInstanceOf(InvalidArgument);
    await expect(edit([1])).rejects.toBeInstanceOf(InvalidArgument);
    await expect(edit({ payment_id: 'e3', amount: 1 }, 'nope')).rejects.toThrow(/no tool-approval-request "nope"/);
    await expect(
      approveWithEdit(tools, { messages, approvalId: request!.approvalId, arguments: { payment_id: 'e3', amount: 1 }, approver: 'human:ana' }),
    ).rejects.toThrow(/not a tool protected by @ctrlrun\/ai-sdk/);
    expect((await ctx.approvals()).map((r) => r.status)).toEqual(['pending']);
  });
});

describe('protectTools with streamText', () => {
  it('the same flow streamed: the approval request, then the granted refund runs once and the model answers', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedStreamingModel([callsTool('c1', 'refund', { payment_id: 's1', amount: 500000 }), says('Refunded.')]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES, approver: 'human:ana' });
    const messages: ModelMessage[] = [user('refund s1')];
    const first = streamText({ model, tools: protectedTools, messages, stopWhen: stepCountIs(5) });
    const parts = await first.content;
    const request = parts.find((p) => p.type === 'tool-approval-request');
    expect(request).toBeDefined();
    expect(refunds).toEqual([]);
    expect(await ctx.approvals('pending')).toHaveLength(1);

    messages.push(...(await first.response).messages, answer(request!.approvalId, true));
    const second = streamText({ model, tools: protectedTools, messages, stopWhen: stepCountIs(5) });
    expect(await second.text).toBe('Refunded.');
    expect(refunds).toEqual([{ payment_id: 's1', amount: 500000 }]);
    expect((await ctx.approvals()).map((r) => [r.status, r.approver])).toEqual([['consumed', 'human:ana']]);
  });

  it('streamed, approved with edited arguments: the edit runs once and the streamed tool result says so', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedStreamingModel([callsTool('c1', 'refund', { payment_id: 's2', amount: 500000 }), says('Refunded 2000.00.')]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES });
    const messages: ModelMessage[] = [user('refund s2')];
    const first = streamText({ model, tools: protectedTools, messages, stopWhen: stepCountIs(5) });
    const request = (await first.content).find((p) => p.type === 'tool-approval-request')!;
    messages.push(...(await first.response).messages);
    messages.push(
      await approveWithEdit(protectedTools, {
        messages,
        approvalId: request.approvalId,
        arguments: { payment_id: 's2', amount: 200000 },
        approver: 'human:ana',
      }),
    );
    const second = streamText({ model, tools: protectedTools, messages, stopWhen: stepCountIs(5) });
    expect(await second.text).toBe('Refunded 2000.00.');
    expect(refunds).toEqual([{ payment_id: 's2', amount: 200000 }]);
    expect(JSON.stringify((await second.response).messages)).toContain('edited the arguments before approving');
  });
});

describe('the arguments the SDK parses are the ones decided and run', () => {
  it('an amount the model writes as "5e6" is decided as the 5000000 the function would receive: denied, nothing runs', async () => {
    const ctx = await setup();
    const refunds: unknown[] = [];
    const refund = tool({
      inputSchema: z.object({ payment_id: z.string(), amount: z.coerce.number().int() }),
      execute: async (args) => {
        refunds.push(args);
        return 'refunded';
      },
    });
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p15', amount: '5e6' }), says('no')]);
    const result = await generateText({
      model,
      tools: protectTools({ refund }, { control: ctx.control, names: { refund: 'stripe.refund' } }),
      prompt: 'x',
      stopWhen: stepCountIs(2),
    });
    expect(refunds).toEqual([]);
    expect(result.steps[0]!.toolResults[0]!.output).toMatchObject({ refused: true, error: 'ActionDenied', reason: 'rule[2]' });
  });
});

describe('protectTool and bad input', () => {
  it('protectTool protects one tool under the given action name', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([callsTool('c1', 'payback', { payment_id: 'p6', amount: 100 }), says('ok')]);
    await generateText({
      model,
      tools: { payback: protectTool(tools.refund, { control: ctx.control, name: 'stripe.refund' }) },
      prompt: 'x',
      stopWhen: stepCountIs(2),
    });
    expect(refunds).toEqual([{ payment_id: 'p6', amount: 100 }]);
    expect(ctx.receipts.at(-1)!.document['action']).toBe('stripe.refund');
  });

  it('an unnamed action is refused as unknown_action, readable', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p7', amount: 100 }), says('ok')]);
    const result = await generateText({ model, tools: protectTools(tools, { control: ctx.control }), prompt: 'x', stopWhen: stepCountIs(2) });
    expect(refunds).toEqual([]);
    expect(result.steps[0]!.toolResults[0]!.output).toMatchObject({ error: 'ActionDenied', reason: 'unknown_action' });
  });

  it('refuses a names key with no tool, a tool with no execute, a tool that already has needsApproval, a bad approver', async () => {
    const ctx = await setup();
    const { tools } = supportTools();
    expect(() => protectTools(tools, { control: ctx.control, names: { nope: 'x' } as never })).toThrow(/names\.nope: there is no tool "nope"/);
    const clientSide = tool({ inputSchema: z.object({}) });
    expect(() => protectTools({ clientSide }, { control: ctx.control })).toThrow(/clientSide: the tool has no execute function/);
    const asks = tool({ inputSchema: z.object({}), needsApproval: true, execute: async () => 1 });
    expect(() => protectTools({ asks }, { control: ctx.control })).toThrow(/asks: the tool already has needsApproval/);
    expect(() => protectTools(tools, { control: ctx.control, approver: 'two\nlines' })).toThrow(InvalidArgument);
    expect(() => protectTools(null as never, { control: ctx.control })).toThrow(InvalidArgument);
  });
});

describe('wiring bugs are errors, not refusals', () => {
  it('an approver function giving no usable name is a tool error, and nothing is granted or run', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const model = scriptedModel([callsTool('c1', 'refund', { payment_id: 'p11', amount: 200000 }), says('ok')]);
    const protectedTools = protectTools(tools, { control: ctx.control, names: NAMES, approver: () => 'two\nlines' });
    const first = await generateText({ model, tools: protectedTools, prompt: 'refund p11' });
    const [request] = approvalRequests(first);
    const second = await generateText({
      model,
      tools: protectedTools,
      messages: [user('refund p11'), ...first.response.messages, answer(request!.approvalId, true)],
    });
    expect(refunds).toEqual([]);
    expect(JSON.stringify(second.response.messages)).toContain('the approver option gave');
    expect((await ctx.approvals()).map((r) => r.status)).toEqual(['pending']);
  });
});

describe('execute called directly', () => {
  it('with a denied approval response in the history it never runs: the open request is denied and the refusal says so', async () => {
    const ctx = await setup();
    const { tools, refunds } = supportTools();
    const refund = protectTool(tools.refund, { control: ctx.control, name: 'stripe.refund', approver: 'app:ana' });
    const input = { payment_id: 'p10', amount: 200000 };
    const needsApproval = refund.needsApproval as (input: unknown, o: { toolCallId: string; messages: ModelMessage[] }) => Promise<boolean>;
    expect(await needsApproval(input, { toolCallId: 'c1', messages: [] })).toBe(true);
    const messages: ModelMessage[] = [
      {
        role: 'assistant',
        content: [
          { type: 'tool-call', toolCallId: 'c1', toolName: 'refund', input },
          { type: 'tool-approval-request', approvalId: 'a1', toolCallId: 'c1' },
        ],
      },
      answer('a1', false, 'too much'),
    ];
    const output = await refund.execute!(input as never, { toolCallId: 'c1', messages });
    expect(output).toMatchObject({ refused: true, error: 'ApprovalMismatch', reason: 'denied' });
    expect((output as ToolRefusal).message).toContain('too much');
    expect(refunds).toEqual([]);
    expect((await ctx.approvals()).map((r) => [r.status, r.approver])).toEqual([['denied', 'app:ana']]);
  });
});
