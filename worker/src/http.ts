/**
 * The HTTP edge of the worker: reading a JSON body under a size limit with the kernel's strict
 * parser, and turning refusals into `{ "error": { "code", "message", … } }` responses with the
 * status the API promises. Web-standard globals only.
 *
 * @module
 */
import { InvalidArgument, isKernelError, orderedJson, parseJson, type ErrorCode, type JsonValue } from '@ctrlrun/kernel';
import { readBodyBounded } from '@ctrlrun/kernel/webhook';

/** Codes the worker adds for refusals the kernel has no class for (HTTP-level ones). */
export type WorkerErrorCode =
  | 'ERR_FORBIDDEN'
  | 'ERR_TOO_MANY_PENDING_APPROVALS'
  | 'ERR_NOT_FOUND'
  | 'ERR_PAYLOAD_TOO_LARGE'
  | 'ERR_UNSUPPORTED_MEDIA_TYPE'
  | 'ERR_NOT_CONFIGURED'
  | 'ERR_INTERNAL';

/** A refusal with an HTTP status; `details` are merged into the error object. */
export class HttpError extends Error {
  readonly status: number;
  readonly code: WorkerErrorCode | ErrorCode;
  readonly details: Readonly<Record<string, JsonValue>>;
  constructor(status: number, code: WorkerErrorCode | ErrorCode, message: string, details: Record<string, JsonValue> = {}) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** The default request body limit: 64 KiB. */
export const DEFAULT_BODY_LIMIT = 64 * 1024;

/** A JSON response; `bigint`s are written as digits and each object keeps its key order. */
export function jsonResponse(status: number, body: JsonValue | Record<string, unknown>, headers: Record<string, string> = {}): Response {
  return new Response(orderedJson(dropUndefined(body)), { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers } });
}

/**
 * Response bodies are built from optional fields; `undefined` ones are left out, as
 * JSON.stringify would. The copy is prototype-free: `out['__proto__'] = …` on a `{}` would set
 * the prototype and hide a hashed argument of that name from the human reading the view.
 */
function dropUndefined(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(dropUndefined);
  if (typeof value === 'object' && value !== null) {
    const out = Object.create(null) as Record<string, unknown>;
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = dropUndefined(v);
    return out;
  }
  return value;
}

