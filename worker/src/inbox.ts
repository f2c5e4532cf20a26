/**
 * The operator inbox at `/inbox`: a small page for the humans who answer approvals. It shows each
 * pending request with the exact canonical arguments that were hashed (every key, `__proto__`
 * included), the action hash, the policy rule that asked for a human, who asked and when; it
 * grants and denies; it lists AMBIGUOUS effects with a resolve control; it shows whether the
 * receipt chain verifies. It refreshes itself without a reload (a small script polls
 * `/inbox/live`), and it works on a phone.
 *
 * "Edit and approve" opens a JSON text box prefilled with the proposed arguments; sending it
 * shows the proposed and the edited arguments side by side, key by key (every value escaped as
 * the rest of the page is), with what the policy says of the edit, and only a second confirmation
 * approves: through `Control.grantApproval`'s `edit`, which decides the edit again (a deny leaves
 * the request pending) and grants it under a new request id.
 *
 * Login takes the operator's credential (the same bearer token the API takes) and sets a session
 * cookie: `HttpOnly`, `SameSite=Strict`, `Path=/inbox`, `Secure` when the page is served over
 * HTTPS, signed (HMAC-SHA-256) and valid for 8 hours at most. The cookie carries the credential
 * encrypted (AES-GCM, a key derived from the session secret) and every request checks it again,
 * so a session ends as soon as its credential is removed, rotated or expires. "Sign out" ends the
 * session on the server too: its id is recorded in the store (`StateStore.endSession`), which
 * every process and isolate sharing the store reads on every request, so a copy of the cookie
 * taken earlier is refused everywhere (a store without that ability: in this process only).
 * Every form post carries the session's CSRF
 * token and must come from the same origin. An agent credential is refused at login and sees
 * nothing. Plain templates, Web-standard globals only (WebCrypto for the signature).
 *
 * @module
 */
import type { Context, Hono } from 'hono';
import {
  ActionDenied,
  ApprovalMismatch,
  approvalProgress,
  type VerifiedPrincipal,
  canonicalJson,
  explainDecision,
  IdentityError,
  InvalidArgument,
  parseJson,
  showInvisible,
  viewTime,
  type ApprovalRecord,
  type AnchorReport,
  type ChainReport,
  type Control,
  type EffectRecord,
  type JsonObject,
} from '@ctrlrun/kernel';
import { readBodyBounded } from '@ctrlrun/kernel/webhook';
import type { Authenticator } from './auth.js';
import { constantTimeEqual } from './auth.js';

/** How long a session lasts. */
const SESSION_MS = 8 * 60 * 60 * 1000;
const COOKIE = 'ctrlrun_session';
/** What one page shows at most of each list. */
const SHOWN = 200;
const encoder = new TextEncoder();

interface Session {
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

/** What the inbox needs from the app. */
export interface InboxOptions {
  control: Control;
  auth: Authenticator;
  /** The chain's verification (shared with `GET /v1/receipts/verify`). */
  verify(): Promise<ChainReport>;
  /** The anchor report (`GET /v1/anchors/verify`), shown apart from the chain's; absent: no anchor provider. */
  anchors?: (() => Promise<AnchorReport>) | null;
  /**
   * The key sessions are signed with. Default: random per app, so sessions end when the process
   * (or isolate) does; give the same secret to every instance that serves one inbox.
   */
  sessionSecret?: string | null;
}

/** The anchor report as the inbox's footer shows it, beside (never inside) the chain's verdict. */
function anchorsHtml(r: AnchorReport): string {
  if (r.status === 'ok') return `<p class="ok" data-anchors="ok">Anchored: ${esc(r.anchors)} anchor(s) at ${esc(r.provider)} confirm the chain.</p>`;
  if (r.status === 'unavailable')
    return `<p class="bad" data-anchors="unavailable">Anchors unavailable: ${esc(r.provider)} could not be asked, so the anchors are not verified.</p>`;
  return `<p class="bad" data-anchors="broken">Anchor findings: ${esc(
    r.breaks
      .slice(0, 5)
      .map((b) => `${b.name}${b.seq === null ? '' : ` at seq ${b.seq}`}`)
      .join('; '),
  )}</p>`;
}

/** Agent-controlled text as HTML text (or attribute value): markup escaped, invisible characters made visible. */
function esc(text: unknown): string {
  // Invisible characters (a bidi override reverses what follows) shown as escapes, then markup escaped.
  return showInvisible(String(text)).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A time in the form every view uses (UTC, milliseconds, `Z`), its date and its hour and minute. */
const EXACT_TIME = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}):\d{2}\.\d{3}Z$/;

