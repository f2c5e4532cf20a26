// What the log says when a graph pauses for a human (issue 35): the way to answer is resuming the
// thread; `npx ctrlrun approve` only where another process can open the store — never as the
// answer to the example's store, which lives in its own memory.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Annotation, Command, END, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { Control, loadPolicy } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { REFUND_POLICY } from '../../kernel/test/harness.js';
import { approvalsAsked, protectInGraph } from '@ctrlrun/langgraph';

const State = Annotation.Root({ payment_id: Annotation<string>(), amount: Annotation<number>(), refund: Annotation<unknown>() });

describe('the line logged when a graph pauses', () => {
  it('is logged once, when it pauses: the request, the Command that resumes it, and the CLI only where the store can be opened', async () => {
    const logged: string[] = [];
    const control = new Control({
      policy: loadPolicy(REFUND_POLICY),
      store: await createSqlJsStore(),
      principal: { agent: 'refund-graph' },
      logger: { warn: (line) => void logged.push(line) },
    });
    const refund = protectInGraph<{ payment_id: string; amount: number }, { id: string }>((a) => ({ id: `re_${a.payment_id}` }), {
      control,
      name: 'stripe.refund',
    });
    const graph = new StateGraph(State)
      .addNode('pay_back', async (s) => ({ refund: await refund({ payment_id: s.payment_id, amount: s.amount }) }))
      .addEdge(START, 'pay_back')
      .addEdge('pay_back', END)
      .compile({ checkpointer: new MemorySaver() });
    const thread = { configurable: { thread_id: 't' } };
    const asked = approvalsAsked(await graph.invoke({ payment_id: 'pay_1', amount: 500000 }, thread))[0]!;
    expect(logged).toEqual([
      `[ctrlrun] stripe.refund paused the graph for a human: approval request ${asked.request_id}; resume the thread with ` +
        `new Command({ resume: { decision: 'approve' | 'deny', approver, request_id: '${asked.request_id}' } }) ` +
        `(if the store is a file or database another process can open, npx ctrlrun approve ${asked.request_id} --as NAME answers it too)`,
    ]);
    const done = await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id } }), thread);
    expect(done.refund).toEqual({ id: 're_pay_1' });
    // The node re-ran with the answer at hand: nothing more is logged.
    expect(logged).toHaveLength(1);
  });

  it("the README's example (an in-memory store) never gives npx ctrlrun as the way to answer", () => {
    const r = spawnSync(process.execPath, ['--conditions=@ctrlrun/source', '--import', 'tsx', 'examples/refund-graph.ts'], {
      cwd: join(import.meta.dirname, '..'),
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\[ctrlrun\] stripe\.refund paused the graph for a human: approval request apr_[0-9a-f]{32}; resume the thread with new Command/);
    expect(r.stderr).not.toMatch(/answer with: npx ctrlrun/);
  });
});
