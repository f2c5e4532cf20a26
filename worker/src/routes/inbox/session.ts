/**
 * The inbox's sessions. Login takes the operator's credential and sets a cookie: `HttpOnly`,
 * `SameSite=Strict`, `Path=/inbox`, `Secure` over HTTPS, signed (HMAC-SHA-256) and valid for 8
 * hours at most. The cookie carries the credential encrypted (AES-GCM, a key derived from the
 * session secret) and every request checks it again, so a session ends as soon as its credential
 * is removed, rotated or expires. Sign-out records the session's id in the store
 * (`StateStore.endSession`; a store without that ability: in this process only). Every form post
 * must carry the session's CSRF token and come from the same origin.
 *
 * @module
 */
import type { Context } from 'hono';
import { IdentityError, InvalidArgument, type StateStore, type VerifiedPrincipal } from '@ctrlrun/kernel';
import { readBodyBounded } from '@ctrlrun/kernel/webhook';
import { constantTimeEqual, type Authenticator } from '../../auth.js';
import { formRefusal, loginPage, page } from './page.js';

/** How long a session lasts. */
export const SESSION_MS = 8 * 60 * 60 * 1000;
const COOKIE = 'ctrlrun_session';
const encoder = new TextEncoder();

/** A signed-in operator's session, as its cookie carries it. */
export interface Session {
  /** The session's id: what sign-out records as ended. */
  sid: string;
  /** Who is recorded as the approver. */
  operator: string;
  /** Expiry, ms since the epoch. */
  exp: number;
  /** The token every form post must carry. */
  csrf: string;
  /** The credential signed in with, AES-GCM encrypted (iv + ciphertext, base64url). */
  cred: string;
  /**
   * The principal the credential verifies, as checked on this request (never read from the
   * cookie): the session's answers are recorded as this verified approver's.
   */
  verified?: VerifiedPrincipal;
}

function b64url(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** base64url to UTF-8 text (or, with `'binary'`, to a binary string); `null` when it is not valid. */
function fromB64url(text: string, as: 'text' | 'binary' = 'text'): string | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length > 4096) return null;
  try {
    const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
    if (as === 'binary') return binary;
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
  } catch {
    return null;
  }
}

/** The largest form the inbox reads (its forms carry a token or two). */
const FORM_LIMIT = 16 * 1024;

/**
 * A URL-encoded form, read up to {@link FORM_LIMIT} bytes (past it, `'too_large'`), as a
 * prototype-free record; any other body type is `'unsupported'`.
 */
