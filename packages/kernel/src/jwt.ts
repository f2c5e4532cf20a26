/**
 * `@ctrlrun/kernel/jwt`: a JWT identity provider (docs/spec/02-authority-observe-verify.md §1.6) on `jose`, which uses Web
 * Crypto and so runs in browsers, workerd, Deno and Node. `jose` is an optional peer dependency:
 * the kernel's main entry never imports this module, and this module loads `jose` only when a
 * provider is built ({@link createJwtIdentityProvider}) or first used.
 *
 * The algorithm comes from the configured list, never from the token. Every refusal is an
 * {@link CredentialRejected} (`IdentityError`, message "the credential was rejected") whose
 * `reason` says which check failed; the detail is only logged. Only the configured
 * `claimNames` reach the principal. This module verifies tokens; it never makes one.
 *
 * @module
 */
import { createPrincipal, type ClaimValue, type Principal } from './action.js';
import { isPlainObject } from './canonical.js';
import { IdentityError, InvalidArgument, MissingDependency } from './errors.js';
import type { IdentityContext, IdentityLogger, IdentityProvider } from './identity.js';
import { systemClock, type Clock } from './time.js';
import { maskUrl } from './mask-url.js';

type Jose = typeof import('jose');
type VerifyKey = Parameters<Jose['compactVerify']>[1];

/** Which check refused a credential. */
export type JwtRefusalReason =
  | 'not_bearer'
  | 'malformed'
  | 'algorithm_not_allowed'
  | 'token_type_mismatch'
  | 'kid_missing'
  | 'unknown_key'
  | 'ambiguous_key'
  | 'key_algorithm_mismatch'
  | 'key_unusable'
  | 'jwks_unavailable'
  | 'bad_signature'
  | 'exp_missing'
  | 'exp_invalid'
  | 'iss_missing'
  | 'issuer_mismatch'
  | 'expired'
  | 'nbf_invalid'
  | 'not_yet_valid'
  | 'audience_mismatch'
  | 'agent_claim_invalid'
  | 'user_claim_invalid';

/** A rejected credential: an `IdentityError` whose `reason` names the failed check. */
export class CredentialRejected extends IdentityError {
  override name = 'CredentialRejected';
  declare readonly reason: JwtRefusalReason;
  constructor(reason: JwtRefusalReason, options: { cause?: unknown } = {}) {
    super('the credential was rejected', { reason, cause: options.cause });
  }
}

/** Options of {@link JwtIdentityProvider}. Durations are milliseconds. */
export interface JwtIdentityOptions {
  /** An `https:` JWKS URL. Exactly one of `jwksUrl`, `publicKey`, `secret`. */
  jwksUrl?: string;
  /**
   * A public key: SPKI PEM text (`-----BEGIN PUBLIC KEY-----…`), a JWK object, a Web Crypto
   * `CryptoKey` of type `public` (what `jose`'s `importSPKI`/`importJWK` and
   * `crypto.subtle.importKey` return), or a Node `KeyObject` of type `public`
   * (`crypto.createPublicKey`). A private or secret key is refused. Paths are read by the CLI.
   */
  publicKey?: string | Record<string, unknown> | CryptoKey | PublicKeyObject;
  /** A shared secret, for `HS*` algorithms only. */
  secret?: string | Uint8Array;
  /** The algorithms a token may use (`RS256`, `ES256`, `EdDSA`, `HS256`, …); `none` is refused. */
  algorithms: readonly string[];
  /** The exact `iss` required; also the principal's `issuer`. */
  issuer: string;
  /** The audience `aud` must contain exactly. */
  audience: string;
  /** The required `typ` (lower-cased, minus `application/`), or `null` to accept any (warns). */
  tokenType: string | null;
  /** The request header carrying `Bearer <token>`; default `authorization`. */
  header?: string;
  /** The claim naming the agent; default `sub`. */
  agentClaim?: string;
  /** The claim naming the user, or null (default): no user. */
  userClaim?: string | null;
  /** The only claims copied onto the principal (flat keys; string, integer or boolean values). */
  claimNames?: readonly string[];
  /** Clock skew tolerated on `exp`/`nbf`; default 60 000. */
  leeway?: number;
  /** No JWKS refresh within this long of the last; default 30 000. */
  jwksMinRefreshInterval?: number;
  /**
   * How long a fetched JWKS is trusted; default 600 000 (10 minutes), at least
   * `jwksMinRefreshInterval`. Past it the cached keys are not used: the set is fetched again (at
   * most once per `jwksMinRefreshInterval`, however many tokens arrive), so a key the issuer
   * removed stops verifying within this long. Until a refetch succeeds, tokens are refused
   * (`jwks_unavailable`): a stale key set is never trusted instead.
   */
  jwksMaxAge?: number;
  /** JWKS fetch timeout; default 5 000. */
  httpTimeout?: number;
  clock?: Clock;
  /** The `fetch` used for the JWKS (injected in tests); default `globalThis.fetch`. */
  fetch?: typeof fetch;
  logger?: IdentityLogger;
  /** How `jose` is loaded; default `import('jose')`. */
  loadJose?: () => Promise<Jose>;
}