/**
 * A stored time as the inbox shows it: short (`2026-09-07 11:44 UTC`, which the page's script
 * turns into the reader's local time, `7 Sept, 13:44`), never wrapped, and the exact value
 * (`2026-09-07T11:44:30.625Z`) in `datetime` and on hover (`title`). Text that is no time (a
 * damaged row) is shown as it is, escaped.
 */
function timeHtml(stored: string): string {
  const exact = viewTime(stored);
  const m = EXACT_TIME.exec(exact);
  if (m === null) return esc(stored);
  return `<time datetime="${exact}" title="${exact}" data-local>${m[1]} ${m[2]} UTC</time>`;
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
async function readForm(request: Request): Promise<Record<string, string> | 'too_large' | 'unsupported'> {
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

function formRefusal(reason: 'too_large' | 'unsupported'): Response {
  return reason === 'too_large'
    ? page('Refused', '<main><p class="flash error" role="alert">Refused: the form is too large.</p></main>', 413)
    : page('Refused', '<main><p class="flash error" role="alert">Refused: send the form as application/x-www-form-urlencoded.</p></main>', 415);
}

function randomToken(): string {
  return b64url(crypto.getRandomValues(new Uint8Array(24)));
}

function isHttps(c: Context): boolean {
  return new URL(c.req.url).protocol === 'https:' || (c.req.header('x-forwarded-proto') ?? '').split(',')[0]?.trim() === 'https';
}

function page(title: string, body: string, status = 200, extraHeaders: Record<string, string> = {}): Response {
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<link rel="icon" href="data:,">
<style>
:root { color-scheme: light; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; line-height: 1.45; }
body { margin: 0; background: #f6f7f9; color: #1b1f24; }
header { background: #1b1f24; color: #fff; padding: .75rem 1rem; display: flex; justify-content: space-between; align-items: center; gap: 1rem; flex-wrap: wrap; }
header h1 { font-size: 1.15rem; margin: 0; }
main { max-width: 60rem; margin: 0 auto; padding: 1rem; }
section { margin-bottom: 1.5rem; }
h2 { font-size: 1.1rem; margin: 1rem 0 .5rem; }
article { background: #fff; border: 1px solid #c9ced6; border-radius: .5rem; padding: .75rem 1rem; margin: .75rem 0; }
article h3 { font-size: 1rem; margin: 0 0 .5rem; word-break: break-all; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem .75rem; margin: 0 0 .75rem; }
dt { font-weight: 600; }
dd { margin: 0; word-break: break-all; }
time { white-space: nowrap; word-break: normal; }
pre { background: #eef0f3; padding: .5rem; border-radius: .25rem; white-space: pre-wrap; word-break: break-all; margin: 0 0 .75rem; font-size: .9rem; }
form.inline { display: inline-block; margin: 0 .5rem .5rem 0; }
button { font: inherit; min-height: 2.75rem; min-width: 6rem; padding: .5rem 1rem; border-radius: .375rem; border: 1px solid #1b1f24; background: #fff; color: #1b1f24; cursor: pointer; }
button.primary { background: #0b5d1e; border-color: #0b5d1e; color: #fff; }
button.danger { background: #a4161a; border-color: #a4161a; color: #fff; }
header button { background: transparent; color: #fff; border-color: #fff; min-width: 0; }
label { display: block; font-weight: 600; margin-bottom: .25rem; }
textarea { font: .9rem ui-monospace, monospace; width: 100%; box-sizing: border-box; padding: .5rem; border: 1px solid #5a6270; border-radius: .375rem; }
table { border-collapse: collapse; width: 100%; margin: 0 0 .75rem; background: #fff; }
th, td { border: 1px solid #c9ced6; padding: .25rem .5rem; text-align: left; vertical-align: top; word-break: break-all; }
tr[data-change=changed], tr[data-change=added], tr[data-change=removed] { background: #fff4d6; }
input[type=password] { font: inherit; width: 100%; max-width: 30rem; padding: .5rem; min-height: 2.75rem; box-sizing: border-box; border: 1px solid #5a6270; border-radius: .375rem; }
.ok { color: #0b5d1e; font-weight: 600; }
.bad { color: #a4161a; font-weight: 600; }
.note { color: #4a515c; }
.flash { background: #fff; border-left: .25rem solid #0b5d1e; padding: .5rem .75rem; }
.error { border-left-color: #a4161a; }
@media (max-width: 30rem) { dl { grid-template-columns: 1fr; } dt { margin-top: .25rem; } }
</style>
</head>
<body>
${body}
</body>
</html>
`;
  return new Response(html, {
    status,
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy':
        "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
      'x-content-type-options': 'nosniff',
      'cache-control': 'no-store',
      ...extraHeaders,
    },
  });
}

function loginPage(message: string | null, status = 200): Response {
  return page(
    'ctrlrun inbox: sign in',
    `<header><h1>ctrlrun inbox</h1></header>
<main>
<h2>Sign in</h2>
${message ? `<p class="flash error" role="alert">${esc(message)}</p>` : ''}
<form method="post" action="/inbox/login">
<label for="token">Operator credential</label>
<input id="token" name="token" type="password" autocomplete="current-password" required>
<p><button class="primary" type="submit">Sign in</button></p>
</form>
</main>`,
    status,
  );
}

/** The client script: polls `/inbox/live` and swaps the live region when it changed. */
const SCRIPT = `(() => {
  // Each time in the reader's own time zone and language, short; the exact UTC value stays in title.
  function localTimes(root) {
    const year = new Date().getFullYear();
    for (const t of root.querySelectorAll('time[data-local]')) {
      const d = new Date(t.getAttribute('datetime'));
      if (isNaN(d.getTime())) continue;
      const shape = { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' };
      if (d.getFullYear() !== year) shape.year = 'numeric';
      t.textContent = d.toLocaleString(undefined, shape);
    }
  }
  const live = document.getElementById('live');
  const status = document.getElementById('refresh-status');
  if (!live) return;
  let last = live.innerHTML;
  localTimes(live);
  async function refresh() {
    try {
      const r = await fetch('/inbox/live', { credentials: 'same-origin', headers: { accept: 'text/html' } });
      if (r.status === 401) { location.assign('/inbox'); return; }
      if (!r.ok) return;
      const html = await r.text();
      const active = document.activeElement;
      // Never swapped under the operator: not while a control has focus, nor while an edit box is open.
      const editing = live.querySelector('details[open] textarea[data-edit]') !== null;
      const busy = (active && live.contains(active) && active.tagName !== 'BODY') || editing;
      if (html !== last && !busy) { live.innerHTML = html; last = html; localTimes(live); }
      if (status) status.textContent = html !== last && busy ? 'Paused while you edit: close the edit box to see the newest requests' : 'Updated ' + new Date().toLocaleTimeString();
    } catch (e) { if (status) status.textContent = 'Offline: retrying'; }
  }
  setInterval(refresh, 2000);
})();
`;

/** Registers `/inbox` on `app`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function mountInbox(app: Hono<any>, options: InboxOptions): void {
  const { control, auth } = options;
  const store = control.store;
  const secret = options.sessionSecret ?? randomToken();
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

  let chain: { at: number; report: Promise<ChainReport> } | null = null;
  const chainState = (): Promise<ChainReport> => {
    if (chain === null || Date.now() - chain.at > 30_000) {
      // A failed walk is not kept: the next refresh tries again.
      const report = options.verify().catch((err: unknown) => {
        chain = null;
        throw err;
      });
      chain = { at: Date.now(), report };
    }
    return chain.report;
  };

  let anchored: { at: number; report: Promise<AnchorReport> } | null = null;
  const anchorState = (): Promise<AnchorReport> | null => {
    const verifyAnchors = options.anchors;
    if (!verifyAnchors) return null;
    if (anchored === null || Date.now() - anchored.at > 30_000) {
      const report = verifyAnchors().catch((err: unknown) => {
        anchored = null;
        throw err;
      });
      anchored = { at: Date.now(), report };
    }
    return anchored.report;
  };

  const ruleFor = (record: ApprovalRecord): string => {
    const { action } = record.request;
    const evaluation = control.policy.evaluate(action.name, action.canonicalArguments);
    const index = /^rule\[(\d+)\]$/.exec(evaluation.reason);
    const rules = control.policy.rules(action.name) ?? [];
    const rule = index ? rules[Number(index[1])] : undefined;
    const conditions = rule?.conditions.map((cond) => `${cond.key} ${canonicalJson(cond.operand)}`).join(', ');
    const changed = record.request.policyHash !== control.policyHash ? ' (the policy has changed since this request was made)' : '';
    return `${evaluation.reason}${conditions ? `: ${conditions}` : ''} → ${evaluation.decision}${changed}`;
  };

  const approvalHtml = (record: ApprovalRecord, csrf: string): string => {
    const { request } = record;
    const { action } = request;
    const id = esc(request.requestId);
    return `<article aria-labelledby="apr-${id}">
<h3 id="apr-${id}">${esc(action.name)} <span class="note">(${id})</span></h3>
<dl>
<dt>Asked by</dt><dd>${esc(action.principal.agent)}${action.principal.user ? ` for ${esc(action.principal.user)}` : ''}</dd>
<dt>Asked at</dt><dd>${timeHtml(request.createdAt)} (expires ${timeHtml(request.expiresAt)})</dd>
<dt>Rule</dt><dd>${esc(ruleFor(record))}</dd>
<dt>Resource</dt><dd>${esc(action.resource ?? 'none')}</dd>
<dt>Action hash</dt><dd><code>${esc(request.actionHash)}</code></dd>${
      approvalProgress(record) === null ? '' : `\n<dt>Approvals</dt><dd data-progress>${esc(approvalProgress(record)!)}</dd>`
    }
</dl>
<p><strong>Arguments, exactly as hashed</strong></p>
<pre data-arguments>${esc(canonicalJson(action.canonicalArguments))}</pre>
<details><summary>The whole hashed text</summary><pre>${esc(action.canonical)}</pre></details>
<form class="inline" method="post" action="/inbox/approvals/${encodeURIComponent(request.requestId)}/grant"><input type="hidden" name="csrf" value="${esc(csrf)}"><button class="primary" type="submit" aria-label="Approve ${esc(action.name)} ${id}">Approve</button></form>
<form class="inline" method="post" action="/inbox/approvals/${encodeURIComponent(request.requestId)}/deny"><input type="hidden" name="csrf" value="${esc(csrf)}"><button class="danger" type="submit" aria-label="Deny ${esc(action.name)} ${id}">Deny</button></form>
<details><summary>Edit and approve</summary>
<form method="post" action="/inbox/approvals/${encodeURIComponent(request.requestId)}/edit"><input type="hidden" name="csrf" value="${esc(csrf)}">
<label for="edit-${id}">Arguments to approve instead (JSON)</label>
<textarea id="edit-${id}" name="arguments" rows="6" spellcheck="false" data-edit>${esc(canonicalJson(action.canonicalArguments))}</textarea>
<p><button type="submit" aria-label="Review the edit of ${esc(action.name)} ${id}">Review the edit</button></p>
</form>
</details>
</article>`;
  };

  /** The edited arguments a form carries (`arguments`, JSON text), or why they are not arguments. */
  const editedArguments = (form: Record<string, string>): { args: JsonObject } | { error: string } => {
    const text = form['arguments'];
    if (typeof text !== 'string' || text.trim() === '') return { error: 'send the edited arguments as a JSON object' };
    try {
      const value = parseJson(text, { what: 'the edited arguments' });
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return { error: 'the edited arguments must be a JSON object' };
      canonicalJson(value);
      return { args: value as JsonObject };
    } catch (err) {
      if (err instanceof InvalidArgument) return { error: err.message };
      throw err;
    }
  };

  /** Proposed and edited arguments, key by key: what the human confirms. Every value escaped. */
  const diffHtml = (proposed: JsonObject, edited: JsonObject): string => {
    const has = (o: JsonObject, k: string) => Object.prototype.hasOwnProperty.call(o, k);
    const keys = [...new Set([...Object.keys(proposed), ...Object.keys(edited)])].sort();
    const rows = keys.map((k) => {
      const before = has(proposed, k) ? canonicalJson(proposed[k]) : null;
      const after = has(edited, k) ? canonicalJson(edited[k]) : null;
      const change = before === after ? 'same' : before === null ? 'added' : after === null ? 'removed' : 'changed';
      return `<tr data-change="${change}"><th scope="row"><code>${esc(JSON.stringify(k))}</code></th><td><code>${before === null ? '<em>absent</em>' : esc(before)}</code></td><td><code>${after === null ? '<em>absent</em>' : esc(after)}</code></td><td>${change}</td></tr>`;
    });
    return `<table data-diff><thead><tr><th scope="col">Argument</th><th scope="col">Proposed</th><th scope="col">Edited</th><th scope="col"></th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
  };

  /** The review page of an edit: the diff, what the policy says of it, and the confirming form. */
  const editReview = (s: Session, record: ApprovalRecord, edited: JsonObject): Response => {
    const { request } = record;
    const { action } = request;
    const id = esc(request.requestId);
    const text = canonicalJson(edited);
    return page(
      'ctrlrun inbox: review the edit',
      `<header><h1>ctrlrun inbox</h1></header>
<main>
<h2>Edit and approve ${esc(action.name)} <span class="note">(${id})</span></h2>
<p>Proposed by ${esc(action.principal.agent)}${action.principal.user ? ` for ${esc(action.principal.user)}` : ''}. You approve the edited arguments, not the proposed ones: the proposed request is denied and the edit is granted under a new request id.</p>
${diffHtml(action.canonicalArguments, edited)}
<p><strong>Edited arguments, exactly as they will be hashed</strong></p>
<pre data-edited>${esc(text)}</pre>
<p>Policy: ${esc(explainDecision(control.policy, action.name, edited))}</p>
<form class="inline" method="post" action="/inbox/approvals/${encodeURIComponent(request.requestId)}/edit/confirm"><input type="hidden" name="csrf" value="${esc(s.csrf)}"><input type="hidden" name="arguments" value="${esc(text)}"><button class="primary" type="submit" aria-label="Approve the edited ${esc(action.name)} ${id}">Approve the edit</button></form>
<p><a href="/inbox">Back to the inbox</a> (nothing is answered)</p>
</main>`,
    );
  };

  const effectHtml = (record: EffectRecord, csrf: string): string => {
    const key = esc(record.effectKey);
    const action = `/inbox/effects/${encodeURIComponent(record.effectKey)}/resolve`;
    return `<article aria-label="Ambiguous effect ${key}">
<h3>${key}</h3>
<dl>
<dt>Action</dt><dd>${esc(record.actionId)} (attempt ${esc(record.attempt)})</dd>
<dt>Since</dt><dd>${record.updatedAt === null ? 'not recorded' : timeHtml(record.updatedAt)}</dd>
<dt>Error</dt><dd>${esc(record.error ?? 'none recorded')}</dd>
</dl>
<p class="note">Check with the upstream whether it acted, then record what happened.</p>
<form class="inline" method="post" action="${action}"><input type="hidden" name="csrf" value="${esc(csrf)}"><input type="hidden" name="state" value="committed"><button type="submit" aria-label="It happened: resolve ${key} as committed">It happened (committed)</button></form>
<form class="inline" method="post" action="${action}"><input type="hidden" name="csrf" value="${esc(csrf)}"><input type="hidden" name="state" value="failed"><button type="submit" aria-label="It did not happen: resolve ${key} as failed">It did not happen (failed)</button></form>
</article>`;
  };

  const liveHtml = async (s: Session): Promise<string> => {
    const [pending, ambiguous, report, anchors] = await Promise.all([
      store.approvalsPage({ status: 'pending', after: null, limit: SHOWN + 1 }),
      store.listEffects('ambiguous'),
      chainState(),
      anchorState(),
    ]);
    const now = new Date().toISOString();
    const open = pending.filter((r) => r.request.expiresAt > now);
    return `<section aria-labelledby="pending-h">
<h2 id="pending-h">Pending approvals (${open.length > SHOWN ? `${SHOWN}+` : open.length})</h2>
${
  open.length === 0
    ? '<p class="note">Nothing is waiting for you.</p>'
    : open
        .slice(0, SHOWN)
        .map((r) => approvalHtml(r, s.csrf))
        .join('\n')
}
</section>
<section aria-labelledby="ambiguous-h">
<h2 id="ambiguous-h">Ambiguous effects (${ambiguous.length})</h2>
${
  ambiguous.length === 0
    ? '<p class="note">No effect is waiting to be resolved.</p>'
    : ambiguous
        .slice(0, SHOWN)
        .map((r) => effectHtml(r, s.csrf))
        .join('\n')
}
</section>
<section aria-labelledby="chain-h">
<h2 id="chain-h">Receipt chain</h2>
${
  report.ok
    ? `<p class="ok" data-chain="ok">Verified: ${esc(report.verified)} receipts, no break.</p>`
    : `<p class="bad" data-chain="broken">Broken: ${esc(report.breaks.length)} break(s): ${esc(
        report.breaks
          .slice(0, 5)
          .map((b) => `${b.name} at seq ${String(b.seq)}`)
          .join('; '),
      )}</p>`
}
${anchors === null ? '' : anchorsHtml(anchors)}
</section>`;
  };

  const inbox = async (s: Session, flash: string | null): Promise<Response> =>
    page(
      'ctrlrun inbox',
      `<header><h1>ctrlrun inbox</h1><div><span class="note" style="color:#fff">${esc(s.operator)}</span>
<form class="inline" method="post" action="/inbox/logout"><input type="hidden" name="csrf" value="${esc(s.csrf)}"><button type="submit">Sign out</button></form></div></header>
<main>
${flash ? `<p class="flash" role="status">${esc(flash)}</p>` : ''}
<p class="note" id="refresh-status" aria-live="polite">Live: refreshes on its own.</p>
<div id="live">${await liveHtml(s)}</div>
</main>
<script src="/inbox/inbox.js"></script>`,
    );

  const FLASH: Record<string, string> = {
    granted: 'Approved: the agent may now run it, once.',
    edited: "Approved with your edit: the agent's call now runs the edited arguments, once.",
    denied: 'Denied.',
    resolved: 'Resolved.',
  };

  app.get('/inbox', async (c) => {
    const s = await session(c);
    if (s === null) return loginPage(null);
    return inbox(s, FLASH[c.req.query('done') ?? ''] ?? null);
  });

  app.get('/inbox/inbox.js', () => new Response(SCRIPT, { headers: { 'content-type': 'text/javascript; charset=utf-8' } }));

  app.get('/inbox/live', async (c) => {
    const s = await session(c);
    if (s === null) return new Response('sign in', { status: 401, headers: { 'content-type': 'text/plain' } });
    // A fragment of the page: the page's own headers (no framing, no sniffing, not cached: it holds the CSRF token).
    return new Response(await liveHtml(s), {
      headers: {
        'content-type': 'text/html; charset=utf-8',
        'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
        'x-frame-options': 'DENY',
        'x-content-type-options': 'nosniff',
        'cache-control': 'no-store',
        'referrer-policy': 'no-referrer',
      },
    });
  });

  app.post('/inbox/login', async (c) => {
    const body = await readForm(c.req.raw);
    if (typeof body === 'string') return formRefusal(body);
    const token = (body['token'] ?? '').trim();
    if (token === '' || !/^[A-Za-z0-9\-._~+/]+=*$/.test(token)) return loginPage('Enter the operator credential.', 401);
    const identity = await operatorOf(token);
    if ('refused' in identity) {
      return identity.refused === 'agent'
        ? loginPage('That is an agent credential: only an operator can open the inbox.', 403)
        : loginPage('That credential is not valid.', 401);
    }
    return new Response(null, {
      status: 303,
      headers: { location: '/inbox', 'set-cookie': cookie(c, await issue(identity.operator, token), SESSION_MS / 1000), 'cache-control': 'no-store' },
    });
  });

  app.post('/inbox/logout', async (c) => {
    const checked = await checkedPost(c);
    if (checked instanceof Response) return checked;
    await endSession(checked.session);
    return new Response(null, { status: 303, headers: { location: '/inbox', 'set-cookie': cookie(c, '', 0) } });
  });

  const answer = (verb: 'grant' | 'deny') =>
    app.post(`/inbox/approvals/:id/${verb}`, async (c) => {
      const checked = await checkedPost(c);
      if (checked instanceof Response) return checked;
      const id = c.req.param('id');
      const as = checked.session.verified === undefined ? {} : { verified: checked.session.verified };
      try {
        if (verb === 'grant') await control.grantApproval(id, { approver: checked.session.operator, ...as });
        else await control.denyApproval(id, { approver: checked.session.operator, ...as });
      } catch (err) {
        if (!(err instanceof ApprovalMismatch)) throw err;
        if (err.counted) {
          const record = await store.getApproval(id);
          return inbox(
            checked.session,
            `Your approval is recorded: ${record === null ? 'the request' : (approvalProgress(record) ?? 'it')} so far; it runs once enough people approve.`,
          );
        }
        return inbox(checked.session, `Not ${verb === 'grant' ? 'approved' : 'denied'}: ${err.message}`);
      }
      return new Response(null, { status: 303, headers: { location: `/inbox?done=${verb === 'grant' ? 'granted' : 'denied'}` } });
    });
  answer('grant');
  answer('deny');

  // Edit and approve: review first (nothing written), then confirm (the kernel decides and writes).
  app.post('/inbox/approvals/:id/edit', async (c) => {
    const checked = await checkedPost(c);
    if (checked instanceof Response) return checked;
    const id = c.req.param('id');
    const record = await store.getApproval(id);
    if (record === null || record.status !== 'pending')
      return inbox(checked.session, `Not approved: approval request ${id} is ${record === null ? 'unknown' : record.status}, not pending.`);
    const edited = editedArguments(checked.form);
    if ('error' in edited) return inbox(checked.session, `Not approved: ${edited.error}`);
    return editReview(checked.session, record, edited.args);
  });

  app.post('/inbox/approvals/:id/edit/confirm', async (c) => {
    const checked = await checkedPost(c);
    if (checked instanceof Response) return checked;
    const id = c.req.param('id');
    const edited = editedArguments(checked.form);
    if ('error' in edited) return inbox(checked.session, `Not approved: ${edited.error}`);
    let granted: string;
    try {
      const as = checked.session.verified === undefined ? {} : { verified: checked.session.verified };
      granted = (await control.grantApproval(id, { approver: checked.session.operator, via: 'inbox', edit: { arguments: edited.args }, ...as })).approvalId;
    } catch (err) {
      if (!(err instanceof ApprovalMismatch || err instanceof ActionDenied || err instanceof InvalidArgument)) throw err;
      return inbox(checked.session, `Not approved: ${err.message}`);
    }
    // Arguments equal to the proposed ones are a plain grant of the same request.
    return new Response(null, { status: 303, headers: { location: `/inbox?done=${granted === id ? 'granted' : 'edited'}` } });
  });

  app.post('/inbox/effects/:key/resolve', async (c) => {
    const checked = await checkedPost(c);
    if (checked instanceof Response) return checked;
    const key = c.req.param('key');
    const state = checked.form['state'];
    if (state !== 'committed' && state !== 'failed') return inbox(checked.session, 'Not resolved: choose committed or failed.');
    const before = await store.getEffect(key);
    if (before === null || before.state !== 'ambiguous')
      return inbox(checked.session, `Not resolved: ${key} is ${before === null ? 'unknown' : before.state}, not ambiguous.`);
    await control.resolveEffect(key, state, { by: checked.session.operator });
    return new Response(null, { status: 303, headers: { location: '/inbox?done=resolved' } });
  });
}
