/**
 * The one list of transport errors that prove a request never left: every surface that sends an
 * action somewhere (the worker's HTTP forwarder, the MCP gateway's upstream) asks
 * {@link neverSent} before it records FAILED (`NotExecuted`). Anything it does not recognise is
 * "maybe sent", which the control path records AMBIGUOUS: a wrong FAILED lets a retry run the
 * effect twice, a wrong AMBIGUOUS only asks a human.
 *
 * What counts, and why (Node's fetch is undici: a request is written only on a connected, and
 * for https handshaken, socket; a socket's own error goes to the request written on it, a failed
 * connect only to requests still waiting for one):
 * - A failed name lookup (`ENOTFOUND`, `EAI_AGAIN`, `EAI_NONAME`, `EAI_FAIL`): the lookup comes
 *   before the connection, and a pooled connection needs none.
 * - Any error of the `connect` system call (`syscall: 'connect'`: `ECONNREFUSED`, `EHOSTUNREACH`,
 *   `ENETUNREACH`, `ETIMEDOUT`…): the socket never connected, so no byte was written. The code
 *   alone is no proof: Linux keeps an ICMP "host / network / port unreachable" for an established
 *   connection as a soft error and reports it, when retransmission gives up, under the same code
 *   from `read` or `write` — after the request (or part of it) may have reached the upstream.
 *   undici passes that error to the request written on the (pooled or fresh) socket. So
 *   `EHOSTUNREACH` from `read` is AMBIGUOUS, from `connect` FAILED; an error that names no system
 *   call proves nothing (Node always names it; Node's happy-eyeballs `AggregateError` does not,
 *   but every error it holds does).
 * - undici's connect timeout (`UND_ERR_CONNECT_TIMEOUT`), which covers the TCP connect and the
 *   TLS handshake, and the TLS handshake's own failures (certificate verification, the name
 *   check, the handshake timeout): undici writes nothing before the handshake completes.
 *   `ERR_SSL_WRONG_VERSION_NUMBER` is not here: OpenSSL also raises it for a garbled record on an
 *   established connection, after the request was sent.
 * - Deno's wording for its connect phase (`client error (Connect)`, `tcp connect error`, `dns
 *   error`, `invalid peer certificate`): hyper's connector covers DNS, TCP and TLS. Each phrase
 *   holds spaces, which a URL in the message (Deno quotes it) never does unencoded.
 * - workerd reports a refused connection and a reset after sending with the same words
 *   ("Network connection lost."): nothing there is proof, so every failed call is AMBIGUOUS.
 * A reset, a close, a timeout of the whole call or an abort (`ECONNRESET`, `EPIPE`,
 * `UND_ERR_SOCKET`, `AbortError`) happen after the request may have been read.
 *
 * No Node API: it only reads `code`, `syscall`, `message`, `cause` and `errors`.
 *
 * @module
 */

/** A failed name lookup: before any connection, whatever system call reports it. */
const NAME_LOOKUP_CODES = ['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL'] as const;

/** undici's connect timer and the TLS handshake's failures: nothing is written before the handshake ends. */
const HANDSHAKE_CODES = [
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_TLS_CERT_ALTNAME_FORMAT',
  'ERR_TLS_HANDSHAKE_TIMEOUT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
] as const;

/**
 * Error codes that prove, on their own, that a request never left: a failed name lookup, undici's
 * connect timeout, a failed TLS handshake. Socket errors (`ECONNREFUSED`, `EHOSTUNREACH`,
 * `ENETUNREACH`, …) are not here: they prove it only when the `connect` system call raised them
 * (see {@link neverSent}).
 */
export const NEVER_SENT_CODES: ReadonlySet<string> = new Set<string>([...NAME_LOOKUP_CODES, ...HANDSHAKE_CODES]);

/** Deno's (hyper's) connect phase: the connector's DNS lookup, TCP connect and TLS handshake. */
const DENO_CONNECT_PHASE = /client error \(Connect\)|tcp connect error|dns error|failed to lookup address|invalid peer certificate/i;

/**
 * Whether `error` (a fetch rejection, or anything wrapping one in `cause`) proves the request
 * never left: a failed name lookup, a failed `connect` system call, undici's connect timeout, a
 * failed TLS handshake, or Deno's words for its connect phase. Anything else — a reset, a close,
 * a timeout, an abort, an error it does not know, a non-error — is "maybe sent" (false).
 */
export function neverSent(error: unknown): boolean {
  return provesNeverSent(error, 0);
}

function provesNeverSent(error: unknown, depth: number): boolean {
  let e: unknown = error;
  for (let d = depth; d < 8 && typeof e === 'object' && e !== null; d++) {
    const { code, syscall, message, cause, errors } = e as { code?: unknown; syscall?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
    if (typeof code === 'string' && NEVER_SENT_CODES.has(code)) return true;
    if (typeof code === 'string' && syscall === 'connect') return true;
    if (typeof message === 'string' && DENO_CONNECT_PHASE.test(message)) return true;
    // Node's happy eyeballs (autoSelectFamily): one AggregateError holding a failed connect per address.
    if (Array.isArray(errors) && errors.length > 0 && errors.every((inner) => provesNeverSent(inner, d + 1))) return true;
    e = cause;
  }
  return false;
}
