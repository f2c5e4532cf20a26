/**
 * What the inbox shows: each pending request with the exact canonical arguments that were hashed
 * (every key, `__proto__` included), the action hash, the policy rule that asked for a human, who
 * asked and when; AMBIGUOUS effects with their resolve forms; whether the receipt chain (and its
 * anchors) verify; and an edit's review: the proposed and the edited arguments side by side, key
 * by key, with what the policy says of the edit. Every agent-controlled text goes through `esc`.
 *
 * @module
 */
import {
  approvalProgress,
  canonicalJson,
  explainDecision,
  InvalidArgument,
  parseJson,
  type AnchorReport,
  type ApprovalRecord,
  type ChainReport,
  type Control,
  type EffectRecord,
  type JsonObject,
  type StateStore,
} from '@ctrlrun/kernel';
import { esc, page, timeHtml } from './page.js';
import type { Session } from './session.js';

/** What one page shows at most of each list. */
const SHOWN = 200;
/** Pending rows read at most to find the unexpired ones to show (an expired request stays `pending` until something touches it). */
const PENDING_SCANNED = 10_000;

/**
 * The oldest unexpired pending requests, up to `SHOWN + 1`, read page by page past the expired
 * ones: an agent's requests that expired unanswered (each credential may keep 100 waiting, and
 * they expire in minutes) would otherwise fill the first page and hide every request behind
 * them. `more` when the scan stopped at {@link PENDING_SCANNED} rows.
 */
async function openRequests(store: StateStore, now: string): Promise<{ open: ApprovalRecord[]; skipped: number; more: boolean }> {
  const open: ApprovalRecord[] = [];
  let skipped = 0;
  let scanned = 0;
  for (let after: { createdAt: string; requestId: string } | null = null; ;) {
    const page = await store.approvalsPage({ status: 'pending', after, limit: SHOWN + 1 });
    scanned += page.length;
    for (const r of page) {
      if (r.request.expiresAt > now) open.push(r);
      else skipped++;
    }
    if (open.length > SHOWN || page.length < SHOWN + 1) return { open, skipped, more: false };
    if (scanned >= PENDING_SCANNED) return { open, skipped, more: true };
    const end = page[page.length - 1]!;
    after = { createdAt: end.request.createdAt, requestId: end.request.requestId };
  }
}

/** The newest AMBIGUOUS effects, up to `SHOWN + 1`, oldest of them first: a flood of older ones cannot hide the latest. */
async function newestAmbiguous(store: StateStore): Promise<EffectRecord[]> {
  if (store.effectsPage) return store.effectsPage({ state: 'ambiguous', newest: true, limit: SHOWN + 1 });
  return (await store.listEffects('ambiguous')).slice(-(SHOWN + 1));
}

