// The policy document: loading, evaluation, the policy hash (spec 01 §3, spec 03 §6).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EXAMPLE_POLICY_YAML, InvalidArgument, loadPolicy, PolicyError, type Policy } from '@ctrlrun/kernel';
import { loadPolicyDocument } from '../src/policy/policy.js';
import { RESERVED_ARGUMENTS } from '../src/policy/conditions.js';
import { decodeTyped, type Typed } from '../../../test/support/typed.js';
import { refusal } from './policy.fixtures.js';

const vectors = JSON.parse(readFileSync(new URL('../../../test/vectors/decisions.sample.json', import.meta.url), 'utf8')) as {
  policies: {
    policy_id: string;
    yaml: string;
    policy_hash: string;
    cases: { action: string; arguments_typed: Typed; decision: string; reason: string; controls: string[] }[];
  }[];
};

const V1 = (body: string): string => `schema: ctrlrun.policy/v1\nactions:\n${body}`;
const V4 = (body: string, head = ''): string => `schema: ctrlrun.policy/v4\n${head}actions:\n${body}`;

describe("the original implementation's decision vectors", () => {
  for (const p of vectors.policies) {
    describe(p.policy_id, () => {
      const policy = loadPolicy(p.yaml);
      it('has the same policy hash', () => {
        expect(policy.policyHash).toBe(p.policy_hash);
      });
      p.cases.forEach((c, i) => {
        it(`case ${i}: ${c.action} → ${c.decision} / ${c.reason}`, () => {
          const e = policy.evaluate(c.action, decodeTyped(c.arguments_typed) as Record<string, unknown>);
          expect({ decision: e.decision, reason: e.reason, controls: e.controls }).toEqual({ decision: c.decision, reason: c.reason, controls: c.controls });
        });
      });
    });
  }
});

