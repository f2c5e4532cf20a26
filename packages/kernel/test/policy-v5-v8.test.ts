// Policy schemas v5–v8 as the original 0.12.2 reads them (spec 05 §3.1–§3.2): each schema a
// superset of the one before, a later key under an older schema refused naming the key and the
// schema, malformed values refused at load naming the line. T-ids from the original's suites.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Authority, Grant, loadAuthority, loadPolicy, POLICY_CHANGE_ACTION, PolicyError } from '@ctrlrun/kernel';
import { grantFromJson, grantToJson } from '@ctrlrun/kernel/store';
import { refusal } from './policy.fixtures.js';

const SCHEMAS = ['v1', 'v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8'].map((v) => `ctrlrun.policy/${v}`);

/** A document of `schema` whose one entry carries `line` (indented under the entry). */
function entryDoc(schema: string, line: string): { yaml: string; at: number } {
  const lines = [`schema: ${schema}`, 'actions:', '  stripe.refund:', '    effect: "refund:{payment_id}"', `    ${line}`, '    decision: allow'];
  return { yaml: `${lines.join('\n')}\n`, at: 5 };
}

describe('max_attempts (v5)', () => {
  it('test_T244_a_malformed_ceiling_is_refused_at_load_naming_key_action_and_line', () => {
    for (const value of ['0', '-1', 'true', '1.5', '"3"', '{a: 1}', '[1]', 'null', '', '2026-01-01']) {
      const { yaml, at } = entryDoc('ctrlrun.policy/v5', `max_attempts: ${value}`);
      const message = refusal(yaml).message;
      expect(message, value).toContain("'max_attempts'");
      expect(message, value).toContain("actions['stripe.refund']");
      expect(message, value).toContain(`(line ${at})`);
    }
  });

  it('test_T244_a_ceiling_needs_schema_v5', () => {
    for (const schema of SCHEMAS.slice(1, 4)) {
      const message = refusal(entryDoc(schema, 'max_attempts: 3').yaml).message;
      expect(message).toContain(`'max_attempts' needs 'schema: ctrlrun.policy/v5'; this document declares '${schema}'`);
    }
  });

  it('test_T244_v5_is_a_superset_of_every_earlier_version (and so is v8)', () => {
    for (const schema of ['ctrlrun.policy/v5', 'ctrlrun.policy/v8']) {
      const p = loadPolicy(`schema: ${schema}
version: "2026-09-11"
environment: production
mode: enforce
controls:
  card-data-handling:
    title: Card data handling
authority:
  grants:
    - id: g1
      subject: { agent: "*" }
      actions: ["**"]
      resources: ["**"]
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    resource: "payment/{payment_id}"
    max_attempts: 3
    controls: [card-data-handling]
    mcp: { not_executed_on_error: true }
    data:
      payment_id: pii
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: deny
`);
      expect(p.action('stripe.refund')?.maxAttempts).toBe(3);
      expect(p.version).toBe('2026-09-11');
      expect(p.environment).toBe('production');
    }
  });

  it('test_T244_two_documents_differing_only_in_a_ceiling_hash_differently, and an absent one reads as null', () => {
    const three = loadPolicy(entryDoc('ctrlrun.policy/v5', 'max_attempts: 3').yaml);
    const one = loadPolicy(entryDoc('ctrlrun.policy/v5', 'max_attempts: 1').yaml);
    expect(three.policyHash).not.toBe(one.policyHash);
    expect(loadPolicy(entryDoc('ctrlrun.policy/v5', 'data: {}').yaml).action('stripe.refund')?.maxAttempts).toBeNull();
    // No upper bound: a ceiling beyond 2^53 − 1 loads exactly (no attempt number reaches it).
    expect(loadPolicy(entryDoc('ctrlrun.policy/v5', 'max_attempts: 99999999999999999999').yaml).action('stripe.refund')?.maxAttempts).toBe(
      99999999999999999999n,
    );
  });
});

