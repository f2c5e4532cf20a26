/**
 * `@ctrlrun/kernel/conformance`: the store conformance suite as a programmatic runner, so any
 * `StateStore` (a third-party driver included) can be graded without a test framework.
 *
 * ```ts
 * import { run } from '@ctrlrun/kernel/conformance';
 * const report = await run({ name: 'my store', dialect: 'sqlite', open: (clock) => openMyStore({ clock }) });
 * if (!report.ok) console.log(report.cases.filter((c) => c.status === 'fail'));
 * ```
 *
 * The runner is Node-free. The cross-process case needs OS processes: hand it a `processes`
 * launcher (the repository's Node one spawns real workers) together with the factory's `url`.
 *
 * @module
 */
import { CASE_IDS, storeCases, type CaseDef, type CaseId, type ProcessRunner, type StoreFactory } from './cases.js';

export {
  CASE_IDS,
  LEASE,
  T0,
  manualClock,
  storeCases,
  type CaseDef,
  type CaseId,
  type ManualClock,
  type ProcessRunner,
  type RaceOutcome,
  type RaceRequest,
  type StoreFactory,
  type WorkerReport,
} from './cases.js';
export { AssertionError } from './expect.js';
export { BREAK_GLASS_WIDENINGS } from './break-glass-cases.js';

/** What happened to one case: `pass`, `fail` (with the error), or `not_applicable` (with the reason). */
export type CaseStatus = 'pass' | 'fail' | 'not_applicable';

/** One case's line in a {@link ConformanceReport}. */
export interface CaseResult {
  readonly id: CaseId;
  readonly suite: CaseDef['suite'];
  /** The spec's test name the case also carries, if any. */
  readonly test: string | null;
  readonly status: CaseStatus;
  /** Why the case was not applicable, or the failure's message. */
  readonly reason: string | null;
  /** The thrown error of a failed case (an `AssertionError` when a check did not hold). */
  readonly error: unknown;
  readonly ms: number;
}

/** The grade of one store: `ok` only when at least one case ran and none failed. */
export interface ConformanceReport {
  readonly store: string;
  readonly ok: boolean;
  readonly passed: number;
  readonly failed: number;
  readonly notApplicable: number;
  readonly cases: readonly CaseResult[];
}

/** Options of {@link run}. */
export interface RunOptions {
  /** Only these cases (all when absent or empty); an unknown id throws before anything runs. */
  only?: readonly string[];
  /** The launcher of the cross-process cases; overrides the factory's own `processes`. */
  processes?: ProcessRunner;
  /** Called after each case, e.g. to print progress. */
  onCase?: (result: CaseResult) => void;
}

/** Throws a `TypeError` naming every id that is not a case of this suite. */
export function checkCaseIds(ids: readonly string[], what = 'case id'): CaseId[] {
  const unknown = ids.filter((id) => !(CASE_IDS as readonly string[]).includes(id));
  if (unknown.length > 0)
    throw new TypeError(
      `unknown conformance ${what}${unknown.length > 1 ? 's' : ''}: ${unknown.map((u) => JSON.stringify(u)).join(', ')} (known: ${CASE_IDS.join(', ')})`,
    );
  return ids as CaseId[];
}

/**
 * Why `id` does not apply to `factory`, or `null` when it does: a skip the factory declared (with
 * its reason), or a capability it lacks. A durability case without `reopen` and a cross-process
 * case without `url` still run: they check that the declaration is honest (two `open()` handles
 * must share nothing) and fail when it is not; they are reported not applicable when it is.
 */
export function notApplicable(factory: StoreFactory, id: CaseId): string | null {
  for (const s of factory.skip ?? []) if (s.cases.includes(id)) return s.reason;
  return null;
}

/** Runs the suite (or `only` its named cases) on the store `factory` opens, one case after another. */
export async function run(factory: StoreFactory, options: RunOptions = {}): Promise<ConformanceReport> {
  const ids = options.only && options.only.length > 0 ? checkCaseIds(options.only) : [...CASE_IDS];
  for (const s of factory.skip ?? []) {
    if (typeof s.reason !== 'string' || s.reason.trim() === '') throw new TypeError(`skip of ${s.cases.join(', ')} needs a reason`);
    checkCaseIds(s.cases, 'skipped case id');
  }
  const f: StoreFactory = options.processes ? { ...factory, processes: options.processes } : factory;
  const now = (): number => (typeof performance === 'object' ? performance.now() : Date.now());
  const cases: CaseResult[] = [];
  for (const id of ids) {
    const def = storeCases[id];
    const base = { id, suite: def.suite, test: def.test ?? null };
    const skipped = notApplicable(f, id);
    const start = now();
    let result: CaseResult;
    if (skipped !== null) {
      result = { ...base, status: 'not_applicable', reason: skipped, error: null, ms: 0 };
    } else {
      try {
        await def.run(f);
        const declaredAway = (def.durable && !f.reopen) || (def.crossProcess && !f.url);
        result = declaredAway
          ? {
              ...base,
              status: 'not_applicable',
              reason:
                def.durable && !f.reopen
                  ? 'this store does not outlive its handle (no reopen), and two open() handles share nothing'
                  : 'no other process can reach this store (no url), and two open() handles share nothing',
              error: null,
              ms: now() - start,
            }
          : { ...base, status: 'pass', reason: null, error: null, ms: now() - start };
      } catch (error) {
        result = { ...base, status: 'fail', reason: error instanceof Error ? `${error.name}: ${error.message}` : String(error), error, ms: now() - start };
      }
    }
    cases.push(result);
    options.onCase?.(result);
  }
  const passed = cases.filter((c) => c.status === 'pass').length;
  const failed = cases.filter((c) => c.status === 'fail').length;
  return { store: f.name, ok: passed > 0 && failed === 0, passed, failed, notApplicable: cases.length - passed - failed, cases };
}
