// Effect and resource templates (spec 01 §3.7).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createAction, EffectKeyError, InvalidArgument, loadPolicy, parseTemplate, PolicyError, resolveEffectTemplate } from '@ctrlrun/kernel';
import { resolveResourceTemplate } from '../src/policy/index.js';
import { jsonEquals } from '../src/canonical.js';
import { setup } from './harness.js';

describe('template grammar', () => {
  it('reads literal text and {name} placeholders, names as Python identifiers', () => {
    expect(parseTemplate('refund:{payment_id}', 'load').placeholders).toEqual(['payment_id']);
    expect(parseTemplate('namespace:{cluster}:{name}', 'load').placeholders).toEqual(['cluster', 'name']);
    expect(parseTemplate('{a}{a}', 'load').placeholders).toEqual(['a', 'a']);
    expect(parseTemplate('no placeholders at all', 'load').placeholders).toEqual([]);
    expect(parseTemplate('{_x1}', 'load').placeholders).toEqual(['_x1']);
    // Unicode letters and digits count, as in a Python identifier.
    expect(parseTemplate('{zahlungs_nr}:{café}:{名前}:{x٣}', 'load').placeholders).toEqual(['zahlungs_nr', 'café', '名前', 'x٣']);
    expect(parseTemplate('line\nbreak:{x}', 'load').parts).toEqual([{ text: 'line\nbreak:' }, { name: 'x' }]);
  });

  it('refuses what is not literal text and {name}: PolicyError at load, InvalidArgument at decoration', () => {
    const malformed = [
      '',
      '{{x}}',
      '{x',
      'x}',
      '{}',
      '{1x}',
      '{0}',
      '{x:>10}',
      '{x!r}',
      '{x.y}',
      '{x[0]}',
      '{ x}',
      '{x }',
      '{x-y}',
      '{e\u0301}',
      '}{',
      'a{b{c}}',
    ];
    for (const text of malformed) {
      expect(() => parseTemplate(text, 'load'), text).toThrow(PolicyError);
      expect(() => parseTemplate(text, 'decoration'), text).toThrow(InvalidArgument);
    }
    expect(() => parseTemplate('refund:{payment_id', 'decoration')).toThrow(
      "'refund:{payment_id' is not a valid template: expected literal text and '{name}' placeholders, found '{' at position 7",
    );
    expect(() => parseTemplate('', 'load')).toThrow('a template must be a non-empty string');
    expect(() => parseTemplate(5 as unknown as string, 'decoration')).toThrow(InvalidArgument);
  });

  it('a malformed policy template is a load error naming the action', () => {
    const err = (() => {
      try {
        loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    resource: "payment:{id:>4}"\n    decision: allow\n');
      } catch (e) {
        return e as Error;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(PolicyError);
    expect(err?.message).toMatch(/actions\['stripe\.refund'\] \(line 4\): 'resource':/);
  });
});

describe('resolving a resource template (before the action exists)', () => {
  it('renders non-empty strings verbatim and integers in decimal', () => {
    expect(resolveResourceTemplate('payment:{id}', { id: 'pi_1' })).toBe('payment:pi_1');
    expect(resolveResourceTemplate('order:{n}', { n: 42 })).toBe('order:42');
    expect(resolveResourceTemplate('order:{n}', { n: -7 })).toBe('order:-7');
    expect(resolveResourceTemplate('big:{n}', { n: 12345678901234567890n })).toBe('big:12345678901234567890');
    expect(resolveResourceTemplate('{resource}', { resource: 'r' })).toBe('r');
    expect(resolveResourceTemplate(parseTemplate('{a}-{b}', 'decoration'), { a: 'x', b: 1 })).toBe('x-1');
  });

  it('refuses what identifies nothing, with InvalidArgument', () => {
    for (const value of [null, '', true, false, [1], { a: 1 }, 1.5, undefined]) {
      expect(() => resolveResourceTemplate('p:{id}', { id: value }), String(value)).toThrow(InvalidArgument);
    }
    expect(() => resolveResourceTemplate('p:{id}', {})).toThrow("'p:{id}': no value for '{id}' (have: nothing)");
    expect(() => resolveResourceTemplate('p:{id}', { other: 1 })).toThrow('(have: other)');
    // An inherited property is not an argument.
    expect(() => resolveResourceTemplate('p:{constructor}', {})).toThrow(InvalidArgument);
    expect(() => resolveResourceTemplate('p:{id', { id: 'x' })).toThrow(InvalidArgument);
  });
});

describe('resolving an effect template (against the canonical arguments)', () => {
  it('{resource} is the action resource', () => {
    expect(resolveEffectTemplate('refund:{payment_id}', { payment_id: 'pi_1', amount: 5 }, null)).toBe('refund:pi_1');
    expect(resolveEffectTemplate('call:{resource}:{id}', { id: 7 }, 'tool:search')).toBe('call:tool:search:7');
  });

  it('an argument also named resource, or a null resource, is an EffectKeyError', () => {
    expect(() => resolveEffectTemplate('x:{resource}', { resource: 'arg' }, 'field')).toThrow(EffectKeyError);
    expect(() => resolveEffectTemplate('x:{resource}', { resource: 'arg' }, 'field')).toThrow(/ambiguous/);
    expect(() => resolveEffectTemplate('x:{resource}', {}, null)).toThrow(EffectKeyError);
    // Without the placeholder, an argument named resource is nobody's business.
    expect(resolveEffectTemplate('x:{id}', { resource: 'arg', id: 'i' }, null)).toBe('x:i');
  });

  it('unresolvable placeholders are EffectKeyError, not InvalidArgument', () => {
    for (const args of [{}, { payment_id: null }, { payment_id: '' }, { payment_id: true }, { payment_id: ['a'] }, { payment_id: { a: 1 } }]) {
      expect(() => resolveEffectTemplate('refund:{payment_id}', args, null), JSON.stringify(args)).toThrow(EffectKeyError);
    }
  });

  it('test_T16_a_decorator_and_a_policy_template_produce_the_same_action_hash', () => {
    const policy = loadPolicy(
      'schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    resource: "payment:{payment_id}"\n    effect: "refund:{payment_id}"\n    decision: allow\n',
    );
    const entry = policy.action('stripe.refund')!;
    const args = { payment_id: 'pi_9', amount: 100 };
    const build = (resource: string) => createAction({ name: 'stripe.refund', arguments: args, principal: { agent: 'a' }, resource });
    const fromPolicy = build(resolveResourceTemplate(entry.resource!, args));
    const fromDecorator = build(resolveResourceTemplate(parseTemplate('payment:{payment_id}', 'decoration'), args));
    expect(fromPolicy.actionHash).toBe(fromDecorator.actionHash);
    expect(resolveEffectTemplate(entry.effect!, fromPolicy.canonicalArguments, fromPolicy.resource)).toBe(
      resolveEffectTemplate('refund:{payment_id}', fromDecorator.canonicalArguments, fromDecorator.resource),
    );
    // And a different template is a different action.
    expect(build(resolveResourceTemplate('pay:{payment_id}', args)).actionHash).not.toBe(fromPolicy.actionHash);
  });
});

describe('an integer and its digits as a string never share a key (777 vs "777")', () => {
  it('a string of only decimal digits is refused in an effect template; the integer keeps its decimal key', () => {
    expect(resolveEffectTemplate('refund:{payment_id}', { payment_id: 777 }, null)).toBe('refund:777');
    expect(resolveEffectTemplate('refund:{payment_id}', { payment_id: 12345678901234567890n }, null)).toBe('refund:12345678901234567890');
    for (const s of ['777', '0', '-5', '12345678901234567890']) {
      expect(() => resolveEffectTemplate('refund:{payment_id}', { payment_id: s }, null), s).toThrow(EffectKeyError);
      expect(() => resolveEffectTemplate('refund:{payment_id}', { payment_id: s }, null), s).toThrow(
        `'{payment_id}' is the string "${s}", which the template would spell exactly like the integer ${s}`,
      );
    }
    // Strings no integer renders to stay verbatim.
    for (const s of ['0777', '+7', '-0', '7.0', '777 ', 'txn_777', '1e3', '٧٧٧']) {
      expect(resolveEffectTemplate('refund:{payment_id}', { payment_id: s }, null), s).toBe(`refund:${s}`);
    }
  });

  it('the same holds for a resource template (an effect key may name {resource}), with InvalidArgument', () => {
    expect(resolveResourceTemplate('order:{n}', { n: 777 })).toBe('order:777');
    expect(() => resolveResourceTemplate('order:{n}', { n: '777' })).toThrow(InvalidArgument);
    // The action's own resource is a string whatever it holds.
    expect(resolveEffectTemplate('ship:{resource}', {}, '777')).toBe('ship:777');
  });

  it('property: two different placeholder values that both resolve give two different keys', () => {
    const value = fc.oneof(
      fc.integer(),
      fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }),
      fc.integer().map(String),
      fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
      fc.string({ minLength: 1, maxLength: 6 }),
    );
    const key = (v: unknown): string | null => {
      try {
        return resolveEffectTemplate('refund:{id}', { id: v }, null);
      } catch (e) {
        expect(e).toBeInstanceOf(EffectKeyError);
        return null;
      }
    };
    fc.assert(
      // Random pairs, and the pairs that matter: an integer and its own digits as a string.
      fc.property(
        fc.oneof(
          fc.tuple(value, value),
          fc.integer().map((n) => [n, String(n)] as const),
          fc.bigInt().map((n) => [n.toString(), n] as const),
        ),
        ([a, b]) => {
          const ka = key(a);
          const kb = key(b);
          if (ka !== null && ka === kb) expect(jsonEquals(a, b)).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('through Control: "777" after 777 is refused as an effect-key error, never a duplicate of the other action', async () => {
    const { control, store } = await setup();
    const run = (payment_id: unknown) =>
      control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id, amount: 100 }, principal: { agent: 'refund-agent' } }), async () => ({
        ok: true,
      }));
    await expect(run(777)).resolves.toEqual({ ok: true });
    let ran = false;
    await expect(
      control.execute(
        createAction({ name: 'stripe.refund', arguments: { payment_id: '777', amount: 100 }, principal: { agent: 'refund-agent' } }),
        async () => ((ran = true), {}),
      ),
    ).rejects.toBeInstanceOf(EffectKeyError);
    expect(ran).toBe(false);
    expect((await store.receipts()).map((r) => [r.effect_key, r.result])).toEqual([
      ['refund:777', 'committed'],
      [null, 'denied'],
    ]);
  });
});

describe('templates given as text', () => {
  // A policy's templates are resolved on every action; their parsed form is kept by text. Whatever
  // is kept, resolving text must answer exactly what parsing it afresh answers, and a malformed
  // one must be refused every time.
  const piece = fc.constantFrom('refund:', '{a}', '{b}', '{', '}', '{a.b}', ':', '{x}', 'é', '{{');
  const outcome = (f: () => string): string => {
    try {
      return `ok ${f()}`;
    } catch (err) {
      return `${(err as Error).name} ${(err as Error).message}`;
    }
  };
  it('property: text resolves as its fresh parse does, however many other templates come between', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.array(piece, { minLength: 1, maxLength: 5 }).map((p) => p.join('')),
          { minLength: 1, maxLength: 12 },
        ),
        fc.nat(600),
        (texts, others) => {
          const args = { a: 'p1', b: 7 };
          const fresh = texts.map((t) => outcome(() => resolveEffectTemplate(parseTemplate(t, 'decoration'), args, null)));
          expect(texts.map((t) => outcome(() => resolveEffectTemplate(t, args, null)))).toEqual(fresh);
          // Past the kept count, and again.
          for (let i = 0; i < others; i++) resolveEffectTemplate(`other-${i}:{a}`, args, null);
          expect(texts.map((t) => outcome(() => resolveEffectTemplate(t, args, null)))).toEqual(fresh);
          expect(texts.map((t) => outcome(() => resolveResourceTemplate(t, args)))).toEqual(
            texts.map((t) => outcome(() => resolveResourceTemplate(parseTemplate(t, 'decoration'), args))),
          );
        },
      ),
      { numRuns: 60 },
    );
  });
});