export async function readForm(request: Request): Promise<Record<string, string> | 'too_large' | 'unsupported'> {
  const type = (request.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') return 'unsupported';
  const bytes = await readBodyBounded(request, FORM_LIMIT);
  if (bytes === null) return 'too_large';
  const form = Object.create(null) as Record<string, string>;
  new URLSearchParams(new TextDecoder().decode(bytes)).forEach((v, k) => {
    form[k] = v;
  });
  return form;
}

function randomToken(): string {
  return b64url(crypto.getRandomValues(new Uint8Array(24)));
}

function isHttps(c: Context): boolean {
  return new URL(c.req.url).protocol === 'https:' || (c.req.header('x-forwarded-proto') ?? '').split(',')[0]?.trim() === 'https';
}

/** What {@link createSessions} gives the inbox's routes. */
export interface Sessions {
  /** The operator a credential names right now, or why not. */
  operatorOf(token: string): Promise<{ operator: string; verified?: VerifiedPrincipal } | { refused: 'invalid' | 'agent' }>;
  /** A new session's cookie value for `operator`, carrying `token` sealed. */
  issue(operator: string, token: string): Promise<string>;
  /** The request's live session, or `null`. */
  session(c: Context): Promise<Session | null>;
  /** The `set-cookie` header value for `value`, valid `maxAge` seconds. */
  cookie(c: Context, value: string, maxAge: number): string;
  /** Ends `s` everywhere the store is shared. */
  endSession(s: Session): Promise<void>;
  /** A form post: a live session, a same-origin request, the session's CSRF token; or the refusal. */
  checkedPost(c: Context): Promise<{ session: Session; form: Record<string, string> } | Response>;
}

/** The sessions of one inbox: `secret` signs them (default random: they end with the process). */
export function createSessions(auth: Authenticator, store: StateStore, secretOption: string | null | undefined): Sessions {
  const secret = secretOption ?? randomToken();
  if (typeof secret !== 'string' || secret.length < 16) throw new InvalidArgument('sessionSecret must be a string of at least 16 characters');
  const key = crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const sign = async (payload: string): Promise<string> =>
    b64url(new Uint8Array(await crypto.subtle.sign('HMAC', await key, encoder.encode(`ctrlrun-inbox-session:${payload}`))));
  // A second key from the same secret, for the credential inside the cookie (never the signing key).
  const sealKey = crypto.subtle
    .digest('SHA-256', encoder.encode(`ctrlrun-inbox-credential:${secret}`))
    .then((raw) => crypto.subtle.importKey('raw', raw, { name: 'AES-GCM' }, false, ['encrypt', 'decrypt']));
  const seal = async (token: string): Promise<string> => {
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: 'AES-GCM', iv }, await sealKey, encoder.encode(token)));
    const out = new Uint8Array(iv.length + sealed.length);
    out.set(iv);
    out.set(sealed, iv.length);
    return b64url(out);
  };
  const unseal = async (text: string): Promise<string | null> => {
    const binary = fromB64url(text, 'binary');
    if (binary === null || binary.length < 13) return null;
    const bytes = Uint8Array.from(binary, (ch) => ch.charCodeAt(0));
    try {
      const plain = await crypto.subtle.decrypt({ name: 'AES-GCM', iv: bytes.subarray(0, 12) }, await sealKey, bytes.subarray(12));
      return new TextDecoder('utf-8', { fatal: true }).decode(plain);
    } catch {
      return null;
    }
  };

  /** The operator a credential names right now, or `null` (unknown, removed, expired, or an agent's). */
  const operatorOf = async (token: string): Promise<{ operator: string; verified?: VerifiedPrincipal } | { refused: 'invalid' | 'agent' }> => {
    let identity;
    try {
      identity = await auth(new Request('http://inbox.invalid/', { headers: { authorization: `Bearer ${token}` } }));
    } catch (err) {
      if (!(err instanceof IdentityError)) throw err;
      identity = null;
    }
    if (identity === null) return { refused: 'invalid' };
    if (identity.role !== 'operator') return { refused: 'agent' };
    return identity.verified === undefined ? { operator: identity.operator } : { operator: identity.operator, verified: identity.verified };
  };

  /**
   * Sessions ended here: a shortcut for this process, and the whole record when the store cannot
   * keep one (then a sign-out holds in this process only). Dropped once past their expiry.
   */
  const ended = new Map<string, number>();
  const forget = (now: number): void => {
    for (const [sid, exp] of ended) if (exp < now) ended.delete(sid);
  };
  const endSession = async (s: Session): Promise<void> => {
    forget(Date.now());
    ended.set(s.sid, s.exp);
    if (store.endSession) await store.endSession(s.sid, s.exp);
  };
  const isEnded = async (sid: string): Promise<boolean> => ended.has(sid) || (store.sessionEnded ? await store.sessionEnded(sid) : false);

  const issue = async (operator: string, token: string): Promise<string> => {
    const payload = b64url(
      encoder.encode(
        JSON.stringify({ sid: randomToken(), operator, exp: Date.now() + SESSION_MS, csrf: randomToken(), cred: await seal(token) } satisfies Session),
      ),
    );
    return `${payload}.${await sign(payload)}`;
  };

  const session = async (c: Context): Promise<Session | null> => {
    const cookie = c.req.header('cookie') ?? '';
    const m = new RegExp(`(?:^|;\\s*)${COOKIE}=([A-Za-z0-9_-]+)\\.([A-Za-z0-9_-]+)`).exec(cookie);
    if (!m) return null;
    if (!constantTimeEqual(await sign(m[1]!), m[2]!)) return null;
    const text = fromB64url(m[1]!);
    if (text === null) return null;
    try {
      const s = JSON.parse(text) as Session;
      if (
        typeof s.sid !== 'string' ||
        typeof s.operator !== 'string' ||
        typeof s.exp !== 'number' ||
        typeof s.csrf !== 'string' ||
        typeof s.cred !== 'string' ||
        s.exp < Date.now()
      )
        return null;
      // Signed out: a copy of the cookie is refused wherever the store is shared.
      if (await isEnded(s.sid)) return null;
      // The credential is checked on every request: a removed, rotated or expired one ends the session.
      const token = await unseal(s.cred);
      if (token === null) return null;
      const now = await operatorOf(token);
      if (!('operator' in now) || now.operator !== s.operator) return null;
      delete s.verified;
      return now.verified === undefined ? s : { ...s, verified: now.verified };
    } catch {
      return null;
    }
  };

  const cookie = (c: Context, value: string, maxAge: number): string =>
    `${COOKIE}=${value}; Path=/inbox; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${isHttps(c) ? '; Secure' : ''}`;

  /** A form post: a live session, a same-origin request, the session's CSRF token. */
  const checkedPost = async (c: Context): Promise<{ session: Session; form: Record<string, string> } | Response> => {
    const s = await session(c);
    if (s === null) return loginPage('Your session has ended: sign in again.', 401);
    const origin = c.req.header('origin');
    if (
      origin !== undefined &&
      origin !== 'null' &&
      origin !== new URL(c.req.url).origin &&
      !(isHttps(c) && origin === new URL(c.req.url).origin.replace(/^http:/, 'https:'))
    ) {
      return page('Refused', `<main><p class="flash error" role="alert">Refused: the form was not sent from this inbox.</p></main>`, 403);
    }
    const form = await readForm(c.req.raw);
    if (typeof form === 'string') return formRefusal(form);
    if (typeof form['csrf'] !== 'string' || !constantTimeEqual(form['csrf'], s.csrf)) {
      return page(
        'Refused',
        `<main><p class="flash error" role="alert">Refused: the form's CSRF token does not match this session. Reload the inbox and try again.</p><p><a href="/inbox">Back to the inbox</a></p></main>`,
        403,
      );
    }
    return { session: s, form };
  };

  return { operatorOf, issue, session, cookie, endSession, checkedPost };
}
