/**
 * The HTTP forwarder against real upstreams on 127.0.0.1: what it sends, and how each way a
 * call can end is recorded — a refused connection is FAILED (422), a reset after sending, a
 * timeout and an unexpected reply are AMBIGUOUS (502).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { httpForwarder, neverConnected } from '../../worker/src/index.js';
import { AGENT, harness } from './harness.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
});

interface Seen {
  method: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** An upstream that reads the whole request, records it, then does `then` with the socket. */
async function upstream(then: (res: import('node:http').ServerResponse, req: IncomingMessage) => void): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', headers: req.headers, body });
      then(res, req);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/refunds`, seen };
}

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/refunds`;
}

async function forwardVia(url: string, options: { timeoutMs?: number; notExecutedStatuses?: number[] } = {}) {
  const h = await harness({ executors: { 'stripe.refund': httpForwarder({ url, headers: { authorization: 'Bearer upstream-secret' }, ...options }) } });
  const r = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'f1', amount: 700 } });
  return { h, r, effect: await h.store.getEffect('refund:f1'), last: (await h.store.receipts()).at(-1) };
}

describe('httpForwarder', () => {
  it('sends the canonical arguments with the effect key as Idempotency-Key; a 2xx reply is the result', async () => {
    const up = await upstream((res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end('{"id":"re_1","fee":0.25}');
    });
    const { r, effect } = await forwardVia(up.url);
    expect(r.status).toBe(200);
    expect(r.json['result']).toEqual({ status: 201, body: { id: 're_1', fee: 0.25 } });
    expect(effect!.state).toBe('committed');
    const [req] = up.seen;
    expect(req!.method).toBe('POST');
    expect(req!.body).toBe('{"amount":700,"payment_id":"f1"}');
    expect(req!.headers['idempotency-key']).toBe('refund:f1');
    expect(req!.headers['x-ctrlrun-action-id']).toBe(r.json['actionId']);
    expect(req!.headers['x-ctrlrun-action-hash']).toBe(r.json['actionHash']);
    expect(req!.headers['authorization']).toBe('Bearer upstream-secret');
  });

  it('a refused connection was never sent: NotExecuted, 422, recorded FAILED', async () => {
    const { r, effect, last } = await forwardVia(await closedPort());
    expect(r.status).toBe(422);
    expect(r.json['error']).toMatchObject({ code: 'ERR_NOT_EXECUTED', message: expect.stringContaining('never sent') });
    expect(effect!.state).toBe('failed');
    expect(last!.result).toBe('failed');
  });

  it('a reset after the request was sent is AMBIGUOUS: 502, and a retry is refused', async () => {
    const up = await upstream((_res, req) => req.socket.destroy());
    const { h, r, effect, last } = await forwardVia(up.url);
    expect(up.seen).toHaveLength(1);
    expect(r.status).toBe(502);
    expect(r.json['error']).toMatchObject({ code: 'ERR_AMBIGUOUS_EFFECT', outcome: 'ambiguous', effectKey: 'refund:f1' });
    expect(effect!.state).toBe('ambiguous');
    expect(last!.result).toBe('ambiguous');
    const retry = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'f1', amount: 700 } });
    expect(retry.status).toBe(409);
    expect(up.seen).toHaveLength(1);
  });

  it('no reply within the timeout is AMBIGUOUS (502)', async () => {
    const up = await upstream(() => undefined); // reads the request, never answers
    const { r, effect } = await forwardVia(up.url, { timeoutMs: 150 });
    expect(r.status).toBe(502);
    expect(r.json['error']).toMatchObject({ message: expect.stringContaining('no reply') });
    expect(effect!.state).toBe('ambiguous');
  });

  it('a non-2xx reply is AMBIGUOUS unless it is one the upstream documents as refused', async () => {
    const up = await upstream((res) => {
      res.writeHead(Number(res.req.headers['x-test-status'] ?? 503));
      res.end('nope');
    });
    const unknown = await forwardVia(up.url);
    expect(unknown.r.status).toBe(502);
    expect(unknown.effect!.state).toBe('ambiguous');
    const refusing = await upstream((res) => {
      res.writeHead(409);
      res.end('already refunded elsewhere');
    });
    const refused = await forwardVia(refusing.url, { notExecutedStatuses: [409] });
    expect(refused.r.status).toBe(422);
    expect(refused.effect!.state).toBe('failed');
  });

  it('refuses a bad configuration at once', () => {
    expect(() => httpForwarder({ url: 'not a url' })).toThrow(/not an absolute URL/);
    expect(() => httpForwarder({ url: 'http://x.invalid', timeoutMs: 0 })).toThrow(/timeoutMs/);
  });

  it('neverConnected knows the connect-phase failures of Node, Deno and workerd, and nothing else', () => {
    const nodeRefused = Object.assign(new TypeError('fetch failed'), {
      cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED', syscall: 'connect' }),
    });
    expect(neverConnected(nodeRefused)).toBe(true);
    expect(neverConnected(Object.assign(new TypeError('fetch failed'), { cause: { code: 'ENOTFOUND' } }))).toBe(true);
    expect(neverConnected(Object.assign(new TypeError('fetch failed'), { cause: { code: 'ERR_TLS_CERT_ALTNAME_INVALID' } }))).toBe(true);
    // Deno 2.9's shapes, as it throws them.
    const deno = (message: string) => Object.assign(new TypeError('fetch failed'), { cause: new Error(message) });
    expect(
      neverConnected(
        deno('error sending request for url (http://127.0.0.1:45999/): client error (Connect): tcp connect error: Connection refused (os error 111)'),
      ),
    ).toBe(true);
    expect(
      neverConnected(
        deno(
          'error sending request for url (http://no-such-host.invalid/): client error (Connect): dns error: failed to lookup address information: Name or service not known',
        ),
      ),
    ).toBe(true);
    // workerd says the same for a refused connection as for a reset: not proof of anything.
    expect(neverConnected(new Error('Network connection lost.'))).toBe(false);
    expect(
      neverConnected(Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) })),
    ).toBe(false);
    expect(neverConnected(Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNRESET' } }))).toBe(false);
    // The socket code alone is no proof: from read, after the request may have arrived, it is unknown.
    expect(neverConnected(Object.assign(new TypeError('fetch failed'), { cause: { code: 'EHOSTUNREACH', syscall: 'read' } }))).toBe(false);
    expect(neverConnected(Object.assign(new TypeError('fetch failed'), { cause: { code: 'EHOSTUNREACH', syscall: 'connect' } }))).toBe(true);
    expect(neverConnected(new DOMException('aborted', 'AbortError'))).toBe(false);
    expect(neverConnected('ECONNREFUSED')).toBe(false);
  });
});
