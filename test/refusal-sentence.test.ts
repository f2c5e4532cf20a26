// One refusal sentence (issue 35): one policy, one action it denies, and the same sentence —
// explainDecision's, naming the rule and the argument it read, never the bare `rule[2]` — read
// through protect, the MCP gateway (a real SDK client over Streamable HTTP to the Gateway, the
// counting upstream in its own process), the worker's HTTP API and the AI SDK adapter. The
// machine-readable fields each surface had (reason, code, action id) are still there.
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tool } from 'ai';
import { z } from 'zod';
import { protectTool } from '@ctrlrun/ai-sdk';
import { ActionDenied, Control, explainDecision, loadPolicy, protect } from '@ctrlrun/kernel';
import { Gateway, ReceiptIds } from '@ctrlrun/mcp';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { connectUpstream, serveHttp } from '../packages/cli/src/mcp-http.js';
import { createApp, staticTokens } from '../worker/src/index.js';
import { call, httpAgent, NODE_TS, UPSTREAM, upstreamCalls, workDir } from './mcp/support.js';

// The gateway names a tool call mcp.<alias>.<tool>: every surface runs that one action.
const NAME = 'mcp.pay.refund';
const POLICY = `schema: ctrlrun.policy/v2
actions:
  ${NAME}:
    effect: "refund:{payment_id}"
    rules:
      - when: {amount_gte: 0, amount_lte: 100}
        decision: allow
      - when: {amount_gte: 0, amount_lte: 1000}
        decision: approve
      - decision: deny
`;
const ARGS = { payment_id: 'p9', amount: 5000 };
const SENTENCE =
  'denied: no earlier rule of mcp.pay.refund matched: rule[0] needs amount at least 0 and amount at most 100, rule[1] needs amount at least 0 and amount at most 1000; amount 5000 (rule[2])';

async function control(principal?: { agent: string }) {
  const store = await createSqlJsStore();
  const receiptIds = new ReceiptIds();
  const c = new Control({ policy: loadPolicy(POLICY), store, sinks: [receiptIds.sink], logger: { warn: () => {} }, ...(principal ? { principal } : {}) });
  return { store, control: c, receiptIds };
}

const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined);
});

describe('a policy denial reads the same sentence on every surface', () => {
  it('the sentence is explainDecision of the policy, the action and its arguments', () => {
    expect(explainDecision(loadPolicy(POLICY), NAME, ARGS)).toBe(SENTENCE);
  });

  it('protect: the ActionDenied it rejects with has the sentence as its message, reason rule[2]', async () => {
    const { control: c, store } = await control({ agent: 'agent-1' });
    closers.push(() => store.close());
    const ran: unknown[] = [];
    const refund = protect((a) => ran.push(a), { control: c, name: NAME });
    const err = await refund(ARGS).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect(err).toMatchObject({ message: SENTENCE, reason: 'rule[2]', code: 'ERR_ACTION_DENIED' });
    expect(ran).toEqual([]);
  });

  it('the MCP gateway: the tool error an SDK client reads carries the sentence; code -41001, reason and action id in the fields; the upstream never runs', async () => {
    const dir = workDir(POLICY);
    const log = join(dir, 'upstream.log');
    const { control: c, store, receiptIds } = await control();
    closers.push(() => store.close());
    const upstream = await connectUpstream(
      { kind: 'command', argv: [process.execPath, ...NODE_TS, UPSTREAM], env: { PATH: process.env['PATH'] ?? '', UPSTREAM_LOG: log } },
      () => {},
    );
    closers.push(() => upstream.close());
    const gateway = new Gateway({ control: c, upstream, alias: 'pay', receiptIds, principal: { agent: 'agent-1' } });
    const serving = await serveHttp({
      host: '127.0.0.1',
      port: 0,
      path: '/mcp',
      maxBodyBytes: 65536,
      allowOrigins: [],
      createServer: () => gateway.createServer(),
      sessions: true,
      refuseFloatArguments: true,
      identityHeaders: [],
    });
    closers.push(() => serving.close());
    const agent = await httpAgent(serving.url);
    closers.push(() => agent.close());
    const r = await call(agent, 'refund', ARGS);
    expect(r.refused).toBeDefined();
    expect(r.refused!.text).toBe(`ctrlrun refused this call. The tool was not called; this text is ctrlrun's, not the tool's. ${SENTENCE}`);
    expect(r.refused!.code).toBe(-41001);
    expect(r.refused!.data).toMatchObject({ error: 'ctrlrun.denied', reason: 'rule[2]', action_id: expect.stringMatching(/^act_/) });
    expect(upstreamCalls(log)).toEqual([]);
  }, 120_000);

  it('the worker: the 403 JSON refusal body carries the sentence as its message, code and reason beside it', async () => {
    const { control: c, store } = await control();
    closers.push(() => store.close());
    const ran: unknown[] = [];
    const app = createApp({
      control: c,
      executors: { [NAME]: (a) => ran.push(a) },
      auth: staticTokens([{ role: 'agent', token: 'agent-token-for-sentence-01', agent: 'agent-1' }]),
    });
    const response = await app.request('/v1/actions', {
      method: 'POST',
      headers: { authorization: 'Bearer agent-token-for-sentence-01', 'content-type': 'application/json' },
      body: JSON.stringify({ name: NAME, arguments: ARGS }),
    });
    expect(response.status).toBe(403);
    const body = (await response.json()) as { error: Record<string, unknown> };
    expect(body.error).toMatchObject({ code: 'ERR_ACTION_DENIED', message: SENTENCE, reason: 'rule[2]', actionId: expect.stringMatching(/^act_/) });
    expect(ran).toEqual([]);
  });

  it('the AI SDK adapter: the refusal the model reads is the sentence, with the class and reason', async () => {
    const { control: c, store } = await control({ agent: 'agent-1' });
    closers.push(() => store.close());
    const ran: unknown[] = [];
    const refund = protectTool(
      tool({
        description: 'refund a payment',
        inputSchema: z.object({ payment_id: z.string(), amount: z.number().int() }),
        execute: async (a) => ran.push(a),
      }),
      { control: c, name: NAME },
    );
    const output = await refund.execute!(ARGS, { toolCallId: 'c1', messages: [] });
    expect(output).toEqual({
      refused: true,
      error: 'ActionDenied',
      code: 'ERR_ACTION_DENIED',
      reason: 'rule[2]',
      message: `ActionDenied: ${SENTENCE}. The tool did not run.`,
    });
    expect(ran).toEqual([]);
  });
});
