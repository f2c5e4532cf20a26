/**
 * Deadlines that scale with the machine. A 2-core machine running the suite beside other work
 * gives each process a fraction of a core, so a fixed wall-clock deadline that holds when idle
 * becomes a false failure under load. This module measures that fraction (wall time over CPU time
 * of a short busy loop: no reference speed is assumed) and scales the base deadlines tests give
 * for the work they do. Long waits also use progress watchdogs (see the process harness), so a
 * deadline only ever catches a stall, never slowness.
 */

/** The most a deadline is stretched: a machine slower than this is stalled, not busy. */
export const MAX_LOAD_FACTOR = 16;

/**
 * How many times slower than a free core this process runs right now: wall time over CPU time
 * of a `sampleMs` busy loop, at least 1, at most {@link MAX_LOAD_FACTOR}.
 */
export function measureLoadFactor(sampleMs = 200): number {
  const start = performance.now();
  const cpu0 = process.cpuUsage();
  let spins = 0;
  while (performance.now() - start < sampleMs) spins++;
  const wall = performance.now() - start;
  const used = process.cpuUsage(cpu0);
  const cpuMs = (used.user + used.system) / 1000;
  if (spins === 0 || cpuMs <= 0) return MAX_LOAD_FACTOR;
  return Math.min(MAX_LOAD_FACTOR, Math.max(1, wall / cpuMs));
}

let measured: number | null = null;

/**
 * The load factor of this test process, measured once (at the first call, normally when a test
 * file declares its timeouts) and printed when the machine is busy, so a slow run says why.
 * `CTRLRUN_TEST_LOAD_FACTOR` overrides it (e.g. `4` on a machine known to be shared).
 */
export function loadFactor(): number {
  if (measured !== null) return measured;
  const forced = Number(process.env['CTRLRUN_TEST_LOAD_FACTOR']);
  measured = Number.isFinite(forced) && forced >= 1 ? Math.min(forced, MAX_LOAD_FACTOR) : measureLoadFactor();
  if (measured >= 1.5) console.warn(`[load] this test process gets about 1/${measured.toFixed(1)} of a core: deadlines are stretched ${measured.toFixed(1)}×`);
  return measured;
}

/** `baseMs` (what the work needs on a free core, generously) stretched by {@link loadFactor}. */
export function scaled(baseMs: number): number {
  return Math.ceil(baseMs * loadFactor());
}

/** A timer that fires `onStall` once `stallMs` pass without a {@link StallTimer.touch}. */
export interface StallTimer {
  /** Progress: the next `stallMs` start now. */
  touch(): void;
  /** Done: never fires. */
  stop(): void;
}

/** Starts a {@link StallTimer} (armed at once). */
export function stallTimer(stallMs: number, onStall: () => void): StallTimer {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let stopped = false;
  const touch = () => {
    if (stopped) return;
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(() => {
      stopped = true;
      onStall();
    }, stallMs);
  };
  touch();
  return {
    touch,
    stop: () => {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
    },
  };
}

/**
 * Runs `work` (given a `progress` callback to call whenever it advances) and fails it with `what`
 * and the last step it reported once `stallMs` pass with no progress: a watchdog on progress, not
 * a wall-clock deadline, so work on a loaded machine runs as long as it keeps moving.
 */
export async function progressWatchdog<T>(what: string, stallMs: number, work: (progress: (step: string) => void) => Promise<T>): Promise<T> {
  let last = 'started';
  let fail: (e: Error) => void = () => {};
  const stalled = new Promise<never>((_, reject) => {
    fail = reject;
  });
  const timer = stallTimer(stallMs, () => fail(new Error(`${what} made no progress for ${Math.round(stallMs / 1000)} s; the last step: ${last}`)));
  try {
    return await Promise.race([
      work((step) => {
        last = step;
        timer.touch();
      }),
      stalled,
    ]);
  } finally {
    timer.stop();
  }
}
