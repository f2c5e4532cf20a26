/**
 * The protocol the control path uses to keep state. Every method is one atomic unit across
 * connections, processes and hosts, and decides only through the kernel's pure functions
 * (`planReservation`, `checked`, `checkConsumable`, `checkAnswerable`, `planLeaseExtension`),
 * then writes. {@link SqlStateStore} implements it once for SQLite and Postgres.
 *
 * @module
 */
import type { Action } from '../action.js';
import type {
  Approval,
  ApprovalRecord,
  ApprovalRequest,
  ApprovalStatus,
  ChainHead,
  EffectRecord,
  EffectState,
  EventDraft,
  EventRecord,
  EventType,
  VerifiedAnswer,
  ReceiptDraft,
  ReceiptRow,
  Reservation,
  StoredReceipt,
} from '../model.js';
import type { BudgetCharge, LedgerEntry } from '../budget.js';
import type { Dialect } from './driver.js';
import type { RetentionStore } from './retention.js';

/**
 * One row of `delegations`, raw: the store keeps it and never interprets it. The authority
 * module parses `grantJson` and re-validates every field on read.
 */
export interface DelegationRecord {
  /** `dlg_` + 32 lowercase hex. */
  readonly delegationId: string;
  /** A root grant id or another delegation's id. */
  readonly parentId: string;
  /** Recorded for readers; never trusted (the chain is walked). */
  readonly depth: number;
  /** The delegated grant, stored verbatim. */
  readonly grantJson: string;
  readonly createdByAgent: string;
  readonly createdByUser: string | null;
  /** `api` or `cli`. */
  readonly createdVia: string;
  /** Stored timestamp (`…+00:00`). */
  readonly createdAt: string;
  readonly revokedAt: string | null;
  readonly revokedBy: string | null;
}

/**
 * Events a state change writes in its own transaction (optional on every method that takes it).
 * After the state write succeeded, and only then, the store calls {@link drafts} with the
 * method's result and appends the drafts in order in the same transaction, so the change and the
 * events describing it commit together or not at all. A refused change (thrown, or a kept write
 * raised after commit) writes none of them. A store that re-issues a lost write re-issues its
 * events with it, exactly once; a write found landed is not written again.
 *
 * On success a store that honoured it sets {@link stored} to the stored events (ids increasing,
 * in draft order). A store that ignores the parameter leaves `stored` unset, and the caller
 * appends the drafts itself after the call: the evidence is the same, in more transactions.
 */
export interface TrailingEvents<R> {
  /** The drafts for the write's result; may be called more than once (a re-issued write). */
  readonly drafts: (result: R) => readonly EventDraft[];
  /** Set by the store once the transaction committed: the events it stored, in order. */
  stored?: EventRecord[];
  /**
   * Optional: a receipt to chain in the same transaction, after the events (an outcome and its
   * receipt in one commit). A store that honours it sets {@link storedReceipt}. If the receipt
   * part fails, the store writes the change and its events without it chained — with the receipt
   * pending, off the chain, where it can — and leaves `storedReceipt` unset: the caller then writes
   * the receipt itself ({@link StateStore.putReceipt}, which chains a pending row of the same
   * receipt), and a failure there raises with the outcome already kept (T170).
   */
  readonly receipt?: ReceiptDraft;
  /** Set by the store when it chained {@link receipt} with the change. */
  storedReceipt?: StoredReceipt;
}

/** The reservation step of one action (see {@link StateStore.reserveForExecution}). */
export interface ReservationStep {
  readonly key: string;
  readonly actionId: string;
  readonly leaseMs: number;
  /** An approval to consume in the same transaction (checked first; its refusal wins), or null. */
  readonly approval: {
    readonly id: string;
    readonly actionHash: string;
    /** The fingerprint the presenting pass's precondition recheck computed (null: no provider); see `checkConsumable`. */
    readonly precondition?: string | null;
  } | null;
  /**
   * Budget charges (spec 05 §5.1): checked before any write (an overspent one refuses with
   * `BudgetExhausted` and nothing is written), one ledger row each after the reservation.
   */
  readonly charges?: readonly BudgetCharge[];
}

