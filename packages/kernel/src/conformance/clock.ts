/**
 * The conformance cases' time: the instant every case starts at, the default lease, and a clock
 * that moves only when a case moves it. The floor the case files stand on (nothing here imports them).
 *
 * @module
 */
import { MINUTE, type Clock } from '../time.js';

/** 2026-01-01T12:00Z: every case starts here. */
export const T0 = new Date('2026-01-01T12:00:00Z');
/** The default lease, 5 minutes. */
export const LEASE = 5 * MINUTE;

/** A clock tests move by hand (the only seam; nothing sleeps). */
export interface ManualClock extends Clock {
  advance(ms: number): void;
  set(d: Date): void;
}

/** A clock at `start` that moves only when told. */
export function manualClock(start: Date = T0): ManualClock {
  let t = start.getTime();
  const clock = (() => new Date(t)) as ManualClock;
  clock.advance = (ms) => {
    t += ms;
  };
  clock.set = (d) => {
    t = d.getTime();
  };
  return clock;
}
