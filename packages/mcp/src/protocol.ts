/**
 * The Streamable HTTP request path's protocol checks (docs/spec/04-surfaces.md §5), after the
 * JSON and batch checks and before the SDK sees the message: the `MCP-Protocol-Version` header
 * (400 `-32022`), then the headers that mirror the body — `Mcp-Method`, `Mcp-Name` and
 * `Mcp-Param-<arg>` — against the body (400 `-32020`). The body decides; the headers are checked,
 * so that a proxy or a load balancer routing on a header never sees one thing while the gateway
 * acts on another.
 *
 * Runtime-neutral: the Node listener and the web handler both call {@link checkProtocolHeaders}.
 *
 * @module
 */
import { showInvisible } from '@ctrlrun/kernel';
import { scanArguments } from './floats.js';

/** The revisions the gateway accepts in `MCP-Protocol-Version`, newest first (the 2024-11-05 transport is not one). */
export const ACCEPTED_PROTOCOL_VERSIONS: readonly string[] = ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26'];
/** The revision of a request without `MCP-Protocol-Version`. */
export const DEFAULT_PROTOCOL_VERSION = '2025-03-26';
/** The revision on which the mirrored `Mcp-Method` and `Mcp-Name` headers are required. */
export const MIRRORED_HEADERS_REQUIRED_FROM = '2026-07-28';

/** JSON-RPC code of a request whose mirrored headers disagree with its body (or are missing where required). */
export const HEADER_MISMATCH = -32020;
/** JSON-RPC code of an unsupported `MCP-Protocol-Version`. */
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;
/** JSON-RPC's Invalid Request: a message of a shape the revision does not take. */
const INVALID_REQUEST = -32600;

/** A refused request: HTTP 400 with this JSON-RPC error. */
export interface ProtocolRefusal {
  readonly status: 400;
  readonly code: number;
  readonly message: string;
}

/** The request's headers as sent: name and value pairs (a name may repeat), e.g. Node's `rawHeaders` paired up. */
export type HeaderPairs = ReadonlyArray<readonly [string, string]>;

