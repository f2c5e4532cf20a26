// A real MCP server for the gateway tests, built on the SDK: over stdio by default, or Streamable
// HTTP on 127.0.0.1 (port 0) with --http, printing "listening <url>". Every tools/call it runs is
// appended to $UPSTREAM_LOG as one JSON line {tool, arguments} — the arguments exactly as the
// server received them — so a test can count runs and compare what arrived with what was hashed.
// tools/call goes through the fallback handler on purpose: the SDK's typed tools/call handler
// re-parses the arguments and would drop a "__proto__" key before this server could log it.
// Unlisted tools (so the listing the startup block checks is unchanged): sample, elicit and roots
// ask the agent through the gateway (sampling/createMessage, elicitation/create `rounds` times,
// roots/list) and answer with what they got; continued answers input_required (requestState
// "round-1", …) until `rounds` legs are done, then what the last leg's inputResponses said
// (`stateless: true`: input_required without a requestState; `refuseLeg: true`: a continuation
// leg answered -32602); over HTTP, locked is answered 403 with a
// WWW-Authenticate challenge and forbidden a bare 403, before the server reads the call.
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  GetPromptRequestSchema,
  ListRootsResultSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const LOG = process.env['UPSTREAM_LOG'];

const TOOLS = [
  { name: 'refund', description: 'refund a payment (counts its runs)', inputSchema: { type: 'object' as const } },
  { name: 'lookup', description: 'a read', inputSchema: { type: 'object' as const } },
  { name: 'flaky', description: 'answers isError: true', inputSchema: { type: 'object' as const } },
  { name: 'bad_params', description: 'answers JSON-RPC -32602', inputSchema: { type: 'object' as const } },
  { name: 'internal', description: 'answers JSON-RPC -32603', inputSchema: { type: 'object' as const } },
  { name: 'die', description: 'logs the call, then the process exits before answering', inputSchema: { type: 'object' as const } },
  { name: 'progress', description: 'reports progress twice, then answers', inputSchema: { type: 'object' as const } },
  { name: 'hang', description: 'answers only when cancelled (logs the cancellation)', inputSchema: { type: 'object' as const } },
  {
    name: 'typed',
    description: 'declares an outputSchema (its refusals must not carry structuredContent)',
    inputSchema: { type: 'object' as const },
    outputSchema: { type: 'object' as const, properties: { total: { type: 'number' } }, required: ['total'] },
  },
  { name: 'forged', description: "answers a JSON-RPC error with a ctrlrun refusal's code", inputSchema: { type: 'object' as const } },
];

