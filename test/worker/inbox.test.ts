/**
 * The operator inbox over `app.request` (no browser): login with the operator credential sets a
 * session cookie (HttpOnly, SameSite=Strict, Secure only over HTTPS); an agent credential is
 * refused and sees nothing; a post without the session's CSRF token, or from another origin,
 * changes nothing; the page shows every hashed argument (`__proto__` included), the hash, the
 * rule and who asked; approve, deny and resolve go through the kernel.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ApprovalRequired, Control, createAction, loadPolicy, viewTime, type StateStore } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { createApp, staticTokens } from '../../worker/src/index.js';
import { AGENT, harness, OPERATOR, POLICY, testExecutors, type Harness } from './harness.js';

async function login(h: Harness, token: string, base = 'http://inbox.test'): Promise<Response> {
  return h.app.request(`${base}/inbox/login`, { method: 'POST', body: new URLSearchParams({ token }) });
}

async function signedIn(h: Harness): Promise<{ cookie: string; csrf: string; html: string }> {
  const r = await login(h, OPERATOR);
  expect(r.status).toBe(303);
  const cookie = r.headers.get('set-cookie')!.split(';')[0]!;
  const page = await h.app.request('http://inbox.test/inbox', { headers: { cookie } });
  const html = await page.text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)![1]!;
  return { cookie, csrf, html };
}

const post = (h: Harness, path: string, cookie: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
  h.app.request(`http://inbox.test${path}`, { method: 'POST', headers: { cookie, ...headers }, body: new URLSearchParams(form) });

describe('the operator inbox', () => {
  it('sets a session cookie HttpOnly, SameSite=Strict, scoped to /inbox; Secure over HTTPS only', async () => {
    const h = await harness();
    const plain = (await login(h, OPERATOR)).headers.get('set-cookie')!;
    expect(plain).toMatch(/^ctrlrun_session=[\w-]+\.[\w-]+; Path=\/inbox; HttpOnly; SameSite=Strict; Max-Age=28800$/);
    expect((await login(h, OPERATOR, 'https://inbox.test')).headers.get('set-cookie')).toMatch(/; Secure$/);
    expect(
      (
        await h.app.request('http://inbox.test/inbox/login', {
          method: 'POST',
          headers: { 'x-forwarded-proto': 'https' },
          body: new URLSearchParams({ token: OPERATOR }),
        })
      ).headers.get('set-cookie'),
    ).toMatch(/; Secure$/);
  });

  it('an agent credential is refused at login and sees nothing; a forged or missing cookie sees the login form', async () => {
    const h = await harness();
    await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'secret_payment', amount: 200000 } });
    const r = await login(h, AGENT);
    expect(r.status).toBe(403);
    expect(r.headers.get('set-cookie')).toBeNull();
    const text = await r.text();
    expect(text).toContain('agent credential');
    expect(text).not.toContain('secret_payment');
    expect((await login(h, 'wrong-token-that-is-long-enough')).status).toBe(401);
    for (const cookie of ['', 'ctrlrun_session=eyJ4Ijox.forged', 'ctrlrun_session=abc']) {
      const page = await (await h.app.request('http://inbox.test/inbox', { headers: { cookie } })).text();
      expect(page).toContain('Operator credential');
      expect(page).not.toContain('secret_payment');
    }
    expect((await h.app.request('http://inbox.test/inbox/live')).status).toBe(401);
    // A signed cookie from another app (another secret) is refused too.
    const other = await harness();
    const stolen = (await login(other, OPERATOR)).headers.get('set-cookie')!.split(';')[0]!;
    expect(await (await h.app.request('http://inbox.test/inbox', { headers: { cookie: stolen } })).text()).toContain('Operator credential');
  });

  it('a session ends as soon as its credential is removed, rotated, expires or names another operator (same session secret, new token set)', async () => {
    const sessionSecret = 'a-shared-session-secret-0123456789';
    const before = await harness({ inbox: { sessionSecret } });
    const r = await login(before, OPERATOR);
    expect(r.status).toBe(303);
    const cookie = r.headers.get('set-cookie')!.split(';')[0]!;
    // The cookie does not carry the credential readably.
    expect(Buffer.from(cookie.split('=')[1]!.split('.')[0]!, 'base64url').toString()).not.toContain(OPERATOR);
    expect(await (await before.app.request('http://inbox.test/inbox', { headers: { cookie } })).text()).not.toContain('Operator credential');
    const withTokens = (tokens: Parameters<typeof staticTokens>[0]) => harness({ inbox: { sessionSecret }, auth: staticTokens(tokens) });
    // Another instance with the same secret and the same credential: the session holds.
    const same = await withTokens([{ role: 'operator', token: OPERATOR, operator: 'human:ops' }]);
    expect(await (await same.app.request('http://inbox.test/inbox', { headers: { cookie } })).text()).not.toContain('Operator credential');
    // Removed (rotated to another token), now an agent's, or naming another operator: the login form, and no answer goes through.
    for (const tokens of [
      [{ role: 'operator' as const, token: 'a-rotated-operator-token-000', operator: 'human:ops' }],
      [{ role: 'agent' as const, token: OPERATOR, agent: 'billing-agent', user: null }],
      [{ role: 'operator' as const, token: OPERATOR, operator: 'human:someone-else' }],
    ]) {
      const after = await withTokens([...tokens, { role: 'agent', token: AGENT, agent: 'billing-agent', user: 'u-42' }]);
      expect(await (await after.app.request('http://inbox.test/inbox', { headers: { cookie } })).text()).toContain('Operator credential');
      expect((await after.app.request('http://inbox.test/inbox/live', { headers: { cookie } })).status).toBe(401);
      const asked = await after.call('POST', '/v1/actions', AGENT, '{"name":"stripe.refund","arguments":{"payment_id":"in_9","amount":200000}}');
      expect(asked.status).toBe(202);
      const id = String(asked.json['requestId']);
      const posted = await post(after, `/inbox/approvals/${id}/grant`, cookie, { csrf: 'x' }, { origin: 'http://inbox.test' });
      expect(posted.status).toBe(401);
      expect((await after.store.getApproval(id))!.status).toBe('pending');
    }
  });

  it('sign-out ends the session on the server: a copy of the cookie taken before is refused, for reading and for answering', async () => {
    const h = await harness();
    const asked = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'in_out', amount: 200000 } });
    const id = String(asked.json['requestId']);
    const { cookie, csrf } = await signedIn(h);
    const copy = cookie; // what an attacker took earlier
    expect((await post(h, '/inbox/logout', cookie, { csrf })).status).toBe(303);
    expect(await (await h.app.request('http://inbox.test/inbox', { headers: { cookie: copy } })).text()).toContain('Operator credential');
    expect((await h.app.request('http://inbox.test/inbox/live', { headers: { cookie: copy } })).status).toBe(401);
    expect((await post(h, `/inbox/approvals/${id}/grant`, copy, { csrf })).status).toBe(401);
    expect((await post(h, `/inbox/approvals/${id}/deny`, copy, { csrf })).status).toBe(401);
    expect((await h.store.getApproval(id))!.status).toBe('pending');
    // Signing in again opens a new session.
    const again = await signedIn(h);
    expect(again.html).not.toContain('Operator credential');
  });

  it('a sign-out holds in every instance that shares the store (two apps on one SQLite file)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-inbox-'));
    const file = join(dir, 'store.db');
    const sessionSecret = 'a-shared-session-secret-0123456789';
    const instance = async (): Promise<{ app: ReturnType<typeof createApp>; store: StateStore }> => {
      const store = await openStore(file);
      const control = new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => undefined } });
      const auth = staticTokens([
        { role: 'agent', token: AGENT, agent: 'billing-agent', user: 'u-42' },
        { role: 'operator', token: OPERATOR, operator: 'human:ops' },
      ]);
      return { app: createApp({ control, executors: testExecutors([]), auth, inbox: { sessionSecret } }), store };
    };
    const a = await instance();
    const b = await instance();
    try {
      const asked = await a.app.request('http://inbox.test/v1/actions', {
        method: 'POST',
        headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'stripe.refund', arguments: { payment_id: 'in_shared', amount: 200000 } }),
      });
      const id = String(((await asked.json()) as Record<string, unknown>)['requestId']);
      const r = await a.app.request('http://inbox.test/inbox/login', { method: 'POST', body: new URLSearchParams({ token: OPERATOR }) });
      const cookie = r.headers.get('set-cookie')!.split(';')[0]!;
      const html = await (await b.app.request('http://inbox.test/inbox', { headers: { cookie } })).text();
      expect(html).not.toContain('Operator credential'); // the session holds on the other instance
      const csrf = /name="csrf" value="([^"]+)"/.exec(html)![1]!;
      const out = await a.app.request('http://inbox.test/inbox/logout', { method: 'POST', headers: { cookie }, body: new URLSearchParams({ csrf }) });
      expect(out.status).toBe(303);
      // Signed out on A; the copy replayed on B is refused.
      expect(await (await b.app.request('http://inbox.test/inbox', { headers: { cookie } })).text()).toContain('Operator credential');
      expect((await b.app.request('http://inbox.test/inbox/live', { headers: { cookie } })).status).toBe(401);
      const grant = await b.app.request(`http://inbox.test/inbox/approvals/${id}/grant`, {
        method: 'POST',
        headers: { cookie },
        body: new URLSearchParams({ csrf }),
      });
      expect(grant.status).toBe(401);
      expect((await b.store.getApproval(id))!.status).toBe('pending');
    } finally {
      await a.store.close();
      await b.store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('shows every hashed argument (with __proto__), the hash, the rule, who asked and when; approves once through the kernel', async () => {
    const h = await harness();
    const asked = await h.call(
      'POST',
      '/v1/actions',
      AGENT,
      '{"name":"stripe.refund","arguments":{"payment_id":"in_1","amount":200000,"__proto__":{"polluted":true}}}',
    );
    expect(asked.status).toBe(202);
    const id = String(asked.json['requestId']);
    const { cookie, csrf, html } = await signedIn(h);
    expect(html).toContain(id);
    expect(html).toContain('&#34;__proto__&#34;:{&#34;polluted&#34;:true}');
    expect(html).toContain(String(asked.json['actionHash']));
    expect(html).toContain('billing-agent for u-42');
    expect(html).toMatch(/rule\[1\]: amount_gte 0, amount_lte 1000000 → approve/);
    const granted = await post(h, `/inbox/approvals/${id}/grant`, cookie, { csrf });
    expect(granted.status).toBe(303);
    expect((await h.store.getApproval(id))!.status).toBe('granted');
    expect((await h.store.getApproval(id))!.approver).toBe('human:ops');
    const again = await h.call(
      'POST',
      '/v1/actions',
      AGENT,
      `{"name":"stripe.refund","arguments":{"payment_id":"in_1","amount":200000,"__proto__":{"polluted":true}},"approvalId":"${id}"}`,
    );
    expect(again.status).toBe(200);
    expect(h.calls).toEqual(['refund in_1']);
  });

  it('shows each time short, in UTC until the page script makes it local, never wrapped, the exact value in datetime and on hover', async () => {
    const h = await harness();
    const asked = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'in_t', amount: 200000 } });
    expect((await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'amb_t', mode: 'lost' } })).status).toBe(502);
    const request = (await h.store.getApproval(String(asked.json['requestId'])))!.request;
    const effect = (await h.store.getEffect('charge:amb_t'))!;
    const { html } = await signedIn(h);
    const times = [...html.matchAll(/<time datetime="([^"]*)" title="([^"]*)" data-local>([^<]*)<\/time>/g)].map((m) => ({
      datetime: m[1],
      title: m[2],
      text: m[3],
    }));
    const shown = (stored: string) => {
      const exact = viewTime(stored);
      return { datetime: exact, title: exact, text: `${exact.slice(0, 10)} ${exact.slice(11, 16)} UTC` };
    };
    expect(times).toEqual([shown(request.createdAt), shown(request.expiresAt), shown(effect.updatedAt!)]);
    // The exact value is the views' form, not the column's.
    expect(request.createdAt).toMatch(/\+00:00$/);
    expect(times[0]!.datetime).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(html).toMatch(/time \{ white-space: nowrap; word-break: normal; \}/);
    // The page's script turns them into the reader's local time, and again after each refresh.
    const script = await (await h.app.request('http://inbox.test/inbox/inbox.js')).text();
    expect(script).toContain("querySelectorAll('time[data-local]')");
    expect(script).toMatch(/live\.innerHTML = html; last = html; localTimes\(live\);/);
  });

  it("a post without the CSRF token, with another session's token, or from another origin changes nothing", async () => {
    const h = await harness();
    const asked = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'in_2', amount: 200000 } });
    const id = String(asked.json['requestId']);
    const me = await signedIn(h);
    const other = await signedIn(h);
    expect(other.csrf).not.toBe(me.csrf);
    expect((await post(h, `/inbox/approvals/${id}/grant`, me.cookie, {})).status).toBe(403);
    expect((await post(h, `/inbox/approvals/${id}/grant`, me.cookie, { csrf: other.csrf })).status).toBe(403);
    expect((await post(h, `/inbox/approvals/${id}/grant`, me.cookie, { csrf: me.csrf }, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await post(h, `/inbox/approvals/${id}/grant`, '', { csrf: me.csrf })).status).toBe(401);
    expect((await h.store.getApproval(id))!.status).toBe('pending');
    expect((await post(h, `/inbox/approvals/${id}/deny`, me.cookie, { csrf: me.csrf })).status).toBe(303);
    expect((await h.store.getApproval(id))!.status).toBe('denied');
  });

  it('requests that expired unanswered do not hide the ones waiting behind them; a flood of AMBIGUOUS effects does not hide the newest', async () => {
    const h = await harness();
    // 250 requests filed an hour ago by many agents, expired unanswered (still `pending` in the store) …
    const hourAgo = new Control({
      policy: loadPolicy(POLICY),
      store: h.store,
      clock: () => new Date(Date.now() - 3_600_000),
      logger: { warn: () => undefined },
    });
    for (let i = 0; i < 250; i++) {
      const stale = hourAgo.execute(
        createAction({ name: 'stripe.refund', arguments: { payment_id: `old_${i}`, amount: 200000 }, principal: { agent: `a${i}` } }),
        () => 'ran',
      );
      await expect(stale).rejects.toThrow(ApprovalRequired);
    }
    // … then one real request.
    const real = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'LEGIT', amount: 250000 } });
    expect(real.status).toBe(202);
    for (let i = 0; i < 205; i++)
      expect((await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: `flood_${i}`, mode: 'lost' } })).status).toBe(502);
    expect((await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'amb_last', mode: 'lost' } })).status).toBe(502);
    const { cookie } = await signedIn(h);
    const live = await (await h.app.request('http://inbox.test/inbox/live', { headers: { cookie } })).text();
    expect(live).toContain('LEGIT');
    expect(live).toContain('Pending approvals (1)');
    expect(live).toContain('250 request(s) expired unanswered');
    expect(live).toContain('charge:amb_last');
    expect(live).toContain('Ambiguous effects (200+)');
    expect(live).not.toContain('charge:flood_0<');
  }, 60_000);

  it('lists an AMBIGUOUS effect and resolves it; shows the chain verification state', async () => {
    const h = await harness();
    expect((await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'amb_1', mode: 'lost' } })).status).toBe(502);
    const { cookie, csrf, html } = await signedIn(h);
    expect(html).toContain('charge:amb_1');
    expect(html).toContain('data-chain="ok"');
    const bad = await post(h, `/inbox/effects/${encodeURIComponent('charge:amb_1')}/resolve`, cookie, { csrf, state: 'sideways' });
    expect(await bad.text()).toContain('choose committed or failed');
    expect((await post(h, `/inbox/effects/${encodeURIComponent('charge:amb_1')}/resolve`, cookie, { csrf, state: 'failed' })).status).toBe(303);
    expect((await h.store.getEffect('charge:amb_1'))!).toMatchObject({ state: 'failed', resolvedBy: 'human:ops' });
    expect(await (await h.app.request('http://inbox.test/inbox/live', { headers: { cookie } })).text()).not.toContain('charge:amb_1');
  });

  it('reads forms up to 16 KiB and only URL-encoded: a larger login or post is 413, another type 415, nothing changes', async () => {
    const h = await harness();
    const asked = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'in_3', amount: 200000 } });
    const id = String(asked.json['requestId']);
    expect(
      (await h.app.request('http://inbox.test/inbox/login', { method: 'POST', body: new URLSearchParams({ token: OPERATOR, pad: 'x'.repeat(20_000) }) }))
        .status,
    ).toBe(413);
    expect(
      (
        await h.app.request('http://inbox.test/inbox/login', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ token: OPERATOR }),
        })
      ).status,
    ).toBe(415);
    const { cookie, csrf } = await signedIn(h);
    const chunked = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(`csrf=${csrf}&pad=`));
        for (let i = 0; i < 40; i++) controller.enqueue(new TextEncoder().encode('y'.repeat(1024)));
        controller.close();
      },
    });
    const big = await h.app.request(`http://inbox.test/inbox/approvals/${id}/grant`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: chunked,
      duplex: 'half',
    } as RequestInit);
    expect(big.status).toBe(413);
    expect((await h.store.getApproval(id))!.status).toBe('pending');
  });

  it('escapes what an agent wrote: markup in an argument is shown as text', async () => {
    const h = await harness();
    await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: '<script>alert(1)</script>', amount: 200000 } });
    const { html } = await signedIn(h);
    expect(html).not.toContain('<script>alert(1)</script>');
    expect(html).toContain('&#60;script&#62;alert(1)&#60;/script&#62;');
  });

  it('makes invisible characters visible: a bidi override, zero-width or C1 control in an argument, key or principal cannot make the page read differently from the hash', async () => {
    const h = await harness();
    // U+202E would show "amount" ... reversed; U+200B hides a difference between two keys.
    const args = JSON.parse('{"payment_id":"in_\\u202e1000\\u202c","amount":200000,"note\\u200b":"\\u0085x\\u2066y\\u2069"}') as Record<string, unknown>;
    const asked = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: args });
    expect(asked.status).toBe(202);
    const { html } = await signedIn(h);
    const live = html.slice(html.indexOf('<div id="live">'));
    expect(live.replace(/\n/g, '')).not.toMatch(/[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u);
    expect(live).toContain('in_\\u202e1000\\u202c');
    expect(live).toContain('note\\u200b');
    expect(live).toContain('\\u0085x\\u2066y\\u2069');
    // Property: whatever invisible characters an argument holds, the live region has none of them raw.
    const invisible = fc.constantFrom(
      '\u202a',
      '\u202b',
      '\u202d',
      '\u202e',
      '\u2066',
      '\u2067',
      '\u2068',
      '\u2069',
      '\u200b',
      '\u200e',
      '\u200f',
      '\u2028',
      '\u2029',
      '\u0085',
      '\u009b',
      '\u007f',
      '\ufeff',
      '\u{e0041}',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(invisible, fc.string({ maxLength: 3 })), { minLength: 1, maxLength: 8 }).map((parts) => parts.join('')),
        async (text) => {
          const r = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: `p${text}`, amount: 200000 } });
          expect([202, 409]).toContain(r.status);
          const page = await (await h.app.request('http://inbox.test/inbox/live', { headers: { cookie: (await signedIn(h)).cookie } })).text();
          expect(page.replace(/\n/g, '')).not.toMatch(/[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u);
        },
      ),
      { numRuns: 15 },
    );
  });

  it('the page and its live fragment may not be framed, sniffed or cached (they hold the CSRF token and what agents asked)', async () => {
    const h = await harness();
    const { cookie } = await signedIn(h);
    for (const path of ['/inbox', '/inbox/live']) {
      const r = await h.app.request(`http://inbox.test${path}`, { headers: { cookie } });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-frame-options')).toBe('DENY');
      expect(r.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('cache-control')).toBe('no-store');
    }
  });
});
