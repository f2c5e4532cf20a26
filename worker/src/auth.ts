/**
 * Who is calling. The app asks an {@link Authenticator} for the caller's {@link Identity}; the
 * principal of an action comes from there, never from the request body. Static bearer tokens
 * ship here; a JWT provider is another `Authenticator` of the same shape.
 *
 * @module
 */
import { checkActor, IdentityError, InvalidArgument, type ClaimValue, type IdentityProvider, type VerifiedPrincipal } from '@ctrlrun/kernel';
import { sha256Tagged } from '@ctrlrun/kernel/store';

/** An agent: may propose actions, never answer approvals or resolve effects. */
export interface AgentIdentity {
  readonly role: 'agent';
  /** The principal every action of this caller is made under. */
  readonly principal: {
    readonly agent: string;
    readonly user?: string | null;
    readonly claims?: Readonly<Record<string, ClaimValue>> | null;
    readonly issuer?: string | null;
    readonly expiresAt?: string | null;
  };
}

/** An operator: answers approvals, resolves effects, reads evidence; recorded by `operator`. */
export interface OperatorIdentity {
  readonly role: 'operator';
  /** Recorded as the approver or resolver. */
  readonly operator: string;
  /**
   * The principal the credential verified (spec 05 §4.1): its answers are recorded as a verified
   * approver's, which is what counts toward `approvals_required` above one. Roles, when the
   * credential carries them, are a claim (`roles` for a static token).
   */
  readonly verified?: VerifiedPrincipal;
}

/** The agent name a static operator token's verified principal carries (its `user` is the operator). */
export const STATIC_OPERATOR_AGENT = 'operator';
/** The issuer a static operator token's verified principal names. */
export const STATIC_OPERATOR_ISSUER = 'ctrlrun-worker:token';

/** The caller, as an authenticator vouches for it. */
export type Identity = AgentIdentity | OperatorIdentity;

/**
 * Resolves a request's credential to an identity. `null` means no usable credential (401);
 * throwing `IdentityError` rejects it with a reason (401). Any other throw is a server error.
 */
export type Authenticator = (request: Request) => Identity | null | Promise<Identity | null>;

/** The token of an `Authorization: Bearer <token>` header; `null` if there is none. */
export function bearerToken(request: Request): string | null {
  const header = request.headers.get('authorization');
  if (header === null) return null;
  const m = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
  if (!m) throw new IdentityError('the Authorization header must be "Bearer <token>"');
  return m[1]!;
}

/** One static credential. */
export type StaticToken =
  | { readonly token: string; readonly role: 'agent'; readonly agent: string; readonly user?: string | null }
  | { readonly token: string; readonly role: 'operator'; readonly operator: string; readonly roles?: readonly string[] };

/** Tokens shorter than this are refused at configuration. */
export const MIN_TOKEN_LENGTH = 16;

const encoder = new TextEncoder();

/** Synchronous (the kernel's SHA-256): WebCrypto's digest costs a thread-pool round trip per request on Node. */
function digest(text: string): string {
  return sha256Tagged(encoder.encode(text));
}

/**
 * Whether two strings are equal, in time that depends only on their lengths. The callers
 * compare SHA-256 digests (`sha256:` + 64 hex), so the length is fixed and the presented
 * token's length and content do not show in the timing.
 */
export function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function identityOf(t: StaticToken): Identity {
  if (t.role === 'agent') return { role: 'agent', principal: { agent: t.agent, user: t.user ?? null } };
  const claims = t.roles === undefined ? null : { roles: [...t.roles] };
  return { role: 'operator', operator: t.operator, verified: { agent: STATIC_OPERATOR_AGENT, user: t.operator, issuer: STATIC_OPERATOR_ISSUER, claims } };
}

/**
 * Static bearer tokens. Each token is compared, as a SHA-256 digest, against every configured
 * one in constant time. Tokens must be at least {@link MIN_TOKEN_LENGTH} characters of the
 * bearer alphabet and distinct, so one secret can never carry both roles.
 */
