// @ctrlrun/openai-agents against the real @openai/agents: run() with a scripted Model (the SDK's
// Model interface), interruptions answered through ctrlrun, the run state serialized and resumed
// in another OS process over the same store.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Agent, run, RunState, tool } from '@openai/agents';
import { z } from 'zod';
import { ActionDenied, ApprovalMismatch, callbackSink, Control, InvalidArgument, loadPolicy, type StoredReceipt } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { openStore } from '@ctrlrun/store-node';
import { approvalRequestFor, approveInterruption, isEditedToolResult, protectTool, protectTools, rejectInterruption } from '@ctrlrun/openai-agents';
import { callsTool, control, refundAgent, says, ScriptedModel, type Turn } from './fixtures/agent.js';

async function setup(turns: Turn[]) {
  const store = await createSqlJsStore();
  const receipts: StoredReceipt[] = [];
  const ctrl = control(store, receipts);
  const model = new ScriptedModel(turns);
  return { store, receipts, ctrl, model, ...refundAgent(ctrl, model) };
}

describe('protectTools with run()', () => {
  it('multi-turn: the lookup runs, the refund interrupts with one ctrlrun request, approveInterruption grants it and the refund runs once', async () => {
    const ctx = await setup([
      callsTool('c1', 'lookup', { customer_id: 'cus_1' }),
      callsTool('c2', 'refund', { payment_id: 'p1', amount: 500000 }),
      says('Refunded.'),
    ]);
    const first = await run(ctx.agent, 'refund p1 for cus_1');
    expect(ctx.done.lookups).toEqual(['cus_1']);
    expect(ctx.done.refunds).toEqual([]);
    expect(first.interruptions.map((i) => [i.name, i.arguments])).toEqual([['refund', '{"payment_id":"p1","amount":500000}']]);
    const [pending] = await ctx.store.listApprovals('pending');
    expect(pending!.request.action.canonicalArguments).toEqual({ payment_id: 'p1', amount: 500000 });

    await approveInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana' });
    const second = await run(ctx.agent, first.state);
    expect(second.finalOutput).toBe('Refunded.');
    expect(ctx.done.refunds).toEqual([{ payment_id: 'p1', amount: 500000 }]);
    expect((await ctx.store.listApprovals()).map((r) => [r.status, r.approver])).toEqual([['consumed', 'human:ana']]);
    expect(ctx.receipts.at(-1)!.document).toMatchObject({
      action: 'stripe.refund',
      result: 'committed',
      approver: 'human:ana',
      approval_id: pending!.request.requestId,
    });
  });

  it("rejectInterruption records the human's no in ctrlrun and the model is told; the refund never runs", async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'p2', amount: 500000 }), says('Understood.')]);
    const first = await run(ctx.agent, 'refund p2');
    await rejectInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana', message: 'refused by ana: too much' });
    const second = await run(ctx.agent, first.state);
    expect(second.finalOutput).toBe('Understood.');
    expect(ctx.done.refunds).toEqual([]);
    expect(ctx.model.lastInput()).toContain('refused by ana: too much');
    expect((await ctx.store.listApprovals()).map((r) => [r.status, r.approver])).toEqual([['denied', 'human:ana']]);
  });

  it('a policy denial never interrupts: the model reads a refusal naming ActionDenied and a sentence built from the rules, and the refund never runs', async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'p3', amount: 5000000 }), says('Cannot.')]);
    const result = await run(ctx.agent, 'refund p3');
    expect(result.interruptions).toEqual([]);
    expect(result.finalOutput).toBe('Cannot.');
    expect(ctx.done.refunds).toEqual([]);
    expect(ctx.model.toolOutputs().at(-1)).toEqual({
      refused: true,
      error: 'ActionDenied',
      code: 'ERR_ACTION_DENIED',
      reason: 'rule[2]',
      message:
        'ActionDenied: denied: no earlier rule of stripe.refund matched: rule[0] needs amount at least 0 and amount at most 100000, rule[1] needs amount at least 0 and amount at most 1000000; amount 5000000 (rule[2]). The tool did not run.',
    });
  });

  it('a retried call with the same arguments in a new run files no second ctrlrun request', async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'p4', amount: 200000 }), callsTool('c9', 'refund', { payment_id: 'p4', amount: 200000 })]);
    const a = await run(ctx.agent, 'refund p4');
    const b = await run(ctx.agent, 'refund p4 again');
    expect(a.interruptions).toHaveLength(1);
    expect(b.interruptions).toHaveLength(1);
    expect(await ctx.store.listApprovals()).toHaveLength(1);
  });

  it('state.approve alone (not through ctrlrun) runs nothing: the model is told the request is still pending', async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'p5', amount: 200000 }), says('ok')]);
    const first = await run(ctx.agent, 'refund p5');
    first.state.approve(first.interruptions[0]!);
    await run(ctx.agent, first.state);
    expect(ctx.done.refunds).toEqual([]);
    expect(ctx.model.toolOutputs().at(-1)).toMatchObject({ refused: true, error: 'ApprovalMismatch', reason: 'pending' });
    expect((await ctx.store.listApprovals()).map((r) => r.status)).toEqual(['pending']);
  });

  it('changed arguments approved with state.approve alone are refused at invoke: no request filed for them, nothing run', async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'p9', amount: 200000 }), says('ok')]);
    const first = await run(ctx.agent, 'refund p9');
    const tampered = await RunState.fromString(ctx.agent, first.state.toString().replaceAll('\\"amount\\":200000', '\\"amount\\":900000'));
    const [item] = tampered.getInterruptions();
    expect(item!.arguments).toBe('{"payment_id":"p9","amount":900000}');
    await expect(approveInterruption(tampered, item!, { approver: 'human:ana' })).rejects.toBeInstanceOf(ApprovalMismatch);
    tampered.approve(item!);
    await run(ctx.agent, tampered);
    expect(ctx.done.refunds).toEqual([]);
    expect(ctx.model.toolOutputs().at(-1)).toMatchObject({
      error: 'ApprovalMismatch',
      reason: 'unknown',
      message: expect.stringContaining('stripe.refund: no approval request is open for these exact arguments'),
    });
    expect((await ctx.store.listApprovals()).map((r) => [r.status, r.request.action.canonicalArguments['amount']])).toEqual([['pending', 200000]]);
  });

  it("an answer carrying the request the human was shown refuses a state changed to another pending request's arguments; nothing is granted", async () => {
    const ctx = await setup([
      callsTool('c1', 'refund', { payment_id: 'p10', amount: 200000 }),
      callsTool('c2', 'refund', { payment_id: 'p10', amount: 900000 }),
      says('ok'),
    ]);
    const small = await run(ctx.agent, 'refund 2000.00 of p10');
    await run(ctx.agent, 'refund 9000.00 of p10'); // another pending request, nobody approved it
    const shown = await approvalRequestFor(small.interruptions[0]!);
    expect(shown!.request.action.canonicalArguments).toEqual({ payment_id: 'p10', amount: 200000 });
    // Between showing and answering, the saved state is changed to the other request's arguments.
    const tampered = await RunState.fromString(ctx.agent, small.state.toString().replaceAll('\\"amount\\":200000', '\\"amount\\":900000'));
    const [item] = tampered.getInterruptions();
    const err = await approveInterruption(tampered, item!, { approver: 'human:ana', requestId: shown!.request.requestId }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalMismatch);
    expect((err as ApprovalMismatch).reason).toBe('mismatch');
    await expect(rejectInterruption(tampered, item!, { approver: 'human:ana', requestId: shown!.request.requestId })).rejects.toBeInstanceOf(ApprovalMismatch);
    expect((await ctx.store.listApprovals()).map((r) => [r.request.action.canonicalArguments['amount'], r.status])).toEqual([
      [200000, 'pending'],
      [900000, 'pending'],
    ]);
    // The untouched state, answered with the request shown, goes through.
    await approveInterruption(small.state, small.interruptions[0]!, { approver: 'human:ana', requestId: shown!.request.requestId });
    await run(ctx.agent, small.state);
    expect(ctx.done.refunds).toEqual([{ payment_id: 'p10', amount: 200000 }]);
  });

  it('the same effect twice is a readable DuplicateEffect; the refund ran once', async () => {
    const ctx = await setup([
      callsTool('c1', 'refund', { payment_id: 'p6', amount: 500 }),
      callsTool('c2', 'refund', { payment_id: 'p6', amount: 500 }),
      says('done'),
    ]);
    await run(ctx.agent, 'refund p6 twice');
    expect(ctx.done.refunds).toEqual([{ payment_id: 'p6', amount: 500 }]);
    expect(ctx.model.toolOutputs()).toEqual([
      { id: 're_p6', amount: 500 },
      expect.objectContaining({ refused: true, error: 'DuplicateEffect', reason: 'committed' }),
    ]);
  });

  it('refuse before asking: after an approved refund committed, the model proposing it again gets DuplicateEffect with no interruption and no ctrlrun request filed; the refund ran once', async () => {
    const call = { payment_id: 'p20', amount: 500000 }; // needs a human under the refund policy
    const ctx = await setup([callsTool('c1', 'refund', call), callsTool('c2', 'refund', call), says('done')]);
    const first = await run(ctx.agent, 'refund p20');
    await approveInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana' });
    const second = await run(ctx.agent, first.state);
    expect(second.interruptions).toEqual([]);
    expect(second.finalOutput).toBe('done');
    expect(ctx.done.refunds).toEqual([call]);
    expect((await ctx.store.listApprovals()).map((r) => r.status)).toEqual(['consumed']);
    expect(ctx.model.toolOutputs()).toEqual([
      { id: 're_p20', amount: 500000 },
      expect.objectContaining({ refused: true, error: 'DuplicateEffect', reason: 'committed' }),
    ]);
  });
});

