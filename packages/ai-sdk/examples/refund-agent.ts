// A refund agent on the AI SDK, protected by ctrlrun. The model is the SDK's mock (no network):
// it looks a customer up, then asks for a refund big enough to need a human's approval.
import { generateText, stepCountIs, tool, type ModelMessage } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { Control, loadPolicy } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { protectTools } from '@ctrlrun/ai-sdk';

const control = new Control({
  policy: loadPolicy(`schema: ctrlrun.policy/v2
actions:
  customer.read: {decision: allow}
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - {when: {amount_lte: 100000}, decision: allow}
      - {when: {amount_lte: 1000000}, decision: approve}
      - decision: deny
`),
  store: await createSqlJsStore(),
  principal: { agent: 'support-agent' },
});

const tools = protectTools(
  {
    lookup: tool({
      inputSchema: z.object({ customer_id: z.string() }),
      execute: async ({ customer_id }) => ({ customer_id, plan: 'pro' }),
    }),
    refund: tool({
      inputSchema: z.object({ payment_id: z.string(), amount: z.number().int() }),
      execute: async ({ payment_id, amount }) => ({ id: `re_${payment_id}`, amount }),
    }),
  },
  { control, names: { lookup: 'customer.read', refund: 'stripe.refund' }, approver: 'human:ana' },
);

const turn = (content: object[], unified: 'tool-calls' | 'stop') => ({
  content,
  finishReason: { unified, raw: undefined },
  warnings: [],
  usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } },
});
const call = (toolCallId: string, toolName: string, input: object) =>
  turn([{ type: 'tool-call', toolCallId, toolName, input: JSON.stringify(input) }], 'tool-calls');
const model = new MockLanguageModelV3({
  doGenerate: [
    call('c1', 'lookup', { customer_id: 'cus_1' }),
    call('c2', 'refund', { payment_id: 'pay_42', amount: 500000 }),
    turn([{ type: 'text', text: 'Refunded 5000.00 to cus_1.' }], 'stop'),
  ] as never,
});

const messages: ModelMessage[] = [{ role: 'user', content: 'Refund payment pay_42 of customer cus_1.' }];
const first = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
const request = first.content.find((p) => p.type === 'tool-approval-request');
console.log('asks a human:', request?.toolCall.toolName, JSON.stringify(request?.toolCall.input));
console.log('ctrlrun pending:', (await control.store.listApprovals('pending')).length);

// The human says yes in the app's UI; the SDK's approval response goes back with the history.
messages.push(...first.response.messages, { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request!.approvalId, approved: true }] });
const second = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
console.log('model:', second.text);
const [approval] = await control.store.listApprovals();
console.log('ctrlrun approval:', approval?.status, 'by', approval?.approver);
