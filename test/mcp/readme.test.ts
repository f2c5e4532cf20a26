// The README's MCP section works as written: the gateway command prints the block it quotes, the
// JSON configuration pasted into an MCP client starts the gateway and the operator server (through
// `npx`, from examples/mcp, as a client would), the refusal an agent sees is the one quoted, and
// the human's answer through the operator server lets the same call run once.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { main } from '@ctrlrun/cli';
import { call, ROOT, start } from './support.js';

const TIMEOUT = 240_000;
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const state = mkdtempSync(join(tmpdir(), 'ctrlrun-mcp-readme-'));
afterAll(() => rmSync(state, { recursive: true, force: true }));

function section(title: string): string {
  const start = README.indexOf(`\n## ${title}\n`);
  expect(start, `README has a "## ${title}" section`).toBeGreaterThanOrEqual(0);
  const end = README.indexOf('\n## ', start + 1);
  return README.slice(start, end < 0 ? undefined : end);
}

function blocks(text: string, lang: string): string[] {
  return [...text.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)\\n```', 'g'))].map((m) => m[1]!);
}

const env = (extra: Record<string, string> = {}) => ({
  PATH: process.env['PATH'] ?? '',
  HOME: process.env['HOME'] ?? '',
  CTRLRUN_STATE: join(state, 'state.db'),
  ...extra,
});

describe('the README MCP section', () => {
  const mcp = section('MCP');

  it(
    'the gateway command prints the startup block the README quotes',
    async () => {
      const [sh] = blocks(mcp, 'sh');
      const lines = sh!.split('\n');
      expect(lines[0]).toBe('cd examples/mcp');
      const command = lines[1]!;
      const m = /^npx ctrlrun gateway (.*) --upstream-command "([^"]+)"$/.exec(command);
      expect(m, command).not.toBeNull();
      const args = [...m![1]!.split(' '), '--upstream-command', m![2]!, '--listen', '127.0.0.1:0'];
      const gw = start([join(ROOT, 'node_modules/.bin/ctrlrun'), 'gateway', ...args], env(), join(ROOT, 'examples/mcp'));
      let printed: string[];
      try {
        await gw.waitFor(/listening on \S+/, 180_000);
        printed = gw.stdout().trimEnd().split('\n');
      } finally {
        await gw.stop();
      }
      const mask = (l: string) =>
        l
          .replace(/^store .*$/, 'store <path>')
          .replace(/sha256:(?:[0-9a-f]{64}|…)/, 'sha256:<hash>')
          .replace(/127\.0\.0\.1:\d+/, '127.0.0.1:<port>');
      const quoted = lines.slice(2).map((l) => l.replace(/^# /, ''));
      expect(printed.map(mask)).toEqual(quoted.map(mask));
    },
    TIMEOUT,
  );

  it('the team command names only flags ctrlrun gateway takes, and every flag the section describes is one', async () => {
    const team = blocks(mcp, 'sh').find((b) => b.includes('--identity-jwt'))!;
    expect(team, 'the section has the team command').toBeDefined();
    let help = '';
    expect(await main(['gateway', '--help'], { stdout: (t) => void (help += t), stderr: () => {}, cwd: ROOT, env: {} })).toBe(0);
    const offered = new Set([...help.matchAll(/--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!));
    const used = [...team.matchAll(/\s--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!);
    const described = [...mcp.matchAll(/`--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!);
    expect(used.length).toBeGreaterThan(10);
    for (const flag of [...used, ...described.filter((f) => !['stdio', 'help'].includes(f) || offered.has(f))]) expect(offered, `--${flag}`).toContain(flag);
  });

  it(
    'the pasted configuration runs: the agent is refused as quoted, the human approves through mcp-operator, the same call runs once',
    async () => {
      const json = blocks(mcp, 'json').find((b) => b.includes('mcpServers'))!;
      const servers = (JSON.parse(json) as { mcpServers: Record<string, { command: string; args: string[]; cwd: string }> }).mcpServers;
      const launch = async (name: string) => {
        const s = servers[name]!;
        const client = new Client({ name: `readme-${name}`, version: '1.0.0' });
        await client.connect(new StdioClientTransport({ command: s.command, args: s.args, cwd: join(ROOT, s.cwd), env: env(), stderr: 'ignore' }), {
          timeout: 180_000,
        });
        return client;
      };
      const agent = await launch('payments');
      try {
        expect((await agent.listTools()).tools.map((t) => t.name).sort()).toEqual(['lookup_payment', 'refund']);
        const refused = await call(agent, 'refund', { payment_id: 'txn_7', amount: 120000 });
        const e = refused.refused!;
        const r = refused.result!;
        expect(r._meta?.['com.ctrlrun/refusal']).toEqual(r['structuredContent']);
        const shown = JSON.stringify({ isError: r['isError'], content: r['content'], structuredContent: r['structuredContent'] })
          .replace(/apr_[0-9a-f]{32}/g, 'apr_…')
          .replace(/sha256:[0-9a-f]{64}/g, 'sha256:…')
          .replace(/"expires_at":"[^"]+"/, '"expires_at":"…"');
        expect(blocks(mcp, 'json')).toContain(shown);
        const requestId = (e.data as { request_id: string }).request_id;

        const human = await launch('ctrlrun-operator');
        try {
          const listed = (await human.callTool({ name: 'list_pending_approvals', arguments: {} })).structuredContent as {
            approvals: { request_id: string; action: { name: string; arguments: unknown } }[];
          };
          expect(listed.approvals).toMatchObject([
            { request_id: requestId, action: { name: 'mcp.pay.refund', arguments: { amount: 120000, payment_id: 'txn_7' } } },
          ]);
          const granted = (await human.callTool({ name: 'approve', arguments: { request_id: requestId } })).structuredContent as {
            status: string;
            approver: string;
          };
          expect(granted.status).toBe('granted');
          expect(granted.approver).toMatch(/^mcp-operator:\S+$/);
        } finally {
          await human.close();
        }
        const ran = await call(agent, 'refund', { payment_id: 'txn_7', amount: 120000 });
        expect(ran.result?.content).toEqual([{ type: 'text', text: 'refunded 120000 on txn_7 (re_txn_7)' }]);
        expect(ran.result?._meta?.['com.ctrlrun/receipt']).toMatchObject({ result: 'committed', effect_key: 'refund:txn_7' });
        expect((await call(agent, 'refund', { payment_id: 'txn_7', amount: 120000 })).refused?.code).toBe(-41004);
        expect((await call(agent, 'lookup_payment', { payment_id: 'txn_7' })).result?.content).toEqual([
          { type: 'text', text: 'txn_7: 2000.00 EUR, captured' },
        ]);
      } finally {
        await agent.close();
      }
    },
    TIMEOUT,
  );
});
