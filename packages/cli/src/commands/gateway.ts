/**
 * `ctrlrun gateway`: ctrlrun in front of one MCP server (docs/spec/04-surfaces.md §5). The agent connects to the
 * gateway (Streamable HTTP, or `--stdio`); the gateway connects to the upstream (`--upstream URL`
 * over Streamable HTTP, or `--upstream-command "CMD ARGS"` as a subprocess over stdio). Every
 * `tools/call` goes through the control path as `mcp.<alias>.<tool>`; everything else is relayed.
 *
 * @module
 */
import { HeaderIdentityProvider, maskUrl } from '@ctrlrun/kernel';
import { STORE_URL, type Command } from '../command.js';
import { describeTarget } from '../discovery.js';
import { visible } from '../format.js';
import { CliRefusal, UsageError } from '../errors.js';
import type { UpstreamTarget } from '../mcp-http.js';
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
      checkPath,
      commandControl,
      connectUpstream,
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
    if ((principalFlag === undefined) === (agentHeader === undefined))
      throw new UsageError('give exactly one identity source: --principal NAME, or --principal-header H [--user-header H]');
    if (userHeader !== undefined && agentHeader === undefined) throw new UsageError('--user-header needs --principal-header');
    let principal: { agent: string; user: string | null } | null = null;
    if (principalFlag !== undefined) {
      const [agent, user, ...rest] = principalFlag.split('/');
      if (!agent || rest.length > 0 || user === '') throw new UsageError(`--principal must be AGENT or AGENT/USER, got ${JSON.stringify(principalFlag)}`);
      principal = { agent, user: user ?? null };
    }
    const upstream = upstreamTarget(values, io.env, splitCommand);
    const stdio = values['stdio'] === true;
    if (stdio && agentHeader !== undefined) throw new UsageError('--stdio has no request headers: use --principal NAME');
    const listen = parseListen((values['listen'] as string | undefined) ?? '127.0.0.1:8900');
    if (!stdio && !LOOPBACK_HOSTS.has(listen.host) && values['allow-remote'] !== true) {
      throw new UsageError(`--listen ${listen.host} is not a loopback address; add --allow-remote to accept agents from the network`);
    }
    const path = checkPath((values['path'] as string | undefined) ?? '/mcp');
    const upstreamTimeout = positiveInt(values['upstream-timeout'] as string | undefined, '--upstream-timeout', 30) * 1000;
    const maxBodyBytes = positiveInt(values['max-body-bytes'] as string | undefined, '--max-body-bytes', 1_048_576);
    const waitTimeout = values['wait-timeout'] === undefined ? undefined : positiveInt(values['wait-timeout'] as string, '--wait-timeout', 0) * 1000;
    if (waitTimeout !== undefined && values['wait'] !== true) throw new UsageError('--wait-timeout needs --wait');
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
        agentHeader === undefined ? null : new HeaderIdentityProvider({ agentHeader, userHeader: userHeader ?? null }, { logger: { warn: () => {} } });
      const receiptIds = new ReceiptIds();
      const control = commandControl(setup, store, err, { identity, sinks: [receiptIds.sink] });
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
        ...(values['wait'] === true ? { wait: waitTimeout === undefined ? true : { timeoutMs: waitTimeout } } : {}),
      });

      const prefix = `mcp.${alias}.`;
      const noEffect = policy.actionNames.filter((n) => n.startsWith(prefix) && policy.action(n)?.effect === null);
      const startup = [
        `environment ${control.environment}`,
        identity === null
          ? `identity static (every call is ${principalFlag})`
          : `identity header ${identity.agentHeader}${identity.userHeader ? ` + ${identity.userHeader}` : ''} — a header is worth what the proxy setting it is worth: it must overwrite it on every request`,
        control.authority === null ? 'no authority: section — every principal is unrestricted' : `authority from ${policy.source}`,
        `store ${describeTarget(target)}`,
        `policy ${control.policyHash}`,
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
        await serveStdio(core.createServer());
        return 0;
      }
      const identityHeaders = identity === null ? [] : [identity.agentHeader, ...(identity.userHeader ? [identity.userHeader] : [])];
      const allowOrigins = (values['allow-origin'] as string[] | undefined) ?? [];
      await serveHttpUntilSignalled(
        { ...listen, path, maxBodyBytes, allowOrigins, createServer: () => core.createServer(), sessions: true, refuseFloatArguments: true, identityHeaders },
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
