/**
 * One pass through the control path (the record every step reads and updates), the context the
 * steps share, and the pure helpers that shape its evidence.
 *
 * @module
 */
import { type Action, type Principal } from '../action.js';
import { type Authority, type Delegation } from '../authority/authority.js';
import { isPlainObject, type JsonObject } from '../canonical.js';
import { AmbiguousEffect, DuplicateEffect, IdentityError } from '../errors.js';
import type { IdentityProvider } from '../identity.js';
import type { EventSink } from '../events.js';
import type { IdSource } from '../ids.js';
import type { EventDraft, EventType, Reservation } from '../model.js';
import type { Decision, Evaluation, Policy } from '../policy/index.js';
import type { ReceiptResult } from '../receipt.js';
import type { StateStore } from '../store/state-store.js';
import { evidenceTime, parseTime, type Clock } from '../time.js';
import { delegationToRecord } from '../authority/authority.js';
import type { Logger } from './types.js';
import { quotedForMessage } from '../visible.js';
import type { ApprovalEdit } from './edit.js';
import type { ApproverIdentity, PreconditionProvider } from './presented.js';
import type { UpstreamObservation } from './types.js';
import type { VerifiedApprover } from '../model.js';
import type { BudgetCharge } from '../budget.js';

/**
 * What every step of the control path reads: the Control's settings, its sinks and its one bit of
 * mutable state. Built once per {@link Control}; the steps are plain functions over it.
 */
export interface ControlContext {
  readonly policy: Policy;
  readonly store: StateStore;
  readonly environment: string;
  readonly policyHash: string;
  readonly defaultPrincipal: { agent: string; user?: string | null } | null;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly lease: number;
  readonly approvalTtl: number;
  readonly suspendTimeout: number;
  readonly logger: Logger;
  readonly authority: Authority | null;
  readonly identity: IdentityProvider | null;
  /** How approvers are verified here (see {@link ApproverIdentity}), or null: no approver gate. */
  readonly approverIdentity: ApproverIdentity | null;
  readonly observing: boolean;
  readonly sinks: readonly EventSink[];
  /** Whether the provider-versus-call principal mismatch was already logged (once per Control). */
  readonly warned: { principal: boolean };
}

/** The `would_have` of an observed receipt, assembled as the action is evaluated. */
export interface Observation {
  decision: Decision;
  reason: string;
  /** The first stopper in enforce order; later ones never overwrite it. */
  blocked: string | null;
}

/** What a suspended attempt was decided and approved with; its resumption's receipt carries it. */
export interface Decided {
  evaluation: Evaluation;
  approvalId: string | null;
  approver: string | null;
  /** Observe mode's counterfactual as it stood, or null: the attempt was enforced. */
  observation: Observation | null;
  policyHash: string;
  policyVersion: string | null;
}

export const RECONCILED: Record<string, 'committed' | 'failed'> = { committed: 'committed', not_executed: 'failed' };

/**
 * EXECUTION_STARTED, as a reservation step that also starts the execution drafts it: always both
 * keys, `{task, hop}` (spec 05 §6.1; an empty object means "written before tasks existed", which
 * a resumption reads as "the task dimension is unknown"). This build opens no hops: `hop` is null.
 */
export function started(pass: Pick<Pass, 'task'>): [EventType, JsonObject] {
  return ['EXECUTION_STARTED', { task: pass.task ?? null, hop: null }];
}

/** One attempt of one action: what it was decided with, holds, and has yet to record. */
export interface Pass {
  readonly action: Action;
  readonly startedAt: string;
  /**
   * The action's canonical arguments, read once for the decision, the effect key and the receipt
   * (each read of `action.canonicalArguments` parses a fresh copy; the executor gets its own).
   */
  readonly args: JsonObject;
  effectKey: string | null;
  approvalId: string | null;
  approver: string | null;
  attempt: number;
  evaluation: Evaluation | null;
  hookCalls: number;
  /** Observe mode's counterfactual, or null in enforce mode. */
  observation: Observation | null;
  /** The policy the decision was made under (a resumption keeps the first attempt's). */
  readonly policyHash: string;
  readonly policyVersion: string | null;
  /** Whether this attempt holds its effect key (observe mode may run without it). */
  held: boolean;
  /**
   * Events drafted (with the pass's ids as they stood) and not yet stored, oldest first —
   * ACTION_PROPOSED, then whatever the decision noted. They are written (and stamped) in the same
   * transaction as the pass's next write, before its own events, or alone when the pass throws
   * first, so nothing of this action reaches the store before them and their order never changes.
   */
  pending: EventDraft[];
  /** The edit of the grant this pass presents (recorded on its receipt), or null/absent. */
  edit?: ApprovalEdit | null;
  /**
   * The grant (or `dlg_…` delegation) that let the action through, once an authority section
   * passed it (its receipt's `authority_grant_id`); null or absent before that, or with none.
   */
  authorityGrantId?: string | null;
  /** The presented approval's verified approvers (its receipt's `approvers`), once read. */
  approvers?: readonly VerifiedApprover[];
  /** The presented approval's pinned fingerprint and the recheck's, once compared (the receipt's `precondition_*`). */
  preconditionAtRequest?: string | null;
  preconditionAtRecheck?: string | null;
  /** The budget charges the reservation is to check and write (spec 05 §5.1), or null/absent: no budget. */
  charges?: readonly BudgetCharge[] | null;
  /** The charges the store accepted (the receipt's `budget_charges`); observe mode's counterfactual. */
  budgetCharges?: readonly BudgetCharge[];
  /** The call's precondition provider, or null/absent. */
  preconditions?: PreconditionProvider | null;
  /** The task the caller named (grants bound to tasks; the receipt's `task`), or null/absent. */
  task?: string | null;
  /** What a gateway observed of the upstream (the `upstream` pin's evidence), or null/absent. */
  upstream?: UpstreamObservation | null;
  /**
   * The caller presented the proposed request and runs the edit instead: the edited grant must be
   * consumed even where the policy would allow the edit without one, so it runs once.
   */
  followsEdit?: boolean;
}

