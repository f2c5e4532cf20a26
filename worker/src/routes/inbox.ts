/**
 * The operator inbox at `/inbox`: a small page for the humans who answer approvals (what it shows:
 * `inbox/views.ts`). It grants and denies; it resolves AMBIGUOUS effects; it shows whether the
 * receipt chain verifies. It refreshes itself without a reload (a small script polls
 * `/inbox/live`), and it works on a phone.
 *
 * "Edit and approve" opens a JSON text box prefilled with the proposed arguments; sending it
 * shows the proposed and the edited arguments side by side, key by key, with what the policy says
 * of the edit, and only a second confirmation approves: through `Control.grantApproval`'s `edit`,
 * which decides the edit again (a deny leaves the request pending) and grants it under a new
 * request id.
 *
 * Login takes the operator's credential (the same bearer token the API takes) and sets a signed
 * session cookie carrying the credential encrypted, checked again on every request; "Sign out"
 * ends the session wherever the store is shared (`inbox/session.ts`). Every form post carries the
 * session's CSRF token and must come from the same origin. An agent credential is refused at
 * login and sees nothing. Plain templates, Web-standard globals only (WebCrypto for the signature).
 *
 * @module
 */
import { ActionDenied, ApprovalMismatch, approvalProgress, InvalidArgument, type AnchorReport, type ChainReport, type Control } from '@ctrlrun/kernel';
import type { Authenticator } from '../auth.js';
import type { RouteContext } from './context.js';
import { formRefusal, loginPage, SCRIPT } from './inbox/page.js';
import { createSessions, readForm, SESSION_MS, type Session, type Sessions } from './inbox/session.js';
import { editedArguments, editReview, inboxPage, liveHtml, type InboxReports } from './inbox/views.js';

