// The same lost reply is the same recorded outcome on every surface that sends an action: the
// worker's HTTP forwarder, the MCP gateway's upstream and a `protect`ed function that sends one
// request (`oneRequest: true`) all ask the kernel's `neverSent`.
// Each row loses the reply one way, over real sockets on 127.0.0.1 through Node's own fetch:
// a closed port (ECONNREFUSED from connect), a name under .invalid (ENOTFOUND), an upstream that
// reads the request and closes the connection (UND_ERR_SOCKET), and EHOSTUNREACH / ENETUNREACH
// raised by connect (nothing sent: FAILED) or on a connected socket after the upstream read the
// request (AMBIGUOUS). The unreachable rows cannot come from the network without changing the
// machine's routes, so an undici connector gives the socket Node's own error for them: the connect
// fails with it, or a real connection is destroyed with it once the upstream has read the request.
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Control, loadPolicy, NEVER_SENT_CODES, protect, type StateStore } from '@ctrlrun/kernel';
import { Gateway, ReceiptIds } from '@ctrlrun/mcp';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { serveHttp, type HttpServing } from '../../packages/cli/src/mcp-http.js';
import { httpForwarder } from '../../worker/src/index.js';
import { call, httpAgent, POLICY, startHttpUpstream, token, upstreamCalls, workDir } from '../mcp/support.js';
import { AGENT, harness } from '../worker/harness.js';

const TIMEOUT = 120_000;
type Outcome = 'failed' | 'ambiguous';

/** A socket error as Node raises it (`uvExceptionWithHostPort`): the code, the errno, the system call. */
function systemError(code: 'EHOSTUNREACH' | 'ENETUNREACH', syscall: 'connect' | 'read'): Error {
  const errno = code === 'EHOSTUNREACH' ? -113 : -101;
  return Object.assign(new Error(`${syscall} ${code} 192.0.2.9:443`), { errno, code, syscall, address: '192.0.2.9', port: 443 });
}

