// `ctrlrun gateway` in front of a team's agents, as a real process: each agent names itself with
// its own JWT (verified against a local JWKS server over TLS with a generated certificate), acts
// under its own grant from an `--authority` file; a call that waits for approval is announced to a
// local webhook receiver, which answers with a signed POST to the gateway's answer route while the
// agent's own SDK client waits (`--wait`); `--otel` spans reach the SDK registered with
// `node --import`.
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { signWebhook, SIGNATURE_HEADER, verifyWebhookSignature } from '@ctrlrun/kernel/webhook';
import { openStore } from '@ctrlrun/store-node';
import { main } from '@ctrlrun/cli';
import { call, failure, receiptDocs, CLI, httpAgent, NODE_TS, start, token, UPSTREAM, upstreamCalls, workDir, selfSignedCertificate } from './support.js';

const TIMEOUT = 240_000;
const need = createRequire(import.meta.url);
const UPSTREAM_COMMAND = `${process.execPath} ${NODE_TS.join(' ')} ${UPSTREAM}`;
const ISSUER = 'https://id.example.test';
const AUDIENCE = 'ctrlrun-gateway';
const SECRET = 'a-webhook-secret-of-at-least-32-bytes!!';

const servers: HttpServer[] = [];
afterAll(async () => {
  for (const s of servers) await new Promise<void>((r) => s.close(() => r()));
});

async function listen(server: HttpServer): Promise<number> {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return (server.address() as AddressInfo).port;
}

const POLICY = `schema: ctrlrun.policy/v2
actions:
  mcp.pay.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: {amount_lte: 100}
        decision: allow
      - when: {amount_lte: 1000}
        decision: approve
      - decision: deny
  mcp.pay.lookup: {decision: allow}
`;

const AUTHORITY = `schema: ctrlrun.policy/v3
authority:
  grants:
    - id: refunds-for-ana
      subject: { agent: "agent-ana" }
      actions: ["mcp.pay.refund", "mcp.pay.lookup"]
    - id: lookups-for-bo
      subject: { agent: "agent-bo" }
      actions: ["mcp.pay.lookup"]
`;