/** The verdicts the inbox shows, each kept a while (the chain walk reads every row). */
export interface InboxReports {
  chain(): Promise<ChainReport>;
  /** `null`: no anchor provider. */
  anchors(): Promise<AnchorReport> | null;
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

/** The policy rule that asked for a human, with its conditions, as the request's card names it. */
function ruleFor(control: Control, record: ApprovalRecord): string {
  const { action } = record.request;
  const evaluation = control.policy.evaluate(action.name, action.canonicalArguments);
  const index = /^rule\[(\d+)\]$/.exec(evaluation.reason);
  const rules = control.policy.rules(action.name) ?? [];
  const rule = index ? rules[Number(index[1])] : undefined;
  const conditions = rule?.conditions.map((cond) => `${cond.key} ${canonicalJson(cond.operand)}`).join(', ');
  const changed = record.request.policyHash !== control.policyHash ? ' (the policy has changed since this request was made)' : '';
  return `${evaluation.reason}${conditions ? `: ${conditions}` : ''} → ${evaluation.decision}${changed}`;
}

/** One pending request's card: every hashed field, the rule, and its approve, deny and edit forms. */
function approvalHtml(control: Control, record: ApprovalRecord, csrf: string): string {
  const { request } = record;
  const { action } = request;
  const id = esc(request.requestId);
  return `<article aria-labelledby="apr-${id}">
<h3 id="apr-${id}">${esc(action.name)} <span class="note">(${id})</span></h3>
<dl>
<dt>Asked by</dt><dd>${esc(action.principal.agent)}${action.principal.user ? ` for ${esc(action.principal.user)}` : ''}</dd>
<dt>Asked at</dt><dd>${timeHtml(request.createdAt)} (expires ${timeHtml(request.expiresAt)})</dd>
<dt>Rule</dt><dd>${esc(ruleFor(control, record))}</dd>
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
}

/** The edited arguments a form carries (`arguments`, JSON text), or why they are not arguments. */
export function editedArguments(form: Record<string, string>): { args: JsonObject } | { error: string } {
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
}

/** Proposed and edited arguments, key by key: what the human confirms. Every value escaped. */
function diffHtml(proposed: JsonObject, edited: JsonObject): string {
  const has = (o: JsonObject, k: string) => Object.prototype.hasOwnProperty.call(o, k);
  const keys = [...new Set([...Object.keys(proposed), ...Object.keys(edited)])].sort();
  const rows = keys.map((k) => {
    const before = has(proposed, k) ? canonicalJson(proposed[k]) : null;
    const after = has(edited, k) ? canonicalJson(edited[k]) : null;
    const change = before === after ? 'same' : before === null ? 'added' : after === null ? 'removed' : 'changed';
    return `<tr data-change="${change}"><th scope="row"><code>${esc(JSON.stringify(k))}</code></th><td><code>${before === null ? '<em>absent</em>' : esc(before)}</code></td><td><code>${after === null ? '<em>absent</em>' : esc(after)}</code></td><td>${change}</td></tr>`;
  });
  return `<table data-diff><thead><tr><th scope="col">Argument</th><th scope="col">Proposed</th><th scope="col">Edited</th><th scope="col"></th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

/** The review page of an edit: the diff, what the policy says of it, and the confirming form. */
export function editReview(control: Control, s: Session, record: ApprovalRecord, edited: JsonObject): Response {
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
}

/** One AMBIGUOUS effect's card, with its two resolve forms. */
function effectHtml(record: EffectRecord, csrf: string): string {
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
}

/** The live region: pending requests, AMBIGUOUS effects, the chain's and the anchors' verdicts. */
export async function liveHtml(control: Control, reports: InboxReports, s: Session): Promise<string> {
  const { store } = control;
  const now = new Date().toISOString();
  const [{ open, skipped, more }, ambiguous, report, anchors] = await Promise.all([
    openRequests(store, now),
    newestAmbiguous(store),
    reports.chain(),
    reports.anchors(),
  ]);
  const expiredNote =
    skipped === 0
      ? ''
      : `<p class="note">${esc(skipped)} request(s) expired unanswered${more ? `; only the oldest ${esc(PENDING_SCANNED)} pending rows were read, and more may be waiting: GET /v1/approvals?status=pending lists them all` : ''}.</p>\n`;
  return `<section aria-labelledby="pending-h">
<h2 id="pending-h">Pending approvals (${open.length > SHOWN ? `${SHOWN}+` : open.length})</h2>
${expiredNote}${
    open.length === 0
      ? '<p class="note">Nothing is waiting for you.</p>'
      : open
          .slice(0, SHOWN)
          .map((r) => approvalHtml(control, r, s.csrf))
          .join('\n')
  }
</section>
<section aria-labelledby="ambiguous-h">
<h2 id="ambiguous-h">Ambiguous effects (${ambiguous.length > SHOWN ? `${SHOWN}+` : ambiguous.length})</h2>
${ambiguous.length > SHOWN ? `<p class="note">The newest ${SHOWN} are shown; ctrlrun effects --state ambiguous --all lists every one.</p>\n` : ''}${
    ambiguous.length === 0
      ? '<p class="note">No effect is waiting to be resolved.</p>'
      : ambiguous
          .slice(-SHOWN)
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
}

/** The whole inbox page for `s`, with `flash` (what was just done, or why not) on top. */
export async function inboxPage(control: Control, reports: InboxReports, s: Session, flash: string | null): Promise<Response> {
  return page(
    'ctrlrun inbox',
    `<header><h1>ctrlrun inbox</h1><div><span class="note" style="color:#fff">${esc(s.operator)}</span>
<form class="inline" method="post" action="/inbox/logout"><input type="hidden" name="csrf" value="${esc(s.csrf)}"><button type="submit">Sign out</button></form></div></header>
<main>
${flash ? `<p class="flash" role="status">${esc(flash)}</p>` : ''}
<p class="note" id="refresh-status" aria-live="polite">Live: refreshes on its own.</p>
<div id="live">${await liveHtml(control, reports, s)}</div>
</main>
<script src="/inbox/inbox.js"></script>`,
  );
}
