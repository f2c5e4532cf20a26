// Property: whatever arguments an agent sends (keys from a generator with __proto__, constructor,
// controls, bidi and zero-width characters; nested arrays and objects), the gateway either
// refuses the call without reaching the upstream, or the upstream receives exactly the canonical
// arguments that were hashed, and the receipt names that hash.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, Control, createAction, loadPolicy, type JsonObject } from '@ctrlrun/kernel';
import { Gateway } from '@ctrlrun/mcp';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

const hostileKey = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'id', '', '\u0000', '\u202e', 'a\u200bb', '\u2028', 'ID', 'id '),
  fc.string({ maxLength: 6 }),
);
const leaf = fc.oneof(
  fc.integer({ min: -1e6, max: 1e6 }),
  fc.boolean(),
  fc.constant(null),
  fc.string({ maxLength: 8 }),
  fc.constantFrom('\u202e', '\u0000x', '<b>'),
);
const json = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('value'), { maxLength: 3 }), fc.dictionary(hostileKey, tie('value'), { maxKeys: 3 })),
})).value;

describe('gateway: the upstream receives what was hashed', () => {
  it('for any arguments, the call is refused before the upstream or the upstream gets the hashed canonical arguments', async () => {
    const store = await createSqlJsStore();
    try {
      const control = new Control({
        policy: loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  mcp.pay.refund: {decision: allow}\n'),
        store,
        logger: { warn: () => {} },
      });
      const received: unknown[] = [];
      const upstream = {
        request: async (req: { params: { arguments: unknown } }) => {
          // What goes over the wire: the JSON text of the request, parsed again on the other side.
          received.push(JSON.parse(JSON.stringify(req.params.arguments)));
          return { content: [] };
        },
        setNotificationHandler() {},
        transport: {},
      };
      const gateway = new Gateway({ control, upstream: upstream as never, alias: 'pay', principal: { agent: 'agent-1' } });
      const extra = { signal: new AbortController().signal, sendNotification: async () => {} } as never;
      let n = 0;
      await fc.assert(
        fc.asyncProperty(fc.dictionary(hostileKey, json, { maxKeys: 5 }), async (dict) => {
          // The agent's message as the transport parses it: JSON text, so __proto__ is an own key.
          const args = JSON.parse(JSON.stringify({ ...dict, nonce: n++ })) as Record<string, unknown>;
          const before = received.length;
          const outcome = await gateway.callTool({ name: 'refund', arguments: args }, extra).then(
            (r) => ({ ok: true as const, r }),
            (e: unknown) => ({ ok: false as const, e }),
          );
          const expected = createAction({ name: 'mcp.pay.refund', arguments: args, principal: { agent: 'agent-1' }, environment: control.environment });
          if (!outcome.ok) {
            expect(received.length).toBe(before);
            return;
          }
          expect(received.length).toBe(before + 1);
          const got = received.at(-1) as JsonObject;
          expect(canonicalJson(got)).toBe(canonicalJson(expected.canonicalArguments));
          expect(Object.keys(got).sort()).toEqual(Object.keys(expected.canonicalArguments).sort());
          const receiptId = (outcome.r._meta as Record<string, { receipt_id: string }>)['com.ctrlrun/receipt']!.receipt_id;
          const row = await store.getReceipt(receiptId);
          expect((JSON.parse(row!.json!) as { action_hash: string }).action_hash).toBe(expected.actionHash);
        }),
        { numRuns: 150 },
      );
      expect(received.length).toBeGreaterThan(100);
    } finally {
      await store.close();
    }
  }, 180_000);
});
