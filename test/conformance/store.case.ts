/**
 * The store conformance suite under Vitest: a thin adapter over the shipped runner
 * (`@ctrlrun/kernel/conformance`), one test per case, so each store's test file stays a few lines.
 * A failed case throws the runner's error; a case the store declares away is shown as skipped
 * with its reason (after the runner checked that the declaration is honest).
 */
import { CASE_IDS, checkCaseIds, notApplicable, run, storeCases, type StoreFactory } from '@ctrlrun/kernel/conformance';
import { describe, it } from 'vitest';

export {
  CASE_IDS,
  LEASE,
  T0,
  manualClock,
  run,
  storeCases,
  type CaseId,
  type ManualClock,
  type ProcessRunner,
  type RaceOutcome,
  type RaceRequest,
  type StoreFactory,
  type WorkerReport,
} from '@ctrlrun/kernel/conformance';

/** Registers one test per conformance case for the store `factory` opens. */
export function describeStore(factory: StoreFactory): void {
  for (const s of factory.skip ?? []) {
    if (!s.reason) throw new Error(`skip of ${s.cases.join(', ')} needs a reason`);
    checkCaseIds(s.cases, 'skipped case id');
  }
  describe(`store conformance: ${factory.name} (${factory.dialect})`, () => {
    for (const id of CASE_IDS) {
      const def = storeCases[id];
      const title = `${def.suite}: ${id}${def.test ? ` (${def.test})` : ''}`;
      const skipped = notApplicable(factory, id);
      if (skipped !== null) {
        it.skip(`${title} — ${skipped}`, () => undefined);
        continue;
      }
      // Spawning OS processes on a loaded machine can take far longer than an in-process case.
      it(title, def.crossProcess ? { timeout: 120_000 } : {}, async (ctx) => {
        const [result] = (await run(factory, { only: [id] })).cases;
        if (result!.status === 'fail') throw result!.error;
        if (result!.status === 'not_applicable') ctx.skip(`not applicable: ${result!.reason}`);
      });
    }
  });
}
