/**
 * Edit-then-approve over HTTP (through `app.request`): `POST /v1/approvals/:id/grant` with
 * `{ "edit": { "arguments": … } }`, and the inbox's "Edit and approve" (review with the diff, then
 * confirm), both under the same checks as a plain grant (operator credential; session + CSRF).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ApprovalRequired, canonicalJson, createAction, parseJson, type JsonObject } from '@ctrlrun/kernel';
import { AGENT, harness, OPERATOR, POLICY, type Harness } from './harness.js';

async function ask(h: Harness, args: Record<string, unknown> | string) {
  const body = typeof args === 'string' ? args : JSON.stringify({ name: 'stripe.refund', arguments: args });
  const r = await h.call('POST', '/v1/actions', AGENT, body);
  expect(r.status).toBe(202);
  return String(r.json['requestId']);
}

async function signedIn(h: Harness): Promise<{ cookie: string; csrf: string; html: string }> {
  const r = await h.app.request('http://inbox.test/inbox/login', { method: 'POST', body: new URLSearchParams({ token: OPERATOR }) });
  const cookie = r.headers.get('set-cookie')!.split(';')[0]!;
  const html = await (await h.app.request('http://inbox.test/inbox', { headers: { cookie } })).text();
  return { cookie, csrf: /name="csrf" value="([^"]+)"/.exec(html)![1]!, html };
}

const post = (h: Harness, path: string, cookie: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
  h.app.request(`http://inbox.test${path}`, { method: 'POST', headers: { cookie, ...headers }, body: new URLSearchParams(form) });

/** The text of an HTML attribute or element as the browser would decode it. */
const unescape = (html: string) => html.replace(/&#(\d+);/g, (_m, n: string) => String.fromCharCode(Number(n)));

describe('POST /v1/approvals/:id/grant with an edit', () => {
  it("grants the edited arguments under a new request id; the agent's retry of the original runs the edit once", async () => {
    const h = await harness();
    const id = await ask(h, { payment_id: 'e1', amount: 500000 });
    const r = await h.call('POST', `/v1/approvals/${id}/grant`, OPERATOR, { edit: { arguments: { payment_id: 'e1', amount: 400000 } } });
    expect(r.status).toBe(200);
    const approval = r.json['approval'] as Record<string, unknown>;
    expect(approval['editedFrom']).toBe(id);
    expect(approval['approvalId']).not.toBe(id);
    expect(r.json['edit']).toMatchObject({
      proposed: id,
      approved: approval['approvalId'],
      editor: 'human:ops',
      proposedArguments: { amount: 500000, payment_id: 'e1' },
      approvedArguments: { amount: 400000, payment_id: 'e1' },
    });
    expect((await h.store.getApproval(id))?.status).toBe('denied');
    const run = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'e1', amount: 500000 }, approvalId: id });
    expect(run.status).toBe(200);
    expect(JSON.stringify(run.json)).toContain('400000');
    expect(h.calls).toEqual(['refund e1']);
    const again = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'e1', amount: 500000 }, approvalId: id });
    expect(again.status).toBe(409);
    expect(h.calls).toHaveLength(1);
  });

  it("an edit the policy denies is 403 with the rule's sentence, and the request stays pending", async () => {
    const h = await harness();
    const id = await ask(h, { payment_id: 'e2', amount: 500000 });
    const before = await h.counts();
    const r = await h.call('POST', `/v1/approvals/${id}/grant`, OPERATOR, { edit: { arguments: { payment_id: 'e2', amount: 5000000 } } });
    expect(r.status).toBe(403);
    expect((r.json['error'] as Record<string, unknown>)['code']).toBe('ERR_ACTION_DENIED');
    expect(String((r.json['error'] as Record<string, unknown>)['message'])).toContain('amount 5000000');
    expect(await h.counts()).toEqual(before);
    expect((await h.store.getApproval(id))?.status).toBe('pending');
  });

  it('a malformed edit is 400 naming its path; an agent credential is 403; an unknown request is 404', async () => {
    const h = await harness();
    const id = await ask(h, { payment_id: 'e3', amount: 500000 });
    const cases: [unknown, string][] = [
      [{ edit: { arguments: [] } }, '$.edit.arguments'],
      [{ edit: [] }, '$.edit'],
      [{ edit: { arguments: {}, extra: 1 } }, '$.edit["extra"]'],
      [{ other: 1 }, '$["other"]'],
      ['{"edit":{"arguments":{"amount":1.5}}}', '$.edit.arguments.amount'],
    ];
    for (const [body, path] of cases) {
      const r = await h.call('POST', `/v1/approvals/${id}/grant`, OPERATOR, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect((r.json['error'] as Record<string, unknown>)['path'], JSON.stringify(body)).toBe(path);
    }
    const bad = await h.call('POST', `/v1/approvals/${id}/grant`, OPERATOR, { edit: { arguments: { data_scope: 'x' } } });
    expect(bad.status).toBe(400);
    expect(String((bad.json['error'] as Record<string, unknown>)['message'])).toContain('data_scope');
    expect((await h.call('POST', `/v1/approvals/${id}/grant`, AGENT, { edit: { arguments: { payment_id: 'e3', amount: 1 } } })).status).toBe(403);
    expect((await h.call('POST', '/v1/approvals/apr_nope/grant', OPERATOR, { edit: { arguments: { amount: 1 } } })).status).toBe(404);
    expect((await h.store.getApproval(id))?.status).toBe('pending');
    // Without a body, or with {}, it is the plain grant it always was.
    expect((await h.call('POST', `/v1/approvals/${id}/grant`, OPERATOR, {})).json['approval']).toMatchObject({ approvalId: id, status: 'granted' });
  });
});

