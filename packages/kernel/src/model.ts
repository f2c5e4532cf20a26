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
   * How many verified approvers must say yes (the original's M-of-N, pinned at request time). This
   * build files every request with 1; a request the original filed may carry more, and then one
   * answer through this build never grants it. Absent on a request this build built (read as 1).
   */
  readonly approvalsRequired?: number;
  /**
   * The fingerprint of the world the request was filed against (`sha256:…`), when the original
   * filed it with a precondition provider; such an approval is never used without that recheck,
   * which this build does not perform. Absent or null when none was recorded.
   */
  readonly preconditionFingerprint?: string | null;
}

/** An approval request and what became of it. */
export interface ApprovalRecord {
  readonly request: ApprovalRequest;
  readonly status: ApprovalStatus;
  readonly approver: string | null;
  readonly grantedAt: string | null;
  readonly consumedAt: string | null;
}

/** A granted approval (`approvalId` is the request id). */
export interface Approval {
  readonly approvalId: string;
  readonly actionHash: string;
  readonly approver: string;
  readonly grantedAt: string;
  readonly expiresAt: string;
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
