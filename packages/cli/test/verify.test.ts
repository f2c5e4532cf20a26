// `ctrlrun verify` in-process: the operator's store is never touched, exit codes, files written.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderActionSummary, verifyBadge } from '@ctrlrun/cli';
import type { VerifyReport } from '@ctrlrun/kernel/verify';
import { NO_TEMPLATES } from '../../kernel/test/verify.fixtures.js';
import { run, seed, storeBytes, tempDir } from './support.js';

describe('ctrlrun verify', () => {
  it('test_T103_the_operators_store_is_byte_identical_before_and_after (a full run, processes included)', async () => {
    const s = await seed();
    const before = storeBytes(s.storePath);
    const r = await run(['verify'], { cwd: s.dir });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe('9/9 declared guarantees pass. 2 not applicable: G8, G9.');
    expect(storeBytes(s.storePath)).toBe(before);
  });

  it('test_T103_a_store_that_does_not_exist_is_not_created; test_T103_CTRLRUN_STATE_is_not_read_and_not_created', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'ctrlrun.yaml'), NO_TEMPLATES);
    const env = { CTRLRUN_STATE: join(dir, 'elsewhere', 'state.db'), CTRLRUN_STORE_URL: `sqlite://${join(dir, 'other.db')}` };
    const r = await run(['verify', '--junit', 'verify.xml'], { cwd: dir, env });
    expect(r.code).toBe(0);
    for (const p of [join(dir, '.ctrlrun'), join(dir, 'elsewhere'), join(dir, 'other.db')]) expect(existsSync(p), p).toBe(false);
    expect(readFileSync(join(dir, 'verify.xml'), 'utf8')).toContain(
      '<testsuite name="ctrlrun.verify" hostname="localhost" tests="11" failures="0" errors="0" skipped="5"',
    );
  });

  it('test_T120_a_partial_run_writes_no_badge (a complete run does)', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'ctrlrun.yaml'), NO_TEMPLATES);
    const partial = await run(['verify', '--only', 'G1,G6', '--badge', 'partial.json', '--json'], { cwd: dir });
    expect(partial.code).toBe(0);
    expect(JSON.parse(partial.stdout)).toMatchObject({ partial: true, summary: { passed: 2, applicable: 2, skipped: 9, badge: null } });
    expect(existsSync(join(dir, 'partial.json'))).toBe(false);
    const full = await run(['verify', '--badge', 'badge.json'], { cwd: dir });
    expect(full.code).toBe(0);
    expect(JSON.parse(readFileSync(join(dir, 'badge.json'), 'utf8'))).toEqual({
      schemaVersion: 1,
      label: 'CTRLRun',
      message: 'verified 6/6',
      color: 'brightgreen',
    });
  });

  it('test_T101b_zero_applicable_guarantees_is_not_a_pass: exit 2, the report, and why on stderr', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'ctrlrun.yaml'), 'schema: ctrlrun.policy/v2\nactions: {}\n');
    const r = await run(['verify', '--badge', 'badge.json'], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stdout.trimEnd().split('\n').at(-1)).toMatch(/^0\/0 declared guarantees pass\. 11 not applicable: /);
    expect(r.stderr).toBe('Error: no declared guarantee applies to this policy, and 0/0 is not a pass\n');
    expect(existsSync(join(dir, 'badge.json'))).toBe(false);
  });

  it('refusals exit 2 before any scratch store: observe mode (with the banner), a missing or malformed policy, --only, --store-url', async () => {
    const dir = tempDir();
    const missing = await run(['verify'], { cwd: dir });
    expect([missing.code, missing.stdout]).toEqual([2, '']);
    expect(missing.stderr).toMatch(/^Error: no policy at \S+ctrlrun\.yaml: run 'ctrlrun init'/);
    writeFileSync(join(dir, 'ctrlrun.yaml'), 'schema: ctrlrun.policy/v3\nmode: observe\nactions:\n  a.b: { decision: allow }\n');
    const observe = await run(['verify'], { cwd: dir });
    expect(observe.code).toBe(2);
    expect(observe.stderr.split('\n')[0]).toBe('OBSERVE MODE — nothing is enforced');
    expect(observe.stderr.split('\n')[1]).toMatch(/^Error: .*observe mode/);
    writeFileSync(join(dir, 'ctrlrun.yaml'), 'schema: ctrlrun.policy/v2\nactions:\n  a.b: { decision: maybe }\n');
    expect((await run(['verify'], { cwd: dir })).code).toBe(2);
    writeFileSync(join(dir, 'ctrlrun.yaml'), NO_TEMPLATES);
    for (const argv of [
      ['verify', '--only', ''],
      ['verify', '--only', 'G1,G99'],
      ['verify', '--store-url', 'mysql://x/y'],
      ['verify', '--authority', 'absent.yaml'],
    ]) {
      const r = await run(argv, { cwd: dir });
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/^Error: [^\n]+\n$/);
    }
  });

  it('effect keys naming {resource} or constant: a full report, G4 raced by real processes (never exit 3, never a false G4 failure)', async () => {
    const policies: [string, string, string][] = [
      ['resource: "payment:{payment_id}"\n    effect: "refund:{resource}"', 'PASS', '7/7 declared guarantees pass. 4 not applicable: G1, G2, G8, G9.'],
      ['effect: "deploy:prod"', 'PASS', '7/7 declared guarantees pass. 4 not applicable: G1, G2, G8, G9.'],
      ['effect: "refund:{resource}"', 'N/A', '6/6 declared guarantees pass. 5 not applicable: G1, G2, G4, G8, G9.'],
    ];
    for (const [entry, g4, summary] of policies) {
      const dir = tempDir();
      writeFileSync(join(dir, 'ctrlrun.yaml'), `schema: ctrlrun.policy/v2\nactions:\n  some.action:\n    ${entry}\n    decision: allow\n`);
      const r = await run(['verify'], { cwd: dir });
      expect([r.code, r.stderr], entry).toEqual([0, '']);
      expect(r.stdout, entry).toMatch(new RegExp(`^G4 +one winner under concurrency +${g4} `, 'm'));
      expect(r.stdout.trimEnd().split('\n').at(-1), entry).toBe(summary);
    }
  }, 300_000);

  it('a scratch database that cannot be reached is verify going wrong: exit 3', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'ctrlrun.yaml'), NO_TEMPLATES);
    const r = await run(['verify', '--store-url', 'postgresql://nobody@127.0.0.1:1/none'], { cwd: dir });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/^Error: verify went wrong: the scratch database postgresql:\/\/\*\*\*@127\.0\.0\.1:1\/none cannot be reached: [^\n]+\n$/);
  });
});

