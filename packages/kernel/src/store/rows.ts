/**
 * Row mapping: the SQL store's rows as the kernel's records and back, and the checks every value
 * passes before it is written. Pure; no SQL is sent from here.
 *
 * @module
 */
import { actionFromJson } from '../action.js';
import { canonicalJson, isPlainObject, isWellFormedString, parseJson, type JsonObject } from '../canonical.js';
import { InvalidArgument, StoreError } from '../errors.js';
import type {
  Approval,
  ApprovalRecord,
  ApprovalStatus,
  EffectRecord,
  EffectState,
  EventDraft,
  EventRecord,
  EventType,
  ReceiptDraft,
  ReceiptRow,
} from '../model.js';
import { parseTime } from '../time.js';
import { approversFromText, requiredRolesFromText } from './approvers-text.js';
import type { SqlValue } from './driver.js';
import type { DelegationRecord } from './state-store.js';

/** A receipt draft's columns, checked. */
export interface ReceiptFieldsChecked {
  readonly receiptId: string;
  readonly actionId: string | null;
  readonly effectKey: string | null;
  readonly result: string;
  readonly finishedAt: string;
  readonly document: JsonObject;
}

/** A receipt draft, checked, before any transaction starts. */
export function receiptFields(draft: ReceiptDraft): ReceiptFieldsChecked {
  if (!isPlainObject(draft) || !isPlainObject(draft.document)) throw new InvalidArgument('receipt draft must be an object with a document');
  return {
    receiptId: nonEmpty(draft.receiptId, 'receipt.receiptId'),
    actionId: nullableText(draft.actionId, 'receipt.actionId'),
    effectKey: nullableText(draft.effectKey, 'receipt.effectKey'),
    result: nonEmpty(draft.result, 'receipt.result'),
    finishedAt: nonEmpty(draft.finishedAt, 'receipt.finishedAt'),
    document: draft.document,
  };
}

/**
 * A draft, checked, as its stored fields and its `insertEvent` parameters. `what` (with `index`,
 * `what[index]`) names the draft in a refusal; the name is built only then.
 */
export function eventFields(event: EventDraft, what = 'event', index?: number): { record: Omit<EventRecord, 'eventId'>; params: SqlValue[] } {
  if (!isPlainObject(event)) throw new InvalidArgument(`${draftName(what, index)} must be an object`);
  const { type, ts, actionId, effectKey, approvalId, data } = event;
  if (!isText(type)) nonEmpty(type, `${draftName(what, index)}.type`);
  if (!isText(ts)) nonEmpty(ts, `${draftName(what, index)}.ts`);
  if (!isNullableText(actionId)) nullableText(actionId, `${draftName(what, index)}.actionId`);
  if (!isNullableText(effectKey)) nullableText(effectKey, `${draftName(what, index)}.effectKey`);
  if (!isNullableText(approvalId)) nullableText(approvalId, `${draftName(what, index)}.approvalId`);
  if (!isPlainObject(data)) throw new InvalidArgument(`${draftName(what, index)}.data must be a plain object`);
  const a = actionId ?? null;
  const k = effectKey ?? null;
  const p = approvalId ?? null;
  const dataJson = canonicalJson(data, `${draftName(what, index)}.data`);
  return { record: { ts, type, actionId: a, effectKey: k, approvalId: p, data }, params: [ts, type, a, k, p, dataJson] };
}

function draftName(what: string, index: number | undefined): string {
  return index === undefined ? what : `${what}[${index}]`;
}

function isText(v: unknown): v is string {
  return typeof v === 'string' && v !== '';
}

function isNullableText(v: unknown): boolean {
  return v === null || v === undefined || isText(v);
}

export const EFFECT_STATES: readonly EffectState[] = ['reserved', 'executing', 'committed', 'failed', 'ambiguous'];
export const APPROVAL_STATUSES: readonly ApprovalStatus[] = ['pending', 'granted', 'denied', 'expired', 'consumed'];

export interface EffectRow {
  effect_key: string;
  state: string;
  action_id: string;
  attempt: SqlValue;
  lease_expires_at: string | null;
  result_json: string | null;
  error: string | null;
  created_at: string | null;
  updated_at: string | null;
  resolved_by: string | null;
}

