/**
 * A FIFO async mutex, so that on a single-connection engine two awaits can never interleave
 * inside one transaction.
 *
 * @module
 */

/** Serialises async critical sections in arrival order. */
export class Mutex {
  #tail: Promise<void> = Promise.resolve();

  /** Runs `fn` once every earlier caller has finished; resolves or rejects with `fn`'s outcome. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(fn);
    this.#tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