describe('a run state serialized and resumed in another process', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  async function pausedRun(amount: number) {
    const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-agents-'));
    dirs.push(dir);
    const db = join(dir, 'state.db');
    const store = await openStore(db);
    const ctx = { store, ...refundAgent(control(store), new ScriptedModel([callsTool('c1', 'refund', { payment_id: 'p7', amount })])) };
    const first = await run(ctx.agent, 'refund p7');
    expect(first.interruptions).toHaveLength(1);
    return { dir, db, ctx, serialized: first.state.toString() };
  }

  function resumeElsewhere(db: string, statePath: string, approver: string, edit?: object) {
    const script = join(import.meta.dirname, 'fixtures', 'resume.ts');
    const out = execFileSync(
      process.execPath,
      ['--conditions=@ctrlrun/source', '--import', 'tsx', script, db, statePath, approver, ...(edit ? [JSON.stringify(edit)] : [])],
      { encoding: 'utf8' },
    );
    return JSON.parse(out.trim().split('\n').at(-1)!) as { finalOutput: string | null; refunds: unknown[]; refused: string[]; told: unknown[] };
  }

  it('edited in this process, resumed in the other: the edit is found in the store and runs there once', async () => {
    const { dir, db, ctx, serialized } = await pausedRun(500000);
    const state = await RunState.fromString(ctx.agent, serialized);
    await approveInterruption(state, state.getInterruptions()[0]!, { approver: 'human:ana', edit: { arguments: { payment_id: 'p7', amount: 200000 } } });
    const statePath = join(dir, 'run-state.json');
    writeFileSync(statePath, state.toString());
    const other = resumeElsewhere(db, statePath, 'human:bo');
    expect(other.refused).toEqual([]);
    expect(other.refunds).toEqual([{ payment_id: 'p7', amount: 200000 }]);
    expect(other.told.at(-1)).toMatchObject({ edited: true, editor: 'human:ana', approved_arguments: { amount: 200000 } });
    expect((await ctx.store.listApprovals()).map((r) => [r.status, r.approver])).toEqual([
      ['denied', 'human:ana'],
      ['consumed', 'human:ana'],
    ]);
    await ctx.store.close();
  }, 120_000);

  it('the other process approves with edited arguments: they run there once, and the model there is told', async () => {
    const { dir, db, ctx, serialized } = await pausedRun(500000);
    const statePath = join(dir, 'run-state.json');
    writeFileSync(statePath, serialized);
    const other = resumeElsewhere(db, statePath, 'human:bo', { payment_id: 'p7', amount: 300000 });
    expect(other.refunds).toEqual([{ payment_id: 'p7', amount: 300000 }]);
    expect(other.told.at(-1)).toMatchObject({
      edited: true,
      editor: 'human:bo',
      approved_arguments: { payment_id: 'p7', amount: 300000 },
      proposed_arguments: { amount: 500000 },
    });
    expect((await ctx.store.listApprovals()).map((r) => [r.status, r.request.action.canonicalArguments['amount']])).toEqual([
      ['denied', 500000],
      ['consumed', 300000],
    ]);
    await ctx.store.close();
  }, 120_000);

  it('the other process approves through ctrlrun and the refund runs there once, bound to the request filed here', async () => {
    const { dir, db, ctx, serialized } = await pausedRun(500000);
    const [request] = await ctx.store.listApprovals('pending');
    const statePath = join(dir, 'run-state.json');
    writeFileSync(statePath, serialized);
    const other = resumeElsewhere(db, statePath, 'human:bo');
    expect(other).toMatchObject({
      finalOutput: 'Refunded.',
      refunds: [{ payment_id: 'p7', amount: 500000 }],
      refused: [],
      told: [{ id: 're_p7', amount: 500000 }],
    });
    expect(ctx.done.refunds).toEqual([]); // not in this process
    const [record] = await ctx.store.listApprovals();
    expect([record!.request.requestId, record!.status, record!.approver]).toEqual([request!.request.requestId, 'consumed', 'human:bo']);
    await ctx.store.close();
  }, 120_000);

  it('a serialized state whose arguments were changed is refused there: nothing granted, nothing run', async () => {
    const { dir, db, ctx, serialized } = await pausedRun(500000);
    const statePath = join(dir, 'run-state.json');
    const tampered = serialized.replaceAll('\\"amount\\":500000', '\\"amount\\":900000');
    expect(tampered).not.toBe(serialized);
    writeFileSync(statePath, tampered);
    const other = resumeElsewhere(db, statePath, 'human:bo');
    expect(other.refunds).toEqual([]);
    expect(other.refused).toEqual([expect.stringMatching(/^ApprovalMismatch: stripe\.refund: no approval request is open for these exact arguments/)]);
    expect((await ctx.store.listApprovals()).map((r) => r.status)).toEqual(['pending']);
    await ctx.store.close();
  }, 120_000);
});

