import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { evidenceTime, storedTime, viewTime } from '../src/time.js';

/** The stored form written out longhand, as the kernel wrote it before stamps were kept. */
function storedReference(d: Date): string {
  const iso = d.toISOString();
  return `${iso.slice(0, 19)}${d.getUTCMilliseconds() === 0 ? '' : `.${iso.slice(20, 23)}000`}+00:00`;
}

describe('timestamps (kept renderings)', () => {
  it('property: any sequence of instants renders exactly as rendering each afresh would', () => {
    // Few distinct instants, so repeats and the two stored slots' alternation are both exercised.
    const instant = fc.integer({ min: 0, max: 5 }).map((i) => new Date(Date.UTC(2026, 0, 1) + [0, 1, 999, 1000, 300_000, 86_400_123][i]!));
    fc.assert(
      fc.property(fc.array(fc.tuple(instant, fc.boolean()), { maxLength: 30 }), (steps) => {
        for (const [d, stored] of steps) {
          if (stored) expect(storedTime(d)).toBe(storedReference(d));
          else expect(evidenceTime(d)).toBe(d.toISOString());
        }
      }),
      { numRuns: 300 },
    );
  });

  it('property: any valid Date, in any order, renders as toISOString does (days apart, across midnight, before 1970, past 9999)', () => {
    // Instants anywhere in Date's range, and runs within a few seconds of a midnight, so the
    // kept day and each carry (ms → s → min → h → day) are crossed in both directions.
    const anywhere = fc.integer({ min: -8.64e15, max: 8.64e15 });
    const edge = fc.constantFrom(0, 1, -1, 999, 1000, -1000, 59_999, 60_000, 3_599_999, 3_600_000, 86_399_999);
    const day = fc.constantFrom(-1, 0, 1, 20_454, 20_455, 2_932_896, 2_932_897);
    const nearMidnight = fc.tuple(day, fc.oneof(edge, fc.integer({ min: -5_000, max: 5_000 }))).map(([n, ms]) => n * 86_400_000 + ms);
    fc.assert(
      fc.property(fc.array(fc.oneof(anywhere, nearMidnight), { minLength: 1, maxLength: 40 }), (instants) => {
        for (const t of instants) {
          const d = new Date(t);
          expect(evidenceTime(d)).toBe(d.toISOString());
          // The stored form is only ever read back with a four-digit year.
          if (d.toISOString().length === 24) expect(storedTime(d)).toBe(storedReference(d));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('an invalid Date is refused even right after a valid one was rendered', () => {
    const ok = new Date(Date.UTC(2026, 0, 1));
    evidenceTime(ok);
    storedTime(ok);
    expect(() => evidenceTime(new Date(Number.NaN))).toThrow(RangeError);
    expect(() => storedTime(new Date(Number.NaN))).toThrow(RangeError);
    expect(evidenceTime(ok)).toBe('2026-01-01T00:00:00.000Z');
    expect(storedTime(ok)).toBe('2026-01-01T00:00:00+00:00');
  });
});

describe('viewTime: one time format in every JSON view', () => {
  it('a stored column value (+00:00, six digits or none) and an evidence stamp all read as UTC, milliseconds, Z', () => {
    expect(viewTime('2026-09-07T11:44:30.172000+00:00')).toBe('2026-09-07T11:44:30.172Z');
    expect(viewTime('2026-09-07T11:44:30+00:00')).toBe('2026-09-07T11:44:30.000Z');
    expect(viewTime('2026-09-07T11:44:30.172Z')).toBe('2026-09-07T11:44:30.172Z');
    expect(viewTime('2026-09-07T13:44:30.172+02:00')).toBe('2026-09-07T11:44:30.172Z');
  });

  it('property: any stored stamp reads back as the evidence stamp of the same instant', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 253402300799999 }), (t) => {
        const d = new Date(t);
        expect(viewTime(storedTime(d))).toBe(evidenceTime(d));
      }),
    );
  });

  it('null stays null, and text that is no timestamp (a damaged row) is shown as it is, never hidden or thrown on', () => {
    expect(viewTime(null)).toBeNull();
    expect(viewTime('yesterday')).toBe('yesterday');
    expect(viewTime('')).toBe('');
    expect(viewTime('2026-09-07 11:44:30')).toBe('2026-09-07 11:44:30');
  });
});