describe('the shipped example policy (§3.8)', () => {
  it('test_the_shipped_example_policy_loads_and_evaluates', () => {
    const p = loadPolicy(EXAMPLE_POLICY_YAML);
    expect(p.schema).toBe('ctrlrun.policy/v2');
    expect(p.mode).toBe('enforce');
    expect(p.evaluate('customer.read', {}).decision).toBe('allow');
    expect(p.evaluate('invoice.read', { id: 'in_1' }).decision).toBe('allow');
    expect(p.evaluate('email.send', { message_id: 'm1' })).toEqual({ decision: 'allow', reason: 'decision', controls: [], warnings: [] });
    expect(p.evaluate('stripe.refund', { payment_id: 'p', amount: 50000 })).toMatchObject({ decision: 'allow', reason: 'rule[0]' });
    expect(p.evaluate('stripe.refund', { payment_id: 'p', amount: 50001 })).toMatchObject({ decision: 'approve', reason: 'rule[1]' });
    expect(p.evaluate('stripe.refund', { payment_id: 'p', amount: 500001 })).toMatchObject({ decision: 'deny', reason: 'rule[2]' });
    expect(p.evaluate('stripe.refund', { payment_id: 'p', amount: -1 })).toMatchObject({ decision: 'deny', reason: 'rule[2]' });
    expect(p.evaluate('iam.grant_admin', {}).decision).toBe('deny');
    expect(p.evaluate('k8s.delete_namespace', { cluster: 'c', name: 'n' }).decision).toBe('approve');
    expect(p.action('stripe.refund')).toMatchObject({ effect: 'refund:{payment_id}', resource: null, notExecutedOnError: false });
    expect(p.action('k8s.delete_namespace')?.effect).toBe('namespace:{cluster}:{name}');
    expect(p.action('customer.read')?.effect).toBeNull();
    expect(p.action('customer.write')).toBeNull();
  });

  it('hashes exactly as the flow-style original of §3.8 does', () => {
    const flow = `schema: ctrlrun.policy/v2
actions:
  customer.read: {decision: allow}
  invoice.read: {decision: allow}
  email.send: {effect: "email:{message_id}", decision: allow}
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - {when: {amount_gte: 0, amount_lte: 50000}, decision: allow}
      - {when: {amount_gte: 0, amount_lte: 500000}, decision: approve}
      - {decision: deny}
  iam.grant_admin: {decision: deny}
  k8s.delete_namespace: {effect: "namespace:{cluster}:{name}", decision: approve}
`;
    expect(loadPolicy(EXAMPLE_POLICY_YAML).policyHash).toBe(loadPolicy(flow).policyHash);
    expect(EXAMPLE_POLICY_YAML.startsWith('#')).toBe(true);
    expect(EXAMPLE_POLICY_YAML).not.toMatch(/\{decision:/);
  });
});

describe('evaluation (§3.5)', () => {
  const policy = loadPolicy(
    V1(`  customer.read: {decision: allow}
  stripe.refund:
    rules:
      - when: {amount_lte: 100}
        decision: allow
      - when: {currency_eq: EUR}
        decision: approve
`),
  );

  it('test_T6_unknown_action_is_denied_with_reason_unknown_action', () => {
    expect(policy.evaluate('customer.write', {})).toEqual({ decision: 'deny', reason: 'unknown_action', controls: [], warnings: [] });
    const empty = loadPolicy('schema: ctrlrun.policy/v1\nactions: {}\n');
    expect(empty.evaluate('customer.read', {})).toEqual({ decision: 'deny', reason: 'unknown_action', controls: [], warnings: [] });
  });

  it('test_T6_an_action_name_is_matched_exactly', () => {
    expect(policy.evaluate('customer.read', {}).decision).toBe('allow');
    for (const near of ['Customer.read', 'customer.read ', ' customer.read', 'customer.*', 'customer', 'customer.read.all', 'customer_read']) {
      expect(policy.evaluate(near, {}), near).toMatchObject({ decision: 'deny', reason: 'unknown_action' });
    }
    // Names that are also Object.prototype members are ordinary unknown names.
    for (const proto of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      expect(policy.evaluate(proto, {}).reason).toBe('unknown_action');
    }
  });

  it('test_decision_renders_by_value', () => {
    const e = policy.evaluate('stripe.refund', { amount: 500, currency: 'EUR' });
    expect(e.decision).toBe('approve');
    expect(`${e.decision}`).toBe('approve');
    expect(JSON.stringify(e)).toBe('{"decision":"approve","reason":"rule[1]","controls":[],"warnings":[]}');
  });

  it('is the first matching rule top to bottom, else deny / no_matching_rule', () => {
    expect(policy.evaluate('stripe.refund', { amount: 100, currency: 'EUR' })).toMatchObject({ decision: 'allow', reason: 'rule[0]' });
    expect(policy.evaluate('stripe.refund', { amount: 101, currency: 'USD' })).toMatchObject({ decision: 'deny', reason: 'no_matching_rule' });
  });

  it('an absent argument makes a condition false with a warning, never an error', () => {
    const e = policy.evaluate('stripe.refund', { currency: 'USD' });
    expect(e).toMatchObject({ decision: 'deny', reason: 'no_matching_rule' });
    expect(e.warnings).toHaveLength(1);
    expect(e.warnings[0]).toContain("no argument 'amount'");
    expect(e.warnings[0]).toContain('rule[0]');
  });

  it('a rule without when always matches; conditions AND', () => {
    const p = loadPolicy(V1('  a:\n    rules:\n      - when: {x_eq: 1, y_eq: 2}\n        decision: allow\n      - decision: approve\n'));
    expect(p.evaluate('a', { x: 1, y: 2 }).decision).toBe('allow');
    expect(p.evaluate('a', { x: 1, y: 3 })).toMatchObject({ decision: 'approve', reason: 'rule[1]' });
    expect(p.evaluate('a', {})).toMatchObject({ decision: 'approve', reason: 'rule[1]' });
  });

  it('refuses arguments that are not an object', () => {
    expect(() => policy.evaluate('stripe.refund', null as unknown as Record<string, unknown>)).toThrow(InvalidArgument);
  });
});

describe('conditions (§3.4)', () => {
  it('test_T176_the_operators_behave_as_they_do_everywhere_else', () => {
    const p = loadPolicy(
      V1(`  eq: {rules: [{when: {v_eq: 1}, decision: allow}]}
  eq_true: {rules: [{when: {v_eq: true}, decision: allow}]}
  eq_str: {rules: [{when: {v_eq: "1"}, decision: allow}]}
  eq_null: {rules: [{when: {v_eq: null}, decision: allow}]}
  eq_list: {rules: [{when: {v_eq: [1, two]}, decision: allow}]}
  eq_map: {rules: [{when: {v_eq: {a: 1, b: [x]}}, decision: allow}]}
  neq: {rules: [{when: {v_neq: 1}, decision: allow}]}
  in: {rules: [{when: {v_in: [1, x, [1, 2], {k: v}]}, decision: allow}]}
  lt: {rules: [{when: {v_lt: 10}, decision: allow}]}
  lte: {rules: [{when: {v_lte: 10}, decision: allow}]}
  gt: {rules: [{when: {v_gt: 10}, decision: allow}]}
  gte: {rules: [{when: {v_gte: 10}, decision: allow}]}
  big: {rules: [{when: {v_gt: 9007199254740993}, decision: allow}]}
`),
    );
    const allows = (name: string, v: unknown): boolean => p.evaluate(name, { v }).decision === 'allow';
    // Type-strict equality: true ≠ 1, "1" ≠ 1, 5 = 5n.
    expect(allows('eq', 1)).toBe(true);
    expect(allows('eq', 1n)).toBe(true);
    expect(allows('eq', true)).toBe(false);
    expect(allows('eq', '1')).toBe(false);
    expect(allows('eq', [1])).toBe(false);
    expect(allows('eq_true', true)).toBe(true);
    expect(allows('eq_true', 1)).toBe(false);
    expect(allows('eq_str', '1')).toBe(true);
    expect(allows('eq_str', 1)).toBe(false);
    expect(allows('eq_null', null)).toBe(true);
    expect(allows('eq_null', false)).toBe(false);
    expect(allows('eq_list', [1, 'two'])).toBe(true);
    expect(allows('eq_list', ['two', 1])).toBe(false);
    expect(allows('eq_list', [1, 'two', 3])).toBe(false);
    expect(allows('eq_list', [true, 'two'])).toBe(false);
    expect(allows('eq_map', { b: ['x'], a: 1 })).toBe(true);
    expect(allows('eq_map', { a: 1, b: ['x'], c: 0 })).toBe(false);
    expect(allows('eq_map', { a: true, b: ['x'] })).toBe(false);
    expect(allows('neq', 2)).toBe(true);
    expect(allows('neq', true)).toBe(true);
    expect(allows('neq', 1)).toBe(false);
    expect(allows('in', 1)).toBe(true);
    expect(allows('in', 'x')).toBe(true);
    expect(allows('in', [1, 2])).toBe(true);
    expect(allows('in', { k: 'v' })).toBe(true);
    expect(allows('in', true)).toBe(false);
    expect(allows('in', 2)).toBe(false);
    expect(allows('in', [1])).toBe(false);
    expect([9, 10, 11].map((v) => allows('lt', v))).toEqual([true, false, false]);
    expect([9, 10, 11].map((v) => allows('lte', v))).toEqual([true, true, false]);
    expect([9, 10, 11].map((v) => allows('gt', v))).toEqual([false, false, true]);
    expect([9, 10, 11].map((v) => allows('gte', v))).toEqual([false, true, true]);
    expect(allows('big', 9007199254740994n)).toBe(true);
    expect(allows('big', 9007199254740993n)).toBe(false);
    expect(allows('big', Number.MAX_SAFE_INTEGER)).toBe(false);
    // A numeric operator on a boolean or a string is false plus a warning, not an error.
    for (const v of [true, '5', null, [5], { v: 5 }]) {
      const e = p.evaluate('lte', { v });
      expect(e.decision).toBe('deny');
      expect(e.warnings[0]).toMatch(/not an integer/);
    }
  });

  it('splits on the longest operator suffix leaving a non-empty subject', () => {
    const p = loadPolicy(
      V1(`  a: {rules: [{when: {amount_neq: 5}, decision: allow}]}
  b: {rules: [{when: {x_in_in: [1]}, decision: allow}]}
  c: {rules: [{when: {a__lte: 3}, decision: allow}]}
`),
    );
    expect(p.evaluate('a', { amount: 4 }).decision).toBe('allow');
    expect(p.evaluate('a', { amount_n: 5 }).warnings[0]).toContain("no argument 'amount'");
    expect(p.evaluate('b', { x_in: 1 }).decision).toBe('allow');
    expect(p.evaluate('c', { a_: 3 }).decision).toBe('allow');
    for (const key of ['_eq', 'amount', 'amount_like', 'amount_EQ', 'eq']) {
      const err = refusal(V1(`  a: {rules: [{when: {${key}: 1}, decision: allow}]}\n`));
      expect(err.message).toContain(key);
      expect(err.message).toContain('line 3');
    }
  });

  it('test_T74b_a_reserved_name_in_a_policy_rule_is_a_load_error', () => {
    for (const schema of ['v1', 'v2', 'v3', 'v4']) {
      for (const name of RESERVED_ARGUMENTS) {
        if (name === 'data_scope') continue;
        const err = refusal(`schema: ctrlrun.policy/${schema}\nactions:\n  a:\n    rules:\n      - when: {${name}_eq: x}\n        decision: allow\n`);
        expect(err.message).toContain(`${name}_eq`);
        expect(err.message).toContain(`'${name}'`);
        expect(err.message).toContain('line 5');
      }
    }
  });

  it('test_a_condition_naming_an_action_field_is_refused_at_load', () => {
    const err = refusal(V1('  a:\n    rules:\n      - when: {environment_eq: production}\n        decision: allow\n'));
    expect(err.message).toMatch(/environment_eq.*Action field 'environment'/);
    expect(err.message).toContain('actions.a.rules[0].when');
    expect(refusal(V1('  a:\n    rules:\n      - when: {resource_in: [x]}\n        decision: allow\n')).message).toContain("'resource'");
  });

  it('refuses operands by operator at load', () => {
    const cases: [string, RegExp][] = [
      ['{amount_lte: "100"}', /numeric operator needs an integer operand, got string/],
      ['{amount_lte: true}', /integer operand, got boolean/],
      ['{amount_lte: 1.5}', /integer operand, got float/],
      ['{amount_gt: [1]}', /integer operand, got list/],
      ['{amount_eq: 1.0}', /float operands are not allowed/],
      ['{amount_eq: 2026-01-01}', /date is not an allowed operand type/],
      ['{amount_in: 5}', /'_in' needs a list operand/],
      ['{amount_in: [1, 2.5]}', /float/],
      ['{amount_eq: [1, [2]]}', /holds scalars, got list/],
      ['{amount_neq: [{a: 1}]}', /holds scalars, got mapping/],
      ['{amount_eq: {1: x}}', /operand keys must be strings/],
    ];
    for (const [when, pattern] of cases) {
      const err = refusal(V1(`  a:\n    rules:\n      - when: ${when}\n        decision: allow\n`));
      expect(err.message, when).toMatch(pattern);
      expect(err.message, when).toContain('line 5');
    }
    // A mapping operand for eq, and an `in` list of containers, are allowed.
    expect(() => loadPolicy(V1('  a: {rules: [{when: {v_eq: {a: [1, {b: 2}]}, w_in: [[1], {x: y}]}, decision: allow}]}\n'))).not.toThrow();
  });
});

describe('data labels and the derived data_scope (§3.4, v4)', () => {
  const policy = loadPolicy(
    V4(`  patient.note:
    data:
      patient_id: phi
      diagnosis: {label: phi}
      ticket: internal
    rules:
      - when: {data_scope_eq: [phi, internal]}
        decision: deny
      - when: {data_scope_in: [phi]}
        decision: approve
      - when: {data_scope_eq: []}
        decision: allow
      - decision: allow
`),
  );

  it('test_T176_the_derived_set_drives_a_decision', () => {
    // Only the labels of arguments actually supplied count; eq compares as a set.
    expect(policy.evaluate('patient.note', { text: 'hello' })).toMatchObject({ decision: 'allow', reason: 'rule[2]' });
    expect(policy.evaluate('patient.note', { patient_id: 'p1', text: 'x' })).toMatchObject({ decision: 'approve', reason: 'rule[1]' });
    expect(policy.evaluate('patient.note', { diagnosis: 'd' })).toMatchObject({ decision: 'approve', reason: 'rule[1]' });
    expect(policy.evaluate('patient.note', { ticket: 't1', patient_id: 'p1', diagnosis: 'd' })).toMatchObject({ decision: 'deny', reason: 'rule[0]' });
    expect(policy.evaluate('patient.note', { ticket: 't1' })).toMatchObject({ decision: 'allow', reason: 'rule[3]' });
    // A supplied null still carries its label: presence, not value.
    expect(policy.evaluate('patient.note', { patient_id: null }).decision).toBe('approve');
    // The set order written in the document does not matter.
    const reversed = loadPolicy(
      V4(
        '  a:\n    data: {x: phi, y: internal}\n    rules:\n      - when: {data_scope_eq: [phi, internal]}\n        decision: deny\n      - decision: allow\n',
      ),
    );
    expect(reversed.evaluate('a', { x: 1, y: 2 }).decision).toBe('deny');
    expect(reversed.evaluate('a', { x: 1 }).decision).toBe('allow');
    const neq = loadPolicy(
      V4('  a:\n    data: {x: phi}\n    rules:\n      - when: {data_scope_neq: [phi]}\n        decision: allow\n      - decision: deny\n'),
    );
    expect(neq.evaluate('a', { x: 1 }).decision).toBe('deny');
    expect(neq.evaluate('a', {}).decision).toBe('allow');
    // An argument called data_scope cannot shadow the derived set.
    expect(policy.evaluate('patient.note', { data_scope: ['phi'] }).reason).toBe('rule[2]');
  });

  it('exposes the labels and refuses a data_scope argument or placeholder', () => {
    expect(policy.action('patient.note')?.data).toEqual({ patient_id: 'phi', diagnosis: 'phi', ticket: 'internal' });
    expect(refusal(V4('  a:\n    data: {data_scope: phi}\n    decision: allow\n')).message).toMatch(/actions\.a\.data \(line 4\).*'data_scope' is derived/);
    expect(refusal(V4('  a:\n    effect: "x:{data_scope}"\n    decision: allow\n')).message).toMatch(/'effect'.*'data_scope' is derived/);
    expect(refusal(V4('  a:\n    resource: "x:{data_scope}"\n    decision: allow\n')).message).toMatch(/'resource'.*'data_scope'/);
  });

  it('refuses malformed data entries', () => {
    expect(refusal(V4('  a:\n    data: {x: {label: phi, redact: true}}\n    decision: allow\n')).message).toMatch(/'redact' is not a data key/);
    expect(refusal(V4('  a:\n    data: {x: {lable: phi}}\n    decision: allow\n')).message).toMatch(/unknown key\(s\) 'lable'/);
    expect(refusal(V4('  a:\n    data: {x: "  "}\n    decision: allow\n')).message).toMatch(/non-empty/);
    expect(refusal(V4('  a:\n    data: [x]\n    decision: allow\n')).message).toMatch(/'data' must be a mapping/);
    expect(refusal(V4('  a:\n    data: {x: 5}\n    decision: allow\n')).message).toMatch(/must be a label/);
    expect(refusal('schema: ctrlrun.policy/v3\nactions:\n  a:\n    data: {x: phi}\n    decision: allow\n').message).toMatch(
      /actions\.a \(line 4\): 'data' needs 'schema: ctrlrun.policy\/v4'/,
    );
  });

  it('a grant-style refusal does not apply to policy rules, but numeric operators on the set warn', () => {
    const p = loadPolicy(V4('  a:\n    data: {x: phi}\n    rules:\n      - when: {data_scope_lt: 3}\n        decision: allow\n'));
    const e = p.evaluate('a', { x: 1 });
    expect(e.decision).toBe('deny');
    expect(e.warnings[0]).toMatch(/not an integer/);
  });
});

describe('controls registry and citations (v4)', () => {
  const registry = `controls:
  pci-3.4: {title: "Render PAN unreadable", source: "PCI DSS 4.0 3.4"}
  sox-404: {title: "Internal control over reporting"}
  gdpr-32: {title: "Security of processing"}
`;
  const withControls = V4(
    `  stripe.refund:
    controls: [gdpr-32, sox-404]
    rules:
      - when: {amount_lte: 100}
        decision: allow
        controls: [pci-3.4, sox-404]
      - when: {amount_lte: 1000}
        decision: approve
  customer.read:
    controls: [gdpr-32, gdpr-32]
    decision: allow
`,
    registry,
  );

  it('test_T175_a_control_is_attribution_and_changes_no_decision', () => {
    const cited = loadPolicy(withControls);
    const plain = loadPolicy(withControls.replace(/\n\s*controls: \[[^\]]*\]/g, ''));
    for (const [name, args] of [
      ['stripe.refund', { amount: 50 }],
      ['stripe.refund', { amount: 500 }],
      ['stripe.refund', { amount: 5000 }],
      ['stripe.refund', {}],
      ['customer.read', {}],
      ['customer.write', {}],
    ] as const) {
      const a = cited.evaluate(name, args);
      const b = plain.evaluate(name, args);
      expect({ decision: a.decision, reason: a.reason, warnings: a.warnings }).toEqual({ decision: b.decision, reason: b.reason, warnings: b.warnings });
      expect(b.controls).toEqual([]);
    }
    // Entry ∪ matched rule, in registry declaration order, duplicates dropped.
    expect(cited.evaluate('stripe.refund', { amount: 50 }).controls).toEqual(['pci-3.4', 'sox-404', 'gdpr-32']);
    expect(cited.evaluate('stripe.refund', { amount: 500 }).controls).toEqual(['sox-404', 'gdpr-32']);
    expect(cited.evaluate('stripe.refund', { amount: 5000 })).toMatchObject({ reason: 'no_matching_rule', controls: ['sox-404', 'gdpr-32'] });
    expect(cited.evaluate('customer.read', {}).controls).toEqual(['gdpr-32']);
    expect(cited.evaluate('customer.write', {}).controls).toEqual([]);
    expect([...cited.controls.keys()]).toEqual(['pci-3.4', 'sox-404', 'gdpr-32']);
    expect(cited.controls.get('pci-3.4')).toEqual({ id: 'pci-3.4', title: 'Render PAN unreadable', source: 'PCI DSS 4.0 3.4', approverRole: null });
    // But the registry is hashed: a citation is what an id means.
    expect(cited.policyHash).not.toBe(loadPolicy(withControls.replace('Render PAN', 'Mask PAN')).policyHash);
  });

  it('refuses citations and registries that cannot be trusted', () => {
    expect(refusal(V4('  a: {controls: [nope], decision: allow}\n', registry)).message).toMatch(
      /cites control 'nope'.*Declared controls: gdpr-32, pci-3.4, sox-404/,
    );
    expect(refusal(V4('  a: {controls: pci-3.4, decision: allow}\n', registry)).message).toMatch(/'controls' must be a list/);
    expect(refusal(V4('  a: {decision: allow}\n', 'controls:\n  x: {source: s}\n')).message).toMatch(
      /controls\['x'\] \(line 3\): 'title' must be a non-empty string/,
    );
    // approver_role is a v6 key: under v4 it is refused naming the key and the schema.
    expect(refusal(V4('  a: {decision: allow}\n', 'controls:\n  x: {title: t, approver_role: r}\n')).message).toMatch(
      /'approver_role' needs 'schema: ctrlrun.policy\/v6'; this document declares 'ctrlrun.policy\/v4'/,
    );
    expect(refusal(V4('  a: {decision: allow}\n', 'controls:\n  x: {title: t, approverrole: r}\n')).message).toMatch(/unknown key\(s\) 'approverrole'/);
    expect(refusal(V4('  a: {decision: allow}\n', `controls:\n  ${'x'.repeat(201)}: {title: t}\n`)).message).toMatch(/201 characters/);
    expect(() => loadPolicy(V4('  a: {decision: allow}\n', `controls:\n  ${'é'.repeat(200)}: {title: t}\n`))).not.toThrow();
    expect(refusal(V4('  a: {decision: allow}\n', 'controls:\n  "a\\nb": {title: t}\n')).message).toMatch(/control character/);
    expect(refusal(V4('  a: {decision: allow}\n', 'controls:\n  "a\\u200bb": {title: t}\n')).message).toMatch(/control character/);
    expect(refusal(V4('  a: {decision: allow}\n', 'controls: [x]\n')).message).toMatch(/'controls' must be a mapping/);
    // Citing needs a registry, so under v1–v3 a citation cannot resolve; an empty list is harmless.
    expect(refusal(V1('  a: {controls: [x], decision: allow}\n')).message).toMatch(/cites control 'x'.*none/);
    expect(() => loadPolicy(V1('  a: {controls: [], decision: allow}\n'))).not.toThrow();
    expect(refusal('schema: ctrlrun.policy/v3\ncontrols: {}\nactions: {}\n').message).toMatch(/'controls' needs 'schema: ctrlrun.policy\/v4'/);
  });
});

