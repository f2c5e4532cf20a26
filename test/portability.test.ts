/**
 * The judging half of `npm run check:portability` (the runtimes themselves run there): masking
 * hides exactly what varies between runs, and the spec table catches a wrong answer.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EXPECTED, firstDifference, mask, unexpected } from './portability/compare.js';
import { runScenario } from './portability/scenario.js';

const hex32 = fc.stringMatching(/^[0-9a-f]{32}$/);

describe('portability comparison', () => {
  it('two runs of the scenario in one runtime mask to the same results, as spec 04 §4 says', async () => {
    const [first, second] = [await runScenario(), await runScenario()];
    expect(unexpected(first)).toBeUndefined();
    expect(JSON.stringify(first)).not.toBe(JSON.stringify(second)); // ids and times did vary
    expect(firstDifference(mask(first), mask(second))).toBeUndefined();
  });

  it('masks ids inside messages by first appearance, keeping which ids are equal', () => {
    fc.assert(
      fc.property(fc.uniqueArray(hex32, { minLength: 4, maxLength: 4 }), ([a, b, c, d]) => {
        const doc = (x: string, y: string, z: string) => ({
          request_id: `apr_${x}`,
          message: `approval apr_${y} refused`,
          receipt: { approval_id: `apr_${z}` },
        });
        // Same pattern of equal ids, different ids: masked alike.
        expect(mask(doc(a!, a!, b!))).toEqual(mask(doc(c!, c!, d!)));
        // Different pattern: told apart.
        expect(firstDifference(mask(doc(a!, a!, b!)), mask(doc(a!, b!, a!)))).toBeDefined();
      }),
    );
  });

  it('masks times and receipt hashes, but an action hash must match exactly', () => {
    const receipt = (action: string, prev: string, at: string) => ({
      action_hash: `sha256:${action}`,
      prev_hash: `sha256:${prev}`,
      started_at: at,
      expires_at: '2026-11-30T00:18:00.346000+00:00',
    });
    const a = 'a'.repeat(64);
    const b = 'b'.repeat(64);
    expect(mask(receipt(a, b, '2026-11-30T00:03:00.317Z'))).toEqual(mask(receipt(a, 'c'.repeat(64), '2027-01-01T10:00:00.000Z')));
    expect(firstDifference(mask(receipt(a, b, 'x')), mask(receipt(b, b, 'x')))).toMatch(/^\$\.action_hash: /);
  });

  it('a wrong remote call count is caught against the spec table', async () => {
    const steps = await runScenario();
    expect(steps.map((s) => s.step)).toEqual(EXPECTED.map((e) => e.split(' ')[0]));
    const tampered = structuredClone(steps);
    (tampered[6]!.result as { remote_calls: number }).remote_calls = 1;
    expect(unexpected(tampered)).toMatch(/^call 7: expected "4 denied r0 denied", got "4 denied r1 denied"/);
  });
});
