import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createAction, InvalidArgument } from '@ctrlrun/kernel';
import { decodeTyped, type Typed } from './support/typed.js';

const vectors = JSON.parse(readFileSync(new URL('./vectors/action_hash.sample.json', import.meta.url), 'utf8')) as {
  cases: {
    id: string;
    ok: boolean;
    input: { name: string; arguments_typed: Typed; principal: { agent: string; user: string | null }; resource: string | null; environment: string | null };
    canonical?: string;
    canonical_utf8_hex?: string;
    action_hash?: string;
    error_class?: string;
    error_message?: string;
  }[];
};

describe('action hash vectors from the original', () => {
  for (const c of vectors.cases) {
    it(c.id, () => {
      const build = () =>
        createAction({
          name: c.input.name,
          arguments: decodeTyped(c.input.arguments_typed) as Record<string, unknown>,
          principal: c.input.principal,
          resource: c.input.resource,
          ...(c.input.environment === null ? {} : { environment: c.input.environment }),
        });
      if (c.ok) {
        const a = build();
        expect(a.canonical).toBe(c.canonical);
        expect(Buffer.from(new TextEncoder().encode(a.canonical)).toString('hex')).toBe(c.canonical_utf8_hex);
        expect(a.actionHash).toBe(c.action_hash);
      } else {
        expect(build).toThrow(InvalidArgument);
        expect(build).toThrow(c.error_message!.split(' at ')[0]!);
      }
    });
  }
});
