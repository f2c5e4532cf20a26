import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Mutex } from '../src/store/mutex.js';

const tick = () => new Promise<void>((r) => setTimeout(r, 0));

describe('Mutex', () => {
  it('property: sections never overlap and run in arrival order, whatever they return, throw or reject', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom('value', 'throw', 'reject'), fc.nat(3)), { minLength: 1, maxLength: 12 }), async (plan) => {
        const m = new Mutex();
        const started: number[] = [];
        let inside = 0;
        const outcomes = plan.map(([how, waits], i) =>
          m
            .run(async () => {
              expect(inside).toBe(0);
              inside++;
              started.push(i);
              if (how === 'throw') {
                inside--;
                throw new Error(`thrown ${i}`);
              }
              for (let w = 0; w < waits; w++) await tick();
              inside--;
              if (how === 'reject') throw new Error(`rejected ${i}`);
              return i;
            })
            .then(
              (v) => ({ ok: v }),
              (e: Error) => ({ err: e.message }),
            ),
        );
        const settled = await Promise.all(outcomes);
        expect(started).toEqual(plan.map((_, i) => i));
        settled.forEach((s, i) => expect(s).toEqual(plan[i]![0] === 'value' ? { ok: i } : { err: `${plan[i]![0] === 'throw' ? 'thrown' : 'rejected'} ${i}` }));
      }),
      { numRuns: 100 },
    );
  });

  it('a section that throws synchronously is a rejection, and the next section still runs', async () => {
    const m = new Mutex();
    const bad = m.run((() => {
      throw new Error('sync');
    }) as () => Promise<never>);
    const good = m.run(async () => 'next');
    await expect(bad).rejects.toThrow('sync');
    await expect(good).resolves.toBe('next');
  });

  it('a section queued behind a running one starts only after it settles', async () => {
    const m = new Mutex();
    let release!: () => void;
    const first = m.run(() => new Promise<void>((r) => (release = r)));
    let secondStarted = false;
    const second = m.run(async () => {
      secondStarted = true;
    });
    await tick();
    expect(secondStarted).toBe(false);
    release();
    await first;
    await second;
    expect(secondStarted).toBe(true);
  });
});
