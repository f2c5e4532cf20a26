/**
 * The records the control path reads and writes: effects, reservations, approvals, events.
 * Field names are the spec's, in camelCase; timestamps are the stored strings (`…+00:00`).
 *
 * @module
 */
import type { Action } from './action.js';
import type { JsonObject } from './canonical.js';

/** An effect record's state (`new` is never stored: it means "no record"). */
export type EffectState = 'reserved' | 'executing' | 'committed' | 'failed' | 'ambiguous';

/** One row of `effects`. */
export interface EffectRecord {
  readonly effectKey: string;
  readonly state: EffectState;
  /** The current or last attempt's action. */
  readonly actionId: string;
  readonly attempt: number;
  readonly leaseExpiresAt: string | null;
  /** The stored `result_json` text. */
  readonly resultJson: string | null;
  readonly error: string | null;
  readonly createdAt: string | null;
  readonly updatedAt: string | null;
  readonly resolvedBy: string | null;
}

/** A granted reservation: this action may run the effect under a lease. */
export interface Reservation {
  readonly effectKey: string;
  readonly actionId: string;
  readonly attempt: number;
  readonly leaseExpiresAt: string;
}

/** Approval statuses. */
export type ApprovalStatus = 'pending' | 'granted' | 'denied' | 'expired' | 'consumed';

/** A request for a human to approve one exact action (bound to its hash). */
export interface ApprovalRequest {
  readonly requestId: string;
  readonly actionHash: string;
  /** The whole action, for display. */
  readonly action: Action;
  readonly createdAt: string;
  readonly expiresAt: string;
  /** The policy hash in force when the request was made. */
  readonly policyHash: string | null;
  /**
   * How many distinct verified approvers must say yes (the original's M-of-N, pinned at request
   * time from the action entry's `approvals_required`). Read as 1 when absent.
   */
  readonly approvalsRequired?: number;
  /**
   * The fingerprint (`sha256:…`) of what a precondition provider answered on the request pass;
   * the approval is consumed only by a presenting pass whose provider answers the same
   * fingerprint (spec 05 §4.4). Absent or null when the request named no provider.
   */
  readonly preconditionFingerprint?: string | null;
  /**
   * The approver roles pinned at request time (the original's `required_roles`): one
   * `{control, role}` per cited control that declares `approver_role`, in registry order. Every
   * verified approver must be entitled to each control. Absent or empty when none.
   */
  readonly requiredRoles?: readonly RequiredRole[];
}

/** A control's approver role pinned on a request (spec 05 §4.1). */
export interface RequiredRole {
  readonly control: string;
  readonly role: string;
}

/**
 * A principal a resolving surface verified (operator credentials, a JWT, an inbox session, a
 * configured CLI identity), as it answers a request: who, and the controls whose approver role
 * it holds. Distinctness is on `(agent, user)`.
 */
export interface VerifiedAnswer {
  readonly agent: string;
  readonly user: string | null;
  readonly issuer: string | null;
  /** Control ids whose `approver_role` this principal holds (byte-for-byte). */
  readonly entitled: readonly string[];
}

/** One verified approver recorded on a request (the original's `approvers` entry, spec 05 §4.1). */
export interface VerifiedApprover extends VerifiedAnswer {
  /** The store-clock instant of the answer, `…+00:00` (six fraction digits when non-zero). */
  readonly grantedAt: string;
}

/** An approval request and what became of it. */
export interface ApprovalRecord {
  readonly request: ApprovalRequest;
  readonly status: ApprovalStatus;
  readonly approver: string | null;
  readonly grantedAt: string | null;
  readonly consumedAt: string | null;
  /** The verified approvers who answered so far (absent when none: the column is NULL). */
  readonly approvers?: readonly VerifiedApprover[];
}

/** A granted approval (`approvalId` is the request id). */
export interface Approval {
  readonly approvalId: string;
  readonly actionHash: string;
  readonly approver: string;
  readonly grantedAt: string;
  readonly expiresAt: string;
  /** The verified approvers who granted it (absent when none). */
  readonly approvers?: readonly VerifiedApprover[];
  /** The precondition fingerprint the request pinned (absent or null when none). */
  readonly preconditionFingerprint?: string | null;
}

/** The closed set of event types. */
export type EventType =
  | 'ACTION_PROPOSED'
  | 'POLICY_EVALUATED'
  | 'APPROVAL_REQUESTED'
  | 'APPROVAL_GRANTED'
  | 'APPROVAL_DENIED'
  | 'APPROVAL_EXPIRED'
  | 'APPROVAL_INVALIDATED'
  | 'APPROVAL_CONSUMED'
  | 'EFFECT_RESERVED'
  | 'EFFECT_RESERVATION_REFUSED'
  | 'EXECUTION_STARTED'
  | 'EXECUTION_COMMITTED'
  | 'EXECUTION_FAILED'
  | 'EXECUTION_AMBIGUOUS'
  | 'EFFECT_RESOLVED'
  | 'ACTION_DENIED'
  | 'RECONCILIATION_STARTED'
  | 'RECONCILIATION_RESOLVED'
  | 'EXECUTION_SUSPENDED'
  | 'EXECUTION_RESUMED'
  | 'AUTHORITY_RESOLVED'
  | 'AUTHORITY_DENIED'
  | 'DELEGATION_CREATED'
  | 'DELEGATION_REVOKED'
  | 'DELEGATION_REJECTED'
  /** Written by the original's Postgres store (a measured server clock skew); read, never written, here. */
  | 'CLOCK_SKEW_DETECTED';

/** An event before the store numbers it. */
export interface EventDraft {
  /** Evidence timestamp (`…Z`). */
  readonly ts: string;
  readonly type: EventType;
  readonly actionId: string | null;
  readonly effectKey: string | null;
  readonly approvalId: string | null;
  readonly data: JsonObject;
}

/** A stored event, with its store-assigned, increasing id. */
export interface EventRecord extends EventDraft {
  readonly eventId: number;
}

/** A receipt row as stored (snake_case, as `verifyChain` reads it). */
export interface ReceiptRow {
  readonly receipt_id: string;
  readonly action_id: string | null;
  readonly effect_key: string | null;
  readonly result: string | null;
  readonly json: string | null;
  readonly ts: string | null;
  /** The chain position; `NaN` when the stored column holds something else than a safe integer (`verifyChain` names that row). */
  readonly seq: number | null;
  readonly prev_hash: string | null;
  readonly hash: string | null;
}

/** The chain head row `receipt_chain(id = 1)`. */
export interface ChainHead {
  /** `NaN` when the stored column holds something else than a safe integer (`verifyChain` reports a `head_mismatch`). */
  readonly seq: number;
  readonly hash: string;
}

/** What a store needs to chain a receipt: the document without `seq` and `prev_hash`. */
export interface ReceiptDraft {
  readonly receiptId: string;
  readonly actionId: string;
  readonly effectKey: string | null;
  readonly result: string;
  readonly finishedAt: string;
  /** The receipt document in `to_json` key order, `seq`/`prev_hash` still null. */
  readonly document: JsonObject;
}

/** A receipt as chained and stored. */
export interface StoredReceipt {
  readonly seq: number;
  readonly prevHash: string;
  readonly hash: string;
  /** The exact stored `json` text. */
  readonly json: string;
  /** The document as stored (with `seq` and `prev_hash`). */
  readonly document: JsonObject;
}
