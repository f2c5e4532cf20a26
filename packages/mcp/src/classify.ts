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
import { NEVER_SENT_CODES as KERNEL_NEVER_SENT_CODES, neverSent } from '@ctrlrun/kernel';

/** The kernel's three outcomes of an execution. */
export type Outcome = 'committed' | 'failed' | 'ambiguous';

/** JSON-RPC errors that say the request was refused before any work: parse, request, method, params, header checks. */
export const NOT_EXECUTED_CODES: ReadonlySet<number> = new Set([-32700, -32600, -32601, -32602, -32020, -32021, -32022]);

/**
 * The kernel's `NEVER_SENT_CODES`: error codes that prove on their own that the
 * upstream was never reached (a failed name lookup, undici's connect timeout, a failed TLS
 * handshake). A socket error (`ECONNREFUSED`, `EHOSTUNREACH`, …) proves it only when the
 * `connect` system call raised it: see {@link neverConnected}.
 */
export const NEVER_CONNECTED_CODES: ReadonlySet<string> = KERNEL_NEVER_SENT_CODES;

/**
 * Thrown by an upstream connector that could not start or reach the upstream before anything was
 * sent (a failed spawn, a refused connect): the one transport failure recorded FAILED.
 */
export class UpstreamNotConnected extends Error {
  override name = 'UpstreamNotConnected';
}

/**
 * The upstream refused a request for its credentials with HTTP 403 and a `WWW-Authenticate`
 * challenge: like a 401, an answer given before any work, so the call did not run (FAILED).
 */
export class UpstreamAuthRefused extends Error {
  override name = 'UpstreamAuthRefused';
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/**
 * The fetch to give the upstream's Streamable HTTP client transport (`{ fetch: upstreamFetch() }`):
 * a POST answered 403 with a `WWW-Authenticate` header rejects with {@link UpstreamAuthRefused}
 * (the SDK's own error for it keeps only the status, and a bare 403 is not proof that nothing ran).
 */
export function upstreamFetch(base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const response = await base(input, init);
    if (response.status === 403 && (init?.method ?? 'GET').toUpperCase() === 'POST' && response.headers.has('www-authenticate')) {
      await response.body?.cancel().catch(() => {});
      throw new UpstreamAuthRefused(403, 'the upstream answered 403 with a WWW-Authenticate challenge: it refused the credentials before doing anything');
    }
    return response;
  };
}

/** How the gateway reads a tools/call result: `isError` and `resultType`. */
export function classifyResult(result: Record<string, unknown>, options: { notExecutedOnError: boolean }): Outcome {
  const resultType = result['resultType'];
  // Absent is "complete" on every revision this gateway accepts; anything else is not understood.
  if (resultType !== undefined && resultType !== 'complete') return 'ambiguous';
  if (result['isError'] === true) return options.notExecutedOnError ? 'failed' : 'ambiguous';
  return 'committed';
}

/**
 * Whether `err` (or a cause beneath it) says the upstream was never reached: a connector's
 * {@link UpstreamNotConnected}, or what the kernel's {@link neverSent} — the one list every
 * surface reads — takes as proof that the request never left.
 */
export function neverConnected(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; depth < 8 && typeof e === 'object' && e !== null; depth++) {
    if (e instanceof UpstreamNotConnected) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return neverSent(err);
}

/** What a thrown error from the upstream client means. */
export type ErrorClass =
  /** A JSON-RPC error the upstream sent: relay it to the agent as it is. */
  | { readonly kind: 'rpc'; readonly outcome: Outcome; readonly error: McpError }
  /** An HTTP status without a JSON-RPC answer (401, or 403 with `WWW-Authenticate`, is "not executed", anything else unknown). */
  | { readonly kind: 'http'; readonly outcome: Outcome; readonly status: number }
  /** The transport failed: before connecting (FAILED) or after sending (AMBIGUOUS). */
  | { readonly kind: 'transport'; readonly outcome: Outcome };

/**
 * Classifies what `client.request(tools/call)` threw. The SDK reports its own timeouts and closed
 * connections as `McpError`s with -32001 and -32000: those happened after the request was sent.
 */
export function classifyError(err: unknown): ErrorClass {
  if (err instanceof UpstreamAuthRefused) return { kind: 'http', outcome: 'failed', status: err.status };
  if (err instanceof StreamableHTTPError) {
    const status = typeof err.code === 'number' ? err.code : 0;
    return { kind: 'http', outcome: status === 401 ? 'failed' : 'ambiguous', status };
  }
  if (err instanceof McpError && err.code !== -32000 && err.code !== -32001) {
    return { kind: 'rpc', outcome: NOT_EXECUTED_CODES.has(err.code) ? 'failed' : 'ambiguous', error: err };
  }
  return { kind: 'transport', outcome: neverConnected(err) ? 'failed' : 'ambiguous' };
}
