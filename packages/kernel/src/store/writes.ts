/**
 * The SQL store's writes: each a read-decide-write in one transaction, deciding through the
 * kernel's pure planners (`planReservation`, `checked`, `checkConsumable`, `checkAnswerable`,
 * `planLeaseExtension`, `sealReceipt`) and writing what they say.
 *
 * @module
 */
import { actionFromJson, actionToJson, type Action } from '../action.js';
import { approvalProgress, checkAnswerable, checkConsumable, checkGrantable } from '../approvals.js';
import { compareCodePoints, isPlainObject, parseJson, type JsonObject } from '../canonical.js';
import { quotedForMessage, shownId } from '../visible.js';
import { pendingReceipt, pendingReceiptDocument, sealReceipt } from '../receipt.js';
import {
  checkActor,
  checkContinuation,
  checkIdentity,
  checked,
  checkResolvable,
  checkTakeable,
  planContinuationHold,
  planLeaseExtension,
  planReservation,
  resolutionError,
  resultToJson,
  sameSecret,
  UNKNOWN_CONTINUATION,
} from '../effects.js';
import { AmbiguousWrite, ApprovalMismatch, DuplicateEffect, InvalidArgument, StoreClosedError, StoreError } from '../errors.js';
import type {
  Approval,
  ApprovalRecord,
  ApprovalRequest,
  EffectRecord,
  EffectState,
  EventDraft,
  EventRecord,
  ReceiptDraft,
  RequiredRole,
  Reservation,
  StoredReceipt,
  VerifiedAnswer,
  VerifiedApprover,
} from '../model.js';
import { parseTime, storedTime } from '../time.js';
import { approversText, requiredRolesText } from './approvers-text.js';
import type { SqlExecutor, SqlValue } from './driver.js';
import type { ApprovalEditResult, ApprovalEditWrite, DelegationRecord, ReservationStep, TakenContinuation, TrailingEvents } from './state-store.js';
import { RaiseAfterCommit, type WriteRun, checkTrailing, ReceiptAlreadyStored, ReceiptPartFailed, SqlEngine } from './engine.js';
import { heldByValue, heldFor } from './reads.js';
import { appendOutcome, insertEffectWithEvents, newestEvents, reserveAlone, updateEffectWithTrail } from './combined.js';
import { checkCharges, type BudgetCharge } from '../budget.js';
import { checkBudgets, writeCharges } from './ledger.js';
import {
  receiptFields,
  eventFields,
  effectParams,
  type ReceiptSqlRow,
  type DelegationRow,
  stamp,
  nonEmpty,
  nullableText,
  storedText,
  int,
  findEvents,
  grantedApproval,
} from './rows.js';

/** The error `check` throws, or `fallback()` if it passes. */
function refusalOf(check: () => unknown, fallback: () => Error): Error {
  try {
    check();
  } catch (err) {
    return err as Error;
  }
  return fallback();
}

function movedOn(key: string): DuplicateEffect {
  return new DuplicateEffect('in_progress', { effectKey: key, message: `effect ${shownId(key)} moved on while it was being written; another worker holds it` });
}

/** The refusal a reservation meets on `found` (re-planned once), or `DuplicateEffect(in_progress)`. */
function reservationRefusal(found: EffectRecord | null, key: string, actionId: string, leaseMs: number, now: Date): Error {
  const again = planReservation(found, key, actionId, leaseMs, now);
  if (again.kind === 'refuse') return again.error;
  return new DuplicateEffect('in_progress', { effectKey: key, message: `effect ${shownId(key)} was reserved by another worker first` });
}

/**
 * Reserves `key`; `state` is what the new record is written as (`executing` when the
 * reservation and the start of execution share one transaction).
 */
async function reserve(
  e: SqlEngine,
  tx: SqlExecutor,
  key: string,
  actionId: string,
  leaseMs: number,
  now: Date,
  run: WriteRun,
  state: 'reserved' | 'executing' = 'reserved',
): Promise<Reservation | RaiseAfterCommit> {
  const { sql } = e.sql;
  const refuse = (found: EffectRecord | null): Error => reservationRefusal(found, key, actionId, leaseMs, now);
  if (sql.insertEffectIfAbsent !== undefined) {
    // Insert first; read only if the key was taken (see DialectSql.insertEffectIfAbsent).
    const fresh = planReservation(null, key, actionId, leaseMs, now);
    if (fresh.kind === 'insert') {
      const n = { ...fresh.record, state };
      run.intent = { kind: 'insert', record: n, refuse };
      const { rowsAffected } = await e.query(tx, sql.insertEffectIfAbsent, [key, n.state, n.actionId, n.attempt, n.leaseExpiresAt, n.createdAt, n.updatedAt]);
      if (rowsAffected === 1) {
        e.hint(n);
        return fresh.reservation;
      }
      run.intent = null;
    }
  }
  const record = await e.effect(tx, key);
  const plan = planReservation(record, key, actionId, leaseMs, now);
  switch (plan.kind) {
    case 'refuse':
      throw plan.error;
    case 'ambiguate':
      await e.cas(tx, record!, plan.record, run, refuse);
      return new RaiseAfterCommit(plan.error);
    case 'renew': {
      const r = plan.reservation;
      run.intent = { kind: 'update', prior: record!, target: { ...plan.record, state }, refuse };
      const { rowsAffected } = await e.query(tx, sql.renewEffect, [
        state,
        r.actionId,
        r.attempt,
        r.leaseExpiresAt,
        plan.record.updatedAt,
        key,
        plan.priorAttempt,
      ]);
      if (rowsAffected !== 1)
        throw new DuplicateEffect('in_progress', { effectKey: key, message: `effect ${shownId(key)} was renewed by another worker first` });
      return r;
    }
    case 'insert': {
      const n = { ...plan.record, state };
      run.intent = { kind: 'insert', record: n, refuse };
      let inserted: number;
      try {
        ({ rowsAffected: inserted } = await e.query(tx, sql.insertEffect, [key, n.state, n.actionId, n.attempt, n.leaseExpiresAt, n.createdAt, n.updatedAt]));
      } catch (err) {
        if (!e.sql.isUniqueViolation(err)) throw err;
        inserted = 0;
      }
      if (inserted !== 1) {
        // The key is the last word: someone else's row landed first. Re-plan once on it.
        const again = planReservation(await e.effect(tx, key), key, actionId, leaseMs, now);
        if (again.kind === 'refuse') throw again.error;
        throw new DuplicateEffect('in_progress', { effectKey: key, message: `effect ${shownId(key)} was reserved by another worker first` });
      }
      e.hint(n);
      return plan.reservation;
    }
  }
}

