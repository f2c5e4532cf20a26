/**
 * Anchors at an HTTP endpoint of the user's (spec 05 §5.2): {@link httpAnchorProvider} asks it,
 * {@link anchorEndpoint} serves it (over any {@link AnchorProvider}, e.g. an append-only file on
 * another machine). One POST per call, its JSON body signed with HMAC-SHA-256 under a shared
 * secret (`x-ctrlrun-signature: sha256=<hex>`); the answer is signed over the request's nonce and
 * the answer's body, so a reply is neither forged nor replayed by whoever holds the store. An
 * answer that does not verify, or any failure, is the provider failing: nothing is anchored, and
 * verification is "unavailable". Web-standard globals only (`fetch`, `Request`, `Response`).
 *
 * @module
 */
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { checkAnchor, checkTime, type Anchor, type AnchorKind, type AnchorProvider } from './anchor.js';
import { InvalidArgument } from './errors.js';
import { randomIds } from './ids.js';
import { maskUrl } from './mask-url.js';

/** The header carrying a body's signature. */
export const ANCHOR_SIGNATURE_HEADER = 'x-ctrlrun-signature';

/** The largest request or answer body read (a long `since` list fits). */
const MAX_BODY = 8 * 1024 * 1024;

const utf8 = new TextEncoder();

function keyBytes(secret: unknown): Uint8Array {
  if (typeof secret === 'string' && secret.length >= 16) return utf8.encode(secret);
  if (secret instanceof Uint8Array && secret.length >= 16) return secret;
  throw new InvalidArgument('the anchor secret must be at least 16 characters (or bytes)');
}

function sign(key: Uint8Array, text: string): string {
  return `sha256=${bytesToHex(hmac(sha256, key, utf8.encode(text)))}`;
}

/** Compares two signatures in time independent of where they differ. */
function sameSignature(a: string, b: string | null): boolean {
  if (b === null || a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** One call, as the body carries it (with a `nonce` the answer's signature covers). */
type AnchorCall =
  | { op: 'make'; seq: number; hash: string; kind: AnchorKind }
  | { op: 'check'; seq: number; hash: string; token: string }
  | { op: 'latest' }
  | { op: 'since'; seq: number };

/** Options of {@link httpAnchorProvider}. */
export interface HttpAnchorProviderOptions {
  /** The endpoint (`https://…`; `http://` only for a loopback host). */
  readonly url: string;
  /** The shared secret (≥ 16 characters or bytes). */
  readonly secret: string | Uint8Array;
  /** Default: the global `fetch`. */
  readonly fetch?: typeof globalThis.fetch;
  /** Per call; default 10 s. */
  readonly timeoutMs?: number;
}

/** An {@link AnchorProvider} that asks an HTTP endpoint (see {@link anchorEndpoint}). */
export function httpAnchorProvider(options: HttpAnchorProviderOptions): AnchorProvider {
  if (typeof options !== 'object' || options === null) throw new InvalidArgument('httpAnchorProvider takes { url, secret }');
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    throw new InvalidArgument('the anchor url is not a URL');
  }
  const loopback = url.hostname === 'localhost' || url.hostname === '127.0.0.1' || url.hostname === '[::1]';
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback))
    throw new InvalidArgument('the anchor url must be https:// (http:// only for a loopback host)');
  const key = keyBytes(options.secret);
  const f = options.fetch ?? globalThis.fetch;
  if (typeof f !== 'function') throw new InvalidArgument('no fetch is available here; pass options.fetch');
  const timeoutMs = options.timeoutMs ?? 10_000;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) throw new InvalidArgument('timeoutMs must be a positive integer');
  const name = maskUrl(url.href);

  async function call(body: AnchorCall): Promise<Record<string, unknown>> {
    const nonce = randomIds('ctr').slice(4);
    const text = JSON.stringify({ ...body, nonce });
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    try {
      const response = await f(url.href, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [ANCHOR_SIGNATURE_HEADER]: sign(key, text) },
        body: text,
        signal: abort.signal,
        redirect: 'error',
      });
      const answer = await response.text();
      if (answer.length > MAX_BODY) throw new Error('the answer is too long');
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      if (!sameSignature(sign(key, `${nonce}.${answer}`), response.headers.get(ANCHOR_SIGNATURE_HEADER)))
        throw new Error('the answer is not signed with the shared secret');
      const parsed: unknown = JSON.parse(answer);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('the answer is not a JSON object');
      return parsed as Record<string, unknown>;
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    name,
    async make(seq, hash, kind) {
      const a = await call({ op: 'make', seq, hash, kind });
      if (typeof a['token'] !== 'string' || a['token'] === '') throw new Error('make: the answer has no token');
      return { token: a['token'], at: checkTime(a['at'], 'make().at') };
    },
    async check(seq, hash, token) {
      const a = await call({ op: 'check', seq, hash, token });
      if (typeof a['ok'] !== 'boolean') throw new Error('check: the answer has no ok');
      return a['ok'];
    },
    async latest() {
      const a = await call({ op: 'latest' });
      return a['anchor'] === null ? null : checkAnchor(a['anchor'], 'latest().anchor');
    },
    async since(seq) {
      const a = await call({ op: 'since', seq });
      if (!Array.isArray(a['anchors'])) throw new Error('since: the answer has no anchors list');
      return a['anchors'].map((x, i) => checkAnchor(x, `since().anchors[${i}]`));
    },
  };
}

