/**
 * A FIFO async mutex, so that on a single-connection engine two awaits can never interleave
 * inside one transaction.
 *
 * @module
 */

/** Serialises async critical sections in arrival order. */
export class Mutex {
  /** Whether a section is running; those that arrive meanwhile wait in {@link #waiting}, in order. */
  #busy = false;
  readonly #waiting: (() => void)[] = [];

  /**
   * Runs `fn` once every earlier caller has finished; resolves or rejects with `fn`'s outcome.
   * An idle mutex starts `fn` at once (no queue hop); a throw from `fn` is a rejection either way.
   */
  run<T>(fn: () => Promise<T>): Promise<T> {
    if (!this.#busy) {
      this.#busy = true;
      return this.#start(fn);
    }
    return new Promise<T>((resolve, reject) => {
      this.#waiting.push(() => void this.#start(fn).then(resolve, reject));
    });
  }

  #start<T>(fn: () => Promise<T>): Promise<T> {
    let result: Promise<T>;
    try {
      result = Promise.resolve(fn());
    } catch (err) {
      result = Promise.reject(err);
    }
    result.then(this.#release, this.#release);
    return result;
  }

  /** Hands the mutex to the next waiter, or leaves it idle. */
  readonly #release = (): void => {
    const next = this.#waiting.shift();
    if (next === undefined) this.#busy = false;
    else next();
  };
}