async function expire(e: SqlEngine, tx: SqlExecutor, record: ApprovalRecord): Promise<void> {
  await e.query(tx, e.sql.sql.expireApproval, [record.request.requestId, record.status]);
}

async function consume(e: SqlEngine, tx: SqlExecutor, record: ApprovalRecord, now: Date): Promise<Approval> {
  const id = record.request.requestId;
  const { rowsAffected } = await e.query(tx, e.sql.sql.consumeApproval, [storedTime(now), id]);
  if (rowsAffected !== 1)
    throw new ApprovalMismatch('consumed', { approvalId: id, message: `approval ${shownId(id)} refused (consumed): it was consumed by another caller first` });
  return grantedApproval(record);
}

/** Whether an outcome may be written as one statement alone (see `appendOutcome`): a driver that sends each step as one statement, writes one alone, and can settle its lost reply. */
function standsAlone(e: SqlEngine): boolean {
  const { driver, sql } = e;
  return (
    driver.capabilities.oneStatementSteps === true &&
    driver.writeAlone !== undefined &&
    driver.reread !== undefined &&
    sql.sql.appendOutcome !== undefined &&
    sql.sql.newestEventsOf !== undefined &&
    sql.sql.selectReceipt !== undefined
  );
}

/**
 * The row this engine last wrote under `key` (see {@link SqlEngine.hint}), if it is `actionId`'s
 * and passes the step's check now; else `null`, and the step reads the row.
 */
function rememberedRow(e: SqlEngine, key: string, actionId: string, from: readonly EffectState[], now: Date): EffectRecord | null {
  const hinted = e.hinted(key);
  if (hinted === undefined || hinted.actionId !== actionId) return null;
  try {
    return checked(hinted, key, actionId, from, now);
  } catch {
    return null;
  }
}

async function transition(
  e: SqlEngine,
  what: string,
  key: unknown,
  actionId: unknown,
  from: readonly EffectState[],
  next: (r: EffectRecord, stamp: string) => EffectRecord,
  events?: TrailingEvents<EffectRecord>,
  also?: (tx: SqlExecutor, target: EffectRecord, now: Date) => Promise<void>,
): Promise<EffectRecord> {
  const k = nonEmpty(key, 'effect_key');
  const a = nonEmpty(actionId, 'action_id');
  // Before anything is read or written: the row's own ids are what this step compares, unread or read.
  checkIdentity(k, a);
  const refuse = (now: Date) => (found: EffectRecord | null) =>
    refusalOf(
      () => checked(found, k, a, from, now),
      () => movedOn(k),
    );
  return e.writeTrailed(
    what,
    events,
    async (tx, now, run) => {
      // The row this engine last wrote under the key, if the check passes on it, stands for the
      // read: the compare-and-set then requires it exactly. A row that moved on is read and checked.
      const remembered = rememberedRow(e, k, a, from, now);
      const exact = e.sql.sql.updateEffectExact;
      if (remembered !== null && exact !== undefined) {
        const target = next(remembered, storedTime(now));
        run.intent = { kind: 'update', prior: remembered, target, refuse: refuse(now) };
        const params = [...effectParams(target, remembered), remembered.leaseExpiresAt, remembered.createdAt, remembered.updatedAt];
        if ((await e.query(tx, exact, params)).rowsAffected === 1) {
          if (also !== undefined) await also(tx, target, now);
          e.hint(target);
          return target;
        }
        run.intent = null;
        e.forget(k);
      }
      const record = checked(await e.effect(tx, k), k, a, from, now);
      const target = await e.cas(tx, record, next(record, storedTime(now)), run, refuse(now));
      if (also !== undefined) await also(tx, target, now);
      e.hint(target);
      return target;
    },
    // A step with more to write in its transaction (`also`) takes the transaction path only.
    also !== undefined || e.sql.sql.updateEffectWithTrail === undefined || e.driver.capabilities.oneStatementSteps !== true
      ? undefined
      : async (tx, now, run, fieldsOf, receipt) => {
          // As above, with the compare-and-set, its events and its receipt as one statement.
          let record = rememberedRow(e, k, a, from, now);
          const exact = record !== null;
          record ??= checked(await e.effect(tx, k), k, a, from, now);
          const target = next(record, storedTime(now));
          run.intent = { kind: 'update', prior: record, target, refuse: refuse(now) };
          const sealing = receipt !== null && e.serverSeals;
          let trail;
          try {
            trail = await updateEffectWithTrail(e, tx, record, target, fieldsOf(target), sealing ? receipt : null, exact);
          } catch (err) {
            // The statement carried the receipt: as statement by statement, the outcome is written again without it.
            throw sealing ? new ReceiptPartFailed(err) : err;
          }
          if (trail === null && exact) {
            // The row is not what this engine last wrote: nothing was written; the step reads it and decides.
            run.intent = null;
            e.forget(k);
            return null;
          }
          if (trail === null) throw refuse(now)(await e.effect(tx, k));
          e.hint(target);
          return { value: target, events: trail.events, receipt: receipt === null ? null : e.serverSeals ? trail.receipt : 'unchained' };
        },
    also !== undefined || !standsAlone(e)
      ? undefined
      : async (now, fieldsOf, receipt) => {
          // No transaction at all where the row is the one remembered: the outcome, its events and
          // its receipt (sealed here, on the head expected) as one statement that commits on its own.
          if (receipt === null) return null;
          const prior = rememberedRow(e, k, a, from, now);
          if (prior === null) return null;
          const target = next(prior, storedTime(now));
          return appendOutcome(e, what, { kind: 'update', prior, target, refuse: refuse(now) }, fieldsOf(target), receipt, now);
        },
  );
}

