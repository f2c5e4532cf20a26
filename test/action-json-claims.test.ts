// Spec 05 §6.3: claims are written as an object, `{}` when there are none, in `action_json` and
// in receipts, as the original 0.12.2 writes them; null or any claims that are not an object read
// as none. Claims are never hashed: every hash of the original's vectors comes out the same.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { actionToJson, createAction, type JsonObject } from '@ctrlrun/kernel';
import { actionFromJson } from '@ctrlrun/kernel/store';
import { decodeTyped, type Typed } from './support/typed.js';

const vectors = JSON.parse(readFileSync(new URL('./vectors/action_hash.sample.json', import.meta.url), 'utf8')) as {
  cases: {
    id: string;
    ok: boolean;
    input: { name: string; arguments_typed: Typed; principal: { agent: string; user: string | null }; resource: string | null; environment: string | null };
    action_hash?: string;
  }[];
};

describe('claims in action_json', () => {
  const ok = vectors.cases.filter((c) => c.ok);

  it('is {} with no claims, and neither that nor any claims changes an action hash of the original vectors', () => {
    expect(ok.length).toBeGreaterThan(5);
    for (const c of ok) {
      const build = (claims?: Record<string, string | number | boolean>) =>
        createAction({
          name: c.input.name,
          arguments: decodeTyped(c.input.arguments_typed) as Record<string, unknown>,
          principal: claims === undefined ? c.input.principal : { ...c.input.principal, claims },
          resource: c.input.resource,
          ...(c.input.environment === null ? {} : { environment: c.input.environment }),
        });
      const plain = build();
      const json = JSON.parse(actionToJson(plain)) as { principal: JsonObject };
      expect(json.principal['claims'], c.id).toEqual({});
      expect(plain.actionHash, c.id).toBe(c.action_hash);
      // Read back: the same hash, written again the same way.
      const back = actionFromJson(actionToJson(plain));
      expect(back.actionHash, c.id).toBe(c.action_hash);
      expect(actionToJson(back), c.id).toBe(actionToJson(plain));
      expect(build({ role: 'support', level: 3 }).actionHash, c.id).toBe(c.action_hash);
    }
  });

  it('null, or claims that are not an object, read as none: the same action, written back with {}', () => {
    const c = ok[0]!;
    const stored = JSON.parse(
      actionToJson(
        createAction({
          name: c.input.name,
          arguments: decodeTyped(c.input.arguments_typed) as Record<string, unknown>,
          principal: c.input.principal,
          resource: c.input.resource,
        }),
      ),
    ) as {
      principal: Record<string, unknown>;
    };
    for (const claims of [null, 'role=admin', ['support'], 7, true]) {
      const text = JSON.stringify({ ...stored, principal: { ...stored.principal, claims } });
      const action = actionFromJson(text);
      expect(action.actionHash).toBe(c.action_hash);
      expect(action.principal.claims ?? null).toBeNull();
      expect((JSON.parse(actionToJson(action)) as { principal: JsonObject }).principal['claims']).toEqual({});
    }
    // A claims object is kept as it is.
    const kept = actionFromJson(JSON.stringify({ ...stored, principal: { ...stored.principal, claims: { role: 'support' } } }));
    expect(kept.principal.claims).toEqual({ role: 'support' });
  });
});

describe('a claim that is a list of strings (the original 0.8+ roles claim, spec 05 §6.3)', () => {
  it('is read from action_json the original wrote, kept as a list, and changes no hash', () => {
    const plain = createAction({ name: 'payments.refund', arguments: { amount: 5 }, principal: { agent: 'a', user: 'u' } });
    const withRoles = createAction({
      name: 'payments.refund',
      arguments: { amount: 5 },
      principal: { agent: 'a', user: 'u', claims: { roles: ['approver', 'ops'], tenant: 't1' } },
    });
    expect(withRoles.actionHash).toBe(plain.actionHash);
    const stored = JSON.parse(actionToJson(withRoles)) as JsonObject;
    expect((stored['principal'] as JsonObject)['claims']).toEqual({ roles: ['approver', 'ops'], tenant: 't1' });
    const back = actionFromJson(JSON.stringify(stored));
    expect(back.principal.claims).toEqual({ roles: ['approver', 'ops'], tenant: 't1' });
    expect(Object.isFrozen(back.principal.claims!['roles'])).toBe(true);
    expect(back.actionHash).toBe(plain.actionHash);
  });

  it('a list holding anything but non-empty strings is refused, naming the claim', () => {
    for (const roles of [[''], [1], [['nested']], [null]])
      expect(() => createAction({ name: 'x', arguments: {}, principal: { agent: 'a', claims: { roles: roles as never } } })).toThrow(
        /principal\.claims\.roles must be a string, an integer, a boolean or a list of non-empty strings/,
      );
  });
});