/** The Agent class of the dispatcher Node's fetch uses (undici), read off the global dispatcher. */
async function undiciAgent(): Promise<(new (options: { connect: unknown }) => object) | null> {
  await fetch('data:,'); // loads Node's undici, which installs its global dispatcher
  const dispatcher = (globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalDispatcher.1')];
  const ctor = typeof dispatcher === 'object' && dispatcher !== null ? (Object.getPrototypeOf(dispatcher) as { constructor: unknown }).constructor : null;
  return typeof ctor === 'function' && ctor.name === 'Agent' ? (ctor as new (options: { connect: unknown }) => object) : null;
}

/** An upstream that reads each request whole, counts it, then does nothing (the client decides what happens). */
let reader: Server;
let readerPort = 0;
let readCount = 0;
/** Client sockets by local port, so the reader can break the one whose request it has read. */
const clientSockets = new Map<number, { socket: Socket; breakWith: Error }>();
/** An upstream that reads the request whole, then closes the connection without answering. */
let closer: Server;
let closedPort = 0;

type Connector = (options: { hostname: string; port: string }, callback: (err: Error | null, socket: Socket | null) => void) => void;

/** A connector whose connect fails with `err`: no socket, no byte sent. */
const failingConnect =
  (err: Error): Connector =>
  (_options, callback) =>
    queueMicrotask(() => callback(err, null));

/** A connector that really connects to the reader, which breaks the socket with `err` once it has read the request. */
const breakingAfterRead =
  (err: Error): Connector =>
  (_options, callback) => {
    const socket = connect({ host: '127.0.0.1', port: readerPort });
    socket.once('connect', () => {
      clientSockets.set(socket.localPort!, { socket, breakWith: err });
      callback(null, socket);
    });
    socket.once('error', (e) => callback(e, null));
  };

interface Row {
  name: string;
  expected: Outcome;
  /** Whether the upstream read the request (so it may have acted). */
  sent: boolean;
  url: () => string;
  connector?: Connector;
}

const rows: Row[] = [
  { name: 'a closed port (ECONNREFUSED from connect)', expected: 'failed', sent: false, url: () => `http://127.0.0.1:${closedPort}/up` },
  { name: 'a name that does not resolve (ENOTFOUND)', expected: 'failed', sent: false, url: () => 'http://ctrlrun-lost-reply.invalid/up' },
  {
    name: 'the upstream reads the request, then closes the connection (UND_ERR_SOCKET)',
    expected: 'ambiguous',
    sent: true,
    url: () => `http://127.0.0.1:${(closer.address() as AddressInfo).port}/up`,
  },
  {
    name: 'EHOSTUNREACH from connect',
    expected: 'failed',
    sent: false,
    url: () => `http://127.0.0.1:${readerPort}/up`,
    connector: failingConnect(systemError('EHOSTUNREACH', 'connect')),
  },
  {
    name: 'ENETUNREACH from connect',
    expected: 'failed',
    sent: false,
    url: () => `http://127.0.0.1:${readerPort}/up`,
    connector: failingConnect(systemError('ENETUNREACH', 'connect')),
  },
  {
    name: 'EHOSTUNREACH on a connected socket after the upstream read the request',
    expected: 'ambiguous',
    sent: true,
    url: () => `http://127.0.0.1:${readerPort}/up`,
    connector: breakingAfterRead(systemError('EHOSTUNREACH', 'read')),
  },
  {
    name: 'ENETUNREACH on a connected socket after the upstream read the request',
    expected: 'ambiguous',
    sent: true,
    url: () => `http://127.0.0.1:${readerPort}/up`,
    connector: breakingAfterRead(systemError('ENETUNREACH', 'read')),
  },
  // Every code of the kernel's one list, as the connect step reports it: nothing was sent.
  ...[...NEVER_SENT_CODES].map((code): Row => ({
    name: `${code} while connecting (one of NEVER_SENT_CODES)`,
    expected: 'failed',
    sent: false,
    url: () => `http://127.0.0.1:${readerPort}/up`,
    connector: failingConnect(Object.assign(new Error(`${code} (as the connect step reports it)`), { code })),
  })),
];

const Agent = await undiciAgent();
const noAgent = Agent === null ? "Node's fetch shows no undici Agent behind Symbol.for('undici.globalDispatcher.1')" : null;
let closerCount = 0;

/** Sends `request` the way the row loses its reply, through Node's fetch. */
function rowFetch(row: Row, input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const dispatcher = row.connector === undefined ? undefined : new Agent!({ connect: row.connector });
  return fetch(input, { ...init, ...(dispatcher ? { dispatcher } : {}) } as RequestInit);
}

// The gateway: a real SDK client (the agent) to the Gateway, whose upstream is the counting MCP
// server in its own process; its tools/call requests are sent the row's way.
let gateway: { agent: Client; store: StateStore; log: string; close(): Promise<void> } | null = null;
let current: Row | null = null;

beforeAll(async () => {
  reader = createServer((req) => {
    req.resume();
    req.on('end', () => {
      readCount++;
      const client = clientSockets.get(req.socket.remotePort!);
      client?.socket.destroy(client.breakWith);
    });
  });
  closer = createServer((req) => {
    req.resume();
    req.on('end', () => {
      closerCount++;
      req.socket.destroy();
    });
  });
  await new Promise<void>((resolve) => reader.listen(0, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => closer.listen(0, '127.0.0.1', resolve));
  readerPort = (reader.address() as AddressInfo).port;
  const spare = createServer();
  await new Promise<void>((resolve) => spare.listen(0, '127.0.0.1', resolve));
  closedPort = (spare.address() as AddressInfo).port;
  await new Promise<void>((resolve) => spare.close(() => resolve()));

  const dir = workDir();
  const log = join(dir, 'upstream.log');
  const up = await startHttpUpstream(log);
  const store = await createSqlJsStore();
  const receiptIds = new ReceiptIds();
  const control = new Control({ policy: loadPolicy(POLICY), store, sinks: [receiptIds.sink], logger: { warn: () => {} } });
  const upstream = new Client({ name: 'ctrlrun-gateway', version: 'test' });
  const upstreamFetch = (input: string | URL, init?: RequestInit): Promise<Response> => {
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as { method?: unknown }) : null;
    if (current !== null && body?.method === 'tools/call') return rowFetch(current, current.url(), init);
    return fetch(input, init);
  };
  await upstream.connect(new StreamableHTTPClientTransport(new URL(up.url), { fetch: upstreamFetch }));
  const gw = new Gateway({ control, upstream, alias: 'pay', receiptIds, principal: { agent: 'agent-1' } });
  const serving: HttpServing = await serveHttp({
    host: '127.0.0.1',
    port: 0,
    path: '/mcp',
    maxBodyBytes: 65536,
    allowOrigins: [],
    createServer: () => gw.createServer(),
    sessions: true,
  });
  const agent = await httpAgent(serving.url);
  gateway = {
    agent,
    store,
    log,
    async close() {
      await agent.close().catch(() => {});
      await serving.close();
      await upstream.close().catch(() => {});
      await up.process.stop();
      await store.close();
    },
  };
}, TIMEOUT);

afterAll(async () => {
  await gateway?.close();
  for (const s of [reader, closer]) {
    s?.closeAllConnections();
    await new Promise<void>((resolve) => (s ? s.close(() => resolve()) : resolve()));
  }
});

/** What the worker records when its forwarder loses the reply the row's way. */
async function throughWorker(row: Row, id: string): Promise<{ status: number; effect: string | undefined; receipt: string | null | undefined }> {
  const forward = httpForwarder({ url: row.url(), timeoutMs: TIMEOUT, fetch: (request) => rowFetch(row, request) });
  const h = await harness({ executors: { 'stripe.refund': forward } });
  const r = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: id, amount: 700 } });
  return { status: r.status, effect: (await h.store.getEffect(`refund:${id}`))?.state, receipt: (await h.store.receipts()).at(-1)?.result };
}

