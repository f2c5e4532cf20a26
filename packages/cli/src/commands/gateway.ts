/**
 * `ctrlrun gateway`: ctrlrun in front of one MCP server (docs/spec/04-surfaces.md §5). The agent connects to the
 * gateway (Streamable HTTP, or `--stdio`); the gateway connects to the upstream (`--upstream URL`
 * over Streamable HTTP, or `--upstream-command "CMD ARGS"` as a subprocess over stdio). Every
 * `tools/call` goes through the control path as `mcp.<alias>.<tool>`; everything else is relayed.
 *
 * @module
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { dirname, resolve as resolvePath } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { HeaderIdentityProvider, maskUrl, type EventSink, type Policy, type UpstreamObservation } from '@ctrlrun/kernel';
import { sha256Tagged } from '@ctrlrun/kernel/store';
import { checkWebhookUrl, webhookSecret } from '@ctrlrun/kernel/webhook';
import { STORE_URL, type Command } from '../command.js';
import { describeTarget } from '../discovery.js';
import { visible } from '../format.js';
import { CliRefusal, UsageError } from '../errors.js';
import { readRegularFile } from '../files.js';
import type { UpstreamTarget } from '../mcp-http.js';
import { JWT_OPTIONS, jwtIdentityLine, jwtOptionsFrom, jwtProvider } from '../jwt-options.js';
import { MCP_OPTIONS } from '../mcp-options.js';
import { openWriter } from '../stores.js';

function upstreamTarget(
  values: Record<string, unknown>,
  env: Readonly<Record<string, string | undefined>>,
  splitCommand: (command: string) => string[],
): UpstreamTarget {
  const url = values['upstream'] as string | undefined;
  const command = values['upstream-command'] as string | undefined;
  if ((url === undefined) === (command === undefined)) throw new UsageError('give exactly one of --upstream URL or --upstream-command "CMD ARGS"');
  if (url !== undefined) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new UsageError(`--upstream must be an http(s):// URL, got ${JSON.stringify(maskUrl(url))}`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      throw new UsageError(`--upstream must be an http(s):// URL, got ${JSON.stringify(maskUrl(url))}`);
    // fetch refuses a URL holding credentials, and its error quotes the URL whole: refuse it here, masked.
    if (parsed.username !== '' || parsed.password !== '')
      throw new UsageError(
        `--upstream ${JSON.stringify(maskUrl(url))} holds credentials (user:password@ before the host), which HTTP clients refuse to send: give the upstream's address without them`,
      );
    return { kind: 'http', url: parsed };
  }
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) childEnv[k] = v;
  return { kind: 'command', argv: splitCommand(command!), env: childEnv };
}

interface WebhookFlags {
  readonly url?: string;
  readonly secret: Uint8Array;
  readonly publicUrl?: string;
  readonly allowInsecure: boolean;
}

/** The webhook flags (docs/spec/04-surfaces.md §6): the secret from a file or the environment, never a flag value. */
function webhookFlags(values: Record<string, unknown>, io: { cwd: string; env: Readonly<Record<string, string | undefined>> }): WebhookFlags | null {
  const url = values['webhook-url'] as string | undefined;
  const file = values['webhook-secret-file'] as string | undefined;
  const publicUrl = values['public-url'] as string | undefined;
  const envSecret = io.env['CTRLRUN_WEBHOOK_SECRET'];
  if (url === undefined && file === undefined && envSecret === undefined) {
    if (publicUrl !== undefined) throw new UsageError('--public-url is where webhook answers arrive: it needs --webhook-url and a secret');
    if (values['allow-insecure-webhook'] === true) throw new UsageError('--allow-insecure-webhook needs --webhook-url');
    return null;
  }
  let secretText: string;
  if (file !== undefined) {
    const path = resolvePath(io.cwd, file);
    try {
      secretText = readRegularFile(path).replace(/\r?\n$/, '');
    } catch (e) {
      throw new UsageError(`--webhook-secret-file ${path} cannot be read: ${(e as Error).message}`);
    }
  } else if (envSecret !== undefined) {
    secretText = envSecret;
  } else {
    throw new UsageError('--webhook-url needs a secret: --webhook-secret-file FILE or $CTRLRUN_WEBHOOK_SECRET (never a flag value)');
  }
  let secret: Uint8Array;
  try {
    secret = webhookSecret(secretText);
  } catch (e) {
    throw new UsageError(`${file !== undefined ? '--webhook-secret-file' : '$CTRLRUN_WEBHOOK_SECRET'}: ${(e as Error).message}`);
  }
  const allowInsecure = values['allow-insecure-webhook'] === true;
  // The provider's own checks, here, so a bad URL is a usage error naming its flag before anything starts.
  const checked = (flag: string, value: string, insecure: boolean) => {
    try {
      checkWebhookUrl(value, insecure);
    } catch (e) {
      throw new UsageError(`${flag} ${JSON.stringify(maskUrl(value))}: ${(e as Error).message}`);
    }
  };
  if (url !== undefined) checked('--webhook-url', url, allowInsecure);
  if (publicUrl !== undefined) checked('--public-url', publicUrl, true);
  return {
    ...(url !== undefined ? { url } : {}),
    secret,
    ...(publicUrl !== undefined ? { publicUrl: publicUrl.replace(/\/+$/, '') } : {}),
    allowInsecure,
  };
}

