// `ctrlrun budgets` (spec 05 §5.1): what each budgeted grant spent per metric in its window,
// beside the limit — the policy's grants and the store's live delegations — for the operator.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Control, NotExecuted, createAction, loadPolicy } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { run, tempDir } from './support.js';

const POLICY = `schema: ctrlrun.policy/v7
authority:
  grants:
    - id: refund-desk
      subject: { agent: "refund-agent" }
      actions: ["stripe.refund"]
      delegable: true
      expires_at: "2099-01-01T00:00:00+00:00"
      budgets: [{metric: amount, limit: 5000, window: P1D}, {metric: count, limit: 20, window: PT1H}]
    - id: reader
      subject: { agent: "*" }
      actions: ["customer.read"]
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
  customer.read: {decision: allow}
`;

async function budgeted(): Promise<{ dir: string; delegationId: string }> {
  const dir = tempDir();
  writeFileSync(join(dir, 'ctrlrun.yaml'), POLICY);
  mkdirSync(join(dir, '.ctrlrun'));
  const store = await openStore(join(dir, '.ctrlrun', 'state.db'));
  const control = new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => {} } });
  const refund = (payment_id: string, amount: number, agent = 'refund-agent') =>
    createAction({ name: 'stripe.refund', arguments: { payment_id, amount }, principal: { agent } });
  await control.execute(refund('p1', 1500), () => 'ok');
  await control.execute(refund('p2', 800), () => 'ok');
  // Failed: its charge is released and never shows.
  await control
    .execute(refund('p3', 2000), () => {
      throw new NotExecuted('card declined');
    })
    .catch(() => undefined);
  const d = await control.delegate(
    'refund-desk',
    {
      subject: { agent: 'helper' },
      actions: ['stripe.refund'],
      expiresAt: '2098-01-01T00:00:00+00:00',
      budgets: [
        { metric: 'amount', limit: 1000, window: 'P1D' },
        { metric: 'count', limit: 5, window: 'PT1H' },
      ],
    },
    { by: { agent: 'refund-agent' } },
  );
  await control.execute(refund('p4', 300, 'helper'), () => 'ok');
  await store.close();
  return { dir, delegationId: d.delegationId };
}

describe('ctrlrun budgets', () => {
  it('shows each budgeted grant and delegation: spent of limit per metric in its window, a failed charge released', async () => {
    const { dir, delegationId } = await budgeted();
    const r = await run(['budgets'], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([
      'refund-desk  amount  2600 of 5000 in the last 1d  (52.0%)',
      'refund-desk  count  3 of 20 in the last 1h  (15.0%)',
      `${delegationId}  amount  300 of 1000 in the last 1d  (30.0%)`,
      `${delegationId}  count  1 of 5 in the last 1h  (20.0%)`,
    ]);
    const only = await run(['budgets', '--grant', delegationId, '--json'], { cwd: dir });
    expect(JSON.parse(only.stdout)).toEqual({
      schema: 'ctrlrun.budgets/v1',
      budgets: [
        { grant_id: delegationId, delegated: true, metric: 'amount', window_seconds: 86400, limit: '1000', spent: '300' },
        { grant_id: delegationId, delegated: true, metric: 'count', window_seconds: 3600, limit: '5', spent: '1' },
      ],
    });
    expect((await run(['budgets', '--grant', 'reader'], { cwd: dir })).stdout).toContain('carries no budget');
  });
});
