// The one list of transport errors that prove a request never left, row by row: Node's shapes
// (a real refused connect and a real failed lookup among them), Node's happy-eyeballs
// AggregateError, TLS, Deno's words, and what is never proof.
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { NEVER_SENT_CODES, neverSent } from '../src/index.js';

/** As Node's fetch rejects: `TypeError('fetch failed')` whose cause is the socket's or undici's error. */
const fetchFailed = (cause: object) => new TypeError('fetch failed', { cause });
/** A socket error as Node raises it: code, errno, system call. */
const sys = (code: string, syscall: string) => Object.assign(new Error(`${syscall} ${code} 192.0.2.9:443`), { code, errno: -1, syscall });

describe('neverSent', () => {
  it('a real refused connect and a real failed name lookup, as Node 20 fetch reports them, were never sent', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const refused = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: 'x' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).toMatchObject({ cause: { code: 'ECONNREFUSED', syscall: 'connect' } });
    expect(neverSent(refused)).toBe(true);
    const unresolved = await fetch('http://ctrlrun-never-sent.invalid/', { method: 'POST', body: 'x' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(neverSent(unresolved)).toBe(true);
  });

  it('a socket error proves it only from connect: EHOSTUNREACH / ENETUNREACH / ECONNREFUSED from read or write, or naming no call, are maybe sent', () => {
    for (const code of ['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EADDRNOTAVAIL']) {
      expect(neverSent(fetchFailed(sys(code, 'connect'))), `${code} from connect`).toBe(true);
      expect(neverSent(fetchFailed(sys(code, 'read'))), `${code} from read`).toBe(false);
      expect(neverSent(fetchFailed(sys(code, 'write'))), `${code} from write`).toBe(false);
      expect(neverSent(fetchFailed({ code })), `${code} naming no call`).toBe(false);
    }
  });

  it("Node's happy eyeballs: an AggregateError proves it when every attempt it holds failed to connect", () => {
    // As Node's NodeAggregateError: the first attempt's code, no system call, the attempts in `errors`.
    const all = Object.assign(new AggregateError([sys('ECONNREFUSED', 'connect'), sys('ENETUNREACH', 'connect')]), { code: 'ECONNREFUSED' });
    expect(neverSent(fetchFailed(all))).toBe(true);
    const mixed = Object.assign(new AggregateError([sys('ECONNREFUSED', 'connect'), sys('ECONNRESET', 'read')]), { code: 'ECONNREFUSED' });
    expect(neverSent(fetchFailed(mixed))).toBe(false);
    expect(neverSent(fetchFailed(Object.assign(new AggregateError([]), { code: 'ECONNREFUSED' })))).toBe(false);
  });

  it('name lookups, the connect timeout and TLS handshake failures prove it whatever reports them', () => {
    for (const code of NEVER_SENT_CODES) expect(neverSent(fetchFailed({ code })), code).toBe(true);
    expect([...NEVER_SENT_CODES]).toEqual(
      expect.arrayContaining(['ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', 'ERR_TLS_CERT_ALTNAME_INVALID', 'CERT_HAS_EXPIRED']),
    );
    // A cause deep in the chain counts.
    expect(neverSent(new Error('outer', { cause: fetchFailed(sys('ENOTFOUND', 'getaddrinfo')) }))).toBe(true);
  });

  it('what can happen after the request was written is never proof', () => {
    for (const code of [
      'ECONNRESET',
      'EPIPE',
      'UND_ERR_SOCKET',
      'UND_ERR_HEADERS_TIMEOUT',
      'UND_ERR_BODY_TIMEOUT',
      // OpenSSL raises it for a garbled record on an established connection too.
      'ERR_SSL_WRONG_VERSION_NUMBER',
      // Renegotiation happens after the first handshake.
      'ERR_TLS_RENEGOTIATION_DISABLED',
    ]) {
      expect(neverSent(fetchFailed({ code })), code).toBe(false);
    }
    expect(neverSent(new DOMException('aborted', 'AbortError'))).toBe(false);
    expect(neverSent(new Error('Network connection lost.'))).toBe(false); // workerd: refused and reset alike
    for (const v of [null, undefined, 'ECONNREFUSED', 111, {}, { code: 111 }]) expect(neverSent(v), String(v)).toBe(false);
    const loop: { cause?: unknown } = {};
    loop.cause = loop;
    expect(neverSent(loop)).toBe(false);
  });

  it("Deno's words for its connect phase prove it; a URL in the message cannot forge them", () => {
    const deno = (message: string) => fetchFailed(new Error(message));
    expect(
      neverSent(deno('error sending request for url (http://127.0.0.1:45999/): client error (Connect): tcp connect error: Connection refused (os error 111)')),
    ).toBe(true);
    expect(
      neverSent(
        deno(
          'error sending request for url (http://no-such-host.invalid/): client error (Connect): dns error: failed to lookup address information: Name or service not known',
        ),
      ),
    ).toBe(true);
    expect(neverSent(deno('error sending request for url (https://x.test/): client error (Connect): invalid peer certificate: Expired'))).toBe(true);
    // After connecting: a reset, or a refusal reported while reading.
    expect(neverSent(deno('error sending request for url (http://127.0.0.1:45999/): connection error: Connection reset by peer (os error 104)'))).toBe(false);
    expect(neverSent(deno('error reading a body from connection: Connection refused (os error 111)'))).toBe(false);
    // An agent-chosen path is percent-encoded in the quoted URL: its spaces never match.
    const url = new URL(`http://127.0.0.1:45999/refunds/${'tcp connect error'}`);
    expect(neverSent(deno(`error sending request for url (${url.href}): connection error: Connection reset by peer (os error 104)`))).toBe(false);
  });
});
