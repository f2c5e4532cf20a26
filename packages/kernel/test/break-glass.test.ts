// Break-glass, the parts that need no store (the original's tests/test_break_glass.py, under its
// names): the envelope is no candidate, the policy hash covers it, what a document may not say,
// and the absence test (no flag, option or environment variable skips a check). Opening,
// acting under and expiring a break-glass grant run on every store in the conformance suite
// (packages/kernel/src/conformance/break-glass-cases.ts); what only this build adds is below.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { AuthorityEscalation, IdentityError, InvalidArgument, PolicyError, createAction, loadAuthority, loadPolicy } from '@ctrlrun/kernel';
import { BREAK_GLASS_WIDENINGS } from '@ctrlrun/kernel/conformance';
import { DIMENSIONS } from '../src/authority/containment.js';
import { rejection, rig, T0 } from './authority.fixtures.js';

const POLICY = `schema: ctrlrun.policy/v6
environment: prod
controls:
  incident-response:
    title: Only an incident commander opens break-glass
    approver_role: incident-commander
actions:
  payments.refund:
    resource: "payment:{payment_id}"
    decision: allow
authority:
  grants:
    - id: everyday
      subject: {agent: "ops-agent"}
      actions: ["payments.read"]
  break_glass:
    incident-payments:
      subject: {agent: "oncall-*"}
      actions: ["payments.*"]
      environments: ["prod"]
      resources: ["payment:*"]
      constraints: {amount_lte: 50000}
      max_ttl: PT4H
      controls: [incident-response]
`;

const COMMANDER = { agent: 'human:ada', user: 'ada@example.com', issuer: 'https://issuer.example', claims: { roles: ['incident-commander'] } };
const HOUR = 3_600_000;

function grant(expiresAt: string | null = new Date(T0.getTime() + HOUR).toISOString()) {
  return {
    subject: { agent: 'oncall-agent' },
    actions: ['payments.refund'],
    environments: ['prod'],
    resources: ['payment:EU-*'],
    constraints: { amount_lte: 1000 },
    expiresAt,
  };
}

function refund() {
  return createAction({
    name: 'payments.refund',
    arguments: { amount: 100, payment_id: 'EU-42' },
    principal: { agent: 'oncall-agent', user: 'ada' },
    resource: 'payment:EU-42',
    environment: 'prod',
  });
}

const opened = (yaml = POLICY) => rig(yaml, { environment: 'prod', approvers: { rolesClaim: 'roles' } });

describe('the envelope and the document (no store)', () => {
  it('test_T329_every_dimension_contained_dimension_knows_has_a_case', () => {
    // The conformance case drives one widening per dimension; expires_at is bounded by max_ttl instead (T328).
    const driven = new Set(BREAK_GLASS_WIDENINGS.map(([, d]) => d));
    expect(DIMENSIONS.filter((d) => !driven.has(d))).toEqual(['expires_at']);
  });

  it('test_T330_the_envelope_is_not_a_candidate', () => {
    const authority = loadPolicy(POLICY).authority!;
    expect(authority.grants.has('incident-payments')).toBe(false);
    expect(authority.envelopes.has('incident-payments')).toBe(true);
    expect([...authority.grants.keys()]).toEqual(['everyday']);
  });

  it('test_T332_widening_max_ttl_moves_the_policy_hash', () => {
    const narrow = loadPolicy(POLICY);
    const wide = loadPolicy(POLICY.replace('PT4H', 'PT8H'));
    expect(wide.policyHash).not.toBe(narrow.policyHash);
    expect(JSON.stringify(wide.authority!.canonical())).not.toBe(JSON.stringify(narrow.authority!.canonical()));
  });

  it('test_T332_the_envelope_hashes_as_the_document_wrote_it', () => {
    const envelope = loadPolicy(POLICY).authority!.canonical().break_glass['incident-payments']!;
    expect([envelope.delegable, envelope.max_ttl, envelope.controls]).toEqual([false, 4 * 3600, ['incident-response']]);
  });

  it.each(['delegable', 'expires_at'])('test_T332b_an_envelope_may_not_carry_delegable_or_expires_at (%s)', (key) => {
    const value = key === 'delegable' ? 'true' : '"2026-01-01T00:00:00Z"';
    const text = POLICY.replace('      max_ttl: PT4H', `      ${key}: ${value}\n      max_ttl: PT4H`);
    expect(() => loadPolicy(text)).toThrow(PolicyError);
    expect(() => loadPolicy(text)).toThrow(key);
  });

  it('test_T332b_an_id_in_both_mappings_is_refused_naming_both', () => {
    const text = POLICY.replace('    incident-payments:', '    everyday:');
    expect(() => loadPolicy(text)).toThrow(/"everyday" is declared in both 'grants' and 'break_glass'/);
  });

  it('test_T332b_a_standalone_authority_document_may_not_declare_break_glass', () => {
    const text = `schema: ctrlrun.policy/v6\n${POLICY.slice(POLICY.indexOf('authority:'))}`;
    expect(() => loadAuthority(text)).toThrow(/may not declare 'break_glass'.*control registry/);
  });
});