export function staticTokens(tokens: readonly StaticToken[]): Authenticator {
  if (!Array.isArray(tokens) || tokens.length === 0) throw new InvalidArgument('staticTokens needs at least one { token, role, … }');
  const seen = new Set<string>();
  tokens.forEach((t, i) => {
    const at = `tokens[${i}]`;
    if (typeof t?.token !== 'string' || t.token.length < MIN_TOKEN_LENGTH || !/^[A-Za-z0-9\-._~+/]+=*$/.test(t.token)) {
      throw new InvalidArgument(`${at}.token must be at least ${MIN_TOKEN_LENGTH} characters of A-Z a-z 0-9 - . _ ~ + /`);
    }
    if (seen.has(t.token)) throw new InvalidArgument(`${at}.token is configured twice: every credential needs its own token`);
    seen.add(t.token);
    if (t.role === 'agent') {
      if (typeof t.agent !== 'string' || t.agent === '') throw new InvalidArgument(`${at}.agent must be a non-empty string`);
      if (t.user !== undefined && t.user !== null && (typeof t.user !== 'string' || t.user === ''))
        throw new InvalidArgument(`${at}.user must be null or a non-empty string`);
    } else if (t.role === 'operator') {
      checkActor(t.operator, `${at}.operator`);
      if (t.roles !== undefined && (!Array.isArray(t.roles) || !(t.roles as unknown[]).every((r) => typeof r === 'string' && r !== '' && r.trim() === r)))
        throw new InvalidArgument(`${at}.roles must be a list of non-empty role names with no surrounding whitespace`);
    } else {
      throw new InvalidArgument(`${at}.role must be "agent" or "operator"`);
    }
  });
  const table = tokens.map((t) => ({ digest: digest(t.token), identity: identityOf(t) }));
  return (request) => {
    const token = bearerToken(request);
    if (token === null) return null;
    const presented = digest(token);
    let found: Identity | null = null;
    // No early exit: every entry is compared, whichever matches.
    for (const entry of table) if (constantTimeEqual(presented, entry.digest)) found = entry.identity;
    if (found === null) throw new IdentityError('the bearer token is not valid');
    return found;
  };
}

/** A fresh random token (32 bytes, base64url): what the entry points print when none was set. */
export function generateToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * Agents vouched for by a kernel identity provider — e.g. `createJwtIdentityProvider` from
 * `@ctrlrun/kernel/jwt`: the token is verified there (algorithm from the configured list, issuer,
 * audience, expiry, key), and only its configured claims reach the principal. A provider can
 * only ever yield an agent; operators come from another authenticator (see {@link anyOf}).
 */
export function identityProviderAuth(provider: IdentityProvider, options: { environment: string }): Authenticator {
  if (!provider || typeof provider.resolve !== 'function') throw new InvalidArgument('identityProviderAuth needs an IdentityProvider');
  return async (request) => {
    // Prototype-free: a header named __proto__ stays a header, and an absent one reads undefined.
    const headers = Object.create(null) as Record<string, string>;
    request.headers.forEach((value, name) => {
      headers[name.toLowerCase()] = value;
    });
    // The action is not known until the body is read; a credential is judged on its own.
    const principal = await provider.resolve({ action: '', environment: options.environment, headers, agent: null, user: null });
    return principal ? { role: 'agent', principal } : null;
  };
}

/**
 * Operators vouched for by a kernel identity provider (e.g. `createJwtIdentityProvider` configured
 * for the operators' issuer and audience, with the roles claim among its claims): the principal it
 * resolves is the verified approver, recorded by its user (else its agent). Give operators their
 * own provider: every credential it accepts may answer approvals.
 */
export function identityProviderOperators(provider: IdentityProvider, options: { environment: string }): Authenticator {
  const agents = identityProviderAuth(provider, options);
  return async (request) => {
    const identity = await agents(request);
    if (identity === null || identity.role !== 'agent') return null;
    const p = identity.principal;
    return {
      role: 'operator',
      operator: p.user ?? p.agent,
      verified: { agent: p.agent, user: p.user ?? null, issuer: p.issuer ?? null, claims: p.claims ?? null },
    };
  };
}

/**
 * Tries each authenticator in turn: the first identity wins. One that rejects the credential
 * (`IdentityError`) lets the next try; if none vouches for it, the first rejection stands (401).
 */
export function anyOf(...authenticators: readonly Authenticator[]): Authenticator {
  if (authenticators.length === 0) throw new InvalidArgument('anyOf needs at least one authenticator');
  return async (request) => {
    let rejected: IdentityError | null = null;
    for (const authenticate of authenticators) {
      try {
        const identity = await authenticate(request);
        if (identity) return identity;
      } catch (err) {
        if (!(err instanceof IdentityError)) throw err;
        rejected ??= err;
      }
    }
    if (rejected) throw rejected;
    return null;
  };
}
