// The action hash is taken over the six-key payload; createAction writes the arguments' canonical
// text once and builds the payload around it. Property: that is exactly canonicalJson of the payload.
import { canonicalBytes, createAction } from '@ctrlrun/kernel';
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
        const payload = { arguments: args, environment: 'production', name: 'x.y', principal: { agent: 'a', user }, resource: 'r', schema: 'ctrlrun.action/v1' };
        expect(action.actionHash).toBe(`sha256:${bytesToHex(sha256(canonicalBytes(payload)))}`);
        expect(action.canonical).toBe(new TextDecoder().decode(canonicalBytes(payload)));
      }),
      { numRuns: 300 },
    );
  });
});
