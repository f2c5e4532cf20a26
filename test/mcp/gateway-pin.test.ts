// Pinned upstreams (policy v8 `upstream`) through `ctrlrun gateway` as a real process: an https
// upstream (a local TLS server with a generated certificate in front of the counting upstream)
// runs a call whose pin names its certificate and the tool's schema as it lists it; a call whose
// pin names another certificate is refused `upstream_mismatch` before the upstream hears of it.
import { readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { toolSchemaDigest } from '@ctrlrun/kernel';
import { call, failure, CLI, httpAgent, NODE_TS, start, startHttpUpstream, upstreamCalls, workDir, selfSignedCertificate } from './support.js';

const TIMEOUT = 240_000;
const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) await new Promise<void>((r) => s.close(() => r()));
});

/** A TLS server on 127.0.0.1 relaying every request to `target` (plain HTTP). */
async function tlsFront(tls: { key: string; cert: string }, target: URL): Promise<number> {
  const server = createHttpsServer({ key: readFileSync(tls.key), cert: readFileSync(tls.cert) }, (req, res) => {
    const out = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  servers.push(server as unknown as Server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return (server.address() as AddressInfo).port;
}

describe('ctrlrun gateway with pinned upstreams (a real process)', () => {
  it(
    'the pinned certificate and tool schema run the call; another pinned certificate is upstream_mismatch, refused before the call',
    async () => {
      const dir = workDir('schema: ctrlrun.policy/v2\nactions: {}\n');
      const served = selfSignedCertificate(dir, 'served');
      const other = selfSignedCertificate(dir, 'other');
      const log = join(dir, 'upstream.log');
      const upstream = await startHttpUpstream(log);
      try {
        const port = await tlsFront(served, new URL(upstream.url));
        const schema = toolSchemaDigest({ type: 'object' });
        const policy = `schema: ctrlrun.policy/v8
actions:
  mcp.pay.refund:
    effect: "refund:{payment_id}"
    upstream: {tls_cert_sha256: ["${served.digest}"], tool_schema_sha256: "${schema}"}
    decision: allow
  mcp.pay.lookup:
    upstream: {tls_cert_file: other.pem}
    decision: allow
  mcp.pay.flaky:
    effect: "flaky:{id}"
    upstream: {tool_schema_sha256: "sha256:${'0'.repeat(64)}"}
    decision: allow
`;
        writeFileSync(join(dir, 'ctrlrun.yaml'), policy);
        const gw = start(
          [...NODE_TS, CLI, 'gateway', '--upstream', `https://127.0.0.1:${port}/mcp`, '--alias', 'pay', '--principal', 'agent-1', '--listen', '127.0.0.1:0'],
          { CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml'), NODE_EXTRA_CA_CERTS: served.cert },
        );
        try {
          const url = (await gw.waitFor(/listening on (\S+)/, 120_000))[1]!;
          expect(gw.stdout()).toContain(
            '3 action(s) pin the upstream (checked before each call: upstream_mismatch, upstream_unverified):\n  mcp.pay.refund: certificate (1 accepted), tool schema\n  mcp.pay.lookup: certificate (1 accepted)\n  mcp.pay.flaky: tool schema\n',
          );
          const agent = await httpAgent(url);
          expect(failure(await call(agent, 'refund', { payment_id: 'p1', amount: 10 }))).toBeUndefined();
          const lookup = await call(agent, 'lookup', {});
          expect(lookup.refused?.code).toBe(-41001);
          expect(lookup.refused?.data).toMatchObject({ error: 'ctrlrun.denied', reason: 'upstream_mismatch' });
          expect(lookup.refused?.text).toContain(`the upstream presented the certificate ${served.digest}, which the policy does not pin`);
          const flaky = await call(agent, 'flaky', { id: 'f1' });
          expect(flaky.refused?.data).toMatchObject({ reason: 'upstream_mismatch' });
          expect(flaky.refused?.text).toContain(`lists the tool with the schema ${schema}`);
          expect(upstreamCalls(log).map((c) => c.tool)).toEqual(['refund']);
          await agent.close();
        } finally {
          expect(await gw.stop(), gw.stderr()).toBe(0);
        }
        expect(other.digest).not.toBe(served.digest);
      } finally {
        await upstream.process.stop();
      }
    },
    TIMEOUT,
  );
});
