/**
 * Stands in for `vitest` inside Chromium, so test files written for Vitest run unchanged in a
 * page: `describe`/`it`/`test` (with `.skip`), the four hooks, and Vitest's own `expect`
 * (`@vitest/expect` on chai, set up the way Vitest sets it up). The harness registers each file,
 * then runs every test in order and reports. Anything else a file imports from `vitest` is
 * missing on purpose: the bundle fails to build, naming it.
 */
import * as chai from 'chai';
import {
  ASYMMETRIC_MATCHERS_OBJECT,
  ChaiStyleAssertions,
  GLOBAL_EXPECT,
  JestAsymmetricMatchers,
  JestChaiExpect,
  JestExtend,
  getState,
  setState,
} from '@vitest/expect';

chai.use(JestExtend);
chai.use(JestChaiExpect);
chai.use(ChaiStyleAssertions);
chai.use(JestAsymmetricMatchers);

type Fn = () => unknown;

interface Suite {
  name: string;
  parent: Suite | null;
  skip: boolean;
  beforeAll: Fn[];
  afterAll: Fn[];
  beforeEach: Fn[];
  afterEach: Fn[];
}

/** One registered test. */
export interface Registered {
  file: string;
  suite: Suite;
  name: string;
  fn: Fn;
  skip: boolean;
  timeout: number;
}

/** One test's outcome. */
export interface Outcome {
  file: string;
  name: string;
  status: 'pass' | 'fail' | 'skip';
  ms: number;
  error?: string;
  /** Why a test was skipped here. */
  reason?: string;
}

const DEFAULT_TIMEOUT = 30_000;
const registered: Registered[] = [];
let file = '(no file)';
let root: Suite = newSuite('', null, false);
let current: Suite = root;

function newSuite(name: string, parent: Suite | null, skip: boolean): Suite {
  return { name, parent, skip: skip || (parent?.skip ?? false), beforeAll: [], afterAll: [], beforeEach: [], afterEach: [] };
}

/** Starts registering the tests of `name`. */
export function beginFile(name: string): void {
  file = name;
  root = newSuite('', null, false);
  current = root;
}

function suiteFn(skip: boolean) {
  return (name: string, body: Fn): void => {
    const parent = current;
    current = newSuite(name, parent, skip);
    try {
      const r = body();
      if (r && typeof (r as Promise<unknown>).then === 'function') throw new Error(`describe(${JSON.stringify(name)}) must register its tests synchronously`);
    } finally {
      current = parent;
    }
  };
}

function testFn(skip: boolean) {
  return (name: string, fn?: Fn, timeout?: number | { timeout?: number }): void => {
    const t = typeof timeout === 'number' ? timeout : (timeout?.timeout ?? DEFAULT_TIMEOUT);
    registered.push({ file, suite: current, name, fn: fn ?? (() => undefined), skip: skip || current.skip || !fn, timeout: t });
  };
}

/** `describe` (and `describe.skip`). */
export const describe = Object.assign(suiteFn(false), { skip: suiteFn(true) });
/** `it` (and `it.skip`). */
export const it = Object.assign(testFn(false), { skip: testFn(true) });
/** `test`, the same as `it`. */
export const test = it;
export const beforeAll = (fn: Fn): void => void current.beforeAll.push(fn);
export const afterAll = (fn: Fn): void => void current.afterAll.push(fn);
export const beforeEach = (fn: Fn): void => void current.beforeEach.push(fn);
export const afterEach = (fn: Fn): void => void current.afterEach.push(fn);

/** Vitest's `expect`, without the test-context extras (`poll`, snapshots, `soft`). */
export const expect = ((value: unknown, message?: string) => {
  const { assertionCalls } = getState(expect);
  setState({ assertionCalls: assertionCalls + 1 }, expect);
  return chai.expect(value, message);
}) as unknown as typeof import('vitest').expect;
Object.assign(expect, chai.expect);
Object.assign(expect, (globalThis as Record<symbol, unknown>)[ASYMMETRIC_MATCHERS_OBJECT]);
Object.assign(expect, {
  getState: () => getState(expect),
  setState: (state: object) => setState(state, expect),
  extend: (matchers: object) => (chai.expect as unknown as { extend: (e: unknown, m: object) => void }).extend(expect, matchers),
  assert: chai.assert,
  unreachable: (message?: string) => chai.assert.fail(`expected${message ? ` "${message}" ` : ' '}not to be reached`),
});
setState({ assertionCalls: 0, isExpectingAssertions: false, expectedAssertionsNumber: null }, expect);
(globalThis as Record<symbol, unknown>)[GLOBAL_EXPECT] = expect;

