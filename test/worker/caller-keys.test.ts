/**
 * Effect keys a caller supplies (issue 10, finding 2): on an action without an `effect:`
 * template the agent's key is scoped to the action, so it can never squat another action's key,
 * and a scoped key that any template of the policy could also produce is refused.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadPolicy, resolveEffectTemplate } from '@ctrlrun/kernel';
import { scopedCallerKey, templateCollision } from '../../worker/src/caller-keys.js';
import { AGENT, harness, POLICY } from './harness.js';

describe('a caller effectKey on an action without a template', () => {
  it("cannot squat the refund's key: notify with effectKey refund:txn_77, then the real refund runs", async () => {
    const h = await harness(
      {},
      `${POLICY}  notify.customer:
    decision: allow
`,
    );
    const squat = await h.call('POST', '/v1/actions', AGENT, { name: 'notify.customer', arguments: { text: 'hi' }, effectKey: 'refund:txn_77' });
    // No executor for notify.customer: recorded FAILED under its own scoped key.
    expect(squat.status).toBe(422);
    expect(squat.json['error']).toMatchObject({ effectKey: 'caller/notify.customer/refund:txn_77' });
    expect(await h.store.getEffect('refund:txn_77')).toBeNull();
    const refund = await h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: 'txn_77', amount: 500 } });
    expect(refund.status, JSON.stringify(refund.json)).toBe(200);
    expect(refund.json).toMatchObject({ status: 'committed', effectKey: 'refund:txn_77' });
    expect(h.calls).toEqual(['refund txn_77']);
  });

  it('two actions with the same caller key do not collide; the same action with it deduplicates', async () => {
    const h = await harness();
    const a = await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: {}, effectKey: 'job-1' });
    const b = await h.call('POST', '/v1/actions', AGENT, { name: 'db.drop', arguments: { table: 't' }, effectKey: 'job-1' });
    expect([a.status, b.status]).toEqual([200, 200]);
    expect([a.json['effectKey'], b.json['effectKey']]).toEqual(['caller/free.form/job-1', 'caller/db.drop/job-1']);
    const again = await h.call('POST', '/v1/actions', AGENT, { name: 'db.drop', arguments: { table: 't' }, effectKey: 'job-1' });
    expect(again.status).toBe(409);
    expect(again.json['error']).toMatchObject({ code: 'ERR_DUPLICATE_EFFECT', state: 'committed', effectKey: 'caller/db.drop/job-1' });
  });

  it('a scoped key that a template of the policy could produce is 400 and writes nothing', async () => {
    const wide = `${POLICY}  anything.keyed:
    effect: "{id}"
    decision: allow
`;
    const h = await harness({}, wide);
    const r = await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: {}, effectKey: 'k1' });
    expect(r.status).toBe(400);
    expect(r.json['error']).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', path: '$.effectKey', message: expect.stringContaining('anything.keyed') });
    expect(await h.counts()).toEqual({ events: 0, receipts: 0, effects: 0, approvals: 0 });
    // Without a caller key the action still runs (no reservation).
    expect((await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: {} })).status).toBe(200);
  });

  it('names with a slash or a colon stay apart: the encoded name holds no slash', () => {
    expect(scopedCallerKey('a/b', 'c')).toBe('caller/a%2Fb/c');
    expect(scopedCallerKey('a', 'b/c')).toBe('caller/a/b/c');
    expect(scopedCallerKey('a/b', 'c')).not.toBe(scopedCallerKey('a', 'b/c'));
  });
});

/** A template's text: literal runs (no braces) and `{a}`, `{b}`, `{c}` placeholders. */
const literal = fc.string({ minLength: 1, maxLength: 4 }).filter((t) => !/[{}]/.test(t));
const template = fc.array(fc.oneof(literal, fc.constantFrom('{a}', '{b}', '{c}')), { minLength: 1, maxLength: 5 }).map((parts) => parts.join(''));
// Digit-only strings are refused by templates (they would spell an integer's key), so they are not values here.
const value = fc.oneof(
  fc.string({ minLength: 1, maxLength: 4 }).filter((s) => !/^(?:0|-?[1-9][0-9]*)$/.test(s)),
  fc.integer(),
);
const policyWith = (t: string) => loadPolicy(`schema: ctrlrun.policy/v2\nactions:\n  t.act:\n    effect: ${JSON.stringify(t)}\n    decision: allow\n`);
/** The obvious reference (backtracking is harmless on keys this short). */
function reference(t: string, key: string): boolean {
  const source = t
    .split(/(\{[abc]\})/)
    .map((p) => (/^\{[abc]\}$/.test(p) ? '[\\s\\S]+' : p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${source}$`).test(key);
}

describe('templateCollision', () => {
  it('finds every key a template renders', () => {
    fc.assert(
      fc.property(template, fc.record({ a: value, b: value, c: value }), (t, args) => {
        const key = resolveEffectTemplate(t, args, null);
        expect(templateCollision(policyWith(t), key)).toEqual({ action: 't.act', template: t });
      }),
      { numRuns: 300 },
    );
  });

  it('agrees with a regular expression on any key', () => {
    const key = fc.oneof(
      fc.string({ maxLength: 10 }),
      fc.tuple(template, fc.string({ maxLength: 3 })).map(([t, s]) => t.replace(/\{[abc]\}/g, s)),
    );
    fc.assert(
      fc.property(template, key, (t, k) => {
        expect(templateCollision(policyWith(t), k) !== null).toBe(reference(t, k));
      }),
      { numRuns: 1000 },
    );
  });

  it('stays linear on a hostile key: a backtracking matcher would not finish this', () => {
    expect(templateCollision(policyWith('{a}x{b}x{c}x{a}y'), 'x'.repeat(60_000))).toBeNull();
  });
});
