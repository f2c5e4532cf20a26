// The data-scope refusal on every surface: the policy derives `data_scope` from which labelled
// arguments are present, so a call that supplies one is refused before anything is written — by
// `protect`, by the worker (400) and by the MCP gateway (JSON-RPC -32602), in the same words:
// each surface's call goes through the kernel's one intake.
// The gateway is driven by a real SDK client over Streamable HTTP, its upstream the counting MCP
// server in its own process.
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Control, InvalidArgument, loadPolicy, protect } from '@ctrlrun/kernel';
import { Gateway } from '@ctrlrun/mcp';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { connectUpstream, serveHttp } from '../../packages/cli/src/mcp-http.js';
import { AGENT, harness } from '../worker/harness.js';
import { call, httpAgent, startHttpUpstream, upstreamCalls, workDir } from './support.js';

const TIMEOUT = 120_000;
const WORDS = 'an argument may not be named data_scope: it is derived by the policy';

// A policy that reads data_scope, so a supplied one would be the agent choosing its own scope.
const POLICY = `schema: ctrlrun.policy/v4
actions:
  mcp.pay.lookup:
    data: {card_number: pci}
    rules:
      - when: {data_scope_in: [pci]}
        decision: deny
      - decision: allow
`;

const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
});

describe('an argument named data_scope is refused on every surface, in the same words', () => {
  it(
    'the MCP gateway answers -32602 with the words protect and the worker use; nothing is written, the upstream is not called',
    async () => {
      const dir = workDir(POLICY);
      const log = join(dir, 'upstream.log');
      const up = await startHttpUpstream(log);
      closers.push(() => up.process.stop());
      const upstream = await connectUpstream({ kind: 'http', url: new URL(up.url) });
      closers.push(() => upstream.close());
      const store = await createSqlJsStore();
      closers.push(() => store.close());
      const control = new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => {} } });
      const gateway = new Gateway({ control, upstream, alias: 'pay', principal: { agent: 'agent-1' } });
      const serving = await serveHttp({
        host: '127.0.0.1',
        port: 0,
        path: '/mcp',
        maxBodyBytes: 65536,
        allowOrigins: [],
        createServer: () => gateway.createServer(),
        sessions: true,
      });
      closers.push(() => serving.close());
      const agent = await httpAgent(serving.url);
      closers.push(() => agent.close());

      // Without data_scope the call runs (the rig works); with it, in any position or value, it is refused.
      expect((await call(agent, 'lookup', { id: 'x' })).result?.['isError']).toBeUndefined();
      const before = { events: (await store.events()).length, receipts: (await store.receipts()).length };
      for (const args of [{ id: 'x', data_scope: [] }, { data_scope: 'public' }, { card_number: '4242', data_scope: null }]) {
        const got = await call(agent, 'lookup', args);
        expect(got.error?.code, JSON.stringify(args)).toBe(-32602);
        expect(got.error?.message).toBe(`MCP error -32602: ${WORDS}`);
      }
      expect({ events: (await store.events()).length, receipts: (await store.receipts()).length }).toEqual(before);
      expect(upstreamCalls(log).map((c) => c.arguments)).toEqual([{ id: 'x' }]);

      // The same words from protect and from the worker, each through the kernel's one intake,
      // before anything is written or run.
      let ran = 0;
      const lookup = protect(() => ++ran, { control, name: 'mcp.pay.lookup' });
      await expect(lookup({ data_scope: 'public' }, { principal: { agent: 'agent-1' } })).rejects.toThrow(new InvalidArgument(WORDS));
      await expect(lookup.needsApproval({ card_number: '4242', data_scope: null }, { principal: { agent: 'agent-1' } })).resolves.toBe(false);
      expect(ran).toBe(0);
      expect({ events: (await store.events()).length, receipts: (await store.receipts()).length }).toEqual(before);
      const h = await harness();
      for (const args of [{ payment_id: 'p', amount: 1, data_scope: 'public' }, { data_scope: [] }]) {
        const worker = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: args });
        expect(worker.status).toBe(400);
        expect(worker.json['error']).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: WORDS, path: '$.arguments.data_scope' });
      }
      expect({ events: await h.store.events(), receipts: await h.store.receipts() }).toEqual({ events: [], receipts: [] });
    },
    TIMEOUT,
  );
});