export interface ApprovalRow {
  approval_id: string;
  action_hash: string;
  status: string;
  action_json: string;
  approver: string | null;
  created_at: string | null;
  granted_at: string | null;
  expires_at: string | null;
  consumed_at: string | null;
  policy_hash_at_approval: string | null;
  /** Null on a store read before migration 0005 (never on one this build opens). */
  precondition_fingerprint?: string | null;
  approvals_required?: SqlValue;
  /** The verified approvers (spec 05 §4.1 text), or null. */
  approvers?: string | null;
  /** The pinned `{control, role}` list (spec 05 §4.1 text), or null. */
  required_roles?: string | null;
}

export interface EventRow {
  event_id: SqlValue;
  ts: string | null;
  type: string | null;
  action_id: string | null;
  effect_key: string | null;
  approval_id: string | null;
  data_json: string | null;
}

/** The columns of an event row in the order of an event's six parameters. */
const EVENT_COLUMNS = ['ts', 'type', 'action_id', 'effect_key', 'approval_id', 'data_json'] as const;

/**
 * How many of an action's newest events a re-read looks through beyond the ones it seeks: others
 * of the same action may have landed after ours (another delivery of the action refused on our
 * row writes its own events under the same action id).
 */
export const EVENTS_LOOKBACK = 64;

/**
 * The stored events `events` landed as, found among `rows` (an action's newest events, newest
 * first) by what they hold, column by column, in order — the newest match for each — with their
 * ids; `null` when they are not all there. How a re-read finds the events a lost COMMIT landed:
 * not by position, since other events of the action may have come after them.
 */
export function findEvents(rows: readonly EventRow[], events: readonly ReturnType<typeof eventFields>[]): EventRecord[] | null {
  const found = new Array<EventRecord>(events.length);
  let r = 0;
  for (let i = events.length - 1; i >= 0; i--) {
    const f = events[i]!;
    while (r < rows.length && !EVENT_COLUMNS.every((c, j) => (rows[r]![c] ?? null) === (f.params[j] ?? null))) r++;
    if (r === rows.length) return null;
    found[i] = { eventId: int(rows[r]!.event_id, 'events.event_id'), ...f.record };
    r++;
  }
  return found;
}

export interface ReceiptSqlRow extends Omit<ReceiptRow, 'seq'> {
  seq: SqlValue;
}

export interface DelegationRow {
  delegation_id: string;
  parent_id: string;
  depth: SqlValue;
  grant_json: string;
  created_by_agent: string;
  created_by_user: string | null;
  created_via: string;
  created_at: string;
  revoked_at: string | null;
  revoked_by: string | null;
}

export interface ContinuationRow {
  effect_key: string;
  action_id: string;
  action_json: string;
  continuation: string;
  rounds: SqlValue;
}

export interface HeldContinuation {
  effectKey: string;
  actionId: string;
  actionJson: string;
  continuation: string;
  rounds: number;
}

export function continuationFromRow(r: ContinuationRow): HeldContinuation {
  return {
    effectKey: r.effect_key,
    actionId: r.action_id,
    actionJson: r.action_json,
    continuation: r.continuation,
    rounds: int(r.rounds, 'continuations.rounds'),
  };
}

export function delegationFromRow(r: DelegationRow): DelegationRecord {
  return {
    delegationId: r.delegation_id,
    parentId: r.parent_id,
    depth: int(r.depth, 'delegations.depth'),
    grantJson: r.grant_json,
    createdByAgent: r.created_by_agent,
    createdByUser: r.created_by_user ?? null,
    createdVia: r.created_via,
    createdAt: r.created_at,
    revokedAt: r.revoked_at ?? null,
    revokedBy: r.revoked_by ?? null,
  };
}

export function stamp(v: unknown, what: string): string {
  parseTime(nonEmpty(v, what), what);
  return v as string;
}

export function nonEmpty(v: unknown, what: string): string {
  if (typeof v !== 'string' || v === '') throw new InvalidArgument(`${what} must be a non-empty string`);
  return v;
}

export function nullableText(v: unknown, what: string): string | null {
  if (v === null || v === undefined) return null;
  return nonEmpty(v, what);
}

/** Free text for a column: a lone surrogate is written as its `\uXXXX` escape rather than failing. */
export function storedText(s: string): string {
  if (isWellFormedString(s)) return s;
  return s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}

/**
 * A chain position read for verification: a safe integer, or `NaN` when the column holds anything
 * else (SQLite keeps a string or a fraction in an INTEGER column). Never throws, so that a
 * malformed row reaches {@link verifyChain}, which names it, instead of failing the whole read.
 */
