// `ctrlrun gateway` as a real process: the real command line, a real SQLite file (better-sqlite3),
// the counting upstream as its subprocess (--upstream-command), a real SDK agent over Streamable
// HTTP on 127.0.0.1 (port 0) and over stdio (--stdio), and a human answering with `ctrlrun approve`.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { main, type CliIo } from '@ctrlrun/cli';
import { canonicalJson } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { call, failure, receiptDocs, CLI, httpAgent, NODE_TS, ROOT, start, token, UPSTREAM, upstreamCalls, workDir } from './support.js';

const TIMEOUT = 180_000;
const UPSTREAM_COMMAND = `${process.execPath} ${NODE_TS.join(' ')} ${UPSTREAM}`;

async function ctrlrun(argv: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t), cwd: ROOT, env };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}

function gatewayEnv(dir: string): Record<string, string> {
  return { CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml'), UPSTREAM_LOG: join(dir, 'upstream.log') };
}

describe('ctrlrun gateway (a real process)', () => {
  it(
    'over HTTP with a subprocess upstream and a SQLite file: startup block, one run, duplicate refused, approval answered by ctrlrun approve from another process',
    async () => {
      const dir = workDir();
      const env = gatewayEnv(dir);
      const gw = start(
        [...NODE_TS, CLI, 'gateway', '--upstream-command', UPSTREAM_COMMAND, '--alias', 'pay', '--principal', 'agent-1', '--listen', '127.0.0.1:0'],
        env,
      );
      let exit: number | null = null;
      try {
        const url = (await gw.waitFor(/listening on (\S+)/, 120_000))[1]!;
        const out = gw.stdout();
        expect(out).toContain('environment production');
        expect(out).toContain('identity static (every call is agent-1)');
        expect(out).toContain('no authority: section — every principal is unrestricted');
        expect(out).toContain(`store ${join(dir, '.ctrlrun', 'state.db')}`);
        expect(out).toMatch(/policy sha256:[0-9a-f]{64}/);
        expect(out).toContain('1 action(s) have no effect: template and get no reservation:\n  mcp.pay.lookup\n');
        expect(out).not.toContain('have no entry in the policy');
        expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);

        const agent = await httpAgent(url);
        const ok = await call(agent, 'refund', { payment_id: 'p1', amount: 10 });
        expect(failure(ok)).toBeUndefined();
        const dup = await call(agent, 'refund', { payment_id: 'p1', amount: 10 });
        expect(dup.refused?.code).toBe(-41004);
        expect(upstreamCalls(env.UPSTREAM_LOG!)).toHaveLength(1);

        const asked = await call(agent, 'refund', { payment_id: 'p2', amount: 700 });
        expect(token(asked.refused)).toBe('ctrlrun.approval_required');
        const id = (asked.refused!.data as { request_id: string }).request_id;
        const approved = await ctrlrun(['approve', id, '--as', 'dana@example.com'], { CTRLRUN_CONFIG: env.CTRLRUN_CONFIG! });
        expect(approved.stderr).toBe('');
        expect(approved.code).toBe(0);
        const ran = await call(agent, 'refund', { payment_id: 'p2', amount: 700 });
        expect(failure(ran)).toBeUndefined();
        expect(upstreamCalls(env.UPSTREAM_LOG!).map((c) => c.arguments['payment_id'])).toEqual(['p1', 'p2']);

        // Not JSON, a batch, too big, a foreign Origin, another path: refused before the SDK, nothing written.
        const post = (body: string, headers: Record<string, string> = {}, at = url) =>
          fetch(at, { method: 'POST', body, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } });
        const notJson = await post('{"jsonrpc":');
        expect(notJson.status).toBe(400);
        expect(((await notJson.json()) as { error: { code: number } }).error.code).toBe(-32700);
        const batch = await post('[{"jsonrpc":"2.0","id":1,"method":"ping"}]');
        expect(batch.status).toBe(400);
        expect(((await batch.json()) as { error: { code: number } }).error.code).toBe(-32600);
        expect((await post(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"${'a'.repeat(1_100_000)}"}}`)).status).toBe(413);
        expect((await post('{"jsonrpc":"2.0","id":1,"method":"ping"}', { origin: 'https://evil.example' })).status).toBe(403);
        expect((await post('{"jsonrpc":"2.0","id":1,"method":"ping"}', {}, url.replace(/\/mcp$/, '/other'))).status).toBe(404);
        const float = await post('{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"refund","arguments":{"payment_id":"p3","amount":1e2}}}');
        expect(await float.json()).toMatchObject({
          id: 9,
          result: { isError: true, _meta: { 'com.ctrlrun/refusal': { code: -41008, error: 'ctrlrun.unrepresentable_argument', pointer: '/amount' } } },
        });
        expect(failure(await call(agent, 'lookup', {}))).toBeUndefined();
        await agent.close();
      } finally {
        exit = await gw.stop();
      }
      expect(exit, gw.stderr()).toBe(0);
      expect(gw.stderr()).not.toContain('closed the connection');
      const store = await openStore(join(dir, '.ctrlrun', 'state.db'), { readOnly: true });
      try {
        const results = (await receiptDocs(store)).map((d) => `${String(d['action'])} ${String(d['result'])}`);
        expect(results).toEqual([
          'mcp.pay.refund committed',
          'mcp.pay.refund blocked',
          'mcp.pay.refund committed',
          'mcp.pay.refund denied',
          'mcp.pay.lookup committed',
        ]);
        const approval = (await store.listApprovals())[0]!;
        expect(approval.status).toBe('consumed');
        expect(approval.approver).toBe('dana@example.com');
      } finally {
        await store.close();
      }
    },
    TIMEOUT,
  );

  it(
    'a policy that names none of some upstream tools: the startup block names each, and a call to one is denied unknown_action',
    async () => {
      const dir = workDir(
        'schema: ctrlrun.policy/v2\nactions:\n  mcp.pay.refund: {effect: "refund:{payment_id}", decision: allow}\n  mcp.billing.lookup: {decision: allow}\n',
      );
      const gw = start(
        [...NODE_TS, CLI, 'gateway', '--upstream-command', UPSTREAM_COMMAND, '--alias', 'pay', '--principal', 'agent-1', '--listen', '127.0.0.1:0'],
        gatewayEnv(dir),
      );
      try {
        const url = (await gw.waitFor(/listening on (\S+)/, 120_000))[1]!;
        const block = /(\d+) upstream tool\(s\) have no entry in the policy; every call to them will be denied \(unknown_action\):\n((?: {2}.*\n)+)/.exec(
          gw.stdout(),
        );
        expect(block, gw.stdout()).not.toBeNull();
        const named = block![2]!
          .trimEnd()
          .split('\n')
          .map((l) => l.trim().split(/\s+/)[0]);
        expect(named).toEqual(['lookup', 'flaky', 'bad_params', 'internal', 'die', 'progress', 'hang', 'typed', 'forged']);
        expect(Number(block![1])).toBe(named.length);
        expect(block![2]).toContain(`(add actions: mcp.pay.lookup to ${join(dir, 'ctrlrun.yaml')})`);
        const agent = await httpAgent(url);
        try {
          expect((await call(agent, 'lookup', {})).refused?.data).toMatchObject({ error: 'ctrlrun.denied', reason: 'unknown_action' });
        } finally {
          await agent.close();
        }
      } finally {
        await gw.stop();
      }
    },
    TIMEOUT,
  );

  it(
    '--stdio: an agent that launches the gateway as a command; stdout carries only the protocol, the startup block goes to stderr',
    async () => {
      const dir = workDir();
      const env = gatewayEnv(dir);
      let stderr = '';
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [...NODE_TS, CLI, 'gateway', '--stdio', '--upstream-command', UPSTREAM_COMMAND, '--alias', 'pay', '--principal', 'agent-1/alice'],
        cwd: ROOT,
        env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...env },
        stderr: 'pipe',
      });
      transport.stderr?.on('data', (d: Buffer) => void (stderr += d.toString()));
      const agent = new Client({ name: 'stdio-agent', version: '1.0.0' });
      await agent.connect(transport, { timeout: 120_000 });
      try {
        expect((await agent.listTools()).tools.map((t) => t.name)).toContain('refund');
        const ok = await call(agent, 'refund', { payment_id: 's1', amount: 1 });
        expect(failure(ok)).toBeUndefined();
        const dup = await call(agent, 'refund', { payment_id: 's1', amount: 1 });
        expect(dup.refused?.code).toBe(-41004);
        expect(upstreamCalls(env.UPSTREAM_LOG!)).toHaveLength(1);
        // Over stdio too, the upstream receives exactly what was hashed, a "__proto__" key included.
        const hostile = JSON.parse('{"payment_id":"s2\\u0000","amount":2,"__proto__":{"admin":true}}') as Record<string, unknown>;
        expect(failure(await call(agent, 'refund', hostile))).toBeUndefined();
        const received = upstreamCalls(env.UPSTREAM_LOG!)[1]!.arguments;
        expect(Object.keys(received)).toContain('__proto__');
        expect(canonicalJson(received)).toBe(canonicalJson(hostile));
        expect(stderr).toContain('identity static (every call is agent-1/alice)');
        expect(stderr).toContain('serving the agent on stdio');
      } finally {
        await agent.close();
      }
      const store = await openStore(join(dir, '.ctrlrun', 'state.db'), { readOnly: true });
      try {
        const first = (await receiptDocs(store))[0]!;
        expect(first.principal).toMatchObject({ agent: 'agent-1', user: 'alice' });
      } finally {
        await store.close();
      }
    },
    TIMEOUT,
  );

  it(
    'a bad command line exits 2 and names the problem; an unreachable upstream exits 1',
    async () => {
      const dir = workDir();
      const env = gatewayEnv(dir);
      const base = ['gateway', '--upstream', 'http://127.0.0.1:9/mcp', '--principal', 'a'];
      const cases: [string[], RegExp][] = [
        [[...base], /--alias is required/],
        [[...base, '--alias', 'pay', '--principal', 'a/b/c'], /AGENT or AGENT\/USER/],
        [[...base, '--alias', 'Pay.X'], /--alias must match/],
        [['gateway', '--alias', 'pay', '--principal', 'a'], /exactly one of --upstream URL or --upstream-command/],
        [[...base, '--alias', 'pay', '--upstream-command', 'x'], /exactly one of/],
        [[...base, '--alias', 'pay', '--listen', '0.0.0.0:0'], /not a loopback address; add --allow-remote/],
        [[...base, '--alias', 'pay', '--path', '/ctrlrun/mcp'], /may not be under \/ctrlrun\//],
        [['gateway', '--upstream', 'file:///x', '--alias', 'pay', '--principal', 'a'], /http\(s\):\/\/ URL/],
        [[...base, '--alias', 'pay', '--principal-from-client-info'], /Unknown option/],
        [[...base, '--alias', 'pay', '--principal-header', 'x-agent'], /exactly one identity source/],
        [['gateway', '--upstream', 'http://127.0.0.1:9/mcp', '--alias', 'pay'], /exactly one identity source/],
        [['gateway', '--upstream', 'http://127.0.0.1:9/mcp', '--alias', 'pay', '--principal-header', 'x-agent', '--stdio'], /--stdio has no request headers/],
        [[...base, '--alias', 'pay', '--max-pending-approvals', '0'], /--max-pending-approvals must be a positive whole number/],
        [[...base, '--alias', 'pay', '--max-pending-approvals', 'lots'], /--max-pending-approvals must be a positive whole number/],
      ];
      for (const [argv, message] of cases) {
        const r = await ctrlrun(argv, env);
        expect(r.code, argv.join(' ')).toBe(2);
        expect(r.stderr).toMatch(message);
      }
      const unreachable = await ctrlrun([...base, '--alias', 'pay'], env);
      expect(unreachable.code).toBe(1);
      expect(unreachable.stderr).toMatch(/Error: the upstream MCP server http:\/\/127\.0\.0\.1:9\/mcp cannot be reached/);
    },
    TIMEOUT,
  );
});
