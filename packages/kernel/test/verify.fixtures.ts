// Policies shared by the kernel's verify tests and `ctrlrun verify`'s CLI tests, so both judge the
// same document.

/** A v2 policy without effect templates: an allow/approve refund and a read, nothing that needs processes or authority. */
export const NO_TEMPLATES = `schema: ctrlrun.policy/v2
actions:
  customer.read: { decision: allow }
  stripe.refund:
    rules:
      - when: { amount_lte: 100000 }
        decision: allow
      - decision: approve
`;