describe('mode, environment, version (§3.3)', () => {
  it('test_T84_mode_is_refused_anywhere_but_the_top_level', () => {
    const nested: [string, string][] = [
      ['schema: ctrlrun.policy/v3\nactions:\n  a: {mode: observe, decision: allow}\n', 'actions.a (line 3)'],
      ['schema: ctrlrun.policy/v3\nactions:\n  a:\n    rules:\n      - decision: allow\n        mode: observe\n', 'actions.a.rules[0] (line 6)'],
      ['schema: ctrlrun.policy/v3\nactions:\n  a: {mcp: {mode: observe}, decision: allow}\n', 'actions.a.mcp (line 3)'],
      ['schema: ctrlrun.policy/v3\nauthority:\n  mode: observe\n  grants: []\nactions: {}\n', 'authority (line 3)'],
      ['schema: ctrlrun.policy/v3\nauthority:\n  grants:\n    - {id: g, mode: observe}\nactions: {}\n', 'authority.grants[0] (line 4)'],
      ['schema: ctrlrun.policy/v4\ncontrols:\n  c: {title: t, mode: observe}\nactions: {}\n', "controls['c'] (line 3)"],
      // Checked before unknown keys, and in any schema: the message says why.
      ['schema: ctrlrun.policy/v1\nactions:\n  a: {decision: allow, mode: enforce, other: 1}\n', 'actions.a (line 3)'],
    ];
    for (const [yaml, where] of nested) {
      const err = refusal(yaml);
      expect(err.message, yaml).toContain(where);
      expect(err.message, yaml).toContain("'mode' is top level and nothing else");
    }
    // At the top level: exactly observe | enforce; YAML 1.1 `off`/`yes` are booleans and refused.
    for (const bad of ['off', 'on', 'yes', 'true', '0', '"off"', 'Observe', 'null', '""']) {
      const err = refusal(`schema: ctrlrun.policy/v3\nmode: ${bad}\nactions: {}\n`);
      expect(err.message, bad).toMatch(/'mode' must be exactly 'observe' or 'enforce'.*/);
      expect(err.message, bad).toContain('line 2');
    }
    expect(loadPolicy('schema: ctrlrun.policy/v3\nmode: observe\nactions: {}\n').mode).toBe('observe');
    expect(loadPolicy('schema: ctrlrun.policy/v3\nmode: enforce\nactions: {}\n').mode).toBe('enforce');
    expect(loadPolicy('schema: ctrlrun.policy/v3\nactions: {}\n').mode).toBe('enforce');
    expect(refusal('schema: ctrlrun.policy/v2\nmode: observe\nactions: {}\n').message).toMatch(
      /'mode' needs 'schema: ctrlrun.policy\/v3'; this document declares 'ctrlrun.policy\/v2'/,
    );
  });

  it('environment and version: as written, non-empty after trimming, gated by schema', () => {
    const p = loadPolicy('schema: ctrlrun.policy/v4\nversion: "2026.03-rc1"\nenvironment: " staging "\nactions: {}\n');
    expect(p.version).toBe('2026.03-rc1');
    expect(p.environment).toBe(' staging ');
    const none = loadPolicy('schema: ctrlrun.policy/v4\nactions: {}\n');
    expect(none.version).toBeNull();
    expect(none.environment).toBeNull();
    for (const bad of ['""', '"  "', '5', 'null', '[x]', '2026-01-01']) {
      expect(refusal(`schema: ctrlrun.policy/v4\nenvironment: ${bad}\nactions: {}\n`).message).toMatch(/'environment' must be a non-empty string.*/);
      expect(refusal(`schema: ctrlrun.policy/v4\nversion: ${bad}\nactions: {}\n`).message).toMatch(/'version' must be a non-empty string/);
    }
    expect(refusal('schema: ctrlrun.policy/v2\nenvironment: staging\nactions: {}\n').message).toMatch(/'environment' needs 'schema: ctrlrun.policy\/v3'/);
    expect(refusal('schema: ctrlrun.policy/v3\nversion: "1"\nactions: {}\n').message).toMatch(/'version' needs 'schema: ctrlrun.policy\/v4'/);
  });
});

