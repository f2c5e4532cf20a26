// @ctrlrun/langgraph against the real @langchain/langgraph: a StateGraph with a MemorySaver
// checkpointer, a node calling a protected refund, resumed with Command({ resume }). No model.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Annotation, Command, END, MemorySaver, START, StateGraph, type BaseCheckpointSaver } from '@langchain/langgraph';
import {
  ActionDenied,
  ApprovalMismatch,
  callbackSink,
  Control,
  InvalidArgument,
  isEditedToolResult,
  loadPolicy,
  sequentialIds,
  viewTime,
  type EditedToolResult,
  type StateStore,
  type StoredReceipt,
} from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
// The kernel's refund policy: allow up to 100000, a human up to 1000000, deny above.
import { REFUND_POLICY } from '../../kernel/test/harness.js';
import { approvalsAsked, InterruptApprovalProvider, protectInGraph, type ApprovalInterrupt } from '@ctrlrun/langgraph';

const State = Annotation.Root({
  payment_id: Annotation<string>(),
  amount: Annotation<number>(),
  refund: Annotation<unknown>(),
  refused: Annotation<string | null>(),
});

function control(store: StateStore, receipts: StoredReceipt[] = []) {
  return new Control({
    policy: loadPolicy(REFUND_POLICY),
    store,
    ids: sequentialIds(),
    principal: { agent: 'refund-graph' },
    sinks: [callbackSink({ onReceipt: (r) => void receipts.push(r) })],
    logger: { warn: () => {} },
  });
}

/** A one-node graph: the node refunds through ctrlrun and turns a refusal into state. */
function refundGraph(ctrl: Control, checkpointer: BaseCheckpointSaver) {
  const runs = { node: 0, refunds: [] as unknown[] };
  const refund = protectInGraph<{ payment_id: string; amount: number }, { id: string }>(
    (args) => {
      runs.refunds.push(args);
      return { id: `re_${String(args['payment_id'])}` };
    },
    { control: ctrl, name: 'stripe.refund' },
  );
  const graph = new StateGraph(State)
    .addNode('pay_back', async (state) => {
      runs.node++;
      try {
        return { refund: await refund({ payment_id: state.payment_id, amount: state.amount }), refused: null };
      } catch (err) {
        if (err instanceof ActionDenied) return { refused: err.reason };
        throw err;
      }
    })
    .addEdge(START, 'pay_back')
    .addEdge('pay_back', END)
    .compile({ checkpointer });
  return { graph, runs };
}

async function setup() {
  const store = await createSqlJsStore();
  const receipts: StoredReceipt[] = [];
  const ctrl = control(store, receipts);
  const checkpointer = new MemorySaver();
  return { store, receipts, ctrl, checkpointer, ...refundGraph(ctrl, checkpointer) };
}

const thread = (id: string) => ({ configurable: { thread_id: id } });

function interruptOf(result: unknown): ApprovalInterrupt {
  const asked = approvalsAsked(result);
  expect(asked).toHaveLength(1);
  return asked[0]!;
}

