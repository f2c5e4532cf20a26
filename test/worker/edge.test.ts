/**
 * The worker's edge: credentials, the JSON path of a parse error, and fuzzed bodies. A fuzzed
 * body never gets a 5xx other than 502, and a body refused at the edge never writes a record.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { bearerToken, constantTimeEqual, createDemoApp, identityProviderAuth, jsonPathAt, readJsonBody, staticTokens } from '../../worker/src/index.js';
import { AGENT, harness, OPERATOR } from './harness.js';

const ALLOWED_STATUSES = new Set([200, 202, 400, 401, 403, 404, 409, 413, 415, 422, 429, 502]);
/** Statuses that mean "refused before the control path": nothing may be written. */
const EDGE_STATUSES = new Set([400, 401, 404, 413, 415, 429]);

describe('credentials', () => {
  it('static tokens: the right role for the right token, 401 for anything else', async () => {
    const auth = staticTokens([
      { role: 'agent', token: 'a'.repeat(16), agent: 'bot' },
      { role: 'operator', token: 'o'.repeat(16), operator: 'human:o' },
    ]);
    const req = (header?: string) => new Request('http://x.invalid/', header === undefined ? {} : { headers: { authorization: header } });
    // An authenticator may answer or throw synchronously or asynchronously; the app awaits either.
    const authAsync = async (header: string) => auth(req(header));
    expect(await auth(req(`Bearer ${'a'.repeat(16)}`))).toEqual({ role: 'agent', principal: { agent: 'bot', user: null } });
    expect(await auth(req(`bearer ${'o'.repeat(16)}`))).toEqual({
      role: 'operator',
      operator: 'human:o',
      verified: { agent: 'operator', user: 'human:o', issuer: 'ctrlrun-worker:token', claims: null },
    });
    expect(await auth(req())).toBeNull();
    await expect(authAsync(`Bearer ${'a'.repeat(15)}`)).rejects.toMatchObject({ code: 'ERR_IDENTITY' });
    await expect(authAsync(`Bearer ${'a'.repeat(17)}`)).rejects.toMatchObject({ code: 'ERR_IDENTITY' });
    await expect(authAsync(`Basic ${'a'.repeat(16)}`)).rejects.toMatchObject({ code: 'ERR_IDENTITY' });
    expect(() => bearerToken(req('Bearer two words'))).toThrow(/Bearer <token>/);
  });

  it('an identity provider sees every request header as data: __proto__ kept, nothing inherited', async () => {
    let seen: Record<string, string> | null = null;
    const provider = {
      resolve: async (context: { headers: Record<string, string> }) => {
        seen = context.headers;
        return null;
      },
    };
    const auth = identityProviderAuth(provider as never, { environment: 'production' });
    await auth(
      new Request('http://x.invalid/', {
        headers: new Headers([
          ['__proto__', 'p'],
          ['x-agent', 'bot'],
        ]),
      }),
    );
    expect(seen).not.toBeNull();
    expect(Object.keys(seen!).sort()).toEqual(['__proto__', 'x-agent']);
    expect(seen!['__proto__']).toBe('p');
    expect(seen!['constructor']).toBeUndefined();
  });

  it('refuses weak, shared or malformed token configurations', () => {
    expect(() => staticTokens([])).toThrow(/at least one/);
    expect(() => staticTokens([{ role: 'agent', token: 'short', agent: 'a' }])).toThrow(/tokens\[0\]\.token/);
    const same = 'x'.repeat(20);
    expect(() =>
      staticTokens([
        { role: 'agent', token: same, agent: 'a' },
        { role: 'operator', token: same, operator: 'o' },
      ]),
    ).toThrow(/configured twice/);
    expect(() => staticTokens([{ role: 'operator', token: 'y'.repeat(20), operator: 'line\nbreak' }])).toThrow(/operator/);
    expect(() => staticTokens([{ role: 'admin', token: 'z'.repeat(20) } as never])).toThrow(/role/);
  });

  it('constantTimeEqual is string equality', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), fc.string({ maxLength: 40 }), (a, b) => {
        expect(constantTimeEqual(a, b)).toBe(a === b);
        expect(constantTimeEqual(a, `${a}`)).toBe(true);
      }),
    );
  });
});

