// `ctrlrun mcp-operator` as a real process beside a real `ctrlrun gateway` on one SQLite file: the
// human's own MCP client lists what was hashed and answers; the agent's call then runs once.
// Spec 04 §8: T183, T184.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { main, type CliIo } from '@ctrlrun/cli';
import { openStore } from '@ctrlrun/store-node';
import { call, failure, CLI, httpAgent, NODE_TS, ROOT, start, token, UPSTREAM, upstreamCalls, workDir } from './support.js';

const TIMEOUT = 180_000;
const UPSTREAM_COMMAND = `${process.execPath} ${NODE_TS.join(' ')} ${UPSTREAM}`;

async function ctrlrun(argv: string[], env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const io: CliIo = { stdout: () => {}, stderr: (t) => void (stderr += t), cwd: ROOT, env };
  return { code: await main(argv, io), stderr };
}

async function operatorClient(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'human', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

function structured(result: unknown): Record<string, unknown> {
  return ((result as { structuredContent?: unknown } | undefined)?.structuredContent ?? {}) as Record<string, unknown>;
}

describe('ctrlrun mcp-operator', () => {
  it(
    'T183: there is no flag that permits a remote bind, and no --principal',
    async () => {
      const dir = workDir();
      const env = { CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml') };
      const ids = ['--principal-header', 'x-agent', '--user-header', 'x-user'];
      const allow = await ctrlrun(['mcp-operator', '--allow-remote', ...ids], env);
      expect(allow.code).toBe(2);
      expect(allow.stderr).toMatch(/Unknown option '--allow-remote'/);
      for (const host of ['0.0.0.0:0', '192.168.1.10:8901', '[::]:0', 'example.com:80']) {
        const r = await ctrlrun(['mcp-operator', '--listen', host, ...ids], env);
        expect(r.code, host).toBe(2);
        expect(r.stderr).toMatch(/is not loopback/);
      }
      expect((await ctrlrun(['mcp-operator', '--principal', 'alice', ...ids], env)).code).toBe(2);
      const noIdentity = await ctrlrun(['mcp-operator'], env);
      expect(noIdentity.code).toBe(2);
      expect(noIdentity.stderr).toMatch(/--principal-header and --user-header/);
      const noStore = await ctrlrun(['mcp-operator', '--listen', '127.0.0.1:0', ...ids], env);
      expect(noStore.code).toBe(1);
      expect(noStore.stderr).toMatch(/no store at/);
    },
    TIMEOUT,
  );

  it(
    'T184: reads need no credential and show what was hashed; approve refuses without a principal (-41007) or without a human (-41013), succeeds with one and is attributed; the agent then runs once',
    async () => {
      const dir = workDir();
      const env = { CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml'), UPSTREAM_LOG: join(dir, 'upstream.log') };
      const gw = start(
        [...NODE_TS, CLI, 'gateway', '--upstream-command', UPSTREAM_COMMAND, '--alias', 'pay', '--principal', 'agent-1', '--listen', '127.0.0.1:0'],
        env,
      );
      let op: ReturnType<typeof start> | undefined;
      let opExit: number | null = null;
      try {
        // The gateway creates the store; the operator, an answerer, refuses a missing one.
        const agent = await httpAgent((await gw.waitFor(/listening on (\S+)/, 120_000))[1]!);
        op = start([...NODE_TS, CLI, 'mcp-operator', '--listen', '127.0.0.1:0', '--principal-header', 'X-Ctrlrun-Agent', '--user-header', 'X-Ctrlrun-User'], {
          CTRLRUN_CONFIG: env.CTRLRUN_CONFIG,
        });
        const opUrl = (await op.waitFor(/listening on (\S+)/, 120_000))[1]!;
        expect(op.stdout()).toContain('reads need no credential; approve, deny and resolve need a credential naming a human');

        const asked = await call(agent, 'refund', { payment_id: 'p1', amount: 700, note: 'line\u0000two' });
        const { request_id: requestId, action_hash: actionHash } = asked.refused!.data as { request_id: string; action_hash: string };

        const anonymous = await operatorClient(opUrl);
        expect((await anonymous.listTools()).tools.map((t) => t.name)).toEqual([
          'list_pending_approvals',
          'inspect_action',
          'receipts',
          'effects',
          'stats',
          'approve',
          'deny',
          'resolve',
        ]);
        const listed = structured(await anonymous.callTool({ name: 'list_pending_approvals', arguments: {} }));
        const [pending] = listed['approvals'] as Record<string, unknown>[];
        expect(pending).toMatchObject({
          request_id: requestId,
          action_hash: actionHash,
          action: { name: 'mcp.pay.refund', arguments: { amount: 700, note: 'line\u0000two', payment_id: 'p1' }, principal: { agent: 'agent-1', user: null } },
        });
        expect(pending!['hashed']).toContain('"note":"line\\u0000two"');
        for (const k of ['created_at', 'expires_at']) expect(pending![k]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);

        const noPrincipal = await call(anonymous, 'approve', { request_id: requestId });
        expect(noPrincipal.error?.code).toBe(-41007);
        expect(token(noPrincipal.error)).toBe('ctrlrun.no_principal');
        const agentOnly = await operatorClient(opUrl, { 'X-Ctrlrun-Agent': 'laptop' });
        const notHuman = await call(agentOnly, 'approve', { request_id: requestId });
        expect(notHuman.error?.code).toBe(-41013);
        expect(token(notHuman.error)).toBe('ctrlrun.not_a_human');
        expect(upstreamCalls(env.UPSTREAM_LOG)).toHaveLength(0);

        const alice = await operatorClient(opUrl, { 'X-Ctrlrun-Agent': 'laptop', 'X-Ctrlrun-User': 'alice' });
        const granted = await call(alice, 'approve', { request_id: requestId });
        expect(failure(granted)).toBeUndefined();
        expect(structured(granted.result)).toMatchObject({ status: 'granted', request_id: requestId, action_hash: actionHash, approver: 'mcp-operator:alice' });
        const twice = await call(alice, 'approve', { request_id: requestId });
        expect(twice.error?.code).toBe(-41003);
        expect((await call(alice, 'approve', {})).error?.code).toBe(-32602);
        expect((await call(alice, 'nope', {})).error?.code).toBe(-32602);
        await expect(alice.listResources()).rejects.toMatchObject({ code: -32601 });

        const ran = await call(agent, 'refund', { payment_id: 'p1', amount: 700, note: 'line\u0000two' });
        expect(failure(ran)).toBeUndefined();
        expect(upstreamCalls(env.UPSTREAM_LOG)).toHaveLength(1);

        // A denial, and an ambiguous effect resolved by the human (with a reason).
        const second = await call(agent, 'refund', { payment_id: 'p2', amount: 800 });
        const secondId = (second.refused!.data as { request_id: string }).request_id;
        expect(structured((await call(alice, 'deny', { request_id: secondId })).result)).toMatchObject({ status: 'denied' });
        expect((await call(agent, 'refund', { payment_id: 'p2', amount: 800 })).refused?.code).toBe(-41003);
        const died = await call(agent, 'die', { id: 'd1' });
        expect(died.refused?.code).toBe(-41010);
        expect(gw.stderr()).toContain('warning: the upstream MCP server closed the connection; every tools/call is now refused -41011');
        expect((await call(alice, 'resolve', { effect_key: 'die:d1', outcome: 'committed', reason: ' ' })).error?.code).toBe(-32602);
        const resolved = await call(alice, 'resolve', { effect_key: 'die:d1', outcome: 'committed', reason: 'the upstream log shows it ran' });
        expect(structured(resolved.result)).toMatchObject({ status: 'resolved', state: 'committed', resolved_by: 'mcp-operator:alice' });
        expect((await call(agent, 'die', { id: 'd1' })).refused?.code).toBe(-41004);

        const receipts = structured((await call(anonymous, 'receipts', { limit: 2 })).result)['receipts'] as { action: string }[];
        expect(receipts.map((d) => d.action)).toEqual(['mcp.pay.die', 'mcp.pay.die']);
        expect(structured((await call(anonymous, 'receipts', { control: 'SOC2-CC6.1' })).result)['receipts']).toEqual([]);
        expect((await call(anonymous, 'receipts', { limit: 0 })).error?.code).toBe(-32602);
        const effects = structured((await call(anonymous, 'effects', { state: 'committed' })).result)['effects'] as Record<string, unknown>[];
        expect(effects.map((e) => e['effectKey']).sort()).toEqual(['die:d1', 'refund:p1']);
        // Times in the form of every view (UTC, milliseconds, Z), not the columns' `+00:00`.
        for (const e of effects) for (const k of ['createdAt', 'updatedAt']) expect(e[k]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
        expect(structured((await call(anonymous, 'stats', { since: '1d' })).result)).toMatchObject({ schema: 'ctrlrun.stats/v1', mode: 'enforce' });
        const inspected = structured((await call(anonymous, 'inspect_action', { action_id: (died.refused!.data as { action_id: string }).action_id })).result);
        expect(inspected['schema']).toBe('ctrlrun.inspection/v2');
        for (const c of [agent, anonymous, agentOnly, alice]) await c.close();
      } finally {
        opExit = (await op?.stop()) ?? null;
        await gw.stop();
      }
      expect(opExit, op?.stderr()).toBe(0);
      const store = await openStore(join(dir, '.ctrlrun', 'state.db'), { readOnly: true });
      try {
        const answers = (await store.events()).filter((e) => ['APPROVAL_GRANTED', 'APPROVAL_DENIED', 'EFFECT_RESOLVED'].includes(e.type));
        expect(answers.map((e) => [e.type, e.data])).toEqual([
          // The server is a resolving surface: the human it identified is the verified approver (spec 05 §4.1).
          [
            'APPROVAL_GRANTED',
            {
              approver: 'mcp-operator:alice',
              action_hash: expect.stringMatching(/^sha256:/),
              via: 'mcp-operator',
              verified: { agent: 'laptop', user: 'alice', issuer: null },
            },
          ],
          ['APPROVAL_DENIED', { approver: 'mcp-operator:alice', via: 'mcp-operator', verified: { agent: 'laptop', user: 'alice', issuer: null } }],
          [
            'EFFECT_RESOLVED',
            { state: 'committed', resolver: 'mcp-operator:alice', resolved_by: 'human', via: 'mcp-operator', reason: 'the upstream log shows it ran' },
          ],
        ]);
      } finally {
        await store.close();
      }
    },
    TIMEOUT,
  );
});
