// checkPolicy and Policy.warnings (issue 10, findings 10 and 21): evaluation keeps the
// reference's semantics (a condition on a missing or mistyped argument is false, so its rule is
// skipped), and the check names every place where that, or another spelling of a value, turns a
// stricter decision into a less strict one.
import { describe, expect, it } from 'vitest';
import { checkPolicy, EXAMPLE_POLICY_YAML, loadAuthority, loadPolicy } from '@ctrlrun/kernel';

const v3 = (actions: string, rest = '') => `schema: ctrlrun.policy/v3\nactions:\n${actions}${rest}`;

const DENY_ABOVE = v3(`  stripe.refund:
    rules:
      - when: { amount_gt: 5000000 }
        decision: deny
      - when: { amount_gt: 50000 }
        decision: approve
      - decision: allow
`);

const ALLOW_LIST = v3(`  stripe.refund:
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - when: { amount_lte: 5000000 }
        decision: approve
      - decision: deny
`);

describe('checkPolicy: a missing or mistyped argument that turns a deny into an allow', () => {
  it('flags "deny above X, else allow", and the decision itself stays the reference\'s', () => {
    const p = loadPolicy(DENY_ABOVE);
    // The interop semantics stay: the string skips both bounds and lands on the allow.
    const e = p.evaluate('stripe.refund', { amount: '5000001' });
    expect(e).toMatchObject({ decision: 'allow', reason: 'rule[2]' });
    expect(e.warnings.join('\n')).toMatch(/condition amount_gt ignored: argument 'amount' is string, not an integer/);
    expect(p.evaluate('stripe.refund', {}).decision).toBe('allow');

    const findings = checkPolicy(p);
    expect(findings.map((f) => [f.code, f.where, f.argument, f.bypasses, f.from, f.to])).toEqual([
      ['rule_skipped', "actions['stripe.refund'].rules[0]", 'amount', ['missing', 'mistyped'], 'deny', 'allow'],
      ['rule_skipped', "actions['stripe.refund'].rules[1]", 'amount', ['missing', 'mistyped'], 'approve', 'allow'],
    ]);
    expect(findings[0]!.message).toMatch(
      /rules\[0\] \(deny\) is skipped when 'amount' is missing, or 'amount' is not an integer.*rules\[2\] \(allow\) can match instead: such an argument turns deny into allow/,
    );
  });

  it('an allow-list (bounded allow and approve first, deny last) has nothing to flag', () => {
    expect(checkPolicy(loadPolicy(ALLOW_LIST))).toEqual([]);
    expect(loadPolicy(ALLOW_LIST).warnings).toEqual([]);
    expect(loadPolicy(EXAMPLE_POLICY_YAML).warnings).toEqual([]);
  });

  it('a later rule that tests the argument too stops the missing case; only a non-numeric test lets the mistyped one through', () => {
    const guarded = v3(`  a:
    rules:
      - when: { amount_gt: 100 }
        decision: deny
      - when: { amount_neq: 0 }
        decision: allow
`);
    expect(checkPolicy(loadPolicy(guarded)).map((f) => [f.code, f.bypasses])).toEqual([
      ['rule_skipped', ['mistyped']],
      ['neq_admits_variants', undefined],
    ]);
    expect(loadPolicy(guarded).evaluate('a', { amount: '101' }).decision).toBe('allow');
    const bounded = guarded.replace('amount_neq: 0', 'amount_lte: 100');
    expect(loadPolicy(bounded).evaluate('a', { amount: '101' }).decision).toBe('deny');
    expect(checkPolicy(loadPolicy(bounded))).toEqual([]);
    // A later rule as strict or stricter is not a loosening; the fallback is deny.
    expect(checkPolicy(loadPolicy(v3('  a:\n    rules:\n      - when: { amount_gt: 100 }\n        decision: deny\n      - decision: deny\n')))).toEqual([]);
    expect(checkPolicy(loadPolicy(v3('  a:\n    rules:\n      - when: { amount_gt: 100 }\n        decision: approve\n')))).toEqual([]);
  });

  it('a deny by exact value lets any other spelling through (the weak form of finding 21)', () => {
    const p = loadPolicy(
      v3(`  wire:
    rules:
      - when: { account_in: [treasury, payroll] }
        decision: deny
      - decision: allow
`),
    );
    expect(p.evaluate('wire', { account: 'Treasury' }).decision).toBe('allow');
    const [f] = checkPolicy(p);
    expect(f).toMatchObject({ code: 'rule_skipped', argument: 'account', bypasses: ['missing', 'other_value'], from: 'deny', to: 'allow' });
    expect(f!.message).toMatch(/not exactly in \["treasury","payroll"\] \("Treasury", "treasury ", \["treasury"\]\)/);
  });

  it('an allow that excludes one value by _neq is flagged; a deny by _neq (deny all but one) is not', () => {
    const p = loadPolicy(v3('  wire:\n    rules:\n      - when: { account_neq: treasury }\n        decision: allow\n'));
    expect(p.evaluate('wire', { account: 'Treasury' }).decision).toBe('allow');
    expect(checkPolicy(p)).toEqual([
      expect.objectContaining({ code: 'neq_admits_variants', where: 'actions.wire.rules[0].when.account_neq', argument: 'account' }),
    ]);
    expect(
      checkPolicy(loadPolicy(v3('  wire:\n    rules:\n      - when: { account_neq: ops }\n        decision: deny\n      - decision: approve\n'))).map(
        (f) => f.bypasses,
      ),
    ).toEqual([['missing']]);
  });

  it('the derived data_scope is never "missing"', () => {
    const p = loadPolicy(
      `schema: ctrlrun.policy/v4\nactions:\n  a:\n    data: { ssn: phi }\n    rules:\n      - when: { data_scope_in: [phi] }\n        decision: deny\n      - decision: allow\n`,
    );
    expect(checkPolicy(p)).toEqual([]);
  });

  it("flags a grant's _neq, inline or standalone", () => {
    const grant = 'authority:\n  grants:\n    - id: g\n      subject: { agent: a }\n      actions: ["**"]\n      constraints: { account_neq: treasury }\n';
    const inline = loadPolicy(v3('  a:\n    decision: allow\n', grant));
    expect(checkPolicy(inline)).toEqual([
      expect.objectContaining({ code: 'grant_neq', action: null, where: 'authority.grants["g"].constraints.account_neq', argument: 'account' }),
    ]);
    const standalone = loadAuthority(`schema: ctrlrun.policy/v3\n${grant}`);
    const plain = loadPolicy(v3('  a:\n    decision: allow\n'));
    expect(checkPolicy(plain)).toEqual([]);
    expect(checkPolicy(plain, { authority: standalone }).map((f) => f.code)).toEqual(['grant_neq']);
  });
});