function chain(s: Suite): Suite[] {
  const out: Suite[] = [];
  for (let x: Suite | null = s; x; x = x.parent) out.unshift(x);
  return out;
}

function title(t: Registered): string {
  return [
    ...chain(t.suite)
      .map((s) => s.name)
      .filter(Boolean),
    t.name,
  ].join(' > ');
}

async function withTimeout(fn: Fn, ms: number, what: string): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      Promise.resolve().then(fn),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function message(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}${err.stack ? `\n${err.stack.split('\n').slice(1, 6).join('\n')}` : ''}`;
  return String(err);
}

/**
 * Runs everything registered, in order: hooks once per suite (`*All`) and around each test
 * (`*Each`). `notHere` maps `file > title` to why that test does not apply in a browser; each
 * must match a registered test (a stale entry is a failure).
 */
export async function runAll(onResult: (o: Outcome) => void = () => undefined, notHere: Readonly<Record<string, string>> = {}): Promise<Outcome[]> {
  const results: Outcome[] = [];
  const started = new Set<Suite>();
  const failedAll = new Map<Suite, string>();
  const lastIndex = new Map<Suite, number>();
  registered.forEach((t, i) => chain(t.suite).forEach((s) => lastIndex.set(s, i)));
  for (let i = 0; i < registered.length; i++) {
    const t = registered[i]!;
    const suites = chain(t.suite);
    const t0 = performance.now();
    const done = (status: Outcome['status'], error?: string): void => {
      const o: Outcome = { file: t.file, name: title(t), status, ms: Math.round(performance.now() - t0) };
      if (error !== undefined) o.error = error;
      results.push(o);
      onResult(o);
    };
    const reason = notHere[`${t.file} > ${title(t)}`];
    if (t.skip || reason !== undefined) {
      done('skip');
      if (reason !== undefined) results[results.length - 1]!.reason = reason;
    } else {
      let setupError: string | undefined;
      for (const s of suites) {
        if (!started.has(s)) {
          started.add(s);
          try {
            for (const h of s.beforeAll) await withTimeout(h, DEFAULT_TIMEOUT, 'beforeAll');
          } catch (err) {
            failedAll.set(s, message(err));
          }
        }
        setupError ??= failedAll.get(s);
      }
      if (setupError !== undefined) {
        done('fail', `beforeAll failed: ${setupError}`);
      } else {
        setState({ assertionCalls: 0 }, expect);
        try {
          for (const s of suites) for (const h of s.beforeEach) await withTimeout(h, t.timeout, 'beforeEach');
          await withTimeout(t.fn, t.timeout, 'the test');
          for (const s of [...suites].reverse()) for (const h of s.afterEach) await withTimeout(h, t.timeout, 'afterEach');
          done('pass');
        } catch (err) {
          done('fail', message(err));
        }
      }
    }
    for (const s of [...suites].reverse()) {
      if (lastIndex.get(s) === i && started.has(s)) for (const h of s.afterAll) await withTimeout(h, DEFAULT_TIMEOUT, 'afterAll').catch(() => undefined);
    }
  }
  const titles = new Set(registered.map((t) => `${t.file} > ${title(t)}`));
  for (const key of Object.keys(notHere)) {
    if (!titles.has(key)) {
      const o: Outcome = {
        file: key.split(' > ')[0]!,
        name: key,
        status: 'fail',
        ms: 0,
        error: 'listed as not applicable in a browser, but no such test is registered',
      };
      results.push(o);
      onResult(o);
    }
  }
  return results;
}
