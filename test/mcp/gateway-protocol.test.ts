// The gateway's protocol checks and relays (spec 04 §5), through a real SDK client over real
// Streamable HTTP on 127.0.0.1 to the Gateway (upstream: the counting MCP server as its own
// process), and `ctrlrun gateway --stdio` as a real process: MCP-Protocol-Version (-32022), the
// mirrored Mcp-Method / Mcp-Name / Mcp-Param-* headers (-32020), a 403 with WWW-Authenticate
// recorded FAILED, a float refused over stdio, and the upstream's sampling, elicitation and roots
// requests relayed to the agent's client (elicitation bounded at 8 rounds).
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, ResultSchema, type Result } from '@modelcontextprotocol/sdk/types.js';
import { Control, loadPolicy, type StateStore } from '@ctrlrun/kernel';
import { argumentSpellings, ELICITATION_ROUNDS, Gateway, headerText, RECEIPT_META_KEY, ReceiptIds } from '@ctrlrun/mcp';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { connectUpstream, serveHttp, type HttpServing } from '../../packages/cli/src/mcp-http.js';
import { call, CLI, failure, NODE_TS, receiptDocs, refusedOf, start, startHttpUpstream, UPSTREAM, upstreamCalls, workDir } from './support.js';

const TIMEOUT = 120_000;

const POLICY = `schema: ctrlrun.policy/v2
actions:
  mcp.pay.refund: {effect: "refund:{payment_id}", decision: allow}
  mcp.pay.lookup: {decision: allow}
  mcp.pay.sample: {effect: "sample:{id}", decision: allow}
  mcp.pay.elicit: {effect: "elicit:{id}", decision: allow}
  mcp.pay.roots: {effect: "roots:{id}", decision: allow}
  mcp.pay.locked: {effect: "locked:{id}", decision: allow}
  mcp.pay.forbidden: {effect: "forbidden:{id}", decision: allow}
  mcp.pay.continued: {effect: "continued:{id}", decision: allow}
`;

interface Rig {
  url: string;
  store: StateStore;
  log: string;
  close(): Promise<void>;
}

const open: Rig[] = [];
afterEach(async () => {
  for (const r of open.splice(0)) await r.close();
});

async function rig(upstreamKind: 'stdio' | 'http' = 'stdio', upstreamTimeoutMs?: number): Promise<Rig> {
  const dir = workDir(POLICY);
  const log = join(dir, 'upstream.log');
  const store = await createSqlJsStore();
  const receiptIds = new ReceiptIds();
  const control = new Control({ policy: loadPolicy(POLICY), store, sinks: [receiptIds.sink], logger: { warn: () => {} } });
  let stopUpstream: (() => Promise<unknown>) | undefined;
  let upstream: Client;
  if (upstreamKind === 'http') {
    const u = await startHttpUpstream(log);
    upstream = await connectUpstream({ kind: 'http', url: new URL(u.url) });
    stopUpstream = () => u.process.stop();
  } else {
    upstream = await connectUpstream(
      { kind: 'command', argv: [process.execPath, ...NODE_TS, UPSTREAM], env: { PATH: process.env['PATH'] ?? '', UPSTREAM_LOG: log } },
      () => {},
    );
  }
  const gateway = new Gateway({
    control,
    upstream,
    alias: 'pay',
    receiptIds,
    principal: { agent: 'agent-1' },
    ...(upstreamTimeoutMs !== undefined ? { upstreamTimeoutMs } : {}),
  });
  const serving: HttpServing = await serveHttp({
    host: '127.0.0.1',
    port: 0,
    path: '/mcp',
    maxBodyBytes: 65536,
    allowOrigins: [],
    createServer: () => gateway.createServer(),
    sessions: true,
    refuseFloatArguments: true,
  });
  const r: Rig = {
    url: serving.url,
    store,
    log,
    async close() {
      await serving.close();
      await upstream.close().catch(() => {});
      await stopUpstream?.();
      await store.close();
    },
  };
  open.push(r);
  return r;
}

