// Receipt fixtures shared by the kernel's tests.
import { buildReceipt, GENESIS_HASH, sealReceipt } from '@ctrlrun/kernel/store';
import { createAction, sequentialIds, type ChainHead, type JsonObject, type ReceiptRow } from '@ctrlrun/kernel';

/**
 * The keys of a `ctrlrun.receipt/v7` document in the order the spec lists them: the v3 keys of
 * docs/spec/01-core.md's receipt, then the keys v4–v7 appended (spec 05 §2.1). Written out here on
 * purpose, not imported from the kernel: the tests compare the kernel's documents against the
 * spec, not against the kernel's own list.
 */
export const SPEC_RECEIPT_KEYS: readonly string[] = Object.freeze([
  'schema',
  'receipt_id',
  'action_id',
  'action',
  'action_hash',
  'principal',
  'resource',
  'arguments',
  'environment',
  'decision',
  'decision_reason',
  'approval_id',
  'approver',
  'effect_key',
  'attempt',
  'result',
  'execution',
  'would_have',
  'error',
  'started_at',
  'finished_at',
  'seq',
  'prev_hash',
  'policy_hash',
  'policy_version',
  'controls',
  'precondition_at_request',
  'precondition_at_recheck',
  'approvers',
  'authority_grant_id',
  'task',
  'scope_hash',
  'budget_charges',
  'hop',
]);

/**
 * A chain of `n` real receipts, sealed one after another from the genesis hash, as a store keeps
 * them, and its head. `args(seq)` gives each action's arguments; `controls` each receipt's.
 */
export function sealedChain(
  n: number,
  options: { args?: (seq: number) => JsonObject; principal?: { agent: string; user?: string }; controls?: string[] } = {},
): { rows: ReceiptRow[]; head: ChainHead } {
  const ids = sequentialIds();
  const rows: ReceiptRow[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const action = createAction({ name: 'refund', arguments: options.args?.(seq) ?? { amount: seq }, principal: options.principal ?? { agent: 'a' } }, { ids });
    const at = new Date(Date.UTC(2026, 0, 1, 12, 0, seq)).toISOString();
    const draft = buildReceipt(action, {
      receiptId: `rcp_${seq}`,
      decision: 'allow',
      decisionReason: 'rule[0]',
      approvalId: null,
      approver: null,
      effectKey: `refund:${seq}`,
      attempt: 1,
      result: 'committed',
      error: null,
      startedAt: at,
      finishedAt: at,
      policyHash: `sha256:${'a'.repeat(64)}`,
      policyVersion: '1',
      controls: options.controls ?? [],
    });
    const sealed = sealReceipt(draft.document, seq, prev);
    rows.push({
      receipt_id: draft.receiptId,
      action_id: draft.actionId,
      effect_key: draft.effectKey,
      result: draft.result,
      json: sealed.json,
      ts: at,
      seq,
      prev_hash: prev,
      hash: sealed.hash,
    });
    prev = sealed.hash;
  }
  return { rows, head: { seq: n, hash: prev } };
}