/** Options of {@link anchorEndpoint}. */
export interface AnchorEndpointOptions {
  /** The shared secret (≥ 16 characters or bytes). */
  readonly secret: string | Uint8Array;
  /** Where the anchors are kept (an append-only file, another store's cache…). */
  readonly provider: AnchorProvider;
}

function seqOf(v: unknown): number {
  if (!Number.isSafeInteger(v) || (v as number) < 0) throw new InvalidArgument('seq is not a non-negative integer');
  return v as number;
}

/**
 * The endpoint {@link httpAnchorProvider} asks, as a fetch handler (`(Request) => Response`),
 * over `provider`. A request whose signature does not verify is 401 and touches nothing; a
 * malformed one 400; a provider failure 503.
 */
export function anchorEndpoint(options: AnchorEndpointOptions): (request: Request) => Promise<Response> {
  const key = keyBytes(options?.secret);
  const provider = options.provider;
  if (typeof provider?.make !== 'function') throw new InvalidArgument('anchorEndpoint needs a provider');
  return async (request) => {
    if (request.method !== 'POST') return new Response('POST only\n', { status: 405 });
    const text = await request.text();
    if (text.length > MAX_BODY) return new Response('too long\n', { status: 413 });
    if (!sameSignature(sign(key, text), request.headers.get(ANCHOR_SIGNATURE_HEADER))) return new Response('bad signature\n', { status: 401 });
    let body: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new InvalidArgument('not an object');
      body = parsed as Record<string, unknown>;
      if (typeof body['nonce'] !== 'string' || body['nonce'] === '') throw new InvalidArgument('no nonce');
    } catch {
      return new Response('malformed\n', { status: 400 });
    }
    let answer: unknown;
    try {
      switch (body['op']) {
        case 'make': {
          const kind = body['kind'];
          if (kind !== 'interval' && kind !== 'checkpoint') throw new InvalidArgument('kind is not interval or checkpoint');
          const a = checkAnchor(
            { ...(await provider.make(seqOf(body['seq']), String(body['hash']), kind)), seq: body['seq'], hash: body['hash'], kind },
            'make',
          );
          answer = { token: a.token, at: a.at };
          break;
        }
        case 'check':
          answer = { ok: (await provider.check(seqOf(body['seq']), String(body['hash']), String(body['token']))) === true };
          break;
        case 'latest':
          answer = { anchor: await provider.latest() };
          break;
        case 'since':
          answer = { anchors: (await provider.since(seqOf(body['seq']))) satisfies Anchor[] };
          break;
        default:
          return new Response('unknown op\n', { status: 400 });
      }
    } catch (err) {
      return new Response(err instanceof InvalidArgument ? 'malformed\n' : 'the provider failed\n', { status: err instanceof InvalidArgument ? 400 : 503 });
    }
    const out = JSON.stringify(answer);
    return new Response(out, {
      status: 200,
      headers: { 'content-type': 'application/json', [ANCHOR_SIGNATURE_HEADER]: sign(key, `${body['nonce'] as string}.${out}`) },
    });
  };
}
