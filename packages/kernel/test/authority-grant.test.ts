// Grants and patterns (spec 02 §2.1–§2.4, §3.3 patterns): the loader's refusals, the
// constructor refusing exactly what the loader refuses, the standalone and `--file` documents,
// `grant_json`, and the pattern grammar, matching and containment (with properties).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Authority, Grant, InvalidArgument, PolicyError, loadAuthority, loadGrant, loadPolicy } from '@ctrlrun/kernel';
import { grantFromJson, grantToJson } from '@ctrlrun/kernel/store';
import { matchesPattern, patternContains, patternError } from '../src/authority/patterns.js';
import { parseInstant } from '../src/authority/grant.js';
import { ACTIONS, GRANT, V3, doc } from './authority.fixtures.js';
import { refusal as policyError } from './policy.fixtures.js';

const G = (extra: string) => `authority:\n  grants:\n    - id: g\n      subject: { agent: "a" }\n      actions: ["**"]\n${extra}`;

describe('T73: a malformed authority section fails at load, naming where', () => {
  const malformed: Record<string, [string, RegExp]> = {
    'no-grants': ['authority:\n  max_delegation_depth: 3\n', /'grants' must be a list/],
    'grants-not-a-list': ['authority:\n  grants: { id: "g" }\n', /'grants' must be a list, got mapping/],
    'grants-null': ['authority:\n  grants:\n', /'grants' must be a list, got null/],
    'no-subject': ['authority:\n  grants:\n    - id: g\n      actions: ["**"]\n', /'subject' must be a mapping/],
    'empty-subject': ['authority:\n  grants:\n    - id: g\n      subject: {}\n      actions: ["**"]\n', /subject addressed to every principal/],
    'no-actions': ['authority:\n  grants:\n    - id: g\n      subject: { agent: "a" }\n', /'actions' must be a non-empty list/],
    'empty-actions': ['authority:\n  grants:\n    - id: g\n      subject: { agent: "a" }\n      actions: []\n', /'actions' must be a non-empty list/],
    'unknown-top-key': ['authority:\n  depth: 3\n  grants: []\n', /unknown key\(s\) 'depth'/],
    'unknown-grant-key': [G('      action: ["**"]\n'), /unknown key\(s\) 'action'/],
    'unknown-subject-key': [
      'authority:\n  grants:\n    - id: g\n      subject: { agent: "a", group: "g" }\n      actions: ["**"]\n',
      /subject.*unknown key\(s\) 'group'/,
    ],
    'a-decision-key': [G('      decision: allow\n'), /a grant carries no 'decision'/],
    'duplicate-id': [
      'authority:\n  grants:\n    - id: g\n      subject: { agent: "a" }\n      actions: ["**"]\n    - id: g\n      subject: { agent: "b" }\n      actions: ["**"]\n',
      /duplicate grant id "g"/,
    ],
    'dlg-prefixed-id': ['authority:\n  grants:\n    - id: dlg_abc\n      subject: { agent: "a" }\n      actions: ["**"]\n', /may not begin 'dlg_'/],
    'id-charset': ['authority:\n  grants:\n    - id: "-leading"\n      subject: { agent: "a" }\n      actions: ["**"]\n', /must match/],
    'expiry-not-a-timestamp': [G('      expires_at: 12345\n'), /'expires_at' must be an ISO-8601 timestamp with an offset, got integer/],
    'naive-expiry': [G('      expires_at: 2026-12-31 23:59:59\n'), /no offset/],
    'naive-expiry-string': [G('      expires_at: "2026-12-31T23:59:59"\n'), /no offset/],
    'date-only-expiry': [G('      expires_at: 2026-12-31\n'), /offset/],
    'empty-constraints': [G('      constraints: {}\n'), /'constraints' must be a non-empty mapping/],
    'null-constraints': [G('      constraints:\n'), /'constraints' must be a non-empty mapping/],
    'reserved-constraint': [G('      constraints: { agent_eq: a }\n'), /names the Action field 'agent'.*rename/],
    'derived-constraint': [G('      constraints: { data_scope_in: [pii] }\n'), /a grant may not/],
    'float-operand': [G('      constraints: { amount_lte: 20.0 }\n'), /integer/],
    'negative-depth': ['authority:\n  max_delegation_depth: -1\n  grants: []\n', /'max_delegation_depth' must be a non-negative integer/],
    'boolean-depth': ['authority:\n  max_delegation_depth: yes\n  grants: []\n', /'max_delegation_depth' must be a non-negative integer, got boolean/],
    'empty-environments': [G('      environments: []\n'), /'environments' must be a non-empty list/],
    'empty-resources': [G('      resources: []\n'), /'resources' must be a non-empty list/],
    'resources-null': [G('      resources:\n'), /'resources' must be a non-empty list of patterns, got null/],
    'delegable-without-expiry': [G('      delegable: true\n'), /'delegable: true' must declare 'expires_at'/],
    'delegable-not-boolean': [G('      delegable: "true"\n'), /'delegable' must be true or false/],
    'mode-in-a-grant': [G('      mode: observe\n'), /'mode' is top level/],
    'subject-deep-wildcard': ['authority:\n  grants:\n    - id: g\n      subject: { agent: "**" }\n      actions: ["**"]\n', /may not use '\*\*'/],
  };
  for (const [id, [section, message]] of Object.entries(malformed)) {
    it(`test_T73_a_malformed_authority_section_fails_at_load (${id})`, () => {
      const err = policyError(doc(section));
      expect(err.message).toMatch(message);
      expect(err.message).toMatch(/^<string>: authority/);
    });
  }

  it('test_T73_authority_in_a_v1_document_names_the_schema', () => {
    const v1 = `schema: ctrlrun.policy/v1\n${GRANT}${ACTIONS}`;
    expect(policyError(v1).message).toMatch(/'authority' needs 'schema: ctrlrun.policy\/v3'/);
    expect(() => loadAuthority(`schema: ctrlrun.policy/v2\n${GRANT}`)).toThrow(/ctrlrun\.policy\/v3/);
  });

  it('test_T73_a_standalone_document_refuses_actions_and_mode', () => {
    expect(loadAuthority(V3 + GRANT).grants.has('head-of-support')).toBe(true);
    expect(() => loadAuthority(doc(GRANT))).toThrow(/'actions' belongs in the policy document/);
    expect(() => loadAuthority(`${V3}${GRANT}mode: observe\n`)).toThrow(/'mode' belongs in the policy document/);
    expect(() => loadAuthority(`${V3}${GRANT}extra: 1\n`)).toThrow(/unknown key\(s\) 'extra'/);
    expect(() => loadAuthority(V3)).toThrow(/no 'authority:' section/);
    expect(() => loadAuthority('schema: nope\nauthority: {grants: []}\n')).toThrow(/unknown policy schema/);
  });

  it('test_T74b_a_reserved_name_in_a_grant_constraint_is_a_load_error', () => {
    for (const key of ['claims_eq', 'issuer_eq', 'expires_at_gt']) {
      const operand = key.endsWith('_gt') ? '1' : 'x';
      expect(policyError(doc(G(`      constraints: { ${key}: ${operand} }\n`))).message).toMatch(/rename/);
    }
  });

  it('test_T74b_a_reserved_name_in_a_policy_rule_is_a_load_error', () => {
    for (const schema of ['ctrlrun.policy/v1', 'ctrlrun.policy/v3']) {
      for (const key of ['claims_eq', 'issuer_eq', 'expires_at_gt']) {
        const operand = key.endsWith('_gt') ? '1' : 'x';
        const text = `schema: ${schema}\nactions:\n  stripe.refund:\n    rules:\n      - when: { ${key}: ${operand} }\n        decision: allow\n`;
        expect(policyError(text).message).toMatch(/rename/);
      }
    }
  });

  it('test_T69b_a_decimal_string_operand_is_a_load_error_naming_the_rule', () => {
    const err = policyError(doc(G('      constraints: { amount_lte: "2000.00" }\n')));
    expect(err.message).toMatch(/authority\.grants\[0\]/);
    expect(err.message).toMatch(/integer/);
    expect(err.message).toMatch(/minor units/);
  });

  it('a well-formed section loads, with its depth and canonical grants in the hash', () => {
    const p = loadPolicy(
      doc(
        `authority:\n  max_delegation_depth: 1\n  grants:\n    - id: g\n      subject: { agent: "a" }\n      actions: ["stripe.*"]\n      constraints: { amount_lte: 5, currency_in: [EUR] }\n      expires_at: 2026-12-31T23:59:59+05:30\n      delegable: true\n`,
      ),
    );
    expect(p.authority!.maxDelegationDepth).toBe(1);
    // The original 0.12.2's canonical authority (spec 05 §3.4): tasks and budgets null when
    // absent, and break_glass {} when the section declares none.
    expect(p.authority!.canonical()).toEqual({
      max_delegation_depth: 1,
      grants: {
        g: {
          actions: ['stripe.*'],
          budgets: null,
          constraints: { amount_lte: { argument: 'amount', op: 'lte', operand: 5 }, currency_in: { argument: 'currency', op: 'in', operand: ['EUR'] } },
          delegable: true,
          environments: null,
          expires_at: '2026-12-31T23:59:59+05:30',
          resources: null,
          subject: { agent: 'a', user: null },
          tasks: null,
        },
      },
      break_glass: {},
    });
    expect(p.policyHash).toBe(p.hashFor({ authority: p.authority }));
  });
});