describe('opening: what this build adds to the original', () => {
  it('an envelope citing no controls cannot be opened: nothing would gate who opens it (the original lets any verified principal)', async () => {
    for (const controls of ['      controls: []\n', '']) {
      const r = await opened(POLICY.replace('      controls: [incident-response]\n', controls));
      const err = await rejection(r.control.breakGlass('incident-payments', grant(), { verified: COMMANDER, reason: 'INC-1' }));
      expect(err).toBeInstanceOf(InvalidArgument);
      expect(err.message).toContain('cites no controls');
      expect(await r.store.delegations()).toEqual([]);
    }
  });

  it('ttl gives the grant its expiry from the Control clock, within max_ttl; with an expires_at too it is refused', async () => {
    const r = await opened();
    const d = await r.control.breakGlass('incident-payments', grant(null), { verified: COMMANDER, reason: 'INC-1', ttl: 3600 });
    expect(d.grant.expiresAt).toBe('2026-09-03T11:12:01+00:00');
    expect(await r.control.execute(refund(), r.executor)).toBe('ok');
    r.advance(HOUR + 1000);
    expect(await rejection(r.control.execute(refund(), r.executor))).toMatchObject({ reason: 'authority_expired' });
    const beyond = await rejection(r.control.breakGlass('incident-payments', grant(null), { verified: COMMANDER, reason: 'INC-1', ttl: 4 * 3600 + 1 }));
    expect(beyond).toMatchObject({ reason: 'containment', dimension: 'expires_at' });
    const both = await rejection(r.control.breakGlass('incident-payments', grant(), { verified: COMMANDER, reason: 'INC-1', ttl: 60 }));
    expect(both).toBeInstanceOf(InvalidArgument);
    expect(both.message).toContain('not both');
    // As max_ttl is written: an ISO-8601 duration.
    const iso = await r.control.breakGlass('incident-payments', grant(null), { verified: COMMANDER, reason: 'INC-3', ttl: 'PT30M' });
    expect(iso.grant.expiresAt).toBe('2026-09-03T11:42:02+00:00');
    for (const ttl of [0, -5, 1.5, Number.NaN, 'P1M', 'PT0S', '1h']) {
      expect(await rejection(r.control.breakGlass('incident-payments', grant(null), { verified: COMMANDER, reason: 'INC-1', ttl }))).toBeInstanceOf(
        InvalidArgument,
      );
    }
    // A delegable grant gets its expiry from ttl before it is built (delegable needs one).
    const delegable = await r.control.breakGlass('incident-payments', { ...grant(null), delegable: true }, { verified: COMMANDER, reason: 'INC-2', ttl: 600 });
    expect(delegable.grant.delegable).toBe(true);
  });

  it('a reason is required, and is recorded as given, not interpreted', async () => {
    const r = await opened();
    for (const reason of [undefined, '', '   ', 'x'.repeat(1025), 7]) {
      const err = await rejection(r.control.breakGlass('incident-payments', grant(), { verified: COMMANDER, reason } as never));
      expect(err).toBeInstanceOf(InvalidArgument);
      expect(err.message).toContain('reason');
    }
    expect(await r.store.delegations()).toEqual([]);
    await r.control.breakGlass('incident-payments', grant(), { verified: COMMANDER, reason: 'INC-7 "payments" \u2028 outage' });
    expect(r.data('DELEGATION_CREATED').at(-1)!['reason']).toBe('INC-7 "payments" \u2028 outage');
    expect(r.warnings.at(-1)).toContain('"INC-7 \\"payments\\" \\u2028 outage"');
  });

  it('an opener whose credential expired opens nothing: IdentityError, DELEGATION_REJECTED principal_expired', async () => {
    const r = await opened();
    const lapsed = { ...COMMANDER, expiresAt: new Date(T0.getTime() - 1000).toISOString() };
    expect(await rejection(r.control.breakGlass('incident-payments', grant(), { verified: lapsed, reason: 'INC-1' }))).toBeInstanceOf(IdentityError);
    expect(r.data('DELEGATION_REJECTED')).toEqual([{ parent_id: 'incident-payments', reason: 'principal_expired' }]);
  });

  it('max_delegation_depth 0 switches break-glass off too (max_depth)', async () => {
    const r = await opened(POLICY.replace('authority:\n', 'authority:\n  max_delegation_depth: 0\n'));
    const err = await rejection(r.control.breakGlass('incident-payments', grant(), { verified: COMMANDER, reason: 'INC-1' }));
    expect(err).toBeInstanceOf(AuthorityEscalation);
    expect(err).toMatchObject({ reason: 'max_depth' });
  });
});

