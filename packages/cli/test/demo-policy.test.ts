// The demo runs on the policy a new project starts with (issue 35): `ctrlrun demo` writes beside
// its store the very policy `ctrlrun init` writes, and the limits its first lines state are the
// ones that policy decides.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPolicy } from '@ctrlrun/kernel';
import { run, tempDir } from './support.js';

/** `€1,234` as minor units. */
const minor = (euros: string) => Number(euros.replace(/[€,]/g, '')) * 100;

describe('the demo and init share one policy', () => {
  it('the demo writes the policy init writes, byte for byte, and its stated limits are that policy’s decisions', async () => {
    const cwd = tempDir();
    expect((await run(['init'], { cwd })).code).toBe(0);
    const demo = await run(['demo'], { cwd });
    expect(demo.code).toBe(0);
    const started = readFileSync(join(cwd, 'ctrlrun.yaml'), 'utf8');
    expect(readFileSync(join(cwd, '.ctrlrun', 'demo', 'ctrlrun.yaml'), 'utf8')).toBe(started);

    const stated = /^policy: refunds up to (€[\d,]+) run on their own, up to (€[\d,]+) need a human, above that are denied$/m.exec(demo.stdout);
    expect(stated, demo.stdout).not.toBeNull();
    const [allowUpTo, approveUpTo] = [minor(stated![1]!), minor(stated![2]!)];
    const policy = loadPolicy(started);
    const decide = (amount: number) => policy.evaluate('stripe.refund', { payment_id: 'txn_1', amount }).decision;
    expect([decide(allowUpTo), decide(allowUpTo + 1), decide(approveUpTo), decide(approveUpTo + 1)]).toEqual(['allow', 'approve', 'approve', 'deny']);
    // The refund's effect key comes from the policy's template, as in a project init started.
    expect(policy.action('stripe.refund')?.effect).toBe('refund:{payment_id}');
    expect(demo.stdout).toContain('reserve refund:txn_123');
  });
});