/** The `{ error: { code, message, … } }` body. */
export function errorResponse(
  status: number,
  code: string,
  message: string,
  details: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Response {
  return jsonResponse(status, { error: { code, message, ...details } }, headers);
}

/**
 * The status of a kernel refusal on the HTTP API. `ERR_APPROVAL_REQUIRED` (202) and an
 * executor's unknown outcome (502) are answered by the actions route itself.
 */
export function statusForCode(code: string): number {
  switch (code) {
    case 'ERR_INVALID_ARGUMENT':
      return 400;
    case 'ERR_IDENTITY':
      return 401;
    case 'ERR_ACTION_DENIED':
    case 'ERR_AUTHORITY_DENIED':
    case 'ERR_AUTHORITY_ESCALATION':
      return 403;
    case 'ERR_APPROVAL_MISMATCH':
    case 'ERR_DUPLICATE_EFFECT':
    case 'ERR_AMBIGUOUS_EFFECT':
      return 409;
    // Both were recorded (a FAILED or denied receipt) and nothing ran.
    case 'ERR_NOT_EXECUTED':
    case 'ERR_EFFECT_KEY':
      return 422;
    case 'ERR_APPROVAL_REQUIRED':
      return 202;
    case 'ERR_STORE_CLOSED':
      return 503;
    default:
      return 500;
  }
}

/**
 * The fields of a kernel error worth showing a client, besides its code and message. An approval
 * request's id is `requestId` in every body; an error that names it `approvalId` (an
 * `ApprovalMismatch`: the one presented) still shows that key too, deprecated, for a release.
 */
function kernelDetails(err: Error): Record<string, unknown> {
  const out = Object.create(null) as Record<string, unknown>;
  for (const k of ['reason', 'requestId', 'approvalId', 'effectKey', 'state', 'actionId', 'grantId', 'delegationId'] as const) {
    const v = (err as unknown as Record<string, unknown>)[k];
    if (typeof v === 'string') out[k] = v;
  }
  if (out['requestId'] === undefined && out['approvalId'] !== undefined) out['requestId'] = out['approvalId'];
  return out;
}

/**
 * Any thrown value as an error response. Kernel errors keep their code; an error that is neither
 * an {@link HttpError} nor the kernel's is a 500 whose message says nothing about internals.
 */
export function responseForError(err: unknown, extra: Record<string, unknown> = {}): Response {
  if (err instanceof HttpError) return errorResponse(err.status, err.code, err.message, { ...err.details, ...extra });
  if (isKernelError(err)) {
    const status = statusForCode(err.code);
    // A store or configuration failure is ours, not the client's: say what kind, not the SQL.
    const message = status >= 500 ? `the server could not complete the request (${err.name})` : err.message;
    return errorResponse(status, err.code, message, { ...(status >= 500 ? {} : kernelDetails(err)), ...extra });
  }
  return errorResponse(500, 'ERR_INTERNAL', 'the server could not complete the request', extra);
}

const JSON_MEDIA_TYPE = /^application\/json\s*(?:;|$)/i;

/** Checks that the request says it carries JSON in UTF-8 (415 otherwise). */
function checkContentType(request: Request): void {
  const type = request.headers.get('content-type');
  if (type === null || !JSON_MEDIA_TYPE.test(type.trim())) {
    throw new HttpError(415, 'ERR_UNSUPPORTED_MEDIA_TYPE', `the request body must be application/json, not ${type === null ? 'absent' : JSON.stringify(type)}`);
  }
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(type)?.[1];
  if (charset !== undefined && charset.toLowerCase() !== 'utf-8' && charset.toLowerCase() !== 'utf8') {
    throw new HttpError(415, 'ERR_UNSUPPORTED_MEDIA_TYPE', `the request body must be UTF-8, not ${charset}`);
  }
}

/** Reads at most `limit` bytes of the body; more is a 413, whatever the headers claimed. */
async function readLimited(request: Request, limit: number): Promise<Uint8Array> {
  const bytes = await readBodyBounded(request, limit);
  if (bytes === null) throw new HttpError(413, 'ERR_PAYLOAD_TOO_LARGE', `the request body is larger than ${limit} bytes`, { limit });
  return bytes;
}

/**
 * Reads the request's JSON body: 415 unless it is `application/json` (UTF-8), 413 beyond
 * `limit` bytes, 400 for a leading byte order mark, invalid UTF-8 or JSON (with the JSON path where the parser stopped,
 * e.g. `$.arguments.amount` for a float). Parsed by the kernel's strict `parseJson`: floats
 * are refused, integers beyond 2^53 − 1 become `bigint`, duplicate keys are refused.
 */
export async function readJsonBody(request: Request, limit: number): Promise<JsonValue> {
  checkContentType(request);
  const bytes = await readLimited(request, limit);
  // TextDecoder would drop a leading BOM silently; JSON text has none (RFC 8259 §8.1).
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    throw new HttpError(400, 'ERR_INVALID_ARGUMENT', 'the request body starts with a UTF-8 byte order mark (BOM, EF BB BF): send JSON text without it', {
      path: '$',
    });
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new HttpError(400, 'ERR_INVALID_ARGUMENT', 'the request body is not valid UTF-8');
  }
  if (text.trim() === '') throw new HttpError(400, 'ERR_INVALID_ARGUMENT', 'the request body is empty: send a JSON object', { path: '$' });
  try {
    return parseJson(text, { what: 'the request body' });
  } catch (err) {
    if (!(err instanceof InvalidArgument)) throw err;
    const offset = /at offset (\d+)$/.exec(err.message)?.[1];
    const details: Record<string, JsonValue> = offset === undefined ? {} : { path: jsonPathAt(text, Number(offset)) };
    throw new HttpError(400, 'ERR_INVALID_ARGUMENT', err.message, details);
  }
}

type Frame = { kind: 'object'; key: string | null } | { kind: 'array'; index: number };

/** `$.a.b`, `$["a b"]`, `$.list[2]`: the path of the value being read at `offset`. */
function formatPath(frames: readonly Frame[]): string {
  let path = '$';
  for (const f of frames) {
    if (f.kind === 'array') path += `[${f.index}]`;
    else if (f.key !== null) path += /^[A-Za-z_$][\w$]*$/.test(f.key) ? `.${f.key}` : `[${JSON.stringify(f.key)}]`;
  }
  return path;
}

/**
 * The JSON path of the value being read at `offset` in `text`, which is valid JSON up to there
 * (the strict parser stopped at `offset`): a tokenizer that tracks only containers and keys.
 */
export function jsonPathAt(text: string, offset: number): string {
  const frames: Frame[] = [];
  let expectingKey = false;
  for (let i = 0; i < offset && i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let end = i + 1;
      while (end < text.length && text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      const top = frames.at(-1);
      if (expectingKey && top?.kind === 'object') {
        try {
          top.key = JSON.parse(text.slice(i, end + 1)) as string;
        } catch {
          top.key = text.slice(i + 1, end);
        }
        expectingKey = false;
      }
      i = end;
    } else if (c === '{') {
      frames.push({ kind: 'object', key: null });
      expectingKey = true;
    } else if (c === '[') {
      frames.push({ kind: 'array', index: 0 });
    } else if (c === ',') {
      const top = frames.at(-1);
      if (top?.kind === 'array') top.index++;
      else if (top?.kind === 'object') {
        top.key = null;
        expectingKey = true;
      }
    } else if (c === '}' || c === ']') {
      frames.pop();
      expectingKey = false;
    }
  }
  return formatPath(frames);
}