describe('T73b: the Grant constructor refuses exactly what the loader refuses', () => {
  const base = { id: 'g', subject: { agent: 'a' }, actions: ['stripe.refund'] };
  const refusals: [string, Record<string, unknown>, RegExp][] = [
    ['wildcard-before-deep', { actions: ['stripe.a*.**'] }, /wildcard before '\*\*'/],
    ['deep-inside-a-segment', { actions: ['**a'] }, /neither a literal/],
    ['no-actions', { actions: [] }, /non-empty list/],
    ['resource-wildcard-before-deep', { resources: ['payment:*:**'] }, /wildcard before/],
    ['no-resources', { resources: [] }, /non-empty list/],
    ['naive-expiry', { expiresAt: '2026-12-31T23:59:59' }, /no offset/],
    ['a-date-string-only', { expiresAt: '2026-12-31' }, /offset/],
    ['delegable-without-expiry', { delegable: true }, /must declare 'expiresAt'/],
    ['no-environments', { environments: [] }, /non-empty list/],
    ['an-unknown-key', { action: ['x'] }, /unknown key\(s\) 'action'/],
    ['a-decision', { decision: 'allow' }, /no 'decision'/],
    ['a-snake-case-expiry', { expires_at: '2026-12-31T00:00:00Z' }, /unknown key\(s\) 'expires_at'/],
    ['a-reserved-argument', { constraints: { user_eq: 'x' } }, /rename/],
    ['a-float-operand', { constraints: { amount_lte: 1.5 } }, /float/],
    ['a-key-with-no-operator', { constraints: { amount: 5 } }, /'<argument>_<op>'/],
    ['a-bad-id', { id: 'a b' }, /must match/],
    ['a-non-boolean-delegable', { delegable: 'yes' }, /true or false/],
  ];
  for (const [id, change, message] of refusals) {
    it(`test_T73b_grant_refuses_what_the_loader_refuses (${id})`, () => {
      expect(() => new Grant({ ...base, ...change } as never)).toThrow(InvalidArgument);
      expect(() => new Grant({ ...base, ...change } as never)).toThrow(message);
    });
  }

  it('test_T73b_a_subject_addressed_to_every_principal_is_refused', () => {
    expect(() => new Grant({ ...base, subject: {} })).toThrow(/subject addressed to every principal/);
    expect(() => new Grant({ ...base, subject: { agent: null, user: null } })).toThrow(InvalidArgument);
    expect(() => new Grant({ ...base, subject: { agent: '**' } })).toThrow(InvalidArgument);
  });

  it('test_T73b_a_well_formed_grant_is_accepted', () => {
    const g = new Grant({
      id: 'g',
      subject: { agent: 'a', user: 'alice@example.com' },
      actions: ['stripe.refund'],
      resources: ['payment:EU-*'],
      constraints: { amount_lte: 10 },
      environments: ['production'],
      expiresAt: new Date('2026-12-31T00:00:00Z'),
      delegable: true,
    });
    expect(g.actions).toEqual(['stripe.refund']);
    expect(g.expiresAt).toBe('2026-12-31T00:00:00+00:00');
    expect(g.delegable).toBe(true);
    expect(Object.isFrozen(g)).toBe(true);
    // Loader and constructor agree on the result, not only on the refusals.
    const loaded = loadPolicy(
      doc(
        'authority:\n  grants:\n    - id: g\n      subject: { agent: a, user: alice@example.com }\n      actions: [stripe.refund]\n      resources: ["payment:EU-*"]\n      constraints: { amount_lte: 10 }\n      environments: [production]\n      expires_at: 2026-12-31T00:00:00Z\n      delegable: true\n',
      ),
    ).authority!.grants.get('g')!;
    expect(loaded.canonical()).toEqual(g.canonical());
    expect(new Grant(g.toInput()).canonical()).toEqual(g.canonical());
  });

  it('an Authority refuses unassigned, dlg_ and duplicate root ids', () => {
    const unassigned = new Grant({ subject: { agent: 'a' }, actions: ['x'] });
    expect(unassigned.id).toBe('');
    expect(() => new Authority([unassigned])).toThrow(/root grant needs an id/);
    expect(() => new Authority([new Grant({ ...base, id: `dlg_${'0'.repeat(32)}` })])).toThrow(/dlg_/);
    expect(() => new Authority([new Grant(base), new Grant(base)])).toThrow(/duplicate/);
    expect(() => new Authority([], { maxDelegationDepth: -1 })).toThrow(InvalidArgument);
  });
});