/**
 * `--otel`: the kernel's span sink on the OpenTelemetry API's global tracer provider — whatever SDK
 * the user registered in this process (`node --import ./tracing.mjs …`). Without one the spans go
 * nowhere, which the startup block says.
 */
async function otelFlag(argumentNames: readonly string[]): Promise<{ sink: EventSink; line: string }> {
  let api: typeof import('@opentelemetry/api');
  let otel: typeof import('@ctrlrun/kernel/otel');
  try {
    api = await import('@opentelemetry/api');
    otel = await import('@ctrlrun/kernel/otel');
  } catch (e) {
    throw new UsageError(
      `--otel needs @opentelemetry/api installed beside ctrlrun (npm install @opentelemetry/api), and your SDK registered: ${(e as Error).message}`,
    );
  }
  const registered = !(api.trace.getTracer(otel.OTEL_TRACER_NAME) instanceof api.ProxyTracer);
  const names = argumentNames.length === 0 ? 'no argument values' : `argument values of ${argumentNames.join(', ')}`;
  return {
    sink: otel.otelSink({ arguments: argumentNames }),
    line: registered
      ? `otel spans to the registered tracer provider (tracer ${otel.OTEL_TRACER_NAME}; ${names})`
      : `warning: --otel but no OpenTelemetry SDK is registered in this process, so spans go nowhere: start ctrlrun with node --import <your tracing setup> node_modules/.bin/ctrlrun gateway …`,
  };
}

/** The certificate an https upstream presents now (a connection of its own, closed at once), as a digest; null without TLS. */
function presentedCertificate(url: URL, timeoutMs: number): Promise<string | null> {
  if (url.protocol !== 'https:') return Promise.resolve(null);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return new Promise((resolve) => {
    // Observed, not trusted: the pin decides; the call's own connection still checks the chain.
    const socket = tlsConnect({ host, port: Number(url.port || 443), ...(isIP(host) === 0 ? { servername: host } : {}), rejectUnauthorized: false });
    const done = (v: string | null) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(null), timeoutMs);
    socket.once('secureConnect', () => {
      const raw = socket.getPeerCertificate(false)?.raw;
      done(raw === undefined ? null : sha256Tagged(new Uint8Array(raw)));
    });
    socket.once('error', () => done(null));
  });
}

