/**
 * The starter policy `ctrlrun init` writes (docs/spec/01-core.md §3.8), block-style with header comments.
 *
 * @module
 */

/** The shipped example policy. It loads, and decides exactly as the flow-style original does. */
export const EXAMPLE_POLICY_YAML = `# ctrlrun policy: what your agent may do on its own, what needs a human, and what never runs.
# Any action not listed here is denied (reason: unknown_action). Amounts are integer minor units.
schema: ctrlrun.policy/v2
actions:
  customer.read:
    decision: allow
  invoice.read:
    decision: allow
  email.send:
    # One email per message_id, however often the agent retries.
    effect: "email:{message_id}"
    decision: allow
  stripe.refund:
    effect: "refund:{payment_id}"
    # First matching rule wins: up to 500.00 runs, up to 5,000.00 waits for a human, above is refused.
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
  iam.grant_admin:
    decision: deny
  k8s.delete_namespace:
    effect: "namespace:{cluster}:{name}"
    decision: approve
`;
