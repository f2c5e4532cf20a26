// Effect and resource templates (spec 01 §3.7).
import { describe, expect, it } from 'vitest';
import { createAction, EffectKeyError, InvalidArgument, loadPolicy, parseTemplate, PolicyError, resolveEffectTemplate, resolveResourceTemplate } from '@ctrlrun/kernel';

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
    const malformed = ['', '{{x}}', '{x', 'x}', '{}', '{1x}', '{0}', '{x:>10}', '{x!r}', '{x.y}', '{x[0]}', '{ x}', '{x }', '{x-y}', '{e\u0301}', '}{', 'a{b{c}}'];
    for (const text of malformed) {
      expect(() => parseTemplate(text, 'load'), text).toThrow(PolicyError);
      expect(() => parseTemplate(text, 'decoration'), text).toThrow(InvalidArgument);
    }
    expect(() => parseTemplate('refund:{payment_id', 'decoration')).toThrow("'refund:{payment_id' is not a valid template: expected literal text and '{name}' placeholders, found '{' at position 7");
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
    const policy = loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    resource: "payment:{payment_id}"\n    effect: "refund:{payment_id}"\n    decision: allow\n');
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
