/**
 * What runs an allowed action: functions registered by action name, and an HTTP forwarder that
 * sends the action to an upstream URL. The forwarder says `NotExecuted` only when it knows the
 * request never left (the kernel's `neverSent`: the connect failed, the name did not resolve, the
 * TLS handshake failed); a timeout, a reset, an unreadable or unexpected reply is an unknown
 * outcome, which the control path records AMBIGUOUS.
 *
 * @module
 */
import {
  canonicalJson,
  InvalidArgument,
  maskUrl,
  NotExecuted,
  neverSent,
  parseJson,
  type Action,
  type ExecutionContext,
  type JsonObject,
  type JsonValue,
} from '@ctrlrun/kernel';

/** Runs one action: gets its canonical arguments; returns the result to record. */
export type ActionExecutor = (args: JsonObject, context: ExecutionContext) => unknown;

/** Executors by action name. */
export type Executors = Readonly<Record<string, ActionExecutor>> | ReadonlyMap<string, ActionExecutor>;

/** The executor registered for `name`, or `undefined`. */
export function executorFor(executors: Executors, name: string): ActionExecutor | undefined {
  if (executors instanceof Map) return executors.get(name);
  return Object.prototype.hasOwnProperty.call(executors, name) ? (executors as Record<string, ActionExecutor>)[name] : undefined;
}

/** Checks an executors table at configuration time. */
export function checkExecutors(executors: unknown): Executors {
  if (executors === undefined) return {};
  const entries = executors instanceof Map ? [...executors.entries()] : typeof executors === 'object' && executors !== null ? Object.entries(executors) : null;
  if (entries === null) throw new InvalidArgument('executors must be an object or a Map of action name → function');
  for (const [name, fn] of entries) {
    if (typeof fn !== 'function') throw new InvalidArgument(`executors[${JSON.stringify(name)}] must be a function`);
  }
  return executors as Executors;
}

/** Options of {@link httpForwarder}. */
export interface HttpForwarderOptions {
  /** The upstream URL, or a function of the action. */
  url: string | URL | ((action: Action) => string | URL);
  /** Default `POST`. */
  method?: 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Extra request headers (e.g. the upstream's own credential). */
  headers?: Record<string, string> | ((action: Action) => Record<string, string>);
  /** No reply within this many ms is an unknown outcome. Default 10 000. */
  timeoutMs?: number;
  /** The fetch to use (default `globalThis.fetch`). */
  fetch?: (request: Request) => Promise<Response>;
  /**
   * Upstream statuses that mean "refused, nothing done" (recorded FAILED). Default none: any
   * non-2xx reply is an unknown outcome until a human resolves it.
   */
  notExecutedStatuses?: readonly number[];
  /** Whether a fetch error proves the request was never sent (default {@link neverConnected}). */
  neverConnected?: (error: unknown) => boolean;
}

/** What the forwarder records for a 2xx reply. */
export interface ForwardedResult {
  status: number;
  /** The reply's JSON (floats allowed) when it is JSON, else its text. */
  body: JsonValue;
}

/**
 * Whether `error` (a fetch rejection) proves the request never left: the kernel's
 * {@link neverSent}, the one list every surface reads (a failed name lookup, a failed `connect`
 * system call, a failed TLS handshake; Node's codes and Deno's words). Anything else is "maybe
 * sent": a reset, or `EHOSTUNREACH` from `read` on a connected socket. workerd reports a refused
 * connection as "Network connection lost.", the same words as a reset after sending, so there
 * every failed call is AMBIGUOUS (checked with workerd 1.20260426).
 */
export const neverConnected: (error: unknown) => boolean = neverSent;

/** The upstream's reply could not be used: the outcome is unknown (recorded AMBIGUOUS). */
export class UpstreamError extends Error {
  override name = 'UpstreamError';
}

async function readBody(response: Response): Promise<JsonValue> {
  const text = await response.text();
  if (/^application\/(?:[\w.+-]+\+)?json\b/i.test(response.headers.get('content-type') ?? '')) {
    try {
      return parseJson(text, { floats: 'allow', what: 'the upstream reply' });
    } catch {
      return text;
    }
  }
  return text;
}

/**
 * An executor that forwards the action to an upstream over HTTP: the canonical arguments as
 * the JSON body, the effect key as `Idempotency-Key`, the action id and hash as
 * `X-Ctrlrun-Action-Id` / `X-Ctrlrun-Action-Hash`. A 2xx reply is the result
 * (`{ status, body }`); a refused connection is `NotExecuted`; a timeout, a reset after sending
 * or any other reply throws, and the control path records the effect AMBIGUOUS.
 */
export function httpForwarder(options: HttpForwarderOptions): ActionExecutor {
  if (!options || typeof options !== 'object') throw new InvalidArgument('httpForwarder needs { url }');
  const { url } = options;
  if (typeof url !== 'function') {
    if (!URL.canParse(String(url))) throw new InvalidArgument(`url ${JSON.stringify(maskUrl(String(url)))} is not an absolute URL`);
    const parsed = new URL(String(url));
    if (parsed.username !== '' || parsed.password !== '') throw new InvalidArgument(credentialsRefused(String(url)));
  }
  const timeoutMs = options.timeoutMs ?? 10_000;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) throw new InvalidArgument('timeoutMs must be a positive integer');
  const method = options.method ?? 'POST';
  const doFetch = options.fetch ?? ((request: Request) => fetch(request));
  const refused = new Set(options.notExecutedStatuses ?? []);
  const isConnectFailure = options.neverConnected ?? neverConnected;

