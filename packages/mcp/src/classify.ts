/**
 * What the upstream's answer to a `tools/call` means for the effect (docs/spec/04-surfaces.md §5, "Classifying the
 * upstream"). Only two kinds of observation may claim the tool did not run: the upstream was
 * never reached, or it answered with an error that says the request was not understood. Anything
 * else that is not a clean result is an unknown outcome: the call may have done its work.
 *
 * @module
 */
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

/** The kernel's three outcomes of an execution. */
export type Outcome = 'committed' | 'failed' | 'ambiguous';

/** JSON-RPC errors that say the request was refused before any work: parse, request, method, params, header checks. */
export const NOT_EXECUTED_CODES: ReadonlySet<number> = new Set([-32700, -32600, -32601, -32602, -32020, -32021, -32022]);

/**
 * Error codes (on the error or anywhere on its `cause` chain) that mean no connection was ever
 * made: the name did not resolve, the port refused, the connect timed out, or the TLS handshake
 * failed. A reset or a close after connecting is not here: the request may have been read.
 */
export const NEVER_CONNECTED_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'ERR_SSL_WRONG_VERSION_NUMBER',
]);

/**
 * Thrown by an upstream connector that could not start or reach the upstream before anything was
 * sent (a failed spawn, a refused connect): the one transport failure recorded FAILED.
 */
export class UpstreamNotConnected extends Error {
  override name = 'UpstreamNotConnected';
}

/** How the gateway reads a tools/call result: `isError` and `resultType`. */
export function classifyResult(result: Record<string, unknown>, options: { notExecutedOnError: boolean }): Outcome {
  const resultType = result['resultType'];
  // Absent is "complete" on every revision this gateway accepts; anything else is not understood.
  if (resultType !== undefined && resultType !== 'complete') return 'ambiguous';
  if (result['isError'] === true) return options.notExecutedOnError ? 'failed' : 'ambiguous';
  return 'committed';
}

/** Whether `err` (or a cause beneath it) says the connection was never made. */
export function neverConnected(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; depth < 8 && typeof e === 'object' && e !== null; depth++) {
    if (e instanceof UpstreamNotConnected) return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && NEVER_CONNECTED_CODES.has(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** What a thrown error from the upstream client means. */
export type ErrorClass =
  /** A JSON-RPC error the upstream sent: relay it to the agent as it is. */
  | { readonly kind: 'rpc'; readonly outcome: Outcome; readonly error: McpError }
  /** An HTTP status without a JSON-RPC answer (401 is "not executed", anything else unknown). */
  | { readonly kind: 'http'; readonly outcome: Outcome; readonly status: number }
  /** The transport failed: before connecting (FAILED) or after sending (AMBIGUOUS). */
  | { readonly kind: 'transport'; readonly outcome: Outcome };

/**
 * Classifies what `client.request(tools/call)` threw. The SDK reports its own timeouts and closed
 * connections as `McpError`s with -32001 and -32000: those happened after the request was sent.
 */
export function classifyError(err: unknown): ErrorClass {
  if (err instanceof StreamableHTTPError) {
    const status = typeof err.code === 'number' ? err.code : 0;
    return { kind: 'http', outcome: status === 401 ? 'failed' : 'ambiguous', status };
  }
  if (err instanceof McpError && err.code !== -32000 && err.code !== -32001) {
    return { kind: 'rpc', outcome: NOT_EXECUTED_CODES.has(err.code) ? 'failed' : 'ambiguous', error: err };
  }
  return { kind: 'transport', outcome: neverConnected(err) ? 'failed' : 'ambiguous' };
}
