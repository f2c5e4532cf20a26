/**
 * The Node side of the MCP surfaces (`gateway`, `mcp-operator`): the listen address, the
 * Streamable HTTP server in front of an MCP `Server` factory, and the upstream connection.
 * Checks happen in the spec's order before the SDK sees a byte: path (404), `Origin` (403),
 * size (413), JSON (400 -32700), one message, not a batch (400 -32600), `MCP-Protocol-Version`
 * (400 -32022), the mirrored `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` headers (400 -32020).
 *
 * @module
 */
import { dirname, resolve as resolvePath } from 'node:path';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { deserializeMessage, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import {
  checkProtocolHeaders,
  floatRefusal,
  upstreamFetch,
  MIRRORED_HEADERS_REQUIRED_FROM,
  protocolVersionOf,
  type FloatArgumentHandler,
  type HeaderPairs,
} from '@ctrlrun/mcp';
import { Control, InvalidArgument, loadAuthority, type Authority, type ControlOptions, type Policy, type StateStore } from '@ctrlrun/kernel';
import { environmentFromEnv, jsonlFileSink } from '@ctrlrun/store-node';
import { banner } from './control.js';
import { loadPolicyFile, policyPath, storeTarget, type StoreTarget } from './discovery.js';
import { UsageError } from './errors.js';
import { readRegularFile } from './files.js';
import type { CliIo } from './io.js';
import { signalsPassedOn } from './signals-passed-on.js';
import { VERSION } from './version.js';

/** Hosts a loopback-only listener accepts. */
export const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/** `HOST:PORT` parsed (`[::1]:8900` for IPv6). */
export function parseListen(value: string, flag = '--listen'): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:]+\]|[^:[\]\s]+):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) throw new UsageError(`${flag} must be HOST:PORT (e.g. 127.0.0.1:8900), got ${JSON.stringify(value)}`);
  return { host: m[1]!, port };
}

/** The `--path` the endpoint is served at: absolute, no query, not under `/ctrlrun/`. */
export function checkPath(value: string): string {
  if (!/^\/[A-Za-z0-9._~/-]*$/.test(value)) throw new UsageError(`--path must be an absolute URL path such as /mcp, got ${JSON.stringify(value)}`);
  if (value === '/ctrlrun' || value.startsWith('/ctrlrun/')) throw new UsageError("--path may not be under /ctrlrun/ (reserved for ctrlrun's own endpoints)");
  return value;
}

/** Splits `CMD ARGS` as a shell would for plain words and quotes ('…', "…"); no expansion. */
export function splitCommand(text: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote !== null) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && (text[i + 1] === '"' || text[i + 1] === '\\')) word = (word ?? '') + text[++i];
      else word = (word ?? '') + c;
    } else if (c === '"' || c === "'") {
      quote = c;
      word ??= '';
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else if (c === '\\' && i + 1 < text.length) {
      word = (word ?? '') + text[++i];
    } else {
      word = (word ?? '') + c;
    }
  }
  if (quote !== null) throw new UsageError(`--upstream-command has an unterminated ${quote} quote`);
  if (word !== null) words.push(word);
  if (words.length === 0) throw new UsageError('--upstream-command is empty; give the command that starts the MCP server');
  return words;
}

/** Where the upstream is. */
export type UpstreamTarget =
  { readonly kind: 'http'; readonly url: URL } | { readonly kind: 'command'; readonly argv: readonly string[]; readonly env: Record<string, string> };

/** Connects an MCP client to the upstream (initialize included); a failure names the upstream. */
export async function connectUpstream(target: UpstreamTarget, onStderr?: (text: string) => void): Promise<Client> {
  // The gateway relays the upstream's sampling, elicitation and roots requests to the agent's
  // client (which answers -32601 for what it does not do), so it offers all three.
  const client = new Client({ name: 'ctrlrun-gateway', version: VERSION }, { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } });
  if (target.kind === 'http') {
    // upstreamFetch: a 403 with WWW-Authenticate is told apart from a bare 403 (it never ran).
    await client.connect(new StreamableHTTPClientTransport(target.url, { fetch: upstreamFetch() }));
    return client;
  }
  const transport = new StdioClientTransport({
    command: target.argv[0]!,
    args: [...target.argv.slice(1)],
    env: target.env,
    stderr: onStderr ? 'pipe' : 'inherit',
  });
  if (onStderr) transport.stderr?.on('data', (d: Buffer) => onStderr(d.toString()));
  await client.connect(transport);
  return client;
}

