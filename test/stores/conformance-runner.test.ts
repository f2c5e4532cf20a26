/**
 * The shipped conformance runner (`@ctrlrun/kernel/conformance`): a report of pass / fail / not
 * applicable per case, never "ok" when nothing ran, and an unknown case id throws (T142).
 */
import { DuplicateEffect, type StateStore } from '@ctrlrun/kernel';
import { CASE_IDS, run, type StoreFactory } from '@ctrlrun/kernel/conformance';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { describe, expect, it } from 'vitest';

const sqlJs: StoreFactory = { name: 'sql.js in memory', dialect: 'sqlite', open: (clock) => createSqlJsStore({ clock }) };

describe('the conformance runner', () => {
  it('grades sql.js in memory: every case passes or is not applicable with a reason', { timeout: 300_000 }, async () => {
    const seen: string[] = [];
    const report = await run(sqlJs, { onCase: (c) => seen.push(c.id) });
    expect(report.cases.map((c) => c.id)).toEqual([...CASE_IDS]);
    expect(seen).toEqual([...CASE_IDS]);
    expect(report.failed, JSON.stringify(report.cases.filter((c) => c.status === 'fail').map((c) => c.reason))).toBe(0);
    expect(report.ok).toBe(true);
    // No reopen and no url: the durability and cross-process cases check the declaration and say so.
    const na = report.cases.filter((c) => c.status === 'not_applicable');
    expect(na.map((c) => c.id).sort()).toEqual([
      'ambiguous-survives',
      'e1-cross-process',
      'session-ended-survives',
      'taken-once-cross-process',
      'terminal-states-survive',
    ]);
    for (const c of na) expect(c.reason).toMatch(/no (reopen|url).*share nothing/);
    expect(report.passed + report.notApplicable).toBe(CASE_IDS.length);
  });

  it('an unknown case id throws before anything runs, naming it', async () => {
    let opened = 0;
    const counting: StoreFactory = { ...sqlJs, open: (clock) => (opened++, createSqlJsStore({ clock })) };
    await expect(run(counting, { only: ['e1-in-process', 'e1-in-proces'] })).rejects.toThrow(/unknown conformance case id: "e1-in-proces"/);
    await expect(run(counting, { only: ['__proto__'] })).rejects.toThrow(TypeError);
    await expect(run({ ...counting, skip: [{ reason: 'r', cases: ['nope' as never] }] })).rejects.toThrow(/unknown conformance skipped case id: "nope"/);
    expect(opened).toBe(0);
  });

  it('nothing run is never ok: only not-applicable cases give ok: false', async () => {
    const report = await run({ ...sqlJs, skip: [{ reason: 'not this one', cases: ['binding'] }] }, { only: ['binding'] });
    expect(report).toMatchObject({ ok: false, passed: 0, failed: 0, notApplicable: 1 });
    expect(report.cases[0]).toMatchObject({ id: 'binding', status: 'not_applicable', reason: 'not this one' });
    // Only declared-away cases (durability without reopen): still not ok.
    const declared = await run(sqlJs, { only: ['ambiguous-survives'] });
    expect(declared).toMatchObject({ ok: false, passed: 0, notApplicable: 1 });
  });

  it('a broken store fails its case, with the assertion in the report', async () => {
    const wrongError: StoreFactory = {
      ...sqlJs,
      open: async (clock) => {
        const real = await createSqlJsStore({ clock });
        return new Proxy(real, {
          get(target, prop, receiver) {
            if (prop === 'reserveEffect')
              return async (key: string, actionId: string, lease: number) => {
                try {
                  return await target.reserveEffect(key, actionId, lease);
                } catch (err) {
                  if (err instanceof DuplicateEffect) throw new Error('busy');
                  throw err;
                }
              };
            const v = Reflect.get(target, prop, receiver) as unknown;
            return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
          },
        }) as StateStore;
      },
    };
    const report = await run(wrongError, { only: ['e1-in-process', 'binding'] });
    expect(report.ok).toBe(false);
    expect(report.cases.map((c) => [c.id, c.status])).toEqual([
      ['e1-in-process', 'fail'],
      ['binding', 'pass'],
    ]);
    expect((report.cases[0]!.error as Error).name).toBe('AssertionError');
  });

  it("the processes option is the cross-process launcher (it overrides the factory's)", async () => {
    const calls: unknown[] = [];
    const factory: StoreFactory = {
      ...sqlJs,
      url: () => 'sqlite:/nowhere',
      processes: async () => {
        throw new Error('the factory launcher must not be used');
      },
    };
    const report = await run(factory, {
      only: ['e1-cross-process'],
      processes: async (race) => {
        calls.push(race);
        return { reports: [], arrivals: 0, marker: [] };
      },
    });
    expect(calls).toEqual([{ url: 'sqlite:/nowhere', effectKey: 'refund:e1x', contenders: 8 }]);
    // A launcher that started no worker fails the case: it is graded, not trusted.
    expect(report.cases[0]).toMatchObject({ status: 'fail' });
    expect(report.cases[0]!.reason).toMatch(/every worker reached the barrier/);
  });
});