/** What the gateway records when its upstream loses the reply to tools/call the row's way. */
async function throughGateway(row: Row, id: string): Promise<{ token: unknown; effect: string | undefined; receipt: string | null | undefined }> {
  current = row;
  try {
    const r = await call(gateway!.agent, 'refund', { payment_id: id, amount: 5 });
    const { store } = gateway!;
    return { token: token(r.refused), effect: (await store.getEffect(`refund:${id}`))?.state, receipt: (await store.receipts()).at(-1)?.result };
  } finally {
    current = null;
  }
}

/** What protect records when the one request its function sends loses the reply the row's way. */
async function throughProtect(row: Row, id: string): Promise<{ thrown: string; effect: string | undefined; receipt: string | null | undefined }> {
  const store = await createSqlJsStore();
  try {
    const control = new Control({ policy: loadPolicy(POLICY), store, principal: { agent: 'agent-1' }, logger: { warn: () => {} } });
    const refund = protect(
      async (args: { payment_id: string; amount: number }) => (await rowFetch(row, row.url(), { method: 'POST', body: JSON.stringify(args) })).status,
      { control, name: 'mcp.pay.refund', oneRequest: true },
    );
    const thrown = await refund({ payment_id: id, amount: 5 }).then(
      () => 'nothing',
      (err: unknown) => (err as Error).name,
    );
    return { thrown, effect: (await store.getEffect(`refund:${id}`))?.state, receipt: (await store.receipts()).at(-1)?.result };
  } finally {
    await store.close();
  }
}

/** Why a row cannot run here (it needs the undici Agent), or null. */
const skipped = (row: Row) => (row.connector !== undefined && noAgent !== null && process.env['CI'] === undefined ? noAgent : null);

describe('the same lost reply, the same recorded outcome: worker forwarder, MCP gateway and protect', () => {
  rows.forEach((row, i) => {
    it.skipIf(skipped(row) !== null)(
      `${row.name}: ${row.expected.toUpperCase()} on all three${skipped(row) === null ? '' : ` — skipped: ${skipped(row)}`}`,
      async () => {
        if (row.connector !== undefined && noAgent !== null) throw new Error(`CI: ${noAgent}`);
        const readBefore = readCount + closerCount;
        const worker = await throughWorker(row, `w${i}`);
        const readByWorker = readCount + closerCount - readBefore;
        const gw = await throughGateway(row, `g${i}`);
        const readByGateway = readCount + closerCount - readBefore - readByWorker;
        const viaProtect = await throughProtect(row, `p${i}`);
        const readByProtect = readCount + closerCount - readBefore - readByWorker - readByGateway;

        expect({ effect: worker.effect, receipt: worker.receipt }).toEqual({ effect: row.expected, receipt: row.expected });
        expect({ effect: gw.effect, receipt: gw.receipt }).toEqual({ effect: row.expected, receipt: row.expected });
        expect({ effect: viaProtect.effect, receipt: viaProtect.receipt }).toEqual({ effect: row.expected, receipt: row.expected });
        expect(viaProtect.thrown).toBe(row.expected === 'failed' ? 'NotExecuted' : 'TypeError');
        expect(worker.status).toBe(row.expected === 'failed' ? 422 : 502);
        expect(gw.token).toBe(row.expected === 'failed' ? 'ctrlrun.upstream_not_executed' : 'ctrlrun.upstream_ambiguous');
        // The row is what it claims: the upstream read the request exactly when the outcome is unknown.
        expect([readByWorker, readByGateway, readByProtect]).toEqual(row.sent ? [1, 1, 1] : [0, 0, 0]);
        expect(upstreamCalls(gateway!.log).filter((c) => c.tool === 'refund')).toEqual([]);
      },
      TIMEOUT,
    );
  });
});
