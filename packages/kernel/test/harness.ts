// Shared fixtures for the kernel's control-path tests: a real sql.js store, a movable clock.
import { Control, type ControlOptions, sequentialIds, type EventRecord, type StoredReceipt, callbackSink } from '@ctrlrun/kernel';
import { loadPolicy } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

export const T0 = new Date('2026-01-01T12:00:00.000Z');

export const REFUND_POLICY = `schema: ctrlrun.policy/v2
actions:
  customer.read: {decision: allow}
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: {amount_gte: 0, amount_lte: 100000}
        decision: allow
      - when: {amount_gte: 0, amount_lte: 1000000}
        decision: approve
      - decision: deny
  iam.grant_admin: {decision: deny}
`;

export async function setup(policyYaml = REFUND_POLICY, extra: Partial<ControlOptions> = {}) {
  let now = T0.getTime();
  const clock = () => new Date(now);
  const store = await createSqlJsStore({ clock });
  const events: EventRecord[] = [];
  const receipts: StoredReceipt[] = [];
  const control = new Control({
    policy: loadPolicy(policyYaml),
    store,
    clock,
    ids: sequentialIds(),
    principal: { agent: 'refund-agent' },
    sinks: [callbackSink({ onEvent: (e) => void events.push(e), onReceipt: (r) => void receipts.push(r) })],
    logger: { warn: () => {} },
    ...extra,
  });
  return {
    store,
    control,
    events,
    receipts,
    clock,
    advance(ms: number) {
      now += ms;
    },
    types: () => events.map((e) => e.type),
  };
}