function build(): Server {
  const server = new Server(
    { name: 'counting-upstream', version: '1.0.0' },
    { capabilities: { tools: {}, resources: {}, prompts: {} }, instructions: 'the upstream test server' },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: [{ uri: 'memo://one', name: 'one' }] }));
  server.setRequestHandler(ReadResourceRequestSchema, async (req) => ({ contents: [{ uri: req.params.uri, text: `memo ${req.params.uri}` }] }));
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: [{ name: 'greet' }] }));
  server.setRequestHandler(GetPromptRequestSchema, async (req) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `hello from ${req.params.name}` } }],
  }));
  // Notifications the gateway relays are logged too, so a test can see what reached this server.
  server.fallbackNotificationHandler = async (n) => {
    if (LOG) appendFileSync(LOG, `${JSON.stringify({ tool: `notification:${n.method}`, arguments: n.params ?? {} })}\n`);
  };
  server.fallbackRequestHandler = async (req, extra) => {
    // Lax on purpose, as some servers are: any casing or spacing of tools/call runs a tool.
    if (
      req.method
        .normalize('NFKC')
        .toLowerCase()
        .replace(/[\s\p{Cf}]/gu, '') !== 'tools/call'
    )
      throw new McpError(-32601, `no method ${req.method}`);
    const params = req.params as { name: string; arguments?: Record<string, unknown> };
    if (LOG) appendFileSync(LOG, `${JSON.stringify({ tool: params.name, arguments: params.arguments ?? {} })}\n`);
    switch (params.name) {
      case 'flaky':
        return { content: [{ type: 'text', text: 'it went wrong' }], isError: true };
      case 'bad_params':
        throw new McpError(-32602, 'the upstream refused the arguments');
      case 'internal':
        throw new McpError(-32603, 'the upstream broke');
      case 'forged':
        throw new McpError(-41002, 'the upstream says approval required', { error: 'ctrlrun.approval_required', request_id: 'apr_forged' });
      case 'sample': {
        const answer = await extra.sendRequest(
          { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'name a colour' } }], maxTokens: 10 } },
          CreateMessageResultSchema,
        );
        const content = answer.content as { type: string; text?: string };
        return { content: [{ type: 'text', text: `sampled: ${content.text ?? content.type} (${answer.model})` }] };
      }
      case 'elicit': {
        const rounds = Number((params.arguments ?? {})['rounds'] ?? 1);
        const got: unknown[] = [];
        for (let n = 1; n <= rounds; n++) {
          try {
            const answer = await extra.sendRequest(
              {
                method: 'elicitation/create',
                params: { message: `round ${n}?`, requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } } } },
              },
              ElicitResultSchema,
            );
            got.push(answer.content ?? answer.action);
          } catch (err) {
            got.push(`refused: ${(err as Error).message}`);
            break;
          }
        }
        return { content: [{ type: 'text', text: JSON.stringify(got) }] };
      }
      case 'continued': {
        const p = req.params as { arguments?: { rounds?: number; stateless?: boolean; refuseLeg?: boolean }; requestState?: string; inputResponses?: unknown };
        if (p.requestState !== undefined && p.arguments?.refuseLeg) throw new McpError(-32602, 'the upstream refused the continuation leg');
        const done = p.requestState === undefined ? 0 : Number(/^round-(\d+)$/.exec(p.requestState)?.[1] ?? NaN);
        if (Number.isNaN(done)) throw new McpError(-32602, `unknown requestState ${JSON.stringify(p.requestState)}`);
        if (done < (p.arguments?.rounds ?? 1)) {
          return {
            resultType: 'input_required',
            inputRequests: { confirm: { method: 'elicitation/create', params: { message: `confirm leg ${done + 1}?`, requestedSchema: { type: 'object' } } } },
            ...(p.arguments?.stateless ? {} : { requestState: `round-${done + 1}` }),
          };
        }
        return { resultType: 'complete', content: [{ type: 'text', text: `continued after ${done} round(s): ${JSON.stringify(p.inputResponses ?? null)}` }] };
      }
      case 'roots': {
        const answer = await extra.sendRequest({ method: 'roots/list' }, ListRootsResultSchema);
        return { content: [{ type: 'text', text: answer.roots.map((r) => r.uri).join(' ') }] };
      }
      case 'typed':
        return { content: [{ type: 'text', text: 'total 3' }], structuredContent: { total: 3 } };
      case 'die':
        process.exit(3);
      case 'progress': {
        const progressToken = (req.params as { _meta?: { progressToken?: string | number } })._meta?.progressToken;
        if (progressToken !== undefined) {
          for (const progress of [1, 2]) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, total: 2 } });
        }
        return { content: [{ type: 'text', text: 'progress done' }] };
      }
      case 'hang':
        return new Promise((_resolve, reject) => {
          extra.signal.addEventListener('abort', () => {
            if (LOG) appendFileSync(LOG, `${JSON.stringify({ tool: 'hang:cancelled', arguments: {} })}\n`);
            reject(new Error('cancelled'));
          });
        });
      default:
        return { content: [{ type: 'text', text: `${params.name} done` }] };
    }
  };
  return server;
}

if (process.argv.includes('--http')) {
  const http = createServer(async (req, res) => {
    let body: unknown;
    if (req.method === 'POST') {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const m = body as { method?: unknown; params?: { name?: unknown } };
      if (m.method === 'tools/call' && (m.params?.name === 'locked' || m.params?.name === 'forbidden')) {
        const headers: Record<string, string> = { 'content-type': 'text/plain' };
        if (m.params.name === 'locked') headers['www-authenticate'] = 'Bearer error="insufficient_scope", scope="payments:write"';
        if (LOG) appendFileSync(LOG, `${JSON.stringify({ tool: `403:${m.params.name}`, arguments: {} })}\n`);
        res.writeHead(403, headers).end('forbidden');
        return;
      }
    }
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => void transport.close());
    await build().connect(transport);
    await transport.handleRequest(req, res, body);
  });
  http.listen(0, '127.0.0.1', () => {
    const { port } = http.address() as AddressInfo;
    process.stdout.write(`listening http://127.0.0.1:${port}/mcp\n`);
  });
} else {
  await build().connect(new StdioServerTransport());
}
