// Edit-then-approve against a concurrent answer through two handles on one real SQLite file
// (better-sqlite3, BEGIN IMMEDIATE across connections): of an edit and a plain grant or denial
// of one request, exactly one wins, and the loser wrote nothing.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ApprovalRequired, Control, createAction, loadPolicy } from '@ctrlrun/kernel';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-edit-race-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const POLICY = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: approve
`);

describe('edit-then-approve racing another answer on one SQLite file', () => {
  it('two handles, twenty rounds: exactly one answer wins each round, and a losing edit leaves no row', async () => {
    const path = join(dir, 'race.db');
    const a = await createBetterSqlite3Store(path);
    const b = await createBetterSqlite3Store(path);
    try {
      const quiet = { warn: () => undefined };
      const ca = new Control({ policy: POLICY, store: a, logger: quiet });
      const cb = new Control({ policy: POLICY, store: b, logger: quiet });
      for (let round = 0; round < 20; round++) {
        const action = createAction({ name: 'stripe.refund', arguments: { payment_id: `p${round}`, amount: 100 }, principal: { agent: 'agent' } });
        const requestId = ((await ca.execute(action, () => null).catch((e: unknown) => e)) as ApprovalRequired).requestId;
        const edit = ca.grantApproval(requestId, { approver: 'editor', edit: { arguments: { payment_id: `p${round}`, amount: 50 } } });
        const other = round % 2 === 0 ? cb.grantApproval(requestId, { approver: 'granter' }) : cb.denyApproval(requestId, { approver: 'denier' });
        const [e, o] = await Promise.allSettled([edit, other]);
        expect(
          [e.status, o.status].filter((s) => s === 'fulfilled'),
          `round ${round}`,
        ).toHaveLength(1);
        const rows = (await b.listApprovals()).filter((r) => r.request.action.canonicalArguments['payment_id'] === `p${round}`);
        if (e.status === 'fulfilled') {
          expect(rows.map((r) => r.status).sort()).toEqual(['denied', 'granted']);
          expect((await cb.approvalEdit(requestId))?.editor).toBe('editor');
        } else {
          expect(rows).toHaveLength(1);
          expect(rows[0]!.status).toBe(round % 2 === 0 ? 'granted' : 'denied');
          expect(await cb.approvalEdit(requestId)).toBeNull();
        }
      }
    } finally {
      await a.close();
      await b.close();
    }
  }, 120_000);
});
