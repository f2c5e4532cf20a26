/**
 * The inbox's HTML: the page frame (its headers: no framing, no sniffing, not cached, a strict
 * content security policy), the sign-in page, the refusals, the escaping every agent-controlled
 * text goes through, times as the inbox shows them, and the small script that refreshes the page.
 *
 * @module
 */
import { showInvisible, viewTime } from '@ctrlrun/kernel';

/** Agent-controlled text as HTML text (or attribute value): markup escaped, invisible characters made visible. */
export function esc(text: unknown): string {
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
export function timeHtml(stored: string): string {
  const exact = viewTime(stored);
  const m = EXACT_TIME.exec(exact);
  if (m === null) return esc(stored);
  return `<time datetime="${exact}" title="${exact}" data-local>${m[1]} ${m[2]} UTC</time>`;
}

/** A whole page: `body` inside the inbox's frame and styles, with the page's own headers. */
export function page(title: string, body: string, status = 200, extraHeaders: Record<string, string> = {}): Response {
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

/** The sign-in page, with `message` as its error (if any). */
export function loginPage(message: string | null, status = 200): Response {
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

/** The answer to a form the inbox does not read: 413 or 415. */
export function formRefusal(reason: 'too_large' | 'unsupported'): Response {
  return reason === 'too_large'
    ? page('Refused', '<main><p class="flash error" role="alert">Refused: the form is too large.</p></main>', 413)
    : page('Refused', '<main><p class="flash error" role="alert">Refused: send the form as application/x-www-form-urlencoded.</p></main>', 415);
}

/** The client script: polls `/inbox/live` and swaps the live region when it changed. */
export const SCRIPT = `(() => {
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
