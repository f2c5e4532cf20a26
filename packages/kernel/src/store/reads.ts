/**
 * The SQL store's reads: one statement each, no transaction, queued behind any transaction on a
 * single connection; rows mapped to records by `rows.ts`.
 *
 * @module
 */
import { InvalidArgument, StoreError } from '../errors.js';
import type { Approval, ApprovalRecord, ApprovalStatus, ChainHead, EffectRecord, EffectState, EventRecord, EventType, ReceiptRow } from '../model.js';
import { parseTime, storedTime } from '../time.js';
import type { SqlExecutor, SqlValue } from './driver.js';
import type { DelegationRecord } from './state-store.js';
import { SqlEngine } from './engine.js';
import {
  EFFECT_STATES,
  APPROVAL_STATUSES,
  type EffectRow,
  type ApprovalRow,
  type EventRow,
  type ReceiptSqlRow,
  type DelegationRow,
  type ContinuationRow,
  type HeldContinuation,
  continuationFromRow,
  delegationFromRow,
  nonEmpty,
  chainPosition,
  int,
  receiptFromRow,
  checkPage,
  effectFromRow,
  approvalFromRow,
  grantedApproval,
  eventFromRow,
} from './rows.js';

export async function getApproval(e: SqlEngine, id: string): Promise<ApprovalRecord | null> {
  const i = nonEmpty(id, 'approval_id');
  return e.read((ex) => e.approval(ex, i));
}

export async function approvalsFor(e: SqlEngine, actionHash: string): Promise<ApprovalRecord[]> {
  const hash = nonEmpty(actionHash, 'action_hash');
  return e.read(async (ex) => (await e.query<ApprovalRow>(ex, e.sql.sql.approvalsFor, [hash])).rows.map(approvalFromRow));
}

async function newestUnexpired(e: SqlEngine, actionHash: string, status: 'granted' | 'denied'): Promise<ApprovalRecord | null> {
  const hash = nonEmpty(actionHash, 'action_hash');
  return e.read(async (ex, now) => {
    const rows = (await e.query<ApprovalRow>(ex, e.sql.sql.newestApprovalsFor, [hash, status])).rows;
    const t = now().getTime();
    for (const row of rows) {
      if (row.expires_at !== null && parseTime(row.expires_at, 'expires_at').getTime() > t) return approvalFromRow(row);
    }
    return null;
  });
}

export async function findGrantedApproval(e: SqlEngine, actionHash: string): Promise<Approval | null> {
  const record = await newestUnexpired(e, actionHash, 'granted');
  return record ? grantedApproval(record) : null;
}

export async function findDeniedRequest(e: SqlEngine, actionHash: string): Promise<ApprovalRecord | null> {
  return newestUnexpired(e, actionHash, 'denied');
}

export async function listApprovals(e: SqlEngine, status?: ApprovalStatus): Promise<ApprovalRecord[]> {
  if (status !== undefined && !APPROVAL_STATUSES.includes(status)) throw new InvalidArgument(`unknown approval status ${JSON.stringify(status)}`);
  const { sql } = e.sql;
  return e.read(async (ex) =>
    (await (status === undefined ? e.query<ApprovalRow>(ex, sql.listApprovals) : e.query<ApprovalRow>(ex, sql.listApprovalsInStatus, [status]))).rows.map(
      approvalFromRow,
    ),
  );
}

export async function continuationRounds(e: SqlEngine, key: string): Promise<number> {
  const k = nonEmpty(key, 'effect_key');
  return e.read(async (ex) => (await heldFor(e, ex, k))?.rounds ?? 0);
}

export async function heldFor(e: SqlEngine, ex: SqlExecutor, key: string): Promise<HeldContinuation | null> {
  const row = (await e.query<ContinuationRow>(ex, e.sql.sql.selectContinuation, [key])).rows[0];
  return row ? continuationFromRow(row) : null;
}

export async function heldByValue(e: SqlEngine, ex: SqlExecutor, value: string): Promise<HeldContinuation | null> {
  const row = (await e.query<ContinuationRow>(ex, e.sql.sql.selectContinuationByValue, [value])).rows[0];
  return row ? continuationFromRow(row) : null;
}

export async function getEffect(e: SqlEngine, key: string): Promise<EffectRecord | null> {
  const k = nonEmpty(key, 'effect_key');
  return e.read((ex) => e.effect(ex, k));
}

export async function listEffects(e: SqlEngine, state?: EffectState): Promise<EffectRecord[]> {
  if (state !== undefined && !EFFECT_STATES.includes(state)) throw new InvalidArgument(`unknown effect state ${JSON.stringify(state)}`);
  const { sql } = e.sql;
  return e.read(async (ex) =>
    (await (state === undefined ? e.query<EffectRow>(ex, sql.listEffects) : e.query<EffectRow>(ex, sql.listEffectsInState, [state]))).rows.map(effectFromRow),
  );
}