describe('approvals_required, approver_role, ctrlrun.policy.change (v6)', () => {
  it('test_T320_a_malformed_threshold_is_refused_at_load', () => {
    for (const value of ['0', '-2', 'false', '2.0', '"2"', '[2]', 'null']) {
      const { yaml, at } = entryDoc('ctrlrun.policy/v6', `approvals_required: ${value}`);
      const message = refusal(yaml).message;
      expect(message, value).toMatch(/'approvals_required' must be an integer of at least 1/);
      expect(message, value).toContain(`(line ${at})`);
    }
    expect(loadPolicy(entryDoc('ctrlrun.policy/v6', 'approvals_required: 2').yaml).action('stripe.refund')?.approvalsRequired).toBe(2);
    expect(loadPolicy(entryDoc('ctrlrun.policy/v6', 'data: {}').yaml).action('stripe.refund')?.approvalsRequired).toBe(1);
  });

  it('test_T320_the_key_needs_v6', () => {
    const message = refusal(entryDoc('ctrlrun.policy/v5', 'approvals_required: 2').yaml).message;
    expect(message).toContain("'approvals_required' needs 'schema: ctrlrun.policy/v6'; this document declares 'ctrlrun.policy/v5'");
  });

  it('approver_role: a v6 registry key, non-empty, no surrounding whitespace, carried as written', () => {
    const doc = (schema: string, role: string) => `schema: ${schema}\ncontrols:\n  sox: {title: SOX, approver_role: ${role}}\nactions: {}\n`;
    expect(loadPolicy(doc('ctrlrun.policy/v6', 'finance-lead')).controls.get('sox')?.approverRole).toBe('finance-lead');
    expect(loadPolicy(doc('ctrlrun.policy/v6', '"finance-lead"').replace(', approver_role: "finance-lead"', '')).controls.get('sox')?.approverRole).toBeNull();
    expect(refusal(doc('ctrlrun.policy/v5', 'r')).message).toMatch(/controls\['sox'\] \(line 3\): 'approver_role' needs 'schema: ctrlrun.policy\/v6'/);
    expect(refusal(doc('ctrlrun.policy/v6', '""')).message).toMatch(/'approver_role' must be a non-empty string/);
    expect(refusal(doc('ctrlrun.policy/v6', '7')).message).toMatch(/'approver_role' must be a non-empty string, got integer/);
    expect(refusal(doc('ctrlrun.policy/v6', '" lead"')).message).toMatch(/leading or trailing whitespace/);
    expect(refusal(doc('ctrlrun.policy/v6', '"lead\\u3000"')).message).toMatch(/leading or trailing whitespace/);
  });

  it('declaring ctrlrun.policy.change needs v6; from v6 it loads (its execution is refused: control tests)', () => {
    const doc = (schema: string) => `schema: ${schema}\nactions:\n  ${POLICY_CHANGE_ACTION}:\n    decision: approve\n`;
    expect(refusal(doc('ctrlrun.policy/v5')).message).toContain(
      `(line 3): declaring '${POLICY_CHANGE_ACTION}' needs 'schema: ctrlrun.policy/v6'; this document declares 'ctrlrun.policy/v5'`,
    );
    expect(loadPolicy(doc('ctrlrun.policy/v6')).actionNames).toEqual([POLICY_CHANGE_ACTION]);
  });

  it('no other entry may expand to the policy-approval marker, in any schema', () => {
    for (const schema of ['ctrlrun.policy/v2', 'ctrlrun.policy/v8']) {
      const doc = (line: string) => `schema: ${schema}\nactions:\n  a.b:\n    ${line}\n    decision: allow\n`;
      expect(refusal(doc('effect: "policy:{hash}"')).message).toMatch(/actions\.a\.b|actions\['a\.b'\]/);
      expect(refusal(doc('effect: "policy:{hash}"')).message).toMatch(/\(line 4\): declares an 'effect:' template beginning 'policy:'/);
      expect(refusal(doc('effect: "x:ctrlrun.policy.change:{id}"')).message).toMatch(/names 'ctrlrun\.policy\.change' in its 'effect' template/);
      expect(refusal(doc('resource: "ctrlrun.policy.change{id}"')).message).toMatch(/names 'ctrlrun\.policy\.change' in its 'resource' template/);
      // Not a prefix match on the name, nor on a key that merely contains "policy:".
      expect(() => loadPolicy(doc('effect: "x-policy:{id}"'))).not.toThrow();
      expect(() => loadPolicy(doc('effect: "Policy:{id}"'))).not.toThrow();
    }
    // The reserved entry itself may carry the marker's template (as the original allows).
    expect(() =>
      loadPolicy(`schema: ctrlrun.policy/v6\nactions:\n  ${POLICY_CHANGE_ACTION}:\n    effect: "policy:{policy_hash}"\n    decision: approve\n`),
    ).not.toThrow();
  });
});

