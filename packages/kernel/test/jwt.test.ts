// The JWT identity provider (spec 02 §1.6): real keys made by `jose`, a JWKS served by a local
// fetch stub (no network), every refusal by its own reason, only the named claims, the
// algorithm from the configuration and never from the token.
import { createPublicKey, createSecretKey, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { SignJWT, exportJWK, exportSPKI, generateKeyPair, type JWK } from 'jose';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Control,
  IdentityError,
  InvalidArgument,
  MissingDependency,
  createAction,
  loadPolicy,
  protect,
  sequentialIds,
  type IdentityContext,
} from '@ctrlrun/kernel';
import { parseTime } from '@ctrlrun/kernel/store';
import { CredentialRejected, JwtIdentityProvider, createJwtIdentityProvider, type JwtIdentityOptions } from '@ctrlrun/kernel/jwt';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

const T0 = new Date('2026-09-03T10:12:01.000Z');
const NOW = Math.floor(T0.getTime() / 1000);
const ISSUER = 'https://id.example.com/';
const AUDIENCE = 'https://api.example.com';
const JWKS_URL = 'https://id.example.com/.well-known/jwks.json';
const quiet = { warn: () => {} };

const rsa = await generateKeyPair('RS256', { extractable: true });
const rsaOther = await generateKeyPair('RS256', { extractable: true });
const ec = await generateKeyPair('ES256', { extractable: true });
const rsaJwk: JWK = { ...(await exportJWK(rsa.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
const otherJwk: JWK = { ...(await exportJWK(rsaOther.publicKey)), kid: 'k2', alg: 'RS256' };
const SECRET = 'a-shared-secret-of-some-length-0123456789';

interface Claims {
  [k: string]: unknown;
}

async function token(claims: Claims = {}, header: Record<string, unknown> = {}, key: CryptoKey | Uint8Array = rsa.privateKey): Promise<string> {
  const alg = (header['alg'] as string | undefined) ?? 'RS256';
  return new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'support-agent', exp: NOW + 300, ...claims } as never)
    .setProtectedHeader({ alg, typ: 'at+jwt', kid: 'k1', ...header })
    .sign(key);
}

/** A JWKS endpoint: counts fetches, serves `keys`, or fails when told. */
function jwks(keys: () => JWK[]) {
  const state = { fetches: 0, fail: false, inits: [] as RequestInit[], url: '' };
  const fetchStub = (async (url: string, init: RequestInit) => {
    state.fetches++;
    state.inits.push(init);
    state.url = String(url);
    if (state.fail) throw new TypeError('fetch failed: ECONNREFUSED');
    return new Response(JSON.stringify({ keys: keys() }), { status: 200, headers: { 'content-type': 'application/json' } });
  }) as unknown as typeof fetch;
  return { state, fetch: fetchStub };
}

function provider(extra: Partial<JwtIdentityOptions> = {}, keys: () => JWK[] = () => [rsaJwk]) {
  let now = T0.getTime();
  const endpoint = jwks(keys);
  const p = new JwtIdentityProvider({
    jwksUrl: JWKS_URL,
    algorithms: ['RS256'],
    issuer: ISSUER,
    audience: AUDIENCE,
    tokenType: 'at+jwt',
    userClaim: 'email',
    claimNames: ['role', 'level', 'verified'],
    clock: () => new Date(now),
    fetch: endpoint.fetch,
    logger: quiet,
    ...extra,
  });
  return { p, endpoint, advance: (ms: number) => void (now += ms) };
}

const ctx = (authorization?: string): IdentityContext => ({
  action: 'stripe.refund',
  environment: 'production',
  headers: authorization === undefined ? {} : { authorization },
  agent: null,
  user: null,
});

async function reason(p: JwtIdentityProvider, authorization: string): Promise<string> {
  const err = await p.resolve(ctx(authorization)).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, `expected ${authorization.slice(0, 40)}… to be rejected`).toBeInstanceOf(CredentialRejected);
  expect(err).toBeInstanceOf(IdentityError);
  expect((err as Error).message).toBe('the credential was rejected');
  return (err as CredentialRejected).reason;
}