describe('checkPolicy: an effect key shaped by a resource nobody derives', () => {
  it('flags an effect template reading {resource} on an entry without a resource: template', () => {
    const claimed = loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  refund:\n    effect: "refund:{resource}"\n    decision: allow\n');
    expect(checkPolicy(claimed)).toEqual([expect.objectContaining({ code: 'effect_resource_claimed', action: 'refund', where: 'actions.refund.effect' })]);
    const derived = loadPolicy(
      'schema: ctrlrun.policy/v2\nactions:\n  refund:\n    effect: "refund:{resource}"\n    resource: "payment:{payment_id}"\n    decision: allow\n',
    );
    expect(checkPolicy(derived)).toEqual([]);
    expect(checkPolicy(loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  refund:\n    effect: "refund:{payment_id}"\n    decision: allow\n'))).toEqual([]);
  });
});

describe('loadPolicy warns', () => {
  it('keeps the findings as policy.warnings and hands each to a logger once', () => {
    const seen: string[] = [];
    const p = loadPolicy(DENY_ABOVE, { source: 'ctrlrun.yaml', logger: { warn: (m) => void seen.push(m) } });
    expect(p.warnings).toEqual(checkPolicy(p).map((f) => f.message));
    expect(p.warnings).toHaveLength(2);
    expect(Object.isFrozen(p.warnings)).toBe(true);
    expect(seen).toEqual(p.warnings.map((w) => `[ctrlrun] ctrlrun.yaml: ${w}`));
    // Warnings are not decision inputs: the hash is the document's.
    expect(p.policyHash).toBe(loadPolicy(DENY_ABOVE).policyHash);
  });
});