const GRANT = (extra: string) => `    - id: g\n      subject: { agent: "a" }\n      actions: ["stripe.*"]\n${extra}`;
const authorityDoc = (schema: string, grants: string, more = '') => `schema: ${schema}\nauthority:\n  grants:\n${grants}${more}actions: {}\n`;

describe('tasks and budgets on grants (v7)', () => {
  it('test_T387_a_v7_tasks_key_in_a_v6_document_is_refused (inline and standalone)', () => {
    const message = refusal(authorityDoc('ctrlrun.policy/v6', GRANT('      tasks: ["ticket:*"]\n'))).message;
    expect(message).toContain("(line 7): 'tasks' on a grant needs 'schema: ctrlrun.policy/v7'; this document declares 'ctrlrun.policy/v6'");
    const standalone = 'schema: ctrlrun.policy/v4\nauthority:\n  grants:\n' + GRANT('      tasks: ["ticket:*"]\n');
    expect(() => loadAuthority(standalone)).toThrow(/'tasks' on a grant needs 'schema: ctrlrun.policy\/v7'/);
  });

  it('test_T407b_a_budget_is_refused_in_a_v6_document (on a grant and on an envelope)', () => {
    const budget = '      budgets: [{metric: amount, limit: 100, window: P1D}]\n';
    expect(refusal(authorityDoc('ctrlrun.policy/v6', GRANT(budget))).message).toContain("'budgets' on a grant needs 'schema: ctrlrun.policy/v7'");
    const envelope = `  break_glass:\n    bg:\n      subject: { agent: "a" }\n      actions: ["stripe.*"]\n      max_ttl: PT4H\n${budget}`;
    expect(refusal(authorityDoc('ctrlrun.policy/v6', GRANT(''), envelope)).message).toContain("'budgets' on a grant needs 'schema: ctrlrun.policy/v7'");
  });

  it('a well-formed budget and task binding load into the grant, in document order, window in seconds', () => {
    const p = loadPolicy(
      authorityDoc(
        'ctrlrun.policy/v7',
        GRANT(
          '      tasks: ["ticket:*", "incident:INC-1"]\n      budgets:\n        - {metric: amount, limit: 100000, window: P1D}\n        - {metric: amount, limit: 5000, window: PT1H}\n        - {metric: calls, limit: 0, window: P1DT2H3M4S}\n',
        ),
      ),
    );
    const g = p.authority!.grants.get('g')!;
    expect(g.tasks).toEqual(['ticket:*', 'incident:INC-1']);
    expect(g.budgets).toEqual([
      { metric: 'amount', limit: 100000, window: 86400 },
      { metric: 'amount', limit: 5000, window: 3600 },
      { metric: 'calls', limit: 0, window: 86400 + 7200 + 180 + 4 },
    ]);
    // Absent is null, not empty.
    const bare = loadPolicy(authorityDoc('ctrlrun.policy/v7', GRANT(''))).authority!.grants.get('g')!;
    expect([bare.tasks, bare.budgets]).toEqual([null, null]);
  });

  it('malformed budgets and tasks are refused at load, naming the grant, the index and the line', () => {
    const bad: [string, RegExp][] = [
      ['      budgets: []\n', /'budgets' must be a non-empty list/],
      ['      budgets: {metric: a, limit: 1, window: P1D}\n', /'budgets' must be a non-empty list.*got mapping/],
      ['      budgets: [{metric: a, limit: 1}]\n', /budgets\[0\].*'window' is required/],
      ['      budgets: [{metric: a, limit: 1, window: P1D, cap: 2}]\n', /budgets\[0\].*unknown key\(s\) 'cap'/],
      ['      budgets: [{metric: " ", limit: 1, window: P1D}]\n', /'metric' must be a non-empty string/],
      ['      budgets: [{metric: a, limit: -1, window: P1D}]\n', /'limit' must be a non-negative integer, got integer/],
      ['      budgets: [{metric: a, limit: true, window: P1D}]\n', /'limit' must be a non-negative integer, got boolean/],
      ['      budgets: [{metric: a, limit: 1.5, window: P1D}]\n', /'limit' must be a non-negative integer, got float/],
      ['      budgets: [{metric: a, limit: "10", window: P1D}]\n', /'limit' must be a non-negative integer, got string/],
      ['      budgets: [{metric: a, limit: 1, window: P1M}]\n', /'window'.*not a duration this reader accepts/],
      ['      budgets: [{metric: a, limit: 1, window: P1Y}]\n', /not a duration this reader accepts/],
      ['      budgets: [{metric: a, limit: 1, window: PT0S}]\n', /not a positive duration/],
      ['      budgets: [{metric: a, limit: 1, window: P}]\n', /not a positive duration/],
      ['      budgets: [{metric: a, limit: 1, window: PT1.5S}]\n', /not a duration this reader accepts/],
      ['      budgets: [{metric: a, limit: 1, window: 86400}]\n', /'window': must be an ISO-8601 duration/],
      ['      budgets: [{metric: a, limit: 1, window: P36501D}]\n', /may not exceed 3153600000 seconds/],
      ['      tasks: []\n', /'tasks' must be a non-empty list of patterns, or absent/],
      ['      tasks: "ticket:*"\n', /'tasks' must be a non-empty list of patterns, got string/],
      ['      tasks: ["ticket:*:**x"]\n', /'tasks\[0\]'/],
      ['      tasks: [null]\n', /'tasks\[0\]' must be a pattern string/],
    ];
    for (const [extra, pattern] of bad) {
      const message = refusal(authorityDoc('ctrlrun.policy/v7', GRANT(extra))).message;
      expect(message, extra).toMatch(pattern);
      expect(message, extra).toContain('(grant "g")');
      expect(message, extra).toMatch(/\(line \d+\)/);
    }
  });

  it('test_T385_a_task_changed_in_the_document_moves_the_policy_hash; test_T405_a_budget_changed_moves_it', () => {
    const hash = (extra: string) => loadPolicy(authorityDoc('ctrlrun.policy/v7', GRANT(extra))).policyHash;
    const base = hash('');
    expect(hash('      tasks: ["ticket:*"]\n')).not.toBe(base);
    expect(hash('      tasks: ["ticket:*"]\n')).not.toBe(hash('      tasks: ["incident:*"]\n'));
    const b = (limit: number, window: string) => `      budgets: [{metric: amount, limit: ${limit}, window: ${window}}]\n`;
    expect(hash(b(10000, 'P1D'))).not.toBe(base);
    expect(hash(b(10000, 'P1D'))).not.toBe(hash(b(10000000, 'P1D')));
    expect(hash(b(10000, 'P1D'))).not.toBe(hash(b(10000, 'PT1H')));
    // The same window spelled two ways is one window.
    expect(hash(b(10000, 'P1D'))).toBe(hash(b(10000, 'PT24H')));
  });

  it('the Grant model carries tasks and budgets, and grant_json round-trips them with the window in seconds', () => {
    const g = new Grant({
      subject: { agent: 'a' },
      actions: ['stripe.refund'],
      tasks: ['ticket:*'],
      budgets: [
        { metric: 'amount', limit: 100, window: 'P1D' },
        { metric: 'calls', limit: 3, window: 60 },
      ],
    });
    expect(g.budgets).toEqual([
      { metric: 'amount', limit: 100, window: 86400 },
      { metric: 'calls', limit: 3, window: 60 },
    ]);
    const text = grantToJson(g);
    expect(text).toContain('"budgets":[{"limit":100,"metric":"amount","window":86400},{"limit":3,"metric":"calls","window":60}]');
    expect(text).toContain('"tasks":["ticket:*"]');
    const back = grantFromJson(text, `dlg_${'b'.repeat(32)}`);
    expect([back.tasks, back.budgets]).toEqual([g.tasks, g.budgets]);
    // A stored window is whole seconds only (the original stores it so); a duration string there is unreadable.
    expect(() => grantFromJson(text.replace('86400', '"P1D"'), `dlg_${'b'.repeat(32)}`)).toThrow(/'window': must be whole seconds/);
    expect(() => grantFromJson(text.replace('86400', 'true'), `dlg_${'b'.repeat(32)}`)).toThrow(/'window'/);
    expect(() => grantFromJson(text.replace('86400', '0'), `dlg_${'b'.repeat(32)}`)).toThrow(/positive whole number of seconds/);
    // A row the original wrote before v7 (no tasks, no budgets key) still reads, as absent.
    const old = grantFromJson(
      '{"actions":["x.y"],"constraints":{},"delegable":false,"environments":null,"expires_at":null,"resources":null,"subject":{"agent":"a","user":null}}',
      `dlg_${'c'.repeat(32)}`,
    );
    expect([old.tasks, old.budgets]).toEqual([null, null]);
    expect(() => new Grant({ subject: { agent: 'a' }, actions: ['x.y'], budgets: [{ metric: 'm', limit: 1, window: 1.5 }] })).toThrow(/'window'/);
  });
});