/** An SDK agent that can answer sampling, elicitation and roots; `seen` lists what it was asked. */
async function capableAgent(url: string, elicitationDelayMs = 0): Promise<{ agent: Client; seen: string[]; close(): Promise<void> }> {
  const agent = new Client({ name: 'capable-agent', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: {}, roots: {} } });
  const seen: string[] = [];
  agent.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seen.push(`sampling: ${JSON.stringify(req.params.messages[0]?.content)}`);
    return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'teal' } };
  });
  agent.setRequestHandler(ElicitRequestSchema, async (req) => {
    seen.push(`elicitation: ${req.params.message}`);
    if (elicitationDelayMs > 0) await new Promise((res) => setTimeout(res, elicitationDelayMs));
    return { action: 'accept', content: { ok: true } };
  });
  agent.setRequestHandler(ListRootsRequestSchema, async () => {
    seen.push('roots');
    return { roots: [{ uri: 'file:///work/repo', name: 'repo' }] };
  });
  await agent.connect(new StreamableHTTPClientTransport(new URL(url)));
  return { agent, seen, close: () => agent.close() };
}

/** A raw POST to the gateway; the answer's JSON-RPC message (from JSON or the last SSE `data:` line). */
async function post(
  url: string,
  body: string,
  headers: Record<string, string> = {},
  method = 'POST',
): Promise<{ status: number; message: Record<string, unknown> | null }> {
  const res = await fetch(url, {
    method,
    ...(method === 'POST' ? { body } : {}),
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
  });
  const text = await res.text();
  if (text === '') return { status: res.status, message: null };
  if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const data = text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6))
      .filter((l) => l.trim() !== '');
    return { status: res.status, message: data.length === 0 ? null : (JSON.parse(data[data.length - 1]!) as Record<string, unknown>) };
  }
  return { status: res.status, message: JSON.parse(text) as Record<string, unknown> };
}

function errorOf(m: Record<string, unknown> | null): { code: number; message: string } | undefined {
  return m?.['error'] as { code: number; message: string } | undefined;
}

