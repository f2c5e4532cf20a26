/**
 * The webhook approval provider (docs/spec/04-surfaces.md §6): one signed POST per approval request reaches a
 * person (plain JSON, or a Slack-compatible message), and a signed answer comes back to a small
 * `(Request) => Promise<Response>` handler that grants or denies through the {@link Control} as the
 * named human. Web-standard globals only (`fetch`, `Request`, `Response`, `AbortController`);
 * HMAC-SHA256 from `@noble/hashes`.
 *
 * Signature: header `CTRLRun-Signature: t=<unix seconds>,v1=<hex>`, where hex is
 * HMAC-SHA256(secret, `"<t>."` ‖ body) over the exact bytes sent; a receiver refuses a `t` more
 * than 300 s from its own clock.
 *
 * @module
 */
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { LocalApprovalProvider, untilAborted, type ApprovalProvider, type ProviderOptions, type WaitOptions } from './approval-providers.js';
import { canonicalJson, isPlainObject, type JsonObject } from './canonical.js';
import type { Control, Logger } from './control.js';
import { checkActor, sameSecret } from './effects.js';
import { ApprovalMismatch, CTRLRunError, InvalidArgument } from './errors.js';
import type { EventSink } from './events.js';
import type { Approval, ApprovalRecord, ApprovalRequest, EventRecord } from './model.js';
import type { StateStore } from './store/state-store.js';
import { checkDuration, systemClock, type Clock } from './time.js';
import { argumentsForDisplay, showInvisible } from './visible.js';
import type { Action } from './action.js';

/** The `schema` of the outbound JSON body. */
export const APPROVAL_REQUEST_SCHEMA = 'ctrlrun.approval_request/v1';
/** The header carrying `t=<unix seconds>,v1=<hex>`. */
export const SIGNATURE_HEADER = 'CTRLRun-Signature';
/** The header naming the approval request a delivery is about (the same on every retry). */
const REQUEST_ID_HEADER = 'CTRLRun-Request-Id';
/** How far a signature's timestamp may be from the receiver's clock, in seconds. */
const SIGNATURE_TOLERANCE_SECONDS = 300;
/** The shortest secret accepted, in bytes. */
const MIN_SECRET_BYTES = 32;
/** The path an answer is posted to, under the gateway's public URL. */
const APPROVAL_ANSWER_PATH = '/ctrlrun/approvals/';

const encoder = new TextEncoder();

/** The secret as bytes; empty or shorter than {@link MIN_SECRET_BYTES} is refused. */
export function webhookSecret(secret: string | Uint8Array): Uint8Array {
  const bytes = typeof secret === 'string' ? encoder.encode(secret) : secret instanceof Uint8Array ? secret : null;
  if (bytes === null) throw new InvalidArgument('the webhook secret must be a string or a Uint8Array');
  if (bytes.length < MIN_SECRET_BYTES) {
    throw new InvalidArgument(`the webhook secret is ${bytes.length === 0 ? 'empty' : `${bytes.length} bytes`}; it must be at least ${MIN_SECRET_BYTES} bytes`);
  }
  return Uint8Array.from(bytes);
}

function mac(secret: Uint8Array, timestamp: number, body: Uint8Array): string {
  const prefix = encoder.encode(`${timestamp}.`);
  const message = new Uint8Array(prefix.length + body.length);
  message.set(prefix, 0);
  message.set(body, prefix.length);
  return bytesToHex(hmac(sha256, secret, message));
}

/** The `CTRLRun-Signature` value for `body` at `timestamp` (unix seconds). */
export function signWebhook(secret: string | Uint8Array, timestamp: number, body: Uint8Array): string {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new InvalidArgument('timestamp must be a non-negative integer (unix seconds)');
  if (!(body instanceof Uint8Array)) throw new InvalidArgument('body must be the exact bytes sent (a Uint8Array)');
  return `t=${timestamp},v1=${mac(webhookSecret(secret), timestamp, body)}`;
}

/** What {@link verifyWebhookSignature} found. */
export type SignatureCheck = { readonly ok: true; readonly timestamp: number } | { readonly ok: false; readonly reason: string };

