// Edit-then-approve through the MCP gateway: a request a human answered with edited arguments is
// not a denial. The agent's same call runs the edited arguments once, and the result says so.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Control, loadPolicy, type StateStore } from '@ctrlrun/kernel';
import { Gateway, RECEIPT_META_KEY, ReceiptIds } from '@ctrlrun/mcp';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { connectUpstream, serveHttp } from '../../packages/cli/src/mcp-http.js';
import { call, failure, httpAgent, NODE_TS, POLICY, UPSTREAM, upstreamCalls, workDir } from './support.js';

const TIMEOUT = 120_000;
const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const r of open.splice(0)) await r.close();
});

async function rig(): Promise<{ store: StateStore; control: Control; agent: Client; log: string }> {
  const log = join(workDir(), 'upstream.log');
  const store = await createSqlJsStore();
  const receiptIds = new ReceiptIds();
  const control = new Control({ policy: loadPolicy(POLICY), store, sinks: [receiptIds.sink], logger: { warn: () => {} } });
  const upstream = await connectUpstream(
    { kind: 'command', argv: [process.execPath, ...NODE_TS, UPSTREAM], env: { PATH: process.env['PATH'] ?? '', UPSTREAM_LOG: log } },
    () => {},
  );
  const gateway = new Gateway({ control, upstream, alias: 'pay', receiptIds, principal: { agent: 'agent-1' } });
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
  const agent = await httpAgent(serving.url);
  open.push({
    async close() {
      await agent.close().catch(() => {});
      await serving.close();
      await upstream.close().catch(() => {});
      await store.close();
    },
  });
  return { store, control, agent, log };
}

describe('gateway: an approval answered with an edit', () => {
  it(
    'the agent\'s same call runs the edited arguments once (not "a human denied this exact call"), and the result tells the agent what ran',
    async () => {
      const r = await rig();
      const asked = await call(r.agent, 'refund', { payment_id: 'p2', amount: 500 });
      expect(asked.refused?.code).toBe(-41002);
      const requestId = (asked.refused!.data as { request_id: string }).request_id;
      await r.control.grantApproval(requestId, { approver: 'alice', edit: { arguments: { payment_id: 'p2', amount: 400 } } });

      const ran = await call(r.agent, 'refund', { payment_id: 'p2', amount: 500 });
      expect(failure(ran)).toBeUndefined();
      expect(upstreamCalls(r.log).map((c) => c.arguments)).toEqual([{ payment_id: 'p2', amount: 400 }]);
      const content = JSON.stringify(ran.result?.['content']);
      expect(content).toContain('alice edited the arguments before approving');
      const meta = (ran.result?.['_meta'] as Record<string, unknown>)[RECEIPT_META_KEY] as Record<string, unknown>;
      expect(meta['edit']).toMatchObject({ editor: 'alice', proposed_arguments: { amount: 500 }, approved_arguments: { amount: 400 } });

      // Once: the same call again is refused, and the upstream ran once.
      const again = await call(r.agent, 'refund', { payment_id: 'p2', amount: 500 });
      expect(failure(again)).toBeDefined();
      expect(upstreamCalls(r.log)).toHaveLength(1);
    },
    TIMEOUT,
  );

  it(
    'a plain denial is still refused as one',
    async () => {
      const r = await rig();
      const asked = await call(r.agent, 'refund', { payment_id: 'p3', amount: 500 });
      const requestId = (asked.refused!.data as { request_id: string }).request_id;
      await r.control.denyApproval(requestId, { approver: 'alice' });
      const again = await call(r.agent, 'refund', { payment_id: 'p3', amount: 500 });
      expect(JSON.stringify(again.refused)).toContain('a human denied this exact call');
      expect(upstreamCalls(r.log)).toHaveLength(0);
    },
    TIMEOUT,
  );
});
