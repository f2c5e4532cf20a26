// The verify engine on sql.js scratch stores (no processes, so G4 is not applicable here; the CLI's
// tests race real ones): the catalogue, not-applicable reasons, failures with counterexamples,
// partial runs, the report, JUnit and the badge.
import { describe, expect, it, vi } from 'vitest';
import * as fc from 'fast-check';
import { EXAMPLE_POLICY_YAML, loadPolicy, type StateStore } from '@ctrlrun/kernel';
import {
  GUARANTEE_IDS,
  NOT_APPLICABLE,
  VerifyRefusal,
  badgeText,
  parseOnly,
  renderVerifyJson,
  renderVerifyJunit,
  renderVerifyText,
  runVerify,
  vectorFor,
  verifyBadge,
  verifyExitCode,
  type ScratchStoreFactory,
  type VerifyReport,
} from '@ctrlrun/kernel/verify';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { NO_TEMPLATES } from './verify.fixtures.js';

/** A `ctrlrun.policy/v1` document with no templates and no grants (the demo's policy before it became the starter policy). */
const V1_POLICY_YAML = `schema: ctrlrun.policy/v1
actions:
  customer.read:
    decision: allow
  stripe.refund:
    rules:
      - when: { amount_lte: 100000 }
        decision: allow
      - when: { amount_lte: 1000000 }
        decision: approve
      - decision: deny
  iam.grant_admin:
    decision: deny
`;

/** Scratch stores on sql.js, counted per guarantee; `wrap` can break them on purpose. */
function scratch(wrap: (s: StateStore) => StateStore = (s) => s) {
  const opened: string[] = [];
  let live = 0;
  const factory: ScratchStoreFactory = async ({ guarantee, purpose, clock }) => {
    opened.push(`${guarantee}/${purpose}`);
    const store = await createSqlJsStore({ clock });
    live++;
    return {
      store: wrap(store),
      locator: null,
      dispose: async () => {
        live--;
        await store.close();
      },
    };
  };
  return { factory, opened, live: () => live };
}

async function verify(policyText: string, options: { only?: string; wrap?: (s: StateStore) => StateStore; authority?: string } = {}) {
  const s = scratch(options.wrap);
  const report = await runVerify({
    policyText,
    policyPath: 'ctrlrun.yaml',
    scratchStore: s.factory,
    backend: 'sql.js (in memory)',
    version: '0.1.0',
    only: options.only ? parseOnly(options.only) : null,
    authority: options.authority ? { text: options.authority, path: 'authority.yaml' } : null,
  });
  expect(s.live(), 'every scratch store was disposed').toBe(0);
  return { report, opened: s.opened };
}

const status = (r: VerifyReport) => Object.fromEntries(r.guarantees.map((g) => [g.id, g.status]));
const reasonOf = (r: VerifyReport, id: string) => r.guarantees.find((g) => g.id === id)!.reason;

const AUTHORITY_EXAMPLE = `schema: ctrlrun.policy/v3
actions:
  customer.read:
    decision: allow
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_gte: 0, amount_lte: 100000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 1000000 }
        decision: approve
      - decision: deny
authority:
  max_delegation_depth: 3
  grants:
    - id: head-of-support
      subject: { agent: head-of-support, user: dana@example.com }
      actions: [stripe.refund, customer.read]
      constraints: { amount_lte: 10000000 }
      delegable: true
      expires_at: "2031-06-01T12:00:00Z"
`;

const NO_APPROVE = `schema: ctrlrun.policy/v2
actions:
  email.send: { effect: "email:{message_id}", decision: allow }
  iam.grant_admin: { decision: deny }
`;