/**
 * The pinned certificate files of the policy's `mcp.<alias>.*` entries (`tls_cert_file`, relative
 * to the policy file), each path as written to its certificate's digest, or null when it cannot be
 * read as a PEM certificate.
 */
function pinnedCertificateFiles(policy: Policy, prefix: string): Record<string, string | null> {
  const out: Record<string, string | null> = Object.create(null) as Record<string, string | null>;
  for (const name of policy.actionNames) {
    if (!name.startsWith(prefix)) continue;
    for (const path of policy.action(name)?.upstream?.tlsCertFile ?? []) {
      if (path in out) continue;
      try {
        out[path] = sha256Tagged(new Uint8Array(new X509Certificate(readFileSync(resolvePath(dirname(policy.source), path))).raw));
      } catch {
        out[path] = null;
      }
    }
  }
  return out;
}

/** What the gateway sees of the upstream's transport before a pinned call (see the Gateway's observeTransport). */
function transportObserver(
  upstream: UpstreamTarget,
  policy: Policy,
  prefix: string,
  timeoutMs: number,
): () => Promise<Pick<UpstreamObservation, 'tlsCertSha256' | 'certificateFiles'>> {
  const certificateFiles = pinnedCertificateFiles(policy, prefix);
  return async () => ({ tlsCertSha256: upstream.kind === 'http' ? await presentedCertificate(upstream.url, timeoutMs) : null, certificateFiles });
}

