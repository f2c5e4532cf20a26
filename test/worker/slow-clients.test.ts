/**
 * Slow clients on the Node entry (issue 10, finding 12): over a real socket, headers or a body
 * that trickle in past the configured timeouts get a 408 and a closed connection, instead of
 * holding the connection for Node's defaults (60 s for headers, 5 min for a request).
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeTimeouts, startNodeWorker, type NodeWorker } from '../../worker/src/runtime/node.js';
import { AGENT_TOKEN, TEST_ENV } from './http.case.js';

/** What the server sent before it closed the socket, and whether the client still had bytes to send. */
interface Probe {
  reply: string;
  closedEarly: boolean;
}

/**
 * Opens a socket, writes `first`, and writes `rest` only after `stallMs` (long after the
 * timeouts): a server without timeouts would wait for it.
 */
function probe(url: string, first: string, rest: string, stallMs: number): Promise<Probe> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let reply = '';
    let sentRest = false;
    const socket = connect(Number(port), hostname, () => socket.write(first));
    const timer = setTimeout(() => {
      sentRest = true;
      if (!socket.destroyed) socket.end(rest);
    }, stallMs);
    socket.on('data', (d) => (reply += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ reply, closedEarly: !sentRest });
    });
    socket.setTimeout(stallMs * 3, () => reject(new Error(`no reply within ${stallMs * 3} ms: ${JSON.stringify(reply)}`)));
  });
}

describe('slow clients on the Node entry', () => {
  let worker: NodeWorker;
  beforeAll(async () => {
    worker = await startNodeWorker({ env: TEST_ENV, port: 0, hostname: '127.0.0.1', print: () => undefined, timeouts: { headersMs: 400, requestMs: 800 } });
  }, 60_000);
  afterAll(async () => {
    await worker?.close();
  });

  const STALL_MS = 15_000;

  it('headers that do not all arrive in time: 408 and the connection closed', async () => {
    const p = await probe(worker.url, 'POST /v1/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ', `${AGENT_TOKEN}\r\n\r\n`, STALL_MS);
    expect(p.reply).toMatch(/^HTTP\/1\.1 408 /);
    expect(p.closedEarly).toBe(true);
  }, 60_000);

  it('a body that does not all arrive in time: 408 and the connection closed, nothing written', async () => {
    const body = JSON.stringify({ name: 'stripe.refund', arguments: { payment_id: 'slow_1', amount: 1 } });
    const head = `POST /v1/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${AGENT_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const p = await probe(worker.url, head + body.slice(0, 10), body.slice(10), STALL_MS);
    expect(p.reply).toMatch(/^HTTP\/1\.1 408 /);
    expect(p.closedEarly).toBe(true);
    expect(await worker.store.getEffect('refund:slow_1')).toBeNull();
    expect((await worker.store.events()).filter((e) => e.actionId !== null && JSON.stringify(e.data).includes('slow_1'))).toEqual([]);
  }, 60_000);

  it('a prompt client is served as before', async () => {
    const r = await fetch(`${worker.url}/v1/actions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${AGENT_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'stripe.refund', arguments: { payment_id: 'quick_1', amount: 1 } }),
    });
    expect(r.status).toBe(200);
  });
});

describe('the timeouts, from options or the environment', () => {
  it('default to 10 s for headers and 30 s for the whole request; the environment and options override', () => {
    expect(nodeTimeouts({})).toEqual({ headersMs: 10_000, requestMs: 30_000 });
    expect(nodeTimeouts({ CTRLRUN_HEADERS_TIMEOUT_MS: '2000', CTRLRUN_REQUEST_TIMEOUT_MS: ' 5000 ' })).toEqual({ headersMs: 2000, requestMs: 5000 });
    expect(nodeTimeouts({ CTRLRUN_HEADERS_TIMEOUT_MS: '2000' }, { headersMs: 100 })).toEqual({ headersMs: 100, requestMs: 30_000 });
  });

  it('refuse what is not a whole number of milliseconds, or headers longer than the request', () => {
    for (const bad of ['0', '-5', '1.5', 'ten', '99999999999'])
      expect(() => nodeTimeouts({ CTRLRUN_REQUEST_TIMEOUT_MS: bad }), bad).toThrow(/CTRLRUN_REQUEST_TIMEOUT_MS must be a whole number/);
    expect(() => nodeTimeouts({}, { requestMs: 0 })).toThrow(/timeouts\.requestMs/);
    expect(() => nodeTimeouts({ CTRLRUN_HEADERS_TIMEOUT_MS: '9000', CTRLRUN_REQUEST_TIMEOUT_MS: '8000' })).toThrow(/cannot exceed/);
  });
});