type Tree = number | string | boolean | null | Tree[] | { [k: string]: Tree };
const key = fc.string({ maxLength: 6 }).filter((k) => k !== '__proto__');
const tree: fc.Arbitrary<Tree> = fc.letrec<{ t: Tree }>((tie) => ({
  t: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.integer(),
    fc.string({ maxLength: 5 }),
    fc.constant(null),
    fc.array(tie('t'), { maxLength: 4 }),
    fc.dictionary(key, tie('t'), { maxKeys: 4 }),
  ),
})).t;

function formatPath(segments: (string | number)[]): string {
  return '$' + segments.map((s) => (typeof s === 'number' ? `[${s}]` : /^[A-Za-z_$][\w$]*$/.test(s) ? `.${s}` : `[${JSON.stringify(s)}]`)).join('');
}

describe('the JSON path of a refused float', () => {
  it('names where the float is, at any depth, whatever the keys hold', async () => {
    await fc.assert(
      fc.asyncProperty(tree, fc.array(fc.nat(), { maxLength: 6 }), async (doc, choices) => {
        // Walk down by the choices to a place, and put a float there.
        const segments: (string | number)[] = [];
        const root: { v: Tree } = { v: doc };
        let parent: Record<string | number, Tree> = root as unknown as Record<string, Tree>;
        let at: string | number = 'v';
        for (const c of choices) {
          const here: Tree = parent[at]!;
          if (Array.isArray(here) && here.length > 0) {
            parent = here as unknown as Record<number, Tree>;
            at = c % here.length;
          } else if (here !== null && typeof here === 'object' && !Array.isArray(here) && Object.keys(here).length > 0) {
            const keys: string[] = Object.keys(here);
            parent = here;
            at = keys[c % keys.length]!;
          } else break;
          segments.push(at);
        }
        parent[at] = 1.5;
        const text = JSON.stringify(root.v);
        const request = new Request('http://x.invalid/', { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
        const err = await readJsonBody(request, 1 << 20).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).toMatchObject({ status: 400, details: { path: formatPath(segments) } });
      }),
      { numRuns: 300 },
    );
  });

  it('is the container being read when the text breaks off', () => {
    expect(jsonPathAt('{"a":{"b":[1,2,', 15)).toBe('$.a.b[2]');
    expect(jsonPathAt('{"a":1,', 7)).toBe('$');
    expect(jsonPathAt('{"x\\"y":[', 10)).toBe('$["x\\"y"][0]');
  });
});

const names = fc.constantFrom('stripe.refund', 'flaky.charge', 'free.form', 'db.drop', 'upstream.call', 'unknown.thing');
const args = fc.dictionary(
  fc.constantFrom('payment_id', 'amount', 'id', 'mode', 'table', 'resource', 'x', '__proto__', 'data_scope'),
  fc.jsonValue({ maxDepth: 2 }),
  { maxKeys: 4 },
);
const plausible = fc.record(
  {
    name: fc.oneof(names, fc.string()),
    arguments: fc.oneof(args, fc.jsonValue({ maxDepth: 1 })),
    effectKey: fc.oneof(fc.string(), fc.constant(null)),
    approvalId: fc.oneof(fc.string(), fc.integer()),
    resource: fc.string(),
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  plausible.map((v) => JSON.stringify(v)),
  // Strings cut off anywhere: malformed JSON of every shape.
  fc.tuple(plausible, fc.nat()).map(([v, n]) => {
    const t = JSON.stringify(v);
    return t.slice(0, n % (t.length + 1));
  }),
);
/** Bodies the edge must refuse: not JSON, not an object, or an object carrying a float. */
const malformed = fc.oneof(
  fc.string().filter((s) => {
    try {
      const v: unknown = JSON.parse(s);
      return typeof v !== 'object' || v === null || Array.isArray(v);
    } catch {
      return true;
    }
  }),
  fc
    .tuple(
      plausible,
      fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isInteger(d)),
    )
    .map(([v, d]) => JSON.stringify({ ...v, name: 'stripe.refund', arguments: { payment_id: 'p', amount: d } })),
  plausible.map((v) => JSON.stringify({ ...v, principal: { agent: 'someone' } })),
);

describe('fuzzed bodies', () => {
  it('never get a 5xx other than 502, and a refusal at the edge writes nothing', async () => {
    const h = await harness();
    const routes: [string, string][] = [
      ['/v1/actions', AGENT],
      ['/v1/approvals/apr_1/grant', OPERATOR],
      ['/v1/approvals/apr_1/deny', OPERATOR],
      ['/v1/effects/charge:x/resolve', OPERATOR],
    ];
    await fc.assert(
      fc.asyncProperty(body, fc.constantFrom(...routes), async (text, [path, token]) => {
        const before = await h.counts();
        const r = await h.call('POST', path, token, text);
        expect(ALLOWED_STATUSES.has(r.status), `${r.status} ${JSON.stringify(r.json)}`).toBe(true);
        expect(r.json['error'] === undefined || typeof (r.json['error'] as { code?: unknown }).code === 'string').toBe(true);
        if (EDGE_STATUSES.has(r.status)) expect(await h.counts()).toEqual(before);
      }),
      { numRuns: 400 },
    );
  });

  it('a malformed body is 400 and writes nothing', async () => {
    const h = await harness();
    await fc.assert(
      fc.asyncProperty(malformed, async (text) => {
        const r = await h.call('POST', '/v1/actions', AGENT, text);
        expect(r.status, text).toBe(400);
        expect(await h.counts()).toEqual({ events: 0, receipts: 0, effects: 0, approvals: 0 });
      }),
      { numRuns: 300 },
    );
  });

  it("the demo's remote refuses a payment_id that is no string before refunding anything: 422, FAILED (never AMBIGUOUS, which would wait for a human)", async () => {
    const auth = staticTokens([{ role: 'agent', token: AGENT, agent: 'refund-agent' }]);
    const store = await createSqlJsStore();
    const { app } = createDemoApp({ store, auth });
    const r = await app.request('/v1/actions', {
      method: 'POST',
      headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'stripe.refund', arguments: { payment_id: 1001, amount: 1 } }),
    });
    expect(r.status).toBe(422);
    expect((await store.getEffect('refund:1001'))?.state).toBe('failed');
  });

  it('the playground route, too', async () => {
    const auth = staticTokens([
      { role: 'agent', token: AGENT, agent: 'refund-agent' },
      { role: 'operator', token: OPERATOR, operator: 'human:ops' },
    ]);
    const tryItStore = await createSqlJsStore();
    const { app } = createDemoApp({ store: await createSqlJsStore(), tryItStore, auth });
    const step = fc.oneof(
      body,
      fc
        .record(
          {
            op: fc.constantFrom('refund', 'approve', 'other'),
            payment_id: fc.string(),
            amount: fc.oneof(fc.integer(), fc.double()),
            lose_reply: fc.jsonValue({ maxDepth: 0 }),
            request_id: fc.string(),
          },
          { requiredKeys: ['op'] },
        )
        .map((v) => JSON.stringify(v)),
    );
    await fc.assert(
      fc.asyncProperty(step, fc.constantFrom(AGENT, OPERATOR), async (text, token) => {
        const before = (await tryItStore.events()).length;
        const r = await app.request('/v1/try-it/step', {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: text,
        });
        expect(ALLOWED_STATUSES.has(r.status), `${r.status} ${await r.clone().text()}`).toBe(true);
        if (EDGE_STATUSES.has(r.status)) expect((await tryItStore.events()).length).toBe(before);
        await r.body?.cancel();
      }),
      { numRuns: 200 },
    );
  });
});
