/**
 * The one decision table for effect reservations, and the transition predicate every store uses.
 * Pure: stores read a record, call these, then write what they say.
 *
 * @module
 */
import { isWellFormedString, MAX_INTEGER_DIGITS, orderedJson, parseJson, type JsonObject, type JsonValue } from './canonical.js';
import { AmbiguousEffect, DuplicateEffect, InvalidArgument } from './errors.js';
import type { EffectRecord, EffectState, Reservation } from './model.js';
import { parseTime, storedTime } from './time.js';
import { shownId } from './visible.js';

/** The error written on a record whose lease lapsed before its worker finished. */
export const LEASE_EXPIRED = 'lease expired: the worker holding this effect never finished';

/** What a store must do for a reservation. */
export type ReservationPlan =
  /** No record: insert `reserved`, attempt 1. */
  | { readonly kind: 'insert'; readonly reservation: Reservation; readonly record: EffectRecord }
  /** A `failed` record: update it to `reserved` only if it is still `failed` at `priorAttempt`. */
  | { readonly kind: 'renew'; readonly reservation: Reservation; readonly record: EffectRecord; readonly priorAttempt: number }
  /** Refused, nothing written. */
  | { readonly kind: 'refuse'; readonly error: DuplicateEffect | AmbiguousEffect }
  /** Refused, and the lapsed record is written `ambiguous` first (a kept write). */
  | { readonly kind: 'ambiguate'; readonly error: AmbiguousEffect; readonly record: EffectRecord };

/** Whether a record holds a live lease at `now`. */
export function leaseLive(record: EffectRecord, now: Date): boolean {
  if (record.state !== 'reserved' && record.state !== 'executing') return false;
  if (record.leaseExpiresAt === null) return false;
  return now.getTime() <= parseTime(record.leaseExpiresAt, 'lease_expires_at').getTime();
}

/**
 * An effect key and an action id: non-empty, and well-formed text — a lone surrogate has no UTF-8
 * form, so a database keeps another string (U+FFFD) than the one given, and a row would not be
 * recognised as its holder's (or two ids would be one).
 */
export function checkIdentity(key: string, actionId: string): void {
  if (typeof key !== 'string' || key === '') throw new InvalidArgument('effect_key must be a non-empty string');
  if (typeof actionId !== 'string' || actionId === '') throw new InvalidArgument('action_id must be a non-empty string');
  if (!isWellFormedString(key)) throw new InvalidArgument(`effect_key holds a lone surrogate, which a store cannot keep as given`);
  if (!isWellFormedString(actionId)) throw new InvalidArgument(`action_id holds a lone surrogate, which a store cannot keep as given`);
}

function leaseMsOf(leaseMs: number): number {
  if (typeof leaseMs !== 'number' || !Number.isSafeInteger(leaseMs) || leaseMs <= 0) {
    throw new InvalidArgument(`lease must be a positive whole number of milliseconds, got ${String(leaseMs)}`);
  }
  return leaseMs;
}

function duplicateCommitted(key: string): DuplicateEffect {
  return new DuplicateEffect('committed', {
    effectKey: key,
    message: `effect ${shownId(key)} is already committed: it happened, and it will not happen twice`,
  });
}

function duplicateInProgress(key: string): DuplicateEffect {
  return new DuplicateEffect('in_progress', { effectKey: key, message: `effect ${shownId(key)} is in progress: another worker holds it` });
}

function ambiguous(record: EffectRecord): AmbiguousEffect {
  return new AmbiguousEffect(record.effectKey, {
    actionId: record.actionId,
    message: `effect ${shownId(record.effectKey)} is ambiguous: it may have happened; a blind retry is refused until a human or a reconcile hook resolves it`,
  });
}

/**
 * Decides a reservation for `key` by `actionId` given the current record (or `null`).
 * `failed` is the only retryable state; a lapsed lease becomes `ambiguous`, never free.
 */
export function planReservation(record: EffectRecord | null, key: string, actionId: string, leaseMs: number, now: Date): ReservationPlan {
  checkIdentity(key, actionId);
  const lease = leaseMsOf(leaseMs);
  const stamp = storedTime(now);
  const leaseExpiresAt = storedTime(new Date(now.getTime() + lease));
  if (record === null) {
    const reservation: Reservation = { effectKey: key, actionId, attempt: 1, leaseExpiresAt };
    return {
      kind: 'insert',
      reservation,
      record: {
        effectKey: key,
        state: 'reserved',
        actionId,
        attempt: 1,
        leaseExpiresAt,
        resultJson: null,
        error: null,
        createdAt: stamp,
        updatedAt: stamp,
        resolvedBy: null,
      },
    };
  }
  switch (record.state) {
    case 'committed':
      return { kind: 'refuse', error: duplicateCommitted(key) };
    case 'ambiguous':
      return { kind: 'refuse', error: ambiguous(record) };
    case 'failed': {
      const attempt = record.attempt + 1;
      return {
        kind: 'renew',
        priorAttempt: record.attempt,
        reservation: { effectKey: key, actionId, attempt, leaseExpiresAt },
        record: { ...record, state: 'reserved', actionId, attempt, leaseExpiresAt, resultJson: null, error: null, resolvedBy: null, updatedAt: stamp },
      };
    }
    case 'reserved':
    case 'executing':
      if (leaseLive(record, now)) return { kind: 'refuse', error: duplicateInProgress(key) };
      return {
        kind: 'ambiguate',
        error: ambiguous(record),
        record: { ...record, state: 'ambiguous', leaseExpiresAt: null, error: LEASE_EXPIRED, updatedAt: stamp },
      };
    default:
      throw new InvalidArgument(`effect ${shownId(key)} has an unknown state ${JSON.stringify(record.state)}`);
  }
}