describe('the policy hash (§3.6, 03 §6)', () => {
  const base = `schema: ctrlrun.policy/v4
version: "1.0"
controls:
  c1: {title: "One", source: "Book 1"}
actions:
  customer.read: {decision: allow}
  stripe.refund:
    effect: "refund:{payment_id}"
    resource: "payment:{payment_id}"
    data: {card: pci}
    mcp: {not_executed_on_error: false}
    controls: [c1]
    rules:
      - when: {amount_lte: 100, currency_in: [EUR, USD]}
        decision: allow
      - when: {amount_lte: 1000}
        decision: approve
      - decision: deny
`;
  const hashOf = (yaml: string): string => loadPolicy(yaml).policyHash;

  it('is sha256: + 64 hex, with the document environment else production', () => {
    const h = hashOf(base);
    expect(h).toMatch(/^sha256:[0-9a-f]{64}$/);
    const p = loadPolicy(base);
    expect(p.hashFor()).toBe(h);
    expect(p.hashFor({ environment: 'production', authority: null })).toBe(h);
    expect(p.hashFor({ environment: 'staging' })).not.toBe(h);
    const staged = loadPolicy(base.replace('version: "1.0"\n', 'version: "1.0"\nenvironment: staging\n'));
    expect(staged.policyHash).toBe(p.hashFor({ environment: 'staging' }));
    expect(staged.hashFor({ environment: 'production' })).toBe(h);
  });

  it('test_T171_any_decision_input_changes_the_hash', () => {
    const h = hashOf(base);
    const variants: [string, string][] = [
      ['a decision', base.replace('decision: approve', 'decision: deny')],
      ['a bare decision', base.replace('customer.read: {decision: allow}', 'customer.read: {decision: approve}')],
      ['an operand', base.replace('amount_lte: 100,', 'amount_lte: 101,')],
      ['an operand type', base.replace('amount_lte: 100,', 'amount_lte: 100, x_eq: "1",').replace('x_eq: "1"', 'x_eq: 1')],
      ['an operator', base.replace('amount_lte: 1000}', 'amount_lt: 1000}')],
      ['an in-list order', base.replace('[EUR, USD]', '[USD, EUR]')],
      [
        'rule order',
        base.replace(/( {6}- when: \{amount_lte: 100, .*\n {8}decision: allow\n)( {6}- when: \{amount_lte: 1000\}\n {8}decision: approve\n)/, '$2$1'),
      ],
      ['an action name', base.replace('customer.read', 'customer.get')],
      ['an added action', base.replace('actions:\n', 'actions:\n  x: {decision: deny}\n')],
      ['an effect template', base.replace('refund:{payment_id}', 'refund:{charge_id}')],
      ['a resource template', base.replace('payment:{payment_id}', 'pay:{payment_id}')],
      ['a data label', base.replace('card: pci', 'card: pii')],
      ['the mcp hint', base.replace('not_executed_on_error: false', 'not_executed_on_error: true')],
      ['a citation', base.replace('    controls: [c1]\n', '')],
      ['a registry title', base.replace('"One"', '"Uno"')],
      ['a registry source', base.replace('"Book 1"', '"Book 2"')],
      ['the environment', base.replace('version: "1.0"\n', 'version: "1.0"\nenvironment: staging\n')],
      ['the mode', base.replace('version: "1.0"\n', 'version: "1.0"\nmode: observe\n')],
    ];
    const seen = new Set([h]);
    for (const [what, yaml] of variants) {
      expect(yaml, what).not.toBe(base);
      const other = hashOf(yaml);
      expect(other, what).not.toBe(h);
      seen.add(other);
    }
    expect(seen.size).toBe(variants.length + 1);
    // Same decisions, other schema tag: still another hash.
    const v1 = 'schema: ctrlrun.policy/v1\nactions:\n  a: {decision: allow}\n';
    expect(hashOf(v1)).not.toBe(hashOf(v1.replace('v1', 'v2')));
    // An explicit `mode: enforce` is the default made explicit: the same decision inputs.
    expect(hashOf(base.replace('version: "1.0"\n', 'version: "1.0"\nmode: enforce\n'))).toBe(h);
  });

  it('test_T171_the_declared_version_alone_does_not_change_the_hash', () => {
    const h = hashOf(base);
    expect(hashOf(base.replace('version: "1.0"', 'version: "2.0"'))).toBe(h);
    expect(hashOf(base.replace('version: "1.0"\n', ''))).toBe(h);
    // Key order, comments, whitespace, flow vs block style, quoting: none of them move it.
    const restyled = `# a comment
actions:   # another
  stripe.refund:
    rules: [{decision: allow, when: {currency_in: ["EUR", 'USD'], amount_lte: 0x64}}, {decision: approve, when: {amount_lte: 1_000}},
            {decision: deny}]
    controls: ["c1"]
    mcp:
      not_executed_on_error: no
    data:
      card: 'pci'
    resource: payment:{payment_id}
    effect: 'refund:{payment_id}'


  customer.read:
      decision: "allow"
controls: {c1: {source: Book 1, title: One}}
version: "9.9"
schema: "ctrlrun.policy/v4"
`;
    expect(hashOf(restyled)).toBe(h);
    expect(loadPolicy(restyled, { source: 'elsewhere.yaml' }).policyHash).toBe(h);
  });

  it('test_T172_two_policies_sharing_a_version_string_are_told_apart_by_the_hash', () => {
    const a = loadPolicy(base);
    const b = loadPolicy(base.replace('amount_lte: 1000}', 'amount_lte: 100000}'));
    expect(a.version).toBe('1.0');
    expect(b.version).toBe(a.version);
    expect(b.policyHash).not.toBe(a.policyHash);
  });

  it('renders YAML dates as ISO in the hash, and refuses what it cannot encode', () => {
    // A date cannot be a decision input in v1–v4 documents except as data the hash writes; an
    // unquoted date where a string is required is refused, a quoted one is a string.
    expect(refusal(V1('  a:\n    rules:\n      - when: {day_eq: 2026-01-01}\n        decision: allow\n')).message).toMatch(/date is not an allowed operand/);
    const quoted = loadPolicy(V1('  a:\n    rules:\n      - when: {day_eq: "2026-01-01"}\n        decision: allow\n'));
    expect(quoted.evaluate('a', { day: '2026-01-01' }).decision).toBe('allow');
    expect(refusal(V1('  a: {decision: !!binary aGVsbG8=}\n')).message).toMatch(/decision must be one of/);
  });

  it("hashFor takes the Control's authority: null by default, a canonical authority otherwise", () => {
    const p = loadPolicy(base);
    const authority = {
      max_delegation_depth: 3,
      grants: {
        g1: {
          actions: ['stripe.*'],
          budgets: null,
          constraints: { amount_lte: { argument: 'amount', op: 'lte', operand: 500 } },
          delegable: false,
          environments: null,
          expires_at: null,
          resources: null,
          subject: { agent: 'refund-agent', user: null },
          tasks: null,
        },
      },
      break_glass: {},
    };
    const withAuthority = p.hashFor({ authority });
    expect(withAuthority).not.toBe(p.policyHash);
    expect(p.hashFor({ authority: { canonical: () => authority } })).toBe(withAuthority);
    expect(p.hashFor({ authority: { ...authority, max_delegation_depth: 2 } })).not.toBe(withAuthority);
    expect(p.authority).toBeNull();
    expect(() => p.hashFor({ authority: { grants: {} } })).toThrow(InvalidArgument);
    // The 0.6 shape (no break_glass) is not a canonical authority any more: one authority, one hash.
    expect(() => p.hashFor({ authority: { max_delegation_depth: 3, grants: {} } })).toThrow(InvalidArgument);
    expect(() => p.hashFor({ authority: 'grants' })).toThrow(InvalidArgument);
    expect(() => p.hashFor({ environment: ' ' })).toThrow(InvalidArgument);
  });

  it('loadPolicyDocument reads a parsed document to the same policy and hash', () => {
    const doc = {
      schema: 'ctrlrun.policy/v4',
      version: '1.0',
      controls: { c1: { title: 'One', source: 'Book 1' } },
      actions: {
        'customer.read': { decision: 'allow' },
        'stripe.refund': {
          effect: 'refund:{payment_id}',
          resource: 'payment:{payment_id}',
          data: { card: 'pci' },
          mcp: { not_executed_on_error: false },
          controls: ['c1'],
          rules: [
            { when: { amount_lte: 100, currency_in: ['EUR', 'USD'] }, decision: 'allow' },
            { when: { amount_lte: 1000n }, decision: 'approve' },
            { decision: 'deny' },
          ],
        },
      },
    };
    expect(loadPolicyDocument(doc).policyHash).toBe(hashOf(base));
    expect(() => loadPolicyDocument({ ...doc, actions: { a: { rules: [{ when: { x_lte: 1.5 }, decision: 'allow' }] } } })).toThrow(PolicyError);
    expect(() => loadPolicyDocument([doc])).toThrow(PolicyError);
  });
});

describe('loading (§3.1–§3.3)', () => {
  it('test_malformed_policy_document_is_a_policy_error', () => {
    const cases: [string, string, RegExp][] = [
      ['bad YAML', 'schema: ctrlrun.policy/v1\nactions: [\n', /line \d+.*not valid YAML/],
      ['duplicate action', V1('  a: {decision: allow}\n  a: {decision: deny}\n'), /actions \(line 4\): duplicate key 'a'/],
      [
        'duplicate condition',
        V1('  a:\n    rules:\n      - when: {x_eq: 1, x_eq: 2}\n        decision: allow\n'),
        /actions\.a\.rules\[0\]\.when \(line 5\): duplicate key 'x_eq'/,
      ],
      ['duplicate top key', 'schema: ctrlrun.policy/v1\nactions: {}\nschema: ctrlrun.policy/v2\n', /top level \(line 3\): duplicate key 'schema'/],
      ['unknown top key', 'schema: ctrlrun.policy/v1\naction: {}\nactions: {}\n', /top level \(line 2\): unknown key\(s\) 'action'/],
      ['unknown entry key', V1('  a:\n    decison: allow\n'), /actions\.a \(line 4\): unknown key\(s\) 'decison'/],
      [
        'unknown rule key',
        V1('  a:\n    rules:\n      - whn: {x_eq: 1}\n        decision: allow\n'),
        /actions\.a\.rules\[0\] \(line 5\): unknown key\(s\) 'whn'/,
      ],
      [
        'unknown mcp key',
        'schema: ctrlrun.policy/v2\nactions:\n  a:\n    mcp: {retry: true}\n    decision: allow\n',
        /actions\.a\.mcp \(line 4\): unknown key\(s\) 'retry'/,
      ],
      ['wrong type: actions', 'schema: ctrlrun.policy/v1\nactions: [a]\n', /actions \(line 2\): 'actions' must be a mapping/],
      ['wrong type: entry', V1('  a: allow\n'), /actions\.a \(line 3\): entry must be a mapping/],
      ['wrong type: rules', V1('  a: {rules: {decision: allow}}\n'), /actions\.a \(line 3\): 'rules' must be a non-empty list/],
      ['wrong type: decision', V1('  a: {decision: 1}\n'), /actions\.a \(line 3\): decision must be one of allow, approve, deny, got integer/],
      [
        'wrong type: mcp hint',
        'schema: ctrlrun.policy/v2\nactions:\n  a:\n    mcp: {not_executed_on_error: 1}\n    decision: allow\n',
        /not_executed_on_error' must be true or false, got integer/,
      ],
      [
        'wrong type: effect',
        'schema: ctrlrun.policy/v2\nactions:\n  a:\n    effect: 5\n    decision: allow\n',
        /actions\.a \(line 4\): 'effect' must be a template string/,
      ],
      [
        'float',
        V1('  a:\n    rules:\n      - when: {amount_lte: 20.0}\n        decision: allow\n'),
        /actions\.a\.rules\[0\]\.when \(line 5\): condition 'amount_lte': a numeric operator needs an integer operand, got float/,
      ],
      [
        'reserved argument',
        V1('  a:\n    rules:\n      - when: {principal_eq: x}\n        decision: allow\n'),
        /actions\.a\.rules\[0\]\.when \(line 5\): condition 'principal_eq' names the Action field 'principal'/,
      ],
      ['not a mapping', '- schema: ctrlrun.policy/v1\n', /policy must be a mapping/],
      ['empty document', '', /policy must be a mapping/],
      ['schema absent', 'actions: {}\n', /unknown policy schema \(absent\)/],
      ['schema unknown', 'schema: ctrlrun.policy/v9\nactions: {}\n', /unknown policy schema 'ctrlrun.policy\/v9'/],
      ['schema from a later release', 'schema: ctrlrun.policy/v10\nactions: {}\n', /unknown policy schema 'ctrlrun.policy\/v10'/],
      ['schema not a string', 'schema: 1\nactions: {}\n', /unknown policy schema integer/],
      ['actions absent', 'schema: ctrlrun.policy/v1\n', /'actions' must be a mapping/],
      ['both decision and rules', V1('  a: {decision: allow, rules: [{decision: deny}]}\n'), /exactly one of 'decision' or 'rules'/],
      ['neither', V1('  a: {}\n'), /exactly one of 'decision' or 'rules'/],
      ['empty rules', V1('  a: {rules: []}\n'), /'rules' must be a non-empty list, got an empty list/],
      ['rule without decision', V1('  a: {rules: [{when: {x_eq: 1}}]}\n'), /rules\[0\].*a rule must have a 'decision'/],
      ['unknown decision', V1('  a: {decision: permit}\n'), /unknown decision 'permit'/],
      ['when: {}', V1('  a: {rules: [{when: {}, decision: allow}]}\n'), /'when' must be a non-empty mapping of conditions, got an empty mapping/],
      ['when: null', V1('  a: {rules: [{when: null, decision: allow}]}\n'), /'when' must be a non-empty mapping of conditions, got null/],
      ['empty action name', V1('  "": {decision: allow}\n'), /action names must be non-empty strings/],
      ['non-string action name', V1('  1: {decision: allow}\n'), /action names must be non-empty strings, got 1/],
      [
        'v2 key under v1',
        V1('  a: {effect: "x:{y}", resource: "r", decision: allow}\n'),
        /'effect', 'resource' needs 'schema: ctrlrun.policy\/v2'; this document declares 'ctrlrun.policy\/v1'/,
      ],
      [
        'malformed effect template',
        'schema: ctrlrun.policy/v2\nactions:\n  a: {effect: "refund:{payment_id", decision: allow}\n',
        /actions\.a \(line 3\): 'effect':.*found '\{' at position 7/,
      ],
      ['authority at v2', 'schema: ctrlrun.policy/v2\nauthority: {grants: []}\nactions: {}\n', /'authority' needs 'schema: ctrlrun.policy\/v3'/],
      [
        'authority without grants',
        'schema: ctrlrun.policy/v3\nauthority: {max_delegation_depth: 1}\nactions: {}\n',
        /authority \(line 2\): 'grants' must be a list, got nothing/,
      ],
      ['a merge key', 'schema: ctrlrun.policy/v1\nbase: &b {decision: allow}\nactions:\n  a:\n    <<: *b\n', /actions\.a \(line 5\): merge keys/],
      ['a control character', 'schema: ctrlrun.policy/v1\nactions: {}\n\u0007\n', /line 3: unacceptable character U\+0007/],
    ];
    for (const [what, yaml, pattern] of cases) {
      const err = refusal(yaml);
      expect(err.message, what).toMatch(pattern);
      expect(err.message.startsWith('<string>: '), what).toBe(true);
    }
  });

  it('names the source it was given', () => {
    expect(() => loadPolicy('actions: {}\n', { source: 'ctrlrun.yaml' })).toThrow(/^ctrlrun\.yaml: /);
    expect(() => loadPolicy(42 as unknown as string)).toThrow(PolicyError);
  });

  it('actions: {} is a valid policy that denies everything', () => {
    const p = loadPolicy('schema: ctrlrun.policy/v1\nactions: {}\n');
    expect(p.actionNames).toEqual([]);
    expect(p.evaluate('anything', {}).reason).toBe('unknown_action');
  });

  it('exposes the entry a Control needs', () => {
    const p: Policy = loadPolicy(`schema: ctrlrun.policy/v4
actions:
  tool.call:
    effect: "call:{resource}:{id}"
    resource: "tool:{name}"
    mcp: {not_executed_on_error: yes}
    data: {ssn: pii}
    decision: allow
`);
    expect(p.action('tool.call')).toEqual({
      name: 'tool.call',
      effect: 'call:{resource}:{id}',
      resource: 'tool:{name}',
      data: { ssn: 'pii' },
      notExecutedOnError: true,
      maxAttempts: null,
      approvalsRequired: 1,
      upstream: null,
    });
    expect(Object.isFrozen(p.action('tool.call'))).toBe(true);
    expect(Object.isFrozen(p)).toBe(true);
  });
});
