/**
 * Clocks, durations and the two timestamp encodings: evidence stamps inside receipt and event
 * documents (`2026-09-03T10:12:01.120Z`) and stored column values (`…+00:00`, a 6-digit fraction
 * only when non-zero).
 *
 * @module
 */
import { InvalidArgument } from './errors.js';

/** A source of the current time; injected everywhere so tests are deterministic. */
export type Clock = () => Date;

/** The wall clock. */
export const systemClock: Clock = () => new Date();

/** Milliseconds in a minute. */
export const MINUTE = 60_000;

// One action stamps the same millisecond many times: the last rendering of each form is kept.
let evidenceAt = Number.NaN;
let evidenceText = '';
// Two for stored stamps: a reservation renders now and now + lease in turn.
const storedAt = [Number.NaN, Number.NaN];
const storedText = ['', ''];
let storedNext = 0;

/** Evidence timestamp: UTC, milliseconds, `Z`. */
export function evidenceTime(d: Date): string {
  const t = d.getTime();
  if (t !== evidenceAt) {
    // toISOString throws (RangeError) on an invalid Date before anything is kept.
    evidenceText = d.toISOString();
    evidenceAt = t;
  }
  return evidenceText;
}

/** Stored column timestamp: UTC ISO-8601 with `+00:00`; fraction only when non-zero, 6 digits. */
export function storedTime(d: Date): string {
  const t = d.getTime();
  if (t === storedAt[0]) return storedText[0]!;
  if (t === storedAt[1]) return storedText[1]!;
  const iso = d.toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  const ms = d.getUTCMilliseconds();
  const text = `${iso.slice(0, 19)}${ms === 0 ? '' : `.${iso.slice(20, 23)}000`}+00:00`;
  storedAt[storedNext] = t;
  storedText[storedNext] = text;
  storedNext ^= 1;
  return text;
}

const STAMP = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$/;

/**
 * Parses a stored or evidence timestamp with an explicit offset (`Z` or `±HH:MM`). Digits beyond
 * milliseconds are truncated toward the past, the safe direction for expiries.
 */
export function parseTime(s: string, what = 'timestamp'): Date {
  const m = typeof s === 'string' ? STAMP.exec(s) : null;
  if (!m) throw new InvalidArgument(`${what} is not an ISO-8601 time with an offset: ${JSON.stringify(s)}`);
  const frac = (m[2] ?? '').slice(0, 3).padEnd(3, '0');
  const t = Date.parse(`${m[1]}.${frac}${m[3]}`);
  if (Number.isNaN(t)) throw new InvalidArgument(`${what} is not a valid time: ${JSON.stringify(s)}`);
  return new Date(t);
}

/** Checks a duration in milliseconds: a positive safe integer. */
export function checkDuration(ms: unknown, what: string): number {
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms <= 0) {
    throw new InvalidArgument(`${what} must be a positive whole number of milliseconds, got ${String(ms)}`);
  }
  return ms;
}