// ---------------------------------------------------------------- approvals
export async function putApprovalRequest(e: SqlEngine, request: ApprovalRequest): Promise<void> {
  if (!isPlainObject(request)) throw new InvalidArgument('approval request must be an object');
  const id = nonEmpty(request.requestId, 'request.requestId');
  const hash = nonEmpty(request.actionHash, 'request.actionHash');
  const action = request.action;
  if (typeof action !== 'object' || action === null || action.actionHash !== hash) {
    throw new InvalidArgument(`request.action must be the action whose hash is request.actionHash (${hash})`);
  }
  const created = parseTime(nonEmpty(request.createdAt, 'request.createdAt'), 'request.createdAt');
  const expires = parseTime(nonEmpty(request.expiresAt, 'request.expiresAt'), 'request.expiresAt');
  if (!(expires.getTime() > created.getTime())) throw new InvalidArgument('request.expiresAt must be after request.createdAt');
  const policyHash = nullableText(request.policyHash, 'request.policyHash');
  const required = request.approvalsRequired ?? 1;
  if (!Number.isSafeInteger(required) || required < 1) throw new InvalidArgument('request.approvalsRequired must be an integer of at least 1');
  const fingerprint = request.preconditionFingerprint ?? null;
  if (fingerprint !== null && (typeof fingerprint !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(fingerprint)))
    throw new InvalidArgument('request.preconditionFingerprint must be null or sha256: and 64 lowercase hex digits');
  const roles = checkRequiredRoles(request.requiredRoles);
  const actionJson = actionToJson(action);
  const { sql } = e.sql;
  await e.write('putApprovalRequest', async (tx) => {
    try {
      await e.query(tx, sql.insertApproval, [
        id,
        hash,
        actionJson,
        request.createdAt,
        request.expiresAt,
        policyHash,
        required,
        fingerprint,
        requiredRolesText(roles),
      ]);
    } catch (err) {
      if (e.sql.isUniqueViolation(err)) throw new InvalidArgument(`approval request ${shownId(id)} already exists`);
      throw err;
    }
  });
}

/** A compare-and-set that missed because another answer moved the row first: read again and recount. */
const RECOUNT = Symbol('recount');
/** The original retries its grant's compare-and-set this many times before `answered` (spec 05 §4.3). */
const COUNT_TRIES = 8;

/**
 * One yes (the original's `count_grant`, spec 05 §4.3): reached, the request is `granted` with
 * the verified approver appended; not reached, only the approvers are written and the call
 * raises `ApprovalMismatch('pending')` saying how many said yes so far ("1 of 2 approvals: ana").
 * The write is a compare-and-set on status and the approvers text read, retried on a miss.
 */
export async function grantApproval(
  e: SqlEngine,
  id: string,
  approver: string,
  verified: VerifiedAnswer | null = null,
  options: { onePerUser?: boolean } = {},
): Promise<Approval> {
  const i = nonEmpty(id, 'approval_id');
  const who = checkActor(approver, 'approver');
  const answer = checkVerified(verified);
  for (let tries = 1; ; tries++) {
    const out = await e.write('grantApproval', async (tx, now) => {
      const record = await e.approval(tx, i);
      const grantedAt = storedTime(now);
      const plan = checkGrantable(record, i, now, answer, grantedAt, options?.onePerUser === true);
      if (plan.kind === 'expire') {
        await expire(e, tx, record!);
        return new RaiseAfterCommit(plan.error);
      }
      const { count } = plan;
      const status = count.reached ? 'granted' : 'pending';
      if (!(await counted(e, tx, plan.record, status, count.reached ? who : null, count.reached ? grantedAt : null, count.approvers))) return RECOUNT;
      const after: ApprovalRecord = { ...plan.record, approvers: count.approvers };
      if (count.reached) return grantedApproval({ ...after, status: 'granted', approver: who, grantedAt });
      return new RaiseAfterCommit(
        new ApprovalMismatch('pending', {
          approvalId: i,
          counted: true,
          message: `approval ${shownId(i)} is still pending: the yes is recorded, ${approvalProgress(after)}`,
        }),
      );
    });
    if (out !== RECOUNT) return out;
    if (tries >= COUNT_TRIES) throw answeredFirst(i);
  }
}

export async function denyApproval(e: SqlEngine, id: string, approver: string, verified: VerifiedAnswer | null = null): Promise<ApprovalRecord> {
  const i = nonEmpty(id, 'approval_id');
  const who = checkActor(approver, 'approver');
  const answer = checkVerified(verified);
  return e.write('denyApproval', async (tx, now) => {
    const record = await e.approval(tx, i);
    const plan = checkAnswerable(record, i, now);
    if (plan.kind === 'expire') {
      await expire(e, tx, record!);
      return new RaiseAfterCommit(plan.error);
    }
    if (answer === null) {
      await answerRequest(e, tx, i, 'denied', who, null);
      return { ...plan.record, status: 'denied', approver: who } satisfies ApprovalRecord;
    }
    // A verified denial is recorded with the approvers (the original appends it).
    const approvers = [...(plan.record.approvers ?? []), { ...answer, entitled: [...answer.entitled], grantedAt: storedTime(now) }];
    if (!(await counted(e, tx, plan.record, 'denied', who, null, approvers))) throw answeredFirst(i);
    return { ...plan.record, status: 'denied', approver: who, approvers } satisfies ApprovalRecord;
  });
}

function answeredFirst(id: string): ApprovalMismatch {
  return new ApprovalMismatch('answered', { approvalId: id, message: `approval ${shownId(id)} refused (answered): it was answered by another caller first` });
}

/** The counted answer's write: false when the row moved since it was read (status or approvers). */
async function counted(
  e: SqlEngine,
  tx: SqlExecutor,
  read: ApprovalRecord,
  status: 'granted' | 'denied' | 'pending',
  approver: string | null,
  grantedAt: string | null,
  approvers: readonly VerifiedApprover[],
): Promise<boolean> {
  const id = read.request.requestId;
  const params = [status, approver === null ? null : storedText(approver), grantedAt, approversText(approvers), id, approversText(read.approvers ?? [])];
  const { rowsAffected } = await e.query(tx, e.sql.sql.countApproval, params);
  return rowsAffected === 1;
}

/** A verified answer as a store takes it: `{agent, user, issuer, entitled}`, checked; null for none. */
function checkVerified(v: VerifiedAnswer | null | undefined): VerifiedAnswer | null {
  if (v === null || v === undefined) return null;
  if (!isPlainObject(v)) throw new InvalidArgument('verified approver must be an object {agent, user, issuer, entitled}');
  const agent = nonEmpty(v.agent, 'verified.agent');
  const user = v.user === null || v.user === undefined ? null : nonEmpty(v.user, 'verified.user');
  const issuer = v.issuer === null || v.issuer === undefined ? null : nonEmpty(v.issuer, 'verified.issuer');
  if (!Array.isArray(v.entitled) || !v.entitled.every((c) => typeof c === 'string' && c !== ''))
    throw new InvalidArgument('verified.entitled must be a list of control ids');
  return { agent, user, issuer, entitled: [...v.entitled] };
}

function checkRequiredRoles(roles: unknown): RequiredRole[] {
  if (roles === undefined || roles === null) return [];
  if (!Array.isArray(roles)) throw new InvalidArgument('request.requiredRoles must be a list of {control, role}');
  return roles.map((r, i) => {
    if (!isPlainObject(r) || typeof r['control'] !== 'string' || r['control'] === '' || typeof r['role'] !== 'string' || r['role'] === '')
      throw new InvalidArgument(`request.requiredRoles[${i}] must be {control, role} with non-empty strings`);
    return { control: r['control'], role: r['role'] };
  });
}