describe('the arguments the SDK parses are the ones decided, hashed and run', () => {
  // Refunds above 1000000 are denied, above 100000 need a human, the rest run.
  const LIMITS = `schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - {when: {amount_gt: 1000000}, decision: deny}
      - {when: {amount_gt: 100000}, decision: approve}
      - decision: allow
`;
  async function coercing(turns: Turn[]) {
    const store = await createSqlJsStore();
    const receipts: StoredReceipt[] = [];
    const ctrl = new Control({
      policy: loadPolicy(LIMITS),
      store,
      principal: { agent: 'support-agent' },
      sinks: [callbackSink({ onReceipt: (r) => void receipts.push(r) })],
      logger: { warn: () => {} },
    });
    const refunds: unknown[] = [];
    const refund = protectTool(
      {
        name: 'refund',
        description: 'Refund a payment',
        // The model may write the amount as text; the schema turns "5e6" into 5000000.
        parameters: z.object({ payment_id: z.string(), amount: z.coerce.number().int() }),
        execute: async (args) => {
          refunds.push(args);
          return 'refunded';
        },
      },
      { control: ctrl, name: 'stripe.refund' },
    );
    const model = new ScriptedModel(turns);
    const agent = new Agent({ name: 'support', instructions: 'Refund when asked.', model, tools: [refund] });
    return { store, receipts, model, agent, refunds };
  }

  it('an amount written "5e6" is decided as the 5000000 the function would receive: denied, and the refund never runs', async () => {
    const ctx = await coercing([callsTool('c1', 'refund', { payment_id: 'p1', amount: '5e6' }), says('Cannot.')]);
    const result = await run(ctx.agent, 'refund p1');
    expect(result.interruptions).toEqual([]);
    expect(ctx.refunds).toEqual([]);
    expect(ctx.model.toolOutputs().at(-1)).toMatchObject({ refused: true, error: 'ActionDenied', reason: 'rule[0]' });
    expect(ctx.receipts.at(-1)!.document).toMatchObject({ result: 'denied' });
  });

  it('an amount written "5e5" asks a human about 500000; the approved function receives exactly that, as hashed', async () => {
    const ctx = await coercing([callsTool('c1', 'refund', { payment_id: 'p2', amount: '5e5' }), says('Refunded.')]);
    const first = await run(ctx.agent, 'refund p2');
    expect(first.interruptions).toHaveLength(1);
    const [pending] = await ctx.store.listApprovals('pending');
    expect(pending!.request.action.canonicalArguments).toEqual({ payment_id: 'p2', amount: 500000 });
    await approveInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana' });
    const second = await run(ctx.agent, first.state);
    expect(second.finalOutput).toBe('Refunded.');
    expect(ctx.refunds).toEqual([{ payment_id: 'p2', amount: 500000 }]);
    const receipt = ctx.receipts.at(-1)!.document;
    expect([receipt['result'], receipt['action_hash']]).toEqual(['committed', pending!.request.actionHash]);
  });

  it('an edited amount written "3e5" is parsed by the tool\'s schema: decided, granted and run as 300000', async () => {
    const ctx = await coercing([callsTool('c1', 'refund', { payment_id: 'p4', amount: 500000 }), says('ok')]);
    const first = await run(ctx.agent, 'refund p4');
    await approveInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana', edit: { arguments: { payment_id: 'p4', amount: '3e5' } } });
    await run(ctx.agent, first.state);
    expect(ctx.refunds).toEqual([{ payment_id: 'p4', amount: 300000 }]);
    expect(ctx.model.toolOutputs().at(-1)).toMatchObject({ edited: true, approved_arguments: { amount: 300000 } });
  });

  it('parsing ahead of the run calls nothing of the tool: neither execute nor its errorFunction, with an outputSchema too', async () => {
    const store = await createSqlJsStore();
    const ctrl = new Control({ policy: loadPolicy(LIMITS), store, principal: { agent: 'support-agent' }, logger: { warn: () => {} } });
    const calls: string[] = [];
    const refund = protectTool(
      {
        name: 'refund',
        description: 'Refund a payment',
        parameters: z.object({ payment_id: z.string(), amount: z.coerce.number().int() }),
        outputSchema: z.object({ id: z.string() }),
        errorFunction: () => {
          calls.push('errorFunction');
          return { id: 'error' };
        },
        execute: async ({ payment_id }) => {
          calls.push('execute');
          return { id: `re_${payment_id}` };
        },
      },
      { control: ctrl, name: 'stripe.refund' },
    );
    const model = new ScriptedModel([callsTool('c1', 'refund', { payment_id: 'p5', amount: '5e5' }), says('done')]);
    const agent = new Agent({ name: 'support', instructions: 'Refund when asked.', model, tools: [refund] });
    const first = await run(agent, 'refund p5');
    expect(first.interruptions).toHaveLength(1);
    expect(calls).toEqual([]);
    await approveInterruption(first.state, first.interruptions[0]!, { approver: 'human:ana' });
    await run(agent, first.state);
    expect(calls).toEqual(['execute']);
    expect(model.toolOutputs().at(-1)).toEqual({ id: 're_p5' });
  });

  it('arguments the schema refuses never reach the policy or the function', async () => {
    const ctx = await coercing([callsTool('c1', 'refund', { payment_id: 'p3', amount: 'lots' }), says('Sorry.')]);
    const result = await run(ctx.agent, 'refund p3');
    expect(result.interruptions).toEqual([]);
    expect(ctx.refunds).toEqual([]);
    expect(await ctx.store.listApprovals()).toEqual([]);
    expect(ctx.model.lastInput()).toContain('error');
  });
});

