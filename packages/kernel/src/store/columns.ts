/**
 * The column lists every dialect selects and inserts, in one order: the tables are the same in
 * SQLite and Postgres (spec 03 §1), so the row readers in the state store see the same names.
 *
 * @module
 */

/** `effects`, in the order the store reads and writes them. */
export const EFFECT_COLUMNS = 'effect_key, state, action_id, attempt, lease_expires_at, result_json, error, created_at, updated_at, resolved_by';
/** `approvals`. */
export const APPROVAL_COLUMNS =
  'approval_id, action_hash, status, action_json, approver, created_at, granted_at, expires_at, consumed_at, policy_hash_at_approval, precondition_fingerprint, approvals_required, approvers, required_roles';
/** `receipts`. */
export const RECEIPT_COLUMNS = 'receipt_id, action_id, effect_key, result, json, ts, seq, prev_hash, hash';
/** `delegations`. */
export const DELEGATION_COLUMNS =
  'delegation_id, parent_id, depth, grant_json, created_by_agent, created_by_user, created_via, created_at, revoked_at, revoked_by';
/** `continuations` (what the store reads back). */
export const CONTINUATION_COLUMNS = 'effect_key, action_id, action_json, continuation, rounds';
