// The action hash is taken over the six-key payload; createAction writes the arguments' canonical
// text once and builds the payload around it. Property: that is exactly canonicalJson of the payload.
import { canonicalBytes, createAction, InvalidArgument } from '@ctrlrun/kernel';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  leaf: fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null)),
  node: fc.oneof({ depthSize: 'small' }, tie('leaf'), fc.array(tie('node'), { maxLength: 3 }), fc.dictionary(fc.string(), tie('node'), { maxKeys: 3 })),
})).node;

describe('createAction', () => {
  it('hashes canonicalJson({ arguments, environment, name, principal, resource, schema }), for any arguments', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), value, { maxKeys: 5 }), fc.option(fc.string({ minLength: 1 }), { nil: null }), (args, user) => {
        // Strings with lone surrogates are refused by both; keep to what createAction accepts.
        let action;
        try {
          action = createAction({ name: 'x.y', arguments: args, principal: { agent: 'a', user }, resource: 'r' });
        } catch {
          return;
        }
        const payload = {
          arguments: args,
          environment: 'production',
          name: 'x.y',
          principal: { agent: 'a', user },
          resource: 'r',
          schema: 'ctrlrun.action/v1',
        };
        expect(action.actionHash).toBe(`sha256:${bytesToHex(sha256(canonicalBytes(payload)))}`);
        expect(action.canonical).toBe(new TextDecoder().decode(canonicalBytes(payload)));
      }),
      { numRuns: 300 },
    );
  });
});

describe('createAction: the five other payload keys', () => {
  it('property: any name, agent, user, resource and environment are written as canonicalJson writes them', () => {
    const str = fc.string({ unit: 'binary', minLength: 1, maxLength: 8 });
    fc.assert(
      fc.property(str, str, fc.option(str, { nil: null }), fc.option(str, { nil: null }), str, (name, agent, user, resource, environment) => {
        const payload = { arguments: {}, environment, name, principal: { agent, user }, resource, schema: 'ctrlrun.action/v1' };
        let expected: string;
        try {
          expected = new TextDecoder().decode(canonicalBytes(payload));
        } catch (e) {
          // A lone surrogate: createAction refuses it too, naming the same field.
          const field = (e as Error).message.replace(/^.* at value\./, '');
          expect(() => createAction({ name, arguments: {}, principal: { agent, user }, resource, environment })).toThrow(`at action.${field}`);
          return;
        }
        const action = createAction({ name, arguments: {}, principal: { agent, user }, resource, environment });
        expect(action.canonical).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });
});

describe('orderedJson', () => {
  // The reference: the recursive walk, keeping each object's own key order, bigints as digits.
  const walk = (v: unknown): string => {
    if (typeof v === 'bigint') return v.toString();
    if (Array.isArray(v)) return `[${v.map(walk).join(',')}]`;
    if (typeof v === 'object' && v !== null)
      return `{${Object.keys(v)
        .map((k) => `${JSON.stringify(k)}:${walk((v as Record<string, unknown>)[k])}`)
        .join(',')}}`;
    return JSON.stringify(v);
  };
  const key = fc.oneof(fc.string(), fc.constantFrom('__proto__', '10', '2', 'toJSON', 'a\u0000b', '\ud800'));
  const data: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
    leaf: fc.oneof(fc.string(), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null), fc.bigInt()),
    node: fc.oneof(
      { depthSize: 'small' },
      tie('leaf'),
      fc.array(tie('node'), { maxLength: 3 }),
      fc.array(fc.tuple(key, tie('node')), { maxLength: 4 }).map((entries) => Object.fromEntries(entries)),
    ),
  })).node;

  it('is the own-key-order walk for any JSON data, with or without bigints (JSON.stringify where it can)', async () => {
    const { orderedJson } = await import('@ctrlrun/kernel');
    fc.assert(
      fc.property(data, (v) => void expect(orderedJson(v)).toBe(walk(v))),
      { numRuns: 500 },
    );
  });
});

describe('createAction: the action id', () => {
  // Stored as its effect row's holder and written into its receipt, neither of which can hold text
  // with no UTF-8 form: refused before anything happens, instead of after the executor ran.
  it('property: an id given is kept exactly if it is well-formed text, and refused if it holds a lone surrogate', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }), (id) => {
        const make = () => createAction({ name: 'n', arguments: {}, principal: { agent: 'a' }, actionId: id });
        // Kept as given by UTF-8 (as every store keeps text) exactly when it is well-formed.
        const survivesUtf8 = new TextDecoder().decode(new TextEncoder().encode(id)) === id;
        if (survivesUtf8) expect(make().actionId).toBe(id);
        else expect(make).toThrow(/action\.actionId holds a lone surrogate/);
      }),
      { numRuns: 500 },
    );
    expect(() => createAction({ name: 'n', arguments: {}, principal: { agent: 'a' }, actionId: 'act_\uD800' })).toThrow(InvalidArgument);
  });
});