/**
 * The transition predicate: may `actionId` move `record` out of one of `from`? Returns normally
 * if so; otherwise throws what the spec says (no record → `InvalidArgument`, `ambiguous` →
 * `AmbiguousEffect`, `committed` → `DuplicateEffect(committed)`, another's live lease →
 * `DuplicateEffect(in_progress)`, else `InvalidArgument`).
 */
export function checked(record: EffectRecord | null, key: string, actionId: string, from: readonly EffectState[], now: Date): EffectRecord {
  checkIdentity(key, actionId);
  if (record === null) throw new InvalidArgument(`no effect record for ${shownId(key)}`);
  if (record.actionId === actionId && from.includes(record.state)) return record;
  if (record.state === 'ambiguous') throw ambiguous(record);
  if (record.state === 'committed') throw duplicateCommitted(key);
  if (record.actionId !== actionId && leaseLive(record, now)) throw duplicateInProgress(key);
  throw new InvalidArgument(
    `effect ${shownId(key)} is ${record.state} (attempt ${record.attempt} by ${shownId(record.actionId)}); ${shownId(actionId)} cannot move it from ${from.join('|')}`,
  );
}

/** A one-line, non-empty resolver/approver string with no control or format characters. */
export function checkActor(who: unknown, what: string): string {
  if (typeof who !== 'string' || who === '' || /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.test(who)) {
    throw new InvalidArgument(`${what} must be a non-empty, one-line string with no control characters`);
  }
  return who;
}

/** The error text a human or hook resolution writes on the record. */
export function resolutionError(state: 'committed' | 'failed', resolver: string, old: string | null): string {
  return `resolved ${state} by ${resolver}${old ? ` (was: ${old})` : ''}`;
}

/**
 * The resolution predicate: only an `ambiguous` record may be resolved, only to `committed` or
 * `failed`, by any holder.
 */
export function checkResolvable(record: EffectRecord | null, key: string, state: unknown, resolver: unknown): 'committed' | 'failed' {
  checkActor(resolver, 'resolver');
  if (state !== 'committed' && state !== 'failed')
    throw new InvalidArgument(`an effect can be resolved only to committed or failed, not ${JSON.stringify(state)}`);
  if (record === null) throw new InvalidArgument(`no effect record for ${shownId(key)}`);
  if (record.state !== 'ambiguous')
    throw new InvalidArgument(`effect ${shownId(key)} is ${record.state}, not ambiguous: only an ambiguous effect can be resolved`);
  return state;
}

/**
 * Extending a held lease: only this holder's live `executing` record, never shorter; a lapsed
 * lease is never extended (`AmbiguousEffect`). Returns the new expiry.
 */
export function planLeaseExtension(record: EffectRecord | null, key: string, actionId: string, leaseMs: number, now: Date): string {
  const lease = leaseMsOf(leaseMs);
  const r = checked(record, key, actionId, ['executing', 'reserved'], now);
  if (r.state === 'reserved') throw duplicateInProgress(key);
  if (!leaseLive(r, now)) throw ambiguous(r);
  const wanted = now.getTime() + lease;
  const current = r.leaseExpiresAt === null ? 0 : parseTime(r.leaseExpiresAt).getTime();
  return storedTime(new Date(Math.max(wanted, current)));
}

/** The one message every unmatched continuation gets: it says nothing about which part failed. */
export const UNKNOWN_CONTINUATION = 'unknown continuation: it was never held here, or it was already taken';

/** A continuation value as held: a non-empty string. */
export function checkContinuation(continuation: unknown): string {
  if (typeof continuation !== 'string' || continuation === '') throw new InvalidArgument('continuation must be a non-empty string');
  return continuation;
}

/**
 * Holding a continuation (an executor suspended): the lease is extended exactly as
 * {@link planLeaseExtension} decides (this holder's live `executing` record only, never shorter),
 * and the round count goes up by one — restarting at 1 when the held row belongs to an earlier
 * attempt (another `action_id`). Returns the new lease expiry and round.
 */