describe('loadGrant (ctrlrun delegate --file) and grant_json', () => {
  it('a --file grant has the grant keys minus id', () => {
    const g = loadGrant('subject: { agent: support-agent }\nactions: [stripe.refund]\nconstraints: { amount_lte: 5 }\n');
    expect(g.id).toBe('');
    expect(() => loadGrant('id: x\nsubject: { agent: a }\nactions: [a]\n', { source: 'grant.yaml' })).toThrow(/^grant\.yaml: grant.*may not carry 'id'/);
    expect(() => loadGrant('- a\n')).toThrow(PolicyError);
    expect(() => loadGrant('subject: { agent: a }\nactions: [a]\ndecision: allow\n')).toThrow(/no 'decision'/);
  });

  it('grant_json is compact, sorted, and keeps the expiry offset (spec 02 §3.1)', () => {
    const g = new Grant({
      subject: { agent: 'support-agent', user: 'alice' },
      actions: ['stripe.refund'],
      constraints: { amount_lte: 200000, region_in: ['EU'] },
      expiresAt: '2026-09-03T15:42:01+05:30',
      delegable: true,
    });
    const text = grantToJson(g);
    expect(text).toBe(
      '{"actions":["stripe.refund"],"budgets":null,"constraints":{"amount_lte":200000,"region_in":["EU"]},"delegable":true,"environments":null,"expires_at":"2026-09-03T15:42:01+05:30","resources":null,"subject":{"agent":"support-agent","user":"alice"},"tasks":null}',
    );
    const back = grantFromJson(text, `dlg_${'a'.repeat(32)}`);
    expect(back.id).toBe(`dlg_${'a'.repeat(32)}`);
    expect(back.expiresAt).toBe('2026-09-03T15:42:01+05:30');
    expect(back.canonical()).toEqual(g.canonical());
    expect(grantToJson(back)).toBe(text);
  });

  it('a stored grant is re-validated as a loaded one', () => {
    const ok = JSON.parse(grantToJson(new Grant({ subject: { agent: 'a' }, actions: ['x'] }))) as Record<string, unknown>;
    const bad = (change: Record<string, unknown>) => () => grantFromJson(JSON.stringify({ ...ok, ...change }), 'dlg_x');
    expect(bad({})).not.toThrow();
    expect(bad({ actions: 'stripe.refund' })).toThrow(/'actions' must be a non-empty list/);
    expect(bad({ actions: ['a**'] })).toThrow(/neither a literal/);
    expect(bad({ id: 'x' })).toThrow(/may not carry 'id'/);
    expect(bad({ decision: 'allow' })).toThrow(/no 'decision'/);
    expect(bad({ expires_at: '2026-01-01T00:00:00' })).toThrow(/no offset/);
    expect(bad({ delegable: true })).toThrow(/must declare/);
    expect(() => grantFromJson('{"actions":["x"],"constraints":{"n_lte":1.5},"subject":{"agent":"a"}}', 'dlg_x')).toThrow();
    expect(() => grantFromJson('[1]', 'dlg_x')).toThrow(/not an object/);
  });

  it('parseInstant needs an offset and keeps it', () => {
    expect(parseInstant('2026-09-03T10:12:01Z')).toEqual({ iso: '2026-09-03T10:12:01+00:00', micros: 1788430321000000n });
    expect(parseInstant('2026-09-03T12:12:01.5+02:00')).toEqual({ iso: '2026-09-03T12:12:01.500000+02:00', micros: 1788430321500000n });
    expect(parseInstant('2026-09-03T10:12:01.1234567-00:30')).toMatchObject({ iso: '2026-09-03T10:12:01.123456-00:30' });
    for (const bad of ['2026-09-03T10:12:01', '2026-09-03', '2026-02-30T00:00:00Z', '2026-09-03T24:00:00Z', '2026-09-03T10:12:01+24:00', 'soon']) {
      expect(typeof parseInstant(bad), bad).toBe('string');
    }
  });
});

