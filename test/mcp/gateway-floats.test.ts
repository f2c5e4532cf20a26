// A tools/call whose arguments hold a number no action can carry (spec 04 §5, -41008) is refused
// as a tool error AND recorded: ACTION_PROPOSED, ACTION_DENIED {unrepresentable_argument,
// pointer}, a denied receipt in the chain whose action holds each such number as a string of its
// spelling (so its hash can be computed again from what was sent). Over HTTP and over stdio with
// `ctrlrun gateway` as a real process and a SQLite file, then `ctrlrun receipts --verify-chain`;
// and behind the Web-standard handler with the gateway's handler.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main, type CliIo } from '@ctrlrun/cli';
import { Control, createAction, loadPolicy, type StateStore } from '@ctrlrun/kernel';
import { Gateway, mcpFetchHandler, spelledArguments } from '@ctrlrun/mcp';
import { openStore } from '@ctrlrun/store-node';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { connectUpstream } from '../../packages/cli/src/mcp-http.js';
import { call, CLI, failure, httpAgent, NODE_TS, POLICY, receiptDocs, ROOT, start, UPSTREAM, upstreamCalls, workDir } from './support.js';

const TIMEOUT = 180_000;
const UPSTREAM_COMMAND = `${process.execPath} ${NODE_TS.join(' ')} ${UPSTREAM}`;
const FLOAT_CALL = (id: number) =>
  `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"refund","arguments":{"payment_id":"f1","amount":2000.0,"lines":[{"n":1},{"n":25e-1}]}}}`;
/** What the denied receipt's action holds for FLOAT_CALL's arguments: the two numbers as their spellings. */
const STAND_IN = { payment_id: 'f1', amount: '2000.0', lines: [{ n: 1 }, { n: '25e-1' }] };

async function verifyChain(dir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t), cwd: ROOT, env: { CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml') } };
  const code = await main(['receipts', '--verify-chain'], io);
  return { code, stdout, stderr };
}

/** The refusal's fields and its receipt meta, from a JSON-RPC response to FLOAT_CALL. */
function refusalOf(response: Record<string, unknown>): { refusal: Record<string, unknown>; receipt: Record<string, unknown> } {
  const result = response['result'] as { isError?: boolean; _meta?: Record<string, Record<string, unknown>> };
  expect(result.isError).toBe(true);
  return { refusal: result._meta!['com.ctrlrun/refusal']!, receipt: result._meta!['com.ctrlrun/receipt']! };
}

/** The store holds the refusal's evidence: the two events (no policy, no reservation) and the denied receipt, hashed over the stand-in. */
async function expectRecorded(store: StateStore, agent: string, actionId: string, receiptId: string): Promise<void> {
  const doc = (await receiptDocs(store)).find((d) => d['receipt_id'] === receiptId)!;
  expect(doc).toMatchObject({
    action: 'mcp.pay.refund',
    action_id: actionId,
    decision: 'deny',
    decision_reason: 'unrepresentable_argument',
    result: 'denied',
    effect_key: null,
    resource: null,
    arguments: STAND_IN,
  });
  expect(String(doc['error'])).toContain('/amount');
  const again = createAction({ name: 'mcp.pay.refund', arguments: STAND_IN, principal: { agent }, environment: 'production' });
  expect(doc['action_hash']).toBe(again.actionHash);
  const events = (await store.events()).filter((e) => e.actionId === actionId);
  expect(events.map((e) => e.type)).toEqual(['ACTION_PROPOSED', 'ACTION_DENIED']);
  expect(events[1]!.data).toEqual({ reason: 'unrepresentable_argument', pointer: '/amount' });
  expect(await store.getEffect('refund:f1')).toBeNull();
}

