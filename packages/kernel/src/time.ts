/**
 * Clocks, durations and the two timestamp encodings: evidence stamps inside receipt and event
 * documents (`2026-09-03T10:12:01.120Z`) and stored column values (`…+00:00`, a 6-digit fraction
 * only when non-zero).
 *
 * @module
 */
import { InvalidArgument } from './errors.js';
import { quotedForMessage } from './quoted.js';

/** A source of the current time; injected everywhere so tests are deterministic. */
export type Clock = () => Date;

/** The wall clock. */
export const systemClock: Clock = () => new Date();

/** Milliseconds in a minute. */
export const MINUTE = 60_000;

const DAY = 86_400_000;
// The day `isoMillis` last rendered: its first millisecond and its `YYYY-MM-DDT`.
let dayStart = Number.NaN;
let dayPrefix = '';

const two = (n: number): string => (n < 10 ? `0${n}` : `${n}`);
const three = (n: number): string => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/**
 * `YYYY-MM-DDTHH:MM:SS.mmm` for `d` (what `toISOString` gives before its `Z`). The date part is
 * rendered by `toISOString` once per day; the time of day is plain arithmetic. Throws
 * `RangeError` on an invalid Date, as `toISOString` does.
 */
function isoMillis(d: Date): string {
  const t = d.getTime();
  if (!(t >= dayStart && t < dayStart + DAY)) {
    dayPrefix = d.toISOString().slice(0, -13);
    dayStart = Math.floor(t / DAY) * DAY;
  }
  let rest = t - dayStart;
  const ms = rest % 1000;
  rest = (rest - ms) / 1000;
  const sec = rest % 60;
  rest = (rest - sec) / 60;
  const min = rest % 60;
  return `${dayPrefix}${two((rest - min) / 60)}:${two(min)}:${two(sec)}.${three(ms)}`;
}

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
    // Throws (RangeError) on an invalid Date before anything is kept.
    evidenceText = `${isoMillis(d)}Z`;
    evidenceAt = t;
  }
  return evidenceText;
}

/** Stored column timestamp: UTC ISO-8601 with `+00:00`; fraction only when non-zero, 6 digits. */
export function storedTime(d: Date): string {
  const t = d.getTime();
  if (t === storedAt[0]) return storedText[0]!;
  if (t === storedAt[1]) return storedText[1]!;
  const iso = isoMillis(d); // YYYY-MM-DDTHH:MM:SS.mmm
  const text = iso.endsWith('.000') ? `${iso.slice(0, -4)}+00:00` : `${iso}000+00:00`;
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
  if (!m) throw new InvalidArgument(`${what} is not an ISO-8601 time with an offset: ${typeof s === 'string' ? quotedForMessage(s, 100) : typeof s}`);
  const frac = (m[2] ?? '').slice(0, 3).padEnd(3, '0');
  const t = Date.parse(`${m[1]}.${frac}${m[3]}`);
  if (Number.isNaN(t)) throw new InvalidArgument(`${what} is not a valid time: ${quotedForMessage(s, 100)}`);
  return new Date(t);
}

/**
 * A stored or evidence timestamp as every JSON view a person or client reads shows it (the CLI's
 * `--json`, the worker's API, the MCP gateway and operator, the LangGraph interrupt): the evidence
 * form, UTC with milliseconds and `Z` (`2026-09-07T11:44:30.625Z`), whatever form the column holds
 * (`…30.625000+00:00`). Text that is not a timestamp (a damaged row) is shown unchanged, never
 * hidden; `null` stays `null`. Stored documents and columns are never rewritten: this is for views.
 */
export function viewTime(stored: string): string;
export function viewTime(stored: string | null): string | null;
export function viewTime(stored: string | null): string | null {
  if (stored === null) return null;
  try {
    return evidenceTime(parseTime(stored));
  } catch {
    return stored;
  }
}

/** Checks a duration in milliseconds: a positive safe integer. */
export function checkDuration(ms: unknown, what: string): number {
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms <= 0) {
    throw new InvalidArgument(`${what} must be a positive whole number of milliseconds, got ${String(ms)}`);
  }
  return ms;
}