describe('edit, then approve', () => {
  it('approveInterruption with edited arguments: decided again, run once with them, and the model is told what ran', async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'e1', amount: 500000 }), says('Refunded 3000.00.')]);
    const first = await run(ctx.agent, 'refund e1');
    const shown = await approvalRequestFor(first.interruptions[0]!);
    await approveInterruption(first.state, first.interruptions[0]!, {
      approver: 'human:ana',
      requestId: shown!.request.requestId,
      edit: { arguments: { payment_id: 'e1', amount: 300000 } },
    });
    // Serialized between the answer and the run, as an app would keep it.
    const state = await RunState.fromString(ctx.agent, first.state.toString());
    const second = await run(ctx.agent, state);
    expect(second.finalOutput).toBe('Refunded 3000.00.');
    expect(ctx.done.refunds).toEqual([{ payment_id: 'e1', amount: 300000 }]);
    const told = ctx.model.toolOutputs().at(-1);
    expect(isEditedToolResult(told)).toBe(true);
    expect(told).toMatchObject({
      approved_arguments: { payment_id: 'e1', amount: 300000 },
      proposed_arguments: { payment_id: 'e1', amount: 500000 },
      result: { id: 're_e1', amount: 300000 },
      message: 'human:ana edited the arguments before approving (changed: "amount"); the tool ran once, with approved_arguments, not the arguments proposed.',
    });
    expect(ctx.receipts.at(-1)!.document).toMatchObject({ result: 'committed', edit: { proposed_request_id: shown!.request.requestId, editor: 'human:ana' } });
    expect((await ctx.store.listApprovals()).map((r) => r.status)).toEqual(['denied', 'consumed']);
  });

  it("an edit the policy denies fails the human's call with the rule's sentence; nothing is approved and nothing runs", async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'e2', amount: 500000 }), says('ok')]);
    const first = await run(ctx.agent, 'refund e2');
    const err = await approveInterruption(first.state, first.interruptions[0]!, {
      approver: 'human:ana',
      edit: { arguments: { payment_id: 'e2', amount: 5000000 } },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect((err as Error).message).toMatch(/is refused: denied: .*amount 5000000.*an edit never lifts a deny/);
    expect((await ctx.store.listApprovals()).map((r) => r.status)).toEqual(['pending']);
    // The state was not approved: running it again interrupts again, and nothing ran.
    const again = await run(ctx.agent, first.state);
    expect(again.interruptions).toHaveLength(1);
    expect(ctx.done.refunds).toEqual([]);
  });

  it("edited arguments go through the tool's parser: a malformed edit is refused before anything is written", async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'e3', amount: 500000 })]);
    const first = await run(ctx.agent, 'refund e3');
    const item = first.interruptions[0]!;
    for (const edit of [
      { arguments: { payment_id: 'e3', amount: 'lots' } },
      { arguments: [1] },
      { args: {} },
      { arguments: { payment_id: 'e3', amount: 1 }, extra: 1 },
    ]) {
      await expect(approveInterruption(first.state, item, { approver: 'human:ana', edit: edit as never }), JSON.stringify(edit)).rejects.toBeInstanceOf(
        InvalidArgument,
      );
    }
    expect((await ctx.store.listApprovals()).map((r) => r.status)).toEqual(['pending']);
  });
});

