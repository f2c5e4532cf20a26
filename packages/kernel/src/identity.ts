/**
 * Where a principal comes from (docs/spec/02-authority-observe-verify.md §1.3–§1.5). An identity provider answers once per
 * action, before the action exists: a principal, `null` (a decline), or a throw (a refusal).
 * `Control.resolvePrincipal` applies the resolution table; the providers here are the two core
 * ones. The JWT provider lives in the `@ctrlrun/kernel/jwt` subpath.
 *
 * @module
 */
import { createPrincipal, type ClaimValue, type Principal } from './action.js';
import { isPlainObject } from './canonical.js';
import { InvalidArgument } from './errors.js';
import { parseTime } from './time.js';

/** What a provider is told about the call it is asked to identify. */
export interface IdentityContext {
  /** The action name. */
  readonly action: string;
  /** The deployment's environment (the Control's). */
  readonly environment: string;
  /** Request headers, names lower-cased; empty for in-process calls. */
  readonly headers: Readonly<Record<string, string>>;
  /** The per-call or default principal's agent: a hint, never an identity. */
  readonly agent: string | null;
  /** The per-call or default principal's user: a hint. */
  readonly user: string | null;
}

/** Resolves the principal of one call: a principal, `null` to decline, or a throw to refuse. */
export interface IdentityProvider {
  resolve(context: IdentityContext): Principal | null | Promise<Principal | null>;
}

/** Where providers warn. */
export interface IdentityLogger {
  warn(message: string, ...rest: unknown[]): void;
}

/** The fields of a fixed principal. `expiresAt` is ISO-8601 with an offset. */
export interface StaticIdentityOptions {
  agent: string;
  user?: string | null;
  claims?: Record<string, ClaimValue> | null;
  issuer?: string | null;
  expiresAt?: string | null;
}

/**
 * One fixed principal for every call (tests, single-tenant deployments). Warns once, at
 * construction, because every action is then attributed to the same principal.
 */
export class StaticIdentityProvider implements IdentityProvider {
  readonly principal: Principal;

  constructor(options: StaticIdentityOptions, config: { logger?: IdentityLogger } = {}) {
    if (!isPlainObject(options)) throw new InvalidArgument('StaticIdentityProvider takes { agent, user?, claims?, issuer?, expiresAt? }');
    this.principal = createPrincipal(options);
    // An expiry without an offset cannot be checked against any clock.
    if (this.principal.expiresAt !== undefined && this.principal.expiresAt !== null) parseTime(this.principal.expiresAt, 'expiresAt');
    (config.logger ?? console).warn(
      `[ctrlrun] StaticIdentityProvider: every call is attributed to ${this.principal.agent}${this.principal.user ? `/${this.principal.user}` : ''}; nothing is verified`,
    );
  }

  resolve(): Principal {
    return this.principal;
  }
}

/** Options of {@link HeaderIdentityProvider}. */
export interface HeaderIdentityOptions {
  /** The header naming the agent (case-insensitive). */
  agentHeader: string;
  /** The header naming the user, if any. */
  userHeader?: string | null;
  /** Who vouches for the headers (a trusted proxy), recorded as the principal's issuer. */
  issuer?: string | null;
}

function headerName(v: unknown, what: string): string {
  if (typeof v !== 'string' || v.trim() === '') throw new InvalidArgument(`${what} must be a non-empty header name`);
  return v.trim().toLowerCase();
}

/**
 * The principal named by request headers, set by a proxy you trust. An absent or blank agent
 * header declines (`null`); no claims. Warns once, at construction: a header is an assertion
 * unless something in front of the process strips and sets it.
 */
export class HeaderIdentityProvider implements IdentityProvider {
  readonly agentHeader: string;
  readonly userHeader: string | null;
  readonly issuer: string | null;

  constructor(options: HeaderIdentityOptions, config: { logger?: IdentityLogger } = {}) {
    if (!isPlainObject(options)) throw new InvalidArgument('HeaderIdentityProvider takes { agentHeader, userHeader?, issuer? }');
    this.agentHeader = headerName(options.agentHeader, 'agentHeader');
    this.userHeader = options.userHeader === undefined || options.userHeader === null ? null : headerName(options.userHeader, 'userHeader');
    if (options.issuer !== undefined && options.issuer !== null && (typeof options.issuer !== 'string' || options.issuer === '')) {
      throw new InvalidArgument('issuer must be null or a non-empty string');
    }
    this.issuer = options.issuer ?? null;
    (config.logger ?? console).warn(
      `[ctrlrun] HeaderIdentityProvider: the principal is whatever the ${this.agentHeader} header says; only use it behind a proxy that sets it`,
    );
  }

  resolve(context: IdentityContext): Principal | null {
    const agent = context.headers[this.agentHeader];
    if (agent === undefined || agent.trim() === '') return null;
    const user = this.userHeader === null ? undefined : context.headers[this.userHeader];
    return createPrincipal({ agent, user: user === undefined || user.trim() === '' ? null : user, issuer: this.issuer });
  }
}

/**
 * Request headers with lower-cased names. A name given twice (in two spellings) is refused:
 * which one names the principal would be a guess.
 */
export function normalizeHeaders(headers: Readonly<Record<string, string>> | undefined): Record<string, string> | 'repeated' {
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  if (headers === undefined || headers === null) return out;
  if (!isPlainObject(headers)) throw new InvalidArgument('headers must be a plain object of name → value');
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string') throw new InvalidArgument(`header ${name} must be a string`);
    const key = name.toLowerCase();
    if (key in out) return 'repeated';
    out[key] = value;
  }
  return out;
}