describe('T72: patterns do not cross a separator', () => {
  const actions: [string, string, boolean][] = [
    ['stripe.*', 'stripe.refund', true],
    ['stripe.*', 'stripe.refund.partial', false],
    ['stripe.*', 'stripe', false],
    ['stripe.**', 'stripe.refund', true],
    ['stripe.**', 'stripe.refund.partial', true],
    ['stripe.**', 'stripe', false],
    ['stripe.**', 'stripes.refund', false],
    ['*', 'refund', true],
    ['*', 'stripe.refund', false],
    ['**', 'refund', true],
    ['**', 'stripe.refund.partial', true],
    ['stripe.refund', 'stripe.refund', true],
    ['stripe.refund', 'stripe.refunded', false],
    ['Stripe.refund', 'stripe.refund', false],
  ];
  it('test_T72_action_patterns', () => {
    for (const [p, v, want] of actions) expect(matchesPattern(p, v, '.'), `${p} ~ ${v}`).toBe(want);
  });

  it('test_T72_resource_patterns', () => {
    const resources: [string, string, boolean][] = [
      ['payment:EU-*', 'payment:EU-42', true],
      ['payment:EU-*', 'payment:EU-42:leg2', false],
      ['payment:EU-*', 'payment:US-42', false],
      ['payment:*', 'payment:EU-42', true],
      ['payment:**', 'payment:EU-42:leg2', true],
      ['**', 'payment:EU-42', true],
    ];
    for (const [p, v, want] of resources) expect(matchesPattern(p, v, ':'), `${p} ~ ${v}`).toBe(want);
  });

  it('test_T72_a_pattern_outside_the_grammar_is_a_load_error', () => {
    for (const p of [
      'stripe.?efund',
      'stripe.[abc]',
      'stripe.*refund',
      'stri*pe.refund',
      'a**',
      '**a',
      '**.refund',
      'stripe.a*.**',
      '*.**',
      '',
      'stripe.',
      '.refund',
      'stripe..refund',
      '**.**',
    ]) {
      expect(patternError(p, '.'), p).not.toBeNull();
      expect(() => loadPolicy(doc(`authority:\n  grants:\n    - id: g\n      subject: { agent: "a" }\n      actions: ["${p}"]\n`)), p).toThrow(PolicyError);
    }
    for (const p of ['stripe.refund', 'stripe.*', 'stripe.ref*', 'stripe.**', '**', '*']) expect(patternError(p, '.'), p).toBeNull();
  });

  it('test_T72b_every_well_formed_pattern_contains_itself', () => {
    for (const p of ['stripe.refund', 'stripe.*', 'stripe.**', '**', '*', 'stripe.refund.partial']) expect(patternContains(p, p, '.')).toBe(true);
  });

  it('test_T72b_action_containment', () => {
    const cases: [string, string, boolean][] = [
      ['stripe.*', 'stripe.refund', true],
      ['stripe.*', 'stripe.ref*', true],
      ['stripe.ref*', 'stripe.*', false],
      ['stripe.ref*', 'stripe.refund', true],
      ['stripe.**', 'stripe.*', true],
      ['stripe.**', 'stripe.refund', true],
      ['**', 'stripe.**', true],
      ['**', 'stripe.refund.partial', true],
      ['stripe.refund', 'stripe.*', false],
      ['stripe.*', 'stripe.refund.partial', false],
      ['stripe.**', 'stripe', false],
      ['stripe.*', 'stripe.**', false],
      ['stripe.refund', 'stripe.refunded', false],
    ];
    for (const [p, c, want] of cases) expect(patternContains(p, c, '.'), `${c} ⊆ ${p}`).toBe(want);
  });

  it('test_T72b_resource_containment', () => {
    const cases: [string, string, boolean][] = [
      ['payment:EU-*', 'payment:EU-42', true],
      ['payment:*', 'payment:EU-*', true],
      ['payment:EU-4*', 'payment:EU-*', false],
      ['payment:EU-42', 'payment:EU-*', false],
      ['payment:*', 'payment:EU-42:leg2', false],
    ];
    for (const [p, c, want] of cases) expect(patternContains(p, c, ':'), `${c} ⊆ ${p}`).toBe(want);
  });

  it('test_T72b_containment_is_not_matching', () => {
    expect(matchesPattern('stripe.**', 'stripe.refund', '.')).toBe(true);
    expect(patternContains('stripe.refund', 'stripe.**', '.')).toBe(false);
    expect(matchesPattern('stripe.*', 'stripe.refund', '.')).toBe(true);
    expect(patternContains('stripe.refund', 'stripe.*', '.')).toBe(false);
  });
});