export const gateway: Command = {
  name: 'gateway',
  summary: 'put ctrlrun in front of an MCP server: every tools/call goes through the policy',
  positionals: [],
  options: {
    upstream: { type: 'string', value: 'URL', help: 'the MCP server to front, over Streamable HTTP (http(s)://…)' },
    'upstream-command': { type: 'string', value: '"CMD ARGS"', help: 'or: start the MCP server as a subprocess and talk stdio to it' },
    alias: { type: 'string', value: 'NAME', help: 'required: tools become the actions mcp.<alias>.<tool> ([a-z0-9][a-z0-9_-]*)' },
    principal: { type: 'string', value: 'NAME', help: 'the agent every call is made as (AGENT or AGENT/USER); or:' },
    'principal-header': { type: 'string', value: 'H', help: 'the request header naming the agent, per request (set by a proxy you trust)' },
    'user-header': { type: 'string', value: 'H', help: 'with --principal-header: the request header naming the human' },
    ...JWT_OPTIONS,
    listen: { type: 'string', value: 'HOST:PORT', help: 'where agents connect (default 127.0.0.1:8900; port 0 picks one)' },
    'allow-remote': { type: 'boolean', help: 'allow --listen on an address other than loopback' },
    stdio: { type: 'boolean', help: 'serve the agent over stdin/stdout instead of HTTP (for clients that launch a command)' },
    wait: {
      type: 'boolean',
      help: 'when a call needs approval, hold it until a human answers, then run it (the agent hears progress every 10 s if it asked for progress; its own request timeout still applies)',
    },
    'wait-timeout': { type: 'string', value: 'SECONDS', help: 'with --wait: give up after this long (default: when the request expires)' },
    'upstream-timeout': { type: 'string', value: 'SECONDS', help: 'how long one upstream request may take (default 30); a timeout is an unknown outcome' },
    'max-pending-approvals': {
      type: 'string',
      value: 'N',
      help: 'approval requests one principal may have waiting before another is refused (tool error -41001; default 100)',
    },
    'webhook-url': { type: 'string', value: 'URL', help: 'POST each approval request here, signed (https; http to loopback with --allow-insecure-webhook)' },
    'webhook-secret-file': {
      type: 'string',
      value: 'FILE',
      help: 'the shared secret (≥ 32 bytes) signing requests and checking answers; or $CTRLRUN_WEBHOOK_SECRET. Turns on POST /ctrlrun/approvals/<id>',
    },
    'public-url': { type: 'string', value: 'URL', help: "this gateway's address as the webhook receiver reaches it: requests then carry respond_to" },
    'allow-insecure-webhook': { type: 'boolean', help: 'allow an http:// --webhook-url to a loopback host (a local relay, tests)' },
    otel: { type: 'boolean', help: 'one OpenTelemetry span per action (tracer ctrlrun), through the SDK you register (node --import ./tracing.mjs …)' },
    'otel-arguments': {
      type: 'string',
      multiple: true,
      value: 'NAME',
      help: 'with --otel: an argument whose value becomes ctrlrun.argument.<NAME> (repeatable; none by default)',
    },
    ...MCP_OPTIONS,
    'store-url': STORE_URL,
  },
  details:
    'Approval required, denied, duplicate and ambiguous calls come back as tool errors (isError: true) whose text says the tool was not called,\n' +
    'with the code (-41001…-41012) and error token in structuredContent and _meta["com.ctrlrun/refusal"]; malformed requests stay JSON-RPC errors.\n' +
    'A human answers approvals with ctrlrun approve/deny or ctrlrun mcp-operator; the agent then sends the same call again.',
  async run({ io, values, out, err }) {
    // The MCP SDK loads only when the command runs (importing the CLI pulls in no extra).
    const { ALIAS_PATTERN, DEFAULT_MAX_PENDING_APPROVALS, Gateway, ReceiptIds } = await import('@ctrlrun/mcp');
    const {
      authorityLine,
      checkPath,
      commandControl,
      connectUpstream,
      loadAuthorityFlag,
      loadSetup,
      LOOPBACK_HOSTS,
      parseListen,
      positiveInt,
      serveHttpUntilSignalled,
      serveStdio,
      splitCommand,
    } = await import('../mcp-http.js');
    const alias = values['alias'] as string | undefined;
    if (alias === undefined) throw new UsageError('--alias is required (tools become mcp.<alias>.<tool>)');
    if (!ALIAS_PATTERN.test(alias)) throw new UsageError(`--alias must match ${ALIAS_PATTERN.source}, got ${JSON.stringify(alias)}`);
    const principalFlag = values['principal'] as string | undefined;
    const agentHeader = values['principal-header'] as string | undefined;
    const userHeader = values['user-header'] as string | undefined;
    const jwt = jwtOptionsFrom(values, io.cwd);
    if ([principalFlag, agentHeader, jwt ?? undefined].filter((v) => v !== undefined).length !== 1)
      throw new UsageError('give exactly one identity source: --principal NAME, --principal-header H [--user-header H], or --identity-jwt …');
    if (userHeader !== undefined && agentHeader === undefined) throw new UsageError('--user-header needs --principal-header');
    let principal: { agent: string; user: string | null } | null = null;
    if (principalFlag !== undefined) {
      const [agent, user, ...rest] = principalFlag.split('/');
      if (!agent || rest.length > 0 || user === '') throw new UsageError(`--principal must be AGENT or AGENT/USER, got ${JSON.stringify(principalFlag)}`);
      principal = { agent, user: user ?? null };
    }
    const upstream = upstreamTarget(values, io.env, splitCommand);
    const stdio = values['stdio'] === true;
    if (stdio && principalFlag === undefined) throw new UsageError('--stdio has no request headers: use --principal NAME');
    const listen = parseListen((values['listen'] as string | undefined) ?? '127.0.0.1:8900');
    if (!stdio && !LOOPBACK_HOSTS.has(listen.host) && values['allow-remote'] !== true) {
      throw new UsageError(`--listen ${listen.host} is not a loopback address; add --allow-remote to accept agents from the network`);
    }
    const path = checkPath((values['path'] as string | undefined) ?? '/mcp');
    const upstreamTimeout = positiveInt(values['upstream-timeout'] as string | undefined, '--upstream-timeout', 30) * 1000;
    const maxBodyBytes = positiveInt(values['max-body-bytes'] as string | undefined, '--max-body-bytes', 1_048_576);
    const waitTimeout = values['wait-timeout'] === undefined ? undefined : positiveInt(values['wait-timeout'] as string, '--wait-timeout', 0) * 1000;
    if (waitTimeout !== undefined && values['wait'] !== true) throw new UsageError('--wait-timeout needs --wait');
    const webhook = webhookFlags(values, io);
    if (stdio && webhook?.publicUrl !== undefined) throw new UsageError('--public-url needs the HTTP listener: with --stdio, answer with ctrlrun approve/deny');
    if (values['otel-arguments'] !== undefined && values['otel'] !== true) throw new UsageError('--otel-arguments needs --otel');
    const authority = loadAuthorityFlag(values, io.cwd);
    const maxPendingApprovals = positiveInt(values['max-pending-approvals'] as string | undefined, '--max-pending-approvals', DEFAULT_MAX_PENDING_APPROVALS);

    // With --stdio, stdout is the protocol: everything for the human goes to stderr.
    const say = stdio ? err : out;
    const setup = loadSetup(io, values, err);
    const { policy, target } = setup;
    const store = await openWriter(target);
    let client;
    let stopping = false;
    try {
      const identity =
        jwt !== null
          ? await jwtProvider(jwt, (m) => err(`warning: ${m}`))
          : agentHeader === undefined
            ? null
            : new HeaderIdentityProvider({ agentHeader, userHeader: userHeader ?? null }, { logger: { warn: () => {} } });
      const receiptIds = new ReceiptIds();
      const sinks = [receiptIds.sink];
      const { WebhookApprovalProvider, approvalWebhookHandler } = await import('@ctrlrun/kernel/webhook');
      const notifier =
        webhook?.url === undefined
          ? null
          : new WebhookApprovalProvider(store, {
              url: webhook.url,
              secret: webhook.secret,
              allowInsecure: webhook.allowInsecure,
              ...(webhook.publicUrl !== undefined ? { publicUrl: webhook.publicUrl } : {}),
              logger: { warn: (m: string) => err(`warning: ${m}`) },
            });
      if (notifier !== null) sinks.push(notifier.sink);
      const otel = values['otel'] === true ? await otelFlag((values['otel-arguments'] as string[] | undefined) ?? []) : null;
      if (otel !== null) sinks.push(otel.sink);
      const control = commandControl(setup, store, err, { identity, sinks, ...(authority !== null ? { authority: authority.authority } : {}) });
      try {
        client = await connectUpstream(upstream, (text) => io.stderr(text));
      } catch (e) {
        const where = upstream.kind === 'http' ? maskUrl(upstream.url.href) : upstream.argv.join(' ');
        throw new CliRefusal(`the upstream MCP server ${where} cannot be reached: ${e instanceof Error ? e.message : String(e)}`);
      }
      client.onclose = () => {
        if (!stopping)
          err('warning: the upstream MCP server closed the connection; every tools/call is now refused -41011 (not sent) until ctrlrun gateway is restarted');
      };
      const core = new Gateway({
        control,
        upstream: client,
        alias,
        principal,
        receiptIds,
        upstreamTimeoutMs: upstreamTimeout,
        maxPendingApprovals,
        observeTransport: transportObserver(upstream, policy, `mcp.${alias}.`, upstreamTimeout),
        ...(values['wait'] === true
          ? { wait: { ...(waitTimeout !== undefined ? { timeoutMs: waitTimeout } : {}), ...(notifier !== null ? { provider: notifier } : {}) } }
          : {}),
      });

      const prefix = `mcp.${alias}.`;
      const noEffect = policy.actionNames.filter((n) => n.startsWith(prefix) && policy.action(n)?.effect === null);
      const startup = [
        `environment ${control.environment}`,
        jwt !== null
          ? jwtIdentityLine(jwt)
          : !(identity instanceof HeaderIdentityProvider)
            ? `identity static (every call is ${principalFlag})`
            : `identity header ${identity.agentHeader}${identity.userHeader ? ` + ${identity.userHeader}` : ''} — a header is worth what the proxy setting it is worth: it must overwrite it on every request`,
        authorityLine(control, authority),
        `store ${describeTarget(target)}`,
        `policy ${control.policyHash}`,
        ...(webhook === null
          ? []
          : [
              `webhook ${webhook.url === undefined ? 'answers only' : maskUrl(webhook.url)}${webhook.publicUrl !== undefined ? `, answers at ${webhook.publicUrl}/ctrlrun/approvals/<id>` : stdio ? '' : ', answers at /ctrlrun/approvals/<id>'}`,
            ]),
        ...(otel === null ? [] : [otel.line]),
        `upstream ${upstream.kind === 'http' ? maskUrl(upstream.url.href) : upstream.argv.join(' ')} as mcp.${alias}.<tool>`,
      ];
      // The upstream's tools the policy names none of: every call to them would be denied.
      try {
        const uncovered = await core.toolsWithoutEntry({ timeoutMs: upstreamTimeout });
        if (uncovered.length > 0) {
          startup.push(
            `${uncovered.length} upstream tool(s) have no entry in the policy; every call to them will be denied (unknown_action):`,
            ...uncovered.slice(0, 50).map((t) => `  ${t}  (add actions: ${prefix}${t} to ${visible(policy.source)})`),
            ...(uncovered.length > 50 ? [`  … and ${uncovered.length - 50} more`] : []),
          );
        }
      } catch (e) {
        startup.push(
          `warning: the upstream's tools could not be listed (${visible(e instanceof Error ? e.message : String(e))}); the policy was not checked against them`,
        );
      }
      const pinned = policy.actionNames.filter((n) => n.startsWith(prefix) && policy.action(n)?.upstream);
      if (pinned.length > 0) {
        startup.push(
          `${pinned.length} action(s) pin the upstream (checked before each call: upstream_mismatch, upstream_unverified):`,
          ...pinned.map((n) => {
            const pin = policy.action(n)!.upstream!;
            const what = [
              ...(pin.tlsCertSha256.length + pin.tlsCertFile.length > 0 ? [`certificate (${pin.tlsCertSha256.length + pin.tlsCertFile.length} accepted)`] : []),
              ...(pin.toolSchemaSha256 !== null ? ['tool schema'] : []),
            ];
            return `  ${n}: ${what.join(', ')}`;
          }),
        );
      }
      if (noEffect.length > 0) {
        startup.push(
          `${noEffect.length} action(s) have no effect: template and get no reservation:`,
          ...noEffect.map((n) => `  ${n}`),
          '  (that suits reads only: a repeated call runs again)',
        );
      }

      // The block is out before anything can connect; the address follows once it is bound.
      for (const line of startup) say(line);
      if (stdio) {
        say('serving the agent on stdio');
        await serveStdio(core.createServer(), { refuseFloatArguments: core.refuseFloats });
        return 0;
      }
      const identityHeaders =
        identity instanceof HeaderIdentityProvider
          ? [identity.agentHeader, ...(identity.userHeader ? [identity.userHeader] : [])]
          : identity === null
            ? []
            : [identity.header];
      const allowOrigins = (values['allow-origin'] as string[] | undefined) ?? [];
      await serveHttpUntilSignalled(
        {
          ...listen,
          path,
          maxBodyBytes,
          allowOrigins,
          createServer: () => core.createServer(),
          sessions: true,
          refuseFloatArguments: core.refuseFloats,
          identityHeaders,
          ...(webhook !== null ? { answers: approvalWebhookHandler({ control, secret: webhook.secret }) } : {}),
        },
        say,
      );
      return 0;
    } finally {
      stopping = true;
      await client?.close().catch(() => {});
      await store.close();
    }
  },
};
