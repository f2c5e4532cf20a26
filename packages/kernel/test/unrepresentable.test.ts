// Control.refuseUnrepresentable: the refusal of a call one of whose arguments no action can carry
// (spec 04 §5, a float in an MCP tools/call) is evidence — ACTION_PROPOSED, ACTION_DENIED
// {unrepresentable_argument, pointer}, a denied receipt in the chain — with no policy decision,
// no reservation, and the same in observe mode (spec 02 T82b).
import { describe, expect, it } from 'vitest';
import { verifyChain } from '@ctrlrun/kernel';
import { V3, action, rig } from './authority.fixtures.js';

const ACTIONS = `actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`;

describe('Control.refuseUnrepresentable', () => {
  for (const [mode, head] of [
    ['enforce', V3],
    ['observe', `${V3}mode: observe\n`],
  ] as const) {
    it(`records the refusal in ${mode} mode: two events, a denied receipt, nothing reserved, the chain intact`, async () => {
      const r = await rig(head + ACTIONS);
      const stand = action({ principal: { agent: 'support-agent' }, resource: null, arguments: { payment_id: 'p1', amount: '2000.0' } });
      const { receipt, error } = await r.control.refuseUnrepresentable(stand, '/amount', 'the argument at /amount is a float');
      expect(error).toMatchObject({ name: 'ActionDenied', reason: 'unrepresentable_argument', actionId: stand.actionId });
      expect(receipt.document).toMatchObject({
        action_id: stand.actionId,
        action_hash: stand.actionHash,
        decision: 'deny',
        decision_reason: 'unrepresentable_argument',
        result: 'denied',
        execution: null,
        would_have: null,
        effect_key: null,
        error: 'the argument at /amount is a float',
      });
      const events = (await r.store.events()).filter((e) => e.actionId === stand.actionId);
      expect(events.map((e) => [e.type, e.data])).toEqual([
        ['ACTION_PROPOSED', { action_hash: stand.actionHash }],
        ['ACTION_DENIED', { reason: 'unrepresentable_argument', pointer: '/amount' }],
      ]);
      expect(await r.store.getEffect('refund:p1')).toBeNull();
      expect(r.calls).toBe(0);
      const rows = await r.store.receipts();
      expect(verifyChain(rows, await r.store.chainHead()).ok).toBe(true);
    });
  }
});