describe('protectInGraph: approval through interrupt()', () => {
  it('pauses with the request; resuming re-runs the node, re-finds the same request, runs the refund once and leaves nothing pending', async () => {
    const { store, receipts, graph, runs } = await setup();
    const paused = await graph.invoke({ payment_id: 'p1', amount: 500000 }, thread('t1'));
    const asked = interruptOf(paused);
    expect(asked).toMatchObject({ type: 'ctrlrun.approval', action: { name: 'stripe.refund', arguments: { amount: 500000, payment_id: 'p1' } } });
    expect(runs.refunds).toEqual([]);
    expect((await store.listApprovals()).map((r) => [r.request.requestId, r.status])).toEqual([[asked.request_id, 'pending']]);
    // expires_at in the form of every view (UTC, milliseconds, Z), not the stored column's `+00:00`.
    expect(asked.expires_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(asked.expires_at).toBe(viewTime((await store.getApproval(asked.request_id))!.request.expiresAt));

    const done = await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id } }), thread('t1'));
    expect(done.refund).toEqual({ id: 're_p1' });
    expect(runs.node).toBe(2); // the node ran again from its start …
    expect(runs.refunds).toHaveLength(1); // … and the refund ran once
    // One request, answered and used: no second request, nothing left pending.
    const all = await store.listApprovals();
    expect(all.map((r) => [r.request.requestId, r.status, r.approver])).toEqual([[asked.request_id, 'consumed', 'human:ana']]);
    expect(receipts.at(-1)!.document).toMatchObject({ result: 'committed', approval_id: asked.request_id, approver: 'human:ana' });
  });

  it("a deny answer is recorded as the human's and the node sees ActionDenied(approval_denied); the refund never runs", async () => {
    const { store, graph, runs } = await setup();
    const asked = interruptOf(await graph.invoke({ payment_id: 'p2', amount: 500000 }, thread('t2')));
    const done = await graph.invoke(new Command({ resume: { decision: 'deny', approver: 'human:ana', request_id: asked.request_id } }), thread('t2'));
    expect(done.refused).toBe('approval_denied');
    expect(runs.refunds).toEqual([]);
    expect((await store.listApprovals()).map((r) => [r.status, r.approver])).toEqual([['denied', 'human:ana']]);
  });

  it('a stale answer (another request, another hash) pauses the graph again on the same request, granting nothing; the right answer then runs the refund once', async () => {
    const { store, receipts, graph, runs } = await setup();
    const asked = interruptOf(await graph.invoke({ payment_id: 'p14', amount: 500000 }, thread('t14')));
    const stale = { decision: 'approve', approver: 'human:ana', request_id: 'apr_other' };
    const again = interruptOf(await graph.invoke(new Command({ resume: stale }), thread('t14')));
    expect(again.request_id).toBe(asked.request_id);
    expect(again.answer_refused).toMatch(/^approval .* refused \(mismatch\): the answer is for request "apr_other", but this run waits on /);
    expect(again.edit_refused).toBeUndefined();
    const wrongHash = { decision: 'approve', approver: 'human:ana', request_id: asked.request_id, action_hash: 'sha256:' + '0'.repeat(64) };
    const third = interruptOf(await graph.invoke(new Command({ resume: wrongHash }), thread('t14')));
    expect(third.request_id).toBe(asked.request_id);
    expect(third.answer_refused).toMatch(/refused \(mismatch\): the answer was given for action "sha256:0{64}", not /);
    expect(runs.refunds).toEqual([]);
    expect((await store.listApprovals()).map((r) => r.status)).toEqual(['pending']);

    const done = await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:bo', request_id: asked.request_id } }), thread('t14'));
    expect(done.refund).toEqual({ id: 're_p14' });
    expect(runs.refunds).toEqual([{ payment_id: 'p14', amount: 500000 }]); // once
    expect((await store.listApprovals()).map((r) => [r.request.requestId, r.status, r.approver])).toEqual([[asked.request_id, 'consumed', 'human:bo']]);
    expect(receipts.filter((r) => r.document['result'] === 'committed')).toHaveLength(1);
    // The thread is finished: nothing is pending in LangGraph either.
    expect((await graph.getState(thread('t14'))).tasks.flatMap((t) => t.interrupts)).toEqual([]);
  });

  it('an answer to a request that expired while the graph waited pauses the graph again on a new request; answered, the refund runs once', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const clock = () => new Date(now);
    const store = await createSqlJsStore({ clock });
    const ctrl = new Control({
      policy: loadPolicy(REFUND_POLICY),
      store,
      ids: sequentialIds(),
      clock,
      approvalTtl: 60_000,
      principal: { agent: 'refund-graph' },
      logger: { warn: () => {} },
    });
    const { graph, runs } = refundGraph(ctrl, new MemorySaver());
    const asked = interruptOf(await graph.invoke({ payment_id: 'p15', amount: 500000 }, thread('t15')));
    now += 120_000;
    const late = { decision: 'approve', approver: 'human:ana', request_id: asked.request_id };
    const again = interruptOf(await graph.invoke(new Command({ resume: late }), thread('t15')));
    expect(again.request_id).not.toBe(asked.request_id);
    expect(again.answer_refused).toContain(`the answer is for request ${JSON.stringify(asked.request_id)}, but this run waits on ${again.request_id}`);
    expect(runs.refunds).toEqual([]);
    await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: again.request_id } }), thread('t15'));
    expect(runs.refunds).toEqual([{ payment_id: 'p15', amount: 500000 }]);
    const statuses = Object.fromEntries((await store.listApprovals()).map((r) => [r.request.requestId, r.status]));
    expect(statuses[again.request_id]).toBe('consumed');
    expect(statuses[asked.request_id]).not.toBe('granted');
  });

  it('a malformed answer pauses the graph again saying what was wrong, records nothing, and the right answer then runs the refund once', async () => {
    const cases: [unknown, RegExp][] = [
      ['yes', /resume with \{ decision: 'approve' \| 'deny', approver, request_id \}/],
      [{ decision: 'maybe', approver: 'human:ana', request_id: 'x' }, /needs decision 'approve' or 'deny', not "maybe"/],
      [{ decision: 'approve', approver: 'a\nb', request_id: 'x' }, /approver must be a non-empty, one-line string/],
      [JSON.parse('{"decision":"approve","approver":"human:ana","request_id":"x","__proto__":{"decision":"approve"}}') as object, /unknown key "__proto__"/],
      [{ decision: 'approve', approver: 'human:ana', request_id: 'x', arguments: { amount: 1 } }, /unknown key "arguments"/],
      [{ decision: { long: 'x'.repeat(500) }, approver: 'human:ana', request_id: 'x' }, /not \{"long":"x+… \(\d+ more characters\)$/],
    ];
    for (const [resume, why] of cases) {
      const { store, graph, runs } = await setup();
      const asked = interruptOf(await graph.invoke({ payment_id: 'p4', amount: 500000 }, thread('t4')));
      const fixed = typeof resume === 'object' && resume !== null && 'request_id' in resume ? { ...resume, request_id: asked.request_id } : resume;
      const again = interruptOf(await graph.invoke(new Command({ resume: fixed }), thread('t4')));
      expect(again.request_id, JSON.stringify(resume)).toBe(asked.request_id);
      expect(again.answer_refused, JSON.stringify(resume)).toMatch(why);
      expect(again.answer_refused).not.toMatch(/[\n\r]/);
      expect((await store.listApprovals()).map((r) => r.status)).toEqual(['pending']);
      await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id } }), thread('t4'));
      expect(runs.refunds).toHaveLength(1);
      expect((await store.listApprovals()).map((r) => r.status)).toEqual(['consumed']);
    }
  });

  it('an allowed action never interrupts; a denied one is refused without asking anyone', async () => {
    const { store, graph, runs } = await setup();
    const small = await graph.invoke({ payment_id: 'p5', amount: 500 }, thread('t5'));
    expect(small.refund).toEqual({ id: 're_p5' });
    const big = await graph.invoke({ payment_id: 'p6', amount: 5000000 }, thread('t6'));
    expect(big.refused).toBe('rule[2]');
    expect(runs.refunds).toHaveLength(1);
    expect(await store.listApprovals()).toEqual([]);
    expect(approvalsAsked(small)).toEqual([]);
  });

  it('resumed by a fresh Control and graph over the same store and checkpointer (another process): the same request is answered', async () => {
    const first = await setup();
    const asked = interruptOf(await first.graph.invoke({ payment_id: 'p7', amount: 500000 }, thread('t7')));
    const later = refundGraph(control(first.store), first.checkpointer);
    const done = await later.graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:bo', request_id: asked.request_id } }), thread('t7'));
    expect(done.refund).toEqual({ id: 're_p7' });
    expect(later.runs.refunds).toHaveLength(1);
    expect((await first.store.listApprovals()).map((r) => [r.status, r.approver])).toEqual([['consumed', 'human:bo']]);
  });

  it('a request granted elsewhere (the CLI) while the graph was paused is used without asking again', async () => {
    const { store, ctrl, graph, runs } = await setup();
    const asked = interruptOf(await graph.invoke({ payment_id: 'p8', amount: 500000 }, thread('t8')));
    await ctrl.grantApproval(asked.request_id, { approver: 'cli:ana' });
    const done = await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id } }), thread('t8'));
    expect(done.refund).toEqual({ id: 're_p8' });
    expect(runs.refunds).toHaveLength(1);
    expect((await store.listApprovals()).map((r) => [r.status, r.approver])).toEqual([['consumed', 'cli:ana']]);
  });

  it('approve with edited arguments: decided again, the refund runs once with them, and the result says so', async () => {
    const { store, receipts, graph, runs } = await setup();
    const asked = interruptOf(await graph.invoke({ payment_id: 'p10', amount: 500000 }, thread('t10')));
    const edit = { arguments: { payment_id: 'p10', amount: 300000 } };
    const done = await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id, edit } }), thread('t10'));
    expect(runs.refunds).toEqual([{ payment_id: 'p10', amount: 300000 }]);
    expect(isEditedToolResult(done.refund)).toBe(true);
    expect(done.refund).toMatchObject({
      edited: true,
      editor: 'human:ana',
      approved_arguments: { payment_id: 'p10', amount: 300000 },
      proposed_arguments: { payment_id: 'p10', amount: 500000 },
      result: { id: 're_p10' },
    });
    expect((done.refund as EditedToolResult).message).toBe(
      'human:ana edited the arguments before approving (changed: "amount"); the tool ran once, with approved_arguments, not the arguments proposed.',
    );
    const all = await store.listApprovals();
    expect(all.map((r) => [r.request.action.canonicalArguments['amount'], r.status])).toEqual([
      [500000, 'denied'],
      [300000, 'consumed'],
    ]);
    const receipt = receipts.at(-1)!.document;
    expect(receipt).toMatchObject({
      result: 'committed',
      edit: { proposed_request_id: asked.request_id, editor: 'human:ana', approved_arguments: { amount: 300000 } },
    });
  });

  it('an edit the policy denies pauses the graph again with the readable reason; nothing runs, and a later allowed edit runs once', async () => {
    const { store, graph, runs } = await setup();
    const asked = interruptOf(await graph.invoke({ payment_id: 'p11', amount: 500000 }, thread('t11')));
    const tooMuch = { decision: 'approve', approver: 'human:ana', request_id: asked.request_id, edit: { arguments: { payment_id: 'p11', amount: 5000000 } } };
    const again = interruptOf(await graph.invoke(new Command({ resume: tooMuch }), thread('t11')));
    expect(again.request_id).toBe(asked.request_id);
    expect(again.edit_refused).toMatch(/^the edit of approval request .* is refused: denied: .*amount 5000000.*an edit never lifts a deny/);
    expect(runs.refunds).toEqual([]);
    expect((await store.listApprovals()).map((r) => r.status)).toEqual(['pending']);

    const fine = { decision: 'approve', approver: 'human:ana', request_id: asked.request_id, edit: { arguments: { payment_id: 'p11', amount: 400000 } } };
    const done = await graph.invoke(new Command({ resume: fine }), thread('t11'));
    expect(runs.refunds).toEqual([{ payment_id: 'p11', amount: 400000 }]);
    expect(done.refund).toMatchObject({ edited: true, approved_arguments: { amount: 400000 } });
  });

  describe('a refused answer stays refused when the node re-runs (LangGraph hands every earlier answer back)', () => {
    /** The refund graph on `store` and `checkpointer` with a Control whose policy lets a human approve up to 10,000,000: a new process, after the policy was raised. */
    function raised(store: StateStore, checkpointer: BaseCheckpointSaver) {
      const ctrl = new Control({
        policy: loadPolicy(REFUND_POLICY.replace('amount_lte: 1000000', 'amount_lte: 10000000')),
        store,
        principal: { agent: 'refund-graph' },
        logger: { warn: () => {} },
      });
      return refundGraph(ctrl, checkpointer);
    }
    const tooMuch = (request_id: string) => ({
      decision: 'approve',
      approver: 'human:ana',
      request_id,
      edit: { arguments: { payment_id: 'p30', amount: 5000000 } },
    });

    it("an edit the policy refused, then the policy raised: the human's later deny stands, the edit never runs", async () => {
      const { store, checkpointer, graph } = await setup();
      const asked = interruptOf(await graph.invoke({ payment_id: 'p30', amount: 500000 }, thread('t30')));
      expect(interruptOf(await graph.invoke(new Command({ resume: tooMuch(asked.request_id) }), thread('t30'))).edit_refused).toMatch(/never lifts a deny/);
      const later = raised(store, checkpointer);
      const done = await later.graph.invoke(new Command({ resume: { decision: 'deny', approver: 'human:ana', request_id: asked.request_id } }), thread('t30'));
      expect(later.runs.refunds).toEqual([]);
      expect(done.refused).toBe('approval_denied');
      expect((await store.listApprovals()).map((r) => [r.request.action.canonicalArguments['amount'], r.status])).toEqual([[500000, 'denied']]);
    });

    it('… and a later plain approve runs what was asked, not the refused edit, once', async () => {
      const { store, checkpointer, graph } = await setup();
      const asked = interruptOf(await graph.invoke({ payment_id: 'p30', amount: 500000 }, thread('t31')));
      await graph.invoke(new Command({ resume: tooMuch(asked.request_id) }), thread('t31'));
      const later = raised(store, checkpointer);
      const done = await later.graph.invoke(
        new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id } }),
        thread('t31'),
      );
      expect(later.runs.refunds).toEqual([{ payment_id: 'p30', amount: 500000 }]);
      expect(done.refund).toEqual({ id: 're_p30' });
    });

    it("a node retried after a transient error (retryPolicy) takes the human's new answer again: it was never refused", async () => {
      const store = await createSqlJsStore();
      const ctrl = control(store);
      // The store is busy once when the approve is recorded (a transient error: SQLITE_BUSY, a dropped connection).
      const real = ctrl.grantApproval.bind(ctrl);
      let failOnce = true;
      ctrl.grantApproval = async (...a: Parameters<Control['grantApproval']>) => {
        if (failOnce) {
          failOnce = false;
          throw new Error('database is locked');
        }
        return real(...a);
      };
      const refunds: unknown[] = [];
      const refund = protectInGraph<{ payment_id: string; amount: number }, { id: string }>(
        (args) => {
          refunds.push(args);
          return { id: `re_${args.payment_id}` };
        },
        { control: ctrl, name: 'stripe.refund' },
      );
      const graph = new StateGraph(State)
        .addNode('pay_back', async (s) => ({ refund: await refund({ payment_id: s.payment_id, amount: s.amount }), refused: null }), {
          retryPolicy: { maxAttempts: 3, initialInterval: 1, jitter: false, logWarning: false, retryOn: () => true },
        })
        .addEdge(START, 'pay_back')
        .addEdge('pay_back', END)
        .compile({ checkpointer: new MemorySaver() });
      const asked = interruptOf(await graph.invoke({ payment_id: 'p34', amount: 500000 }, thread('t34')));
      const done = await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id } }), thread('t34'));
      expect(failOnce).toBe(false);
      expect(refunds).toEqual([{ payment_id: 'p34', amount: 500000 }]);
      expect(done.refund).toEqual({ id: 're_p34' });
    });

    it('answers given by interrupt id (a resume map) are told apart the same way: the refused edit stays refused, the new answer is taken', async () => {
      const { store, checkpointer, graph } = await setup();
      const first = await graph.invoke({ payment_id: 'p30', amount: 500000 }, thread('t33'));
      const byId = (result: unknown, answer: unknown): Record<string, unknown> => {
        const id = (result as { __interrupt__: { id: string }[] }).__interrupt__[0]!.id;
        return { [id]: answer };
      };
      const asked = interruptOf(first);
      const refusedOnce = await graph.invoke(new Command({ resume: byId(first, tooMuch(asked.request_id)) }), thread('t33'));
      expect(interruptOf(refusedOnce).edit_refused).toMatch(/never lifts a deny/);
      const later = raised(store, checkpointer);
      const done = await later.graph.invoke(
        new Command({ resume: byId(refusedOnce, { decision: 'deny', approver: 'human:ana', request_id: asked.request_id }) }),
        thread('t33'),
      );
      expect(later.runs.refunds).toEqual([]);
      expect(done.refused).toBe('approval_denied');
    });
  });

  it('an edit made through another surface while the graph waited runs when the node re-runs, once', async () => {
    const { ctrl, store, graph, runs } = await setup();
    const asked = interruptOf(await graph.invoke({ payment_id: 'p13', amount: 500000 }, thread('t13')));
    await ctrl.grantApproval(asked.request_id, { approver: 'cli:bo', edit: { arguments: { payment_id: 'p13', amount: 200000 } } });
    const done = await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id } }), thread('t13'));
    expect(runs.refunds).toEqual([{ payment_id: 'p13', amount: 200000 }]);
    expect(done.refund).toMatchObject({ edited: true, editor: 'cli:bo', approved_arguments: { amount: 200000 } });
    expect((await store.listApprovals()).map((r) => r.status)).toEqual(['denied', 'consumed']);
  });

  it('property: whatever arguments a human edits to, the function runs once with exactly them when the policy allows or approves them, and never otherwise', async () => {
    // The counterexample a CI run found (a digit-only id) is always tried, beside the random ones.
    const edits = fc.record({
      payment_id: fc.oneof(fc.string({ minLength: 1, maxLength: 6 }), fc.constantFrom('__proto__', 'constructor')),
      amount: fc.integer({ min: -10, max: 3_000_000 }),
    });
    await fc.assert(
      fc.asyncProperty(edits, async (args) => {
        const { store, graph, runs } = await setup();
        const asked = interruptOf(await graph.invoke({ payment_id: 'p20', amount: 500000 }, thread('t20')));
        const after = await graph
          .invoke(
            new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id, edit: { arguments: args } } }),
            thread('t20'),
          )
          .catch((e: unknown) => e);
        const statuses = (await store.listApprovals()).map((r) => r.status);
        if (/^(?:0|-?[1-9][0-9]*)$/.test(args.payment_id)) {
          // A digit-only id the effect template would spell like an integer: refused before anything
          // is written, and the graph waits for another answer.
          expect(interruptOf(after).edit_refused).toMatch(/cannot make stripe\.refund's effect key/);
          expect(runs.refunds).toEqual([]);
          expect(statuses).toEqual(['pending']);
        } else if (args.amount >= 0 && args.amount <= 1000000) {
          expect(runs.refunds).toEqual([args]);
          expect((after as { refund?: unknown }).refund).toMatchObject({ edited: true, approved_arguments: args });
          expect(statuses).toEqual(['denied', 'consumed']);
        } else {
          expect(runs.refunds).toEqual([]);
          expect(interruptOf(after).edit_refused).toMatch(/an edit never lifts a deny/);
          expect(statuses).toEqual(['pending']);
        }
      }),
      { numRuns: 25, examples: [[{ payment_id: '0', amount: 0 }]] },
    );
  }, 120_000);

  it('a malformed edit pauses the graph again saying what was wrong and records nothing', async () => {
    for (const edit of [{ amount: 1 }, { arguments: [1] }, { arguments: { amount: 1 }, note: 'x' }, 'amount=1']) {
      const { store, graph } = await setup();
      const asked = interruptOf(await graph.invoke({ payment_id: 'p12', amount: 500000 }, thread('t12')));
      const again = interruptOf(
        await graph.invoke(new Command({ resume: { decision: 'approve', approver: 'human:ana', request_id: asked.request_id, edit } }), thread('t12')),
      );
      expect(again.answer_refused, JSON.stringify(edit)).toMatch(/has an edit that is not \{ arguments: \{ … \} \}/);
      expect((await store.listApprovals()).map((r) => r.status)).toEqual(['pending']);
    }
    const { store, graph } = await setup();
    const asked = interruptOf(await graph.invoke({ payment_id: 'p12', amount: 500000 }, thread('t12b')));
    const again = interruptOf(
      await graph.invoke(
        new Command({
          resume: { decision: 'deny', approver: 'human:ana', request_id: asked.request_id, edit: { arguments: { payment_id: 'p12', amount: 1 } } },
        }),
        thread('t12b'),
      ),
    );
    expect(again.answer_refused).toMatch(/only an approval edits/);
    expect((await store.listApprovals()).map((r) => r.status)).toEqual(['pending']);
  });

  it('the provider files one request per action and refuses bad wiring', async () => {
    const { store, ctrl } = await setup();
    const provider = new InterruptApprovalProvider(ctrl);
    const probe = protectInGraph(() => 1, { control: ctrl, name: 'stripe.refund' });
    const action = await probe.action({ payment_id: 'p9', amount: 500000 });
    const a = await provider.request(action, 60_000);
    const b = await provider.request(action, 60_000);
    expect(b.requestId).toBe(a.requestId);
    expect(await store.listApprovals()).toHaveLength(1);
    await expect(provider.wait('apr_nope')).rejects.toBeInstanceOf(ApprovalMismatch);
    expect(() => new InterruptApprovalProvider(null as never)).toThrow(InvalidArgument);
    expect(() => protectInGraph(() => 1, { control: ctrl, name: 'x', wait: true } as never)).toThrow(/do not pass wait/);
  });
});