describe('gateway: MCP-Protocol-Version and the mirrored headers', () => {
  it(
    'the SDK client works as it is; an unaccepted MCP-Protocol-Version is 400 -32022 (2024-11-05 included) on POST and GET, before anything runs',
    async () => {
      const r = await rig();
      // The installed SDK client sends no header on initialize (= 2025-03-26), then the revision it negotiated.
      const { agent, close } = await capableAgent(r.url);
      try {
        expect(failure(await call(agent, 'refund', { payment_id: 'v1', amount: 5 }))).toBeUndefined();
        const session = (agent.transport as StreamableHTTPClientTransport).sessionId!;
        for (const version of ['2024-11-05', '1999-01-01', '2025-11-25, 2025-06-18']) {
          const refused = await post(
            r.url,
            JSON.stringify({ jsonrpc: '2.0', id: 41, method: 'tools/call', params: { name: 'refund', arguments: { payment_id: 'v2', amount: 5 } } }),
            {
              'mcp-session-id': session,
              'mcp-protocol-version': version,
            },
          );
          expect(refused.status, version).toBe(400);
          expect(refused.message).toMatchObject({ id: 41, error: { code: -32022 } });
          expect(errorOf(refused.message)!.message).toContain('2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26');
        }
        const get = await post(r.url, '', { 'mcp-session-id': session, 'mcp-protocol-version': '2024-11-05' }, 'GET');
        expect(get.status).toBe(400);
        expect(errorOf(get.message)?.code).toBe(-32022);
        // Each accepted revision passes (the newest the SDK does not know is handed to it as its own).
        for (const [i, version] of ['2025-11-25', '2025-06-18', '2025-03-26'].entries()) {
          const ok = await post(r.url, JSON.stringify({ jsonrpc: '2.0', id: 50 + i, method: 'tools/call', params: { name: 'lookup', arguments: {} } }), {
            'mcp-session-id': session,
            'mcp-protocol-version': version,
          });
          expect(ok.status, version).toBe(200);
          expect(ok.message).toMatchObject({ id: 50 + i, result: { content: [{ type: 'text', text: 'lookup done' }] } });
        }
        const newest = await post(r.url, JSON.stringify({ jsonrpc: '2.0', id: 60, method: 'tools/call', params: { name: 'lookup', arguments: {} } }), {
          'mcp-session-id': session,
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/call',
          'mcp-name': 'lookup',
        });
        expect(newest.status).toBe(200);
        expect(newest.message).toMatchObject({ id: 60, result: { content: [{ type: 'text', text: 'lookup done' }] } });
        expect(upstreamCalls(r.log).map((c) => c.tool)).toEqual(['refund', 'lookup', 'lookup', 'lookup', 'lookup']);
      } finally {
        await close();
      }
    },
    TIMEOUT,
  );

  it(
    'Mcp-Method, Mcp-Name and Mcp-Param-* are required on 2026-07-28, checked against the body whenever present (400 -32020, nothing runs), base64 sentinels decoded',
    async () => {
      const r = await rig();
      const { agent, close } = await capableAgent(r.url);
      try {
        const session = (agent.transport as StreamableHTTPClientTransport).sessionId!;
        const refund = (id: number, args: string) => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"refund","arguments":${args}}}`;
        const send = (body: string, headers: Record<string, string>) => post(r.url, body, { 'mcp-session-id': session, ...headers });
        const base = '{"payment_id":"h1","amount":50,"urgent":true,"note":{"a":1}}';
        const refused: Array<[string, Record<string, string>, string?]> = [
          // Required on 2026-07-28.
          ['no Mcp-Method on 2026-07-28', { 'mcp-protocol-version': '2026-07-28', 'mcp-name': 'refund' }],
          ['no Mcp-Name on 2026-07-28', { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call' }],
          // Checked whenever present, on any revision.
          ['another method', { 'mcp-method': 'tools/list' }],
          ['another tool', { 'mcp-name': 'lookup' }],
          ['a differently cased method', { 'mcp-method': 'Tools/Call' }],
          ['an int that is not the body int', { 'mcp-param-amount': '500' }],
          ['an int spelled otherwise', { 'mcp-param-amount': '50.0' }],
          ['a bool spelled otherwise', { 'mcp-param-urgent': 'True' }],
          ['a string that is not the body text', { 'mcp-param-payment_id': 'h2' }],
          ['an object, which never agrees', { 'mcp-param-note': '{"a":1}' }],
          ['an argument the body does not have', { 'mcp-param-currency': 'EUR' }],
          ['a base64 sentinel that is not base64', { 'mcp-param-payment_id': '=?base64?%%%?=' }],
          ['a base64 sentinel of another text', { 'mcp-param-payment_id': `=?base64?${btoa('h2')}?=` }],
          // The body's spelling decides: 50.0 is not the header's 50.
          ['a float in the body', { 'mcp-param-amount': '50' }, '{"payment_id":"h1","amount":50.0}'],
        ];
        for (const [i, [what, headers, args]] of refused.entries()) {
          const got = await send(refund(100 + i, args ?? base), headers);
          expect(got.status, what).toBe(400);
          expect(got.message, what).toMatchObject({ id: 100 + i, error: { code: -32020 } });
        }
        expect(errorOf((await send(refund(1, base), { 'mcp-method': 'tools/list' })).message)!.message).toBe(
          'header mismatch: Mcp-Method "tools/list" is not the body\'s method "tools/call"; the body decides, and the headers must say what it says',
        );
        expect(upstreamCalls(r.log)).toEqual([]);
        expect(await r.store.receipts()).toEqual([]);

        // Headers that agree: exact text, JSON spellings, a base64 sentinel, a header name in any case.
        const agreed = await send(refund(200, base), {
          'mcp-protocol-version': '2026-07-28',
          'Mcp-Method': 'tools/call',
          'mcp-name': `=?base64?${btoa('refund')}?=`,
          'Mcp-Param-Amount': '50',
          'mcp-param-urgent': 'true',
          'mcp-param-payment_id': `=?base64?${btoa('h1')}?=`,
        });
        expect(agreed.status).toBe(200);
        expect(agreed.message).toMatchObject({ id: 200, result: { content: [{ type: 'text', text: 'refund done' }] } });
        // A string argument agrees with the header's text, digits or not.
        const text = await send(refund(201, '{"payment_id":"h3","amount":1,"memo":"500"}'), { 'mcp-param-memo': '500' });
        expect(text.message).toMatchObject({ id: 201, result: { content: [{ type: 'text', text: 'refund done' }] } });
        expect(upstreamCalls(r.log).map((c) => c.arguments['payment_id'])).toEqual(['h1', 'h3']);
      } finally {
        await close();
      }
    },
    TIMEOUT,
  );

  it('the pieces: the base64 sentinel and the body spellings JSON.parse keeps', () => {
    expect(headerText(`=?base64?${Buffer.from('naïve ✓').toString('base64')}?=`)).toBe('naïve ✓');
    expect(headerText('=?base64?/w==?=')).toBeNull(); // 0xff is not UTF-8
    expect(headerText(' plain ')).toBe('plain');
    const spellings = argumentSpellings(
      '{"params":{"arguments":{"a":1},"x":[1,{"b":"}"}]},"id":1,"params":{"name":"t","arguments":{"a":2e0,"s":"x\\"y","n":-12,"o":{"k":[1,2]},"a":3}}}',
    );
    expect(Object.fromEntries(spellings)).toEqual({ a: '3', s: '"x\\"y"', n: '-12', o: '{"k":[1,2]}' });
  });
});

describe('gateway: an upstream 403', () => {
  it(
    'with WWW-Authenticate it never ran: FAILED, -41011; a bare 403 stays AMBIGUOUS, -41010',
    async () => {
      const r = await rig('http');
      const { agent, close } = await capableAgent(r.url);
      try {
        const locked = await call(agent, 'locked', { id: 'l1' });
        expect(locked.refused?.code).toBe(-41011);
        expect(locked.refused?.data).toMatchObject({ error: 'ctrlrun.upstream_not_executed', effect_key: 'locked:l1' });
        expect(locked.refused?.text).toContain('WWW-Authenticate');
        expect(locked.result?._meta?.[RECEIPT_META_KEY]).toMatchObject({ result: 'failed', effect_key: 'locked:l1' });
        expect((await r.store.getEffect('locked:l1'))?.state).toBe('failed');
        const bare = await call(agent, 'forbidden', { id: 'f1' });
        expect(bare.refused?.code).toBe(-41010);
        expect((await r.store.getEffect('forbidden:f1'))?.state).toBe('ambiguous');
        // Both reached the server, which refused them before any tool ran.
        expect(upstreamCalls(r.log).map((c) => c.tool)).toEqual(['403:locked', '403:forbidden']);
        // FAILED means not run: the same call may be sent again.
        expect((await call(agent, 'locked', { id: 'l1' })).refused?.code).toBe(-41011);
        expect((await receiptDocs(r.store)).map((d) => `${String(d['action'])} ${String(d['result'])}`)).toEqual([
          'mcp.pay.locked failed',
          'mcp.pay.forbidden ambiguous',
          'mcp.pay.locked failed',
        ]);
      } finally {
        await close();
      }
    },
    TIMEOUT,
  );
});

describe("gateway: the upstream's own requests reach the agent's client", () => {
  it(
    'sampling/createMessage, elicitation/create and roots/list go to the SDK client and its answers back; the calls commit',
    async () => {
      const r = await rig();
      const { agent, seen, close } = await capableAgent(r.url);
      try {
        const sampled = await call(agent, 'sample', { id: 's1' });
        expect(failure(sampled)).toBeUndefined();
        expect(sampled.result?.content).toEqual([{ type: 'text', text: 'sampled: teal (test-model)' }]);
        expect(sampled.result?._meta?.[RECEIPT_META_KEY]).toMatchObject({ result: 'committed', effect_key: 'sample:s1' });
        const elicited = await call(agent, 'elicit', { id: 'e1', rounds: 2 });
        expect(elicited.result?.content).toEqual([{ type: 'text', text: JSON.stringify([{ ok: true }, { ok: true }]) }]);
        const roots = await call(agent, 'roots', { id: 'r1' });
        expect(roots.result?.content).toEqual([{ type: 'text', text: 'file:///work/repo' }]);
        expect(seen).toEqual(['sampling: {"type":"text","text":"name a colour"}', 'elicitation: round 1?', 'elicitation: round 2?', 'roots']);
        expect((await receiptDocs(r.store)).map((d) => `${String(d['action'])} ${String(d['result'])}`)).toEqual([
          'mcp.pay.sample committed',
          'mcp.pay.elicit committed',
          'mcp.pay.roots committed',
        ]);
      } finally {
        await close();
      }
    },
    TIMEOUT,
  );

  it(
    'the upstream timeout stands still while the agent answers: an elicitation answered after longer than upstreamTimeoutMs, and the call commits',
    async () => {
      const r = await rig('stdio', 4000);
      const { agent, seen, close } = await capableAgent(r.url, 6000);
      try {
        const slow = await call(agent, 'elicit', { id: 'slow1', rounds: 1 });
        expect(failure(slow)).toBeUndefined();
        expect(slow.result?.content).toEqual([{ type: 'text', text: JSON.stringify([{ ok: true }]) }]);
        expect(seen).toEqual(['elicitation: round 1?']);
        expect((await r.store.getEffect('elicit:slow1'))?.state).toBe('committed');
      } finally {
        await close();
      }
    },
    TIMEOUT,
  );

  it(
    `elicitation is bounded at ${ELICITATION_ROUNDS} rounds a call: the next is refused to the upstream and the call is AMBIGUOUS, -41010`,
    async () => {
      const r = await rig();
      const { agent, seen, close } = await capableAgent(r.url);
      try {
        const over = await call(agent, 'elicit', { id: 'e9', rounds: ELICITATION_ROUNDS + 1 });
        expect(over.refused?.code).toBe(-41010);
        expect(over.refused?.text).toContain(`more than ${ELICITATION_ROUNDS} elicitation rounds`);
        expect(seen).toHaveLength(ELICITATION_ROUNDS);
        expect((await r.store.getEffect('elicit:e9'))?.state).toBe('ambiguous');
        // Within the bound, the same tool commits.
        expect(failure(await call(agent, 'elicit', { id: 'e8', rounds: ELICITATION_ROUNDS }))).toBeUndefined();
        expect((await r.store.getEffect('elicit:e8'))?.state).toBe('committed');
      } finally {
        await close();
      }
    },
    TIMEOUT,
  );
});

describe('gateway: continuations (input_required / requestState)', () => {
  const leg = (agent: Client, params: Record<string, unknown>): Promise<Result> =>
    agent.request({ method: 'tools/call', params: { name: 'continued', ...params } }, ResultSchema, { timeout: 120_000 });

  it(
    "input_required is relayed under the gateway's requestState with the reservation held; each continuation leg resumes the held call with the agent's inputResponses; it commits once; a token is good once and for its own call (-41009)",
    async () => {
      const r = await rig();
      const { agent, close } = await capableAgent(r.url);
      try {
        const args = { id: 'c1', rounds: 2 };
        const first = await leg(agent, { arguments: args });
        expect(first).toMatchObject({ resultType: 'input_required', inputRequests: { confirm: { method: 'elicitation/create' } } });
        const token1 = first['requestState'] as string;
        expect(token1).toMatch(/^ctrlrun_cont_[0-9a-f]{32}$/);
        expect(first._meta?.[RECEIPT_META_KEY]).toMatchObject({ result: 'suspended', effect_key: 'continued:c1', receipt_id: null, attempt: 1 });
        expect((await r.store.getEffect('continued:c1'))?.state).toBe('executing');
        // The same call sent afresh meanwhile does not run: the reservation is held.
        expect(refusedOf(await leg(agent, { arguments: args }))).toBeDefined();
        // A token the gateway never gave, or given for other arguments: -41009, nothing runs.
        expect(refusedOf(await leg(agent, { arguments: args, requestState: 'round-1' }))).toMatchObject({
          code: -41009,
          data: { error: 'ctrlrun.unknown_continuation' },
        });
        expect(refusedOf(await leg(agent, { arguments: { id: 'c1', rounds: 3 }, requestState: token1 }))?.code).toBe(-41009);
        expect(upstreamCalls(r.log)).toHaveLength(1);

        const second = await leg(agent, { arguments: args, requestState: token1, inputResponses: { confirm: { action: 'accept', content: {} } } });
        expect(second).toMatchObject({ resultType: 'input_required' });
        const token2 = second['requestState'] as string;
        expect(token2).not.toBe(token1);
        // Taken once: the first token is spent.
        expect(refusedOf(await leg(agent, { arguments: args, requestState: token1 }))?.code).toBe(-41009);
        const last = await leg(agent, { arguments: args, requestState: token2, inputResponses: { confirm: { action: 'accept', content: { ok: true } } } });
        expect(last.content).toEqual([{ type: 'text', text: 'continued after 2 round(s): {"confirm":{"action":"accept","content":{"ok":true}}}' }]);
        expect(last._meta?.[RECEIPT_META_KEY]).toMatchObject({ result: 'committed', effect_key: 'continued:c1' });
        expect((await r.store.getEffect('continued:c1'))?.state).toBe('committed');
        // Every leg reached the upstream with the held call's canonical arguments.
        expect(upstreamCalls(r.log)).toEqual([
          { tool: 'continued', arguments: { id: 'c1', rounds: 2 } },
          { tool: 'continued', arguments: { id: 'c1', rounds: 2 } },
          { tool: 'continued', arguments: { id: 'c1', rounds: 2 } },
        ]);
        expect((await receiptDocs(r.store)).filter((d) => d['action'] === 'mcp.pay.continued').map((d) => d['result'])).toEqual(['blocked', 'committed']);
        expect(refusedOf(await leg(agent, { arguments: args, requestState: token2 }))?.code).toBe(-41009);
      } finally {
        await close();
      }
    },
    TIMEOUT,
  );

  it(
    `input_required without a requestState, or more than ${ELICITATION_ROUNDS} times in one call: AMBIGUOUS, -41010; a continuation leg answered "not executed" is AMBIGUOUS too`,
    async () => {
      const r = await rig();
      const { agent, close } = await capableAgent(r.url);
      try {
        const stateless = refusedOf(await leg(agent, { arguments: { id: 's1', stateless: true } }));
        expect(stateless?.code).toBe(-41010);
        expect(stateless?.text).toContain('without a requestState');
        expect((await r.store.getEffect('continued:s1'))?.state).toBe('ambiguous');
        const args = { id: 'b1', rounds: ELICITATION_ROUNDS + 1 };
        let result = await leg(agent, { arguments: args });
        for (let n = 1; n < ELICITATION_ROUNDS; n++) {
          expect(result['resultType'], `leg ${n}`).toBe('input_required');
          result = await leg(agent, { arguments: args, requestState: result['requestState'], inputResponses: {} });
        }
        expect(result['resultType']).toBe('input_required');
        const over = refusedOf(await leg(agent, { arguments: args, requestState: result['requestState'], inputResponses: {} }));
        expect(over?.code).toBe(-41010);
        expect(over?.text).toContain(`more than ${ELICITATION_ROUNDS} times`);
        expect((await r.store.getEffect('continued:b1'))?.state).toBe('ambiguous');
        // A "not executed" answer on a continuation leg speaks for that leg only: the call is AMBIGUOUS.
        const held = await leg(agent, { arguments: { id: 'n1', refuseLeg: true } });
        const refusedLeg = await leg(agent, { arguments: { id: 'n1', refuseLeg: true }, requestState: held['requestState'] }).then(
          () => null,
          (e: unknown) => e as { code?: number },
        );
        expect(refusedLeg?.code).toBe(-32602);
        expect((await r.store.getEffect('continued:n1'))?.state).toBe('ambiguous');
      } finally {
        await close();
      }
    },
    TIMEOUT,
  );
});

describe('ctrlrun gateway --stdio (a real process): a float written as an integer', () => {
  it(
    'is refused -41008 with its pointer, as over HTTP, and never reaches the upstream',
    async () => {
      const dir = workDir(POLICY);
      const log = join(dir, 'upstream.log');
      const gw = start(
        [
          ...NODE_TS,
          CLI,
          'gateway',
          '--stdio',
          '--upstream-command',
          `${process.execPath} ${NODE_TS.join(' ')} ${UPSTREAM}`,
          '--alias',
          'pay',
          '--principal',
          'agent-1',
        ],
        { CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml'), UPSTREAM_LOG: log },
      );
      const send = (line: string) => gw.child.stdin!.write(`${line}\n`);
      const answer = async (id: number) =>
        JSON.parse((await gw.waitFor(new RegExp(`^(\\{"(?:result|jsonrpc)".*"id":${id}[,}].*)$`, 'm'), 120_000))[1]!) as Record<string, unknown>;
      try {
        send(
          JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'initialize',
            params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
          }),
        );
        expect(await answer(1)).toMatchObject({ result: { serverInfo: { name: 'counting-upstream' } } });
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
        send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"refund","arguments":{"payment_id":"f1","amount":2000.0}}}');
        expect(await answer(2)).toMatchObject({
          result: { isError: true, _meta: { 'com.ctrlrun/refusal': { code: -41008, error: 'ctrlrun.unrepresentable_argument', pointer: '/amount' } } },
        });
        send('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"refund","arguments":{"payment_id":"f1","amount":2000}}}');
        expect(await answer(3)).toMatchObject({ result: { content: [{ type: 'text', text: 'refund done' }] } });
        expect(upstreamCalls(log)).toEqual([{ tool: 'refund', arguments: { payment_id: 'f1', amount: 2000 } }]);
      } finally {
        gw.child.stdin!.end();
        await gw.stop();
      }
    },
    TIMEOUT,
  );
});

describe('a JSON-RPC response POSTed by the agent (spec 04 §5: legacy only)', () => {
  it(
    'is relayed to the session on a 2025 revision, refused -32600 on 2026-07-28; a message that is neither request nor response, or whose method is not a string, is refused on any',
    async () => {
      const r = await rig();
      const transport = new StreamableHTTPClientTransport(new URL(r.url));
      const agent = new Client({ name: 'legacy-agent', version: '1.0.0' });
      await agent.connect(transport);
      try {
        const session = transport.sessionId!;
        const post = (body: string, version: string) =>
          fetch(r.url, {
            method: 'POST',
            body,
            headers: {
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'mcp-session-id': session,
              'mcp-protocol-version': version,
            },
          });
        const response = '{"jsonrpc":"2.0","id":"srv-1","result":{}}';
        const current = await post(response, '2026-07-28');
        expect(current.status).toBe(400);
        const refused = (await current.json()) as { error: { code: number; message: string } };
        expect(refused.error.code).toBe(-32600);
        expect(refused.error.message).toMatch(/response in a POST is a mechanic of the 2025 revisions, not of 2026-07-28/);
        // On 2025-11-25 the client answers the server's own requests this way: the session's transport takes it.
        expect((await post(response, '2025-11-25')).status).toBe(202);
        expect((await post('{"jsonrpc":"2.0","id":"srv-2","error":{"code":-32601,"message":"no"}}', '2025-06-18')).status).toBe(202);
        for (const [body, pattern] of [
          ['{"jsonrpc":"2.0","id":5}', /needs 'method', 'result' or 'error'/],
          ['{"jsonrpc":"2.0","id":5,"method":7}', /'method' must be a non-empty string/],
          ['{"jsonrpc":"2.0","id":5,"method":""}', /'method' must be a non-empty string/],
        ] as const) {
          const got = await post(body, '2025-11-25');
          expect(got.status, body).toBe(400);
          const error = ((await got.json()) as { id: unknown; error: { code: number; message: string } }).error;
          expect([error.code, pattern.test(error.message)], body).toEqual([-32600, true]);
        }
        // Nothing of this is an action: no event, no receipt; the session still serves.
        expect(await r.store.events()).toHaveLength(0);
        expect(failure(await call(agent, 'lookup', {}))).toBeUndefined();
      } finally {
        await agent.close();
      }
    },
    TIMEOUT,
  );
});