/**
 * The principal's credential expiry, or null. One that is not a time with an offset (a provider
 * that rendered year 10000, a hand-built principal) is an `IdentityError`, never a bad request.
 */
export function expiryOf(principal: Principal, actionName: string): Date | null {
  const exp = principal.expiresAt;
  if (exp === undefined || exp === null) return null;
  try {
    return parseTime(exp, 'principal.expiresAt');
  } catch (err) {
    throw new IdentityError(`${actionName}: the principal's credential expiry ${quotedForMessage(exp, 64)} is not a time with an offset`, {
      reason: 'expires_at_invalid',
      cause: err,
    });
  }
}

export function deny(reason: string): Evaluation {
  return { decision: 'deny', reason, controls: [], warnings: [] };
}

export function named(p: Principal): string {
  return p.user === null ? p.agent : `${p.agent}/${p.user}`;
}

export function isExecution(result: ReceiptResult): boolean {
  return result === 'committed' || result === 'failed' || result === 'ambiguous';
}

/** Keeps the first stopper: later ones are ones enforce mode would never have reached. */
export function block(pass: Pass, reason: string): void {
  if (pass.observation && pass.observation.blocked === null) pass.observation.blocked = reason;
}

/** `EXECUTION_SUSPENDED`'s `decided`: what the receipt of the resumption must carry. */
export function decidedToJson(pass: Pass): JsonObject {
  const ev = pass.evaluation;
  const obs = pass.observation;
  return {
    decision: ev?.decision ?? 'deny',
    decision_reason: ev?.reason ?? 'unknown',
    controls: [...(ev?.controls ?? [])],
    approver: pass.approver,
    would_have: obs === null ? null : { decision: obs.decision, reason: obs.reason, blocked_reason: obs.blocked },
    policy_hash: pass.policyHash,
    policy_version: pass.policyVersion,
  };
}

const DECISIONS: readonly string[] = ['allow', 'approve', 'deny'];

function stringOrNull(v: unknown): v is string | null {
  return v === null || typeof v === 'string';
}

/** Reads {@link decidedToJson}'s output back; anything malformed is null (no snapshot). */
export function decidedFromJson(v: unknown): Omit<Decided, 'approvalId'> | null {
  if (!isPlainObject(v)) return null;
  const { decision, decision_reason: reason, controls, approver, would_have: wh, policy_hash: policyHash, policy_version: policyVersion } = v;
  if (typeof decision !== 'string' || !DECISIONS.includes(decision) || typeof reason !== 'string') return null;
  if (!Array.isArray(controls) || !controls.every((c) => typeof c === 'string')) return null;
  if (!stringOrNull(approver) || typeof policyHash !== 'string' || !stringOrNull(policyVersion)) return null;
  let observation: Observation | null = null;
  if (wh !== null) {
    if (!isPlainObject(wh)) return null;
    const { decision: d, reason: r, blocked_reason: b } = wh;
    if (typeof d !== 'string' || !DECISIONS.includes(d) || typeof r !== 'string' || !stringOrNull(b)) return null;
    observation = { decision: d as Decision, reason: r, blocked: b };
  }
  return {
    evaluation: { decision: decision as Decision, reason, controls: controls as string[], warnings: [] },
    approver,
    observation,
    policyHash,
    policyVersion,
  };
}

/** EFFECT_RESERVED's data: from the stored reservation. */
export function reservedData(reservation: Reservation): JsonObject {
  return { attempt: reservation.attempt, lease_expires_at: evidenceTime(parseTime(reservation.leaseExpiresAt)) };
}

export function refusalData(err: DuplicateEffect | AmbiguousEffect): JsonObject {
  return err instanceof DuplicateEffect ? { reason: 'duplicate', state: err.state } : { reason: 'ambiguous' };
}

/** `duplicate` (it happened) and `in_progress` (someone holds it now) are kept apart. */
export function blockedBy(err: DuplicateEffect | AmbiguousEffect): string {
  if (err instanceof AmbiguousEffect) return 'ambiguous';
  return err.state === 'committed' ? 'duplicate' : 'in_progress';
}

export function delegationRecord(d: Delegation) {
  return delegationToRecord(d);
}

/** `"<Name>: <message>"`, the form an unknown outcome is recorded in. */
export function describeError(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  try {
    return `Error: ${String(err)}`;
  } catch {
    return 'Error: (unprintable)';
  }
}