// ---- T338: the absence test -------------------------------------------------------------------

/** Names a flag would take in code: an identifier, a key, an assignment. Matched with comments and strings removed. */
const FORBIDDEN_IDENTIFIERS = [
  'skipEntitlement',
  'skip_entitlement',
  'trustApprover',
  'trust_approver',
  'allowSelfApproval',
  'allow_self_approval',
  'ignoreRevocations',
  'ignore_revocations',
  'skipApprover',
  'skip_approver',
  'disableEntitlement',
  'disable_entitlement',
  'breakGlass : true',
  'breakGlass = true',
  'break_glass : true',
  'break_glass = true',
];
/** Names it would take in a string: a CLI option, an environment variable, a key. Matched against string literals only. */
const FORBIDDEN_STRINGS = [
  'CTRLRUN_SKIP',
  'CTRLRUN_ALLOW_SELF',
  'CTRLRUN_BREAK_GLASS',
  'CTRLRUN_TRUST',
  'skip-entitlement',
  'allow-self-approval',
  'break-glass-force',
  'no-approver',
  'trust-approver',
  'skip_entitlement',
  'allow_self_approval',
];

const STRING_KINDS = new Set([
  ts.SyntaxKind.StringLiteral,
  ts.SyntaxKind.NoSubstitutionTemplateLiteral,
  ts.SyntaxKind.TemplateHead,
  ts.SyntaxKind.TemplateMiddle,
  ts.SyntaxKind.TemplateTail,
]);

/** A file's code tokens by line (comments and strings out) and its string literals, from the TypeScript parser. */
function tokens(path: string, text = readFileSync(path, 'utf8')): { code: Map<number, string[]>; strings: string[] } {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const code = new Map<number, string[]>();
  const strings: string[] = [];
  const visit = (node: ts.Node): void => {
    if (node.kind >= ts.SyntaxKind.FirstJSDocNode && node.kind <= ts.SyntaxKind.LastJSDocNode) return;
    const children = node.getChildren(source);
    if (children.length > 0) return children.forEach(visit);
    if (STRING_KINDS.has(node.kind)) return void strings.push(node.getText(source));
    const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    code.set(line, [...(code.get(line) ?? []), node.getText(source)]);
  };
  visit(source);
  return { code, strings };
}

function found(path: string, text?: string): string[] {
  const { code, strings } = tokens(path, text);
  const hits: string[] = [];
  for (const [line, parts] of code) for (const name of FORBIDDEN_IDENTIFIERS) if (parts.join(' ').includes(name)) hits.push(`${path}:${line}: ${name}`);
  for (const s of strings) for (const name of FORBIDDEN_STRINGS) if (s.includes(name)) hits.push(`${path}: ${name}`);
  return hits;
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (/\.(ts|tsx|mts)$/.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

describe('break-glass is a grant, never a flag', () => {
  it('test_T338_no_flag_environment_variable_or_option_skips_a_check', () => {
    const root = join(import.meta.dirname, '..', '..', '..');
    const dirs = [
      ...readdirSync(join(root, 'packages')).map((p) => join(root, 'packages', p, 'src')),
      join(root, 'worker', 'src'),
      join(root, 'playground', 'src'),
    ].filter((d) => {
      try {
        return statSync(d).isDirectory();
      } catch {
        return false;
      }
    });
    const files = dirs.flatMap(sources);
    expect(files.length).toBeGreaterThan(50);
    expect(files.flatMap((f) => found(f))).toEqual([]);
  });

  it('test_T338_the_grep_would_find_one_in_every_spelling_a_flag_takes', () => {
    const planted = [
      "import { parseArgs } from 'node:util';",
      'const ALLOW = { skipEntitlement: true };',
      "parseArgs({ options: { 'allow-self-approval': { type: 'boolean' } } });",
      "const env = process.env['CTRLRUN_BREAK_GLASS'];",
      'const late = `${env}no-approver`;',
      '// --trust-approver is named here in a comment and must NOT count',
      '/** nor skipApprover in a doc comment */',
      'export { ALLOW, late };',
    ].join('\n');
    const hits = found('planted.ts', planted).map((h) => h.slice(h.lastIndexOf(' ') + 1));
    expect(hits.sort()).toEqual(['CTRLRUN_BREAK_GLASS', 'allow-self-approval', 'no-approver', 'skipEntitlement']);
  });
});
