// What a SQL store remembers of the effect rows it wrote (SqlEngine.hint): the row last written
// under a key, never an older one; the latest 512 keys at least and 1024 at most; forgotten on
// request. Checked against a model, over any sequence of writes and forgets.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { EffectRecord } from '../src/model.js';
import type { SqlDialect } from '../src/store/dialect.js';
import type { SqlDriver } from '../src/store/driver.js';
import { SqlEngine } from '../src/store/engine.js';

/** An engine with no database: only its memory of rows is used here. */
function engine(): SqlEngine {
  const driver = { name: 'none', dialect: 'sqlite', capabilities: { concurrentConnections: true } } as unknown as SqlDriver;
  return new SqlEngine(driver, {} as SqlDialect, { clock: () => new Date(0), logger: { warn: () => undefined }, readOnly: false });
}

const row = (effectKey: string, attempt: number): EffectRecord => ({
  effectKey,
  state: 'executing',
  actionId: `act_${attempt}`,
  attempt,
  leaseExpiresAt: null,
  resultJson: null,
  error: null,
  createdAt: null,
  updatedAt: null,
  resolvedBy: null,
});

describe('the effect rows a SQL store remembers', () => {
  it('property: the newest row of a key, or nothing; the latest 512 keys kept, never more than 1024', () => {
    // Few keys (so writes repeat them and forgets hit them) or many (so the memory turns over).
    const op = (keys: number) =>
      fc.oneof(
        { weight: 8, arbitrary: fc.integer({ min: 0, max: keys - 1 }).map((k) => ({ kind: 'hint' as const, key: `k${k}` })) },
        { weight: 1, arbitrary: fc.integer({ min: 0, max: keys - 1 }).map((k) => ({ kind: 'forget' as const, key: `k${k}` })) },
      );
    fc.assert(
      fc.property(fc.oneof(fc.array(op(20), { maxLength: 200 }), fc.array(op(3000), { minLength: 1000, maxLength: 3000 })), (ops) => {
        const e = engine();
        // The model: each key's last hint (its position), until it is forgotten.
        const newest = new Map<string, number>();
        // Each key's last hint, forgotten or not: a forgotten key still took its place among the latest.
        const lastHinted = new Map<string, number>();
        ops.forEach((o, i) => {
          if (o.kind === 'hint') {
            e.hint(row(o.key, i));
            newest.set(o.key, i);
            lastHinted.set(o.key, i);
          } else {
            e.forget(o.key);
            newest.delete(o.key);
          }
        });
        let kept = 0;
        for (const [key, attempt] of newest) {
          const got = e.hinted(key);
          if (got !== undefined) {
            kept++;
            // Never an older row than the last one written under its key.
            expect(got.attempt, key).toBe(attempt);
            expect(Object.isFrozen(got)).toBe(true);
          }
        }
        // Of the latest 512 keys hinted, those not forgotten since are all remembered (a key
        // forgotten still counts among the 512: the memory frees no room for an older one).
        const latest = [...lastHinted].sort((a, b) => b[1] - a[1]).slice(0, 512);
        for (const [key] of latest) if (newest.has(key)) expect(e.hinted(key), key).toBeDefined();
        expect(kept).toBeLessThanOrEqual(1024);
        for (let k = 0; k < 3000; k++) if (!newest.has(`k${k}`)) expect(e.hinted(`k${k}`)).toBeUndefined();
      }),
      // A counterexample of thousands of writes is not shrunk (that would take minutes): the failing
      // expectation names the key.
      { numRuns: 60, endOnFailure: true },
    );
  });

  it('a key forgotten keeps its place among the latest 512: the memory frees no room for an older key (the case a CI run found against the earlier model)', () => {
    const e = engine();
    for (let k = 0; k < 1024; k++) e.hint(row(`k${k}`, k));
    e.forget('k1023');
    for (let k = 512; k < 1023; k++) expect(e.hinted(`k${k}`), `k${k}`).toBeDefined();
    // k511 is the 513th latest key hinted: not promised, and not kept.
    expect(e.hinted('k511')).toBeUndefined();
  });

  it('keeps a copy: a change to the row handed in is not remembered', () => {
    const e = engine();
    const r = { ...row('k', 1) } as { -readonly [K in keyof EffectRecord]: EffectRecord[K] };
    e.hint(r);
    r.error = 'changed by the caller';
    expect(e.hinted('k')?.error).toBeNull();
  });
});
