// `ctrlrun policy check` (issue 10, findings 10, 21 and 3): the kernel's checkPolicy on the
// operator's files, in-process through main(argv, io).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { EXAMPLE_POLICY_YAML } from '@ctrlrun/kernel';
import { run, tempDir } from './support.js';

const DENY_ABOVE = `schema: ctrlrun.policy/v3
actions:
  stripe.refund:
    rules:
      - when: { amount_gt: 5000000 }
        decision: deny
      - decision: allow
`;

function dir(files: Record<string, string>): string {
  const d = tempDir();
  for (const [name, text] of Object.entries(files)) writeFileSync(join(d, name), text);
  return d;
}

describe('ctrlrun policy check', () => {
  it('flags a rule a missing or mistyped argument turns from deny into allow: exit 1, one line each', async () => {
    const cwd = dir({ 'ctrlrun.yaml': DENY_ABOVE });
    const r = await run(['policy', 'check'], { cwd });
    expect(r.code).toBe(1);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^warning \[rule_skipped\] actions\['stripe\.refund'\]\.rules\[0\] \(deny\) is skipped when 'amount' is missing, or 'amount' is not an integer.*turns deny into allow/,
    );
    expect(lines[1]).toBe(`${join(cwd, 'ctrlrun.yaml')}: 1 finding`);

    const json = await run(['policy', 'check', '--json'], { cwd });
    expect(json.code).toBe(1);
    const doc = JSON.parse(json.stdout) as { schema: string; findings: Record<string, unknown>[] };
    expect(doc.schema).toBe('ctrlrun.policy-check/v1');
    expect(doc.findings).toEqual([
      expect.objectContaining({
        code: 'rule_skipped',
        action: 'stripe.refund',
        argument: 'amount',
        bypasses: ['missing', 'mistyped'],
        from: 'deny',
        to: 'allow',
      }),
    ]);
  });

  it('a clean policy is exit 0; --config and $CTRLRUN_CONFIG choose the file', async () => {
    const cwd = dir({ 'ctrlrun.yaml': DENY_ABOVE, 'clean.yaml': EXAMPLE_POLICY_YAML });
    const byFlag = await run(['policy', 'check', '--config', 'clean.yaml'], { cwd });
    expect(byFlag).toMatchObject({ code: 0, stdout: `${join(cwd, 'clean.yaml')}: no findings\n` });
    const byEnv = await run(['policy', 'check'], { cwd, env: { CTRLRUN_CONFIG: 'clean.yaml' } });
    expect(byEnv.code).toBe(0);
  });

  it("flags a grant's _neq deny-list, and a resource scope on an action whose resource the policy does not derive (the original loads it; exit 1)", async () => {
    const authority = 'schema: ctrlrun.policy/v3\nauthority:\n  grants:\n    - id: g\n      subject: { agent: a }\n      actions: ["stripe.*"]\n';
    const cwd = dir({
      'ctrlrun.yaml': EXAMPLE_POLICY_YAML,
      'neq.yaml': `${authority}      constraints: { account_neq: treasury }\n`,
      'scoped.yaml': `${authority}      resources: ["payment:EU-*"]\n`,
    });
    const neq = await run(['policy', 'check', '--authority', 'neq.yaml'], { cwd });
    expect(neq.code).toBe(1);
    expect(neq.stdout).toMatch(/^warning \[grant_neq\] grant "g" excludes "treasury" of 'account' by _neq/);
    const scoped = await run(['policy', 'check', '--authority', 'scoped.yaml'], { cwd });
    expect(scoped.code).toBe(1);
    expect(scoped.stdout).toMatch(
      /^warning \[grant_resource_claimed\] grant "g" scopes actions\['stripe\.refund'\] by 'resources:', but the entry has no 'resource:' template/m,
    );
  });

  it('a policy that does not load is exit 2; an unknown subcommand is a usage error', async () => {
    const cwd = dir({ 'ctrlrun.yaml': 'schema: ctrlrun.policy/v9\nactions: {}\n' });
    const bad = await run(['policy', 'check'], { cwd });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^Error: .*unknown policy schema/);
    const missing = await run(['policy', 'check', '--config', 'nowhere.yaml'], { cwd });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no policy at/);
    const usage = await run(['policy', 'lint'], { cwd });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/unknown subcommand "lint"; the one subcommand is 'check'/);
  });

  it('prints a control character in the document as an escape, never raw', async () => {
    const cwd = dir({ 'ctrlrun.yaml': DENY_ABOVE.replace('stripe.refund:', '"stripe.refund\\e[2J\\rok":') });
    const r = await run(['policy', 'check'], { cwd });
    expect(r.code).toBe(1);
    expect(r.stdout).not.toMatch(/[\x1b\r]/);
    expect(r.stdout).toContain('\\x1b[2J\\rok');
  });
});

