/**
 * Answers and acts outside one action: approval requests, effect resolution, delegation.
 *
 * @module
 */
import { createPrincipal, type Action } from '../action.js';
import { type Authority, type Delegation } from '../authority/authority.js';
import type { Grant, GrantInput } from '../authority/grant.js';
import type { JsonObject } from '../canonical.js';
import { AuthorityEscalation, IdentityError, InvalidArgument } from '../errors.js';
import type { Approval, ApprovalRecord, VerifiedAnswer } from '../model.js';
import { verifiedAnswer, type VerifiedPrincipal } from './presented.js';
import { parseTime, storedTime } from '../time.js';
import { checkActor } from '../effects.js';
import { checkEnvironment } from './gates.js';
import { eventRaw } from './evidence.js';
import { type ControlContext, delegationRecord } from './pass.js';
import type { DelegateOptions } from './types.js';

/**
 * The approval request open for `action`'s hash — `pending`, or `granted` and not yet
 * consumed — and not expired (the newest, if several were filed before this rule existed), or
 * `null`. Reads only.
 */
export async function openApproval(ctx: ControlContext, action: Action): Promise<ApprovalRecord | null> {
  checkEnvironment(ctx, action);
  const now = ctx.clock().getTime();
  const records = await ctx.store.approvalsFor(action.actionHash);
  for (let i = records.length - 1; i >= 0; i--) {
    const record = records[i]!;
    const open = record.status === 'pending' || record.status === 'granted';
    if (open && now <= parseTime(record.request.expiresAt, 'expires_at').getTime()) return record;
  }
  return null;
}

/** The answer's verified approver for the store, or null when the surface verified nobody. */
function verifiedOf(ctx: ControlContext, verified: VerifiedPrincipal | null | undefined): VerifiedAnswer | null {
  return verified === undefined || verified === null ? null : verifiedAnswer(ctx.policy, ctx.approverIdentity, verified);
}

/** `{ verified: {agent, user, issuer} }` for an answer's event, `{}` for an unverified one. */
function verifiedData(answer: VerifiedAnswer | null): JsonObject {
  return answer === null ? {} : { verified: { agent: answer.agent, user: answer.user, issuer: answer.issuer } };
}

/**
 * Counts `approver`'s yes on request `requestId` (with `verified`, the principal a resolving
 * surface verified, see {@link GrantOptions.verified}); records `APPROVAL_GRANTED` (with `via`,
 * the surface the answer came through, when given) once the request is granted. A request that
 * needs more approvers records this one and raises `ApprovalMismatch('pending')` saying how many
 * said yes ("1 of 2 approvals: ana").
 */
export async function grantApproval(
  ctx: ControlContext,
  requestId: string,
  options: { approver: string; via?: string; verified?: VerifiedPrincipal | null },
): Promise<Approval> {
  const approver = checkActor(options?.approver, 'approver');
  const via = optionalText(options?.via, 'via');
  const answer = verifiedOf(ctx, options?.verified);
  // One yes per person, however many credentials they hold (see StateStore.grantApproval).
  const approval = await ctx.store.grantApproval(requestId, approver, answer, { onePerUser: true });
  await eventRaw(ctx, 'APPROVAL_GRANTED', null, null, requestId, { approver, action_hash: approval.actionHash, ...via, ...verifiedData(answer) });
  return approval;
}

/** Denies approval request `requestId` as `approver`; records `APPROVAL_DENIED` (with `via` when given). */
export async function denyApproval(
  ctx: ControlContext,
  requestId: string,
  options: { approver: string; via?: string; verified?: VerifiedPrincipal | null },
): Promise<ApprovalRecord> {
  const approver = checkActor(options?.approver, 'approver');
  const via = optionalText(options?.via, 'via');
  const answer = verifiedOf(ctx, options?.verified);
  const record = await ctx.store.denyApproval(requestId, approver, answer);
  await eventRaw(ctx, 'APPROVAL_DENIED', null, null, requestId, { approver, ...via, ...verifiedData(answer) });
  return record;
}

/**
 * A human says what happened to an ambiguous effect; records `EFFECT_RESOLVED` (with `via` and
 * the human's `reason` when given).
 */
export async function resolveEffect(
  ctx: ControlContext,
  effectKey: string,
  state: 'committed' | 'failed',
  options: { by: string; via?: string; reason?: string },
) {
  const by = checkActor(options?.by, 'resolver');
  const extra = { ...optionalText(options?.via, 'via'), ...optionalText(options?.reason, 'reason') };
  const record = await ctx.store.resolveEffect(effectKey, state, by);
  await eventRaw(ctx, 'EFFECT_RESOLVED', record.actionId, effectKey, null, { state, resolver: by, resolved_by: 'human', ...extra });
  return record;
}