describe('verify: the catalogue against a policy', () => {
  it('the shipped example: everything applicable passes; G4 needs processes and G8/G9 authority', async () => {
    const { report } = await verify(EXAMPLE_POLICY_YAML);
    expect(status(report)).toEqual({
      G1: 'pass',
      G2: 'pass',
      G3: 'pass',
      G4: 'not_applicable',
      G5: 'pass',
      G6: 'pass',
      G7: 'pass',
      G8: 'not_applicable',
      G9: 'not_applicable',
      G10: 'pass',
      G11: 'pass',
    });
    expect(reasonOf(report, 'G4')).toBe(NOT_APPLICABLE.perConnection);
    expect(reasonOf(report, 'G8')).toBe('no authority section');
    expect(verifyExitCode(report)).toBe(0);
    expect(report.summary).toEqual({ passed: 8, failed: 0, applicable: 8, not_applicable: 3, skipped: 0, badge: '8/8' });
  });

  it('test_T100_the_authority_example_passes_every_non_authority_guarantee', async () => {
    const { report } = await verify(AUTHORITY_EXAMPLE);
    for (const id of ['G1', 'G2', 'G3', 'G5', 'G6', 'G7', 'G10', 'G11']) expect(status(report)[id], `${id}: ${reasonOf(report, id)}`).toBe('pass');
    // Acting under the grant: its subject, its environment.
    const g1 = report.guarantees.find((g) => g.id === 'G1')!;
    expect([g1.grant_id, g1.action]).toEqual(['head-of-support', 'stripe.refund']);
    expect(report.authority).toEqual({ path: null, sha256: null, grants: 1, max_delegation_depth: 3 });
  });

  it('G8 passes at the expiry and refuses one clock step later; G9 refuses every widened or omitted dimension', async () => {
    const { report } = await verify(AUTHORITY_EXAMPLE);
    const g8 = report.guarantees.find((g) => g.id === 'G8')!;
    expect(g8.status, String(g8.reason)).toBe('pass');
    expect(g8.detail).toMatchObject({ expires_at: '2031-06-01T12:00:00+00:00', refused_at: '2031-06-01T12:00:00.001Z' });
    const g9 = report.guarantees.find((g) => g.id === 'G9')!;
    expect(g9.status, JSON.stringify(g9.counterexample)).toBe('pass');
    expect(g9.grant_id).toBe('head-of-support');
    expect(g9.detail['summary']).toBe('4 of 6 dimensions');
    expect(g9.detail['dimensions']).toEqual(['subject', 'actions', 'constraints', 'expires_at']);
  });

  it('a standalone --authority document acts like an inline one, and authority twice is refused', async () => {
    const [policyPart, authorityPart] = AUTHORITY_EXAMPLE.split('authority:\n');
    const standalone = `schema: ctrlrun.policy/v3\nauthority:\n${authorityPart}`;
    const { report } = await verify(policyPart!, { authority: standalone });
    expect(status(report)['G8']).toBe('pass');
    expect(report.authority).toMatchObject({ path: 'authority.yaml', grants: 1 });
    await expect(verify(AUTHORITY_EXAMPLE, { authority: standalone })).rejects.toThrow(/authority is declared twice/);
  });

  it('a grant whose resources verify cannot build for is a grant miss, with a note', async () => {
    const policy = `schema: ctrlrun.policy/v3
actions:
  k8s.delete_namespace: { resource: "ns:{name}", decision: approve }
authority:
  grants:
    - id: ops
      subject: { agent: ops-bot }
      actions: [k8s.delete_namespace]
      resources: ["ns:staging-*"]
`;
    const { report } = await verify(policy);
    const g1 = report.guarantees.find((g) => g.id === 'G1')!;
    expect(g1.status).toBe('not_applicable');
    expect(g1.reason).toBe("no grant's `resources:` matches a resource verify can build ('ns:ctrlrun-verify-name')");
    expect(String(g1.detail['note'])).toContain('ctrlrun-verify-*');
  });

  it('test_T100_a_v1_document_with_no_templates_and_no_grants', async () => {
    const { report } = await verify(V1_POLICY_YAML);
    expect(status(report)).toMatchObject({
      G1: 'pass',
      G2: 'pass',
      G3: 'not_applicable',
      G4: 'not_applicable',
      G5: 'not_applicable',
      G6: 'pass',
      G7: 'pass',
      G8: 'not_applicable',
      G9: 'not_applicable',
      G10: 'pass',
      G11: 'pass',
    });
    const g3 = report.guarantees.find((g) => g.id === 'G3')!;
    expect(g3.reason).toBe('no action declares an `effect:` template');
    expect(g3.detail['note']).toBe('in a `ctrlrun.policy/v1` document the template lives in the @protect decorator, which verify does not read');
    expect(renderVerifyText(report).match(/@protect decorator/g)).toHaveLength(1);
  });

  it('test_T101_a_policy_with_no_approve_rule_makes_G1_and_G2_not_applicable', async () => {
    const { report, opened } = await verify(NO_APPROVE);
    expect([status(report)['G1'], status(report)['G2']]).toEqual(['not_applicable', 'not_applicable']);
    expect([reasonOf(report, 'G1'), reasonOf(report, 'G2')]).toEqual(['no action requires approval', 'no action requires approval']);
    expect(opened.filter((o) => o.startsWith('G1/') || o.startsWith('G2/'))).toEqual([]);
    expect(status(report)['G3']).toBe('pass');
  });

  it('test_T102_a_policy_with_no_effect_templates_makes_G3_G4_and_G5_not_applicable', async () => {
    const { report } = await verify(NO_TEMPLATES);
    for (const id of ['G3', 'G4', 'G5']) {
      expect(status(report)[id]).toBe('not_applicable');
      expect(reasonOf(report, id)).toBe('no action declares an `effect:` template');
    }
    expect(report.guarantees.find((g) => g.id === 'G3')!.detail).toEqual({});
  });

  it('test_T101b_zero_applicable_guarantees_is_not_a_pass', async () => {
    const { report } = await verify('schema: ctrlrun.policy/v2\nactions: {}\n');
    expect(report.summary).toMatchObject({ passed: 0, failed: 0, applicable: 0, not_applicable: 11, badge: null });
    expect(verifyExitCode(report)).toBe(2);
    expect(verifyBadge(report)).toBeNull();
    expect(renderVerifyText(report).trimEnd().split('\n').at(-1)).toBe(
      '0/0 declared guarantees pass. 11 not applicable: G1, G2, G3, G4, G5, G6, G7, G8, G9, G10, G11.',
    );
  });

  it('observe mode, a policy that does not load, and --only naming nothing or an unknown id are refusals; nothing runs', async () => {
    const s = scratch();
    const run = (policyText: string) => runVerify({ policyText, policyPath: 'p.yaml', scratchStore: s.factory, backend: 'x', version: '0' });
    await expect(run(`schema: ctrlrun.policy/v3\nmode: observe\nactions:\n  a.b: { decision: allow }\n`)).rejects.toThrow(/observe mode/);
    await expect(run('schema: ctrlrun.policy/v9\nactions: {}\n')).rejects.toBeInstanceOf(VerifyRefusal);
    expect(s.opened).toEqual([]);
    expect(() => parseOnly('')).toThrow(VerifyRefusal);
    expect(() => parseOnly('G1,,G3')).toThrow(VerifyRefusal);
    expect(() => parseOnly('G1,G12')).toThrow(/"G12", which is not a guarantee of ctrlrun\.guarantees\/v2: G1, G2, G3, G4, G5, G6, G7, G8, G9, G10, G11/);
    expect(parseOnly(' g3 ,G1,G3')).toEqual(['G3', 'G1']);
  });
});