describe('T88: a valid token resolves to a principal', () => {
  it('test_T88_a_jwks_token_resolves_agent_user_issuer_expiry_and_the_named_claims', async () => {
    const { p } = provider();
    const t = await token({ email: 'alice@example.com', role: 'support', level: 3, verified: true, secret_thing: 'x', nested: { a: 1 } });
    const principal = await p.resolve(ctx(`Bearer ${t}`));
    expect(principal).toEqual({
      agent: 'support-agent',
      user: 'alice@example.com',
      claims: { role: 'support', level: 3, verified: true },
      issuer: ISSUER,
      expiresAt: new Date((NOW + 300) * 1000).toISOString(),
    });
    expect(await p.resolve(ctx())).toBeNull();
    expect(await p.resolve(ctx(`bEaReR   ${t}`))).toMatchObject({ agent: 'support-agent' });
  });

  it('test_T88_only_the_named_claims_reach_the_principal', async () => {
    const { p } = provider({ claimNames: ['role'] });
    const principal = await p.resolve(ctx(`Bearer ${await token({ role: 'support', admin: true, level: 9, scope: 'everything' })}`));
    expect(principal!.claims).toEqual({ role: 'support' });
    const none = provider({ claimNames: [] }).p;
    expect((await none.resolve(ctx(`Bearer ${await token({ role: 'support' })}`)))!.claims ?? null).toBeNull();
    // A named claim whose value a principal cannot hold is left off, not coerced.
    const odd = provider({ claimNames: ['role', 'level'] }).p;
    expect((await odd.resolve(ctx(`Bearer ${await token({ role: ['a', 1], level: 1.5 })}`)))!.claims).toEqual({});
    // A list of non-empty strings is one (a roles claim, spec 05 §6.3): kept as the list.
    expect((await odd.resolve(ctx(`Bearer ${await token({ role: ['finance', 'ops'], level: 2 })}`)))!.claims).toEqual({ role: ['finance', 'ops'], level: 2 });
  });

  it('a pinned PEM key and a shared secret work too', async () => {
    const pem = new JwtIdentityProvider({
      publicKey: await exportSPKI(ec.publicKey),
      algorithms: ['ES256'],
      issuer: ISSUER,
      audience: AUDIENCE,
      tokenType: null,
      clock: () => T0,
      logger: quiet,
    });
    expect(await pem.resolve(ctx(`Bearer ${await token({}, { alg: 'ES256', typ: undefined }, ec.privateKey)}`))).toMatchObject({
      agent: 'support-agent',
      user: null,
    });
    const hs = new JwtIdentityProvider({
      secret: SECRET,
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: AUDIENCE,
      tokenType: 'at+jwt',
      clock: () => T0,
      logger: quiet,
      agentClaim: 'client_id',
    });
    expect(await hs.resolve(ctx(`Bearer ${await token({ client_id: 'billing-bot' }, { alg: 'HS256' }, new TextEncoder().encode(SECRET))}`))).toMatchObject({
      agent: 'billing-bot',
    });
  });
});