/**
 * An edit-then-approve, as {@link StateStore.editApproval} writes it: pending request
 * `requestId` is answered `denied` by `approver`, and a new request `editedRequestId` for the
 * edited `action` is inserted already `granted` by `approver` (its expiry the original's, its
 * `policy_hash_at_approval` `policyHash`).
 */
export interface ApprovalEditWrite {
  /** The pending request the human answered with an edit. */
  readonly requestId: string;
  /** The new request's id (differs from `requestId`). */
  readonly editedRequestId: string;
  /** The edited action (same name, principal, environment; new arguments, new hash). */
  readonly action: Action;
  /** The editor, recorded as the approver of both rows. */
  readonly approver: string;
  /** The policy hash in force when the edit was decided. */
  readonly policyHash: string | null;
  /** The editor as a resolving surface verified it: recorded as the edited grant's verified approver. */
  readonly verified?: VerifiedAnswer | null;
}

/** What {@link StateStore.editApproval} wrote: the original (now `denied`) and the new grant. */
export interface ApprovalEditResult {
  /** The original request, as written: `denied`, approver the editor. */
  readonly proposed: ApprovalRecord;
  /** The grant of the edited action (`approvalId` is the new request id). */
  readonly approved: Approval;
}

/** The state a control path keeps: approvals, effects, events, the receipt chain and delegations. */
export interface StateStore {
  /** Short name for messages (the driver's). */
  readonly name: string;
  /** The SQL family underneath. */
  readonly dialect: Dialect;

  // Approvals

  /** Stores a new `pending` request. A duplicate id is an `InvalidArgument`. */
  putApprovalRequest(request: ApprovalRequest): Promise<void>;
  /** The request and its status, or `null`. */
  getApproval(id: string): Promise<ApprovalRecord | null>;
  /**
   * Counts one yes on a pending request (see `countGrant`): `verified` is the approver a resolving
   * surface verified, or null. Granted when the request's `approvalsRequired` is reached; otherwise
   * the approvers are recorded and it raises `ApprovalMismatch('pending')` saying how many said yes
   * so far. An expired request is written `expired`. With `onePerUser` (what `Control` passes), a
   * verified approver whose user another entry already names — under another agent or issuer, in
   * another case — is the same person and counts once (stricter than the original's `(agent,
   * user)`; a store without the option counts as the original does).
   */
  grantApproval(id: string, approver: string, verified?: VerifiedAnswer | null, options?: { onePerUser?: boolean }): Promise<Approval>;
  /** Denies a pending request (see `checkAnswerable`); a verified approver is appended to its approvers. */
  denyApproval(id: string, approver: string, verified?: VerifiedAnswer | null): Promise<ApprovalRecord>;
  /**
   * Optional: an edit-then-approve in one transaction (see {@link ApprovalEditWrite}): the
   * original checked as a grant checks it (`checkAnswerable`; an expired one is written
   * `expired` and refused), answered `denied`, and the edited request inserted `granted`; a
   * concurrent answer of the same request makes exactly one of them win. `events`: written in the
   * same transaction (see {@link TrailingEvents}). A store without it cannot take edits.
   */
  editApproval?(edit: ApprovalEditWrite, events?: TrailingEvents<ApprovalEditResult>): Promise<ApprovalEditResult>;
  /**
   * Consumes a granted approval for `actionHash` (see `checkConsumable`); single use. `precondition`:
   * the fingerprint the presenting pass's recheck computed (null: no provider), undefined when none ran.
   */
  consumeApproval(id: string, actionHash: string, precondition?: string | null): Promise<Approval>;
  /** Every request bound to `actionHash`, oldest first. */
  approvalsFor(actionHash: string): Promise<ApprovalRecord[]>;
  /** The newest granted, unexpired approval for `actionHash`, or `null`. */
  findGrantedApproval(actionHash: string): Promise<Approval | null>;
  /** The newest denied, unexpired request for `actionHash`, or `null`. */
  findDeniedRequest(actionHash: string): Promise<ApprovalRecord | null>;
  /** Requests, oldest first, optionally only those with `status` (for operators). */
  listApprovals(status?: ApprovalStatus): Promise<ApprovalRecord[]>;