/**
 * An edit-then-approve in one transaction: the original checked as a grant checks it, answered
 * `denied` by the editor, and the edited action's request inserted and answered `granted` (its
 * expiry the original's). A concurrent answer of the original wins or loses as a whole: the
 * conditional update of the `pending` row is the arbiter, and a lost one rolls everything back.
 */
export async function editApproval(e: SqlEngine, edit: ApprovalEditWrite, events?: TrailingEvents<ApprovalEditResult>): Promise<ApprovalEditResult> {
  if (!isPlainObject(edit)) throw new InvalidArgument('approval edit must be an object');
  const i = nonEmpty(edit.requestId, 'approval_id');
  const n = nonEmpty(edit.editedRequestId, 'edited approval_id');
  if (n === i) throw new InvalidArgument(`the edited request needs a new id, not ${i}`);
  const who = checkActor(edit.approver, 'approver');
  const answer = checkVerified(edit.verified);
  const action = edit.action;
  if (typeof action !== 'object' || action === null || typeof action.actionHash !== 'string')
    throw new InvalidArgument('approval edit needs the edited Action');
  const actionJson = actionToJson(action);
  const policyHash = nullableText(edit.policyHash, 'policyHash');
  const { sql } = e.sql;
  return e.writeTrailed('editApproval', events, async (tx, now, run) => {
    const record = await e.approval(tx, i);
    // An edit grants (the edited request): a request that needs several approvers is not edited by one.
    const plan = checkGrantable(record, i, now);
    if (plan.kind === 'expire') {
      await expire(e, tx, record!);
      return new RaiseAfterCommit(plan.error);
    }
    // Declared before the writes, so a lost COMMIT is settled by re-reading both rows.
    run.edit = {
      requestId: i,
      editedRequestId: n,
      actionHash: action.actionHash,
      approver: who,
      refuse: (found) =>
        refusalOf(
          () => checkAnswerable(found, i, now),
          () =>
            new ApprovalMismatch('answered', { approvalId: i, message: `approval ${shownId(i)} refused (answered): it was answered by another caller first` }),
        ),
    };
    await answerRequest(e, tx, i, 'denied', who, null);
    const at = storedTime(now);
    const expiresAt = plan.record.request.expiresAt;
    let inserted: number;
    try {
      ({ rowsAffected: inserted } = await e.query(tx, sql.insertApproval, [n, action.actionHash, actionJson, at, expiresAt, policyHash, 1, null, null]));
    } catch (err) {
      if (!e.sql.isUniqueViolation(err)) throw err;
      inserted = 0;
    }
    if (inserted !== 1) throw new InvalidArgument(`approval request ${shownId(n)} already exists`);
    // A verified editor is the edited grant's verified approver (it needs one: the edit is a grant of one).
    const approvers = answer === null ? [] : [{ ...answer, entitled: [...answer.entitled], grantedAt: at }];
    const { rowsAffected: answered } = await e.query(tx, sql.countApproval, ['granted', storedText(who), at, approversText(approvers), n, null]);
    if (answered !== 1) throw answeredFirst(n);
    const granted: ApprovalRecord = {
      request: { requestId: n, actionHash: action.actionHash, action, createdAt: at, expiresAt, policyHash },
      status: 'granted',
      approver: who,
      grantedAt: at,
      consumedAt: null,
      ...(approvers.length === 0 ? {} : { approvers }),
    };
    return { proposed: { ...plan.record, status: 'denied', approver: who }, approved: grantedApproval(granted) } satisfies ApprovalEditResult;
  });
}

async function answerRequest(
  e: SqlEngine,
  tx: SqlExecutor,
  id: string,
  status: 'granted' | 'denied',
  approver: string,
  grantedAt: string | null,
): Promise<void> {
  const { rowsAffected } = await e.query(tx, e.sql.sql.answerApproval, [status, storedText(approver), grantedAt, id]);
  if (rowsAffected !== 1) throw answeredFirst(id);
}

/** `precondition`: the fingerprint the presenting pass computed (null: no provider), or undefined when none ran (see `checkConsumable`). */
function checkRecheck(precondition: unknown): string | null | undefined {
  if (precondition === undefined || precondition === null) return precondition;
  if (typeof precondition !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(precondition))
    throw new InvalidArgument('precondition must be null or sha256: and 64 lowercase hex digits');
  return precondition;
}

export async function consumeApproval(e: SqlEngine, id: string, actionHash: string, precondition?: string | null): Promise<Approval> {
  const i = nonEmpty(id, 'approval_id');
  const hash = nonEmpty(actionHash, 'action_hash');
  const recheck = checkRecheck(precondition);
  return e.write('consumeApproval', async (tx, now) => {
    const record = await e.approval(tx, i);
    const plan = checkConsumable(record, i, hash, now, recheck);
    if (plan.kind === 'expire') {
      await expire(e, tx, record!);
      return new RaiseAfterCommit(plan.error);
    }
    return consume(e, tx, plan.record, now);
  });
}

// ---------------------------------------------------------------- effects
export async function reserveEffect(
  e: SqlEngine,
  key: string,
  actionId: string,
  leaseMs: number,
  events?: TrailingEvents<Reservation>,
  charges?: readonly BudgetCharge[],
): Promise<Reservation> {
  const k = nonEmpty(key, 'effect_key');
  const budget = checkCharges(charges);
  if (budget.length === 0) return e.writeTrailed('reserveEffect', events, (tx, now, run) => reserve(e, tx, k, actionId, leaseMs, now, run));
  return e.writeTrailed('reserveEffect', events, (tx, now, run) =>
    charged(e, tx, budget, k, actionId, now, () => reserve(e, tx, k, actionId, leaseMs, now, run)),
  );
}

/**
 * A reservation under budget charges (spec 05 §5.1), in its transaction: the predicate before
 * any write (a refusal writes nothing), the reservation, then one ledger row per charge under the
 * attempt it was given. A kept refusal (an ambiguation) charges nothing.
 */
async function charged<T extends Reservation | RaiseAfterCommit>(
  e: SqlEngine,
  tx: SqlExecutor,
  charges: readonly BudgetCharge[],
  key: string,
  actionId: string,
  now: Date,
  reserveIt: () => Promise<T>,
): Promise<T> {
  await checkBudgets(e, tx, charges, now, actionId);
  const reservation = await reserveIt();
  if (!(reservation instanceof RaiseAfterCommit)) await writeCharges(e, tx, charges, key, reservation.attempt, now);
  return reservation;
}

