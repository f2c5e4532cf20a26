// Property tests: the loader refuses with PolicyError and nothing else, evaluate never throws
// on an object, and the hash ignores key order and formatting.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { EXAMPLE_POLICY_YAML, checkPolicy, loadAuthority, loadPolicy, parseTemplate, PolicyError, InvalidArgument, type Policy } from '@ctrlrun/kernel';
import { loadPolicyDocument } from '../src/policy/policy.js';

/** Loads `text`; any throw other than a PolicyError fails the property. */
function loadOrRefuse(text: string): Policy | null {
  try {
    return loadPolicy(text);
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    expect(err.message.startsWith('<string>: ')).toBe(true);
    return null;
  }
}

const SCALARS = [
  'yes',
  'no',
  'on',
  'off',
  'y',
  '~',
  'null',
  '',
  '0x1f',
  '0b11',
  '017',
  '09',
  '1_000',
  '1e5',
  '1.5',
  '.inf',
  '.nan',
  '1:30',
  '2026-01-01',
  '2026-02-30',
  '2026-01-01 10:00:00Z',
  '"quoted"',
  "'single'",
  'allow',
  'approve',
  'deny',
  'observe',
  'enforce',
  'ctrlrun.policy/v1',
  'ctrlrun.policy/v2',
  'ctrlrun.policy/v3',
  'ctrlrun.policy/v4',
  '"refund:{payment_id}"',
  '"{bad"',
  '!!str 5',
  '!!int "7"',
  '!!set {a}',
  '!!binary aGk=',
  '&a x',
  '*a',
  '<<',
  '=',
  '[]',
  '{}',
  '[1, 2]',
  '{a: 1}',
  '-1',
  '9007199254740993',
];
const KEYS = [
  'schema',
  'actions',
  'environment',
  'authority',
  'mode',
  'version',
  'controls',
  'decision',
  'rules',
  'when',
  'effect',
  'resource',
  'mcp',
  'data',
  'not_executed_on_error',
  'title',
  'source',
  'label',
  'redact',
  'grants',
  'amount_lte',
  'amount_eq',
  'x_in',
  'user_eq',
  'data_scope_in',
  'data_scope_eq',
  'customer.read',
  'stripe.refund',
  '"quoted key"',
  '1',
  'yes',
  '<<',
  '? [a]',
];

/** YAML-ish text: nested block and flow mappings and lists of the policy's own vocabulary. */
const yamlish: fc.Arbitrary<string> = fc.letrec<{ node: string; block: string }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(...SCALARS),
    fc.array(tie('node'), { maxLength: 3 }).map((xs) => `[${xs.join(', ')}]`),
    fc.array(fc.tuple(fc.constantFrom(...KEYS), tie('node')), { maxLength: 3 }).map((es) => `{${es.map(([k, v]) => `${k}: ${v}`).join(', ')}}`),
  ),
  block: fc
    .array(fc.tuple(fc.constantFrom(...KEYS), fc.oneof(tie('node'), tie('block'))), { minLength: 1, maxLength: 4 })
    .map((es) => es.map(([k, v]) => (v.includes('\n') ? `${k}:\n${v.replace(/^/gm, '  ')}` : `${k}: ${v}`)).join('\n')),
})).block;

