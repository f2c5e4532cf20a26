/**
 * A Web-standard `(Request) => Promise<Response>` for an MCP server factory over Streamable HTTP,
 * stateless (a fresh server per request, JSON responses): what a Hono app, a Cloudflare Worker or
 * Deno mounts at `/mcp` to put the gateway (or the operator server) on the edge. The checks come
 * first, in the spec's order, before the SDK reads a byte: `Origin` (403), size (413), JSON
 * (400 -32700), one message and not a batch (400 -32600), `MCP-Protocol-Version` (400 -32022), the
 * mirrored `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` headers (400 -32020).
 *
 * In workerd no I/O object may outlive the request that made it: connect the upstream client (and
 * make the {@link Gateway}) per request there, sharing only the Control (test/mcp/workerd-entry.ts).
 *
 * @module
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { floatRefusal, type FloatArgumentHandler } from './floats.js';
import { checkProtocolHeaders, MIRRORED_HEADERS_REQUIRED_FROM, type HeaderPairs } from './protocol.js';
import { readBodyBounded } from '@ctrlrun/kernel/webhook';
import type { Gateway } from './gateway.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';

/** Options of {@link mcpFetchHandler}. */
export interface FetchHandlerOptions {
  /** A new MCP server (e.g. `() => gateway.createServer()`); one per request. */
  createServer: () => Server;
  /** Largest body accepted, in bytes (1048576). */
  maxBodyBytes?: number;
  /** Origins accepted in an `Origin` header; none (default): a request with any `Origin` is refused. */
  allowOrigins?: readonly string[];
  /**
   * Refuse a tools/call whose arguments hold `2.0`-style floats (`-41008`; default true: the
   * gateway's rule). Pass the gateway's `refuseFloats` (a {@link FloatArgumentHandler}) to record
   * each refusal's denied receipt; `true` refuses without a record (no Control at hand).
   */
  refuseFloatArguments?: boolean | FloatArgumentHandler;
}

function rpcErrorResponse(status: number, code: number, message: string, id: unknown = null): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } }), { status, headers: { 'content-type': 'application/json' } });
}

/** Reads at most `max` bytes of the body; null once it passes them. */
async function boundedText(request: Request, max: number): Promise<string | null> {
  const bytes = await readBodyBounded(request, max);
  return bytes === null ? null : new TextDecoder('utf-8', { fatal: false }).decode(bytes);
}

/** The handler; POST only (stateless: no session, so no GET stream and no DELETE). */
export function mcpFetchHandler(options: FetchHandlerOptions): (request: Request) => Promise<Response> {
  const max = options.maxBodyBytes ?? 1_048_576;
  if (!Number.isSafeInteger(max) || max <= 0) throw new TypeError('maxBodyBytes must be a positive whole number');
  const origins = options.allowOrigins ?? [];
  return async (request) => {
    const origin = request.headers.get('origin');
    if (origin !== null && !origins.includes(origin)) return new Response(null, { status: 403 });
    if (request.method !== 'POST') return rpcErrorResponse(405, -32000, 'method not allowed: this endpoint takes POST only');
    const text = await boundedText(request, max);
    if (text === null) return new Response(null, { status: 413 });
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      return rpcErrorResponse(400, -32700, 'parse error: the body is not JSON');
    }
    if (Array.isArray(message)) return rpcErrorResponse(400, -32600, 'invalid request: one JSON-RPC message per request, no batches');
    if (typeof message !== 'object' || message === null || (message as { jsonrpc?: unknown }).jsonrpc !== '2.0') {
      return rpcErrorResponse(400, -32600, 'invalid request: not a JSON-RPC 2.0 message');
    }
    const pairs: [string, string][] = [];
    request.headers.forEach((v, k) => pairs.push([k, v]));
    const checked = checkProtocolHeaders(pairs as HeaderPairs, message as Record<string, unknown>, text);
    const id = (message as { id?: unknown }).id;
    if ('status' in checked)
      return rpcErrorResponse(checked.status, checked.code, checked.message, typeof id === 'string' || typeof id === 'number' ? id : null);
    // A revision newer than the SDK knows, checked here, reaches the SDK as its newest (it would refuse it).
    if (checked.version === MIRRORED_HEADERS_REQUIRED_FROM) {
      const headers = new Headers(request.headers);
      headers.set('mcp-protocol-version', LATEST_PROTOCOL_VERSION);
      request = new Request(request.url, { method: request.method, headers, signal: request.signal });
    }
    const floats = options.refuseFloatArguments ?? true;
    if (floats !== false) {
      let refusal;
      try {
        refusal =
          floats === true
            ? floatRefusal(message, text)
            : await floats(message, text, Object.fromEntries(request.headers as unknown as Iterable<[string, string]>));
      } catch (err) {
        if (err instanceof RangeError) return rpcErrorResponse(400, -32600, `invalid request: ${err.message}`);
        throw err;
      }
      if (refusal !== null) return new Response(JSON.stringify(refusal), { status: 200, headers: { 'content-type': 'application/json' } });
    }
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    const server = options.createServer();
    await server.connect(transport);
    // A client that hangs up before the answer aborts the request's signal (where the runtime
    // wires it): closing the per-request server aborts the handler, so a call waiting for a
    // human stops and never runs by itself.
    const hungUp = () => void server.close().catch(() => {});
    request.signal?.addEventListener('abort', hungUp, { once: true });
    try {
      return await transport.handleRequest(request, { parsedBody: message });
    } finally {
      request.signal?.removeEventListener('abort', hungUp);
      // JSON responses are complete once returned; the per-request server is done.
      void server.close().catch(() => {});
    }
  };
}