export async function consumeApprovalAndReserve(
  e: SqlEngine,
  id: string,
  actionHash: string,
  key: string,
  actionId: string,
  leaseMs: number,
  events?: TrailingEvents<[Approval, Reservation]>,
  precondition?: string | null,
  charges?: readonly BudgetCharge[],
): Promise<[Approval, Reservation]> {
  const i = nonEmpty(id, 'approval_id');
  const hash = nonEmpty(actionHash, 'action_hash');
  const k = nonEmpty(key, 'effect_key');
  const recheck = checkRecheck(precondition);
  const budget = checkCharges(charges);
  return e.writeTrailed('consumeApprovalAndReserve', events, async (tx, now, run) => {
    // The approval first: its refusal wins, and nothing of the reservation is written.
    const record = await e.approval(tx, i);
    const plan = checkConsumable(record, i, hash, now, recheck);
    if (plan.kind === 'expire') {
      await expire(e, tx, record!);
      return new RaiseAfterCommit(plan.error);
    }
    // An overspent budget refuses here, after the approval's check: nothing is written, the approval stays granted.
    const reservation = await charged(e, tx, budget, k, actionId, now, () => reserve(e, tx, k, actionId, leaseMs, now, run));
    // A refused reservation (even a kept ambiguation) leaves the approval granted.
    if (reservation instanceof RaiseAfterCommit) return reservation;
    const approval = await consume(e, tx, plan.record, now);
    return [approval, reservation] satisfies [Approval, Reservation];
  });
}

export async function reserveForExecution(
  e: SqlEngine,
  step: ReservationStep,
  events?: TrailingEvents<[Approval | null, Reservation]>,
): Promise<[Approval | null, Reservation]> {
  if (!isPlainObject(step)) throw new InvalidArgument('reservation step must be an object');
  const k = nonEmpty(step.key, 'effect_key');
  const { actionId, leaseMs } = step;
  const approval =
    step.approval === null || step.approval === undefined
      ? null
      : {
          id: nonEmpty(step.approval.id, 'approval_id'),
          hash: nonEmpty(step.approval.actionHash, 'action_hash'),
          recheck: checkRecheck(step.approval.precondition),
        };
  const budget = checkCharges(step.charges);
  return e.writeTrailed(
    'reserveForExecution',
    events,
    async (tx, now, run) => {
      let granted: ApprovalRecord | null = null;
      if (approval !== null) {
        // The approval first: its refusal wins, and nothing of the reservation is written.
        const record = await e.approval(tx, approval.id);
        const plan = checkConsumable(record, approval.id, approval.hash, now, approval.recheck);
        if (plan.kind === 'expire') {
          await expire(e, tx, record!);
          return new RaiseAfterCommit(plan.error);
        }
        granted = plan.record;
      }
      const reservation = await charged(e, tx, budget, k, actionId, now, () => reserve(e, tx, k, actionId, leaseMs, now, run, 'executing'));
      // A refused reservation (even a kept ambiguation) leaves the approval granted.
      if (reservation instanceof RaiseAfterCommit) return reservation;
      const consumed = granted === null ? null : await consume(e, tx, granted, now);
      return [consumed, reservation] satisfies [Approval | null, Reservation];
    },
    approval !== null || budget.length !== 0 || e.sql.sql.insertEffectWithEvents === undefined || e.driver.capabilities.oneStatementSteps !== true
      ? undefined
      : async (tx, now, run, fieldsOf, receipt) => {
          // No approval to consume: try the insert of a fresh row with its events as one statement;
          // if the key has a row, nothing was written and the step above plans on it.
          const plan = planReservation(null, k, actionId, leaseMs, now);
          if (plan.kind !== 'insert' || receipt !== null) return null;
          const record: EffectRecord = { ...plan.record, state: 'executing' };
          const value: [Approval | null, Reservation] = [null, plan.reservation];
          run.intent = { kind: 'insert', record, refuse: (found) => reservationRefusal(found, k, actionId, leaseMs, now) };
          const stored = await insertEffectWithEvents(e, tx, record, fieldsOf(value));
          if (stored === null) {
            run.intent = null;
            return null;
          }
          e.hint(record);
          return { value, events: stored, receipt: null };
        },
    approval !== null || budget.length !== 0 || !standsAlone(e)
      ? undefined
      : async (now, fieldsOf, receipt) => {
          // No transaction at all for a key this engine knows no row of: the fresh row and its
          // events as one statement that commits on its own (a row there already: nothing is
          // written, and the transaction above reads it and plans).
          if (receipt !== null || e.hinted(k) !== undefined) return null;
          const plan = planReservation(null, k, actionId, leaseMs, now);
          if (plan.kind !== 'insert') return null;
          const record: EffectRecord = { ...plan.record, state: 'executing' };
          const value: [Approval | null, Reservation] = [null, plan.reservation];
          const intent = { kind: 'insert', record, refuse: (found: EffectRecord | null) => reservationRefusal(found, k, actionId, leaseMs, now) } as const;
          return reserveAlone(e, 'reserveForExecution', intent, value, fieldsOf(value), now);
        },
    // With several callers, one COMMIT per reservation was four in five of all COMMITs (an outcome's is shared): it joins the group too.
    true,
  );
}

export async function beginExecution(e: SqlEngine, key: string, actionId: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
  return transition(e, 'beginExecution', key, actionId, ['reserved'], (r, stamp) => ({ ...r, state: 'executing', updatedAt: stamp }), events);
}

export async function commitEffect(e: SqlEngine, key: string, actionId: string, result: unknown, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
  const resultJson = resultToJson(result);
  return transition(
    e,
    'commitEffect',
    key,
    actionId,
    ['executing'],
    (r, stamp) => ({
      ...r,
      state: 'committed',
      leaseExpiresAt: null,
      resultJson: storedText(resultJson),
      updatedAt: stamp,
    }),
    events,
  );
}

export async function failEffect(e: SqlEngine, key: string, actionId: string, error: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
  const text = storedText(nonEmpty(error, 'error'));
  return transition(
    e,
    'failEffect',
    key,
    actionId,
    ['executing'],
    (r, stamp) => ({ ...r, state: 'failed', leaseExpiresAt: null, error: text, updatedAt: stamp }),
    events,
    releaseCharges(e),
  );
}

/**
 * What every move to `failed` also writes, in its own transaction: the release of the effect's
 * budget charges (spec 05 §5.1: a failed attempt spends nothing), this build's and the original's
 * alike, on a store both write.
 */
