/**
 * The approval predicates every store uses: answering a request, and consuming a grant.
 * Pure: a store reads the record, calls these, then writes what they say.
 *
 * @module
 */
import { ActionDenied, ApprovalMismatch } from './errors.js';
import type { ApprovalRecord, VerifiedAnswer, VerifiedApprover } from './model.js';
import { foldForExclusion } from './policy/conditions.js';
import { parseTime } from './time.js';
import { showInvisible, shownId } from './visible.js';

/** What a store must do after checking an approval. */
export type ApprovalPlan =
  /** Go ahead (consume, or answer). */
  | { readonly kind: 'ok'; readonly record: ApprovalRecord }
  /** Past its expiry: write `expired` (a kept write), then raise `error`. */
  | { readonly kind: 'expire'; readonly error: ApprovalMismatch };

function expired(record: ApprovalRecord, now: Date): boolean {
  return now.getTime() > parseTime(record.request.expiresAt, 'expires_at').getTime();
}

function mismatch(reason: ApprovalMismatch['reason'], id: string, detail: string): ApprovalMismatch {
  return new ApprovalMismatch(reason, { approvalId: id, message: `approval ${shownId(id)} refused (${reason}): ${detail}` });
}

/**
 * May approval `id` be consumed for an action with `actionHash`? In this order: unknown,
 * hash mismatch (before status, so a mutated action leaves the approval granted), denied,
 * not granted, expired (checked at consumption), the precondition, else consume.
 *
 * `precondition` is the fingerprint the presenting pass computed (null: it named no provider);
 * `undefined` means no recheck ran. A request pinned to a fingerprint is consumed only when the
 * recheck answered the same one: `precondition_missing` when either side has none (never a skip),
 * `precondition_changed` when they differ (spec 05 §4.4).
 */
export function checkConsumable(record: ApprovalRecord | null, id: string, actionHash: string, now: Date, precondition?: string | null): ApprovalPlan {
  if (record === null) throw mismatch('unknown', id, 'no such approval request');
  if (record.request.actionHash !== actionHash) {
    throw mismatch('mismatch', id, 'it was granted for a different action (the action hash differs)');
  }
  if (record.status === 'denied') {
    throw new ActionDenied('approval_denied', { actionId: null, message: `approval ${shownId(id)} was denied by ${record.approver ?? 'a human'}` });
  }
  if (record.status !== 'granted') {
    const detail = record.status === 'consumed' ? 'an approval is single-use and was already consumed' : `it is ${record.status}, not granted`;
    throw mismatch(record.status, id, detail);
  }
  if (expired(record, now)) return { kind: 'expire', error: mismatch('expired', id, `it expired at ${record.request.expiresAt}`) };
  checkPrecondition(record, id, precondition);
  return { kind: 'ok', record };
}

function checkPrecondition(record: ApprovalRecord, id: string, precondition: string | null | undefined): void {
  const pinned = record.request.preconditionFingerprint ?? null;
  const now = precondition ?? null;
  if (pinned === now) return;
  if (pinned === null)
    throw mismatch(
      'precondition_missing',
      id,
      `it was requested with no precondition fingerprint, and the presenting pass computed ${now}: one side only is never a match`,
    );
  if (now === null)
    throw mismatch(
      'precondition_missing',
      id,
      `it was requested against the precondition fingerprint ${pinned}, and ${precondition === undefined ? 'no recheck ran' : 'the presenting pass named no precondition provider'}: never used without the recheck`,
    );
  throw mismatch('precondition_changed', id, `the world changed since it was requested: precondition fingerprint ${pinned} then, ${now} now`);
}

/** Who a verified approver is, for people: the user, else the agent. */
function approverName(a: VerifiedAnswer): string {
  return showInvisible(a.user ?? a.agent);
}

/** "1 of 2 approvals: ana", for a request that needs more than one; null for one that needs one. */
export function approvalProgress(record: ApprovalRecord): string | null {
  const n = record.request.approvalsRequired ?? 1;
  if (n <= 1) return null;
  const approvers = record.approvers ?? [];
  const names = approvers.map(approverName).join(', ');
  return `${approvers.length} of ${n} approvals${names === '' ? '' : `: ${names}`}`;
}

