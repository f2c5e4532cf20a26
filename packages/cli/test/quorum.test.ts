// `ctrlrun approvals` on a request needing two verified approvers (spec 05 §4): the listing and
// its JSON say "1 of 2 approvals: ana"; an unverified `ctrlrun approve` never counts toward it.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ApprovalMismatch, ApprovalRequired, Control, loadPolicy, protect } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { run, tempDir } from './support.js';

const POLICY = `schema: ctrlrun.policy/v6
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    approvals_required: 2
    decision: approve
`;

async function filed(): Promise<{ dir: string; storePath: string; id: string }> {
  const dir = tempDir();
  writeFileSync(join(dir, 'ctrlrun.yaml'), POLICY);
  mkdirSync(join(dir, '.ctrlrun'), { recursive: true });
  const storePath = join(dir, '.ctrlrun', 'state.db');
  const store = await openStore(storePath);
  const control = new Control({
    policy: loadPolicy(POLICY),
    store,
    principal: { agent: 'refund-agent' },
    approvers: { rolesClaim: 'roles' },
    logger: { warn: () => {} },
  });
  const err = await protect(() => 'ran', { control, name: 'stripe.refund' })({ payment_id: 'txn_9', amount: 5000 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApprovalRequired);
  const id = (err as ApprovalRequired).requestId;
  const counted = await control
    .grantApproval(id, { approver: 'ana', verified: { agent: 'inbox', user: 'ana', issuer: 'https://idp.example' } })
    .catch((e: unknown) => e);
  expect(counted).toBeInstanceOf(ApprovalMismatch);
  await store.close();
  return { dir, storePath, id };
}

describe('ctrlrun approvals with approvals_required: 2', () => {
  it('the listing says "1 of 2 approvals: ana"; --json carries approvals_required, approvers and progress', async () => {
    const { dir, id } = await filed();
    const listed = await run(['approvals'], { cwd: dir });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(id);
    expect(listed.stdout).toContain('1 of 2 approvals: ana');
    const json = await run(['approvals', '--json'], { cwd: dir });
    const row = (JSON.parse(json.stdout) as { approvals: Record<string, unknown>[] }).approvals[0]!;
    expect(row).toMatchObject({ approvals_required: 2, progress: '1 of 2 approvals: ana', approvers: [{ agent: 'inbox', user: 'ana', entitled: [] }] });
  });

  it('ctrlrun approve (no verified identity) does not count toward two: refused, saying so, and the request stays pending', async () => {
    const { dir, storePath, id } = await filed();
    const answered = await run(['approve', id, '--as', 'bo', '--yes'], { cwd: dir });
    expect(answered.code).not.toBe(0);
    expect(answered.stderr).toContain('no verified identity');
    const store = await openStore(storePath, { readOnly: true });
    try {
      expect((await store.getApproval(id))?.status).toBe('pending');
    } finally {
      await store.close();
    }
  });
});