function releaseCharges(e: SqlEngine): (tx: SqlExecutor, target: EffectRecord, now: Date) => Promise<void> {
  return async (tx, target, now) => {
    await e.query(tx, e.sql.sql.releaseCharges, [storedTime(now), target.effectKey]);
  };
}

export async function markAmbiguous(e: SqlEngine, key: string, actionId: string, error: string, events?: TrailingEvents<EffectRecord>): Promise<EffectRecord> {
  const text = storedText(nonEmpty(error, 'error'));
  return transition(
    e,
    'markAmbiguous',
    key,
    actionId,
    ['reserved', 'executing', 'ambiguous'],
    (r, stamp) => ({
      ...r,
      state: 'ambiguous',
      leaseExpiresAt: null,
      error: text,
      updatedAt: stamp,
    }),
    events,
  );
}

export async function resolveEffect(e: SqlEngine, key: string, state: 'committed' | 'failed', resolver: string): Promise<EffectRecord> {
  const k = nonEmpty(key, 'effect_key');
  checkActor(resolver, 'resolver');
  return e.write('resolveEffect', async (tx, now, run) => {
    const record = await e.effect(tx, k);
    const to = checkResolvable(record, k, state, resolver);
    const r = record!;
    const who = storedText(resolver);
    const target = await e.cas(
      tx,
      r,
      { ...r, state: to, leaseExpiresAt: null, error: storedText(resolutionError(to, resolver, r.error)), resolvedBy: who, updatedAt: storedTime(now) },
      run,
      (found) =>
        refusalOf(
          () => checkResolvable(found, k, state, resolver),
          () => movedOn(k),
        ),
    );
    // Only once the compare-and-set took: the release belongs to this move to failed.
    if (target.state === 'failed' && r.state !== 'failed') await releaseCharges(e)(tx, target, now);
    return target;
  });
}

export async function extendLease(e: SqlEngine, key: string, actionId: string, leaseMs: number): Promise<EffectRecord> {
  const k = nonEmpty(key, 'effect_key');
  const a = nonEmpty(actionId, 'action_id');
  return e.write('extendLease', async (tx, now, run) => {
    const record = await e.effect(tx, k);
    const leaseExpiresAt = planLeaseExtension(record, k, a, leaseMs, now);
    return e.cas(tx, record!, { ...record!, leaseExpiresAt, updatedAt: storedTime(now) }, run, (found) =>
      refusalOf(
        () => planLeaseExtension(found, k, a, leaseMs, now),
        () => movedOn(k),
      ),
    );
  });
}

export async function holdContinuation(e: SqlEngine, action: Action, key: string, continuation: string, leaseMs: number): Promise<number> {
  if (!action || typeof action !== 'object' || typeof action.actionHash !== 'string') throw new InvalidArgument('holdContinuation needs an Action');
  const k = nonEmpty(key, 'effect_key');
  const value = checkContinuation(continuation);
  const a = action.actionId;
  const actionJson = storedText(actionToJson(action));
  const { sql } = e.sql;
  return e.write('holdContinuation', async (tx, now, run) => {
    const record = await e.effect(tx, k);
    const held = await heldFor(e, tx, k);
    const plan = planContinuationHold(record, k, a, value, leaseMs, now, held);
    const taken = await heldByValue(e, tx, value);
    // A held value names one suspension; reusing it would let one resumption answer two.
    if (taken !== null)
      throw new InvalidArgument(
        `continuation for ${shownId(k)} is already held${taken.effectKey === k ? ' for this effect' : ' for another effect'}; each suspension needs a fresh one`,
      );
    const stamp = storedTime(now);
    await e.cas(tx, record!, { ...record!, leaseExpiresAt: plan.leaseExpiresAt, updatedAt: stamp }, run, (found) =>
      refusalOf(
        () => planLeaseExtension(found, k, a, leaseMs, now),
        () => movedOn(k),
      ),
    );
    const { rowsAffected } =
      held === null
        ? await e.query(tx, sql.insertContinuation, [k, a, actionJson, value, plan.round, stamp])
        : await e.query(tx, sql.updateContinuation, [a, actionJson, value, plan.round, stamp, k, held.actionId, held.rounds]);
    if (rowsAffected !== 1) throw movedOn(k);
    return plan.round;
  });
}

export async function takeContinuation(e: SqlEngine, continuation: string, options: { environment?: string } = {}): Promise<TakenContinuation> {
  const value = checkContinuation(continuation);
  const environment = options?.environment;
  if (environment !== undefined) nonEmpty(environment, 'environment');
  return e.write('takeContinuation', async (tx, now) => {
    const held = await heldByValue(e, tx, value);
    // One message for every miss: the caller learns nothing about which part was wrong.
    if (held === null || !sameSecret(held.continuation, value)) throw new InvalidArgument(UNKNOWN_CONTINUATION);
    const action = actionFromJson(held.actionJson);
    // Checked before anything is consumed: the deployment the action belongs to can still resume it.
    if (environment !== undefined && action.environment !== environment) {
      throw new InvalidArgument(
        `the held action is for environment ${quotedForMessage(action.environment, 200)}, not ${JSON.stringify(environment)}: only a Control of its own environment may resume it`,
      );
    }
    const record = checkTakeable(await e.effect(tx, held.effectKey), held.effectKey, held.actionId, now);
    const { rowsAffected } = await e.query(tx, e.sql.sql.takeContinuation, [storedTime(now), held.effectKey, value]);
    if (rowsAffected !== 1) throw new InvalidArgument(UNKNOWN_CONTINUATION);
    return { action, effectKey: held.effectKey, record, rounds: held.rounds } satisfies TakenContinuation;
  });
}

// ---------------------------------------------------------------- evidence
export async function appendEvent(e: SqlEngine, event: EventDraft): Promise<EventRecord> {
  const fields = eventFields(event);
  return e.write('appendEvent', (tx) => e.insertEvent(tx, fields));
}

export async function appendEvents(e: SqlEngine, events: readonly EventDraft[]): Promise<EventRecord[]> {
  if (!Array.isArray(events)) throw new InvalidArgument('events must be an array of event drafts');
  const all = events.map((e, i) => eventFields(e, 'events', i));
  if (all.length === 0) return [];
  return e.write('appendEvents', (tx) => e.insertEvents(tx, all));
}

