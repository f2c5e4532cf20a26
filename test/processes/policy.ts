/** The policy the worker processes and the crash test's parent share. */
export const PROCESS_POLICY_YAML = `schema: ctrlrun.policy/v2
actions:
  race.run:
    effect: "race:{key}"
    decision: allow
  crash.refund:
    effect: "crash:{reference}"
    decision: allow
`;

/** The principal every process acts as. */
export const PROCESS_PRINCIPAL = { agent: 'race-agent', user: 'ops@example.com' } as const;