describe('pattern properties', () => {
  // A small alphabet so that random patterns and values actually meet.
  const literal = fc.constantFrom('a', 'ab', 'b', 'ba', 'abc');
  const segment = fc.oneof(
    literal,
    literal.map((l) => `${l}*`),
    fc.constant('*'),
  );
  const pattern = fc.oneof(
    fc.array(segment, { minLength: 1, maxLength: 3 }).map((s) => s.join('.')),
    fc.array(literal, { minLength: 0, maxLength: 2 }).map((s) => [...s, '**'].join('.')),
  );
  const value = fc.array(fc.constantFrom('a', 'ab', 'abc', 'b', 'ba', 'bab'), { minLength: 1, maxLength: 4 }).map((s) => s.join('.'));

  it('every generated pattern is in the grammar and contains itself', () => {
    fc.assert(fc.property(pattern, (p) => patternError(p, '.') === null && patternContains(p, p, '.')));
  });

  it('containment is sound: whatever the child matches, the parent matches', () => {
    fc.assert(
      fc.property(pattern, pattern, fc.array(value, { minLength: 1, maxLength: 8 }), (parent, child, values) => {
        if (!patternContains(parent, child, '.')) return true;
        return values.every((v) => !matchesPattern(child, v, '.') || matchesPattern(parent, v, '.'));
      }),
      { numRuns: 2000 },
    );
  });

  it('the grammar never throws on arbitrary text, and the constructor refuses only with InvalidArgument', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 12 }), fc.anything(), (text, junk) => {
        const e = patternError(text, '.');
        if (e !== null && typeof e !== 'string') return false;
        try {
          new Grant({ subject: { agent: text }, actions: [text], constraints: junk as never });
        } catch (err) {
          return err instanceof InvalidArgument;
        }
        return true;
      }),
      { numRuns: 500 },
    );
  });
});