export async function putReceipt(e: SqlEngine, draft: ReceiptDraft, events?: TrailingEvents<StoredReceipt>): Promise<StoredReceipt> {
  const fields = receiptFields(draft);
  const receiptId = fields.receiptId;
  const trailing = checkTrailing(events);
  // Its own `receipt` member is the caller's business on an outcome; here the receipt is the change.
  const only: TrailingEvents<StoredReceipt> | undefined = trailing === undefined ? undefined : { drafts: (r) => trailing.drafts(r) };
  const write = () => e.writeTrailed('putReceipt', only, (tx) => e.chainReceipt(tx, fields));
  /** One write; its lost COMMIT settled by a re-read. */
  const settled = async (): Promise<StoredReceipt> => {
    try {
      return await write();
    } catch (err) {
      if (err instanceof AmbiguousWrite && e.driver.reread !== undefined) return settleLostReceipt(e, receiptId, only, err, write);
      throw err;
    }
  };
  let stored: StoredReceipt;
  try {
    try {
      stored = await settled();
    } catch (err) {
      // A store failure that rolled the write back (a connection cut before its COMMIT, say) is
      // met once more: a receipt id is stored at most once, so a second try can never chain it
      // twice, and a receipt left unwritten leaves its outcome with none (T170).
      if (!(err instanceof StoreError) || err instanceof StoreClosedError || err instanceof AmbiguousWrite) throw err;
      stored = await settled();
    }
  } catch (err) {
    if (!(err instanceof ReceiptAlreadyStored)) throw err;
    // Stored before (the same draft put twice): that row, its events left to the caller. Without
    // `selectReceipt` (SQLite) an id stored is a collision, unless the row is this very receipt,
    // chained meanwhile from pending (`chainPendingReceipts` ran while its writer was still on its way).
    const select = e.sql.sql.selectReceipt ?? e.sql.sql.receiptById;
    const row = await e.read(async (ex) => (await e.query<ReceiptSqlRow>(ex, select, [receiptId])).rows[0]);
    const found = row === undefined ? null : storedReceiptOf(row, receiptId);
    if (found === null) throw err;
    if (e.sql.sql.selectReceipt === undefined && pendingReceipt(found.document).json !== pendingReceipt(fields.document).json) throw err;
    e.noteChained(found);
    return found;
  }
  if (trailing !== undefined && only !== undefined) trailing.stored = only.stored!;
  e.noteChained(stored);
  return stored;
}

/** Thrown inside a transaction to roll it back: the pending receipt was chained meanwhile (by the write that pended it, or another pass). */
class ChainedMeanwhile extends Error {}

/** Off-chain rows read per page while looking for pending receipts. */
const PENDING_PAGE = 500;

/**
 * Chains every pending receipt (see `pendingReceipt`): an outcome's receipt written off the
 * chain because chaining it with the outcome failed, whose writer then stopped before the receipt
 * written alone chained it (a crash). Oldest first (by finished time, then id), each in its own
 * transaction, sealed as the writer would have sealed it (on the head it finds). Other off-chain rows
 * (an older store's unchained receipts) are left as they are. Returns the receipts it chained;
 * a receipt chained meanwhile by another writer is skipped.
 */
export async function chainPendingReceipts(e: SqlEngine): Promise<StoredReceipt[]> {
  const { sql } = e.sql;
  const pending: { receiptId: string; json: string; hash: string; document: JsonObject; ts: string }[] = [];
  for (let after = ''; ;) {
    const rows = await e.read(async (ex) => (await e.query<ReceiptSqlRow>(ex, sql.receiptsOffChain, [after, PENDING_PAGE])).rows);
    for (const row of rows) {
      const document = pendingReceiptDocument(row);
      if (document !== null) pending.push({ receiptId: row.receipt_id, json: row.json!, hash: row.hash!, document, ts: row.ts ?? '' });
    }
    if (rows.length < PENDING_PAGE) break;
    after = rows[rows.length - 1]!.receipt_id;
  }
  pending.sort((a, b) => compareCodePoints(a.ts, b.ts) || compareCodePoints(a.receiptId, b.receiptId));
  const chained: StoredReceipt[] = [];
  for (const p of pending) {
    let stored: StoredReceipt;
    try {
      stored = await e.write('chainPendingReceipts', async (tx) => {
        const head = (await e.query<{ seq: SqlValue; hash: string }>(tx, sql.lockChainHead)).rows[0];
        if (!head) throw new InvalidArgument('the receipt chain has no head row (receipt_chain id = 1)');
        const seq = int(head.seq, 'receipt_chain.seq');
        const prevHash = String(head.hash);
        const sealed = sealReceipt(p.document, seq, prevHash);
        const { rowsAffected } = await e.query(tx, sql.chainPendingReceipt, [sealed.json, seq, prevHash, sealed.hash, p.receiptId, p.json, p.hash]);
        if (rowsAffected !== 1) throw new ChainedMeanwhile();
        await e.query(tx, sql.setChainHash, [sealed.hash]);
        return { seq, prevHash, hash: sealed.hash, json: sealed.json, document: sealed.document };
      });
    } catch (err) {
      if (err instanceof ChainedMeanwhile || (err instanceof StoreError && err.cause instanceof ChainedMeanwhile)) continue;
      if (chained.length === 0) throw err;
      // Those chained stay chained: say so, and that the rest are pending still.
      throw new StoreError(
        `[kernel] [${e.name}] chainPendingReceipts: chained ${chained.length} of ${pending.length} (the last at seq ${chained.at(-1)!.seq}), then ${p.receiptId} failed: ${(err as Error)?.message ?? String(err)}; the rest stay pending`,
        { cause: err },
      );
    }
    e.noteChained(stored);
    chained.push(stored);
  }
  return chained;
}

/** A receipt row as the chain stored it, or `null` when it is not a whole chained row. */
function storedReceiptOf(row: ReceiptSqlRow, receiptId: string): StoredReceipt | null {
  if (row.json === null || row.hash === null || row.prev_hash === null) return null;
  const document = parseJson(row.json, { what: `receipts.json of ${receiptId}`, floats: 'allow' });
  if (!isPlainObject(document)) return null;
  return { seq: int(row.seq, 'receipts.seq'), prevHash: row.prev_hash, hash: row.hash, json: row.json, document: document as JsonObject };
}

/**
 * A receipt written on its own (after its outcome, T170) whose COMMIT reply was lost: the receipt
 * is re-read by its id on a fresh connection, with the action's newest events. There (the COMMIT
 * landed): it, with the events that landed with it. Not there: written once more; a re-issue
 * refused because the id is stored now (the lost COMMIT landed after the re-read) looks once more.
 * Without this the outcome stood with no receipt behind it.
 */
