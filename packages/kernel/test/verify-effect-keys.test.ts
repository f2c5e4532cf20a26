// verify on effect keys an application may really write: `{resource}` (derived by the policy, or
// the caller's), a constant key, a key every allowed vector pins. G4 runs here with an in-process
// launcher (each "process" a Control of its own on the shared scratch store); the CLI's tests race
// real OS processes.
import { describe, expect, it } from 'vitest';
import { Control, loadPolicy, protect, type JsonObject, type StateStore } from '@ctrlrun/kernel';
import {
  NOT_APPLICABLE,
  describeOutcome,
  runVerify,
  verifyExitCode,
  type ProcessLauncher,
  type ScratchStoreFactory,
  type VerifyReport,
} from '@ctrlrun/kernel/verify';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

/** Scratch stores with a locator, so the launcher can find the store a scenario uses. */
function rig() {
  const stores = new Map<string, StateStore>();
  let n = 0;
  const scratchStore: ScratchStoreFactory = async ({ clock }) => {
    const store = await createSqlJsStore({ clock });
    const locator = `mem:${++n}`;
    stores.set(locator, store);
    return { store, locator, dispose: async () => void (stores.delete(locator), await store.close()) };
  };
  const launchProcesses: ProcessLauncher = async (request) => {
    const store = stores.get(request.locator)!;
    let executorRuns = 0;
    const processes = await Promise.all(
      request.runs.map(async (args, i) => {
        const control = new Control({
          policy: loadPolicy(request.policyText, { source: request.policySource }),
          store,
          environment: request.environment,
          logger: { warn: () => {} },
        });
        const run = protect<JsonObject, JsonObject>(() => ((executorRuns += 1), { ok: true }), { control, name: request.action });
        try {
          await run(args, { principal: request.principal });
          return { pid: 1000 + i, outcome: 'committed' };
        } catch (error) {
          return { pid: 1000 + i, outcome: describeOutcome({ ok: false, error }) };
        }
      }),
    );
    return { parentPid: 1, processes, executorRuns };
  };
  return { scratchStore, launchProcesses };
}

async function verify(policyText: string): Promise<VerifyReport> {
  return runVerify({ policyText, policyPath: 'ctrlrun.yaml', ...rig(), backend: 'sql.js (in memory)', version: '0.1.0' });
}

const result = (r: VerifyReport, id: string) => r.guarantees.find((g) => g.id === id)!;
const statuses = (r: VerifyReport, ids: string[]) => ids.map((id) => `${id}:${result(r, id).status}`);

describe('verify with effect keys an application really writes', () => {
  it('an effect key naming {resource} the policy derives: a full report, G3–G5 pass', async () => {
    const r = await verify(
      'schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    resource: "payment:{payment_id}"\n    effect: "refund:{resource}"\n    decision: allow\n',
    );
    expect(statuses(r, ['G3', 'G4', 'G5', 'G7', 'G10', 'G11'])).toEqual(['G3:pass', 'G4:pass', 'G5:pass', 'G7:pass', 'G10:pass', 'G11:pass']);
    expect(result(r, 'G3').effect_key).toMatch(/^refund:payment:/);
    expect(verifyExitCode(r)).toBe(0);
  }, 120_000);

  it('an effect key naming {resource} the caller supplies: the scenarios give the action a resource; G4 is not applicable, and says why', async () => {
    const r = await verify('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{resource}"\n    decision: allow\n');
    expect(statuses(r, ['G3', 'G5', 'G7', 'G10', 'G11'])).toEqual(['G3:pass', 'G5:pass', 'G7:pass', 'G10:pass', 'G11:pass']);
    expect(result(r, 'G3').effect_key).toBe('refund:ctrlrun-verify-resource');
    expect(result(r, 'G4')).toMatchObject({ status: 'not_applicable', reason: NOT_APPLICABLE.callerResource });
    expect(verifyExitCode(r)).toBe(0);
  }, 120_000);

  it('a constant key (deploy:prod): G4 races one key, with a one-process control', async () => {
    const r = await verify('schema: ctrlrun.policy/v2\nactions:\n  deploy.run:\n    effect: "deploy:prod"\n    decision: allow\n');
    expect(statuses(r, ['G3', 'G4', 'G5'])).toEqual(['G3:pass', 'G4:pass', 'G5:pass']);
    expect(result(r, 'G4').effect_key).toBe('deploy:prod');
    expect(verifyExitCode(r)).toBe(0);
  }, 120_000);

  it('a key every allowed vector pins (env_eq: prod): G4 passes the same way', async () => {
    const r = await verify(
      'schema: ctrlrun.policy/v2\nactions:\n  deploy.run:\n    effect: "deploy:{env}"\n    rules:\n      - when: { env_eq: prod }\n        decision: allow\n      - decision: deny\n',
    );
    expect(statuses(r, ['G3', 'G4', 'G5'])).toEqual(['G3:pass', 'G4:pass', 'G5:pass']);
    expect(result(r, 'G4').effect_key).toBe('deploy:prod');
  }, 120_000);
});
