// What the store benches run: one allowed action, a refund keyed by its payment id, by one agent.
import { loadPolicy } from '@ctrlrun/kernel';

/** `stripe.refund` allowed, its effect keyed `refund:{payment_id}`: the policy's text. */
export const ALLOW_REFUND_YAML = `schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`;

/** {@link ALLOW_REFUND_YAML}, loaded. */
export const ALLOW_REFUND_POLICY = loadPolicy(ALLOW_REFUND_YAML);

/** The agent every bench action is proposed by. */
export const BENCH_PRINCIPAL = { agent: 'bench-agent' };