/** `text` quoted for a message: JSON string syntax, cut after 100 characters, invisible characters escaped. */
function quoted(text: string): string {
  return showInvisible(JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}…` : text));
}

function refuse(code: number, message: string): ProtocolRefusal {
  return { status: 400, code, message };
}

/**
 * The revision a request speaks (`MCP-Protocol-Version`, absent = {@link DEFAULT_PROTOCOL_VERSION}),
 * or the refusal of one the gateway does not accept (sent twice is not accepted either).
 */
export function protocolVersionOf(headers: HeaderPairs): { version: string } | ProtocolRefusal {
  const values = headers.filter(([k]) => k.toLowerCase() === 'mcp-protocol-version').map(([, v]) => v);
  if (values.length === 0) return { version: DEFAULT_PROTOCOL_VERSION };
  const accepted = `accepted: ${ACCEPTED_PROTOCOL_VERSIONS.join(', ')}`;
  if (values.length > 1)
    return refuse(UNSUPPORTED_PROTOCOL_VERSION, `unsupported protocol version: MCP-Protocol-Version is sent ${values.length} times (${accepted})`);
  const version = values[0]!.trim();
  if (!ACCEPTED_PROTOCOL_VERSIONS.includes(version)) {
    return refuse(UNSUPPORTED_PROTOCOL_VERSION, `unsupported protocol version: MCP-Protocol-Version ${quoted(version)} (${accepted})`);
  }
  return { version };
}

/**
 * A mirrored header's value: its text, or the `=?base64?…?=` sentinel decoded (UTF-8); null when
 * the sentinel does not hold base64 of UTF-8 text.
 */
export function headerText(value: string): string | null {
  const m = /^=\?base64\?([^?]*)\?=$/i.exec(value.trim());
  if (m === null) return value.trim();
  const b64 = m[1]!;
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(b64)) return null;
  try {
    const binary = atob(b64);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

/**
 * The JSON text of each member of `params.arguments` in the JSON-RPC message `text`, as
 * the body spells it (`2000`, `true`, `"a"`), for the members `JSON.parse` keeps (the last of a
 * repeated key). `text` must be JSON that `JSON.parse` accepted; nesting deeper than the float
 * scan's `MAX_DEPTH` is a `RangeError`.
 */
export function argumentSpellings(text: string): Map<string, string> {
  let spellings = new Map<string, string>();
  scanArguments(
    text,
    (pointer, spelling) => {
      // A member of the arguments only (`/name`, its segment unescaped); a later repeat of a key wins.
      const m = /^\/([^/]*)$/.exec(pointer);
      if (m !== null) spellings.set(m[1]!.replace(/~1/g, '/').replace(/~0/g, '~'), spelling);
    },
    () => {
      spellings = new Map();
    },
  );
  return spellings;
}

/** The header's text agrees with the body's value: a string by its exact text, an integer or boolean by its JSON spelling, nothing else. */
function agrees(header: string, value: unknown, spelling: string | undefined): boolean {
  if (typeof value === 'string') return header === value;
  if (typeof value === 'boolean') return header === spelling;
  if (typeof value === 'number' && spelling !== undefined && /^-?(?:0|[1-9]\d*)$/.test(spelling)) return header === spelling;
  return false;
}

/** What `Mcp-Name` mirrors for a method: the tool's or prompt's name, the resource's URI. */
function namedBy(method: string, params: Record<string, unknown> | null): { field: string; value: unknown } | null {
  if (method === 'tools/call' || method === 'prompts/get') return { field: 'params.name', value: params?.['name'] };
  if (method === 'resources/read') return { field: 'params.uri', value: params?.['uri'] };
  return null;
}

/**
 * What a POSTed message may be on `version` (spec 04 §5): a request or a notification (a
 * non-empty string `method`), or — on the 2025 revisions only, where the client answers the
 * server's own requests by POST — a response (`result` or `error`, no `method`). A response on
 * 2026-07-28 (which answers a server through the tool call's continuation instead), or a message
 * that is neither, is 400 -32600; null when the shape is one the revision takes.
 */
function checkShape(message: Record<string, unknown>, version: string): ProtocolRefusal | null {
  if (message['method'] !== undefined) {
    if (typeof message['method'] === 'string' && message['method'] !== '') return null;
    return refuse(INVALID_REQUEST, "invalid request: 'method' must be a non-empty string");
  }
  if (!('result' in message) && !('error' in message))
    return refuse(INVALID_REQUEST, "invalid request: a JSON-RPC message needs 'method', 'result' or 'error'");
  if (version === MIRRORED_HEADERS_REQUIRED_FROM) {
    return refuse(
      INVALID_REQUEST,
      `invalid request: a JSON-RPC response in a POST is a mechanic of the 2025 revisions, not of ${MIRRORED_HEADERS_REQUIRED_FROM} (answer the server through the call's continuation)`,
    );
  }
  return null;
}

/**
 * Checks one POSTed JSON-RPC message (`message` = `JSON.parse(text)`, one object) against its
 * headers: the protocol version first, then the mirrored headers. Returns the revision the
 * request speaks, or the refusal.
 */