export function planContinuationHold(
  record: EffectRecord | null,
  key: string,
  actionId: string,
  continuation: string,
  leaseMs: number,
  now: Date,
  held: { actionId: string; rounds: number } | null,
): { leaseExpiresAt: string; round: number } {
  checkContinuation(continuation);
  const leaseExpiresAt = planLeaseExtension(record, key, actionId, leaseMs, now);
  const round = held !== null && held.actionId === actionId ? held.rounds + 1 : 1;
  return { leaseExpiresAt, round };
}

/**
 * Whether a matched continuation may be taken: its record must be the holder's live `executing`
 * one. Anything else — lapsed, ambiguated, resolved, renewed by another attempt — is
 * `AmbiguousEffect`: whether the suspended effect happened is not known here.
 */
export function checkTakeable(record: EffectRecord | null, key: string, actionId: string, now: Date): EffectRecord {
  checkIdentity(key, actionId);
  if (record !== null && record.actionId === actionId && record.state === 'executing' && leaseLive(record, now)) return record;
  throw new AmbiguousEffect(key, {
    actionId: record?.actionId ?? actionId,
    message: `effect ${shownId(key)} can no longer be resumed (${record === null ? 'no record' : `${record.state}${leaseLive(record, now) ? '' : ', lease expired'}, attempt ${record.attempt} by ${shownId(record.actionId)}`}): whether the suspended effect happened is unknown`,
  });
}

/** Compares two strings in time that depends only on their lengths (a continuation is a bearer secret). */
export function sameSecret(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let diff = x.length ^ y.length;
  const n = Math.max(x.length, y.length);
  for (let i = 0; i < n; i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

/**
 * Renders an executor's result for `result_json`: plain JSON, big integers written as their
 * digits, every object key kept as data (`__proto__` included) and every string exactly as given
 * (no tag inside a string can turn it into something else). Never throws: values JSON cannot
 * encode become their string rendering (a `Date` its ISO time, ±Infinity/NaN their names, an
 * integer of more than {@link MAX_INTEGER_DIGITS} digits its digit string, a
 * cycle `"[Circular]"`, `undefined` null), a lone surrogate becomes U+FFFD (it has no UTF-8
 * form), and if rendering still fails the whole result is `{"repr": <string>}`.
 * {@link resultFromJson} reads it back.
 */
export function resultToJson(result: unknown): string {
  // The objects being rendered above this one: a cycle, not a value seen twice (a shared value is data).
  const open = new WeakSet<object>();
  const text = (s: string): string => (isWellFormedString(s) ? s : s.replace(LONE_SURROGATES, '\uFFFD'));
  const conv = (v: unknown): JsonValue => {
    if (v === null || typeof v === 'boolean') return v;
    // Beyond the digits a reader accepts, an integer is kept as its digit string, still readable.
    if (typeof v === 'bigint') return (v < 0n ? -v : v).toString().length > MAX_INTEGER_DIGITS ? v.toString() : v;
    if (typeof v === 'string') return text(v);
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return String(v);
      // A whole double beyond 2^53 as its exact digits: its shortest rendering names another integer.
      return Number.isSafeInteger(v) || !Number.isInteger(v) ? v : BigInt(v);
    }
    if (typeof v === 'undefined') return null;
    if (typeof v === 'object') {
      if (open.has(v)) return '[Circular]';
      if (v instanceof Date) return Number.isNaN(v.getTime()) ? String(v) : v.toISOString();
      const proto = Object.getPrototypeOf(v);
      if (!Array.isArray(v) && proto !== Object.prototype && proto !== null) return text(String(v));
      open.add(v);
      try {
        if (Array.isArray(v)) return Array.from(v, conv);
        // A prototype-free copy: `o['__proto__'] = …` stays an own key, so no key is dropped.
        const o = Object.create(null) as JsonObject;
        for (const k of Object.keys(v)) o[text(k)] = conv((v as Record<string, unknown>)[k]);
        return o;
      } finally {
        open.delete(v);
      }
    }
    return text(String(v));
  };
  try {
    return orderedJson(conv(result));
  } catch {
    let s: string;
    try {
      s = String(result);
    } catch {
      s = Object.prototype.toString.call(result);
    }
    return orderedJson({ repr: text(s) });
  }
}

const LONE_SURROGATES = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Reads a stored `result_json` back (the inverse of {@link resultToJson}): fractions are allowed
 * (results are whatever the executor returned), integers beyond 2^53 − 1 come back as `bigint`,
 * objects are prototype-free so `__proto__` stays a key. `null` (no result) is `null`. Text that
 * is not JSON (an old row) is refused with {@link InvalidArgument}; a caller showing it may fall
 * back to the raw text.
 */
export function resultFromJson(text: string | null): JsonValue {
  if (text === null) return null;
  return parseJson(text, { floats: 'allow', what: 'result_json' });
}
