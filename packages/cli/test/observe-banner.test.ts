// T85: under `mode: observe`, `OBSERVE MODE — nothing is enforced` goes to stderr first from
// stats, delegate, revoke and verify, and never from init, demo, approve, deny, receipts,
// effects, resolve and inspect (docs/spec/02-authority-observe-verify.md §4.5).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run, seed, tempDir } from './support.js';

const BANNER = 'OBSERVE MODE — nothing is enforced';
const OBSERVE = `schema: ctrlrun.policy/v3
mode: observe
actions:
  customer.read: {decision: allow}
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_gte: 0, amount_lte: 100000 }
        decision: allow
      - decision: approve
  email.send: {decision: allow, effect: "email:{message_id}"}
  iam.grant_admin: {decision: deny}
`;

describe('T85 the observe banner', { timeout: 120_000 }, () => {
  it('test_T85_the_banner_goes_to_stderr_first_from_the_policy_commands_and_never_from_the_others', async () => {
    const s = await seed();
    writeFileSync(join(s.dir, 'ctrlrun.yaml'), OBSERVE);
    const env = { CTRLRUN_APPROVER: 'ana' };
    const first = async (argv: string[]) => (await run(argv, { cwd: s.dir, env })).stderr.split('\n')[0];
    // Always, even when the command then refuses.
    expect(await first(['stats'])).toBe(BANNER);
    expect(await first(['revoke', 'dlg_unknown'])).toBe(BANNER);
    expect(await first(['delegate', '--parent', 'g_none', '--file', 'none.yaml', '--as', 'refund-agent'])).toBe(BANNER);
    // Never.
    const never: string[][] = [
      ['receipts'],
      ['effects'],
      ['inspect', s.actions.refund],
      ['approve', s.pending[0]],
      ['deny', s.pending[1]],
      ['resolve', s.ambiguousKey, '--committed'],
    ];
    for (const argv of never) {
      const r = await run(argv, { cwd: s.dir, env });
      expect(r.stderr, argv.join(' ')).not.toContain(BANNER);
      expect(r.code, `${argv.join(' ')}: ${r.stderr}`).toBe(0);
    }
    const fresh = tempDir();
    writeFileSync(join(fresh, 'ctrlrun.yaml'), OBSERVE);
    expect((await run(['init'], { cwd: tempDir(), env })).stderr).not.toContain(BANNER);
    expect((await run(['demo'], { cwd: fresh, env })).stderr).not.toContain(BANNER);
  });
});