/** What one answer does to a request's count (the original's `count_grant`, spec 05 §4.3). */
export interface GrantCount {
  /** The verified approvers after this answer. */
  readonly approvers: readonly VerifiedApprover[];
  /** Whether this answer grants the request. */
  readonly reached: boolean;
}

/**
 * Whether two verified approvers are one person as a quorum counts people. The original's rule
 * (and the store's, spec 05 §4.3): the same `(agent, user)`. With `onePerUser` (what `Control`
 * asks for), also the same person under another agent or issuer — the person being the user, or
 * the agent when there is none (an identity provider's subject) — the names compared as a grant's
 * `_neq` compares them (NFKC, case, spacing and invisible characters folded): one human holding
 * two credentials (a static operator token and an identity provider's token; an identity
 * provider's two clients) is one yes. Stricter than the original only: it never grants where the
 * original would not.
 */
function samePerson(a: { agent: string; user: string | null }, b: { agent: string; user: string | null }, onePerUser: boolean): boolean {
  if (a.agent === b.agent && a.user === b.user) return true;
  // The person an approver names: its user, or its agent when it has none (an identity provider's
  // subject, as the views name it).
  return onePerUser && foldForExclusion(a.user ?? a.agent) === foldForExclusion(b.user ?? b.agent);
}

/**
 * Counts one yes on a pending request needing N (`approvalsRequired`): with no verified approver
 * the request is reached only when N is 1 (and then the approvers stay as they were); a verified
 * one is appended with `grantedAt` and the request is reached when N distinct verified approvers
 * said yes. A second yes by the same `(agent, user)` is refused, saying so, as is an unverified
 * yes on N > 1 (it could not count). The requester's own yes is counted here and refused at
 * consumption, as in the original.
 */
export function countGrant(record: ApprovalRecord, id: string, verified: VerifiedAnswer | null, grantedAt: string, onePerUser = false): GrantCount {
  const n = record.request.approvalsRequired ?? 1;
  const approvers = record.approvers ?? [];
  if (verified === null) {
    if (n > 1)
      throw mismatch(
        'pending',
        id,
        `it needs ${n} verified approvers (distinct people), and this answer carries no verified identity, so it cannot count; it stays pending (${approvalProgress(record)})`,
      );
    return { approvers, reached: true };
  }
  if (approvers.some((a) => samePerson(a, verified, onePerUser)))
    throw mismatch(
      'pending',
      id,
      `${approverName(verified)} already approved it, and a second yes by the same person counts once; it stays pending (${approvalProgress(record)})`,
    );
  const next = [...approvers, { agent: verified.agent, user: verified.user, issuer: verified.issuer, entitled: [...verified.entitled], grantedAt }];
  return { approvers: next, reached: next.length >= n };
}

/** What a store must do after checking a grant: count it (see {@link GrantCount}), or expire the request. */
export type GrantPlan =
  { readonly kind: 'count'; readonly record: ApprovalRecord; readonly count: GrantCount } | { readonly kind: 'expire'; readonly error: ApprovalMismatch };

/**
 * May request `id` be granted now by one answer? {@link checkAnswerable}'s checks, then
 * {@link countGrant}: the plan says whether this answer reaches the request's threshold.
 */
export function checkGrantable(
  record: ApprovalRecord | null,
  id: string,
  now: Date,
  verified: VerifiedAnswer | null = null,
  grantedAt = '',
  onePerUser = false,
): GrantPlan {
  const plan = checkAnswerable(record, id, now);
  if (plan.kind === 'expire') return plan;
  return { kind: 'count', record: plan.record, count: countGrant(plan.record, id, verified, grantedAt, onePerUser) };
}

/**
 * May request `id` be granted or denied now? Unknown → `unknown`; already answered → its
 * status (a replayed grant never resurrects); past its expiry → write `expired`, `expired`.
 */
export function checkAnswerable(record: ApprovalRecord | null, id: string, now: Date): ApprovalPlan {
  if (record === null) throw mismatch('unknown', id, 'no such approval request');
  if (record.status !== 'pending') throw mismatch(record.status, id, `it was already answered (${record.status})`);
  if (expired(record, now)) return { kind: 'expire', error: mismatch('expired', id, `it expired at ${record.request.expiresAt}`) };
  return { kind: 'ok', record };
}
