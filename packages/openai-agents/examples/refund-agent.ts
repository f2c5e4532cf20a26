// A refund agent on the OpenAI Agents SDK, protected by ctrlrun. The model is a scripted
// stand-in (the SDK's Model interface; no network): it asks for a refund that needs approval.
import { Agent, run, RunState, setTracingDisabled, Usage, type Model, type ModelResponse } from '@openai/agents';
import { z } from 'zod';
import { Control, loadPolicy } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { approveInterruption, protectTools } from '@ctrlrun/openai-agents';

setTracingDisabled(true);
const control = new Control({
  policy: loadPolicy(`schema: ctrlrun.policy/v2
actions:
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
  [
    {
      name: 'refund',
      description: 'Refund a payment',
      parameters: z.object({ payment_id: z.string(), amount: z.number().int() }),
      execute: async ({ payment_id, amount }) => ({ id: `re_${payment_id}`, amount }),
    },
  ],
  { control, names: { refund: 'stripe.refund' } },
);

const turns: ModelResponse['output'][] = [
  [{ type: 'function_call', callId: 'c1', name: 'refund', arguments: '{"payment_id":"pay_42","amount":500000}', status: 'completed' }],
  [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Refunded 5000.00.' }] }],
];
const model: Model = {
  getResponse: async () => ({ usage: new Usage(), output: turns.shift()! }),
  getStreamedResponse: () => {
    throw new Error('not scripted');
  },
};
const agent = new Agent({ name: 'support', instructions: 'Refund when asked.', model, tools });

const first = await run(agent, 'Refund payment pay_42.');
console.log('interrupted for:', first.interruptions.map((i) => `${i.name} ${i.arguments}`).join(', '));
const saved = first.state.toString(); // store it anywhere; resume later, in any process

// Later: the human approves through ctrlrun, then the run goes on.
const state = await RunState.fromString(agent, saved);
for (const item of state.getInterruptions()) await approveInterruption(state, item, { approver: 'human:ana' });
const second = await run(agent, state);
console.log('model:', second.finalOutput);
const [approval] = await control.store.listApprovals();
console.log('ctrlrun approval:', approval?.status, 'by', approval?.approver);