describe("the inbox's Edit and approve", () => {
  it('prefills the proposed arguments (with __proto__ and an invisible character, exactly), shows the diff, then approves on confirmation', async () => {
    const h = await harness();
    const id = await ask(h, '{"name":"stripe.refund","arguments":{"payment_id":"in_\u202e1","amount":200000,"__proto__":"x"}}');
    const { cookie, csrf, html } = await signedIn(h);
    const prefill = /<textarea[^>]*data-edit>([^<]*)<\/textarea>/.exec(html)![1]!;
    // Escaped for the eye, and still the same JSON value.
    expect(prefill).toContain('\\u202e');
    expect(JSON.parse(unescape(prefill))).toEqual(JSON.parse('{"__proto__":"x","amount":200000,"payment_id":"in_\u202e1"}'));

    const edited = '{"payment_id":"in_\u202e1","amount":150000,"__proto__":"x","note":"<b>hi</b>"}';
    const review = await post(h, `/inbox/approvals/${id}/edit`, cookie, { csrf, arguments: edited });
    expect(review.status).toBe(200);
    const page = await review.text();
    expect(page).toContain('data-diff');
    expect(page).toMatch(
      /<tr data-change="changed"><th scope="row"><code>&#34;amount&#34;<\/code><\/th><td><code>200000<\/code><\/td><td><code>150000<\/code><\/td>/,
    );
    expect(page).toContain('data-change="added"');
    expect(page).not.toContain('<b>hi</b>');
    expect(page).not.toContain('\u202e');
    expect(page).toContain('needs a human');
    // Reviewing writes nothing.
    expect((await h.store.getApproval(id))?.status).toBe('pending');

    const hidden = unescape(/name="arguments" value="([^"]*)"/.exec(page)![1]!);
    const confirmed = await post(h, `/inbox/approvals/${id}/edit/confirm`, cookie, { csrf, arguments: hidden });
    expect(confirmed.status).toBe(303);
    expect(confirmed.headers.get('location')).toBe('/inbox?done=edited');
    expect((await h.store.getApproval(id))?.status).toBe('denied');
    const edit = await h.control.approvalEdit(id);
    expect(edit?.editor).toBe('human:ops');
    expect(edit?.approvedArguments).toEqual(JSON.parse(edited));
  });

  it('keeps the CSRF and origin checks; a denied or malformed edit is refused on the page and answers nothing', async () => {
    const h = await harness();
    const id = await ask(h, { payment_id: 'in_2', amount: 200000 });
    const { cookie, csrf } = await signedIn(h);
    const args = JSON.stringify({ payment_id: 'in_2', amount: 150000 });
    for (const path of [`/inbox/approvals/${id}/edit`, `/inbox/approvals/${id}/edit/confirm`]) {
      expect((await post(h, path, cookie, { arguments: args })).status).toBe(403);
      expect((await post(h, path, cookie, { csrf: 'wrong', arguments: args })).status).toBe(403);
      expect((await post(h, path, cookie, { csrf, arguments: args }, { origin: 'https://evil.test' })).status).toBe(403);
      expect((await post(h, path, '', { csrf, arguments: args })).status).toBe(401);
    }
    const denied = await post(h, `/inbox/approvals/${id}/edit/confirm`, cookie, { csrf, arguments: JSON.stringify({ payment_id: 'in_2', amount: 9000000 }) });
    expect(await denied.text()).toMatch(/Not approved: the edit of approval request .* is refused: denied: .*amount 9000000/);
    const malformed = await post(h, `/inbox/approvals/${id}/edit`, cookie, { csrf, arguments: '[1]' });
    expect(await malformed.text()).toContain('Not approved: the edited arguments must be a JSON object');
    const float = await post(h, `/inbox/approvals/${id}/edit/confirm`, cookie, { csrf, arguments: '{"amount": 1.5}' });
    expect(await float.text()).toContain('Not approved:');
    expect((await h.store.getApproval(id))?.status).toBe('pending');
  });
});