export async function chainHead(e: SqlEngine): Promise<ChainHead | null> {
  return e.read(async (ex) => {
    const row = (await e.query<{ seq: SqlValue; hash: string }>(ex, e.sql.sql.selectChainHead)).rows[0];
    return row ? { seq: chainPosition(row.seq), hash: String(row.hash) } : null;
  });
}

/**
 * The original's prune checkpoint (spec 05 §5.3): the seq and hash of the last receipt a prune
 * deleted, where a verification of the rest starts; null when the chain was never pruned. A row
 * whose seq is not an integer or whose hash is not text is a `StoreError` naming it.
 */
export async function pruneCheckpoint(e: SqlEngine): Promise<{ seq: number; hash: string } | null> {
  return e.read(async (ex) => {
    const row = (await e.query<{ seq: SqlValue; hash: SqlValue }>(ex, e.sql.sql.selectPruneCheckpoint)).rows[0];
    if (row === undefined) return null;
    const seq = chainPosition(row.seq);
    if (!Number.isSafeInteger(seq) || seq < 0 || typeof row.hash !== 'string')
      throw new StoreError('[kernel] the prune_checkpoint row is unreadable: its seq is not a non-negative integer or its hash is not text');
    return { seq, hash: row.hash };
  });
}

export async function events(e: SqlEngine): Promise<EventRecord[]> {
  return e.read(async (ex) => (await e.query<EventRow>(ex, e.sql.sql.listEvents)).rows.map(eventFromRow));
}

export async function lastEvent(e: SqlEngine, actionId: string, type: EventType): Promise<EventRecord | null> {
  const a = nonEmpty(actionId, 'action_id');
  const t = nonEmpty(type, 'type');
  return e.read(async (ex) => {
    const row = (await e.query<EventRow>(ex, e.sql.sql.lastEvent, [a, t])).rows[0];
    return row ? eventFromRow(row) : null;
  });
}

export async function lastApprovalEvent(e: SqlEngine, approvalId: string, type: EventType): Promise<EventRecord | null> {
  const a = nonEmpty(approvalId, 'approval_id');
  const t = nonEmpty(type, 'type');
  const select = e.sql.sql.lastApprovalEvent;
  return e.read(async (ex) => {
    if (select === undefined) {
      const all = (await e.query<EventRow>(ex, e.sql.sql.listEvents)).rows.map(eventFromRow);
      return all.filter((ev) => ev.approvalId === a && ev.type === t).at(-1) ?? null;
    }
    const row = (await e.query<EventRow>(ex, select, [a, t])).rows[0];
    return row ? eventFromRow(row) : null;
  });
}

export async function receipts(e: SqlEngine): Promise<ReceiptRow[]> {
  return e.read(async (ex) => (await e.query<ReceiptSqlRow>(ex, e.sql.sql.listReceipts)).rows.map(receiptFromRow));
}

/**
 * Chained receipt rows with `seq` greater than `after`, by `seq`, at most `limit` (bounded reads
 * for views). Rows are as stored; a `seq` that is not an integer reads as `NaN`.
 */
export async function receiptsAfter(e: SqlEngine, after: number, limit: number): Promise<ReceiptRow[]> {
  checkPage(after, limit);
  return e.read(async (ex) => (await e.query<ReceiptSqlRow>(ex, e.sql.sql.receiptsAfter, [after, limit])).rows.map(receiptFromRow));
}

/** The receipt row stored under `receiptId` (as stored), or `null`. */
export async function getReceipt(e: SqlEngine, receiptId: string): Promise<ReceiptRow | null> {
  const row = await e.read(async (ex) => (await e.query<ReceiptSqlRow>(ex, e.sql.sql.receiptById, [nonEmpty(receiptId, 'receiptId')])).rows[0]);
  return row === undefined ? null : receiptFromRow(row);
}

/**
 * At most `limit` approvals after `after` (the `createdAt` and `requestId` of the last record
 * of the previous page; `null` for the first), oldest first, optionally only `status`.
 */
export async function approvalsPage(
  e: SqlEngine,
  options: { status?: ApprovalStatus | undefined; after?: { createdAt: string; requestId: string } | null; limit: number },
): Promise<ApprovalRecord[]> {
  const { status, after = null, limit } = options;
  if (status !== undefined && !APPROVAL_STATUSES.includes(status)) throw new InvalidArgument(`unknown approval status ${JSON.stringify(status)}`);
  checkPage(0, limit);
  if (after !== null && (typeof after !== 'object' || typeof after.createdAt !== 'string' || typeof after.requestId !== 'string')) {
    throw new InvalidArgument('after must be null or { createdAt, requestId } (strings) of the last record read');
  }
  const position: SqlValue[] = after === null ? ['', '', limit] : [after.createdAt, after.requestId, limit];
  const { sql } = e.sql;
  return e.read(async (ex) =>
    (
      await (status === undefined
        ? e.query<ApprovalRow>(ex, sql.approvalsPage, position)
        : e.query<ApprovalRow>(ex, sql.approvalsPageInStatus, [status, ...position]))
    ).rows.map(approvalFromRow),
  );
}

