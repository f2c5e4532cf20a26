/**
 * `--identity-jwt` and its companion flags (docs/spec/04-surfaces.md §5), shared by `ctrlrun gateway` and
 * `ctrlrun mcp-operator`: each request names its caller with a signed token (a bearer JWT in the
 * `authorization` header, by default), verified by the kernel's {@link JwtIdentityProvider}
 * against a JWKS URL, a public key file or a shared secret file.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { JwtIdentityOptions, JwtIdentityProvider } from '@ctrlrun/kernel/jwt';
import type { OptionSpec } from './command.js';
import { UsageError } from './errors.js';

/** The flags, each `--identity-jwt-<name>`. */
export const JWT_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  'identity-jwt': {
    type: 'boolean',
    help: 'or: each request names its caller with a signed JWT (needs the -algorithms, -issuer, -audience, -token-type flags)',
  },
  'identity-jwt-algorithms': { type: 'string', multiple: true, value: 'ALG', help: 'an algorithm a token may use (repeatable: RS256, ES256, EdDSA, HS256 …)' },
  'identity-jwt-issuer': { type: 'string', value: 'ISS', help: 'the exact iss required' },
  'identity-jwt-audience': { type: 'string', value: 'AUD', help: 'the audience aud must contain' },
  'identity-jwt-token-type': { type: 'string', value: 'TYP', help: 'the typ required (e.g. jwt, at+jwt); "" accepts any' },
  'identity-jwt-jwks-url': { type: 'string', value: 'URL', help: 'the issuer key set (https://…); or:' },
  'identity-jwt-public-key': { type: 'string', value: 'FILE', help: 'a PEM public key file (SPKI); or:' },
  'identity-jwt-secret-file': { type: 'string', value: 'FILE', help: 'a file holding the shared secret (HS* algorithms only)' },
  'identity-jwt-header': { type: 'string', value: 'H', help: 'the header carrying "Bearer <token>" (default authorization)' },
  'identity-jwt-agent-claim': { type: 'string', value: 'CLAIM', help: 'the claim naming the agent (default sub)' },
  'identity-jwt-user-claim': { type: 'string', value: 'CLAIM', help: 'the claim naming the human (default: none)' },
  'identity-jwt-claim': { type: 'string', multiple: true, value: 'CLAIM', help: 'a claim copied onto the principal (repeatable; none by default)' },
  'identity-jwt-leeway': { type: 'string', value: 'SECONDS', help: 'clock skew tolerated on exp/nbf (default 60)' },
  'identity-jwt-jwks-min-refresh': { type: 'string', value: 'SECONDS', help: 'no JWKS refetch within this long of the last (default 30)' },
  'identity-jwt-http-timeout': { type: 'string', value: 'SECONDS', help: 'JWKS fetch timeout (default 5)' },
};

const REQUIRED = ['identity-jwt-algorithms', 'identity-jwt-issuer', 'identity-jwt-audience', 'identity-jwt-token-type'] as const;

function seconds(value: unknown, flag: string, fallback: number, zero: boolean): number {
  if (value === undefined) return fallback;
  const text = String(value);
  if (!(zero ? /^(0|[1-9]\d{0,6})$/ : /^[1-9]\d{0,6}$/).test(text)) {
    throw new UsageError(`${flag} must be a ${zero ? 'non-negative' : 'positive'} whole number of seconds, got ${JSON.stringify(text)}`);
  }
  return Number(text) * 1000;
}

function text(values: Readonly<Record<string, unknown>>, name: string): string | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.trim() === '') throw new UsageError(`--${name} is blank`);
  return v;
}

