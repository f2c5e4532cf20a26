// The policy hash of a document with an authority section is the original 0.12.2's (spec 05
// §3.4): the canonical authority is {max_delegation_depth, grants: {id: G}, break_glass: {id: G +
// {max_ttl, controls}}}, G = {actions, budgets, constraints, delegable, environments, expires_at,
// resources, subject, tasks}. The pinned hashes below were computed outside this code base, with
// Python's json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False) over that shape
// written out by hand (the original's canonical_bytes for these ASCII, integer-only documents).
import { describe, expect, it } from 'vitest';
import { loadAuthority, loadPolicy } from '@ctrlrun/kernel';

const ACTIONS = `actions:
  stripe.refund:
    resource: "payment:{payment_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: deny
`;
const GRANTS = `  grants:
    - id: head-of-support
      subject: { agent: "support-agent" }
      actions: ["stripe.refund"]
      resources: ["payment:EU-*"]
      constraints: { amount_lte: 200000 }
      environments: ["production"]
      expires_at: 2026-12-31T23:59:59Z
      delegable: true
`;
const V3 = `schema: ctrlrun.policy/v3\n${ACTIONS}authority:\n${GRANTS}`;
const V7 = `schema: ctrlrun.policy/v7
${ACTIONS}authority:
${GRANTS}      tasks: ["ticket:*"]
      budgets: [{metric: amount, limit: 100000, window: P1D}]
  break_glass:
    bg:
      subject: { agent: "oncall-*" }
      actions: ["stripe.**"]
      max_ttl: PT4H
      controls: [sre]
`;

describe("the policy hash is the original 0.12.2's for documents with authority", () => {
  it('a v3 document with a grant (tasks and budgets null, break_glass {})', () => {
    const p = loadPolicy(V3);
    expect(p.policyHash).toBe('sha256:100057441204ca8354842af2e41467bb80d992ce14570d74e3e7f650d51a5cae');
    // Breaking, on purpose: the 0.6 form ({max_delegation_depth, grants} with seven grant keys) hashed to this.
    expect(p.policyHash).not.toBe('sha256:c1e296339b80c17c734ec0066e4ed220082f2a137c4861878995a2e7b4c2dac3');
  });

  it('a v7 document with tasks, a budget (window in seconds) and a break-glass envelope', () => {
    expect(loadPolicy(V7).policyHash).toBe('sha256:8e5ad87a751cbc2a260a336ba811e6319116fef54d9a132add41b15fb13f0c30');
  });

  it('the same grants from a standalone --authority document hash the same as inline', () => {
    const inline = loadPolicy(V3);
    const policy = loadPolicy(`schema: ctrlrun.policy/v3\n${ACTIONS}`);
    const standalone = loadAuthority(`schema: ctrlrun.policy/v3\nauthority:\n${GRANTS}`);
    expect(policy.hashFor({ authority: standalone })).toBe(inline.policyHash);
  });

  it('a document with no authority section hashes as before (the recorded 0.12.2 vector)', () => {
    const p = loadPolicy(
      '\nschema: ctrlrun.policy/v1\nactions:\n  customer.read:\n    decision: allow\n  stripe.refund:\n    rules:\n      - when: { amount_lte: 100000 }\n        decision: allow\n      - when: { amount_lte: 1000000 }\n        decision: approve\n      - decision: deny\n  iam.grant_admin:\n    decision: deny\n',
    );
    expect(p.policyHash).toBe('sha256:07777c440d7a291612880e704fce51627faf2d36fe6fccd645e984c47f131760');
  });
});
