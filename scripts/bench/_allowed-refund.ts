// What the store benches run: one allowed action, a refund keyed by its payment id, by one agent.
import { loadPolicy } from '@ctrlrun/kernel';

/** `stripe.refund` allowed, its effect keyed `refund:{payment_id}`. */
export const ALLOW_REFUND_POLICY = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);

/** The agent every bench action is proposed by. */
export const BENCH_PRINCIPAL = { agent: 'bench-agent' };