describe('the loader', () => {
  it('refuses random text with a PolicyError and nothing else', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (text) => {
        loadOrRefuse(text);
      }),
      { numRuns: 500 },
    );
  });

  it('refuses or accepts random YAML-ish documents, never crashing', () => {
    fc.assert(
      fc.property(yamlish, fc.constantFrom('v1', 'v2', 'v3', 'v4'), (body, v) => {
        loadOrRefuse(body);
        loadOrRefuse(`schema: ctrlrun.policy/${v}\n${body}\n`);
        loadOrRefuse(`schema: ctrlrun.policy/${v}\nactions:\n${body.replace(/^/gm, '  ')}\n`);
      }),
      { numRuns: 400 },
    );
  });

  it('refuses the example policy with random edits with a PolicyError and nothing else', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.nat(),
            fc.nat({ max: 3 }),
            fc.constantFrom('{', '}', '[', ']', ':', '-', ' ', '\n', '\t', '#', '"', "'", '&', '*', '!', 'x', '0', '.', ',', '\u0000', 'é'),
          ),
          { minLength: 1, maxLength: 4 },
        ),
        (edits) => {
          let text = EXAMPLE_POLICY_YAML;
          for (const [at, remove, insert] of edits) {
            const i = at % (text.length + 1);
            text = text.slice(0, i) + insert + text.slice(i + remove);
          }
          loadOrRefuse(text);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('loads or refuses documents whose aliases repeat long strings, never running out of memory', () => {
    // Anchored levels of aliases over one long string, placed where the loader must read them
    // (an operand, a title, a grant constraint, an unknown key): each either loads or is a
    // PolicyError, and none is expanded past the size bound (finding 6).
    const place = fc.constantFrom(
      (v: string) => `schema: ctrlrun.policy/v1\nactions:\n  a:\n    rules:\n      - when: {x_in: ${v}}\n        decision: allow\n`,
      (v: string) => `schema: ctrlrun.policy/v4\ncontrols:\n  c: {title: ${v}}\nactions: {}\n`,
      (v: string) =>
        `schema: ctrlrun.policy/v3\nactions: {a: {decision: allow}}\nauthority:\n  grants:\n    - {id: g, subject: {agent: a}, actions: [a], constraints: {x_in: ${v}}}\n`,
      (v: string) => `schema: ctrlrun.policy/v1\nactions: {}\nextra: ${v}\n`,
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 60_000 }),
        fc.array(fc.integer({ min: 1, max: 16 }), { minLength: 1, maxLength: 6 }),
        place,
        (length, fanouts, at) => {
          const levels = [`&l0 "${'z'.repeat(length)}"`];
          fanouts.forEach((n, i) => levels.push(`&l${i + 1} [${Array(n).fill(`*l${i}`).join(', ')}]`));
          const text = at(`[${levels.join(', ')}]`);
          loadOrRefuse(text);
          try {
            loadAuthority(text);
          } catch (err) {
            if (!(err instanceof PolicyError)) throw err;
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('refuses random parsed documents with a PolicyError and nothing else', () => {
    fc.assert(
      fc.property(fc.anything({ maxDepth: 4, withBigInt: true, withDate: true, withMap: true, withNullPrototype: true }), (doc) => {
        try {
          loadPolicyDocument(doc);
        } catch (err) {
          if (!(err instanceof PolicyError)) throw err;
        }
        try {
          loadPolicyDocument({ schema: 'ctrlrun.policy/v4', actions: { a: doc } });
        } catch (err) {
          if (!(err instanceof PolicyError)) throw err;
        }
      }),
      { numRuns: 300 },
    );
  });

  it('template parsing refuses only with the error class of its context', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('{', '}', 'a', '_', '1', ':', '.', 'é', ' ', '!'), maxLength: 12 }), (text) => {
        let loadOk = true;
        let decorationOk = true;
        try {
          parseTemplate(text, 'load');
        } catch (err) {
          expect(err).toBeInstanceOf(PolicyError);
          loadOk = false;
        }
        try {
          parseTemplate(text, 'decoration');
        } catch (err) {
          expect(err).toBeInstanceOf(InvalidArgument);
          decorationOk = false;
        }
        expect(loadOk).toBe(decorationOk);
        // Accepted templates are exactly literal text (no braces) and {identifier} placeholders.
        expect(loadOk).toBe(text !== '' && /^(?:[^{}]|\{[\p{L}\p{Nl}\p{No}_][\p{L}\p{N}_]*\})*$/u.test(text));
      }),
      { numRuns: 1000 },
    );
  });
});