/** How many unexpired `pending` requests the principal `{ agent, user }` has. */
export async function countPendingApprovals(e: SqlEngine, principal: { agent: string; user: string | null }): Promise<number> {
  const agent = nonEmpty(principal?.agent, 'principal.agent');
  const user = principal.user === null || principal.user === undefined ? null : nonEmpty(principal.user, 'principal.user');
  return e.read(async (ex, now) => {
    const row = (await e.query<{ n: SqlValue }>(ex, e.sql.sql.countPendingFor, [storedTime(now()), agent, user])).rows[0];
    return row === undefined ? 0 : int(row.n, 'count');
  });
}

export async function getDelegation(e: SqlEngine, id: string): Promise<DelegationRecord | null> {
  const i = nonEmpty(id, 'delegation_id');
  return e.read(async (ex) => {
    const row = (await e.query<DelegationRow>(ex, e.sql.sql.selectDelegation, [i])).rows[0];
    return row ? delegationFromRow(row) : null;
  });
}

export async function delegationsFor(e: SqlEngine, parentId: string): Promise<DelegationRecord[]> {
  const p = nonEmpty(parentId, 'parent_id');
  return e.read(async (ex) => (await e.query<DelegationRow>(ex, e.sql.sql.delegationsFor, [p])).rows.map(delegationFromRow));
}

export async function delegations(e: SqlEngine, options: { includeRevoked?: boolean } = {}): Promise<DelegationRecord[]> {
  const { sql } = e.sql;
  const text = options?.includeRevoked === true ? sql.listDelegations : sql.listLiveDelegations;
  return e.read(async (ex) => (await e.query<DelegationRow>(ex, text)).rows.map(delegationFromRow));
}

/** Receipt rows with an integer `seq`, in `(seq, receipt_id)` order: after `after`, or the newest `limit`. */
export async function receiptsInChain(
  e: SqlEngine,
  options: { after?: { seq: number; receiptId: string } | null; newest?: boolean; limit: number },
): Promise<ReceiptRow[]> {
  const { after = null, newest = false, limit } = options;
  checkPage(0, limit);
  if (after !== null && (typeof after !== 'object' || !Number.isSafeInteger(after.seq) || typeof after.receiptId !== 'string')) {
    throw new InvalidArgument('after must be null or { seq, receiptId } (an integer and a string) of the last row read');
  }
  const { sql } = e.sql;
  const position: SqlValue[] = after === null ? [Number.MIN_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, ''] : [after.seq, after.seq, after.receiptId];
  return e.read(async (ex) =>
    (
      await (newest ? e.query<ReceiptSqlRow>(ex, sql.newestReceiptsInChain, [limit]) : e.query<ReceiptSqlRow>(ex, sql.receiptsInChain, [...position, limit]))
    ).rows.map(receiptFromRow),
  );
}

/** Receipt rows whose `seq` is not an integer, by `receipt_id` after `after`. */
export async function receiptsOffChain(e: SqlEngine, options: { after?: string | null; limit: number }): Promise<ReceiptRow[]> {
  const { after = null, limit } = options;
  checkPage(0, limit);
  if (after !== null && typeof after !== 'string') throw new InvalidArgument('after must be null or the receipt_id of the last row read');
  return e.read(async (ex) => (await e.query<ReceiptSqlRow>(ex, e.sql.sql.receiptsOffChain, [after ?? '', limit])).rows.map(receiptFromRow));
}

/** Effect records in `(createdAt, effectKey)` order: after `after`, or the newest `limit`; optionally only `state`. */
export async function effectsPage(
  e: SqlEngine,
  options: { state?: EffectState | undefined; after?: { createdAt: string | null; effectKey: string } | null; newest?: boolean; limit: number },
): Promise<EffectRecord[]> {
  const { state, after = null, newest = false, limit } = options;
  if (state !== undefined && !EFFECT_STATES.includes(state)) throw new InvalidArgument(`unknown effect state ${JSON.stringify(state)}`);
  checkPage(0, limit);
  if (
    after !== null &&
    (typeof after !== 'object' || (after.createdAt !== null && typeof after.createdAt !== 'string') || typeof after.effectKey !== 'string')
  ) {
    throw new InvalidArgument('after must be null or { createdAt, effectKey } of the last record read');
  }
  const { sql } = e.sql;
  const s = state ?? null;
  return e.read(async (ex) =>
    (
      await (newest
        ? e.query<EffectRow>(ex, sql.newestEffects, [s, s, limit])
        : e.query<EffectRow>(ex, sql.effectsPage, [s, s, after?.createdAt ?? '', after?.effectKey ?? '', limit]))
    ).rows.map(effectFromRow),
  );
}