/** What the inbox needs from the app besides the control path. */
export interface InboxOptions {
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

/** What the inbox's route groups share. */
interface Inbox {
  readonly control: Control;
  readonly sessions: Sessions;
  readonly reports: InboxReports;
  /** The inbox page for `s`, with `flash` on top. */
  show(s: Session, flash: string | null): Promise<Response>;
}

/** How long a verdict is shown before the next refresh asks again. */
const REPORT_MS = 30_000;

/** `report()`, asked at most every {@link REPORT_MS}; a failed answer is not kept (the next refresh tries again). */
function kept<T>(report: () => Promise<T>): () => Promise<T> {
  let last: { at: number; report: Promise<T> } | null = null;
  return () => {
    if (last === null || Date.now() - last.at > REPORT_MS) {
      const pending = report().catch((err: unknown) => {
        last = null;
        throw err;
      });
      last = { at: Date.now(), report: pending };
    }
    return last.report;
  };
}

const FLASH: Record<string, string> = {
  granted: 'Approved: the agent may now run it, once.',
  edited: "Approved with your edit: the agent's call now runs the edited arguments, once.",
  denied: 'Denied.',
  resolved: 'Resolved.',
};

/** `GET /inbox` (the page or the sign-in), its script, and `GET /inbox/live` (the live region). */
function mountPages(ctx: RouteContext, inbox: Inbox): void {
  const { control, sessions, reports, show } = inbox;
  ctx.app.get('/inbox', async (c) => {
    const s = await sessions.session(c);
    if (s === null) return loginPage(null);
    return show(s, FLASH[c.req.query('done') ?? ''] ?? null);
  });

  ctx.app.get('/inbox/inbox.js', () => new Response(SCRIPT, { headers: { 'content-type': 'text/javascript; charset=utf-8' } }));

  ctx.app.get('/inbox/live', async (c) => {
    const s = await sessions.session(c);
    if (s === null) return new Response('sign in', { status: 401, headers: { 'content-type': 'text/plain' } });
    // A fragment of the page: the page's own headers (no framing, no sniffing, not cached: it holds the CSRF token).
    return new Response(await liveHtml(control, reports, s), {
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
}

/** `POST /inbox/login` and `POST /inbox/logout`. */
function mountSignIn(ctx: RouteContext, { sessions }: Inbox): void {
  ctx.app.post('/inbox/login', async (c) => {
    const body = await readForm(c.req.raw);
    if (typeof body === 'string') return formRefusal(body);
    const token = (body['token'] ?? '').trim();
    if (token === '' || !/^[A-Za-z0-9\-._~+/]+=*$/.test(token)) return loginPage('Enter the operator credential.', 401);
    const identity = await sessions.operatorOf(token);
    if ('refused' in identity) {
      return identity.refused === 'agent'
        ? loginPage('That is an agent credential: only an operator can open the inbox.', 403)
        : loginPage('That credential is not valid.', 401);
    }
    return new Response(null, {
      status: 303,
      headers: {
        location: '/inbox',
        'set-cookie': sessions.cookie(c, await sessions.issue(identity.operator, token), SESSION_MS / 1000),
        'cache-control': 'no-store',
      },
    });
  });

  ctx.app.post('/inbox/logout', async (c) => {
    const checked = await sessions.checkedPost(c);
    if (checked instanceof Response) return checked;
    await sessions.endSession(checked.session);
    return new Response(null, { status: 303, headers: { location: '/inbox', 'set-cookie': sessions.cookie(c, '', 0) } });
  });
}

/** `POST /inbox/approvals/:id/grant|deny`. */
function mountAnswers(ctx: RouteContext, { control, sessions, show }: Inbox): void {
  const { store } = control;
  const answer = (verb: 'grant' | 'deny') =>
    ctx.app.post(`/inbox/approvals/:id/${verb}`, async (c) => {
      const checked = await sessions.checkedPost(c);
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
          return show(
            checked.session,
            `Your approval is recorded: ${record === null ? 'the request' : (approvalProgress(record) ?? 'it')} so far; it runs once enough people approve.`,
          );
        }
        return show(checked.session, `Not ${verb === 'grant' ? 'approved' : 'denied'}: ${err.message}`);
      }
      return new Response(null, { status: 303, headers: { location: `/inbox?done=${verb === 'grant' ? 'granted' : 'denied'}` } });
    });
  answer('grant');
  answer('deny');
}

/** Edit and approve: review first (nothing written), then confirm (the kernel decides and writes). */
function mountEdit(ctx: RouteContext, { control, sessions, show }: Inbox): void {
  const { store } = control;
  ctx.app.post('/inbox/approvals/:id/edit', async (c) => {
    const checked = await sessions.checkedPost(c);
    if (checked instanceof Response) return checked;
    const id = c.req.param('id');
    const record = await store.getApproval(id);
    if (record === null || record.status !== 'pending')
      return show(checked.session, `Not approved: approval request ${id} is ${record === null ? 'unknown' : record.status}, not pending.`);
    const edited = editedArguments(checked.form);
    if ('error' in edited) return show(checked.session, `Not approved: ${edited.error}`);
    return editReview(control, checked.session, record, edited.args);
  });

  ctx.app.post('/inbox/approvals/:id/edit/confirm', async (c) => {
    const checked = await sessions.checkedPost(c);
    if (checked instanceof Response) return checked;
    const id = c.req.param('id');
    const edited = editedArguments(checked.form);
    if ('error' in edited) return show(checked.session, `Not approved: ${edited.error}`);
    let granted: string;
    try {
      const as = checked.session.verified === undefined ? {} : { verified: checked.session.verified };
      granted = (await control.grantApproval(id, { approver: checked.session.operator, via: 'inbox', edit: { arguments: edited.args }, ...as })).approvalId;
    } catch (err) {
      if (!(err instanceof ApprovalMismatch || err instanceof ActionDenied || err instanceof InvalidArgument)) throw err;
      return show(checked.session, `Not approved: ${err.message}`);
    }
    // Arguments equal to the proposed ones are a plain grant of the same request.
    return new Response(null, { status: 303, headers: { location: `/inbox?done=${granted === id ? 'granted' : 'edited'}` } });
  });
}

/** `POST /inbox/effects/:key/resolve`: an AMBIGUOUS effect recorded committed or failed. */
function mountResolve(ctx: RouteContext, { control, sessions, show }: Inbox): void {
  const { store } = control;
  ctx.app.post('/inbox/effects/:key/resolve', async (c) => {
    const checked = await sessions.checkedPost(c);
    if (checked instanceof Response) return checked;
    const key = c.req.param('key');
    const state = checked.form['state'];
    if (state !== 'committed' && state !== 'failed') return show(checked.session, 'Not resolved: choose committed or failed.');
    const before = await store.getEffect(key);
    if (before === null || before.state !== 'ambiguous')
      return show(checked.session, `Not resolved: ${key} is ${before === null ? 'unknown' : before.state}, not ambiguous.`);
    await control.resolveEffect(key, state, { by: checked.session.operator });
    return new Response(null, { status: 303, headers: { location: '/inbox?done=resolved' } });
  });
}

/** Registers `/inbox` on the app. */
export function mountInbox(ctx: RouteContext, options: InboxOptions): void {
  const { control } = ctx;
  const sessions = createSessions(options.auth, control.store, options.sessionSecret);
  const anchors = options.anchors ? kept(options.anchors) : null;
  const reports: InboxReports = { chain: kept(() => options.verify()), anchors: () => (anchors === null ? null : anchors()) };
  const inbox: Inbox = { control, sessions, reports, show: (s, flash) => inboxPage(control, reports, s, flash) };
  mountPages(ctx, inbox);
  mountSignIn(ctx, inbox);
  mountAnswers(ctx, inbox);
  mountEdit(ctx, inbox);
  mountResolve(ctx, inbox);
}
