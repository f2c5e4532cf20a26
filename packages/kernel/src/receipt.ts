/**
 * Receipts (`ctrlrun.receipt/v3`): one per terminal action, chained by hash.
 *
 * @module
 */
import { type Action, principalJson } from './action.js';
import { orderedJson, type JsonObject, type JsonValue } from './canonical.js';
import { hashDocument } from './hash.js';
import type { ReceiptDraft } from './model.js';

/** The schema this build writes. */
export const RECEIPT_SCHEMA = 'ctrlrun.receipt/v3';

/** A receipt's `result`. */
export type ReceiptResult = 'committed' | 'failed' | 'ambiguous' | 'denied' | 'blocked' | 'observed';

/** Everything a receipt records besides the action itself. */
export interface ReceiptFields {
  receiptId: string;
  decision: string;
  decisionReason: string;
  approvalId: string | null;
  approver: string | null;
  effectKey: string | null;
  attempt: number;
  result: ReceiptResult;
  execution?: 'committed' | 'failed' | 'ambiguous' | null;
  wouldHave?: { decision: string; reason: string; blocked_reason: string | null } | null;
  error: string | null;
  /** Evidence timestamp of the start of `execute`. */
  startedAt: string;
  /** Evidence timestamp of the receipt's build. */
  finishedAt: string;
  policyHash: string | null;
  policyVersion: string | null;
  controls: readonly string[];
  /** The canonical arguments to record, when the caller already holds a copy; else read from the action. */
  arguments?: JsonObject;
}

/** Builds the receipt document in `to_json` key order, `seq`/`prev_hash` still null. */
export function buildReceipt(action: Action, f: ReceiptFields): ReceiptDraft {
  const document: JsonObject = {
    schema: RECEIPT_SCHEMA,
    receipt_id: f.receiptId,
    action_id: action.actionId,
    action: action.name,
    action_hash: action.actionHash,
    principal: principalJson(action.principal),
    resource: action.resource,
    arguments: f.arguments ?? action.canonicalArguments,
    environment: action.environment,
    decision: f.decision,
    decision_reason: f.decisionReason,
    approval_id: f.approvalId,
    approver: f.approver,
    effect_key: f.effectKey,
    attempt: f.attempt,
    result: f.result,
    execution: f.execution ?? null,
    would_have: (f.wouldHave ?? null) as JsonValue,
    error: f.error,
    started_at: f.startedAt,
    finished_at: f.finishedAt,
    seq: null,
    prev_hash: null,
    policy_hash: f.policyHash,
    policy_version: f.policyVersion,
    controls: [...f.controls],
  };
  return { receiptId: f.receiptId, actionId: action.actionId, effectKey: f.effectKey, result: f.result, finishedAt: f.finishedAt, document };
}

/**
 * Places a receipt in the chain: sets `seq` and `prev_hash`, renders the stored `json`, and
 * hashes the document exactly as serialised. Stores call this under the head row's lock.
 */
export function sealReceipt(document: JsonObject, seq: number, prevHash: string): { document: JsonObject; json: string; hash: string } {
  // Entries, not `sealed[k] = …`: every key of the document stays data, `__proto__` included.
  const sealed: JsonObject = Object.fromEntries(
    Object.keys(document).map((k): [string, JsonValue] => [k, k === 'seq' ? seq : k === 'prev_hash' ? prevHash : (document[k] as JsonValue)]),
  );
  if (!Object.prototype.hasOwnProperty.call(sealed, 'seq')) sealed['seq'] = seq;
  if (!Object.prototype.hasOwnProperty.call(sealed, 'prev_hash')) sealed['prev_hash'] = prevHash;
  return { document: sealed, json: orderedJson(sealed), hash: hashDocument(sealed, 'receipt') };
}