describe('break_glass envelopes', () => {
  const envelope = (body: string) => `  break_glass:\n    bg:\n${body}`;
  const OK = '      subject: { agent: "oncall-*" }\n      actions: ["k8s.**"]\n      max_ttl: PT4H\n      controls: [sre]\n';

  it('load under any schema that allows authority, never decide, and enter the hash', () => {
    for (const schema of ['ctrlrun.policy/v3', 'ctrlrun.policy/v8']) {
      const p = loadPolicy(authorityDoc(schema, GRANT(''), envelope(OK)));
      const e = p.authority!.envelopes.get('bg')!;
      expect([e.maxTtl, e.controls, e.grant.delegable, e.grant.expiresAt]).toEqual([14400, ['sre'], false, null]);
      expect([...p.authority!.grants.keys()]).toEqual(['g']);
      expect(p.authority!.canonical().break_glass['bg']).toMatchObject({ max_ttl: 14400, controls: ['sre'], delegable: false, tasks: null, budgets: null });
    }
    const without = loadPolicy(authorityDoc('ctrlrun.policy/v3', GRANT(''))).policyHash;
    const withIt = loadPolicy(authorityDoc('ctrlrun.policy/v3', GRANT(''), envelope(OK))).policyHash;
    const wider = loadPolicy(authorityDoc('ctrlrun.policy/v3', GRANT(''), envelope(OK.replace('PT4H', 'PT8H')))).policyHash;
    expect(new Set([without, withIt, wider]).size).toBe(3);
    // test_T405a_a_budget_in_a_break_glass_envelope_moves_the_hash_too
    const budgeted = (limit: number) =>
      loadPolicy(authorityDoc('ctrlrun.policy/v7', GRANT(''), envelope(`${OK}      budgets: [{metric: amount, limit: ${limit}, window: P1D}]\n`))).policyHash;
    expect(budgeted(1)).not.toBe(budgeted(2));
  });

  it('refuses what an envelope cannot be', () => {
    const bad: [string, RegExp][] = [
      [envelope(OK.replace('      max_ttl: PT4H\n', '')), /'max_ttl' is required/],
      [envelope(OK.replace('PT4H', 'P1M')), /'max_ttl': "P1M" is not a duration/],
      [envelope(`${OK}      delegable: true\n`), /may not carry 'delegable'/],
      [envelope(`${OK}      expires_at: 2026-01-01T00:00:00Z\n`), /may not carry 'expires_at'/],
      [envelope(`${OK}      id: other\n`), /an envelope carries no 'id'/],
      [envelope(`${OK}      ttl: PT1H\n`), /unknown key\(s\) 'ttl'/],
      [envelope(OK.replace('[sre]', '[""]')), /'controls' must be a list of control ids/],
      [envelope(OK.replace('[sre]', 'sre')), /'controls' must be a list of control ids/],
      ['  break_glass: [bg]\n', /'break_glass' must be a mapping of envelope id to envelope/],
      ['  break_glass:\n    g:\n' + OK, /declared in both 'grants' and 'break_glass'/],
      ['  break_glass:\n    dlg_x:\n' + OK, /may not begin 'dlg_'/],
    ];
    for (const [more, pattern] of bad) expect(refusal(authorityDoc('ctrlrun.policy/v8', GRANT(''), more)).message, more).toMatch(pattern);
    expect(() => loadPolicy(authorityDoc('ctrlrun.policy/v8', GRANT(''), '  break_glass: null\n'))).not.toThrow();
  });

  it('a standalone authority document may not declare break_glass', () => {
    const text = `schema: ctrlrun.policy/v8\nauthority:\n  grants:\n${GRANT('')}${envelope(OK)}`;
    expect(() => loadAuthority(text)).toThrow(/a standalone authority document may not declare 'break_glass'/);
  });

  it('an Authority built in code takes envelopes and refuses a clash with a grant', () => {
    const grant = new Grant({ id: 'g', subject: { agent: 'a' }, actions: ['x.y'] });
    const bg = { id: 'bg', grant: new Grant({ id: 'bg', subject: { agent: 'a' }, actions: ['x.*'] }), maxTtl: 3600, controls: [] };
    expect(new Authority([grant], { envelopes: [bg] }).canonical().break_glass['bg']).toMatchObject({ max_ttl: 3600, controls: [] });
    expect(() => new Authority([grant], { envelopes: [{ ...bg, id: 'g', grant: grant }] })).toThrow(/declared twice/);
    expect(() => new Authority([grant], { envelopes: [{ ...bg, maxTtl: 0 }] })).toThrow(/maxTtl/);
  });
});