describe('the key a jose user holds', () => {
  const opts = { algorithms: ['ES256'], issuer: ISSUER, audience: AUDIENCE, tokenType: null, clock: () => T0, logger: quiet } as const;
  const signed = () => token({}, { alg: 'ES256', typ: undefined }, ec.privateKey);

  it('a public CryptoKey (generateKeyPair, importSPKI, importJWK) verifies; another key does not', async () => {
    const p = new JwtIdentityProvider({ ...opts, publicKey: ec.publicKey });
    expect(await p.resolve(ctx(`Bearer ${await signed()}`))).toMatchObject({ agent: 'support-agent' });
    const other = await generateKeyPair('ES256');
    const wrong = new JwtIdentityProvider({ ...opts, publicKey: other.publicKey });
    expect(await reason(wrong, `Bearer ${await signed()}`)).toBe('bad_signature');
  });

  it("a Node KeyObject of type 'public' (crypto.createPublicKey) verifies", async () => {
    const pem = await exportSPKI(ec.publicKey);
    const p = new JwtIdentityProvider({ ...opts, publicKey: createPublicKey(pem) });
    expect(await p.resolve(ctx(`Bearer ${await signed()}`))).toMatchObject({ agent: 'support-agent' });
  });

  it('a private or secret key is refused at construction, naming what it got', async () => {
    expect(() => new JwtIdentityProvider({ ...opts, publicKey: ec.privateKey })).toThrow(/must be a public key, got a private CryptoKey/);
    const hmac = await crypto.subtle.importKey('raw', new TextEncoder().encode(SECRET), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
    expect(() => new JwtIdentityProvider({ ...opts, publicKey: hmac })).toThrow(InvalidArgument);
    expect(() => new JwtIdentityProvider({ ...opts, publicKey: hmac })).toThrow(/got a secret CryptoKey/);
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    expect(() => new JwtIdentityProvider({ ...opts, publicKey: privateKey })).toThrow(/got a private KeyObject/);
    expect(() => new JwtIdentityProvider({ ...opts, publicKey: createSecretKey(new Uint8Array(32)) })).toThrow(/got a secret KeyObject/);
  });
});

describe('T88b: configuration is refused at construction', () => {
  const base: JwtIdentityOptions = {
    jwksUrl: JWKS_URL,
    algorithms: ['RS256'],
    issuer: ISSUER,
    audience: AUDIENCE,
    tokenType: 'at+jwt',
    fetch: (() => undefined) as never,
    logger: quiet,
  };
  const refusals: [string, Partial<JwtIdentityOptions> & Record<string, unknown>, RegExp][] = [
    ['no key source', { jwksUrl: undefined }, /exactly one of/],
    ['two key sources', { secret: SECRET }, /exactly one of/],
    ['HS with a public source', { algorithms: ['HS256'] }, /shared-secret algorithm/],
    ['RS with a secret', { jwksUrl: undefined, secret: SECRET }, /public-key algorithm/],
    ['empty algorithms', { algorithms: [] }, /non-empty list/],
    ['none', { algorithms: ['none'] }, /'none' is refused/],
    ['NoNe', { algorithms: ['RS256', 'NoNe'] }, /'none' is refused/],
    ['empty issuer', { issuer: '' }, /issuer/],
    ['empty audience', { audience: ' ' }, /audience/],
    ['empty header', { header: '' }, /header/],
    ['empty agent claim', { agentClaim: '' }, /agentClaim/],
    ['token type left out', { tokenType: undefined }, /tokenType is required/],
    ['an http JWKS', { jwksUrl: 'http://id.example.com/jwks' }, /must be https/],
    [
      'a JWKS URL holding credentials, masked',
      { jwksUrl: 'https://idp:s3cr3t@ssw0rd@id.example.com/jwks' },
      /jwksUrl "https:\/\/\*\*\*@id\.example\.com\/jwks" holds credentials/,
    ],
    ['a PEM path', { jwksUrl: undefined, publicKey: '/etc/keys/idp.pem' }, /PEM text/],
    ['a zero JWKS max age', { jwksMaxAge: 0 }, /jwksMaxAge must be a positive/],
    ['a JWKS max age under the refresh interval', { jwksMaxAge: 10_000, jwksMinRefreshInterval: 30_000 }, /at least jwksMinRefreshInterval/],
    ['a negative leeway', { leeway: -1 }, /leeway/],
  ];
  for (const [what, change, message] of refusals) {
    it(`test_T88b_${what.replace(/\W+/g, '_')}`, () => {
      expect(() => new JwtIdentityProvider({ ...base, ...change } as JwtIdentityOptions)).toThrow(InvalidArgument);
      expect(() => new JwtIdentityProvider({ ...base, ...change } as JwtIdentityOptions)).toThrow(message);
    });
  }

  it('a null token type is allowed, with a warning', () => {
    const warned: string[] = [];
    new JwtIdentityProvider({ ...base, tokenType: null, logger: { warn: (m: string) => void warned.push(m) } });
    expect(warned.join()).toMatch(/tokenType is null/);
  });
});

describe('T89: every refusal has its own reason', () => {
  it('the header and the token shape', async () => {
    const { p } = provider();
    expect(await reason(p, 'Basic dXNlcjpwYXNz')).toBe('not_bearer');
    expect(await reason(p, 'Bearer')).toBe('not_bearer');
    expect(await reason(p, 'Bearer a.b')).toBe('malformed');
    expect(await reason(p, 'Bearer !!!.???.###')).toBe('malformed');
  });

  it('the algorithm comes from the configured list, never from the token', async () => {
    const { p, endpoint } = provider();
    // HS256 "signed" with the RSA public key's bytes: the classic confusion, refused before any key is used.
    const spki = new TextEncoder().encode(await exportSPKI(rsa.publicKey));
    expect(await reason(p, `Bearer ${await token({}, { alg: 'HS256' }, spki)}`)).toBe('algorithm_not_allowed');
    const header = btoa(JSON.stringify({ alg: 'none', typ: 'at+jwt', kid: 'k1' })).replace(/=+$/, '');
    const body = btoa(JSON.stringify({ iss: ISSUER, aud: AUDIENCE, sub: 'x', exp: NOW + 60 })).replace(/=+$/, '');
    expect(await reason(p, `Bearer ${header}.${body}.`)).toBe('algorithm_not_allowed');
    expect(await reason(p, `Bearer ${await token({}, { alg: 'ES256' }, ec.privateKey)}`)).toBe('algorithm_not_allowed');
    expect(endpoint.state.fetches).toBe(0);
  });

  it('the token type', async () => {
    const { p } = provider();
    expect(await reason(p, `Bearer ${await token({}, { typ: 'JWT' })}`)).toBe('token_type_mismatch');
    expect(await reason(p, `Bearer ${await token({}, { typ: undefined })}`)).toBe('token_type_mismatch');
    expect(await p.resolve(ctx(`Bearer ${await token({}, { typ: 'application/AT+JWT' })}`))).toMatchObject({ agent: 'support-agent' });
  });

  it('the signature, and the required claims', async () => {
    const { p } = provider();
    expect(await reason(p, `Bearer ${await token({}, {}, rsaOther.privateKey)}`)).toBe('bad_signature');
    expect(await reason(p, `Bearer ${await token({ exp: undefined })}`)).toBe('exp_missing');
    expect(await reason(p, `Bearer ${await token({ iss: undefined })}`)).toBe('iss_missing');
    expect(await reason(p, `Bearer ${await token({ iss: 'https://id.example.com' })}`)).toBe('issuer_mismatch');
    expect(await reason(p, `Bearer ${await token({ exp: 'tomorrow' })}`)).toBe('exp_invalid');
    expect(await reason(p, `Bearer ${await token({ nbf: NOW + 0.5 })}`)).toBe('nbf_invalid');
  });

  it('time, against the injected clock, with the leeway', async () => {
    const { p } = provider();
    expect(await reason(p, `Bearer ${await token({ exp: NOW - 61 })}`)).toBe('expired');
    expect(await p.resolve(ctx(`Bearer ${await token({ exp: NOW - 59 })}`))).not.toBeNull();
    expect(await reason(p, `Bearer ${await token({ nbf: NOW + 61 })}`)).toBe('not_yet_valid');
    expect(await p.resolve(ctx(`Bearer ${await token({ nbf: NOW + 59 })}`))).not.toBeNull();
    const strict = provider({ leeway: 0 }).p;
    expect(await reason(strict, `Bearer ${await token({ exp: NOW - 1 })}`)).toBe('expired');
  });

  it('the audience, exactly', async () => {
    const { p } = provider();
    expect(await reason(p, `Bearer ${await token({ aud: 'https://api.example.com/v2' })}`)).toBe('audience_mismatch');
    expect(await reason(p, `Bearer ${await token({ aud: 'https://api.example' })}`)).toBe('audience_mismatch');
    expect(await reason(p, `Bearer ${await token({ aud: undefined })}`)).toBe('audience_mismatch');
    expect(await p.resolve(ctx(`Bearer ${await token({ aud: ['other', AUDIENCE] })}`))).not.toBeNull();
  });

  it('the agent and user claims', async () => {
    const { p } = provider();
    expect(await reason(p, `Bearer ${await token({ sub: '' })}`)).toBe('agent_claim_invalid');
    expect(await reason(p, `Bearer ${await token({ sub: 42 })}`)).toBe('agent_claim_invalid');
    expect(await reason(p, `Bearer ${await token({ email: 7 })}`)).toBe('user_claim_invalid');
    expect((await p.resolve(ctx(`Bearer ${await token({ email: null })}`)))!.user).toBeNull();
  });
});

describe('T90: the JWKS', () => {
  it('an unknown kid refreshes at most once, and never within the minimum interval', async () => {
    let keys = [rsaJwk];
    const { p, endpoint, advance } = provider({}, () => keys);
    await p.resolve(ctx(`Bearer ${await token()}`));
    expect(endpoint.state.fetches).toBe(1);
    await p.resolve(ctx(`Bearer ${await token()}`));
    expect(endpoint.state.fetches).toBe(1);
    // A rotated key appears: within the interval it is unknown, after it one refresh finds it.
    keys = [rsaJwk, otherJwk];
    const rotated = await token({}, { kid: 'k2' }, rsaOther.privateKey);
    expect(await reason(p, `Bearer ${rotated}`)).toBe('unknown_key');
    expect(endpoint.state.fetches).toBe(1);
    advance(30_000);
    expect(await p.resolve(ctx(`Bearer ${rotated}`))).toMatchObject({ agent: 'support-agent' });
    expect(endpoint.state.fetches).toBe(2);
    advance(30_000);
    expect(await reason(p, `Bearer ${await token({}, { kid: 'k9' })}`)).toBe('unknown_key');
    expect(endpoint.state.fetches).toBe(3);
    // Fetched with no redirects and a timeout, from the configured https URL.
    expect(endpoint.state.url).toBe(JWKS_URL);
    expect(endpoint.state.inits[0]).toMatchObject({ redirect: 'error' });
    expect(endpoint.state.inits[0]!.signal).toBeInstanceOf(AbortSignal);
  });

  it('kid is required, two usable keys sharing one refuse, unusable keys are skipped, a key keeps its alg', async () => {
    expect(await reason(provider().p, `Bearer ${await token({}, { kid: undefined })}`)).toBe('kid_missing');
    expect(await reason(provider({}, () => [rsaJwk, { ...otherJwk, kid: 'k1' }]).p, `Bearer ${await token()}`)).toBe('ambiguous_key');
    // The other k1 is for encryption / not for verifying, so it is not a second usable key.
    expect(await provider({}, () => [rsaJwk, { ...otherJwk, kid: 'k1', use: 'enc' }]).p.resolve(ctx(`Bearer ${await token()}`))).not.toBeNull();
    expect(await provider({}, () => [rsaJwk, { ...otherJwk, kid: 'k1', key_ops: ['encrypt'] }]).p.resolve(ctx(`Bearer ${await token()}`))).not.toBeNull();
    const rs384 = provider({ algorithms: ['RS256', 'RS384'] }, () => [{ ...rsaJwk, alg: 'RS384' }]);
    expect(await reason(rs384.p, `Bearer ${await token()}`)).toBe('key_algorithm_mismatch');
  });

  it('a failed fetch refuses and keeps the cache', async () => {
    const { p, endpoint, advance } = provider();
    await p.resolve(ctx(`Bearer ${await token()}`));
    endpoint.state.fail = true;
    advance(60_000);
    expect(await reason(p, `Bearer ${await token({}, { kid: 'k2' }, rsaOther.privateKey)}`)).toBe('jwks_unavailable');
    expect(await p.resolve(ctx(`Bearer ${await token()}`))).toMatchObject({ agent: 'support-agent' });
    const cold = provider();
    cold.endpoint.state.fail = true;
    expect(await reason(cold.p, `Bearer ${await token()}`)).toBe('jwks_unavailable');
  });

  it('an answer from a non-https URL is refused', async () => {
    const redirected = (async () => {
      const r = new Response(JSON.stringify({ keys: [rsaJwk] }), { status: 200 });
      Object.defineProperty(r, 'url', { value: 'http://evil.example.com/jwks' });
      return r;
    }) as unknown as typeof fetch;
    expect(await reason(provider({ fetch: redirected }).p, `Bearer ${await token()}`)).toBe('jwks_unavailable');
  });
});

describe('the JWKS has a maximum age', () => {
  const MAX_AGE = 10 * 60_000;
  const LONG = { exp: NOW + 30 * 86_400 };

  it('test_a_key_removed_from_the_jwks_is_refused_after_the_max_age', async () => {
    let keys = [rsaJwk, otherJwk];
    const { p, endpoint, advance } = provider({ jwksMaxAge: MAX_AGE }, () => keys);
    const signedByK2 = `Bearer ${await token(LONG, { kid: 'k2' }, rsaOther.privateKey)}`;
    expect(await p.resolve(ctx(signedByK2))).toMatchObject({ agent: 'support-agent' });
    expect(endpoint.state.fetches).toBe(1);
    // The issuer removes k2 (compromised). Within the max age the cache still holds it…
    keys = [rsaJwk];
    advance(MAX_AGE - 1);
    expect(await p.resolve(ctx(signedByK2))).not.toBeNull();
    expect(endpoint.state.fetches).toBe(1);
    // …and once the cache is that old it is fetched again, and k2 is gone.
    advance(1);
    expect(await reason(p, signedByK2)).toBe('unknown_key');
    expect(endpoint.state.fetches).toBe(2);
    expect(await p.resolve(ctx(`Bearer ${await token(LONG)}`))).toMatchObject({ agent: 'support-agent' });
    expect(endpoint.state.fetches).toBe(2);
    // Days later, still refused, and the set is refetched once per max age, not per token.
    advance(3 * 86_400_000);
    for (let i = 0; i < 5; i++) expect(await reason(p, signedByK2)).toBe('unknown_key');
    expect(endpoint.state.fetches).toBe(3);
  });

  it('test_a_stale_jwks_that_cannot_be_refetched_is_never_trusted', async () => {
    const { p, endpoint, advance } = provider({ jwksMaxAge: MAX_AGE });
    const good = `Bearer ${await token(LONG)}`;
    expect(await p.resolve(ctx(good))).not.toBeNull();
    endpoint.state.fail = true;
    advance(MAX_AGE);
    expect(await reason(p, good)).toBe('jwks_unavailable');
    // Within the refresh interval no second fetch is tried, and the stale keys still are not used.
    expect(await reason(p, good)).toBe('jwks_unavailable');
    expect(endpoint.state.fetches).toBe(2);
    endpoint.state.fail = false;
    advance(30_000);
    expect(await p.resolve(ctx(good))).not.toBeNull();
    expect(endpoint.state.fetches).toBe(3);
  });

  it('test_a_flood_of_unknown_kids_fetches_no_more_than_the_guard_allows', async () => {
    const { p, endpoint, advance } = provider({ jwksMaxAge: MAX_AGE });
    const flood = await Promise.all(Array.from({ length: 40 }, (_, i) => token(LONG, { kid: `forged-${i}` })));
    // Forty at once: one fetch, shared.
    const first = await Promise.allSettled(flood.map((t) => p.resolve(ctx(`Bearer ${t}`))));
    expect(first.every((r) => r.status === 'rejected' && (r.reason as CredentialRejected).reason === 'unknown_key')).toBe(true);
    expect(endpoint.state.fetches).toBe(1);
    // Forty more, one by one, within the interval: none.
    for (const t of flood) await p.resolve(ctx(`Bearer ${t}`)).catch(() => undefined);
    expect(endpoint.state.fetches).toBe(1);
    // After the interval: one more for the whole flood; after the max age too: one more.
    advance(30_000);
    await Promise.allSettled(flood.map((t) => p.resolve(ctx(`Bearer ${t}`))));
    expect(endpoint.state.fetches).toBe(2);
    advance(MAX_AGE);
    await Promise.allSettled(flood.map((t) => p.resolve(ctx(`Bearer ${t}`))));
    expect(endpoint.state.fetches).toBe(3);
  });

  it('property: fetches are never closer than the interval, and an accepted key was served less than the max age ago', async () => {
    const MIN_REFRESH = 30_000;
    const tokens = {
      k1: `Bearer ${await token(LONG)}`,
      k2: `Bearer ${await token(LONG, { kid: 'k2' }, rsaOther.privateKey)}`,
      kx: `Bearer ${await token(LONG, { kid: 'kx' })}`,
    };
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ advance: fc.integer({ min: 0, max: 2 * MAX_AGE }), kid: fc.constantFrom('k1', 'k2', 'kx'), served: fc.subarray(['k1', 'k2']) }), {
          minLength: 1,
          maxLength: 12,
        }),
        async (steps) => {
          let serving: string[] = ['k1', 'k2'];
          const fetchedAt: number[] = [];
          const servedAt: string[][] = [];
          let now = T0.getTime();
          const { p } = provider({ jwksMaxAge: MAX_AGE, jwksMinRefreshInterval: MIN_REFRESH, clock: () => new Date(now) }, () => {
            fetchedAt.push(now);
            servedAt.push([...serving]);
            return [rsaJwk, otherJwk].filter((k) => serving.includes(k.kid!));
          });
          for (const step of steps) {
            now += step.advance;
            serving = step.served;
            const accepted = await p.resolve(ctx(tokens[step.kid as keyof typeof tokens])).then(
              () => true,
              () => false,
            );
            if (accepted) {
              const last = fetchedAt.length - 1;
              expect(last).toBeGreaterThanOrEqual(0);
              expect(now - fetchedAt[last]!).toBeLessThan(MAX_AGE);
              expect(servedAt[last]).toContain(step.kid);
            }
          }
          for (let i = 1; i < fetchedAt.length; i++) expect(fetchedAt[i]! - fetchedAt[i - 1]!).toBeGreaterThanOrEqual(MIN_REFRESH);
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe("item 18: an expiry past year 9999 is the credential's fault", () => {
  const LAST = 253_402_300_799; // 9999-12-31T23:59:59Z

  it('test_an_exp_after_year_9999_is_refused_as_exp_invalid', async () => {
    const { p } = provider();
    expect(await reason(p, `Bearer ${await token({ exp: LAST + 1 })}`)).toBe('exp_invalid');
    expect(await reason(p, `Bearer ${await token({ exp: 8.64e12 })}`)).toBe('exp_invalid');
    const last = await p.resolve(ctx(`Bearer ${await token({ exp: LAST })}`));
    expect(last!.expiresAt).toBe('9999-12-31T23:59:59.000Z');
  });

  it('property: every accepted exp becomes an expiry the kernel can read back', async () => {
    const hs = new JwtIdentityProvider({
      secret: SECRET,
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: AUDIENCE,
      tokenType: null,
      clock: () => T0,
      logger: quiet,
    });
    const key = new TextEncoder().encode(SECRET);
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.integer({ min: NOW - 120, max: LAST + 120 }), fc.constantFrom(LAST, LAST + 1, 8.64e12, 8.64e12 + 1, -1, 0, Number.MAX_SAFE_INTEGER)),
        async (exp) => {
          const out = await hs.resolve(ctx(`Bearer ${await token({ exp }, { alg: 'HS256' }, key)}`)).then(
            (principal) => ({ principal }),
            (err: unknown) => ({ err }),
          );
          if ('err' in out) {
            expect(out.err).toBeInstanceOf(CredentialRejected);
            expect(['expired', 'exp_invalid']).toContain((out.err as CredentialRejected).reason);
          } else {
            expect(parseTime(out.principal!.expiresAt!).getTime()).toBe(exp * 1000);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('test_an_unreadable_principal_expiry_is_an_IdentityError_and_nothing_is_written', async () => {
    const store = await createSqlJsStore({ clock: () => T0 });
    const control = new Control({
      policy: loadPolicy('schema: ctrlrun.policy/v1\nactions:\n  stripe.refund: {decision: allow}\n'),
      store,
      clock: () => T0,
      ids: sequentialIds(),
      logger: quiet,
    });
    // What an unchecked provider renders for exp = 253402300800: a six-digit signed year.
    const action = createAction({
      name: 'stripe.refund',
      arguments: { amount: 5 },
      principal: { agent: 'support-agent', expiresAt: new Date((LAST + 1) * 1000).toISOString() },
    });
    let ran = false;
    const err = await control.execute(action, () => void (ran = true)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdentityError);
    expect(err).toMatchObject({ code: 'ERR_IDENTITY', reason: 'expires_at_invalid' });
    expect(ran).toBe(false);
    expect(await store.events()).toEqual([]);
    expect(await store.receipts()).toEqual([]);
    await expect(control.evaluate(action)).rejects.toMatchObject({ code: 'ERR_IDENTITY', reason: 'expires_at_invalid' });
    // Through a provider, the same: an identity error, not a malformed request.
    const lenient = new Control({
      policy: loadPolicy('schema: ctrlrun.policy/v1\nactions:\n  stripe.refund: {decision: allow}\n'),
      store,
      clock: () => T0,
      logger: quiet,
      identity: { resolve: () => ({ agent: 'support-agent', user: null, expiresAt: '+010000-01-01T00:00:00.000Z' }) },
    });
    const refund = protect(() => 'ran', { control: lenient, name: 'stripe.refund' });
    await expect(refund({ amount: 5 })).rejects.toMatchObject({ code: 'ERR_IDENTITY', reason: 'expires_at_invalid' });
    expect(await store.events()).toEqual([]);
    await store.close();
  });
});

describe('T92: an optional dependency, never loaded by the kernel entry', () => {
  it('test_T92_constructing_without_the_extra_names_the_install_command', async () => {
    const missing = () => Promise.reject(Object.assign(new Error("Cannot find package 'jose'"), { code: 'ERR_MODULE_NOT_FOUND' }));
    const err = await createJwtIdentityProvider({
      secret: SECRET,
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: AUDIENCE,
      tokenType: null,
      logger: quiet,
      loadJose: missing,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MissingDependency);
    expect((err as Error).message).toMatch(/npm install jose/);
    expect(err).toMatchObject({ module: 'jose', code: 'ERR_MISSING_DEPENDENCY' });
    expect(
      await createJwtIdentityProvider({ secret: SECRET, algorithms: ['HS256'], issuer: ISSUER, audience: AUDIENCE, tokenType: null, logger: quiet }),
    ).toBeInstanceOf(JwtIdentityProvider);
  });

  it('test_T92_importing_ctrlrun_pulls_in_no_jwt_module', async () => {
    const entry = fileURLToPath(new URL('../src/index.ts', import.meta.url));
    const result = await build({
      entryPoints: [entry],
      bundle: true,
      write: false,
      metafile: true,
      format: 'esm',
      platform: 'neutral',
      logLevel: 'silent',
      external: ['@noble/hashes', 'yaml', '@noble/hashes/*'],
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.some((f) => f.endsWith('src/index.ts'))).toBe(true);
    expect(inputs.filter((f) => /jose|src\/jwt\.ts$/.test(f))).toEqual([]);
    const imports = Object.values(result.metafile.outputs).flatMap((o) => o.imports.map((i) => i.path));
    expect(imports.filter((i) => i.includes('jose'))).toEqual([]);
  });

  it('test_the_package_never_encodes_a_token', () => {
    const source = readFileSync(fileURLToPath(new URL('../src/jwt.ts', import.meta.url)), 'utf8');
    for (const signer of ['SignJWT', 'CompactSign', 'FlattenedSign', 'GeneralSign', 'EncryptJWT', 'UnsecuredJWT', 'jose.sign', '.sign('])
      expect(source).not.toContain(signer);
  });
});

describe('the provider behind Control and protect', () => {
  it('the token names who acts; a rejected token leaves no evidence', async () => {
    const store = await createSqlJsStore({ clock: () => T0 });
    const { p } = provider();
    const control = new Control({
      policy: loadPolicy(
        'schema: ctrlrun.policy/v3\nauthority:\n  grants:\n    - id: support\n      subject: { agent: support-agent }\n      actions: [stripe.refund]\nactions:\n  stripe.refund: {decision: allow}\n',
      ),
      store,
      clock: () => T0,
      ids: sequentialIds(),
      identity: p,
      logger: quiet,
    });
    const refund = protect((args) => ({ ok: args['amount'] }), { control, name: 'stripe.refund' });
    expect(await refund({ amount: 5 }, { headers: { Authorization: `Bearer ${await token({ email: 'alice@example.com', role: 'support' })}` } })).toEqual({
      ok: 5,
    });
    const [receipt] = await store.receipts();
    expect(JSON.parse(receipt!.json!).principal).toEqual({
      agent: 'support-agent',
      user: 'alice@example.com',
      claims: { role: 'support' },
      issuer: ISSUER,
      expires_at: new Date((NOW + 300) * 1000).toISOString(),
    });
    const events = (await store.events()).length;
    const err = await refund({ amount: 5 }, { headers: { authorization: `Bearer ${await token({ exp: NOW - 3600 })}` } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdentityError);
    expect((await store.events()).length).toBe(events);
    expect(await store.receipts()).toHaveLength(1);
    // No header at all: a decline, and under authority that is no_principal.
    expect(await refund({ amount: 5 }).catch((e: unknown) => e)).toMatchObject({ reason: 'no_principal' });
    await store.close();
  });
});