/** Options of {@link serveHttp}. */
export interface HttpServeOptions {
  host: string;
  port: number;
  path: string;
  maxBodyBytes: number;
  /** Origins accepted in an `Origin` header; empty: a request with any `Origin` is refused. */
  allowOrigins: readonly string[];
  /** One MCP server per session (stateful) or per request (stateless). */
  createServer: () => Server;
  /** Keep sessions (`Mcp-Session-Id`): the gateway does; the operator server is stateless. */
  sessions: boolean;
  /**
   * Headers that name a principal: one sent twice is refused 403 `-41007` before anything else
   * reads it (Node would join the two values, and which one names the principal is a guess).
   */
  identityHeaders?: readonly string[];
  /**
   * Refuse a tools/call whose arguments hold `2.0`-style floats (`-41008`): the gateway's rule.
   * The gateway passes its `refuseFloats`, which records each refusal's denied receipt.
   */
  refuseFloatArguments?: boolean | FloatArgumentHandler;
  /** With sessions: how many are kept (1000); past that, the oldest is closed (its client initializes again). */
  maxSessions?: number;
  /**
   * Requests under `/ctrlrun/approvals/` (a human's signed answer, docs/spec/04-surfaces.md §6) go
   * to this web-standard handler, its body bounded by `maxBodyBytes`; without it they are a 404.
   */
  answers?: (request: Request) => Promise<Response>;
}

/** A running listener. */
export interface HttpServing {
  readonly url: string;
  close(): Promise<void>;
}

function plain(res: ServerResponse, status: number): void {
  res.writeHead(status).end();
}

function rpcError(res: ServerResponse, status: number, code: number, message: string, id: unknown = null): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } }));
}

/** Node's `rawHeaders` as name and value pairs. */
function headerPairs(raw: readonly string[]): HeaderPairs {
  const pairs: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) pairs.push([raw[i]!, raw[i + 1]!]);
  return pairs;
}

/**
 * A checked request on a revision newer than the SDK knows (2026-07-28) is handed to the SDK's
 * transport under the SDK's newest revision, which it would otherwise refuse: the gateway has
 * already checked what that revision asks of the request.
 */
function asSdkRevision(req: IncomingMessage, version: string): void {
  if (version !== MIRRORED_HEADERS_REQUIRED_FROM) return;
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2)
    if (req.rawHeaders[i]!.toLowerCase() === 'mcp-protocol-version') req.rawHeaders[i + 1] = LATEST_PROTOCOL_VERSION;
  req.headers['mcp-protocol-version'] = LATEST_PROTOCOL_VERSION;
}

/** The id of a JSON-RPC request, to echo in an error about it; null for anything else. */
function idOf(message: object): string | number | null {
  const id = (message as { id?: unknown }).id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/** Reads the body, or null once it passes `max` bytes (the rest is not read). */
function readBody(req: IncomingMessage, max: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.removeAllListeners('data');
        req.resume();
        resolve(null);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * A session's request whose HTTP connection closes before its answer is cancelled, as if its
 * client had sent `notifications/cancelled`: the handler's signal aborts (a call waiting for a
 * human stops and never runs by itself). Without a session the transport closes with the
 * connection, which aborts the handler as well.
 */
function cancelIfAbandoned(res: ServerResponse, transport: StreamableHTTPServerTransport, message: object): void {
  const m = message as { id?: unknown; method?: unknown };
  if (typeof m.method !== 'string' || (typeof m.id !== 'string' && typeof m.id !== 'number')) return;
  const requestId = m.id;
  res.on('close', () => {
    if (res.writableFinished) return;
    transport.onmessage?.({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason: 'the HTTP connection closed before the answer' } });
  });
}

/** Hands one Node request to a web-standard handler and writes its answer back. */
async function answer(req: IncomingMessage, res: ServerResponse, handler: (request: Request) => Promise<Response>, max: number): Promise<void> {
  if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
  const body = await readBody(req, max);
  if (body === null) return plain(res, 413);
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  const response = await handler(new Request(new URL(req.url ?? '/', 'http://localhost'), { method: 'POST', headers, body: new Uint8Array(body) }));
  const out: Record<string, string> = {};
  response.headers.forEach((v, k) => (out[k] = v));
  res.writeHead(response.status, out).end(Buffer.from(await response.arrayBuffer()));
}