async function settleLostReceipt(
  e: SqlEngine,
  receiptId: string,
  only: TrailingEvents<StoredReceipt> | undefined,
  lost: AmbiguousWrite,
  write: () => Promise<StoredReceipt>,
): Promise<StoredReceipt> {
  const { sql } = e.sql;
  const reread = async (): Promise<StoredReceipt | null> => {
    const newestOf = sql.newestEventsOf;
    const found = await e.driver.reread!(async (ex) => {
      const row = (await e.query<ReceiptSqlRow>(ex, sql.receiptById, [receiptId])).rows[0];
      if (row === undefined) return null;
      const receipt = storedReceiptOf(row, receiptId);
      if (receipt === null) {
        // The receipt pending since its outcome (see `pendingReceipt`): this write, which chains it, did not land.
        if (pendingReceiptDocument(row) !== null) return null;
        throw new StoreError(`[kernel] [${e.name}] putReceipt: receipt ${receiptId} landed without its chain columns`, { cause: lost });
      }
      const drafts = only === undefined ? [] : only.drafts(receipt).map((d, i) => eventFields(d, 'events.drafts(…)', i));
      if (drafts.length === 0) return { receipt, events: [] as EventRecord[] };
      const actionId = drafts.at(-1)!.params[2];
      if (newestOf === undefined || typeof actionId !== 'string') {
        throw new StoreError(`[kernel] [${e.name}] putReceipt: receipt ${receiptId} landed, and the events written with it cannot be told apart here`, {
          cause: lost,
        });
      }
      // Written in the receipt's transaction, after it: among the action's newest events, found by what they hold.
      const events = findEvents(await newestEvents(e, ex, drafts, actionId), drafts);
      if (events === null)
        throw new StoreError(`[kernel] [${e.name}] putReceipt: receipt ${receiptId} landed but its events are not among the action's newest`, { cause: lost });
      return { receipt, events };
    });
    if (found === null) return null;
    if (only !== undefined) only.stored = found.events;
    return found.receipt;
  };
  const look = async (branch: string, refusal: unknown): Promise<StoredReceipt | null> => {
    let found: StoredReceipt | null;
    try {
      found = await reread();
    } catch (err) {
      if (err instanceof StoreError && err.cause === lost) throw err;
      throw new AmbiguousWrite(
        `[kernel] [${e.name}] putReceipt of ${receiptId}: ${(refusal as Error)?.message ?? String(refusal)}, and the re-read on a fresh connection failed (${(err as Error)?.message ?? String(err)}); whether the receipt landed is unknown, and nothing more was written`,
        { cause: err },
      );
    }
    e.logger.warn(
      `[kernel] [${e.name}] putReceipt of ${receiptId}: ${branch}; the re-read on a fresh connection found it ${found === null ? 'absent' : 'stored'}`,
      {
        logger: 'ctrlrun.postgres',
        level: 'WARNING',
        branch: found === null ? RECEIPT_LOST_REISSUE : RECEIPT_LANDED,
        receiptId,
        operation: 'putReceipt',
      },
    );
    return found;
  };
  const landed = await look('the reply was lost', lost);
  if (landed !== null) return landed;
  try {
    return await write();
  } catch (err) {
    // Refused as stored (the first COMMIT landed late) or lost again: one more look decides.
    if (!(err instanceof ReceiptAlreadyStored || err instanceof AmbiguousWrite)) throw err;
    const again = await look(
      err instanceof AmbiguousWrite ? "the re-issue's reply was lost too" : 'the re-issue was refused: the lost COMMIT landed after the re-read',
      err,
    );
    if (again !== null) return again;
    throw err instanceof AmbiguousWrite
      ? new StoreError(
          `[kernel] [${e.name}] putReceipt of ${shownId(receiptId)}: the COMMIT was lost again after one re-issue, and the re-read shows it did not land; nothing was written`,
          { cause: err },
        )
      : err;
  }
}

/** The branches a lone receipt's lost COMMIT takes (logged as the effect branches are). */
const RECEIPT_LANDED = 'receipt.landed';
const RECEIPT_LOST_REISSUE = 'receipt.reissue';

// ---------------------------------------------------------------- delegations
export async function putDelegation(e: SqlEngine, record: DelegationRecord): Promise<void> {
  if (!isPlainObject(record)) throw new InvalidArgument('delegation record must be an object');
  const id = nonEmpty(record.delegationId, 'delegation.delegationId');
  const depth = record.depth;
  if (typeof depth !== 'number' || !Number.isSafeInteger(depth) || depth < 0)
    throw new InvalidArgument(`delegation.depth must be a non-negative integer, got ${String(depth)}`);
  const params: SqlValue[] = [
    id,
    nonEmpty(record.parentId, 'delegation.parentId'),
    depth,
    nonEmpty(record.grantJson, 'delegation.grantJson'),
    storedText(nonEmpty(record.createdByAgent, 'delegation.createdByAgent')),
    record.createdByUser === null || record.createdByUser === undefined ? null : storedText(nonEmpty(record.createdByUser, 'delegation.createdByUser')),
    nonEmpty(record.createdVia, 'delegation.createdVia'),
    stamp(record.createdAt, 'delegation.createdAt'),
    record.revokedAt === null || record.revokedAt === undefined ? null : stamp(record.revokedAt, 'delegation.revokedAt'),
    record.revokedBy === null || record.revokedBy === undefined ? null : storedText(nonEmpty(record.revokedBy, 'delegation.revokedBy')),
  ];
  await e.write('putDelegation', async (tx) => {
    let inserted: number;
    try {
      ({ rowsAffected: inserted } = await e.query(tx, e.sql.sql.insertDelegation, params));
    } catch (err) {
      if (!e.sql.isUniqueViolation(err)) throw err;
      inserted = 0;
    }
    // Never an upsert: a delegation is an act, and a second act under one id would rewrite the first.
    if (inserted !== 1) throw new InvalidArgument(`delegation ${id} already exists; a delegation is never overwritten`);
  });
}

export async function revokeDelegation(e: SqlEngine, id: string, by: string | null, at: string): Promise<boolean> {
  const i = nonEmpty(id, 'delegation_id');
  const who = by === null || by === undefined ? null : storedText(checkActor(by, 'revoked_by'));
  const when = stamp(at, 'revoked_at');
  const { revokeDelegation: revoke, selectDelegation: select } = e.sql.sql;
  return e.write('revokeDelegation', async (tx) => {
    const { rowsAffected } = await e.query(tx, revoke, [when, who, i]);
    if (rowsAffected === 1) return true;
    const row = (await e.query<DelegationRow>(tx, select, [i])).rows[0];
    if (!row) throw new InvalidArgument(`no delegation ${i}`);
    return false;
  });
}
