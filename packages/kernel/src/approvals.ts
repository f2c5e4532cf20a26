/**
 * The approval predicates every store uses: answering a request, and consuming a grant.
 * Pure: a store reads the record, calls these, then writes what they say.
 *
 * @module
 */
import { ActionDenied, ApprovalMismatch } from './errors.js';
import type { ApprovalRecord } from './model.js';
import { parseTime } from './time.js';

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
  return new ApprovalMismatch(reason, { approvalId: id, message: `approval ${id} refused (${reason}): ${detail}` });
}

/**
 * May approval `id` be consumed for an action with `actionHash`? In this order: unknown,
 * hash mismatch (before status, so a mutated action leaves the approval granted), denied,
 * not granted, expired (checked at consumption), else consume.
 */
export function checkConsumable(record: ApprovalRecord | null, id: string, actionHash: string, now: Date): ApprovalPlan {
  if (record === null) throw mismatch('unknown', id, 'no such approval request');
  if (record.request.actionHash !== actionHash) {
    throw mismatch('mismatch', id, 'it was granted for a different action (the action hash differs)');
  }
  if (record.status === 'denied') {
    throw new ActionDenied('approval_denied', { actionId: null, message: `approval ${id} was denied by ${record.approver ?? 'a human'}` });
  }
  if (record.status !== 'granted') {
    const detail = record.status === 'consumed' ? 'an approval is single-use and was already consumed' : `it is ${record.status}, not granted`;
    throw mismatch(record.status, id, detail);
  }
  if (expired(record, now)) return { kind: 'expire', error: mismatch('expired', id, `it expired at ${record.request.expiresAt}`) };
  const fingerprint = record.request.preconditionFingerprint;
  if (fingerprint !== undefined && fingerprint !== null) {
    // Filed (by the original) against the state of the world it fingerprinted: using it without
    // rechecking that state would skip what the human was promised. This build has no
    // precondition provider, so the recheck cannot run — never a skip (spec 05 §4.4).
    throw mismatch(
      'precondition_missing',
      id,
      'it was requested against a precondition fingerprint, and this build cannot recheck preconditions; use it from a ctrlrun that can, or file a new request',
    );
  }
  return { kind: 'ok', record };
}

/**
 * May request `id` be granted now by one answer? {@link checkAnswerable}'s checks, and the
 * request must need only one approver: one that needs several verified approvers (the original's
 * `approvals_required`) is left pending — this build records no verified approver, so its yes
 * would turn M-of-N into 1-of-N (spec 05 §4.5).
 */
export function checkGrantable(record: ApprovalRecord | null, id: string, now: Date): ApprovalPlan {
  const plan = checkAnswerable(record, id, now);
  if (plan.kind === 'expire') return plan;
  const n = plan.record.request.approvalsRequired ?? 1;
  if (n > 1)
    throw mismatch(
      'pending',
      id,
      `it needs ${n} verified approvers, and this build records no verified approver, so its answer cannot count; it stays pending (answer it where approvers are verified, or deny it)`,
    );
  return plan;
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