  // Effects

  /**
   * Reserves `key` for `actionId` under a lease (see `planReservation`). `events`: see
   * {@link TrailingEvents}. `charges`: budget charges, as {@link ReservationStep.charges}.
   */
  reserveEffect(key: string, actionId: string, leaseMs: number, events?: TrailingEvents<Reservation>, charges?: readonly BudgetCharge[]): Promise<Reservation>;
  /**
   * Consumes approval `id` and reserves `key` in one transaction: the approval is checked first
   * (its refusal wins), the reservation is decided before any write, and a refused reservation
   * leaves the approval granted. `events`: see {@link TrailingEvents}.
   */
  consumeApprovalAndReserve(
    id: string,
    actionHash: string,
    key: string,
    actionId: string,
    leaseMs: number,
    events?: TrailingEvents<[Approval, Reservation]>,
    precondition?: string | null,
    charges?: readonly BudgetCharge[],
  ): Promise<[Approval, Reservation]>;
  /**
   * Optional: the whole reservation step in one transaction — the approval consumed as
   * {@link consumeApprovalAndReserve} does (when `step.approval`), the effect reserved as
   * {@link reserveEffect} does, and the record written `executing` at once (the `reserved` state
   * is never visible, as if {@link beginExecution} ran in the same transaction). Refusals are
   * those of the two methods; a refused step writes none of `events`. A caller without it calls
   * the two (or three) methods in turn.
   */
  reserveForExecution?(step: ReservationStep, events?: TrailingEvents<[Approval | null, Reservation]>): Promise<[Approval | null, Reservation]>;
  /** `reserved` → `executing` (lease kept). `events`: see {@link TrailingEvents}. */
  beginExecution(key: string, actionId: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord>;
  /** `executing` → `committed`, storing the result as JSON. `events`: see {@link TrailingEvents}. */
  commitEffect(key: string, actionId: string, result: unknown, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord>;
  /** `executing` → `failed`. `events`: see {@link TrailingEvents}. */
  failEffect(key: string, actionId: string, error: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord>;
  /** `reserved`/`executing`/`ambiguous` → `ambiguous` (idempotent). `events`: see {@link TrailingEvents}. */
  markAmbiguous(key: string, actionId: string, error: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord>;
  /** `ambiguous` → `committed`/`failed` by a human or a reconcile hook, any holder. */
  resolveEffect(key: string, state: 'committed' | 'failed', resolver: string): Promise<EffectRecord>;
  /** Extends this holder's live `executing` lease; never shortens, never revives a lapsed one. */
  extendLease(key: string, actionId: string, leaseMs: number): Promise<EffectRecord>;
  /**
   * Holds `continuation` for this holder's live `executing` record of `key`, atomically: the lease
   * is extended to now + `leaseMs` (as {@link extendLease}; never shortened, a lapsed one is
   * `AmbiguousEffect`), the continuation and `action` are stored, and the round goes up by one.
   * Returns the new round (1 for the first hold of this attempt). A continuation value already
   * held (for any key) is an `InvalidArgument`.
   */
  holdContinuation(action: Action, key: string, continuation: string, leaseMs: number): Promise<number>;
  /**
   * Takes a held continuation, once: matched and consumed atomically. No match (never held, or
   * already taken) → `InvalidArgument` with one uninformative message; a match whose record is
   * not the holder's live `executing` one → `AmbiguousEffect` (nothing consumed). With
   * `environment`, a held action of another environment is an `InvalidArgument` (nothing consumed).
   */
  takeContinuation(continuation: string, options?: { environment?: string }): Promise<TakenContinuation>;
  /** How many times `key`'s current attempt has been suspended (0 if never). */
  continuationRounds(key: string): Promise<number>;
  /** The record, or `null`. Reads never transition. */
  getEffect(key: string): Promise<EffectRecord | null>;
  /** Records oldest first, optionally only those in `state`. */
  listEffects(state?: EffectState): Promise<EffectRecord[]>;
  /**
   * Optional: at most `limit` (1–10 000) effect records in `(createdAt, effectKey)` order, after
   * `after` (the previous page's last record; `null` for the first), or with `newest` the last
   * `limit` records; optionally only `state`.
   */
  effectsPage?(options: {
    state?: EffectState | undefined;
    after?: { createdAt: string | null; effectKey: string } | null;
    newest?: boolean;
    limit: number;
  }): Promise<EffectRecord[]>;

  // Evidence

  /** Appends an event; returns it with its store-assigned, increasing id. */
  appendEvent(event: EventDraft): Promise<EventRecord>;
  /**
   * Optional: appends `events` in order in one transaction (all or none); returns them with
   * their increasing ids. A caller without it appends them one by one with {@link appendEvent}.
   */
  appendEvents?(events: readonly EventDraft[]): Promise<EventRecord[]>;
  /**
   * Chains and stores a receipt under the head row's lock (seq = head + 1). `events`: appended
   * in the same transaction (see {@link TrailingEvents}; its `receipt` member is not used here).
   */
  putReceipt(draft: ReceiptDraft, events?: TrailingEvents<StoredReceipt>): Promise<StoredReceipt>;
  /**
   * Optional: chains the receipts left pending by a writer that stopped (a crash) after an outcome
   * whose receipt could not be chained with it was written with the receipt off the chain, and
   * before the receipt written alone chained it. Oldest first, each sealed on the head it finds;
   * other off-chain rows are left as they are. Returns the receipts it chained (none: `[]`).
   */
  chainPendingReceipts?(): Promise<StoredReceipt[]>;
  /** The chain head `(seq, hash)`, or `null` if the head row is missing. */
  chainHead(): Promise<ChainHead | null>;
  /**
   * Where the chain starts when the original pruned it: the seq and hash of the last receipt its
   * prune deleted (its `prune_checkpoint` row), or null when it never pruned. Pass it to
   * `verifyChain` (`checkpoint`) or `ChainVerifier` (`after`); without it a pruned chain reports
   * `missing` at 1. A store without the original's tables may leave it out.
   */
  pruneCheckpoint?(): Promise<{ seq: number; hash: string } | null>;
  /** Optional: the prune, holds and the anchors cache (spec 05 §5.2–§5.4). A store without it can be neither pruned nor anchored. */
  retention?(): RetentionStore;
  /**
   * Optional: the budget ledger's reads (spec 05 §5.1). `consumptions`: rows in insertion order,
   * each filter optional (`since` a stored time, closed); `spent`: what `grantId` spent of
   * `metric` in the window of `window` seconds ending now; `overspent`: the predicate as a read,
   * the first charge that would not fit now, or null. A store without it cannot charge budgets.
   */
  budgets?(): {
    consumptions(filter?: {
      grantId?: string | null;
      metric?: string | null;
      since?: string | null;
      effectKey?: string | null;
      limit?: number;
    }): Promise<LedgerEntry[]>;
    spent(grantId: string, metric: string, window: number): Promise<bigint>;
    overspent(charges: readonly BudgetCharge[]): Promise<BudgetCharge | null>;
  };
  /** Every event, oldest first. */
  events(): Promise<EventRecord[]>;
  /**
   * Optional: the newest event of `type` recorded for `actionId`, or `null` (a resumption reads
   * its suspension back this way). A caller without it filters {@link events}.
   */
  lastEvent?(actionId: string, type: EventType): Promise<EventRecord | null>;
  /**
   * Optional: the newest event of `type` recorded for approval request `approvalId`, or `null`
   * (an edit-then-approve is found from either request id this way). A caller without it filters
   * {@link events}.
   */
  lastApprovalEvent?(approvalId: string, type: EventType): Promise<EventRecord | null>;
  /** Every receipt row as stored, by `seq` (null `seq` first). */
  receipts(): Promise<ReceiptRow[]>;

  // Bounded reads for operators' views (each reads at most `limit` rows)

  /**
   * Chained receipt rows with `seq` greater than `after`, by `seq`, at most `limit` (1–10 000); as
   * stored, like {@link receipts} (a `seq` column that holds no integer reads as `NaN`).
   */
  receiptsAfter(after: number, limit: number): Promise<ReceiptRow[]>;
  /** The receipt row stored under `receiptId`, as stored, or `null`. */
  getReceipt(receiptId: string): Promise<ReceiptRow | null>;
  /**
   * Optional: receipt rows whose `seq` is an integer, in `(seq, receiptId)` order, at most `limit`
   * (1–10 000): those after `after` (the `seq` and `receipt_id` of the previous page's last row;
   * `null` for the first page), or with `newest` the last `limit` rows. A streaming chain walk
   * (`ChainVerifier`) reads the chain this way, in memory bounded by the page.
   */
  receiptsInChain?(options: { after?: { seq: number; receiptId: string } | null; newest?: boolean; limit: number }): Promise<ReceiptRow[]>;
  /**
   * Optional: receipt rows whose `seq` is not an integer (null: written before the chain), by
   * `receipt_id` after `after` (`null` for the first page), at most `limit` (1–10 000).
   */
  receiptsOffChain?(options: { after?: string | null; limit: number }): Promise<ReceiptRow[]>;
  /**
   * At most `limit` (1–10 000) approval requests, oldest first (by `createdAt`, then id), after the
   * record `after` names (the `createdAt` and `requestId` of the previous page's last record), optionally only `status`.
   */
  approvalsPage(options: {
    status?: ApprovalStatus | undefined;
    after?: { createdAt: string; requestId: string } | null;
    limit: number;
  }): Promise<ApprovalRecord[]>;
  /** How many `pending`, unexpired requests were made by the principal `{ agent, user }`. */
  countPendingApprovals(principal: { agent: string; user: string | null }): Promise<number>;

  // Delegations

  /** Inserts a delegation row; never an upsert: an existing id is an `InvalidArgument`. */
  putDelegation(record: DelegationRecord): Promise<void>;
  /** The row, or `null`. */
  getDelegation(id: string): Promise<DelegationRecord | null>;
  /** Every row whose parent is `parentId`, oldest first (revoked ones included). */
  delegationsFor(parentId: string): Promise<DelegationRecord[]>;
  /** Every row, oldest first; revoked ones only with `includeRevoked`. */
  delegations(options?: { includeRevoked?: boolean }): Promise<DelegationRecord[]>;
  /**
   * Revokes `id` at `at` (a stored timestamp) by `by`, in one write: `true` if this call revoked
   * it, `false` if it was already revoked (nothing written). An unknown id is an `InvalidArgument`.
   */
  revokeDelegation(id: string, by: string | null, at: string): Promise<boolean>;

  // Operator sessions

  /**
   * Optional: records that operator session `sessionId` (1-128 of `A-Z a-z 0-9 _ -`) was ended,
   * for every process that shares the store, until `expiresAt` (ms since the epoch: the
   * session's own expiry, after which the record may be dropped). Idempotent. A caller without it
   * can end a session in its own process only.
   */
  endSession?(sessionId: string, expiresAt: number): Promise<void>;
  /** Optional: whether {@link endSession} recorded `sessionId`. */
  sessionEnded?(sessionId: string): Promise<boolean>;

  /** Releases the store; never fences other users of the same database. */
  close(): Promise<void>;
}

/** What {@link StateStore.takeContinuation} hands back: the suspended action and its live record. */
export interface TakenContinuation {
  /** The action as held (rebuilt from `action_json`; same hash). */
  readonly action: Action;
  readonly effectKey: string;
  /** The effect record, `executing`, lease live, held by `action`. */
  readonly record: EffectRecord;
  /** The rounds held so far (the round this resumption answers). */
  readonly rounds: number;
}