describe('finding 21: what a grant constraint compares', () => {
  const grant = (constraints: Record<string, unknown>) => new Grant({ id: 'g', subject: { agent: 'a' }, actions: ['pay'], constraints });
  const check = (g: Grant, args: Record<string, unknown>): [boolean, string[]] => {
    const warnings: string[] = [];
    return [g.constraintsHold(args, warnings), warnings];
  };

  it('_neq against a string fails closed: another type, case, spacing, width or invisible characters do not get past it', () => {
    const g = grant({ account_neq: 'treasury' });
    expect(check(g, { account: 'savings' })).toEqual([true, []]);
    expect(check(g, { account: 'treasury' })).toEqual([false, []]);
    // Each of these passed before: exact, type-strict inequality held.
    for (const variant of [
      'Treasury',
      'treasury ',
      ' TREASURY',
      'tre\u200basury',
      '\uff54\uff52\uff45\uff41\uff53\uff55\uff52\uff59',
      'treasury\t',
      'treas\u034fury',
      'treasury\ufe0f',
      'trea\u3164sury',
    ]) {
      const [holds, warnings] = check(g, { account: variant });
      expect(holds, JSON.stringify(variant)).toBe(false);
      expect(warnings.join(' ')).toMatch(/excluded value but for case, spacing, width or invisible characters/);
    }
    for (const other of [['treasury'], { name: 'treasury' }, 5, true, null]) {
      const [holds, warnings] = check(g, { account: other });
      expect(holds, JSON.stringify(other)).toBe(false);
      expect(warnings.join(' ')).toMatch(/a grant's _neq holds only for a string \(fail closed\)/);
    }
    const [holds, warnings] = check(g, {});
    expect(holds).toBe(false);
    expect(warnings.join(' ')).toMatch(/has no argument 'account'/);
  });

  it('_neq against an integer, a list or null compares within its kind', () => {
    expect(check(grant({ n_neq: 0 }), { n: 1 })[0]).toBe(true);
    expect(check(grant({ n_neq: 0 }), { n: 0n })[0]).toBe(false);
    expect(check(grant({ n_neq: 0 }), { n: '1' })[0]).toBe(false);
    expect(check(grant({ n_neq: 0 }), { n: 1.5 })[0]).toBe(false);
    expect(check(grant({ tags_neq: ['a', 'b'] }), { tags: ['A', 'b '] })[0]).toBe(false);
    expect(check(grant({ tags_neq: ['a', 'b'] }), { tags: ['a', 'c'] })[0]).toBe(true);
    expect(check(grant({ x_neq: null }), { x: 'anything' })[0]).toBe(true);
    expect(check(grant({ x_neq: null }), { x: null })[0]).toBe(false);
  });

  it('_eq and _in stay exact and type-strict: an allow-list admits only what it lists', () => {
    const eq = grant({ account_eq: 'ops' });
    expect(check(eq, { account: 'ops' })[0]).toBe(true);
    for (const v of ['OPS', 'ops ', ['ops']]) expect(check(eq, { account: v })[0], JSON.stringify(v)).toBe(false);
    const inn = grant({ currency_in: ['EUR', 'USD'] });
    expect(check(inn, { currency: 'EUR' })[0]).toBe(true);
    expect(check(inn, { currency: 'eur' })[0]).toBe(false);
  });

  it("a loaded grant compares the same way, and a policy rule keeps the reference's exact _neq (the interop semantics)", () => {
    const p = loadPolicy(
      doc(
        `${G('      constraints: { account_neq: treasury }\n')}`,
        '\nactions:\n  pay:\n    rules:\n      - when: { account_neq: treasury }\n        decision: allow\n      - decision: deny\n',
      ),
    );
    const loaded = p.authority!.grants.get('g')!;
    expect(check(loaded, { account: 'Treasury' })[0]).toBe(false);
    expect(p.evaluate('pay', { account: 'Treasury' }).decision).toBe('allow');
    expect(p.evaluate('pay', { account: 'treasury' }).decision).toBe('deny');
  });
});
