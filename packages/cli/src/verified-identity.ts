/**
 * A person verified from the command line: `--identity-jwt …` with `--approver-token-file FILE`
 * names them by their own signed token, verified as the gateway and mcp-operator verify theirs,
 * and `--approver-roles-claim CLAIM` says which claim lists their roles. Used by `approve`/`deny`
 * (who answers) and `break-glass open` (who opens).
 *
 * @module
 */
import { resolve as resolvePath } from 'node:path';
import type { ApproverIdentity, VerifiedPrincipal } from '@ctrlrun/kernel';
import type { Invocation } from './command.js';
import { CliRefusal, UsageError } from './errors.js';
import { readRegularFile } from './files.js';
import { jwtOptionsFrom, jwtProvider } from './jwt-options.js';

/** Who the token names: the human (`who`), the principal to record, and how roles are read. */
export interface VerifiedIdentity {
  readonly who: string;
  readonly principal: VerifiedPrincipal & { readonly expiresAt: string | null };
  readonly approvers: ApproverIdentity;
}

/**
 * The verified person, or null without `--identity-jwt` (then a token file or a roles claim is a
 * usage error). `use.commands` names the commands in messages, `use.who` what the token names,
 * `use.action` the action name the identity provider is asked about.
 */
export async function verifiedIdentity(inv: Invocation, use: { commands: string; who: string; action: string }): Promise<VerifiedIdentity | null> {
  const { values, io, err } = inv;
  const jwt = jwtOptionsFrom(values, io.cwd);
  const tokenFile = values['approver-token-file'] as string | undefined;
  const rolesClaim = values['approver-roles-claim'] as string | undefined;
  if (jwt === null) {
    if (tokenFile !== undefined || rolesClaim !== undefined)
      throw new UsageError(`--${tokenFile !== undefined ? 'approver-token-file' : 'approver-roles-claim'} needs --identity-jwt and its companion flags`);
    return null;
  }
  if (tokenFile === undefined) throw new UsageError(`--identity-jwt on ${use.commands} needs --approver-token-file: the token naming ${use.who}`);
  if (jwt.userClaim === undefined)
    throw new UsageError(`--identity-jwt on ${use.commands} needs --identity-jwt-user-claim: ${use.who} is recorded as the human the token names`);
  if (values['as'] !== undefined) throw new UsageError(`give --as or --identity-jwt, not both: the verified token names ${use.who}`);
  let token: string;
  try {
    token = readRegularFile(resolvePath(io.cwd, tokenFile)).trim();
  } catch (e) {
    throw new CliRefusal(`--approver-token-file ${JSON.stringify(tokenFile)} cannot be read: ${(e as Error).message}`);
  }
  const provider = await jwtProvider(jwt, (m) => err(`warning: ${m}`));
  const header = jwt.header ?? 'authorization';
  let principal;
  try {
    principal = await provider.resolve({ action: use.action, environment: '', headers: { [header]: `Bearer ${token}` }, agent: null, user: null });
  } catch (e) {
    throw new CliRefusal(`the token in ${tokenFile} was refused: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (principal === null || principal.user === null) throw new CliRefusal(`the token in ${tokenFile} names no human (${jwt.userClaim})`);
  return {
    who: principal.user,
    principal: {
      agent: principal.agent,
      user: principal.user,
      issuer: principal.issuer ?? null,
      claims: principal.claims ?? null,
      expiresAt: principal.expiresAt ?? null,
    },
    approvers: { rolesClaim: rolesClaim ?? null },
  };
}
