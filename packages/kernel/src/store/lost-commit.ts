/**
 * Lost COMMIT (docs/spec/03-production.md §3.4, Tables A1 and A2): when a Postgres connection dies during or after
 * `COMMIT`, the store cannot know whether its write landed. It re-reads the effect row on a fresh
 * connection and takes exactly one of six named branches. This module is the decision only —
 * pure, no SQL, no I/O — so every branch is testable without a server; {@link SqlStateStore}
 * does the re-read (with the dialect's `selectEffect`) and acts on the answer.
 *
 * @module
 */
import type { ApprovalRecord, EffectRecord } from '../model.js';

// The branch names keep the lost-COMMIT tables' numbering (a1 = after an INSERT, a2 = after an
// UPDATE; row 1–3) because operators see them in the WARNING log line.

/** After an INSERT: the re-read row is identical to ours — the write landed and we hold it. */
export const INSERT_LANDED = 'a1.row1.ours' as const;
/** After an INSERT: no row — the write never landed; re-issue the same operation once. */
export const INSERT_LOST_REISSUE = 'a1.row2.reinsert' as const;
/** After an INSERT: someone else's row (even with our `action_id`) — plan on it and raise. */
export const INSERT_FOUND_OTHER = 'a1.row3.refuse' as const;
/** After an UPDATE: the row is in our target state, identical to what we wrote — landed. */
export const UPDATE_LANDED = 'a2.row1.landed' as const;
/** After an UPDATE: the row is still exactly the pre-state we read — re-issue the conditional UPDATE once. */
export const UPDATE_LOST_REISSUE = 'a2.row2.reissue' as const;
/** After an UPDATE: anything else — run the transition's predicate on it and raise. */
export const UPDATE_FOUND_OTHER = 'a2.row3.refuse' as const;

/** How a write that landed after the re-read had looked is logged (its branch is the landed one). */
export const LANDED_LATE = 'the re-issue was refused: the lost COMMIT landed after the re-read';

/** The branch taken after an INSERT's lost COMMIT. */
export type InsertBranch = typeof INSERT_LANDED | typeof INSERT_LOST_REISSUE | typeof INSERT_FOUND_OTHER;
/** The branch taken after an UPDATE's lost COMMIT. */
export type UpdateBranch = typeof UPDATE_LANDED | typeof UPDATE_LOST_REISSUE | typeof UPDATE_FOUND_OTHER;
/** One of the six named branches; logged at WARNING (logger `ctrlrun.postgres`, attribute `branch`). */
export type LostCommitBranch = InsertBranch | UpdateBranch;

/** Every branch name, in table order. */
export const LOST_COMMIT_BRANCHES: readonly LostCommitBranch[] = Object.freeze([
  INSERT_LANDED,
  INSERT_LOST_REISSUE,
  INSERT_FOUND_OTHER,
  UPDATE_LANDED,
  UPDATE_LOST_REISSUE,
  UPDATE_FOUND_OTHER,
]);

/**
 * The seven columns a reservation or transition writes, compared as stored. "Identical" means
 * all seven equal — never an `action_id` match alone (the same action may be retried by another
 * process, whose row is not ours).
 */
export const WRITTEN_COLUMNS = [
  'effectKey',
  'state',
  'actionId',
  'attempt',
  'leaseExpiresAt',
  'createdAt',
  'updatedAt',
] as const satisfies readonly (keyof EffectRecord)[];

/** Whether two records agree on all seven written columns (both `null` counts as equal). */
export function sameWrittenColumns(a: EffectRecord | null, b: EffectRecord | null): boolean {
  if (a === null || b === null) return a === b;
  return WRITTEN_COLUMNS.every((c) => a[c] === b[c]);
}

/**
 * Table A1: after the COMMIT of an INSERT of `ours` was lost, the re-read found `found`.
 * Identical → {@link INSERT_LANDED}; no row → {@link INSERT_LOST_REISSUE}; any other row → {@link INSERT_FOUND_OTHER}.
 */
export function lostInsertBranch(ours: EffectRecord, found: EffectRecord | null): InsertBranch {
  if (found === null) return INSERT_LOST_REISSUE;
  return sameWrittenColumns(found, ours) ? INSERT_LANDED : INSERT_FOUND_OTHER;
}