describe('upstream (v8)', () => {
  const D = `sha256:${'a'.repeat(64)}`;

  it('test_T496_upstream_in_a_v7_document_is_a_load_error', () => {
    const message = refusal(entryDoc('ctrlrun.policy/v7', `upstream: {tool_schema_sha256: "${D}"}`).yaml).message;
    expect(message).toContain("(line 5): 'upstream' needs 'schema: ctrlrun.policy/v8'; this document declares 'ctrlrun.policy/v7'");
  });

  it('test_T497b_a_pinned_document_still_loads_in_process, with the pin as written', () => {
    const p = loadPolicy(entryDoc('ctrlrun.policy/v8', `upstream: {tls_cert_sha256: ["${D}"], tls_cert_file: /etc/pin.pem, tool_schema_sha256: "${D}"}`).yaml);
    expect(p.action('stripe.refund')?.upstream).toEqual({ tlsCertSha256: [D], tlsCertFile: ['/etc/pin.pem'], toolSchemaSha256: D });
    // A pin naming nothing pins nothing.
    for (const empty of ['upstream: {}', 'upstream: null', 'upstream: {tls_cert_sha256: [], tool_schema_sha256: null}'])
      expect(loadPolicy(entryDoc('ctrlrun.policy/v8', empty).yaml).action('stripe.refund')?.upstream, empty).toBeNull();
    expect(loadPolicy(entryDoc('ctrlrun.policy/v8', `upstream: {tls_cert_sha256: "${D}"}`).yaml).action('stripe.refund')?.upstream?.tlsCertSha256).toEqual([D]);
  });

  it('a malformed pin is refused at load', () => {
    const bad: [string, RegExp][] = [
      ['upstream: [x]', /'upstream' must be a mapping/],
      ['upstream: {tls_cert: x}', /unknown key\(s\) 'tls_cert'/],
      ['upstream: {tls_cert_sha256: ["sha256:ABC"]}', /is not 'sha256:' followed by 64 lowercase hex/],
      [`upstream: {tls_cert_sha256: ["${D.toUpperCase()}"]}`, /is not 'sha256:'/],
      ['upstream: {tls_cert_sha256: null}', /'tls_cert_sha256' must be a list/],
      ['upstream: {tls_cert_sha256: [1]}', /'tls_cert_sha256' must be a list/],
      ['upstream: {tls_cert_file: [1]}', /'tls_cert_file' must be a path or a list of paths/],
      ['upstream: {tls_cert_file: [""]}', /names an empty path/],
      ['upstream: {tool_schema_sha256: [x]}', /'tool_schema_sha256' must be 'sha256:'/],
    ];
    for (const [line, pattern] of bad) expect(refusal(entryDoc('ctrlrun.policy/v8', line).yaml).message, line).toMatch(pattern);
  });
});