/** Serves MCP over Streamable HTTP at `path`; resolves once listening. */
export async function serveHttp(options: HttpServeOptions): Promise<HttpServing> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const identity = new Set((options.identityHeaders ?? []).map((h) => h.toLowerCase()));
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (options.answers !== undefined && path.startsWith('/ctrlrun/approvals/')) return answer(req, res, options.answers, options.maxBodyBytes);
    if (path !== options.path) return plain(res, 404);
    const origin = req.headers.origin;
    if (origin !== undefined && !options.allowOrigins.includes(origin)) return plain(res, 403);
    if (identity.size > 0) {
      const seen = new Set<string>();
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const name = req.rawHeaders[i]!.toLowerCase();
        if (!identity.has(name)) continue;
        if (seen.has(name)) {
          return void res
            .writeHead(403, { 'content-type': 'application/json' })
            .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -41007, message: 'no principal', data: { error: 'ctrlrun.no_principal' } } }));
        }
        seen.add(name);
      }
    }
    const sessionId = req.headers['mcp-session-id'];
    if (req.method !== 'POST') {
      const v = protocolVersionOf(headerPairs(req.rawHeaders));
      if ('status' in v) return rpcError(res, v.status, v.code, v.message);
      asSdkRevision(req, v.version);
      const transport = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
      if (!options.sessions || transport === undefined)
        return rpcError(res, options.sessions ? 404 : 405, -32000, options.sessions ? 'no such session' : 'method not allowed: this endpoint takes POST only');
      return transport.handleRequest(req, res);
    }
    const body = await readBody(req, options.maxBodyBytes);
    if (body === null) return plain(res, 413);
    let message: unknown;
    const text = body.toString('utf8');
    try {
      message = JSON.parse(text);
    } catch {
      return rpcError(res, 400, -32700, 'parse error: the body is not JSON');
    }
    if (Array.isArray(message)) return rpcError(res, 400, -32600, 'invalid request: one JSON-RPC message per request, no batches');
    if (typeof message !== 'object' || message === null || (message as { jsonrpc?: unknown }).jsonrpc !== '2.0') {
      return rpcError(res, 400, -32600, 'invalid request: not a JSON-RPC 2.0 message');
    }
    const checked = checkProtocolHeaders(headerPairs(req.rawHeaders), message as Record<string, unknown>, text);
    if ('status' in checked) return rpcError(res, checked.status, checked.code, checked.message, idOf(message));
    asSdkRevision(req, checked.version);
    const floats = options.refuseFloatArguments ?? false;
    if (floats !== false) {
      let refusal;
      try {
        refusal = floats === true ? floatRefusal(message, text) : await floats(message, text, req.headers);
      } catch (err) {
        if (err instanceof RangeError) return rpcError(res, 400, -32600, `invalid request: ${err.message}`);
        throw err;
      }
      // Answered as a tool error (a 200 result), as the gateway answers every refusal of a tools/call.
      if (refusal !== null) return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(refusal));
    }
    if (!options.sessions) {
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      const server = options.createServer();
      res.on('close', () => void transport.close().catch(() => {}));
      await server.connect(transport);
      return transport.handleRequest(req, res, message);
    }
    if (typeof sessionId === 'string') {
      const transport = sessions.get(sessionId);
      if (transport === undefined) return rpcError(res, 404, -32001, 'no such session: initialize again');
      cancelIfAbandoned(res, transport, message);
      return transport.handleRequest(req, res, message);
    }
    if (!isInitializeRequest(message)) return rpcError(res, 400, -32000, 'no session: the first request must be initialize');
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, transport);
        // Map order is insertion order: the first key is the oldest session.
        if (sessions.size > (options.maxSessions ?? 1000)) {
          const [oldest, t] = sessions.entries().next().value as [string, StreamableHTTPServerTransport];
          sessions.delete(oldest);
          void t.close().catch(() => {});
        }
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await options.createServer().connect(transport);
    return transport.handleRequest(req, res, message);
  };
  const http: HttpServer = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) rpcError(res, 500, -32603, `internal error: ${err instanceof Error ? err.message : String(err)}`);
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(options.port, options.host.replace(/^\[(.*)\]$/, '$1'), () => resolve());
  });
  const address = http.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}${options.path}`,
    async close() {
      for (const t of sessions.values()) await t.close().catch(() => {});
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/**
 * Resolves on SIGINT or SIGTERM (the way a long-running command is asked to stop). A repeat is
 * the same request, not the default kill that would cut the close short, when it comes within a
 * second of the first, or when bin/ctrlrun.js runs this process ({@link signalsPassedOn}), the
 * first was SIGINT, and it is the first repeat of it: a terminal's Ctrl-C reaches the whole
 * process group, so it arrives twice, the launcher's copy any time later on a loaded machine. A
 * SIGTERM (a supervisor's, `docker stop`, `kill`) reaches the launcher alone and comes once, so
 * its repeat is the operator's. Any other repeat stops the process as the signal does by default.
 */
export function untilSignalled(): Promise<void> {
  return new Promise((resolve) => {
    let first: number | undefined;
    /** The launcher's copy of a terminal's Ctrl-C, still to come. */
    let passOnDue = false;
    const done = (signal: NodeJS.Signals) => {
      const now = Date.now();
      if (first === undefined) {
        first = now;
        passOnDue = signalsPassedOn && signal === 'SIGINT';
        resolve();
        return;
      }
      if (passOnDue && signal === 'SIGINT') {
        passOnDue = false;
        return;
      }
      if (now - first < 1000) return;
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      process.kill(process.pid, signal);
    };
    process.on('SIGINT', done);
    process.on('SIGTERM', done);
  });
}

export { MCP_OPTIONS } from './mcp-options.js';

/** A positive whole number from a flag. */
export function positiveInt(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^[1-9]\d{0,9}$/.test(value)) throw new UsageError(`${flag} must be a positive whole number, got ${JSON.stringify(value)}`);
  return Number(value);
}

/**
 * What both MCP commands load first: the policy (its observe banner on stderr first), the
 * environment (`--environment`, else `$CTRLRUN_ENVIRONMENT`, else the policy's) and where the store is.
 */
export function loadSetup(
  io: CliIo,
  values: Readonly<Record<string, unknown>>,
  err: (line: string) => void,
): { policy: Policy; environment: string | undefined; target: StoreTarget } {
  const { policy } = loadPolicyFile(policyPath(io));
  banner(policy, err);
  const flag = values['environment'] as string | undefined;
  if (flag !== undefined && flag.trim() === '') throw new InvalidArgument('--environment is blank; name the deployment');
  return { policy, environment: flag ?? environmentFromEnv(io.env), target: storeTarget(io, values['store-url'] as string | undefined) };
}

/**
 * `--authority FILE` of both MCP commands: a standalone authority document, loaded (a malformed
 * one is refused naming the line; one beside a policy with an `authority:` section is refused
 * by the Control), or null without the flag.
 */
export function loadAuthorityFlag(values: Readonly<Record<string, unknown>>, cwd: string): { authority: Authority; path: string } | null {
  const flag = values['authority'] as string | undefined;
  if (flag === undefined) return null;
  const path = resolvePath(cwd, flag);
  let text: string;
  try {
    text = readRegularFile(path);
  } catch (e) {
    throw new UsageError(`--authority ${path} cannot be read: ${(e as Error).message}`);
  }
  return { authority: loadAuthority(text, { source: path }), path };
}

/** The startup block's authority line: where the grants in force come from, or that there are none. */
export function authorityLine(control: Control, flag: { path: string } | null): string {
  return control.authority === null
    ? 'no authority: section — every principal is unrestricted'
    : `authority ${control.authority.grants.size} grant(s) from ${flag !== null ? flag.path : control.policy.source}`;
}

/** The Control an MCP command answers through: the state directory's JSONL sinks (and `extra`), warnings on stderr. */
export function commandControl(
  setup: { policy: Policy; environment: string | undefined; target: StoreTarget },
  store: StateStore,
  err: (line: string) => void,
  extra: Pick<ControlOptions, 'identity' | 'sinks' | 'authority' | 'approvers'> = {},
): Control {
  return new Control({
    policy: setup.policy,
    store,
    identity: extra.identity ?? null,
    ...(extra.authority !== undefined ? { authority: extra.authority } : {}),
    ...(extra.approvers ? { approvers: extra.approvers } : {}),
    // The JSONL files beside a SQLite store, as fromFile writes them (none for PostgreSQL).
    sinks: [...(setup.target.kind === 'sqlite' ? [jsonlFileSink(dirname(setup.target.path))] : []), ...(extra.sinks ?? [])],
    logger: { warn: (message: string) => err(`warning: ${message}`) },
    ...(setup.environment !== undefined ? { environment: setup.environment } : {}),
  });
}

/** The largest line the stdio transport buffers (the SDK's own bound), in bytes. */
const STDIO_MAX_LINE = 10 * 1024 * 1024;

/**
 * MCP over newline-delimited JSON on a pair of streams, as the SDK's stdio server transport, but
 * reading each line's text itself: with `refuseFloatArguments`, a tools/call whose arguments hold
 * a float written as an integer (`2000.0`, `2e3`, which `JSON.parse` turns into 2000) is answered
 * `-41008` with its pointer here, as the HTTP listener answers it, and never reaches the server.
 */
export class LineStdioServerTransport implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  readonly #in: NodeJS.ReadableStream;
  readonly #out: NodeJS.WritableStream;
  readonly #refuseFloats: boolean | FloatArgumentHandler;
  #buffer: Buffer = Buffer.alloc(0);
  #closed = false;
  /** Messages in the order they came: one waits while the one before it is checked. */
  #queue: Promise<void> = Promise.resolve();
  readonly #ondata = (chunk: Buffer) => {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    for (let end = this.#buffer.indexOf(0x0a); end !== -1; end = this.#buffer.indexOf(0x0a)) {
      const line = this.#buffer.toString('utf8', 0, end).replace(/\r$/, '');
      this.#buffer = this.#buffer.subarray(end + 1);
      this.#line(line);
    }
    if (this.#buffer.length > STDIO_MAX_LINE) {
      this.#buffer = Buffer.alloc(0);
      this.onerror?.(new Error(`a stdin line passed ${STDIO_MAX_LINE} bytes without a newline; it was dropped`));
    }
  };
  readonly #onerror = (error: Error) => this.onerror?.(error);

  constructor(options: { refuseFloatArguments?: boolean | FloatArgumentHandler; stdin?: NodeJS.ReadableStream; stdout?: NodeJS.WritableStream } = {}) {
    this.#in = options.stdin ?? process.stdin;
    this.#out = options.stdout ?? process.stdout;
    this.#refuseFloats = options.refuseFloatArguments ?? false;
  }

  #line(line: string): void {
    if (line.trim() === '') return;
    let message: JSONRPCMessage;
    try {
      message = deserializeMessage(line);
    } catch (err) {
      this.onerror?.(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    const floats = this.#refuseFloats;
    if (floats === false) return this.onmessage?.(message);
    // The gateway's handler records a receipt (asynchronously): the lines after this one wait for it, in order.
    this.#queue = this.#queue.then(() => this.#refuseOrPass(message, line, floats));
  }

  async #refuseOrPass(message: JSONRPCMessage, line: string, floats: true | FloatArgumentHandler): Promise<void> {
    let refusal;
    try {
      refusal = floats === true ? floatRefusal(message, line) : await floats(message, line);
    } catch (err) {
      // Too deep to read (a RangeError), or the refusal could not be recorded (the store failed).
      const id = (message as { id?: unknown }).id;
      const error =
        err instanceof RangeError
          ? { code: -32600, message: `invalid request: ${err.message}` }
          : { code: -32603, message: `internal error: ${err instanceof Error ? err.message : String(err)}` };
      return void this.send({ jsonrpc: '2.0', id: typeof id === 'string' || typeof id === 'number' ? id : null, error } as JSONRPCMessage);
    }
    // Answered as a tool error, as the HTTP listener answers it.
    if (refusal !== null) return void this.send(refusal as JSONRPCMessage);
    this.onmessage?.(message);
  }

  async start(): Promise<void> {
    this.#in.on('data', this.#ondata);
    this.#in.on('error', this.#onerror);
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.#out.write(serializeMessage(message))) resolve();
      else this.#out.once('drain', resolve);
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#in.off('data', this.#ondata);
    this.#in.off('error', this.#onerror);
    if (this.#in.listenerCount('data') === 0) this.#in.pause();
    this.#buffer = Buffer.alloc(0);
    this.onclose?.();
  }
}

/**
 * Serves `server` on stdin/stdout until stdin ends, the client closes, or SIGINT/SIGTERM. With
 * `refuseFloatArguments` (the gateway), a float written as an integer is refused `-41008` as over HTTP.
 */
export async function serveStdio(server: Server, options: { refuseFloatArguments?: boolean | FloatArgumentHandler } = {}): Promise<void> {
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
    process.stdin.once('end', () => resolve());
  });
  await server.connect(new LineStdioServerTransport(options));
  await Promise.race([closed, untilSignalled()]);
  await server.close().catch(() => {});
}

/** Serves over HTTP until SIGINT/SIGTERM; the address is said once bound. */
export async function serveHttpUntilSignalled(options: HttpServeOptions, say: (line: string) => void): Promise<void> {
  const serving = await serveHttp(options);
  // Listening for the stop signal before saying where: whoever reads the line may send one at once,
  // and a SIGINT before the listener is Node's default, an exit by the signal with nothing closed.
  const signalled = untilSignalled();
  say(`listening on ${serving.url}`);
  await signalled;
  await serving.close();
}