/**
 * Checks a `CTRLRun-Signature` header over the received bytes: well formed, `t` within
 * `toleranceSeconds` of `now`, and one `v1` equal (constant time) to the HMAC. Never throws on a
 * bad header; the reason says what was wrong and never echoes the header.
 */
export function verifyWebhookSignature(
  secret: string | Uint8Array,
  header: string | null | undefined,
  body: Uint8Array,
  now: Date,
  toleranceSeconds = SIGNATURE_TOLERANCE_SECONDS,
): SignatureCheck {
  const key = webhookSecret(secret);
  if (typeof header !== 'string' || header === '') return { ok: false, reason: `no ${SIGNATURE_HEADER} header` };
  if (header.length > 1024) return { ok: false, reason: `the ${SIGNATURE_HEADER} header is too long` };
  let timestamp: number | null = null;
  const candidates: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    const name = eq < 0 ? part.trim() : part.slice(0, eq).trim();
    const value = eq < 0 ? '' : part.slice(eq + 1).trim();
    if (name === 't') {
      if (timestamp !== null || !/^[0-9]{1,15}$/.test(value)) return { ok: false, reason: `the ${SIGNATURE_HEADER} header has a malformed or repeated t=` };
      timestamp = Number(value);
    } else if (name === 'v1') {
      if (/^[0-9a-fA-F]{64}$/.test(value)) candidates.push(value.toLowerCase());
    }
  }
  if (timestamp === null) return { ok: false, reason: `the ${SIGNATURE_HEADER} header has no t=` };
  if (candidates.length === 0) return { ok: false, reason: `the ${SIGNATURE_HEADER} header has no well-formed v1=` };
  const nowSeconds = Math.floor(now.getTime() / 1000);
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) {
    return { ok: false, reason: `the signature's timestamp is outside the ${toleranceSeconds} s window` };
  }
  const expected = mac(key, timestamp, body);
  let match = false;
  for (const c of candidates) match = sameSecret(c, expected) || match; // no early exit
  return match ? { ok: true, timestamp } : { ok: false, reason: 'the signature does not match the body' };
}

/** Options shaping the outbound body. */
export interface PayloadOptions {
  /** `json` (default): the spec's `ctrlrun.approval_request/v1`; `slack`: `{text, blocks}`. */
  format?: 'json' | 'slack';
  /** Where answers are posted; `respond_to` is sent only with one (else: answer with the CLI). */
  publicUrl?: string | null;
}

function respondTo(publicUrl: string | null | undefined, requestId: string): string | null {
  if (publicUrl === undefined || publicUrl === null) return null;
  return `${publicUrl.replace(/\/+$/, '')}${APPROVAL_ANSWER_PATH}${encodeURIComponent(requestId)}`;
}

const q = (v: string | null): string => JSON.stringify(v);

/**
 * The outbound JSON text, keys in the spec's order: `schema`, `request_id`, `action_hash`,
 * `action {name, arguments (canonical), principal {agent, user}, resource, environment}`,
 * `created_at`, `expires_at`, and `respond_to` only with a public URL.
 */
export function approvalRequestJson(request: ApprovalRequest, options: Pick<PayloadOptions, 'publicUrl'> = {}): string {
  const a: Action = request.action;
  const action =
    `{"name":${q(a.name)},"arguments":${canonicalJson(a.canonicalArguments)},` +
    `"principal":{"agent":${q(a.principal.agent)},"user":${q(a.principal.user ?? null)}},` +
    `"resource":${q(a.resource ?? null)},"environment":${q(a.environment)}}`;
  const url = respondTo(options.publicUrl, request.requestId);
  return (
    `{"schema":${q(APPROVAL_REQUEST_SCHEMA)},"request_id":${q(request.requestId)},"action_hash":${q(request.actionHash)},` +
    `"action":${action},"created_at":${q(request.createdAt)},"expires_at":${q(request.expiresAt)}` +
    (url === null ? '' : `,"respond_to":${q(url)}`) +
    '}'
  );
}

/**
 * Slack's three escapes, and every invisible character written `\uXXXX` (inside the arguments'
 * JSON that is the same string): agent-chosen text can neither mention (`<!channel>`), link, nor
 * read differently from the hash.
 */