describe('properties: closed key sets and schema gating', () => {
  const ENTRY_KEYS = ['decision', 'effect', 'resource', 'mcp', 'data', 'controls', 'max_attempts', 'approvals_required', 'upstream'];
  const NEEDS: Record<string, number> = { effect: 1, resource: 1, mcp: 1, data: 3, max_attempts: 4, approvals_required: 5, upstream: 7 };
  const VALUE: Record<string, string> = {
    decision: 'allow',
    effect: '"k:{id}"',
    resource: '"r:{id}"',
    mcp: '{not_executed_on_error: true}',
    data: '{id: pii}',
    controls: '[]',
    max_attempts: '2',
    approvals_required: '1',
    upstream: '{}',
  };

  it('an entry key loads exactly from the schema that introduced it, and below is refused naming the key and that schema', () => {
    fc.assert(
      fc.property(fc.subarray(ENTRY_KEYS.filter((k) => k !== 'decision')), fc.integer({ min: 0, max: 7 }), (keys, rank) => {
        const yaml = `schema: ${SCHEMAS[rank]}\nactions:\n  a:\n    decision: allow\n${keys.map((k) => `    ${k}: ${VALUE[k]}\n`).join('')}`;
        const tooNew = keys.filter((k) => (NEEDS[k] ?? 0) > rank);
        let err: unknown = null;
        try {
          loadPolicy(yaml);
        } catch (e) {
          err = e;
        }
        if (tooNew.length === 0) {
          expect(err, yaml).toBeNull();
        } else {
          expect(err, yaml).toBeInstanceOf(PolicyError);
          const message = (err as Error).message;
          expect(
            tooNew.some((k) => message.includes(`'${k}'`) && message.includes(`ctrlrun.policy/v${(NEEDS[k] ?? 0) + 1}`)),
            message,
          ).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('any key outside the closed entry set is refused, named', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-z_]{1,16}$/).filter((k) => !ENTRY_KEYS.includes(k) && k !== 'rules' && k !== 'mode'),
        (key) => {
          const message = refusal(`schema: ctrlrun.policy/v8\nactions:\n  a:\n    decision: allow\n    "${key}": 1\n`).message;
          expect(message).toContain(`unknown key(s) '${key}'`);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('max_attempts and approvals_required load iff the value is an integer of at least 1', () => {
    const value = fc.oneof(
      fc.bigInt({ min: -5n, max: 10n ** 20n }).map((n) => [String(n), n >= 1n] as const),
      fc.constantFrom(['true', false], ['null', false], ['1.0', false], ['"2"', false], ['[]', false], ['{}', false], ['0x10', true], ['1_0', true]),
    );
    fc.assert(
      fc.property(fc.constantFrom('max_attempts', 'approvals_required'), value, (key, [text, ok]) => {
        const yaml = entryDoc('ctrlrun.policy/v8', `${key}: ${text}`).yaml;
        if (ok) expect(() => loadPolicy(yaml), yaml).not.toThrow();
        else expect(refusal(yaml).message, yaml).toContain(`'${key}' must be an integer of at least 1`);
      }),
      { numRuns: 300 },
    );
  });

  it('a budget window loads iff it is a positive P[nD][T[nH][nM][nS]] of at most a hundred years', () => {
    const part = fc.option(fc.integer({ min: 0, max: 40000 }), { nil: undefined });
    fc.assert(
      fc.property(part, part, part, part, fc.boolean(), (d, h, m, s, tee) => {
        const time =
          h !== undefined || m !== undefined || s !== undefined || tee
            ? `T${h !== undefined ? `${h}H` : ''}${m !== undefined ? `${m}M` : ''}${s !== undefined ? `${s}S` : ''}`
            : '';
        const text = `P${d !== undefined ? `${d}D` : ''}${time}`;
        const seconds = (d ?? 0) * 86400 + (h ?? 0) * 3600 + (m ?? 0) * 60 + (s ?? 0);
        const yaml = authorityDoc('ctrlrun.policy/v7', GRANT(`      budgets: [{metric: amount, limit: 1, window: ${text}}]\n`));
        if (seconds > 0 && seconds <= 3153600000) expect(loadPolicy(yaml).authority!.grants.get('g')!.budgets![0]!.window, text).toBe(seconds);
        else expect(() => loadPolicy(yaml), text).toThrow(PolicyError);
      }),
      { numRuns: 300 },
    );
  });
});

describe("the original's example payments policy loads (issue 28)", () => {
  // The shape of the original's examples/authority/payments.yaml: a reconciliation grant scoped to
  // payment:* on two reads whose entries derive no resource. Refused at load before issue 28.
  const actions = `actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    resource: "payment:{payment_id}"
    rules:
      - when: { amount_gte: 0, amount_lte: 100000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 1000000 }
        decision: approve
      - decision: deny
  stripe.charge.read:
    decision: allow
  stripe.refund.read:
    decision: allow
`;
  const grants = `authority:
  max_delegation_depth: 3
  grants:
    - id: head-of-support
      subject: { agent: "head-of-support", user: "dana@example.com" }
      actions: ["stripe.refund"]
      resources: ["payment:*"]
      constraints: { amount_gte: 0, amount_lte: 10000000 }
      environments: ["production"]
      delegable: true
      expires_at: "2100-01-01T00:00:00Z"
    - id: reconciliation
      subject: { agent: "reconciliation-agent" }
      actions: ["stripe.charge.read", "stripe.refund.read"]
      resources: ["payment:*"]
      environments: ["production", "staging"]
`;

  it('as v3', () => {
    const p = loadPolicy(`schema: ctrlrun.policy/v3\n${grants}${actions}`);
    expect([...p.authority!.grants.keys()]).toEqual(['head-of-support', 'reconciliation']);
    expect(p.warnings.filter((w) => w.includes('grant "reconciliation" scopes'))).toHaveLength(2);
  });

  it('as v7, with tasks, a budget, an approver role and a two-approver threshold', () => {
    const v7 = `schema: ctrlrun.policy/v7\n${grants.replace(
      '      expires_at: "2100-01-01T00:00:00Z"\n',
      '      expires_at: "2100-01-01T00:00:00Z"\n      tasks: ["refund-run:*"]\n      budgets:\n        - { metric: amount, limit: 50000000, window: PT24H }\n',
    )}controls:\n  payments-approval:\n    title: A refund above the autonomous band is approved by a payments approver\n    approver_role: payments-approver\n${actions.replace(
      '    resource: "payment:{payment_id}"\n    rules:',
      '    resource: "payment:{payment_id}"\n    controls: [payments-approval]\n    approvals_required: 2\n    rules:',
    )}`;
    const p = loadPolicy(v7);
    expect(p.action('stripe.refund')).toMatchObject({ approvalsRequired: 2, maxAttempts: null, upstream: null });
    expect(p.controls.get('payments-approval')?.approverRole).toBe('payments-approver');
    expect(p.authority!.grants.get('head-of-support')).toMatchObject({
      tasks: ['refund-run:*'],
      budgets: [{ metric: 'amount', limit: 50000000, window: 86400 }],
    });
  });
});