/**
 * A Node `KeyObject` (`crypto.createPublicKey(…)`), described by shape so this module stays free
 * of Node APIs: `jose` verifies with it as it is.
 */
export interface PublicKeyObject {
  /** `'public'`; a `'private'` or `'secret'` KeyObject is refused at construction. */
  readonly type: string;
  readonly asymmetricKeyType?: string;
  export(options?: unknown): unknown;
}

/** A key object `jose` verifies with directly, or null when `v` is not one (text, a JWK). */
function keyObject(v: unknown): CryptoKey | PublicKeyObject | null {
  if (typeof CryptoKey === 'function' && v instanceof CryptoKey) {
    if (v.type !== 'public') throw new InvalidArgument(`publicKey must be a public key, got a ${v.type} CryptoKey`);
    if (!v.usages.includes('verify')) throw new InvalidArgument("publicKey is a CryptoKey without the 'verify' usage");
    return v;
  }
  if (typeof v === 'object' && v !== null && !isPlainObject(v) && 'type' in v && typeof (v as { export?: unknown }).export === 'function') {
    const type = (v as { type: unknown }).type;
    if (type !== 'public') throw new InvalidArgument(`publicKey must be a public key, got a ${String(type)} KeyObject`);
    return v as PublicKeyObject;
  }
  return null;
}

interface Jwk {
  kid?: unknown;
  alg?: unknown;
  use?: unknown;
  key_ops?: unknown;
  [k: string]: unknown;
}

/**
 * The last second a principal's `expires_at` can name: 9999-12-31T23:59:59Z. Past it, the ISO
 * form has a six-digit signed year that no stored timestamp accepts, so such an `exp` is refused
 * here, as the credential's fault, rather than later as a malformed action.
 */
const MAX_EXP_SECONDS = 253_402_300_799;

function nonEmpty(v: unknown, what: string): string {
  if (typeof v !== 'string' || v.trim() === '') throw new InvalidArgument(`${what} must be a non-empty string`);
  return v;
}

function duration(v: unknown, fallback: number, what: string, allowZero: boolean): number {
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0 || (!allowZero && v === 0)) {
    throw new InvalidArgument(`${what} must be a ${allowZero ? 'non-negative' : 'positive'} whole number of milliseconds, got ${String(v)}`);
  }
  return v;
}

function isHmac(alg: string): boolean {
  return alg.startsWith('HS');
}

/**
 * A JWT identity provider: `Authorization: Bearer <token>` → a verified principal, or a
 * {@link CredentialRejected}; no header → `null` (a decline). Configuration errors are
 * `InvalidArgument`s at construction.
 */
export class JwtIdentityProvider implements IdentityProvider {
  readonly algorithms: readonly string[];
  readonly issuer: string;
  readonly audience: string;
  readonly tokenType: string | null;
  readonly header: string;
  readonly agentClaim: string;
  readonly userClaim: string | null;
  readonly claimNames: readonly string[];
  readonly #jwksUrl: string | null;
  readonly #publicKey: string | Record<string, unknown> | null;
  readonly #keyObject: CryptoKey | PublicKeyObject | null;
  readonly #secret: Uint8Array | null;
  readonly #leeway: number;
  readonly #minRefresh: number;
  readonly #maxAge: number;
  readonly #timeout: number;
  readonly #clock: Clock;
  readonly #fetch: typeof fetch | null;
  readonly #logger: IdentityLogger;
  readonly #loadJose: () => Promise<Jose>;
  #jose: Promise<Jose> | null = null;
  readonly #staticKeys = new Map<string, Promise<VerifyKey>>();
  #jwks: Jwk[] | null = null;
  /** When a fetch was last attempted (the flood guard counts from here). */
  #lastFetch: number | null = null;
  /** When the cached key set was fetched (its age counts from here). */
  #fetchedAt: number | null = null;
  #fetching: Promise<void> | null = null;