describe("the inbox's Edit and approve: property", () => {
  const key = fc.oneof(
    fc.constantFrom('__proto__', 'constructor', 'a\u0000b', '\u202e', '\u200b', 'x\u2028y', '</textarea>', '&amp;', '"'),
    fc.string({ maxLength: 6 }),
  );
  const value = fc.oneof(
    fc.string({ maxLength: 10 }),
    fc.constantFrom('\u001b[2J', '\u202eevil', '</textarea><script>', '&#34;'),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
  );
  const args = fc
    .dictionary(key, fc.oneof(value, fc.array(value, { maxLength: 3 }), fc.dictionary(key, value, { maxKeys: 2 })), { maxKeys: 5 })
    .filter((a) => !Object.prototype.hasOwnProperty.call(a, 'data_scope'));

  it('what the page prefills, what the review posts back and what is granted are exactly the arguments as hashed', async () => {
    const h = await harness(
      {},
      `${POLICY}  edit.me:
    decision: approve
`,
    );
    const { cookie, csrf } = await signedIn(h);
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(args, args, async (proposed, edited) => {
        // A principal of its own per run: one request per action would otherwise re-find an earlier run's.
        const principal = { agent: 'billing-agent', user: `u-${++runs}` };
        const action = createAction({ name: 'edit.me', arguments: proposed, principal });
        const id = ((await h.control.execute(action, () => null, { effectKey: null }).catch((e: unknown) => e)) as ApprovalRequired).requestId;
        const html = await (await h.app.request('http://inbox.test/inbox', { headers: { cookie } })).text();
        const article = html.slice(html.indexOf(`id="apr-${id}"`));
        const prefill = unescape(/<textarea[^>]*data-edit>([^<]*)<\/textarea>/.exec(article)![1]!);
        expect(prefill).not.toMatch(/[\u0000-\u001f\u202e\u200b\u2028]/);
        expect(canonicalJson(parseJson(prefill))).toBe(canonicalJson(action.canonicalArguments));
        const review = await (await post(h, `/inbox/approvals/${id}/edit`, cookie, { csrf, arguments: JSON.stringify(edited) })).text();
        const hidden = unescape(/name="arguments" value="([^"]*)"/.exec(review)![1]!);
        const want = createAction({ name: 'edit.me', arguments: edited, principal });
        expect(canonicalJson(parseJson(hidden))).toBe(canonicalJson(want.canonicalArguments));
        expect(review).not.toContain('<script>');
        const confirmed = await post(h, `/inbox/approvals/${id}/edit/confirm`, cookie, { csrf, arguments: hidden });
        expect(confirmed.status).toBe(303);
        const grant = await h.control.approvalEdit(id);
        if (want.actionHash === action.actionHash) {
          expect(confirmed.headers.get('location')).toBe('/inbox?done=granted');
          expect(grant).toBeNull();
          expect((await h.store.getApproval(id))?.status).toBe('granted');
        } else {
          expect(confirmed.headers.get('location')).toBe('/inbox?done=edited');
          expect(grant?.approvedHash).toBe(want.actionHash);
          expect(canonicalJson(grant!.approvedArguments as JsonObject)).toBe(canonicalJson(want.canonicalArguments));
        }
      }),
      { numRuns: 25 },
    );
  }, 120_000);
});