/** A store that records an unknown outcome as FAILED: exactly what G5 and G10 exist to catch. */
const forgetsAmbiguity = (s: StateStore): StateStore =>
  new Proxy(s, {
    get(target, prop, receiver) {
      if (prop === 'markAmbiguous') return (key: string, actionId: string, error: string) => target.failEffect(key, actionId, error);
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });

/** A store that records "the remote did nothing" as AMBIGUOUS: G5's and G10's positive controls notice. */
const forgetsFailure = (s: StateStore): StateStore =>
  new Proxy(s, {
    get(target, prop, receiver) {
      if (prop === 'failEffect') return (key: string, actionId: string, error: string) => target.markAmbiguous(key, actionId, error);
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });

describe('verify finds what is broken', () => {
  it('a store that forgets ambiguity fails G5 and G10, with a counterexample', async () => {
    const { report } = await verify(EXAMPLE_POLICY_YAML, { wrap: forgetsAmbiguity });
    expect(status(report)).toMatchObject({ G5: 'fail', G10: 'fail', G3: 'pass' });
    const g5 = report.guarantees.find((g) => g.id === 'G5')!;
    expect(g5.reason).toBe('the blind retry ran');
    expect(g5.counterexample!.expected).toContain('a lost reply leaves the effect ambiguous');
    expect(g5.counterexample!.observed).toContain('failed');
    expect(g5.counterexample!.effects).toEqual([expect.objectContaining({ effect_key: g5.effect_key, state: 'committed', attempt: 2 })]);
    expect(g5.counterexample!.receipts.length).toBeGreaterThanOrEqual(2);
    expect(verifyExitCode(report)).toBe(1);
    expect(verifyBadge(report)).toEqual({ schemaVersion: 1, label: 'CTRLRun', message: 'verified 6/8', color: 'red' });
    const text = renderVerifyText(report);
    expect(text).toMatch(/\nG5 {3}ambiguous blocks a blind retry {3}FAIL {2}the blind retry ran — email\.send\n {7}expected: /);
  });

  it('test_T125_a_positive_control_that_misbehaves_is_a_fail_named_control_failed', async () => {
    const { report } = await verify(EXAMPLE_POLICY_YAML, { wrap: forgetsFailure });
    for (const id of ['G5', 'G10']) {
      expect(status(report)[id]).toBe('fail');
      expect(reasonOf(report, id)).toBe('control failed');
      expect(report.guarantees.find((g) => g.id === id)!.counterexample).not.toBeNull();
    }
  });
});

describe('verify: the report', () => {
  it('test_T112_only_runs_the_selection_writes_no_badge_and_the_rest_are_skipped', async () => {
    const { report, opened } = await verify(EXAMPLE_POLICY_YAML, { only: 'G3,G6' });
    expect(report.partial).toBe(true);
    expect(opened.map((o) => o.split('/')[0])).toEqual(expect.arrayContaining(['G3', 'G6']));
    expect(new Set(opened.map((o) => o.split('/')[0]))).toEqual(new Set(['G3', 'G6']));
    for (const g of report.guarantees) {
      if (g.id === 'G3' || g.id === 'G6') expect(g.status).toBe('pass');
      else expect([g.status, g.reason]).toEqual(['skipped', 'not selected']);
    }
    expect(report.summary).toMatchObject({ passed: 2, applicable: 2, skipped: 9, badge: null });
    expect(verifyExitCode(report)).toBe(0);
    expect(renderVerifyText(report).trimEnd().split('\n').at(-1)).toBe(
      '2/2 declared guarantees pass. 0 not applicable. 9 not selected: G1, G2, G4, G5, G7, G8, G9, G10, G11.',
    );
  });

  it('test_T120_a_partial_run_writes_no_badge', async () => {
    const { report } = await verify(EXAMPLE_POLICY_YAML, { only: 'G1' });
    expect(verifyBadge(report)).toBeNull();
  });

  it('test_T113_the_summary_is_the_last_line_and_names_the_not_applicable_ids; test_T113_every_not_applicable_line_carries_its_reason', async () => {
    const { report } = await verify(NO_TEMPLATES);
    const lines = renderVerifyText(report).trimEnd().split('\n');
    expect(lines.at(-1)).toBe('6/6 declared guarantees pass. 5 not applicable: G3, G4, G5, G8, G9.');
    expect(lines.slice(0, 4)).toEqual([
      'CTRLRun verify — ctrlrun 0.1.0, catalogue ctrlrun.guarantees/v2',
      'policy     ctrlrun.yaml (ctrlrun.policy/v2, mode: enforce)',
      'authority  none',
      'store      sql.js (in memory), scratch (created and destroyed for this run)',
    ]);
    expect(lines).toContain('G3   duplicate effect refused         N/A   no action declares an `effect:` template');
    for (const line of lines.filter((l) => /^G\d+ /.test(l) && l.includes(' N/A '))) expect(line).toMatch(/ N\/A {3}\S.+$/);
    expect(lines.filter((l) => /^G\d+ /.test(l))).toHaveLength(11);
  });

  it('test_T114_the_json_report_carries_every_field; test_T104_reason_is_null_only_on_a_pass_and_a_counterexample_only_on_a_fail', async () => {
    const { report } = await verify(EXAMPLE_POLICY_YAML, { wrap: forgetsAmbiguity });
    const doc = JSON.parse(renderVerifyJson(report)) as Record<string, unknown>;
    expect(Object.keys(doc)).toEqual([
      'schema',
      'catalogue',
      'ctrlrun_version',
      'started_at',
      'finished_at',
      'policy',
      'authority',
      'store',
      'partial',
      'summary',
      'guarantees',
    ]);
    expect(doc['schema']).toBe('ctrlrun.verify/v1');
    expect(Object.keys(doc['policy'] as object)).toEqual(['path', 'sha256', 'schema', 'mode', 'actions']);
    expect((doc['policy'] as Record<string, unknown>)['sha256']).toMatch(/^[0-9a-f]{64}$/);
    expect(Object.keys(doc['summary'] as object)).toEqual(['passed', 'failed', 'applicable', 'not_applicable', 'skipped', 'badge']);
    for (const g of doc['guarantees'] as Record<string, unknown>[]) {
      expect(Object.keys(g)).toEqual([
        'id',
        'title',
        'status',
        'reason',
        'action',
        'arguments',
        'effect_key',
        'grant_id',
        'descends_from',
        'detail',
        'counterexample',
      ]);
      expect(g['reason'] === null, String(g['id'])).toBe(g['status'] === 'pass');
      expect(g['counterexample'] !== null, String(g['id'])).toBe(g['status'] === 'fail');
      if (g['status'] === 'fail') expect(Object.keys(g['counterexample'] as object)).toEqual(['expected', 'observed', 'receipts', 'events', 'effects']);
    }
  });

  it('test_T117_statuses_are_rendered_by_value', async () => {
    const { report } = await verify(EXAMPLE_POLICY_YAML, { only: 'G1,G3,G4', wrap: forgetsAmbiguity });
    const doc = JSON.parse(renderVerifyJson(report)) as { guarantees: { status: string }[] };
    expect(new Set(doc.guarantees.map((g) => g.status))).toEqual(new Set(['pass', 'not_applicable', 'skipped']));
    const broken = await verify(EXAMPLE_POLICY_YAML, { only: 'G5', wrap: forgetsAmbiguity });
    expect(JSON.parse(renderVerifyJson(broken.report)).guarantees[4].status).toBe('fail');
    expect(renderVerifyText(broken.report)).toMatch(/ FAIL {2}/);
  });

  it('test_T105_the_json_is_identical_across_runs_minus_timestamps', async () => {
    const strip = (r: VerifyReport) => renderVerifyJson({ ...r, started_at: '', finished_at: '' });
    const a = await verify(AUTHORITY_EXAMPLE);
    const b = await verify(AUTHORITY_EXAMPLE);
    expect(strip(b.report)).toBe(strip(a.report));
  });

  it('test_T115_junit_counts_not_applicable_and_not_selected_as_skipped_never_as_a_pass', async () => {
    const { report } = await verify(EXAMPLE_POLICY_YAML, { only: 'G3,G4,G5', wrap: forgetsAmbiguity });
    const xml = renderVerifyJunit(report);
    expect(xml).toContain('<testsuite name="ctrlrun.verify" hostname="localhost" tests="11" failures="1" errors="0" skipped="9"');
    expect(xml).toContain('<testcase classname="ctrlrun.guarantees" name="G3 duplicate effect refused"/>');
    expect(xml).toMatch(
      /<testcase classname="ctrlrun\.guarantees" name="G4 one winner under concurrency"><skipped message="the configured store backend is per-connection and cannot reserve across processes"\/><\/testcase>/,
    );
    expect(xml).toMatch(/name="G5 ambiguous blocks a blind retry"><failure type="G5" message="the blind retry ran">expected: /);
    expect(xml).toContain('<skipped message="not selected"/>');
  });

  it('test_T116_the_exit_code_is_0_1_or_2_and_not_applicable_alone_never_moves_it', async () => {
    expect(verifyExitCode((await verify(NO_TEMPLATES)).report)).toBe(0);
    expect(verifyExitCode((await verify(EXAMPLE_POLICY_YAML, { only: 'G5', wrap: forgetsAmbiguity })).report)).toBe(1);
    expect(verifyExitCode((await verify(NO_TEMPLATES, { only: 'G3,G4' })).report)).toBe(2);
  });

  it('test_T119_the_rendered_badge_text_is_exactly_CTRLRun_verified_N_over_M', async () => {
    const { report } = await verify(NO_TEMPLATES);
    const badge = verifyBadge(report)!;
    expect(badge).toEqual({ schemaVersion: 1, label: 'CTRLRun', message: 'verified 6/6', color: 'brightgreen' });
    expect(badgeText(badge)).toBe('CTRLRun verified 6/6');
    for (const word of ['secure', 'safe', 'compliant', 'certified', 'audited']) expect(renderVerifyText(report).toLowerCase()).not.toContain(word);
  });

  it('test_T107_a_full_run_completes_with_no_network', async () => {
    const fetchSpy = vi.fn(async () => new Response(''));
    const socket = vi.fn();
    vi.stubGlobal('fetch', fetchSpy);
    vi.stubGlobal('WebSocket', socket);
    try {
      const { report } = await verify(AUTHORITY_EXAMPLE);
      expect(report.summary.failed).toBe(0);
      expect([fetchSpy.mock.calls.length, socket.mock.calls.length]).toEqual([0, 0]);
      // The stubs are live.
      await fetch('https://example.invalid/');
      expect(fetchSpy).toHaveBeenCalledTimes(1);
    } finally {
      vi.unstubAllGlobals();
    }
  });
});

describe('verify: argument synthesis', () => {
  it('reaches every reachable rule of a banded policy, and no earlier one (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: -1_000_000, max: 1_000_000 }), { minLength: 1, maxLength: 5 }),
        fc.constantFrom('lte', 'lt'),
        (bounds, op) => {
          const sorted = [...bounds].sort((a, b) => a - b);
          const decisions = ['allow', 'approve', 'deny'] as const;
          const rules = sorted
            .map((n, i) => `      - when: { amount_gte: ${sorted[0]! - 10}, amount_${op}: ${n} }\n        decision: ${decisions[i % 3]}`)
            .join('\n');
          const policy = loadPolicy(`schema: ctrlrun.policy/v2\nactions:\n  pay:\n    rules:\n${rules}\n`);
          const view = { name: 'pay', effect: null, resource: null, rules: policy.rules('pay')! };
          for (const d of decisions) {
            const v = vectorFor(policy, view, d);
            const reachable = sorted.some((n, i) => decisions[i % 3] === d && (i === 0 || (op === 'lte' ? n > sorted[i - 1]! : n - 1 > sorted[i - 1]! - 1)));
            if (v === null) {
              expect(reachable).toBe(false);
              continue;
            }
            const e = policy.evaluate('pay', v.arguments);
            expect(e.decision).toBe(d);
            expect(e.reason).toBe(v.evaluation.reason);
          }
        },
      ),
    );
  });

  it('builds only integers, strings, booleans and null; a list condition is not synthesizable', () => {
    const policy = loadPolicy(
      `schema: ctrlrun.policy/v2\nactions:\n  a:\n    rules:\n      - when: { tags_eq: [x, y] }\n        decision: allow\n      - when: { region_in: [eu, us], tier_neq: 3, flag_eq: true, note_eq: null }\n        decision: approve\n`,
    );
    const view = { name: 'a', effect: null, resource: null, rules: policy.rules('a')! };
    expect(vectorFor(policy, view, 'allow')).toBeNull();
    // Rule 0 is failed by negating its condition: tags ≠ [x, y].
    expect(vectorFor(policy, view, 'approve')!.arguments).toEqual({ flag: true, note: null, region: 'eu', tags: 'ctrlrun-verify', tier: 4 });
    expect(GUARANTEE_IDS).toHaveLength(11);
  });
});