export function checkProtocolHeaders(headers: HeaderPairs, message: Record<string, unknown>, text: string): { version: string } | ProtocolRefusal {
  const v = protocolVersionOf(headers);
  if ('status' in v) return v;
  const shape = checkShape(message, v.version);
  if (shape !== null) return shape;
  const mirrored = new Map<string, string[]>();
  for (const [k, value] of headers) {
    const name = k.toLowerCase();
    if (name === 'mcp-method' || name === 'mcp-name' || name.startsWith('mcp-param-')) mirrored.set(name, [...(mirrored.get(name) ?? []), value]);
  }
  const method = typeof message['method'] === 'string' ? message['method'] : null;
  const params =
    typeof message['params'] === 'object' && message['params'] !== null && !Array.isArray(message['params'])
      ? (message['params'] as Record<string, unknown>)
      : null;
  const required = v.version === MIRRORED_HEADERS_REQUIRED_FROM;
  const mismatch = (what: string) => refuse(HEADER_MISMATCH, `header mismatch: ${what}; the body decides, and the headers must say what it says`);
  /** The one value of a mirrored header, decoded; a refusal when it is sent twice or its base64 is bad; null when absent. */
  const one = (name: string, shown: string): string | ProtocolRefusal | null => {
    const values = mirrored.get(name);
    if (values === undefined) return null;
    if (values.length > 1) return mismatch(`${shown} is sent ${values.length} times`);
    const t = headerText(values[0]!);
    return t === null ? mismatch(`${shown} holds a =?base64?…?= value that is not base64 of UTF-8 text`) : t;
  };

  const m = one('mcp-method', 'Mcp-Method');
  if (typeof m === 'object' && m !== null) return m;
  if (m === null) {
    if (required && method !== null)
      return mismatch(`Mcp-Method is required on ${MIRRORED_HEADERS_REQUIRED_FROM} requests (the body's method is ${quoted(method)})`);
  } else if (method === null) {
    return mismatch(`Mcp-Method ${quoted(m)} is sent with a message that has no method`);
  } else if (m !== method) {
    return mismatch(`Mcp-Method ${quoted(m)} is not the body's method ${quoted(method)}`);
  }

  const named = method === null ? null : namedBy(method, params);
  const n = one('mcp-name', 'Mcp-Name');
  if (typeof n === 'object' && n !== null) return n;
  if (n === null) {
    if (required && named !== null) return mismatch(`Mcp-Name is required on ${MIRRORED_HEADERS_REQUIRED_FROM} ${method} requests (it mirrors ${named.field})`);
  } else if (named === null) {
    return mismatch(`Mcp-Name is sent with ${method === null ? 'a message that has no method' : `${quoted(method)}, which names nothing`}`);
  } else if (typeof named.value !== 'string' || n !== named.value) {
    return mismatch(`Mcp-Name ${quoted(n)} is not the body's ${named.field}${typeof named.value === 'string' ? ` ${quoted(named.value)}` : ''}`);
  }

  const paramHeaders = [...mirrored.keys()].filter((k) => k.startsWith('mcp-param-'));
  if (paramHeaders.length === 0) return v;
  const args =
    method === 'tools/call' && params !== null && typeof params['arguments'] === 'object' && params['arguments'] !== null && !Array.isArray(params['arguments'])
      ? (params['arguments'] as Record<string, unknown>)
      : null;
  let spellings = new Map<string, string>();
  try {
    if (args !== null) spellings = argumentSpellings(text);
  } catch (err) {
    // Nesting past the scan's bound: the same answer the float scan gives such a message.
    if (err instanceof RangeError) return { status: 400, code: -32600, message: `invalid request: ${err.message}` };
    throw err;
  }
  for (const header of paramHeaders) {
    const arg = header.slice('mcp-param-'.length);
    const shown = `Mcp-Param-${arg}`;
    const t = one(header, quoted(shown));
    if (typeof t === 'object' && t !== null) return t;
    const matches = args === null ? [] : Object.keys(args).filter((k) => k.toLowerCase() === arg);
    if (matches.length === 0)
      return mismatch(
        `${quoted(shown)} names an argument the body's ${method === 'tools/call' ? 'params.arguments does not have' : 'message does not carry (only tools/call has arguments)'}`,
      );
    if (matches.length > 1) return mismatch(`${quoted(shown)} could name ${matches.length} arguments that differ only in case`);
    const key = matches[0]!;
    if (!agrees(t!, args![key], spellings.get(key))) {
      return mismatch(
        `${quoted(shown)} does not agree with the argument ${quoted(key)} (a string agrees by its exact text, an integer or a boolean by its JSON spelling, nothing else)`,
      );
    }
  }
  return v;
}