describe('wiring', () => {
  it('refuses what it cannot protect, and answers only its own interruptions', async () => {
    const ctx = await setup([callsTool('c1', 'refund', { payment_id: 'p8', amount: 200000 })]);
    const plain = { name: 'plain', description: 'x', parameters: z.object({}), execute: async () => 'x' };
    expect(() => protectTools([plain], { control: ctx.ctrl, names: { nope: 'x' } })).toThrow(/names\.nope: there is no tool "nope"/);
    expect(() => protectTool({ type: 'hosted_tool' } as never, { control: ctx.ctrl, name: 'x' })).toThrow(/needs the options of a function tool/);
    // A built tool parses its arguments inside; ctrlrun could not see what its execute receives.
    expect(() => protectTool(tool(plain) as never, { control: ctx.ctrl, name: 'x' })).toThrow(/not a built tool/);
    const once = protectTool(plain, { control: ctx.ctrl, name: 'x' });
    expect(() => protectTool(once as never, { control: ctx.ctrl, name: 'x' })).toThrow(/not a built tool/);
    expect(() => protectTool({ ...plain, needsApproval: true }, { control: ctx.ctrl, name: 'x' })).toThrow(/already has needsApproval/);

    const first = await run(ctx.agent, 'refund p8');
    const item = first.interruptions[0]!;
    await expect(approveInterruption(first.state, item, { approver: 'two\nlines' })).rejects.toBeInstanceOf(InvalidArgument);
    await expect(approveInterruption(first.state, { type: 'message_output_item' } as never, { approver: 'human:ana' })).rejects.toThrow(
      /expected an interruption/,
    );
    const foreign = Object.assign(Object.create(Object.getPrototypeOf(item) as object), item, { agent: { name: 'other', tools: [tool(plain)] } });
    await expect(approveInterruption(first.state, foreign, { approver: 'human:ana' })).rejects.toThrow(/not a tool protected by @ctrlrun\/openai-agents/);
    expect((await ctx.store.listApprovals()).map((r) => r.status)).toEqual(['pending']);
  });
});
