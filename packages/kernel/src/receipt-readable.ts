/**
 * Which stored receipt documents the Python original (0.12.2) can read as a receipt (spec 05
 * §2.5): a row it cannot read is `content_altered` in its chain walk even when its stored hash
 * matches, so ours says the same. The checks are on the parsed document's root fields only.
 *
 * @module
 */
import { isPlainObject, type JsonValue } from './canonical.js';

/** The keys every receipt schema (v1–v7) has: a document without one of them is not a receipt. */
export const ALWAYS_PRESENT = Object.freeze([
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
  'error',
  'started_at',
  'finished_at',
] as const);

/** Every root field the predicate reads, in a fixed order (see {@link readableFields}). */
export const PREDICATE_FIELDS: readonly string[] = Object.freeze([...ALWAYS_PRESENT, 'execution', 'would_have', 'controls']);

const DECISIONS = new Set(['allow', 'approve', 'deny']);
const RESULTS = new Set(['committed', 'failed', 'ambiguous', 'denied', 'blocked', 'observed']);

// Python 3.11's datetime.fromisoformat: a date (extended or basic), then optionally any one
// separator character and a time (HH, HH:MM, HH:MM:SS or basic HHMM, HHMMSS, with a fraction of
// any length after `.` or `,` once seconds are given), then optionally Z or an offset ±HH[:MM[:SS[.ffffff]]]
// or ±HHMM[SS[.ffffff]].
const ISO_DATE = /^(\d{4})-?(\d{2})-?(\d{2})/;
const ISO_TIME = /^(\d{2})(?::?(\d{2})(?::?(\d{2})(?:[.,](\d+))?)?)?/;
const ISO_OFFSET = /^(?:Z|[+-](\d{2})(?::?(\d{2})(?::?(\d{2})(?:\.(\d{1,6}))?)?)?)$/;

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/**
 * Whether Python 3.11's `datetime.fromisoformat` reads `s`, and whether the result carries an
 * offset; `null` when it does not read it. An approximation from its documented grammar: the
 * week-date forms (`2026-W01-1`) are not accepted here.
 */
export function pythonIsoformat(s: string): { readonly offset: boolean } | null {
  const d = ISO_DATE.exec(s);
  if (d === null) return null;
  // Both separators or neither.
  if ((d[0].length === 10) !== (s[4] === '-')) return null;
  const [year, month, day] = [Number(d[1]), Number(d[2]), Number(d[3])];
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return null;
  let rest = s.slice(d[0].length);
  if (rest === '') return { offset: false };
  rest = rest.slice(1); // any one separator character
  const t = ISO_TIME.exec(rest);
  if (t === null) return null;
  const [hour, minute, second] = [Number(t[1]), Number(t[2] ?? 0), Number(t[3] ?? 0)];
  if (hour > 23 || minute > 59 || second > 59) return null;
  rest = rest.slice(t[0].length);
  if (rest === '') return { offset: false };
  const o = ISO_OFFSET.exec(rest);
  if (o === null) return null;
  if (rest !== 'Z' && (Number(o[1]) > 23 || Number(o[2] ?? 0) > 59 || Number(o[3] ?? 0) > 59)) return null;
  return { offset: true };
}

function isTime(v: JsonValue | undefined, needsOffset: boolean): boolean {
  if (typeof v !== 'string') return false;
  const p = pythonIsoformat(v);
  return p !== null && (!needsOffset || p.offset);
}

/**
 * Why the original cannot read a receipt document whose root fields are `values` (in
 * {@link PREDICATE_FIELDS}' order, `undefined` for an absent key; `null` for `values` when the
 * document is not an object), or `null` when it can. Spec 05 §2.5, conditions 1–6.
 */
export function unreadableReceipt(values: readonly (JsonValue | undefined)[] | null): string | null {
  if (values === null) return 'it is not a JSON object';
  const at = (key: string): JsonValue | undefined => values[PREDICATE_FIELDS.indexOf(key)];
  const missing = ALWAYS_PRESENT.filter((k) => at(k) === undefined);
  if (missing.length > 0) return `it lacks ${missing.join(', ')}, which every receipt has`;
  const principal = at('principal');
  if (!isPlainObject(principal)) return 'its principal is not an object';
  for (const k of ['agent', 'user']) if (!Object.prototype.hasOwnProperty.call(principal, k)) return `its principal lacks ${k}, which every receipt has`;
  const p = principal as Readonly<Record<string, JsonValue>>;
  if (typeof p['agent'] !== 'string' || p['agent'] === '') return 'its principal.agent is not a non-empty string';
  for (const k of ['user', 'issuer'])
    if (Object.prototype.hasOwnProperty.call(p, k) && p[k] !== null && (typeof p[k] !== 'string' || p[k] === ''))
      return `its principal.${k} is not null or a non-empty string`;
  const decision = at('decision');
  if (typeof decision !== 'string' || !DECISIONS.has(decision)) return 'its decision is not allow, approve or deny';
  const result = at('result');
  if (typeof result !== 'string' || !RESULTS.has(result)) return 'its result is not one of committed, failed, ambiguous, denied, blocked, observed';
  const execution = at('execution');
  if (execution !== undefined && execution !== null && (typeof execution !== 'string' || !RESULTS.has(execution)))
    return 'its execution is not null or one of committed, failed, ambiguous, denied, blocked, observed';
  const wouldHave = at('would_have');
  if (wouldHave !== undefined && wouldHave !== null) {
    const w = wouldHave as Readonly<Record<string, JsonValue>>;
    if (!isPlainObject(wouldHave) || typeof w['decision'] !== 'string' || !DECISIONS.has(w['decision']) || !Object.prototype.hasOwnProperty.call(w, 'reason'))
      return 'its would_have is not null or an object with a decision and a reason';
  }
  if (!isTime(at('started_at'), false)) return 'its started_at is not an ISO-8601 time';
  if (!isTime(at('finished_at'), false)) return 'its finished_at is not an ISO-8601 time';
  const expires = p['expires_at'];
  if (expires !== undefined && expires !== null && !isTime(expires, true)) return 'its principal.expires_at is not an ISO-8601 time with an offset';
  const controls = at('controls');
  if (controls !== undefined && controls !== null && !(Array.isArray(controls) && controls.every((c) => typeof c === 'string')))
    return 'its controls is not null or an array of strings';
  return null;
}
