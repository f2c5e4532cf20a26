/**
 * The MCP gateway at `/mcp/<name>` (and `/mcp` when one upstream is configured): an agent's MCP
 * client speaks Streamable HTTP here, with the worker's own agent credential
 * (`Authorization: Bearer …`), and every `tools/call` goes through the control path as the action
 * `mcp.<name>.<tool>` under the credential's principal — decided, reserved, run at most once and
 * receipted in the worker's store, like `POST /v1/actions`; everything else is relayed. The checks
 * of `@ctrlrun/mcp`'s Web-standard handler come first (Origin, size, JSON, one message, protocol
 * headers, float arguments).
 *
 * Stateless, per request: the upstream is connected for the request and closed after it, and the
 * gateway made for it (workerd lets no I/O object outlive its request; the per-principal limit on
 * waiting approvals still counts the store's requests). An approval-required refusal tells the
 * agent an operator answers in the inbox or through the API, then the same call is sent again.
 *
 * @module
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describeError, maskUrl } from '@ctrlrun/kernel';
import { Gateway, mcpFetchHandler, upstreamFetch } from '@ctrlrun/mcp';
import type { AgentIdentity } from '../auth.js';
import type { RouteContext } from './context.js';

/** One upstream MCP server the gateway fronts. */
export interface McpUpstream {
  /** Its alias (`^[a-z0-9][a-z0-9_-]*$`): tools become the actions `mcp.<name>.<tool>`, served at `/mcp/<name>`. */
  readonly name: string;
  /** Its Streamable HTTP endpoint (http or https). */
  readonly url: string;
  /** Headers sent with every request to it (its credential, with the secret already read). */
  readonly headers?: Readonly<Record<string, string>>;
  /** How long one upstream request may take, in ms (default 30 000); past it the outcome is unknown. */
  readonly timeoutMs?: number;
}

/** The gateway's upstreams (`AppOptions.mcp`). */
export interface McpOptions {
  readonly upstreams: readonly McpUpstream[];
}

/** A JSON-RPC error as the HTTP answer (no message id: the request was not read). */
function rpcError(status: number, message: string, code = -32603): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } }), {
    status,
    headers: { 'content-type': 'application/json' },
  });
}

const howToAnswer = (id: string): string =>
  `an operator answers it in the inbox (/inbox) or with POST /v1/approvals/${id}/grant (or /deny); then send the same call again`;

/**
 * Mounts the gateway for each upstream. `allowOrigins`: origins a browser may call from (the
 * app's CORS origins); `maxPendingApprovals` as the app's.
 */
export function mountMcp(ctx: RouteContext, mcp: McpOptions, r: { allowOrigins: readonly string[]; maxPendingApprovals: number | null | undefined }): void {
  const { control } = ctx;
  for (const upstream of mcp.upstreams) {
    const where = maskUrl(upstream.url);
    const serve = async (request: Request, identity: AgentIdentity): Promise<Response> => {
      // Stateless: no stream to open (GET) and no session to end (DELETE), so no upstream to reach for them.
      if (request.method !== 'POST') return rpcError(405, 'method not allowed: this endpoint takes POST only', -32000);
      const client = new Client(
        { name: 'ctrlrun-worker', version: '0.1.0' },
        // The gateway relays the upstream's sampling, elicitation and roots requests to the agent.
        { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } },
      );
      try {
        await client.connect(
          new StreamableHTTPClientTransport(new URL(upstream.url), { fetch: upstreamFetch(), requestInit: { headers: { ...upstream.headers } } }),
        );
      } catch (err) {
        await client.close().catch(() => {});
        return rpcError(502, `the upstream MCP server ${upstream.name} (${where}) cannot be reached: ${describeError(err)}; nothing was sent to it`);
      }
      try {
        const gateway = new Gateway({
          control,
          upstream: client,
          alias: upstream.name,
          principal: identity.principal,
          upstreamTimeoutMs: upstream.timeoutMs ?? 30_000,
          maxPendingApprovals: r.maxPendingApprovals,
          howToAnswer,
        });
        const handle = mcpFetchHandler({
          createServer: () => gateway.createServer(),
          allowOrigins: r.allowOrigins,
          refuseFloatArguments: gateway.refuseFloats,
        });
        return await handle(request);
      } finally {
        await client.close().catch(() => {});
      }
    };
    const paths = mcp.upstreams.length === 1 ? ['/mcp', `/mcp/${upstream.name}`] : [`/mcp/${upstream.name}`];
    for (const path of paths) ctx.app.all(path, ctx.gates.agent, (c) => serve(c.req.raw, c.get('identity') as AgentIdentity));
  }
}
