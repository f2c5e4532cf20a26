/**
 * The worker's own MCP gateway (`mcp:` in its config document), served on Node by
 * `startNodeWorker` in front of the counting upstream (test/mcp/upstream.ts over Streamable HTTP,
 * its own process), called by the real `@modelcontextprotocol/sdk` client with the worker's agent
 * credential: an allowed call runs once and its receipt is in the worker's store, the duplicate
 * is refused before the upstream, a tool the policy does not name is denied, and the config key
 * is checked with errors naming its path. The same in workerd (miniflare, Node compatibility off):
 * the workerd entry, its config and policy as text bindings, reaches the same kind of upstream.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgument } from '@ctrlrun/kernel';
import { loadWorkerSettings, parseWorkerConfig } from '../../worker/src/index.js';
import { startNodeWorker, type NodeWorker } from '../../worker/src/runtime/node.js';
import { call, failure, httpAgent, POLICY, receiptDocs, startHttpUpstream, upstreamCalls, type Running } from '../mcp/support.js';
import { bundleWorkerd, COMPATIBILITY_DATE, out } from './bundle.js';

const AGENT = 'agent-token-for-the-mcp-route';
const OPERATOR = 'operator-token-for-the-mcp-rt';
const ENV = { CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR };
const TIMEOUT = 180_000;

describe('the mcp: key of the worker config', () => {
  const refused = (text: string, pattern: RegExp): void => {
    expect(() => parseWorkerConfig(text, 'w.yaml')).toThrow(InvalidArgument);
    expect(() => parseWorkerConfig(text, 'w.yaml')).toThrow(pattern);
  };

  it('names the key path of what is wrong', () => {
    refused('mcp: { upstream: [] }\n', /^w\.yaml: mcp\.upstream: unknown key \(expected one of upstreams\)/);
    refused('mcp: { upstreams: [] }\n', /^w\.yaml: mcp\.upstreams: must list at least one upstream MCP server/);
    refused('mcp: { upstreams: [{ name: Pay, url: "http://x/mcp" }] }\n', /mcp\.upstreams\[0\]\.name: "Pay" must match \^\[a-z0-9\]/);
    refused(
      'mcp: { upstreams: [{ name: pay, url: "http://x/mcp" }, { name: pay, url: "http://y/mcp" }] }\n',
      /mcp\.upstreams\[1\]\.name: "pay" is given twice/,
    );
    refused('mcp: { upstreams: [{ name: pay, url: "ftp://x/mcp" }] }\n', /mcp\.upstreams\[0\]\.url: "ftp:\/\/x\/mcp" is not an absolute http\(s\) URL/);
    refused('mcp: { upstreams: [{ name: pay, url: "http://u:p@x/mcp" }] }\n', /mcp\.upstreams\[0\]\.url: .* holds credentials/);
    refused(
      'mcp: { upstreams: [{ name: pay, url: "http://x/mcp", headers: { authorization: "Bearer s3cret" } }] }\n',
      /mcp\.upstreams\[0\]\.headers\.authorization: .*never the secret itself/,
    );
    refused(
      'mcp: { upstreams: [{ name: pay, url: "http://x/mcp", headers: { Mcp-Session-Id: "x" } }] }\n',
      /headers\["Mcp-Session-Id"\]: is set by the MCP client itself/,
    );
    refused(
      'mcp: { upstreams: [{ name: pay, url: "http://x/mcp", timeoutMs: 0 }] }\n',
      /mcp\.upstreams\[0\]\.timeoutMs: must be a whole number from 1 to 600000/,
    );
    refused('mcp: { upstreams: [{ name: pay, url: "http://x/mcp", tools: [a] }] }\n', /mcp\.upstreams\[0\]\.tools: unknown key/);
    expect(parseWorkerConfig('mcp: { upstreams: [{ name: pay, url: "http://x/mcp" }] }\n', 'w.yaml').mcp).toEqual({
      upstreams: [{ name: 'pay', url: 'http://x/mcp', headers: {}, timeoutMs: 30_000 }],
    });
  });

  it('refuses an upstream the policy has no action for, and a header secret that is not set', async () => {
    const policy = { CTRLRUN_POLICY: POLICY };
    await expect(
      loadWorkerSettings({ ...ENV, ...policy, CTRLRUN_CONFIG: 'mcp: { upstreams: [{ name: billing, url: "http://x/mcp" }] }\n' }, { generate: false }),
    ).rejects.toThrow(/CTRLRUN_CONFIG: mcp\.upstreams\[0\]\.name: the policy \(CTRLRUN_POLICY\) has no action mcp\.billing\.<tool>/);
    await expect(
      loadWorkerSettings(
        { ...ENV, ...policy, CTRLRUN_CONFIG: 'mcp: { upstreams: [{ name: pay, url: "http://x/mcp", headers: { authorization: { env: PAY_TOKEN } } }] }\n' },
        { generate: false },
      ),
    ).rejects.toThrow(/mcp\.upstreams\[0\]\.headers\.authorization: the variable PAY_TOKEN is not set/);
    await expect(
      loadWorkerSettings({ ...ENV, CTRLRUN_CONFIG: 'mcp: { upstreams: [{ name: pay, url: "http://x/mcp" }] }\n' }, { generate: false }),
    ).rejects.toThrow(/mcp upstreams are declared but no policy is given/);
  });
});

describe('the worker mounts the MCP gateway at /mcp', () => {
  let dir = '';
  let log = '';
  let upstream: { url: string; process: Running } | undefined;
  let worker: NodeWorker | undefined;
  let banner = '';

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlrun-worker-mcp-'));
    log = join(dir, 'upstream.log');
    upstream = await startHttpUpstream(log);
    await writeFile(join(dir, 'policy.yaml'), POLICY);
    // The upstream's credential comes from a variable, as a real deployment's would.
    await writeFile(
      join(dir, 'worker.yaml'),
      `policy: ./policy.yaml\nmcp:\n  upstreams:\n    - name: pay\n      url: ${upstream.url}\n      headers:\n        authorization: { env: PAY_MCP_TOKEN, prefix: "Bearer " }\n`,
    );
    worker = await startNodeWorker({
      env: { ...ENV, PAY_MCP_TOKEN: 'upstream-secret' },
      configPath: join(dir, 'worker.yaml'),
      port: 0,
      print: (text) => void (banner = text),
    });
  }, TIMEOUT);

  afterAll(async () => {
    await worker?.close();
    await upstream?.process.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    'one allowed call runs once with its receipt in the worker store; the duplicate is refused; an unknown tool is denied',
    async () => {
      expect(banner).toMatch(/mcp: +http:\/\/127\.0\.0\.1:\d+\/mcp\/pay \(and \/mcp\) → http:\/\/127\.0\.0\.1:\d+\/mcp/);
      const agent = await httpAgent(`${worker!.url}/mcp`, { authorization: `Bearer ${AGENT}` });
      try {
        expect((await agent.listTools()).tools.map((t) => t.name)).toContain('refund');

        const first = await call(agent, 'refund', { payment_id: 'p1', amount: 9 });
        expect(failure(first)).toBeUndefined();
        expect(upstreamCalls(log)).toEqual([{ tool: 'refund', arguments: { payment_id: 'p1', amount: 9 } }]);

        const dup = await call(agent, 'refund', { payment_id: 'p1', amount: 9 });
        expect(dup.refused?.code).toBe(-41004);
        expect(dup.refused?.data['error']).toBe('ctrlrun.duplicate_effect');

        const unknown = await call(agent, 'wipe_everything', { all: true });
        expect(unknown.refused?.code).toBe(-41001);
        expect(upstreamCalls(log)).toHaveLength(1);

        // The receipts are the worker's: its store, and its own receipts route for an operator.
        const docs = await receiptDocs(worker!.store);
        // One chain in the worker's store: the run, the refused repeat, the denial — as the agent's credential names it.
        expect(docs.map((d) => [d['action'], d['result'], d['effect_key'], d['decision_reason']])).toEqual([
          ['mcp.pay.refund', 'committed', 'refund:p1', 'rule[0]'],
          ['mcp.pay.refund', 'blocked', 'refund:p1', 'rule[0]'],
          ['mcp.pay.wipe_everything', 'denied', null, 'unknown_action'],
        ]);
        expect(docs.every((d) => (d['principal'] as { agent: string }).agent === 'refund-agent')).toBe(true);
        const listed = await fetch(`${worker!.url}/v1/receipts`, { headers: { authorization: `Bearer ${OPERATOR}` } });
        expect(listed.status).toBe(200);
        const { receipts } = (await listed.json()) as { receipts: { effectKey: unknown; intact: boolean }[] };
        expect(receipts.map((r) => r.effectKey)).toEqual(['refund:p1', 'refund:p1', null]);
        expect(receipts.every((r) => r.intact)).toBe(true);
        const verify = (await (await fetch(`${worker!.url}/v1/receipts/verify`, { headers: { authorization: `Bearer ${OPERATOR}` } })).json()) as {
          ok: boolean;
        };
        expect(verify.ok).toBe(true);
      } finally {
        await agent.close();
      }

      // The named path serves the same upstream, under the same effect keys.
      const named = await httpAgent(`${worker!.url}/mcp/pay`, { authorization: `Bearer ${AGENT}` });
      try {
        expect((await call(named, 'refund', { payment_id: 'p1', amount: 9 })).refused?.code).toBe(-41004);
        expect(failure(await call(named, 'refund', { payment_id: 'p2', amount: 5 }))).toBeUndefined();
        expect(upstreamCalls(log).map((c) => c.arguments['payment_id'])).toEqual(['p1', 'p2']);
      } finally {
        await named.close();
      }
    },
    TIMEOUT,
  );

  it(
    'takes only an agent credential',
    async () => {
      const ping = (headers: Record<string, string>) =>
        fetch(`${worker!.url}/mcp`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
          body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
        });
      expect((await ping({})).status).toBe(401);
      expect((await ping({ authorization: `Bearer ${OPERATOR}` })).status).toBe(403);
      expect((await ping({ authorization: `Bearer ${AGENT}` })).status).toBe(200);
      // Stateless: no stream to open, answered without reaching the upstream.
      expect((await fetch(`${worker!.url}/mcp`, { headers: { authorization: `Bearer ${AGENT}`, accept: 'text/event-stream' } })).status).toBe(405);
      expect((await fetch(`${worker!.url}/mcp/billing`, { method: 'POST', headers: { authorization: `Bearer ${AGENT}` } })).status).toBe(404);
    },
    TIMEOUT,
  );
});

describe('the same gateway in workerd (miniflare, Node compatibility off)', () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  });

  it(
    "one run, the duplicate refused, an unknown tool denied, receipts through the worker's own route",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'ctrlrun-workerd-mcp-'));
      closers.push(() => rm(dir, { recursive: true, force: true }));
      const log = join(dir, 'upstream.log');
      const upstream = await startHttpUpstream(log);
      closers.push(() => upstream.process.stop());
      const bundle = await bundleWorkerd('worker-mcp-workerd');
      expect(bundle.inputs.filter((i) => i.startsWith('node:') || i.startsWith('packages/store-node/'))).toEqual([]);
      const mf = new Miniflare({
        compatibilityDate: COMPATIBILITY_DATE,
        compatibilityFlags: [], // no nodejs_compat
        modulesRoot: out,
        modules: [
          { type: 'ESModule', path: bundle.scriptPath, contents: bundle.script },
          { type: 'CompiledWasm', path: join(out, bundle.wasmName), contents: bundle.wasm },
        ],
        bindings: { ...ENV, CTRLRUN_POLICY: POLICY, CTRLRUN_CONFIG: `mcp:\n  upstreams:\n    - name: pay\n      url: ${upstream.url}\n` },
      });
      closers.push(() => mf.dispose());
      const base = await mf.ready;
      const agent = await httpAgent(new URL('/mcp/pay', base).href, { authorization: `Bearer ${AGENT}` });
      closers.push(() => agent.close());
      expect(failure(await call(agent, 'refund', { payment_id: 'w1', amount: 3 }))).toBeUndefined();
      expect((await call(agent, 'refund', { payment_id: 'w1', amount: 3 })).refused?.code).toBe(-41004);
      expect((await call(agent, 'wipe_everything', {})).refused?.code).toBe(-41001);
      expect(upstreamCalls(log).map((c) => c.arguments)).toEqual([{ amount: 3, payment_id: 'w1' }]);
      const listed = await fetch(new URL('/v1/receipts', base), { headers: { authorization: `Bearer ${OPERATOR}` } });
      const { receipts } = (await listed.json()) as { receipts: { receipt: { action: string; result: string } }[] };
      expect(receipts.map((r) => [r.receipt.action, r.receipt.result])).toEqual([
        ['mcp.pay.refund', 'committed'],
        ['mcp.pay.refund', 'blocked'],
        ['mcp.pay.wipe_everything', 'denied'],
      ]);
    },
    TIMEOUT,
  );
});