  constructor(options: JwtIdentityOptions) {
    if (!isPlainObject(options)) throw new InvalidArgument('JwtIdentityProvider takes an options object');
    const sources = (['jwksUrl', 'publicKey', 'secret'] as const).filter((k) => options[k] !== undefined && options[k] !== null);
    if (sources.length !== 1)
      throw new InvalidArgument(`exactly one of jwksUrl, publicKey, secret is required, got ${sources.length ? sources.join(', ') : 'none'}`);
    if (!Array.isArray(options.algorithms) || options.algorithms.length === 0)
      throw new InvalidArgument('algorithms must be a non-empty list: the algorithm comes from here, never from the token');
    for (const alg of options.algorithms) {
      nonEmpty(alg, 'each algorithm');
      if (alg.toLowerCase() === 'none') throw new InvalidArgument("algorithm 'none' is refused: an unsigned token proves nothing");
      if (isHmac(alg) && sources[0] !== 'secret')
        throw new InvalidArgument(`${alg} is a shared-secret algorithm and needs secret, not ${sources[0]}: with a public key anyone could sign`);
      if (!isHmac(alg) && sources[0] === 'secret') throw new InvalidArgument(`${alg} is a public-key algorithm and cannot be verified with a secret`);
    }
    this.algorithms = Object.freeze([...options.algorithms]);
    this.issuer = nonEmpty(options.issuer, 'issuer');
    this.audience = nonEmpty(options.audience, 'audience');
    if (options.tokenType === undefined) throw new InvalidArgument("tokenType is required: the expected 'typ' (e.g. 'at+jwt'), or null to accept any");
    this.tokenType =
      options.tokenType === null
        ? null
        : nonEmpty(options.tokenType, 'tokenType')
            .toLowerCase()
            .replace(/^application\//, '');
    this.header = nonEmpty(options.header ?? 'authorization', 'header').toLowerCase();
    this.agentClaim = nonEmpty(options.agentClaim ?? 'sub', 'agentClaim');
    this.userClaim = options.userClaim === undefined || options.userClaim === null ? null : nonEmpty(options.userClaim, 'userClaim');
    const names = options.claimNames ?? [];
    if (!Array.isArray(names)) throw new InvalidArgument('claimNames must be a list of claim names');
    this.claimNames = Object.freeze(names.map((n) => nonEmpty(n, 'each claim name')));
    this.#leeway = duration(options.leeway, 60_000, 'leeway', true);
    this.#minRefresh = duration(options.jwksMinRefreshInterval, 30_000, 'jwksMinRefreshInterval', true);
    this.#maxAge = duration(options.jwksMaxAge, Math.max(600_000, this.#minRefresh), 'jwksMaxAge', false);
    if (this.#maxAge < this.#minRefresh) {
      throw new InvalidArgument(
        `jwksMaxAge (${this.#maxAge}) must be at least jwksMinRefreshInterval (${this.#minRefresh}): an expired key set could not be fetched again in time`,
      );
    }
    this.#timeout = duration(options.httpTimeout, 5_000, 'httpTimeout', false);
    if (options.clock !== undefined && typeof options.clock !== 'function') throw new InvalidArgument('clock must be a function returning a Date');
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? console;
    this.#loadJose = options.loadJose ?? (() => import('jose'));
    this.#jwksUrl = null;
    this.#publicKey = null;
    this.#keyObject = null;
    this.#secret = null;
    this.#fetch = null;
    if (sources[0] === 'jwksUrl') {
      const url = nonEmpty(options.jwksUrl, 'jwksUrl');
      let parsed: URL;
      try {
        parsed = new URL(url);
      } catch {
        throw new InvalidArgument(`jwksUrl ${JSON.stringify(maskUrl(url))} is not a URL`);
      }
      if (parsed.protocol !== 'https:') throw new InvalidArgument(`jwksUrl must be https:, got ${parsed.protocol}`);
      // fetch refuses a URL holding credentials, and its error would quote the URL whole.
      if (parsed.username !== '' || parsed.password !== '')
        throw new InvalidArgument(`jwksUrl ${JSON.stringify(maskUrl(url))} holds credentials (user:password@ before the host), which fetch refuses to send`);
      this.#jwksUrl = parsed.href;
      const f = options.fetch ?? (globalThis as { fetch?: typeof fetch }).fetch;
      if (typeof f !== 'function') throw new InvalidArgument('a JWKS URL needs fetch (globalThis.fetch, or the fetch option)');
      this.#fetch = f;
    } else if (sources[0] === 'publicKey') {
      const key = options.publicKey!;
      const object = keyObject(key);
      if (object !== null) {
        this.#keyObject = object;
      } else if (typeof key === 'string') {
        if (!key.trimStart().startsWith('-----BEGIN'))
          throw new InvalidArgument(
            'publicKey must be PEM text (-----BEGIN PUBLIC KEY-----), a JWK, a public CryptoKey or a public KeyObject; a path is read by the CLI, not the kernel',
          );
        this.#publicKey = key;
      } else if (isPlainObject(key)) {
        this.#publicKey = key as Record<string, unknown>;
      } else {
        throw new InvalidArgument('publicKey must be PEM text, a JWK object, a public CryptoKey or a public KeyObject');
      }
    } else {
      const secret = options.secret!;
      const bytes = typeof secret === 'string' ? new TextEncoder().encode(secret) : secret;
      if (!(bytes instanceof Uint8Array) || bytes.length === 0) throw new InvalidArgument('secret must be a non-empty string or Uint8Array');
      this.#secret = bytes;
    }
    if (this.tokenType === null)
      this.#logger.warn("[ctrlrun] JwtIdentityProvider: tokenType is null, so any 'typ' is accepted; an ID token could be replayed as an access token");
  }

  /** Loads `jose` (once); a missing install is a {@link MissingDependency} naming the command. */
  async ready(): Promise<Jose> {
    this.#jose ??= this.#loadJose().catch(() => {
      this.#jose = null;
      throw new MissingDependency('jose', 'jose', { message: 'the JWT identity provider needs jose, which is not installed: npm install jose' });
    });
    return this.#jose;
  }

  async resolve(context: IdentityContext): Promise<Principal | null> {
    const raw = context.headers[this.header];
    if (raw === undefined) return null;
    const m = /^bearer[ \t]+([^\s]+)[ \t]*$/i.exec(raw);
    if (!m) return this.#refuse('not_bearer', `the ${this.header} header is not 'Bearer <token>'`);
    const token = m[1]!;
    const jose = await this.ready();

    // (1) The token's alg only selects among the configured ones; it is then the verification algorithm.
    let header: Record<string, unknown>;
    try {
      if (token.split('.').length !== 3) throw new Error('not a compact JWS (three dot-separated parts)');
      header = jose.decodeProtectedHeader(token) as Record<string, unknown>;
    } catch (err) {
      return this.#refuse('malformed', err);
    }
    const alg = header['alg'];
    if (typeof alg !== 'string' || !this.algorithms.includes(alg))
      return this.#refuse('algorithm_not_allowed', `alg ${JSON.stringify(alg)} is not one of ${this.algorithms.join(', ')}`);
    // (2) The token type, when configured.
    if (this.tokenType !== null) {
      const typ = header['typ'];
      if (typeof typ !== 'string' || typ.toLowerCase().replace(/^application\//, '') !== this.tokenType) {
        return this.#refuse('token_type_mismatch', `typ ${JSON.stringify(typ)} is not ${this.tokenType}`);
      }
    }
    // (3) The key.
    const key = await this.#key(jose, alg, header['kid']);
    // (4) The signature, with the configured algorithm only.
    let payloadBytes: Uint8Array;
    try {
      payloadBytes = (await jose.compactVerify(token, key, { algorithms: [alg] })).payload;
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      return this.#refuse(code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' ? 'bad_signature' : 'malformed', err);
    }
    let claims: unknown;
    try {
      claims = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payloadBytes));
    } catch (err) {
      return this.#refuse('malformed', err);
    }
    if (!isPlainObject(claims)) return this.#refuse('malformed', 'the payload is not a JSON object');
    const exp = claims['exp'];
    if (exp === undefined) return this.#refuse('exp_missing', 'no exp: a token that never expires cannot be revoked');
    const iss = claims['iss'];
    if (iss === undefined) return this.#refuse('iss_missing', 'no iss');
    if (iss !== this.issuer) return this.#refuse('issuer_mismatch', `iss ${JSON.stringify(iss)} is not ${JSON.stringify(this.issuer)}`);
    // (5) Time, against the injected clock. `Number.isInteger` accepts 1700000000.0, which
    // JSON cannot tell from 1700000000 (a documented divergence from the original).
    const now = this.#clock().getTime() / 1000;
    const leeway = this.#leeway / 1000;
    if (typeof exp !== 'number' || !Number.isInteger(exp) || exp < 0 || exp > MAX_EXP_SECONDS) {
      return this.#refuse('exp_invalid', `exp ${JSON.stringify(exp)} is not an integer time between 1970 and 9999-12-31T23:59:59Z`);
    }
    if (exp + leeway < now) return this.#refuse('expired', `expired at ${exp}`);
    const nbf = claims['nbf'];
    if (nbf !== undefined) {
      if (typeof nbf !== 'number' || !Number.isInteger(nbf)) return this.#refuse('nbf_invalid', `nbf ${JSON.stringify(nbf)} is not an integer time`);
      if (nbf - leeway > now) return this.#refuse('not_yet_valid', `not valid before ${nbf}`);
    }
    // (6) The audience, exactly (never a substring).
    const aud = claims['aud'];
    const audiences = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud : [];
    if (!audiences.some((a) => a === this.audience))
      return this.#refuse('audience_mismatch', `aud ${JSON.stringify(aud)} does not contain ${JSON.stringify(this.audience)}`);
    // (7) The principal: agent, user, the configured issuer, the expiry, and only the named claims.
    const agent = claims[this.agentClaim];
    if (typeof agent !== 'string' || agent === '') return this.#refuse('agent_claim_invalid', `claim ${this.agentClaim} is not a non-empty string`);
    let user: string | null = null;
    if (this.userClaim !== null) {
      const u = claims[this.userClaim];
      if (u !== undefined && u !== null) {
        if (typeof u !== 'string' || u === '') return this.#refuse('user_claim_invalid', `claim ${this.userClaim} is not a non-empty string`);
        user = u;
      }
    }
    let named: Record<string, ClaimValue> | null = null;
    if (this.claimNames.length > 0) {
      const kept: [string, ClaimValue][] = [];
      for (const name of this.claimNames) {
        if (!Object.prototype.hasOwnProperty.call(claims, name)) continue;
        const v = claims[name];
        if (typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isSafeInteger(v))) kept.push([name, v]);
        // A list of non-empty strings (a roles claim, as the original reads approver roles).
        else if (Array.isArray(v) && v.every((r) => typeof r === 'string' && r !== '')) kept.push([name, Object.freeze([...(v as string[])])]);
        else this.#logger.warn(`[ctrlrun] JwtIdentityProvider: claim ${name} is not a string, integer, boolean or list of strings; left off the principal`);
      }
      // Entries, not `named[name] = v`: a claim named `__proto__` stays a claim.
      named = Object.fromEntries(kept);
    }
    return createPrincipal({ agent, user, claims: named, issuer: this.issuer, expiresAt: new Date(exp * 1000).toISOString() });
  }

  #refuse(reason: JwtRefusalReason, detail: unknown): never {
    const text = detail instanceof Error ? `${detail.name}: ${detail.message}` : String(detail);
    this.#logger.warn(`[ctrlrun] JwtIdentityProvider: credential rejected (${reason}): ${text}`);
    throw new CredentialRejected(reason, { cause: detail });
  }

  async #key(jose: Jose, alg: string, kid: unknown): Promise<VerifyKey> {
    if (this.#secret !== null) return this.#secret;
    if (this.#keyObject !== null) return this.#keyObject as VerifyKey;
    if (this.#publicKey !== null) {
      const pk = this.#publicKey;
      let key = this.#staticKeys.get(alg);
      if (!key) {
        key = typeof pk === 'string' ? jose.importSPKI(pk, alg) : (jose.importJWK(pk as Parameters<Jose['importJWK']>[0], alg) as Promise<VerifyKey>);
        this.#staticKeys.set(alg, key);
      }
      try {
        return await key;
      } catch (err) {
        this.#staticKeys.delete(alg);
        return this.#refuse('key_unusable', err);
      }
    }
    if (typeof kid !== 'string' || kid === '') return this.#refuse('kid_missing', 'a JWKS key is chosen by kid, and the token names none');
    // At most one refresh per call, and none within the minimum interval of the last; a fetch
    // already under way is joined (it costs nothing more).
    const now = this.#clock().getTime();
    const mayFetch = this.#fetching !== null || this.#lastFetch === null || now - this.#lastFetch >= this.#minRefresh;
    let refreshed = false;
    if (this.#fetchedAt === null || now - this.#fetchedAt >= this.#maxAge) {
      // Too old to trust (or never fetched): fetch again, or refuse; the old keys are not used.
      if (!mayFetch)
        return this.#refuse(
          'jwks_unavailable',
          this.#fetchedAt === null
            ? 'the JWKS could not be fetched yet'
            : 'the cached JWKS is older than jwksMaxAge and the last fetch was under jwksMinRefreshInterval ago',
        );
      await this.#refresh();
      refreshed = true;
    }
    let found = this.#find(kid);
    if (found === null && !refreshed && mayFetch) {
      await this.#refresh();
      found = this.#find(kid);
    }
    if (found === null) return this.#refuse('unknown_key', `no usable key with kid ${JSON.stringify(kid)}`);
    if (found === 'ambiguous') return this.#refuse('ambiguous_key', `two usable keys share kid ${JSON.stringify(kid)}`);
    if (found.alg !== undefined && found.alg !== alg)
      return this.#refuse('key_algorithm_mismatch', `key ${JSON.stringify(kid)} is for ${String(found.alg)}, the token says ${alg}`);
    try {
      return (await jose.importJWK(found as Parameters<Jose['importJWK']>[0], alg)) as VerifyKey;
    } catch (err) {
      return this.#refuse('key_unusable', err);
    }
  }

  /** The one usable key with `kid`, `'ambiguous'` for two, or null. */
  #find(kid: string): Jwk | 'ambiguous' | null {
    const usable = (this.#jwks ?? []).filter(
      (k) =>
        k.kid === kid && (k.use === undefined || k.use === 'sig') && (k.key_ops === undefined || (Array.isArray(k.key_ops) && k.key_ops.includes('verify'))),
    );
    if (usable.length > 1) return 'ambiguous';
    return usable[0] ?? null;
  }

  async #refresh(): Promise<void> {
    this.#fetching ??= this.#fetchJwks().finally(() => {
      this.#fetching = null;
    });
    return this.#fetching;
  }

  /** Fetches the JWKS: https only, no redirects, a timeout; a failure keeps the cache and refuses. */
  async #fetchJwks(): Promise<void> {
    this.#lastFetch = this.#clock().getTime();
    let body: unknown;
    try {
      const response = await this.#fetch!(this.#jwksUrl!, {
        redirect: 'error',
        signal: AbortSignal.timeout(this.#timeout),
        headers: { accept: 'application/json' },
      });
      if (response.url && !response.url.startsWith('https:')) throw new Error(`the JWKS answered from ${response.url}, not https`);
      if (!response.ok) throw new Error(`the JWKS answered ${response.status}`);
      body = await response.json();
    } catch (err) {
      return this.#refuse('jwks_unavailable', err);
    }
    const keys = isPlainObject(body) ? body['keys'] : undefined;
    if (!Array.isArray(keys)) return this.#refuse('jwks_unavailable', 'the JWKS document has no keys list');
    this.#jwks = keys.filter((k): k is Jwk => isPlainObject(k));
    this.#fetchedAt = this.#lastFetch;
  }
}

/**
 * Builds a {@link JwtIdentityProvider} and loads `jose`: a missing install is a
 * `MissingDependency` naming `npm install jose`, here rather than at the first request.
 */
export async function createJwtIdentityProvider(options: JwtIdentityOptions): Promise<JwtIdentityProvider> {
  const provider = new JwtIdentityProvider(options);
  await provider.ready();
  return provider;
}
