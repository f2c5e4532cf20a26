// Edit-then-approve against a concurrent answer through two handles on one real SQLite file
// (better-sqlite3, BEGIN IMMEDIATE across connections): of an edit and a plain grant or denial
// of one request, exactly one wins, the loser is refused by the kernel (the request was already
// answered), and the loser wrote nothing. The two handles are in one process: they take turns at
// the file's write lock (before, the second waited out busy_timeout with the event loop blocked
// and failed with "database is locked", which is what decided every round).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ApprovalMismatch, ApprovalRequired, Control, createAction, loadPolicy } from '@ctrlrun/kernel';
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
      const wins = { edit: 0, other: 0 };
      for (let round = 0; round < 20; round++) {
        const action = createAction({ name: 'stripe.refund', arguments: { payment_id: `p${round}`, amount: 100 }, principal: { agent: 'agent' } });
        const requestId = ((await ca.execute(action, () => null).catch((e: unknown) => e)) as ApprovalRequired).requestId;
        const edit = ca.grantApproval(requestId, { approver: 'editor', edit: { arguments: { payment_id: `p${round}`, amount: 50 } } });
        // Every other pair of rounds, the plain answer is asked once the edit is under way (its
        // transaction may hold the file's write lock): both orders are raced.
        if (Math.floor(round / 2) % 2 === 1) await new Promise((r) => setImmediate(r));
        const other = round % 2 === 0 ? cb.grantApproval(requestId, { approver: 'granter' }) : cb.denyApproval(requestId, { approver: 'denier' });
        const [e, o] = await Promise.allSettled([edit, other]);
        expect(
          [e.status, o.status].filter((s) => s === 'fulfilled'),
          `round ${round}`,
        ).toHaveLength(1);
        const lost = (e.status === 'rejected' ? e.reason : (o as PromiseRejectedResult).reason) as Error;
        expect(lost, `round ${round}: ${lost.message}`).toBeInstanceOf(ApprovalMismatch);
        expect(lost.message).toMatch(/already answered/);
        wins[e.status === 'fulfilled' ? 'edit' : 'other']++;
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
      // Each side won some rounds: both outcomes were checked.
      expect(wins.edit, JSON.stringify(wins)).toBeGreaterThan(0);
      expect(wins.other, JSON.stringify(wins)).toBeGreaterThan(0);
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);
});