  return async (args, context) => {
    const { action, effectKey } = context;
    const target = new URL(String(typeof url === 'function' ? url(action) : url));
    // Request refuses a URL holding credentials, and its error quotes the URL whole: never sent.
    if (target.username !== '' || target.password !== '')
      throw new NotExecuted(`${action.name}: ${credentialsRefused(target.href)}; the request was never sent`);
    const extra = typeof options.headers === 'function' ? options.headers(action) : (options.headers ?? {});
    const headers = new Headers(extra);
    headers.set('content-type', 'application/json');
    headers.set('x-ctrlrun-action-id', action.actionId);
    headers.set('x-ctrlrun-action-hash', action.actionHash);
    if (effectKey !== null) headers.set('idempotency-key', effectKey);
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    try {
      let response: Response;
      try {
        const request = new Request(target, { method, headers, body: canonicalJson(args, 'arguments'), signal: controller.signal, redirect: 'manual' });
        response = await doFetch(request);
      } catch (err) {
        if (!timedOut && isConnectFailure(err)) {
          throw new NotExecuted(`${action.name}: could not connect to ${target.origin} (${describe(err)}); the request was never sent`, { cause: err });
        }
        throw timedOut ? new UpstreamError(`${action.name}: no reply from ${target.origin} within ${timeoutMs} ms`, { cause: err }) : err;
      }
      if (response.status >= 200 && response.status < 300) return { status: response.status, body: await readBody(response) } satisfies ForwardedResult;
      await response.body?.cancel().catch(() => undefined);
      if (refused.has(response.status)) throw new NotExecuted(`${action.name}: ${target.origin} refused the request with status ${response.status}`);
      throw new UpstreamError(`${action.name}: ${target.origin} answered ${response.status}; whether it acted is unknown`);
    } catch (err) {
      if (timedOut && !(err instanceof NotExecuted) && !(err instanceof UpstreamError)) {
        throw new UpstreamError(`${action.name}: no complete reply from ${target.origin} within ${timeoutMs} ms`, { cause: err });
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  };
}

/** Why a URL holding a user or password is not forwarded to, with the URL masked. */
function credentialsRefused(url: string): string {
  return `url ${JSON.stringify(maskUrl(url))} holds credentials (user:password@ before the host), which fetch refuses to send: put them in headers (Authorization)`;
}

function describe(err: unknown): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let depth = 0; depth < 4 && typeof e === 'object' && e !== null; depth++) {
    const { code, message, cause } = e as { code?: unknown; message?: unknown; cause?: unknown };
    parts.push(typeof code === 'string' ? `${code}: ${String(message)}` : String(message));
    e = cause;
  }
  return parts.join(' ← ');
}
