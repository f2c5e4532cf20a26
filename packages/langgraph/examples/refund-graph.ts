// A LangGraph refund graph protected by ctrlrun: the graph pauses for a human's approval and
// resumes with their answer. No model; MemorySaver as the checkpointer. The ctrlrun store is in
// this process's memory, so only this process answers (the resume below): `npx ctrlrun approve`
// in another terminal needs a store it can open, openStore('.ctrlrun/state.db') from
// @ctrlrun/store-node or a database.
import { Annotation, Command, END, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { ActionDenied, Control, loadPolicy } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { approvalsAsked, protectInGraph } from '@ctrlrun/langgraph';

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
  principal: { agent: 'refund-graph' },
});

const refund = protectInGraph(async ({ payment_id, amount }) => ({ id: `re_${String(payment_id)}`, amount }), { control, name: 'stripe.refund' });

const State = Annotation.Root({ payment_id: Annotation<string>(), amount: Annotation<number>(), outcome: Annotation<unknown>() });
const graph = new StateGraph(State)
  .addNode('pay_back', async ({ payment_id, amount }) => {
    try {
      return { outcome: await refund({ payment_id, amount }) };
    } catch (err) {
      if (err instanceof ActionDenied) return { outcome: `refused: ${err.reason}` };
      throw err; // GraphInterrupt included: that is how the graph pauses
    }
  })
  .addEdge(START, 'pay_back')
  .addEdge('pay_back', END)
  .compile({ checkpointer: new MemorySaver() });

const thread = { configurable: { thread_id: 'refund-42' } };
const paused = await graph.invoke({ payment_id: 'pay_42', amount: 500000 }, thread);
const asked = approvalsAsked(paused)[0]!;
console.log('paused for:', asked.action['name'], JSON.stringify(asked.action['arguments']));

// The human answers (a UI, a Slack button…); the node re-runs and finds the same request.
const done = await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id } }), thread);
console.log('outcome:', JSON.stringify(done.outcome));
console.log('requests:', (await control.store.listApprovals()).map((r) => `${r.status} by ${r.approver}`).join(', '));