export function chainPosition(v: SqlValue): number {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  if (typeof v === 'bigint' && v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(v);
  return Number.NaN;
}

/** An integer column value as a `number`. */
export function int(v: SqlValue | undefined, what: string): number {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  if (typeof v === 'bigint' && v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(v);
  throw new StoreError(`[kernel] column ${what} holds ${String(v)}, not a safe integer`);
}

export function receiptFromRow(r: ReceiptSqlRow): ReceiptRow {
  return {
    receipt_id: r.receipt_id,
    action_id: r.action_id ?? null,
    effect_key: r.effect_key ?? null,
    result: r.result ?? null,
    json: r.json ?? null,
    ts: r.ts ?? null,
    seq: r.seq === null || r.seq === undefined ? null : chainPosition(r.seq),
    prev_hash: r.prev_hash ?? null,
    hash: r.hash ?? null,
  };
}

/** A page bound: a non-negative position and a limit of 1 to 10 000 rows. */
export function checkPage(after: number, limit: number): void {
  if (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 0)
    throw new InvalidArgument(`after must be a non-negative integer, got ${String(after)}`);
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > 10_000)
    throw new InvalidArgument(`limit must be an integer from 1 to 10000, got ${String(limit)}`);
}

export function effectFromRow(r: EffectRow): EffectRecord {
  return {
    effectKey: r.effect_key,
    state: r.state as EffectState,
    actionId: r.action_id,
    attempt: int(r.attempt, 'effects.attempt'),
    leaseExpiresAt: r.lease_expires_at ?? null,
    resultJson: r.result_json ?? null,
    error: r.error ?? null,
    createdAt: r.created_at ?? null,
    updatedAt: r.updated_at ?? null,
    resolvedBy: r.resolved_by ?? null,
  };
}

/**
 * `approvals_required`: NULL is 1 (a row from before it was recorded); 0, a negative number or
 * anything but an integer makes the row unreadable, as it does for the original (spec 05 §1.4) —
 * reading it as 1 would let one answer grant what needs several.
 */
function approvalsRequired(r: ApprovalRow): number {
  const v = r.approvals_required;
  if (v === null || v === undefined) return 1;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1)
    throw new StoreError(`[kernel] approval ${r.approval_id} is unreadable: its approvals_required is not an integer of at least 1`);
  return n;
}

export function approvalFromRow(r: ApprovalRow): ApprovalRecord {
  const approvers = approversFromText(r.approval_id, r.approvers);
  const roles = requiredRolesFromText(r.approval_id, r.required_roles);
  return {
    request: {
      requestId: r.approval_id,
      actionHash: r.action_hash,
      action: actionFromJson(r.action_json),
      createdAt: r.created_at ?? '',
      expiresAt: r.expires_at ?? '',
      policyHash: r.policy_hash_at_approval ?? null,
      approvalsRequired: approvalsRequired(r),
      preconditionFingerprint: r.precondition_fingerprint ?? null,
      ...(roles.length === 0 ? {} : { requiredRoles: roles }),
    },
    status: r.status as ApprovalStatus,
    approver: r.approver ?? null,
    grantedAt: r.granted_at ?? null,
    consumedAt: r.consumed_at ?? null,
    ...(approvers.length === 0 ? {} : { approvers }),
  };
}

export function grantedApproval(record: ApprovalRecord): Approval {
  return {
    approvalId: record.request.requestId,
    actionHash: record.request.actionHash,
    approver: record.approver ?? '',
    grantedAt: record.grantedAt ?? '',
    expiresAt: record.request.expiresAt,
    ...(record.approvers === undefined || record.approvers.length === 0 ? {} : { approvers: record.approvers }),
    ...((record.request.preconditionFingerprint ?? null) === null ? {} : { preconditionFingerprint: record.request.preconditionFingerprint }),
  };
}

export function eventFromRow(r: EventRow): EventRecord {
  const data = r.data_json === null ? {} : parseJson(r.data_json, { what: 'events.data_json', floats: 'allow' });
  return {
    eventId: int(r.event_id, 'events.event_id'),
    ts: r.ts ?? '',
    type: (r.type ?? '') as EventType,
    actionId: r.action_id ?? null,
    effectKey: r.effect_key ?? null,
    approvalId: r.approval_id ?? null,
    data: (isPlainObject(data) ? data : { value: data }) as JsonObject,
  };
}

export function effectParams(next: EffectRecord, prior: EffectRecord): SqlValue[] {
  return [
    next.state,
    next.actionId,
    next.attempt,
    next.leaseExpiresAt,
    next.resultJson,
    next.error,
    next.updatedAt,
    next.resolvedBy,
    prior.effectKey,
    prior.state,
    prior.actionId,
    prior.attempt,
  ];
}