describe('the GitHub Action', () => {
  const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

  it('test_T118_the_action_is_a_composite_action_at_the_repository_root', () => {
    const action = parse(readFileSync(join(ROOT, 'action.yml'), 'utf8')) as {
      inputs: Record<string, unknown>;
      runs: { using: string; steps: { run?: string; uses?: string }[] };
    };
    expect(action.runs.using).toBe('composite');
    expect(Object.keys(action.inputs)).toEqual(['policy', 'authority', 'only', 'install', 'badge-path']);
    const runs = action.runs.steps.map((s) => s.run ?? '').join('\n');
    expect(runs.match(/ctrlrun "\$\{args\[@\]\}"/g)).toHaveLength(1);
    expect(runs).toContain('args=(verify --json --junit ctrlrun-verify.xml)');
    // Summary and badge come from that one JSON; the badge is written, never published.
    expect(runs).toContain('renderActionSummary(report)');
    expect(runs).toContain('verifyBadge(report)');
    expect(runs).not.toMatch(/git push|gh-pages|curl /);
    expect(action.runs.steps.at(-1)!.run).toBe('exit ${{ steps.verify.outputs.code }}');
  });

  it('the job summary is rendered from the JSON: every row, N/A rows in full, the summary line last', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'ctrlrun.yaml'), NO_TEMPLATES);
    const r = await run(['verify', '--json'], { cwd: dir });
    const report = JSON.parse(r.stdout) as VerifyReport;
    const md = renderActionSummary(report);
    expect(md).toContain('| G3 | duplicate effect refused | N/A | no action declares an `effect:` template |');
    expect(md.match(/^\| G\d+ \|/gm)).toHaveLength(11);
    expect(md.trimEnd().split('\n').at(-1)).toBe('6/6 declared guarantees pass. 5 not applicable: G3, G4, G5, G8, G9.');
    expect(verifyBadge(report)).toEqual({ schemaVersion: 1, label: 'CTRLRun', message: 'verified 6/6', color: 'brightgreen' });
    expect(verifyBadge({ ...report, partial: true, summary: { ...report.summary, badge: null } })).toBeNull();
  });
});