/** `{ [name]: value }` for a given non-blank string, `{}` when absent; anything else is refused. */
export function optionalText(value: unknown, name: string): Record<string, string> {
  if (value === undefined) return {};
  if (typeof value !== 'string' || value.trim() === '') throw new InvalidArgument(`${name} must be a non-blank string when given`);
  return { [name]: value };
}

/**
 * Creates a delegated grant beneath `parentId` (a root grant or a live delegation), or
 * refuses with an {@link AuthorityEscalation} (`unknown_parent`, `parent_not_delegable`,
 * `parent_not_valid`, `not_the_subject`, `max_depth`, `containment` + `dimension`) and
 * `DELEGATION_REJECTED`; an expired `by` is an `IdentityError`. On success one row is written
 * and `DELEGATION_CREATED` reaches the store and every sink. Not idempotent: two calls make two
 * delegations. A malformed grant is an `InvalidArgument`, with nothing written.
 */
export async function delegate(ctx: ControlContext, parentId: string, grant: Grant | GrantInput, options: DelegateOptions): Promise<Delegation> {
  const authority = requireAuthority(ctx, 'delegate');
  if (!options || typeof options !== 'object' || !options.by) throw new InvalidArgument('delegate needs { by }: the principal creating the delegation');
  const by = createPrincipal(options.by);
  const via = options.via ?? 'api';
  if (via !== 'api' && via !== 'cli') throw new InvalidArgument(`via must be 'api' or 'cli', got ${JSON.stringify(via)}`);
  let planned: Delegation;
  try {
    planned = await authority.planDelegation(parentId, grant, { by, store: ctx.store, now: ctx.clock(), ids: ctx.ids, via });
  } catch (err) {
    await rejectedDelegation(ctx, parentId, err);
    throw err;
  }
  await storeDelegation(ctx, planned);
  return planned;
}

/**
 * Records why a planned delegation beneath `parentId` was refused (`DELEGATION_REJECTED`), when
 * `err` is a refusal of the plan: an expired creator, or an {@link AuthorityEscalation}.
 */
export async function rejectedDelegation(ctx: ControlContext, parentId: string, err: unknown): Promise<void> {
  let data: JsonObject | null = null;
  if (err instanceof IdentityError) data = { reason: 'principal_expired' };
  else if (err instanceof AuthorityEscalation) data = { reason: err.reason, ...(err.dimension === null ? {} : { dimension: err.dimension }) };
  if (data !== null) await eventRaw(ctx, 'DELEGATION_REJECTED', null, null, null, { ...data, parent_id: parentId });
}

/** Writes a planned delegation's row, then `DELEGATION_CREATED` (with `extra`, e.g. a break-glass reason). */
export async function storeDelegation(ctx: ControlContext, planned: Delegation, extra: JsonObject = {}): Promise<void> {
  await ctx.store.putDelegation(delegationRecord(planned));
  await eventRaw(ctx, 'DELEGATION_CREATED', null, null, null, {
    delegation_id: planned.delegationId,
    parent_id: planned.parentId,
    depth: planned.depth,
    created_by_agent: planned.createdBy.agent,
    created_by_user: planned.createdBy.user,
    created_via: planned.createdVia,
    ...extra,
  });
}

/**
 * Revokes one delegation in one write; every descendant is denied from the next evaluation
 * (the chain is walked, no child is visited). Resolves `true` when this call revoked it and
 * `false` when it already was (logged, no event). An unknown id is an `InvalidArgument`.
 */
export async function revoke(ctx: ControlContext, delegationId: string, options: { by?: string | null } = {}): Promise<boolean> {
  const authority = requireAuthority(ctx, 'revoke');
  const by = options?.by === undefined || options.by === null ? null : checkActor(options.by, 'by');
  const delegation = await authority.planRevocation(delegationId, { store: ctx.store });
  const revoked = await ctx.store.revokeDelegation(delegation.delegationId, by, storedTime(ctx.clock()));
  if (!revoked) {
    const again = await ctx.store.getDelegation(delegation.delegationId);
    ctx.logger.warn(`[ctrlrun] delegation ${delegation.delegationId} was already revoked at ${again?.revokedAt ?? delegation.revokedAt ?? 'an earlier time'}`);
    return false;
  }
  await eventRaw(ctx, 'DELEGATION_REVOKED', null, null, null, { delegation_id: delegation.delegationId, revoked_by: by });
  return true;
}

export function requireAuthority(ctx: ControlContext, what: string): Authority {
  if (ctx.authority === null) {
    throw new InvalidArgument(`this Control has no authority section, so there is nothing to ${what}; load a document with an 'authority:' section`);
  }
  return ctx.authority;
}