describe('a float in a tools/call: refused and recorded', () => {
  it(
    'ctrlrun gateway over HTTP: the tool error names the pointer and the receipt; the receipt is in the chain and the chain verifies',
    async () => {
      const dir = workDir();
      const log = join(dir, 'upstream.log');
      const gw = start(
        [...NODE_TS, CLI, 'gateway', '--upstream-command', UPSTREAM_COMMAND, '--alias', 'pay', '--principal', 'agent-1', '--listen', '127.0.0.1:0'],
        { CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml'), UPSTREAM_LOG: log },
      );
      let actionId = '';
      let receiptId = '';
      try {
        const url = (await gw.waitFor(/listening on (\S+)/, 120_000))[1]!;
        const agent = await httpAgent(url);
        expect(failure(await call(agent, 'refund', { payment_id: 'p1', amount: 10 }))).toBeUndefined();
        const response = await fetch(url, {
          method: 'POST',
          body: FLOAT_CALL(9),
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        });
        expect(response.status).toBe(200);
        const body = (await response.json()) as Record<string, unknown>;
        expect(body['id']).toBe(9);
        const { refusal, receipt } = refusalOf(body);
        expect(refusal).toMatchObject({ code: -41008, error: 'ctrlrun.unrepresentable_argument', pointer: '/amount' });
        expect(receipt).toMatchObject({ result: 'denied', effect_key: null, attempt: 1 });
        actionId = String(refusal['action_id']);
        receiptId = String(receipt['receipt_id']);
        expect(receipt['action_id']).toBe(actionId);
        expect(receiptId).toMatch(/^ctr_/);
        // The chain goes on after it.
        expect(failure(await call(agent, 'refund', { payment_id: 'p2', amount: 20 }))).toBeUndefined();
        await agent.close();
      } finally {
        expect(await gw.stop(), gw.stderr()).toBe(0);
      }
      expect(upstreamCalls(log).map((c) => c.arguments['payment_id'])).toEqual(['p1', 'p2']);
      const store = await openStore(join(dir, '.ctrlrun', 'state.db'), { readOnly: true });
      try {
        await expectRecorded(store, 'agent-1', actionId, receiptId);
        expect((await receiptDocs(store)).map((d) => d['result'])).toEqual(['committed', 'denied', 'committed']);
      } finally {
        await store.close();
      }
      const verified = await verifyChain(dir);
      expect(verified.stderr).toBe('');
      expect(verified.stdout).toContain('chain: 3 of 3 receipts verified');
      expect(verified.stdout).toContain('the chain is intact');
      expect(verified.code).toBe(0);
    },
    TIMEOUT,
  );

  it(
    'ctrlrun gateway --stdio: refused and recorded the same way, the next line answered after it, the chain verifies',
    async () => {
      const dir = workDir();
      const log = join(dir, 'upstream.log');
      const gw = start([...NODE_TS, CLI, 'gateway', '--stdio', '--upstream-command', UPSTREAM_COMMAND, '--alias', 'pay', '--principal', 'agent-1/alice'], {
        CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml'),
        UPSTREAM_LOG: log,
      });
      const send = (line: string) => gw.child.stdin!.write(`${line}\n`);
      const answer = async (id: number) =>
        JSON.parse((await gw.waitFor(new RegExp(`^(\\{"(?:result|jsonrpc)".*"id":${id}[,}].*)$`, 'm'), 120_000))[1]!) as Record<string, unknown>;
      let actionId = '';
      let receiptId = '';
      try {
        send(
          JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'initialize',
            params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
          }),
        );
        await answer(1);
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
        // Sent together: the refusal is recorded before the next line goes on.
        send(`${FLOAT_CALL(2)}\n{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"refund","arguments":{"payment_id":"f1","amount":20}}}`);
        const { refusal, receipt } = refusalOf(await answer(2));
        expect(refusal).toMatchObject({ code: -41008, pointer: '/amount' });
        actionId = String(refusal['action_id']);
        receiptId = String(receipt['receipt_id']);
        expect(await answer(3)).toMatchObject({ result: { content: [{ type: 'text', text: 'refund done' }] } });
      } finally {
        gw.child.stdin!.end();
        await gw.stop();
      }
      expect(upstreamCalls(log)).toEqual([{ tool: 'refund', arguments: { payment_id: 'f1', amount: 20 } }]);
      const store = await openStore(join(dir, '.ctrlrun', 'state.db'), { readOnly: true });
      try {
        const docs = await receiptDocs(store);
        expect(docs.map((d) => d['result'])).toEqual(['denied', 'committed']);
        expect(docs[0]!['principal']).toMatchObject({ agent: 'agent-1', user: 'alice' });
        const again = createAction({ name: 'mcp.pay.refund', arguments: STAND_IN, principal: { agent: 'agent-1', user: 'alice' }, environment: 'production' });
        expect(docs[0]!['action_hash']).toBe(again.actionHash);
        expect(docs[0]).toMatchObject({ action_id: actionId, receipt_id: receiptId, decision_reason: 'unrepresentable_argument' });
      } finally {
        await store.close();
      }
      const verified = await verifyChain(dir);
      expect(verified.stdout).toContain('the chain is intact');
      expect(verified.code).toBe(0);
    },
    TIMEOUT,
  );

  it(
    'behind the Web-standard handler with the gateway’s handler: recorded too; with no principal, refused -41007 and nothing recorded',
    async () => {
      const log = join(workDir(), 'upstream.log');
      const store = await createSqlJsStore();
      const upstream = await connectUpstream(
        { kind: 'command', argv: [process.execPath, ...NODE_TS, UPSTREAM], env: { PATH: process.env['PATH'] ?? '', UPSTREAM_LOG: log } },
        () => {},
      );
      try {
        const gateway = new Gateway({
          control: new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => {} } }),
          upstream,
          alias: 'pay',
          principal: { agent: 'edge-agent' },
        });
        const handler = mcpFetchHandler({ createServer: () => gateway.createServer(), refuseFloatArguments: gateway.refuseFloats });
        const post = (body: string) =>
          handler(
            new Request('http://localhost/mcp', {
              method: 'POST',
              body,
              headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
            }),
          );
        const { refusal, receipt } = refusalOf((await (await post(FLOAT_CALL(4))).json()) as Record<string, unknown>);
        await expectRecorded(store, 'edge-agent', String(refusal['action_id']), String(receipt['receipt_id']));

        // A gateway with no principal to attribute the call to refuses it as any call, and records nothing.
        const nobody = new Gateway({ control: new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => {} } }), upstream, alias: 'pay' });
        const before = (await store.events()).length;
        const none = await nobody.refuseFloats(JSON.parse(FLOAT_CALL(5)), FLOAT_CALL(5));
        expect(refusalOf(none!).refusal).toMatchObject({ code: -41007 });
        expect((await store.events()).length).toBe(before);
        // Not a float, not a tools/call request: not the handler's.
        const plain = FLOAT_CALL(6).replace('2000.0', '2000').replace('25e-1', '2');
        expect(await gateway.refuseFloats(JSON.parse(plain), plain)).toBeNull();
        const notification = '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"refund","arguments":{"amount":1.0}}}';
        expect(await gateway.refuseFloats(JSON.parse(notification), notification)).toBeNull();
        // A malformed call gets the gateway's own -32602, whatever its arguments hold.
        const badName = FLOAT_CALL(7).replace('"refund"', '"re fund"');
        expect(await gateway.refuseFloats(JSON.parse(badName), badName)).toMatchObject({ id: 7, error: { code: -32602 } });
        expect(upstreamCalls(log)).toHaveLength(0);
      } finally {
        await upstream.close();
        await store.close();
      }
    },
    TIMEOUT,
  );
});

describe('spelledArguments', () => {
  it('writes each number no action can carry as its spelling in the text, else as JavaScript writes it; keeps the rest', () => {
    const text = FLOAT_CALL(1);
    const args = (JSON.parse(text) as { params: { arguments: Record<string, unknown> } }).params.arguments;
    expect(spelledArguments(args, text)).toEqual(STAND_IN);
    expect(spelledArguments({ a: 1.5, b: [2 ** 60, -0, 3], c: 'x' })).toEqual({ a: '1.5', b: ['1152921504606847000', '-0', 3], c: 'x' });
    const big = '{"params":{"arguments":{"n":9007199254740993,"__proto__":{"x":1.0}}}}';
    const parsed = (JSON.parse(big) as { params: { arguments: Record<string, unknown> } }).params.arguments;
    const spelled = spelledArguments(parsed, big);
    expect(spelled['n']).toBe('9007199254740993');
    expect(Object.keys(spelled)).toEqual(['n', '__proto__']);
    expect(Object.getOwnPropertyDescriptor(spelled, '__proto__')?.value).toEqual({ x: '1.0' });
  });
});