describe('ctrlrun gateway for a team (a real process)', () => {
  it(
    'two agents with their own JWTs act under their own grants; a waiting call is answered by a signed webhook POST while the SDK client waits; spans reach the registered SDK',
    async () => {
      const dir = workDir(POLICY);
      writeFileSync(join(dir, 'authority.yaml'), AUTHORITY);
      writeFileSync(join(dir, 'webhook.secret'), `${SECRET}\n`);
      const tls = selfSignedCertificate(dir);

      // The issuer's key set, served over TLS.
      const { publicKey, privateKey } = await generateKeyPair('RS256');
      const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
      const jwks = createHttpsServer({ key: readFileSync(tls.key), cert: readFileSync(tls.cert) }, (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
      });
      const jwksPort = await listen(jwks as unknown as HttpServer);
      const tokenFor = (agent: string) =>
        new SignJWT({})
          .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'JWT' })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setSubject(agent)
          .setIssuedAt()
          .setExpirationTime('10m')
          .sign(privateKey);

      // The webhook receiver: checks each delivery's signature and answers it (grant) with a signed POST.
      const deliveries: { body: Record<string, unknown>; verified: boolean }[] = [];
      const answers: { status: number; body: unknown }[] = [];
      const receiver = createHttpServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const raw = new Uint8Array(Buffer.concat(chunks));
          const verified = verifyWebhookSignature(SECRET, req.headers[SIGNATURE_HEADER.toLowerCase()] as string, raw, new Date()).ok;
          const body = JSON.parse(Buffer.from(raw).toString('utf8')) as Record<string, unknown>;
          deliveries.push({ body, verified });
          res.writeHead(200).end();
          const respondTo = body['respond_to'] as string;
          const answer = new TextEncoder().encode(
            JSON.stringify({ request_id: body['request_id'], action_hash: body['action_hash'], decision: 'grant', approver: 'dana@example.com' }),
          );
          const t = Math.floor(Date.now() / 1000);
          void fetch(respondTo, {
            method: 'POST',
            body: answer,
            headers: { 'content-type': 'application/json', [SIGNATURE_HEADER]: signWebhook(SECRET, t, answer) },
          })
            .then(async (r) => answers.push({ status: r.status, body: await r.json() }))
            .catch((e: unknown) => answers.push({ status: 0, body: String(e) }));
        });
      });
      const receiverPort = await listen(receiver);

      // The OpenTelemetry SDK the user registers, with an exporter writing each span to a file.
      const spans = join(dir, 'spans.jsonl');
      const tracing = join(dir, 'tracing.mjs');
      writeFileSync(
        tracing,
        `import { appendFileSync } from 'node:fs';
import { trace } from ${JSON.stringify(pathToFileURL(need.resolve('@opentelemetry/api')).href)};
import { BasicTracerProvider, SimpleSpanProcessor } from ${JSON.stringify(pathToFileURL(need.resolve('@opentelemetry/sdk-trace-base')).href)};
const exporter = {
  export(list, done) { for (const s of list) appendFileSync(${JSON.stringify(spans)}, JSON.stringify({ name: s.name, attributes: s.attributes }) + '\\n'); done({ code: 0 }); },
  shutdown() { return Promise.resolve(); },
};
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
`,
      );

      // The gateway's port, chosen first: --public-url names it for the receiver's answers.
      const probe = createHttpServer();
      const port = await new Promise<number>((r) => probe.listen(0, '127.0.0.1', () => r((probe.address() as AddressInfo).port)));
      await new Promise<void>((r) => probe.close(() => r()));
      const env = { CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml'), UPSTREAM_LOG: join(dir, 'upstream.log'), NODE_EXTRA_CA_CERTS: tls.cert };
      const gw = start(
        [
          ...NODE_TS,
          '--import',
          tracing,
          CLI,
          'gateway',
          '--upstream-command',
          UPSTREAM_COMMAND,
          '--alias',
          'pay',
          '--listen',
          `127.0.0.1:${port}`,
          '--public-url',
          `http://127.0.0.1:${port}`,
          '--identity-jwt',
          '--identity-jwt-algorithms',
          'RS256',
          '--identity-jwt-issuer',
          ISSUER,
          '--identity-jwt-audience',
          AUDIENCE,
          '--identity-jwt-token-type',
          'jwt',
          '--identity-jwt-jwks-url',
          `https://127.0.0.1:${jwksPort}/jwks.json`,
          '--authority',
          join(dir, 'authority.yaml'),
          '--webhook-url',
          `http://127.0.0.1:${receiverPort}/hook`,
          '--webhook-secret-file',
          join(dir, 'webhook.secret'),
          '--allow-insecure-webhook',
          '--wait',
          '--otel',
        ],
        env,
      );
      let exit: number | null = null;
      try {
        const url = (await gw.waitFor(/listening on (\S+)/, 120_000))[1]!;
        // The answer route is where the gateway listens: --public-url is that address.
        expect(gw.stdout()).toContain(`identity jwt (issuer ${ISSUER}, audience ${AUDIENCE}, RS256, JWKS https://127.0.0.1:${jwksPort}/jwks.json`);
        expect(gw.stdout()).toContain(`authority 2 grant(s) from ${join(dir, 'authority.yaml')}`);
        expect(gw.stdout()).toContain('otel spans to the registered tracer provider (tracer ctrlrun; no argument values)');
        expect(gw.stdout()).toContain(`webhook http://127.0.0.1:${receiverPort}/hook`);

        const ana = await httpAgent(url, { authorization: `Bearer ${await tokenFor('agent-ana')}` });
        const bo = await httpAgent(url, { authorization: `Bearer ${await tokenFor('agent-bo')}` });
        const stranger = await httpAgent(url, {
          authorization: `Bearer ${await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).sign(new Uint8Array(32))}`,
        });
        try {
          expect(failure(await call(ana, 'refund', { payment_id: 'p1', amount: 10 }))).toBeUndefined();
          expect(failure(await call(bo, 'lookup', {}))).toBeUndefined();
          // Outside bo's grant: refused before the policy, the upstream never called.
          const refused = await call(bo, 'refund', { payment_id: 'p2', amount: 10 });
          expect(token(refused.refused)).toBe('ctrlrun.unauthorized');
          expect(refused.refused?.code).toBe(-41012);
          // A token the issuer did not sign names nobody.
          const forged = await call(stranger, 'lookup', {});
          expect(failure(forged)).toBeDefined();
          expect(upstreamCalls(env.UPSTREAM_LOG).map((c) => c.tool)).toEqual(['refund', 'lookup']);
        } finally {
          await bo.close();
          await stranger.close();
        }
        expect(deliveries).toEqual([]);
        // Needs a human: the gateway holds the call, the receiver hears of it and answers by a
        // signed POST, and the same SDK request gets the result; the tool ran once.
        const waited = await call(ana, 'refund', { payment_id: 'p3', amount: 700 });
        expect(failure(waited)).toBeUndefined();
        expect(deliveries).toHaveLength(1);
        expect(deliveries[0]!.verified).toBe(true);
        expect(deliveries[0]!.body).toMatchObject({
          schema: 'ctrlrun.approval_request/v1',
          action: { name: 'mcp.pay.refund', principal: { agent: 'agent-ana' } },
          respond_to: `http://127.0.0.1:${port}/ctrlrun/approvals/${String(deliveries[0]!.body['request_id'])}`,
        });
        expect(answers).toEqual([{ status: 200, body: { status: 'ok', detail: expect.any(String) } }]);
        expect(upstreamCalls(env.UPSTREAM_LOG).map((c) => c.arguments['payment_id'] ?? c.tool)).toEqual(['p1', 'lookup', 'p3']);
        // An answer not signed with the secret changes nothing.
        const unsigned = await fetch(`http://127.0.0.1:${port}/ctrlrun/approvals/apr_x`, { method: 'POST', body: '{}' });
        expect(unsigned.status).toBe(400);
        await ana.close();
      } finally {
        exit = await gw.stop();
      }
      expect(exit, gw.stderr()).toBe(0);

      const store = await openStore(join(dir, '.ctrlrun', 'state.db'), { readOnly: true });
      try {
        const docs = await receiptDocs(store);
        const seen = docs.map((d) => [d['action'], (d['principal'] as { agent: string }).agent, d['result'], d['authority_grant_id']]);
        expect(seen.filter((r) => r[1] !== undefined)).toEqual([
          ['mcp.pay.refund', 'agent-ana', 'committed', 'refunds-for-ana'],
          ['mcp.pay.lookup', 'agent-bo', 'committed', 'lookups-for-bo'],
          ['mcp.pay.refund', 'agent-bo', 'denied', null],
          ['mcp.pay.refund', 'agent-ana', 'committed', 'refunds-for-ana'],
        ]);
        expect(docs.at(-1)!['approver']).toBe('dana@example.com');
        expect((docs[0]!['principal'] as { issuer: string }).issuer).toBe(ISSUER);
      } finally {
        await store.close();
      }
      const exported = existsSync(spans)
        ? readFileSync(spans, 'utf8')
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l) as { name: string; attributes: Record<string, unknown> })
        : [];
      expect(exported.map((s) => [s.name, s.attributes['ctrlrun.principal.agent'], s.attributes['ctrlrun.result']]).slice(0, 3)).toEqual([
        ['mcp.pay.refund', 'agent-ana', 'committed'],
        ['mcp.pay.lookup', 'agent-bo', 'committed'],
        ['mcp.pay.refund', 'agent-bo', 'denied'],
      ]);
      expect(exported.every((s) => !Object.keys(s.attributes).some((k) => k.startsWith('ctrlrun.argument.')))).toBe(true);
    },
    TIMEOUT,
  );

  it(
    'each flag refused as given wrong, naming it, before anything listens',
    async () => {
      const dir = workDir(POLICY);
      writeFileSync(join(dir, 'short.secret'), 'too short\n');
      writeFileSync(join(dir, 'good.secret'), `${SECRET}\n`);
      writeFileSync(join(dir, 'authority.yaml'), AUTHORITY);
      const inline = workDir(
        `${POLICY.replace('ctrlrun.policy/v2', 'ctrlrun.policy/v3')}authority:\n  grants:\n    - id: g\n      subject: { agent: "a" }\n      actions: ["**"]\n`,
      );
      writeFileSync(join(inline, 'authority.yaml'), AUTHORITY);
      const base = ['gateway', '--upstream', 'http://127.0.0.1:9/mcp', '--alias', 'pay'];
      const jwt = [
        '--identity-jwt',
        '--identity-jwt-algorithms',
        'RS256',
        '--identity-jwt-issuer',
        ISSUER,
        '--identity-jwt-audience',
        AUDIENCE,
        '--identity-jwt-token-type',
        'jwt',
      ];
      const cases: [string, string[], RegExp][] = [
        [dir, [...base, '--principal', 'a', '--identity-jwt-issuer', ISSUER], /--identity-jwt-issuer needs --identity-jwt/],
        [
          dir,
          [...base, '--identity-jwt', '--identity-jwt-issuer', ISSUER],
          /--identity-jwt needs --identity-jwt-algorithms, --identity-jwt-audience, --identity-jwt-token-type/,
        ],
        [dir, [...base, ...jwt], /exactly one key source.*\(none given\)/],
        [
          dir,
          [...base, ...jwt, '--identity-jwt-jwks-url', 'https://x.test/k', '--identity-jwt-secret-file', 'f'],
          /exactly one key source.*--identity-jwt-jwks-url and --identity-jwt-secret-file given/,
        ],
        [dir, [...base, ...jwt, '--identity-jwt-jwks-url', 'http://x.test/k'], /--identity-jwt: jwksUrl must be https:/],
        [dir, [...base, ...jwt, '--principal', 'a', '--identity-jwt-jwks-url', 'https://x.test/k'], /exactly one identity source/],
        [
          dir,
          [...base, '--principal', 'a', '--webhook-url', 'https://hooks.test/x'],
          /--webhook-url needs a secret: --webhook-secret-file FILE or \$CTRLRUN_WEBHOOK_SECRET/,
        ],
        [
          dir,
          [...base, '--principal', 'a', '--webhook-url', 'https://hooks.test/x', '--webhook-secret-file', join(dir, 'short.secret')],
          /--webhook-secret-file: the webhook secret is 9 bytes; it must be at least 32 bytes/,
        ],
        [
          dir,
          [...base, '--principal', 'a', '--webhook-url', 'http://hooks.test/x', '--webhook-secret-file', join(dir, 'good.secret')],
          /--webhook-url "http:\/\/hooks\.test\/x": the webhook url must be https \(http is allowed only to a loopback host/,
        ],
        [
          dir,
          [
            ...base,
            '--principal',
            'a',
            '--webhook-url',
            'https://hooks.test/x',
            '--webhook-secret-file',
            join(dir, 'good.secret'),
            '--public-url',
            'http://gw.example',
          ],
          /--public-url "http:\/\/gw\.example": the webhook url must be https/,
        ],
        [dir, [...base, '--principal', 'a', '--public-url', 'https://gw.test'], /--public-url is where webhook answers arrive/],
        [dir, [...base, '--principal', 'a', '--otel-arguments', 'amount'], /--otel-arguments needs --otel/],
        [dir, [...base, '--principal', 'a', '--authority', join(dir, 'missing.yaml')], /--authority .*missing\.yaml cannot be read/],
        [inline, [...base, '--principal', 'a', '--authority', join(inline, 'authority.yaml')], /authority is declared twice/],
      ];
      for (const [cwd, argv, expected] of cases) {
        let stderr = '';
        const code = await main(argv, { stdout: () => {}, stderr: (t) => void (stderr += t), cwd, env: { CTRLRUN_CONFIG: join(cwd, 'ctrlrun.yaml') } });
        expect(code, argv.join(' ')).not.toBe(0);
        expect(stderr, argv.join(' ')).toMatch(expected);
        expect(stderr).not.toContain('too short');
      }
    },
    TIMEOUT,
  );

  it(
    'mcp-operator with --identity-jwt: an answer is recorded as the human the token names; a token naming no human, or none, answers nothing',
    async () => {
      const dir = workDir(POLICY);
      const secret = 'an-hs256-secret-for-the-operator-tokens';
      writeFileSync(join(dir, 'jwt.secret'), `${secret}\n`);
      const env = { CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml'), UPSTREAM_LOG: join(dir, 'upstream.log') };
      const gw = start(
        [...NODE_TS, CLI, 'gateway', '--upstream-command', UPSTREAM_COMMAND, '--alias', 'pay', '--principal', 'agent-1', '--listen', '127.0.0.1:0'],
        env,
      );
      let op: ReturnType<typeof start> | undefined;
      try {
        const agent = await httpAgent((await gw.waitFor(/listening on (\S+)/, 120_000))[1]!);
        op = start(
          [
            ...NODE_TS,
            CLI,
            'mcp-operator',
            '--listen',
            '127.0.0.1:0',
            '--identity-jwt',
            '--identity-jwt-algorithms',
            'HS256',
            '--identity-jwt-issuer',
            ISSUER,
            '--identity-jwt-audience',
            'ctrlrun-operator',
            '--identity-jwt-token-type',
            '',
            '--identity-jwt-secret-file',
            join(dir, 'jwt.secret'),
            '--identity-jwt-user-claim',
            'email',
          ],
          { CTRLRUN_CONFIG: env.CTRLRUN_CONFIG },
        );
        const opUrl = (await op.waitFor(/listening on (\S+)/, 120_000))[1]!;
        expect(op.stdout()).toContain(`identity jwt (issuer ${ISSUER}, audience ctrlrun-operator, HS256, a shared secret file, header authorization)`);
        const key = new TextEncoder().encode(secret);
        const operatorToken = (claims: Record<string, unknown>) =>
          new SignJWT(claims)
            .setProtectedHeader({ alg: 'HS256' })
            .setIssuer(ISSUER)
            .setAudience('ctrlrun-operator')
            .setSubject('laptop-7')
            .setExpirationTime('10m')
            .sign(key);

        const asked = await call(agent, 'refund', { payment_id: 'p1', amount: 700 });
        const requestId = (asked.refused!.data as { request_id: string }).request_id;
        const noHuman = await httpAgent(opUrl, { authorization: `Bearer ${await operatorToken({})}` });
        expect((await call(noHuman, 'approve', { request_id: requestId })).error?.code).toBe(-41013);
        const wrongKey = await httpAgent(opUrl, {
          authorization: `Bearer ${await new SignJWT({ email: 'mallory@example.com' }).setProtectedHeader({ alg: 'HS256' }).setIssuer(ISSUER).setAudience('ctrlrun-operator').setSubject('x').sign(new Uint8Array(40))}`,
        });
        expect((await call(wrongKey, 'approve', { request_id: requestId })).error?.code).toBe(-41007);
        const ana = await httpAgent(opUrl, { authorization: `Bearer ${await operatorToken({ email: 'ana@example.com' })}` });
        const granted = await call(ana, 'approve', { request_id: requestId });
        expect(failure(granted)).toBeUndefined();
        expect((granted.result as { structuredContent?: Record<string, unknown> }).structuredContent).toMatchObject({
          status: 'granted',
          approver: 'mcp-operator:ana@example.com',
        });
        expect(failure(await call(agent, 'refund', { payment_id: 'p1', amount: 700 }))).toBeUndefined();
        expect(upstreamCalls(env.UPSTREAM_LOG)).toHaveLength(1);
        for (const c of [noHuman, wrongKey, ana, agent]) await c.close();
      } finally {
        await op?.stop();
        await gw.stop();
      }
    },
    TIMEOUT,
  );
});
