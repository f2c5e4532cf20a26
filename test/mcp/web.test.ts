// The gateway mounted in a Hono app through the Web-standard handler (what the edge worker mounts
// at /mcp), served by @hono/node-server on 127.0.0.1 port 0: a real SDK agent, the counting
// upstream as its own process, a sql.js store.
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, describe, expect, it } from 'vitest';
import { Control, loadPolicy } from '@ctrlrun/kernel';
import { Gateway, mcpFetchHandler } from '@ctrlrun/mcp';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { connectUpstream } from '../../packages/cli/src/mcp-http.js';
import { call, failure, httpAgent, NODE_TS, POLICY, UPSTREAM, upstreamCalls, workDir } from './support.js';

const TIMEOUT = 120_000;
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => {});
});

describe('the gateway behind a Web-standard handler in Hono', () => {
  it(
    'one run, the duplicate refused, the rest relayed; size, JSON, batch and Origin refused before the SDK',
    async () => {
      const log = join(workDir(), 'upstream.log');
      const store = await createSqlJsStore();
      closers.push(() => store.close());
      const upstream = await connectUpstream(
        { kind: 'command', argv: [process.execPath, ...NODE_TS, UPSTREAM], env: { PATH: process.env['PATH'] ?? '', UPSTREAM_LOG: log } },
        () => {},
      );
      closers.push(() => upstream.close());
      const gateway = new Gateway({
        control: new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => {} } }),
        upstream,
        alias: 'pay',
        principal: { agent: 'edge-agent' },
      });
      const app = new Hono();
      const handler = mcpFetchHandler({ createServer: () => gateway.createServer(), maxBodyBytes: 4096 });
      app.all('/mcp', (c) => handler(c.req.raw));
      const url = await new Promise<string>((resolve) => {
        const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info: AddressInfo) => resolve(`http://127.0.0.1:${info.port}/mcp`));
        closers.push(() => new Promise((r) => server.close(r)));
      });

      const agent = await httpAgent(url);
      closers.push(() => agent.close());
      expect((await agent.listTools()).tools.map((t) => t.name)).toContain('refund');
      expect(failure(await call(agent, 'refund', { payment_id: 'w1', amount: 9 }))).toBeUndefined();
      const dup = await call(agent, 'refund', { payment_id: 'w1', amount: 9 });
      expect(dup.refused?.code).toBe(-41004);
      expect(upstreamCalls(log)).toHaveLength(1);
      expect((await call(agent, 'refund', { payment_id: 'w2', amount: 900 })).refused?.code).toBe(-41002);

      const post = (body: string, headers: Record<string, string> = {}) =>
        fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } });
      expect((await post('x'.repeat(5000))).status).toBe(413);
      expect((await post('{')).status).toBe(400);
      expect(((await (await post('[]')).json()) as { error: { code: number } }).error.code).toBe(-32600);
      expect((await post('{"jsonrpc":"2.0","id":1,"method":"ping"}', { origin: 'https://evil.example' })).status).toBe(403);
      // 2000.0 is a float even though JSON.parse reads it as 2000: refused with its pointer, as the reference does.
      const float = await post('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"refund","arguments":{"payment_id":"w9","amount":2000.0}}}');
      expect(await float.json()).toMatchObject({
        id: 7,
        result: { isError: true, _meta: { 'com.ctrlrun/refusal': { code: -41008, error: 'ctrlrun.unrepresentable_argument', pointer: '/amount' } } },
      });
      expect(upstreamCalls(log)).toHaveLength(1);
    },
    TIMEOUT,
  );
});