// A generator of valid policy documents (as plain data), for evaluation and hash properties.
const SUBJECTS = ['amount', 'currency', 'flag', 'items', 'meta', 'n'];
const scalarOperand = fc.oneof(fc.integer({ min: -5, max: 5 }), fc.constantFrom('EUR', 'USD', 'x', ''), fc.boolean(), fc.constant(null));
const condition = fc.oneof(
  fc.tuple(fc.constantFrom(...SUBJECTS), fc.constantFrom('lt', 'lte', 'gt', 'gte'), fc.integer({ min: -5, max: 5 })),
  fc.tuple(
    fc.constantFrom(...SUBJECTS),
    fc.constantFrom('eq', 'neq'),
    fc.oneof(scalarOperand, fc.array(scalarOperand, { maxLength: 3 }), fc.dictionary(fc.constantFrom('a', 'b'), scalarOperand)),
  ),
  fc.tuple(fc.constantFrom(...SUBJECTS), fc.constant('in'), fc.array(fc.oneof(scalarOperand, fc.array(scalarOperand, { maxLength: 2 })), { maxLength: 3 })),
  fc.tuple(fc.constant('data_scope'), fc.constantFrom('eq', 'neq', 'in'), fc.array(fc.constantFrom('phi', 'pci', 'internal'), { maxLength: 3 })),
);
const decision = fc.constantFrom('allow', 'approve', 'deny');
const controlIds = ['c-1', 'c-2', 'c-3'];
const rule = fc.record(
  {
    when: fc.array(condition, { minLength: 1, maxLength: 3 }).map((cs) => Object.fromEntries(cs.map(([s, op, v]) => [`${s}_${op}`, v]))),
    decision,
    controls: fc.subarray(controlIds),
  },
  { requiredKeys: ['decision'] },
);
const entry = fc.oneof(
  fc.record({ decision, controls: fc.subarray(controlIds), effect: fc.constantFrom('e:{n}', 'x:{resource}:{currency}') }, { requiredKeys: ['decision'] }),
  fc.record(
    {
      rules: fc.array(rule, { minLength: 1, maxLength: 4 }),
      data: fc.dictionary(fc.constantFrom(...SUBJECTS, 'ssn'), fc.constantFrom('phi', 'pci', 'internal')),
      mcp: fc.record({ not_executed_on_error: fc.boolean() }),
      resource: fc.constant('thing:{n}'),
    },
    { requiredKeys: ['rules'] },
  ),
);
const policyDocument = fc.record(
  {
    schema: fc.constant('ctrlrun.policy/v4'),
    version: fc.constantFrom('1', '2026.01'),
    environment: fc.constantFrom('production', 'staging'),
    mode: fc.constantFrom('enforce', 'observe'),
    controls: fc.constant({ 'c-1': { title: 'One' }, 'c-2': { title: 'Two', source: 'Book' }, 'c-3': { title: 'Three' } }),
    actions: fc.dictionary(fc.constantFrom('stripe.refund', 'customer.read', 'iam.grant', 'a', 'b.c'), entry, { minKeys: 1 }),
  },
  { requiredKeys: ['schema', 'actions', 'controls'] },
);

/** The same data with every mapping's keys in a shuffled order (lists keep theirs). */
function shuffled(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v, i) => shuffled(v, seed + i + 1));
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    let s = seed;
    for (let i = keys.length - 1; i > 0; i--) {
      s = (s * 1103515245 + 12345) & 0x7fffffff;
      const j = s % (i + 1);
      [keys[i], keys[j]] = [keys[j]!, keys[i]!];
    }
    return Object.fromEntries(keys.map((k, i) => [k, shuffled((value as Record<string, unknown>)[k], seed + i * 7)]));
  }
  return value;
}

const yamlOf = (doc: unknown, flow: boolean): string =>
  stringify(doc, { defaultStringType: 'QUOTE_DOUBLE', defaultKeyType: 'QUOTE_DOUBLE', collectionStyle: flow ? 'flow' : 'block' });

const argValue = fc.oneof(
  fc.anything({ maxDepth: 2, withBigInt: true, withNullPrototype: true, withMap: true, withDate: true }),
  fc.integer({ min: -6, max: 6 }),
  fc.constantFrom('EUR', 'x', ''),
);