/**
 * Table A2: after the COMMIT of a conditional UPDATE from `prior` to `target` was lost, the
 * re-read found `found`. Identical to `target` → {@link UPDATE_LANDED}; identical to `prior` (nobody
 * moved it; for a renewal, still the same `failed` attempt) → {@link UPDATE_LOST_REISSUE}; anything else,
 * including no row → {@link UPDATE_FOUND_OTHER}. The target is tested first: an idempotent write whose
 * target equals its pre-state has landed either way.
 */
export function lostUpdateBranch(prior: EffectRecord, target: EffectRecord, found: EffectRecord | null): UpdateBranch {
  if (found === null) return UPDATE_FOUND_OTHER;
  if (sameWrittenColumns(found, target)) return UPDATE_LANDED;
  if (sameWrittenColumns(found, prior)) return UPDATE_LOST_REISSUE;
  return UPDATE_FOUND_OTHER;
}

/**
 * What a write transaction was doing to an effect row, declared before its COMMIT so that a lost
 * COMMIT can be resolved by a re-read. `refuse` runs the operation's own predicate on the row the
 * re-read found and returns the error to raise (A1/A2 row 3).
 */
export type EffectWriteIntent =
  | { readonly kind: 'insert'; readonly record: EffectRecord; readonly refuse: (found: EffectRecord | null) => Error }
  | { readonly kind: 'update'; readonly prior: EffectRecord; readonly target: EffectRecord; readonly refuse: (found: EffectRecord | null) => Error };

/** The branch for an intent and the re-read row. */
export function lostCommitBranch(intent: EffectWriteIntent, found: EffectRecord | null): LostCommitBranch {
  return intent.kind === 'insert' ? lostInsertBranch(intent.record, found) : lostUpdateBranch(intent.prior, intent.target, found);
}

// ---------------------------------------------------------------- an edited approval (no effect row)

/** After an edit-then-approve: both rows are as written — the edit landed. */
export const EDIT_LANDED = 'edit.landed' as const;
/** After an edit-then-approve: no edited row and the original still pending — re-issue the edit once. */
export const EDIT_LOST_REISSUE = 'edit.reissue' as const;
/** After an edit-then-approve: anything else (another answer won) — refuse as that answer says. */
export const EDIT_FOUND_OTHER = 'edit.refuse' as const;

/** The branch taken after an edit-then-approve's lost COMMIT; logged like the six above. */
export type EditBranch = typeof EDIT_LANDED | typeof EDIT_LOST_REISSUE | typeof EDIT_FOUND_OTHER;

/**
 * What an edit-then-approve writes, declared before its COMMIT: request `requestId` answered
 * `denied` by `approver`, and request `editedRequestId` for `actionHash` inserted `granted` by
 * `approver`. `refuse` names the refusal when the re-read shows another answer won.
 */
export interface EditWriteIntent {
  readonly requestId: string;
  readonly editedRequestId: string;
  readonly actionHash: string;
  readonly approver: string;
  readonly refuse: (original: ApprovalRecord | null) => Error;
}

/**
 * The branch for an edit whose COMMIT was lost, from the two rows re-read on a fresh connection:
 * the edited row granted (or since consumed) by the editor for the edited hash and the original
 * denied by the editor → {@link EDIT_LANDED}; no edited row and the original still `pending` →
 * {@link EDIT_LOST_REISSUE}; anything else → {@link EDIT_FOUND_OTHER}.
 */
export function lostEditBranch(intent: EditWriteIntent, original: ApprovalRecord | null, edited: ApprovalRecord | null): EditBranch {
  if (edited === null) return original !== null && original.status === 'pending' ? EDIT_LOST_REISSUE : EDIT_FOUND_OTHER;
  const ours =
    edited.request.actionHash === intent.actionHash && edited.approver === intent.approver && (edited.status === 'granted' || edited.status === 'consumed');
  const answered = original !== null && original.status === 'denied' && original.approver === intent.approver;
  return ours && answered ? EDIT_LANDED : EDIT_FOUND_OTHER;
}