function readFlagFile(cwd: string, path: string, flag: string): string {
  try {
    return readFileSync(resolve(cwd, path), 'utf8');
  } catch (err) {
    throw new UsageError(`${flag} ${JSON.stringify(path)} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/**
 * The provider's options from the flags, or null without `--identity-jwt`. A companion flag
 * without `--identity-jwt`, a missing required one, or not exactly one key source is refused,
 * naming the flag.
 */
export function jwtOptionsFrom(values: Readonly<Record<string, unknown>>, cwd: string): JwtIdentityOptions | null {
  const given = Object.keys(JWT_OPTIONS).filter((k) => k !== 'identity-jwt' && values[k] !== undefined);
  if (values['identity-jwt'] !== true) {
    if (given.length > 0) throw new UsageError(`--${given[0]} needs --identity-jwt`);
    return null;
  }
  const missing = REQUIRED.filter((k) => values[k] === undefined);
  if (missing.length > 0) throw new UsageError(`--identity-jwt needs ${missing.map((k) => `--${k}`).join(', ')}`);
  const sources = ['identity-jwt-jwks-url', 'identity-jwt-public-key', 'identity-jwt-secret-file'].filter((k) => values[k] !== undefined);
  if (sources.length !== 1) {
    throw new UsageError(
      `--identity-jwt needs exactly one key source: --identity-jwt-jwks-url, --identity-jwt-public-key or --identity-jwt-secret-file (${sources.length === 0 ? 'none' : sources.map((k) => `--${k}`).join(' and ')} given)`,
    );
  }
  const algorithms = values['identity-jwt-algorithms'] as string[];
  const tokenType = values['identity-jwt-token-type'] as string;
  const options: JwtIdentityOptions = {
    algorithms,
    issuer: text(values, 'identity-jwt-issuer')!,
    audience: text(values, 'identity-jwt-audience')!,
    tokenType: tokenType === '' ? null : tokenType,
    leeway: seconds(values['identity-jwt-leeway'], '--identity-jwt-leeway', 60_000, true),
    jwksMinRefreshInterval: seconds(values['identity-jwt-jwks-min-refresh'], '--identity-jwt-jwks-min-refresh', 30_000, true),
    httpTimeout: seconds(values['identity-jwt-http-timeout'], '--identity-jwt-http-timeout', 5_000, false),
  };
  const jwksUrl = text(values, 'identity-jwt-jwks-url');
  if (jwksUrl !== undefined) options.jwksUrl = jwksUrl;
  const keyFile = text(values, 'identity-jwt-public-key');
  if (keyFile !== undefined) options.publicKey = readFlagFile(cwd, keyFile, '--identity-jwt-public-key');
  const secretFile = text(values, 'identity-jwt-secret-file');
  if (secretFile !== undefined) options.secret = readFlagFile(cwd, secretFile, '--identity-jwt-secret-file').replace(/\r?\n$/, '');
  const header = text(values, 'identity-jwt-header');
  if (header !== undefined) options.header = header;
  const agentClaim = text(values, 'identity-jwt-agent-claim');
  if (agentClaim !== undefined) options.agentClaim = agentClaim;
  const userClaim = text(values, 'identity-jwt-user-claim');
  if (userClaim !== undefined) options.userClaim = userClaim;
  const claims = values['identity-jwt-claim'] as string[] | undefined;
  if (claims !== undefined) options.claimNames = claims;
  return options;
}

/** The provider, its options checked by the kernel (a bad option is a usage error naming it). */
export async function jwtProvider(options: JwtIdentityOptions, warn: (message: string) => void): Promise<JwtIdentityProvider> {
  const { createJwtIdentityProvider } = await import('@ctrlrun/kernel/jwt');
  try {
    return await createJwtIdentityProvider({ ...options, logger: { warn } });
  } catch (err) {
    throw new UsageError(`--identity-jwt: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** The startup line naming the identity source. */
export function jwtIdentityLine(options: JwtIdentityOptions): string {
  const key = options.jwksUrl !== undefined ? `JWKS ${options.jwksUrl}` : options.publicKey !== undefined ? 'a public key file' : 'a shared secret file';
  return `identity jwt (issuer ${options.issuer}, audience ${options.audience}, ${options.algorithms.join('/')}, ${key}, header ${options.header ?? 'authorization'})`;
}