describe('ctrlrun policy check --tools --alias: an MCP upstream tool list against the policy', () => {
  const POLICY = 'schema: ctrlrun.policy/v2\nactions:\n  mcp.pay.refund: {effect: "refund:{payment_id}", decision: allow}\n';

  it('names each upstream tool with no mcp.<alias>.<tool> entry (from a tools/list result or a list of names): exit 1, one line each', async () => {
    const listed = { tools: [{ name: 'refund', inputSchema: {} }, { name: 'lookup' }, { name: 'void' }, { name: 'lookup' }] };
    const cwd = dir({ 'ctrlrun.yaml': POLICY, 'tools.json': JSON.stringify(listed), 'names.json': '["refund", "lookup"]' });
    const r = await run(['policy', 'check', '--tools', 'tools.json', '--alias', 'pay'], { cwd });
    expect(r.code).toBe(1);
    expect(r.stdout.trimEnd().split('\n')).toEqual([
      'warning [tool_without_entry] the upstream tool lookup has no entry mcp.pay.lookup: every call to it will be denied (unknown_action)',
      'warning [tool_without_entry] the upstream tool void has no entry mcp.pay.void: every call to it will be denied (unknown_action)',
      `${join(cwd, 'ctrlrun.yaml')}: 2 findings`,
    ]);
    const json = JSON.parse((await run(['policy', 'check', '--tools', 'names.json', '--alias', 'pay', '--json'], { cwd })).stdout) as { findings: unknown[] };
    expect(json.findings).toEqual([expect.objectContaining({ code: 'tool_without_entry', action: 'mcp.pay.lookup', argument: null })]);
    // Under another alias no tool has an entry; a list the policy covers is clean.
    expect((await run(['policy', 'check', '--tools', 'names.json', '--alias', 'billing'], { cwd })).stdout).toContain('2 findings');
    writeFileSync(join(cwd, 'covered.json'), '["refund"]');
    expect((await run(['policy', 'check', '--tools', 'covered.json', '--alias', 'pay'], { cwd })).code).toBe(0);
  });

  it('refuses a tool list it cannot read (exit 2, never quoting the file) and flags given without their partner (exit 2)', async () => {
    const cwd = dir({ 'ctrlrun.yaml': POLICY, 'bad.json': '{"secret-token-123": ', 'noname.json': '[{"title": "x"}]', 'obj.json': '{"x": 1}' });
    for (const [file, says] of [
      ['bad.json', 'is not JSON'],
      ['noname.json', 'tool [0] has no name'],
      ['obj.json', 'has no tools'],
      ['missing.json', 'cannot be read'],
    ] as const) {
      const r = await run(['policy', 'check', '--tools', file, '--alias', 'pay'], { cwd });
      expect(r.code, file).toBe(2);
      expect(r.stderr, file).toContain(says);
      expect(r.stderr + r.stdout).not.toContain('secret-token-123');
    }
    expect((await run(['policy', 'check', '--tools', 'bad.json'], { cwd })).code).toBe(2);
    expect((await run(['policy', 'check', '--alias', 'pay'], { cwd })).code).toBe(2);
    expect((await run(['policy', 'check', '--tools', 'bad.json', '--alias', 'Bad Alias'], { cwd })).code).toBe(2);
  });

  it('parseToolList: any JSON text is a list of strings or a PolicyError, never another error (property)', async () => {
    const { parseToolList } = await import('../src/commands/policy.js');
    const { PolicyError } = await import('@ctrlrun/kernel');
    fc.assert(
      fc.property(
        fc.oneof(
          fc.json(),
          fc.string(),
          fc.array(fc.oneof(fc.string(), fc.record({ name: fc.string() }))).map((a) => JSON.stringify({ tools: a })),
        ),
        (text) => {
          try {
            const names = parseToolList(text, 'f');
            expect(names.every((n) => typeof n === 'string')).toBe(true);
          } catch (e) {
            expect(e).toBeInstanceOf(PolicyError);
            expect((e as Error).message.length).toBeLessThan(300);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