function slackText(s: string): string {
  return showInvisible(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Slack: a section's text holds at most 3,000 characters; a message at most 50 blocks. */
const SLACK_SECTION = 3000;
/** The argument sections one message carries at most (the others: the header and the context). */
const ARGUMENT_SECTIONS = 40;
/** What one argument section's code block holds, escaped (the rest: its label, the note, the fences). */
const ARGUMENT_CHUNK = SLACK_SECTION - 400;

/**
 * Text for inside a code block (the arguments' JSON text, where a backtick can stand only inside a
 * string): Slack's escapes, and a backtick written `\u0060`, the JSON escape of the same string, so
 * that it cannot close the block early and reads as what was hashed (a lookalike such as U+02CB,
 * which a backtick was once shown as, stays itself: two argument sets never read alike).
 */
function slackCodeText(s: string): string {
  return slackText(s).replace(/`/g, '\\u0060');
}

/**
 * The arguments as Slack sections: every key shows (long values cut, each saying how many
 * characters were cut), in as many code blocks as the text needs, broken after a comma where one
 * is near. Values are cut only as far as needed to fit one section, or failing that the message.
 * Only past {@link ARGUMENT_SECTIONS} sections, which Slack cannot hold in one message, is the
 * rest left out, and the last section says how much and where to read it whole.
 */
function argumentSections(args: JsonObject, requestId: string): string[] {
  let shown = argumentsForDisplay(args, 2500);
  if (shown.text.length > 2500) shown = argumentsForDisplay(args, ARGUMENT_SECTIONS * 2500);
  const note =
    shown.cutOver === null
      ? ''
      : ` (strings over ${shown.cutOver} characters cut for display, each marked with how many characters were cut; the action hash names the whole)`;
  const chunks: string[] = [];
  let current = '';
  let rest = 0;
  // Break points after each comma; a piece longer than a chunk is broken anywhere (never inside an escape).
  const pieces = (shown.text.match(/[^,]*,|[^,]+$/g) ?? []).flatMap((p) => (slackCodeText(p).length > ARGUMENT_CHUNK ? Array.from(p) : [p]));
  for (let i = 0; i < pieces.length; i++) {
    const piece = slackCodeText(pieces[i]!);
    if (current.length + piece.length > ARGUMENT_CHUNK && current !== '') {
      if (chunks.length === ARGUMENT_SECTIONS - 1) {
        rest = pieces.slice(i).join('').length;
        break;
      }
      chunks.push(current);
      current = '';
    }
    current += piece;
  }
  chunks.push(current);
  return chunks.map((chunk, i) => {
    const label = i === 0 ? `*Arguments*${slackText(note)}` : `*Arguments, continued (${i + 1}/${chunks.length})*`;
    const tail =
      rest > 0 && i === chunks.length - 1
        ? `\n${slackText(`${rest} more characters of the arguments do not fit in one Slack message: read them whole with \`ctrlrun approve ${requestId}\` or in the inbox before answering.`)}`
        : '';
    return `${label}\n\`\`\`${chunk}\`\`\`${tail}`;
  });
}

/**
 * A Slack-compatible message (`{text, blocks}`) for an incoming webhook: what is asked, by whom,
 * the canonical arguments (escaped, in code blocks, every key shown and long values cut with the
 * count of what was cut — the hash names the whole action), when it expires, and how to answer.
 */
function approvalRequestSlackJson(request: ApprovalRequest, options: Pick<PayloadOptions, 'publicUrl'> = {}): string {
  const a = request.action;
  const who = a.principal.user ? `${a.principal.agent} for ${a.principal.user}` : a.principal.agent;
  const text = `ctrlrun: ${slackText(who)} asks to run ${slackText(a.name)} (approval ${slackText(request.requestId)})`;
  const url = respondTo(options.publicUrl, request.requestId);
  const answer =
    url === null ? `Answer with \`ctrlrun approve ${request.requestId}\` or \`ctrlrun deny ${request.requestId}\`.` : `Answer by a signed POST to ${url}.`;
  const blocks = [
    { type: 'section', text: { type: 'mrkdwn', text } },
    ...argumentSections(a.canonicalArguments, request.requestId).map((section) => ({ type: 'section', text: { type: 'mrkdwn', text: section } })),
    {
      type: 'context',
      elements: [
        {
          type: 'mrkdwn',
          text: slackText(
            `action hash ${request.actionHash} · environment ${a.environment}${a.resource ? ` · resource ${a.resource}` : ''} · expires ${request.expiresAt}`,
          ),
        },
        { type: 'mrkdwn', text: slackText(answer) },
      ],
    },
  ];
  return JSON.stringify({ text, blocks });
}

/** What became of one approval request's notification. */
export interface Delivery {
  readonly requestId: string;
  /** A 2xx answer was received. */
  readonly delivered: boolean;
  /** HTTP attempts made (0 when nothing was sent: the request was no longer pending). */
  readonly attempts: number;
  /** The last HTTP status, or null (no answer: timeout or network error). */
  readonly status: number | null;
  /** Why it was not delivered, when it was not. */
  readonly detail: string | null;
}

/** Options of {@link WebhookApprovalProvider}. */
export interface WebhookOptions extends ProviderOptions, PayloadOptions {
  /** Where requests are POSTed: `https` only (`http` to loopback with `allowInsecure`). */
  url: string;
  /** The shared secret (at least 32 bytes); never logged. */
  secret: string | Uint8Array;
  /** Permit `http://` to a loopback host (tests, a local relay). */
  allowInsecure?: boolean;
  /** Per-attempt timeout in ms (10 000). */
  timeoutMs?: number;
  /** Retries after the first attempt, on a 5xx, 408, 429, timeout or network error (2). */
  retries?: number;
  /** First backoff in ms, doubled per retry (1 000). */
  backoffMs?: number;
  /** The `fetch` to use; defaults to the global one. */
  fetch?: typeof globalThis.fetch;
  /** Where a failed delivery is reported (never with the body or the secret). */
  logger?: Logger;
}

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/**
 * A webhook URL as the provider takes it (`url`, and `publicUrl` with `allowInsecure`): `https`,
 * or `http` to a loopback host only when `allowInsecure`; else an `InvalidArgument` saying why.
 */
export function checkWebhookUrl(raw: unknown, allowInsecure: boolean): URL {
  if (typeof raw !== 'string' || raw === '') throw new InvalidArgument('the webhook url must be a non-empty string');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new InvalidArgument('the webhook url is not a valid URL');
  }
  if (url.protocol === 'https:') return url;
  if (url.protocol === 'http:' && allowInsecure && isLoopback(url.hostname)) return url;
  throw new InvalidArgument(
    url.protocol === 'http:'
      ? `the webhook url must be https (http is allowed only to a loopback host, with allowInsecure); got http to ${url.hostname}`
      : `the webhook url must be https, got ${url.protocol.replace(/:$/, '')}`,
  );
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const RETRIABLE = (status: number) => status >= 500 || status === 408 || status === 429;
/** How many request ids are remembered so that none is notified twice. */
const REMEMBERED = 10_000;

/**
 * An {@link ApprovalProvider} that tells a person by webhook. `request` stores a pending request
 * and POSTs it; `wait` POSTs it (if nothing did yet) and then waits for the answer in the store,
 * as {@link LocalApprovalProvider} does; {@link sink} POSTs on `APPROVAL_REQUESTED`, for requests
 * the control path creates. Whichever comes first sends: one logical POST per request id, however
 * often it is asked. The provider instance remembers the last 10 000 request ids it sent, so use
 * one instance per running program. Retries resend the same bytes with a fresh timestamp and the same
 * `CTRLRun-Request-Id`, so a receiver can drop a duplicate delivery. A total failure is a warning:
 * the request stays pending and can still be answered another way.
 */
export class WebhookApprovalProvider implements ApprovalProvider {
  readonly store: StateStore;
  /** Add to the Control's `sinks` to notify as soon as the control path asks for approval. */
  readonly sink: EventSink;
  readonly #local: LocalApprovalProvider;
  readonly #url: URL;
  readonly #secret: Uint8Array;
  readonly #format: 'json' | 'slack';
  readonly #publicUrl: string | null;
  readonly #timeoutMs: number;
  readonly #retries: number;
  readonly #backoffMs: number;
  readonly #fetch: typeof globalThis.fetch;
  readonly #clock: Clock;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #logger: Logger;
  readonly #deliveries = new Map<string, Promise<Delivery>>();

  constructor(store: StateStore, options: WebhookOptions) {
    if (!options || typeof options !== 'object') throw new InvalidArgument('the webhook provider needs { url, secret }');
    this.#local = new LocalApprovalProvider(store, options);
    this.store = store;
    this.#url = checkWebhookUrl(options.url, options.allowInsecure === true);
    this.#secret = webhookSecret(options.secret);
    const format = options.format ?? 'json';
    if (format !== 'json' && format !== 'slack') throw new InvalidArgument(`format must be 'json' or 'slack', got ${JSON.stringify(format)}`);
    this.#format = format;
    if (options.publicUrl !== undefined && options.publicUrl !== null) checkWebhookUrl(options.publicUrl, true);
    this.#publicUrl = options.publicUrl ?? null;
    this.#timeoutMs = checkDuration(options.timeoutMs ?? 10_000, 'timeoutMs');
    const retries = options.retries ?? 2;
    if (!Number.isSafeInteger(retries) || retries < 0 || retries > 10) throw new InvalidArgument('retries must be an integer from 0 to 10');
    this.#retries = retries;
    this.#backoffMs = checkDuration(options.backoffMs ?? 1000, 'backoffMs');
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== 'function') throw new InvalidArgument('no fetch is available here; pass options.fetch');
    this.#fetch = f;
    this.#clock = options.clock ?? systemClock;
    this.#sleep = options.sleep ?? defaultSleep;
    this.#logger = options.logger ?? console;
    this.sink = Object.freeze({
      name: 'webhook',
      onEvent: async (event: EventRecord) => {
        if (event.type === 'APPROVAL_REQUESTED' && event.approvalId !== null) await this.notify(event.approvalId);
      },
    });
  }

  async request(action: Action, ttlMs: number, options?: { policyHash?: string | null }): Promise<ApprovalRequest> {
    const request = await this.#local.request(action, ttlMs, options);
    await this.#once(request);
    return request;
  }

  async wait(requestId: string, timeoutMs?: number, options: WaitOptions = {}): Promise<Approval | null> {
    if (timeoutMs !== undefined) checkDuration(timeoutMs, 'timeout');
    const started = this.#clock().getTime();
    await untilAborted(this.notify(requestId), options.signal);
    // The time spent delivering counts against the caller's timeout.
    const left = timeoutMs === undefined ? undefined : Math.max(1, timeoutMs - (this.#clock().getTime() - started));
    return this.#local.wait(requestId, left, options);
  }

  /**
   * Sends the request's webhook unless one was already sent (or is being sent) for this id;
   * resolves to that one delivery. A request no longer pending is not sent (`attempts: 0`); an
   * unknown id is `ApprovalMismatch('unknown')`.
   */
  async notify(requestId: string): Promise<Delivery> {
    if (typeof requestId !== 'string' || requestId === '') throw new InvalidArgument('request id must be a non-empty string');
    const known = this.#deliveries.get(requestId);
    if (known) return known;
    const record: ApprovalRecord | null = await this.store.getApproval(requestId);
    if (record === null)
      throw new ApprovalMismatch('unknown', { approvalId: requestId, message: `approval ${requestId} refused (unknown): no such approval request` });
    if (record.status !== 'pending') {
      return { requestId, delivered: false, attempts: 0, status: null, detail: `not sent: the request is ${record.status}` };
    }
    return this.#once(record.request);
  }

  #once(request: ApprovalRequest): Promise<Delivery> {
    const known = this.#deliveries.get(request.requestId);
    if (known) return known;
    const delivery = this.#deliver(request);
    this.#deliveries.set(request.requestId, delivery);
    if (this.#deliveries.size > REMEMBERED) {
      const oldest = this.#deliveries.keys().next().value;
      if (oldest !== undefined) this.#deliveries.delete(oldest);
    }
    return delivery;
  }

  async #deliver(request: ApprovalRequest): Promise<Delivery> {
    const text =
      this.#format === 'slack'
        ? approvalRequestSlackJson(request, { publicUrl: this.#publicUrl })
        : approvalRequestJson(request, { publicUrl: this.#publicUrl });
    const body = encoder.encode(text);
    let status: number | null = null;
    let detail = '';
    let attempts = 0;
    for (let i = 0; i <= this.#retries; i++) {
      if (i > 0) await this.#sleep(this.#backoffMs * 2 ** (i - 1));
      attempts++;
      const timestamp = Math.floor(this.#clock().getTime() / 1000);
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(), this.#timeoutMs);
      try {
        const response = await this.#fetch(this.#url.href, {
          method: 'POST',
          headers: {
            'Content-Type': 'application/json',
            [SIGNATURE_HEADER]: `t=${timestamp},v1=${mac(this.#secret, timestamp, body)}`,
            [REQUEST_ID_HEADER]: request.requestId,
          },
          body,
          redirect: 'manual',
          signal: abort.signal,
        });
        status = response.status;
        await response.body?.cancel().catch(() => undefined);
        if (status >= 200 && status < 300) return { requestId: request.requestId, delivered: true, attempts, status, detail: null };
        detail = status >= 300 && status < 400 ? `HTTP ${status} (redirects are not followed)` : `HTTP ${status}`;
        if (!RETRIABLE(status)) break;
      } catch (err) {
        status = null;
        detail = abort.signal.aborted ? `no answer within ${this.#timeoutMs} ms` : `network error (${err instanceof Error ? err.name : 'unknown'})`;
      } finally {
        clearTimeout(timer);
      }
    }
    try {
      // The origin only: a webhook URL's path can itself be a credential (Slack's are).
      this.#logger.warn(
        `[ctrlrun] approval ${request.requestId}: the webhook to ${this.#url.origin} was not delivered after ${attempts} attempt(s): ${detail}; the request stays pending`,
      );
    } catch {
      // A failing logger must not fail the caller.
    }
    return { requestId: request.requestId, delivered: false, attempts, status, detail };
  }
}

/** Options of {@link approvalWebhookHandler}. */
export interface ApprovalWebhookHandlerOptions {
  /** Answers are applied through this Control's `grantApproval` / `denyApproval`. */
  control: Control;
  /** The shared secret; `null` switches the route off (every request is a 404). */
  secret: string | Uint8Array | null;
  /** Signature timestamp tolerance in seconds (300). */
  toleranceSeconds?: number;
  /** The largest body read, in bytes (65 536); larger is a 413. */
  maxBodyBytes?: number;
  /** The clock the timestamp is checked against; defaults to the Control's. */
  clock?: Clock;
}

function reply(status: number, outcome: 'ok' | 'refused', detail: string): Response {
  return new Response(JSON.stringify({ status: outcome, detail }), { status, headers: { 'content-type': 'application/json' } });
}

/**
 * Reads at most `max` bytes of a request's body, whatever its `content-length` claims; null when
 * it is longer (the rest is not read).
 */
export async function readBodyBounded(request: Request, max: number): Promise<Uint8Array | null> {
  const declared = request.headers.get('content-length');
  if (declared !== null && /^[0-9]+$/.test(declared) && Number(declared) > max) return null;
  if (request.body === null) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

const ANSWER_ROUTE = /\/ctrlrun\/approvals\/([^/]+)\/?$/;

/**
 * The inbound side: a handler for `POST …/ctrlrun/approvals/<request_id>` with body
 * `{request_id, action_hash, decision: "grant"|"deny", approver}` and a `CTRLRun-Signature` over
 * the received bytes. Checks, in order: signature (constant time, ±300 s), a JSON object, body id
 * = path id, the request exists, `action_hash` = stored, decision valid, approver non-empty — any
 * failure is a 400 and nothing changes. The same answer already recorded is a 200 (`already
 * granted` / `already denied`); anything else the store refuses (a consumed, denied or expired
 * request is never revived) is a 400. Mount it on a Hono route (`c => handler(c.req.raw)`) or
 * call it from any server that speaks `Request`/`Response`.
 */
export function approvalWebhookHandler(options: ApprovalWebhookHandlerOptions): (request: Request) => Promise<Response> {
  if (!options || typeof options !== 'object' || !options.control || typeof options.control.grantApproval !== 'function') {
    throw new InvalidArgument('the approval webhook handler needs { control, secret }');
  }
  const { control } = options;
  const secret = options.secret === null ? null : webhookSecret(options.secret);
  const tolerance = options.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS;
  if (!Number.isSafeInteger(tolerance) || tolerance < 1) throw new InvalidArgument('toleranceSeconds must be a positive integer');
  const maxBody = options.maxBodyBytes ?? 65_536;
  if (!Number.isSafeInteger(maxBody) || maxBody < 1) throw new InvalidArgument('maxBodyBytes must be a positive integer');
  const clock = options.clock ?? control.clock;

  return async (request: Request): Promise<Response> => {
    if (secret === null) return reply(404, 'refused', 'webhook answers are not enabled here');
    let pathId: string;
    try {
      const m = ANSWER_ROUTE.exec(new URL(request.url).pathname);
      if (!m) return reply(404, 'refused', `not an approval answer route (POST ${APPROVAL_ANSWER_PATH}<request_id>)`);
      pathId = decodeURIComponent(m[1]!);
    } catch {
      return reply(404, 'refused', 'not an approval answer route');
    }
    if (request.method !== 'POST') return reply(405, 'refused', 'use POST');
    const body = await readBodyBounded(request, maxBody);
    if (body === null) return reply(413, 'refused', `the body is larger than ${maxBody} bytes`);

    const signature = verifyWebhookSignature(secret, request.headers.get(SIGNATURE_HEADER), body, clock(), tolerance);
    if (!signature.ok) return reply(400, 'refused', `signature refused: ${signature.reason}`);

    let answer: unknown;
    try {
      answer = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
    } catch {
      return reply(400, 'refused', 'the body is not UTF-8 JSON');
    }
    if (!isPlainObject(answer)) return reply(400, 'refused', 'the body must be a JSON object');
    const field = (k: string): unknown => (Object.hasOwn(answer as object, k) ? (answer as Record<string, unknown>)[k] : undefined);
    const requestId = field('request_id');
    if (requestId !== pathId) return reply(400, 'refused', 'request_id in the body does not match the path');
    let record: ApprovalRecord | null;
    try {
      record = await control.store.getApproval(pathId);
    } catch (err) {
      return failure(control, err);
    }
    if (record === null) return reply(400, 'refused', `no approval request ${pathId}`);
    if (field('action_hash') !== record.request.actionHash) return reply(400, 'refused', 'action_hash does not match the stored request');
    const decision = field('decision');
    if (decision !== 'grant' && decision !== 'deny') return reply(400, 'refused', 'decision must be "grant" or "deny"');
    let approver: string;
    try {
      approver = checkActor(field('approver'), 'approver');
    } catch (err) {
      return reply(400, 'refused', (err as Error).message);
    }
    const done = decision === 'grant' ? 'granted' : 'denied';
    if (record.status === done) return reply(200, 'ok', `already ${done}`);
    try {
      if (decision === 'grant') await control.grantApproval(pathId, { approver });
      else await control.denyApproval(pathId, { approver });
      return reply(200, 'ok', `${done} by ${approver}`);
    } catch (err) {
      if (!(err instanceof CTRLRunError)) return failure(control, err);
      // Another surface may have recorded this very answer first: still the same answer.
      const now = await control.store.getApproval(pathId).catch(() => null);
      if (now?.status === done) return reply(200, 'ok', `already ${done}`);
      return reply(400, 'refused', err.message);
    }
  };
}

function failure(control: Control, err: unknown): Response {
  try {
    control.logger.warn(`[ctrlrun] approval webhook: the store failed: ${err instanceof Error ? err.message : String(err)}`);
  } catch {
    // Nothing more to do.
  }
  return reply(500, 'refused', 'internal error');
}