describe('evaluation and the hash', () => {
  it('random documents load; their hash ignores key order, style and quoting', () => {
    fc.assert(
      fc.property(policyDocument, fc.integer(), (doc, seed) => {
        const p = loadPolicy(yamlOf(doc, false));
        expect(loadPolicy(yamlOf(shuffled(doc, seed), true)).policyHash).toBe(p.policyHash);
        expect(loadPolicyDocument(shuffled(doc, seed + 1)).policyHash).toBe(p.policyHash);
        expect(p.policyHash).toBe(loadPolicyDocument(doc).policyHash);
      }),
      { numRuns: 200 },
    );
  });

  it('reordering rules changes the hash when it changes the list', () => {
    fc.assert(
      fc.property(policyDocument, (doc) => {
        const [name, first] = Object.entries(doc.actions)[0]!;
        fc.pre('rules' in first && first.rules.length > 1 && JSON.stringify(first.rules[0]) !== JSON.stringify(first.rules[1]));
        const rules = (first as { rules: unknown[] }).rules;
        const swapped = { ...doc, actions: { ...doc.actions, [name]: { ...first, rules: [rules[1], rules[0], ...rules.slice(2)] } } };
        expect(loadPolicyDocument(swapped).policyHash).not.toBe(loadPolicyDocument(doc).policyHash);
      }),
      { numRuns: 100 },
    );
  });

  it("checkPolicy is sound for missing arguments: without a 'missing' finding, removing an argument never loosens a decision", () => {
    const rank = { allow: 0, approve: 1, deny: 2 } as const;
    fc.assert(
      fc.property(policyDocument, fc.dictionary(fc.constantFrom(...SUBJECTS), argValue), (doc, args) => {
        const p = loadPolicyDocument(doc);
        const findings = checkPolicy(p);
        expect(p.warnings).toEqual(findings.map((f) => f.message));
        for (const name of Object.keys(doc.actions)) {
          const before = p.evaluate(name, args).decision;
          for (const s of Object.keys(args)) {
            // A labelled argument also moves data_scope, which is not a missing-argument question.
            if (p.action(name)!.data[s] !== undefined) continue;
            const rest = Object.fromEntries(Object.entries(args).filter(([k]) => k !== s));
            if (rank[p.evaluate(name, rest).decision] < rank[before]) {
              const flagged = findings.some((f) => f.code === 'rule_skipped' && f.action === name && f.argument === s && f.bypasses!.includes('missing'));
              expect(flagged, `${name} without '${s}'`).toBe(true);
            }
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('random argument objects never make evaluate throw, and results stay in range', () => {
    fc.assert(
      fc.property(
        policyDocument,
        fc.dictionary(fc.oneof(fc.constantFrom(...SUBJECTS, 'ssn', 'data_scope', '__proto__', 'constructor'), fc.string()), argValue),
        (doc, args) => {
          const p = loadPolicyDocument(doc);
          for (const name of [...Object.keys(doc.actions), 'unknown', 'toString']) {
            const e = p.evaluate(name, args);
            expect(['allow', 'approve', 'deny']).toContain(e.decision);
            expect(e.reason).toMatch(/^(unknown_action|decision|no_matching_rule|rule\[\d+\])$/);
            expect(e.controls.every((c) => controlIds.includes(c))).toBe(true);
            expect([...e.controls].sort((a, b) => controlIds.indexOf(a) - controlIds.indexOf(b))).toEqual(e.controls);
            expect(e.warnings.every((w) => typeof w === 'string')).toBe(true);
            // Pure: the same question gets the same answer.
            expect(p.evaluate(name, args)).toEqual(e);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('controls never change a decision', () => {
    fc.assert(
      fc.property(policyDocument, fc.dictionary(fc.constantFrom(...SUBJECTS, 'ssn'), argValue), (doc, args) => {
        const strip = (v: unknown): unknown =>
          Array.isArray(v)
            ? v.map(strip)
            : v !== null && typeof v === 'object'
              ? Object.fromEntries(
                  Object.entries(v)
                    .filter(([k]) => k !== 'controls')
                    .map(([k, x]) => [k, strip(x)]),
                )
              : v;
        const bare = loadPolicyDocument({ ...(strip(doc) as object), controls: doc.controls });
        const cited = loadPolicyDocument(doc);
        for (const name of Object.keys(doc.actions)) {
          const a = cited.evaluate(name, args);
          const b = bare.evaluate(name, args);
          expect([a.decision, a.reason]).toEqual([b.decision, b.reason]);
        }
      }),
      { numRuns: 200 },
    );
  });
});
