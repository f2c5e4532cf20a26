/**
 * `ctrlrun mcp-operator`: the MCP server a human's own client (an IDE, an assistant) connects to
 * in order to list, inspect, approve, deny and resolve (docs/spec/04-surfaces.md §8). Loopback only — reads need no
 * credential — and there is no flag that permits a remote bind. Writes name a human: over HTTP the
 * `--principal-header`/`--user-header` a local proxy sets; over `--stdio`, the OS account that
 * launched the process.
 *
 * @module
 */
import { userInfo } from 'node:os';
import { HeaderIdentityProvider } from '@ctrlrun/kernel';
import type { OperatorOptions } from '@ctrlrun/mcp';
import { STORE_URL, type Command } from '../command.js';
import { describeTarget } from '../discovery.js';
import { UsageError } from '../errors.js';
import { JWT_OPTIONS, jwtIdentityLine, jwtOptionsFrom, jwtProvider } from '../jwt-options.js';
import { MCP_OPTIONS } from '../mcp-options.js';
import { openAnswerer } from '../stores.js';
import { inspection } from './inspect.js';

export const mcpOperator: Command = {
  name: 'mcp-operator',
  summary: 'answer approvals from your own MCP client: list, inspect, approve, deny, resolve (loopback only)',
  positionals: [],
  options: {
    listen: { type: 'string', value: 'HOST:PORT', help: 'loopback address to serve on (default 127.0.0.1:8901; port 0 picks one)' },
    'principal-header': { type: 'string', value: 'NAME', help: 'the request header naming who answers (set by a proxy you trust)' },
    'user-header': { type: 'string', value: 'NAME', help: 'the request header naming the human; writes without one are refused' },
    stdio: { type: 'boolean', help: 'serve over stdin/stdout; the approver is the OS account running this process' },
    ...JWT_OPTIONS,
    'approver-roles-claim': {
      type: 'string',
      value: 'CLAIM',
      help: "with --identity-jwt …: the token's claim listing the approver's roles (copy it with --identity-jwt-claim), matched against approver_role",
    },
    ...MCP_OPTIONS,
    'store-url': STORE_URL,
  },
  details:
    'Reads (list_pending_approvals, inspect_action, receipts, effects, stats) need no credential; approve, deny and resolve are recorded as mcp-operator:<user>.',
  async run({ io, values, out, err }) {
    // The MCP SDK loads only when the command runs (importing the CLI pulls in no extra).
    const { createOperatorServer, unreadableReceipt } = await import('@ctrlrun/mcp');
    const {
      authorityLine,
      checkPath,
      commandControl,
      loadAuthorityFlag,
      loadSetup,
      LOOPBACK_HOSTS,
      parseListen,
      positiveInt,
      serveHttpUntilSignalled,
      serveStdio,
    } = await import('../mcp-http.js');
    const stdio = values['stdio'] === true;
    const listen = parseListen((values['listen'] as string | undefined) ?? '127.0.0.1:8901');
    if (!LOOPBACK_HOSTS.has(listen.host))
      throw new UsageError(`--listen ${listen.host} is not loopback: mcp-operator serves 127.0.0.1, localhost or ::1 only (its reads are unauthenticated)`);
    const path = checkPath((values['path'] as string | undefined) ?? '/mcp');
    const maxBodyBytes = positiveInt(values['max-body-bytes'] as string | undefined, '--max-body-bytes', 1_048_576);
    const agentHeader = values['principal-header'] as string | undefined;
    const userHeader = values['user-header'] as string | undefined;
    const jwt = jwtOptionsFrom(values, io.cwd);
    if (jwt !== null && (stdio || agentHeader !== undefined || userHeader !== undefined))
      throw new UsageError('--identity-jwt is the one identity source: give it without --stdio, --principal-header or --user-header');
    if (jwt !== null && jwt.userClaim === undefined)
      throw new UsageError('--identity-jwt on mcp-operator needs --identity-jwt-user-claim: an answer is recorded as the human the token names');
    if (jwt === null && !stdio && (agentHeader === undefined || userHeader === undefined)) {
      throw new UsageError('give --principal-header and --user-header (who answers, and the human), --identity-jwt …, or --stdio (the OS account answers)');
    }
    if (stdio && (agentHeader !== undefined || userHeader !== undefined))
      throw new UsageError('--stdio answers as the OS account; it takes no identity headers');
    const rolesClaim = values['approver-roles-claim'] as string | undefined;
    if (rolesClaim !== undefined && jwt === null) throw new UsageError('--approver-roles-claim needs --identity-jwt: only a verified token carries roles');
    if (rolesClaim !== undefined && !(jwt?.claimNames ?? []).includes(rolesClaim))
      throw new UsageError(
        `--approver-roles-claim ${rolesClaim} needs --identity-jwt-claim ${rolesClaim}: a claim not copied onto the principal entitles nobody`,
      );

    const authority = loadAuthorityFlag(values, io.cwd);
    const say = stdio ? err : out;
    const setup = loadSetup(io, values, err);
    const { target } = setup;
    const store = await openAnswerer(target, async () => {});
    try {
      // The grants in force, as the gateway's --authority names them: the Control's policy hash covers them,
      // and a policy that has an authority: section too is refused.
      const control = commandControl(setup, store, err, {
        ...(rolesClaim === undefined ? {} : { approvers: { rolesClaim } }),
        ...(authority !== null ? { authority: authority.authority } : {}),
      });
      let identify: OperatorOptions['identify'];
      let identityLine: string;
      if (stdio) {
        const account = userInfo().username;
        identify = async () => ({ agent: 'os', user: account });
        identityLine = `identity os account (${account})`;
      } else if (jwt !== null) {
        const provider = await jwtProvider(jwt, (m) => err(`warning: ${m}`));
        identify = async ({ tool, headers }) => provider.resolve({ action: tool, environment: control.environment, headers, agent: null, user: null });
        identityLine = jwtIdentityLine(jwt);
      } else {
        const provider = new HeaderIdentityProvider({ agentHeader: agentHeader!, userHeader: userHeader! }, { logger: { warn: () => {} } });
        identify = async ({ tool, headers }) => provider.resolve({ action: tool, environment: control.environment, headers, agent: null, user: null });
        identityLine = `identity headers ${provider.agentHeader} + ${provider.userHeader} — worth exactly what the proxy setting them is worth: it must overwrite them on every request`;
      }
      const options: OperatorOptions = {
        control,
        identify,
        inspect: async (actionId) => {
          const found = await inspection(store, actionId);
          if (found === null) return null;
          if (found.unreadable === null) return found.document;
          // `receipt: null` alone would read as "no receipt": say which one cannot be read (never its bytes).
          return { ...found.document, receipt_unreadable: unreadableReceipt({ seq: found.unreadable.seq, receipt_id: found.unreadable.receiptId }) };
        },
      };
      const startup = [
        `environment ${control.environment}`,
        `store ${describeTarget(target)}`,
        identityLine,
        authorityLine(control, authority),
        'reads need no credential; approve, deny and resolve need a credential naming a human',
      ];
      for (const line of startup) say(line);
      if (stdio) {
        await serveStdio(createOperatorServer(options));
        return 0;
      }
      const allowOrigins = (values['allow-origin'] as string[] | undefined) ?? [];
      await serveHttpUntilSignalled(
        {
          ...listen,
          path,
          maxBodyBytes,
          allowOrigins,
          createServer: () => createOperatorServer(options),
          sessions: false,
          identityHeaders: jwt !== null ? [jwt.header ?? 'authorization'] : [agentHeader!, userHeader!],
        },
        say,
      );
      return 0;
    } finally {
      await store.close();
    }
  },
};
