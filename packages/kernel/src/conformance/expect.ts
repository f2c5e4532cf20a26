/**
 * The few assertions the conformance cases make, written without a test runner so the suite
 * ships in the kernel and runs anywhere (a Node test file, a browser tab, a worker). A failed
 * assertion throws {@link AssertionError}; the runner reports it as the case's failure.
 *
 * @module
 */

/** A conformance check that did not hold; `name` is `'AssertionError'` like every runner's. */
export class AssertionError extends Error {
  override readonly name = 'AssertionError';
}

function show(v: unknown): string {
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'string') return JSON.stringify(v);
  if (v instanceof Error) return `${v.name}: ${v.message}`;
  try {
    const text = JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x === undefined ? '(undefined)' : x));
    return text === undefined ? String(v) : text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
  } catch {
    return String(v);
  }
}

const isObject = (v: unknown): v is Record<PropertyKey, unknown> => typeof v === 'object' && v !== null;

/** Deep equality: plain values by `Object.is`, dates by time, arrays by element, objects by their defined keys. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (!isObject(a) || !isObject(b)) return false;
  if (a instanceof Date || b instanceof Date) return a instanceof Date && b instanceof Date && Object.is(a.getTime(), b.getTime());
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => deepEqual(x, b[i]));
  }
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) {
    if (!(a instanceof Uint8Array) || !(b instanceof Uint8Array) || a.length !== b.length) return false;
    return a.every((x, i) => x === b[i]);
  }
  const keys = (o: Record<PropertyKey, unknown>): string[] => Object.keys(o).filter((k) => o[k] !== undefined);
  const ka = keys(a);
  const kb = keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]));
}

/** `actual` holds every property of `expected` (recursively for objects; arrays element by element, same length). */
export function matchesObject(actual: unknown, expected: unknown): boolean {
  if (Array.isArray(expected)) return Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => matchesObject(actual[i], e));
  if (isObject(expected) && !(expected instanceof Date) && !ArrayBuffer.isView(expected)) {
    if (!isObject(actual)) return false;
    return Object.keys(expected).every((k) => k in actual && matchesObject(actual[k], expected[k]));
  }
  return deepEqual(actual, expected);
}

/** The matchers a case uses; each throws {@link AssertionError} with `message` first when it does not hold. */
export interface Matchers {
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toMatchObject(expected: object): void;
  toBeInstanceOf(cls: abstract new (...args: never[]) => unknown): void;
  toBeNull(): void;
  toContain(item: unknown): void;
  toHaveLength(n: number): void;
  toBeGreaterThan(n: number | bigint): void;
  toBeLessThanOrEqual(n: number | bigint): void;
}

function matchers(actual: unknown, message: string | undefined, negated: boolean): Matchers {
  const check = (ok: boolean, what: string): void => {
    if (ok === negated) throw new AssertionError(`${message ? `${message}: ` : ''}expected ${show(actual)} ${negated ? 'not ' : ''}${what}`);
  };
  return {
    toBe: (e) => check(Object.is(actual, e), `to be ${show(e)}`),
    toEqual: (e) => check(deepEqual(actual, e), `to equal ${show(e)}`),
    toMatchObject: (e) => check(matchesObject(actual, e), `to match ${show(e)}`),
    toBeInstanceOf: (cls) => check(actual instanceof cls, `to be an instance of ${cls.name}`),
    toBeNull: () => check(actual === null, 'to be null'),
    toContain: (item) =>
      check(
        typeof actual === 'string' ? typeof item === 'string' && actual.includes(item) : Array.isArray(actual) && actual.some((x) => Object.is(x, item)),
        `to contain ${show(item)}`,
      ),
    toHaveLength: (n) => check(isObject(actual) || typeof actual === 'string' ? (actual as { length?: unknown }).length === n : false, `to have length ${n}`),
    toBeGreaterThan: (n) => check((typeof actual === 'number' || typeof actual === 'bigint') && actual > n, `to be greater than ${show(n)}`),
    toBeLessThanOrEqual: (n) => check((typeof actual === 'number' || typeof actual === 'bigint') && actual <= n, `to be at most ${show(n)}`),
  };
}

/** `expect(actual, message?)`: the assertion, and `.not` for its negation. */
export function expect(actual: unknown, message?: string): Matchers & { readonly not: Matchers } {
  return Object.assign(matchers(actual, message, false), { not: matchers(actual, message, true) });
}

/** Fails the case with `message`. */
expect.fail = (message: string): never => {
  throw new AssertionError(message);
};
