// @ctrlrun/langgraph in an agent loop: a chat model (a scripted BaseChatModel, no network) calls a
// refund tool run by LangGraph's own ToolNode; the tool's protected function pauses the graph for
// a human, who approves with edited arguments; the model's next turn reads what actually ran.
import { describe, expect, it } from 'vitest';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { Command, END, MemorySaver, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';
import { Control, loadPolicy, sequentialIds } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { REFUND_POLICY } from '../../kernel/test/harness.js';
import { approvalsAsked, protectInGraph } from '@ctrlrun/langgraph';

/** A chat model answering from a script, one message per call; it keeps what it was shown. */
class ScriptedChatModel extends BaseChatModel {
  readonly shown: BaseMessage[][] = [];
  readonly #turns: AIMessage[];
  constructor(turns: AIMessage[]) {
    super({});
    this.#turns = [...turns];
  }
  _llmType(): string {
    return 'scripted';
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.shown.push(messages);
    const message = this.#turns.shift();
    if (message === undefined) throw new Error('the scripted model has no more turns');
    return { generations: [{ message, text: typeof message.content === 'string' ? message.content : '' }] };
  }
}

async function agentGraph(turns: AIMessage[]) {
  const store = await createSqlJsStore();
  const control = new Control({
    policy: loadPolicy(REFUND_POLICY),
    store,
    ids: sequentialIds(),
    principal: { agent: 'refund-agent' },
    logger: { warn: () => {} },
  });
  const refunds: unknown[] = [];
  const refund = protectInGraph(
    async (args: { payment_id: string; amount: number }) => {
      refunds.push(args);
      return { id: `re_${args.payment_id}`, amount: args.amount };
    },
    { control, name: 'stripe.refund' },
  );
  const refundTool = tool(async (args) => JSON.stringify(await refund(args)), {
    name: 'refund',
    description: 'Refund a payment',
    schema: z.object({ payment_id: z.string(), amount: z.number().int() }),
  });
  const model = new ScriptedChatModel(turns);
  const graph = new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
    .addNode('tools', new ToolNode([refundTool]))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', toolsCondition, ['tools', END])
    .addEdge('tools', 'agent')
    .compile({ checkpointer: new MemorySaver() });
  return { store, graph, model, refunds };
}

describe('an agent loop with ToolNode', () => {
  it("the human edits the amount: the tool runs once with it, and the model's next turn is told the arguments were edited and which ran", async () => {
    const { store, graph, model, refunds } = await agentGraph([
      new AIMessage({ content: '', tool_calls: [{ id: 'call_1', name: 'refund', args: { payment_id: 'pay_42', amount: 500000 } }] }),
      new AIMessage('Refunded 3000.00 (a reviewer lowered it from 5000.00).'),
    ]);
    const thread = { configurable: { thread_id: 'loop-1' } };
    const paused = await graph.invoke({ messages: [{ role: 'user', content: 'Refund pay_42 in full.' }] }, thread);
    const [asked] = approvalsAsked(paused);
    expect(asked!.action['arguments']).toEqual({ payment_id: 'pay_42', amount: 500000 });
    expect(refunds).toEqual([]);

    const done = await graph.invoke(
      new Command({
        resume: { decision: 'approve', approver: 'human:ana', request_id: asked!.request_id, edit: { arguments: { payment_id: 'pay_42', amount: 300000 } } },
      }),
      thread,
    );
    expect(refunds).toEqual([{ payment_id: 'pay_42', amount: 300000 }]);
    expect(done.messages.at(-1)!.content).toBe('Refunded 3000.00 (a reviewer lowered it from 5000.00).');
    // What the model was shown on its second turn: the tool's message says what ran.
    const told = model.shown[1]!.at(-1) as ToolMessage;
    expect(told).toBeInstanceOf(ToolMessage);
    expect(JSON.parse(told.content as string)).toMatchObject({
      edited: true,
      message: 'human:ana edited the arguments before approving (changed: "amount"); the tool ran once, with approved_arguments, not the arguments proposed.',
      approved_arguments: { payment_id: 'pay_42', amount: 300000 },
      proposed_arguments: { payment_id: 'pay_42', amount: 500000 },
      result: { id: 're_pay_42', amount: 300000 },
    });
    expect((await store.listApprovals()).map((r) => r.status)).toEqual(['denied', 'consumed']);
  });

  it('refuse before asking: after an approved refund committed, the model proposing it again gets DuplicateEffect with no interrupt and no request filed; the refund ran once', async () => {
    const call = { payment_id: 'pay_43', amount: 500000 }; // needs a human under the refund policy
    const { store, graph, model, refunds } = await agentGraph([
      new AIMessage({ content: '', tool_calls: [{ id: 'call_1', name: 'refund', args: call }] }),
      new AIMessage({ content: '', tool_calls: [{ id: 'call_2', name: 'refund', args: call }] }),
      new AIMessage('Already refunded.'),
    ]);
    const thread = { configurable: { thread_id: 'loop-2' } };
    const paused = await graph.invoke({ messages: [{ role: 'user', content: 'Refund pay_43 in full.' }] }, thread);
    const [asked] = approvalsAsked(paused);
    const done = await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked!.request_id } }), thread);
    expect(approvalsAsked(done)).toEqual([]);
    expect(done.messages.at(-1)!.content).toBe('Already refunded.');
    expect(refunds).toEqual([call]);
    expect((await store.listApprovals()).map((r) => r.status)).toEqual(['consumed']);
    // What the model was shown on its third turn: the repeat's tool message is DuplicateEffect's
    // refusal (ToolNode turns the tool's error into its message).
    const told = model.shown[2]!.at(-1) as ToolMessage;
    expect(told).toBeInstanceOf(ToolMessage);
    expect(told.tool_call_id).toBe('call_2');
    expect(String(told.content)).toContain('effect refund:pay_43 is already committed: it happened, and it will not happen twice');
  });
});
