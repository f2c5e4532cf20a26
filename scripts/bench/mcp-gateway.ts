// The MCP gateway's added latency per tools/call: an SDK client calling the example payments
// server (examples/mcp/payments-server.ts) directly over stdio, against the same client launching
// `ctrlrun gateway --stdio` in front of the same server, on a SQLite file store (better-sqlite3,
// the CLI's default). Calls run one at a time; median and p95 per call, in ms.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const root = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-bench-mcp-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
writeFileSync(
  join(dir, 'ctrlrun.yaml'),
  `schema: ctrlrun.policy/v2
actions:
  mcp.pay.refund: {effect: "refund:{payment_id}", decision: allow}
  mcp.pay.lookup_payment: {decision: allow}
`,
);
const tsx = ['--import', 'tsx'];
const server = [...tsx, join(root, 'examples/mcp/payments-server.ts')];
const env = { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml') };

async function client(args: string[]): Promise<Client> {
  const c = new Client({ name: 'bench', version: '1.0.0' });
  await c.connect(new StdioClientTransport({ command: process.execPath, args, cwd: root, env, stderr: 'ignore' }), { timeout: 120_000 });
  return c;
}

const N = Number(process.env['BENCH_MCP_CALLS'] ?? 400);
const WARM = 50;

async function measure(c: Client, tool: string, args: (i: number) => Record<string, unknown>, offset: number): Promise<number[]> {
  for (let i = 0; i < WARM; i++) await c.callTool({ name: tool, arguments: args(offset + i) });
  const times: number[] = [];
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    const r = await c.callTool({ name: tool, arguments: args(offset + WARM + i) });
    times.push(performance.now() - t);
    if (r.isError) throw new Error(`${tool} failed: ${JSON.stringify(r)}`);
  }
  return times.sort((a, b) => a - b);
}

const q = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;
const fmt = (xs: number[]) => `median ${q(xs, 0.5).toFixed(2)} ms, p95 ${q(xs, 0.95).toFixed(2)} ms`;

const direct = await client(server);
// The CLI as it ships (its built dist/, which `npm run bench` builds first).
const gateway = await client([
  join(root, 'packages/cli/dist/bin.js'),
  'gateway',
  '--stdio',
  '--alias',
  'pay',
  '--principal',
  'bench-agent',
  '--upstream-command',
  [process.execPath, ...server].join(' '),
]);
try {
  const refund = (i: number) => ({ payment_id: `txn_${i}`, amount: 100 });
  const lookup = (i: number) => ({ payment_id: `txn_${i}` });
  const rows: [string, number[], number[]][] = [
    ['refund (effect key: reserve + commit)', await measure(direct, 'refund', refund, 0), await measure(gateway, 'refund', refund, 0)],
    ['lookup_payment (no effect template)', await measure(direct, 'lookup_payment', lookup, 0), await measure(gateway, 'lookup_payment', lookup, 0)],
  ];
  console.log(
    `${N} sequential tools/call each over stdio; SQLite file store (better-sqlite3); load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  for (const [name, d, g] of rows) {
    console.log(`${name}`);
    console.log(`  direct    ${fmt(d)}`);
    console.log(`  gateway   ${fmt(g)}`);
    console.log(`  added     median ${(q(g, 0.5) - q(d, 0.5)).toFixed(2)} ms per call`);
  }
} finally {
  await direct.close();
  await gateway.close();
}
