/**
 * T313 across OS processes on a real PostgreSQL server (spec 05 §4.3): the window of an M-of-N
 * count is between the read of `approvers` and the update of it. Two processes, two verified
 * people, one request needing two yeses. A TCP proxy holds ANA's `UPDATE` after her connection
 * has read the row (pending, no approver); BO's yes lands in that window from another process.
 * When ANA's update is released it must not write the list she read over the one BO wrote: the
 * record ends granted with both. (A compare-and-set on `status` alone would let her write land
 * and the record would name one approver while two humans answered.)
 */
import { createPgStore } from '@ctrlrun/store-node/pg';
import { ApprovalMismatch, createAction, randomIds } from '@ctrlrun/kernel';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { storedTime } from '../../packages/kernel/src/time.js';
import { start } from '../processes/harness.js';
import { scaled } from '../support/load.js';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';
import { startCommitProxy, type CommitProxy } from '../lost-commit/commit-proxy.js';

const ANA = { agent: 'ops-console', user: 'ana', issuer: 'https://idp.example', entitled: [] as string[] };
const BO = { agent: 'ops-console', user: 'bo', issuer: 'https://idp.example', entitled: [] as string[] };

describePg('two processes answering one quorum request on PostgreSQL', (server) => {
  let db: FreshDatabase;
  let pool: pg.Pool;
  let proxy: CommitProxy;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'quorum');
    pool = new pg.Pool({ connectionString: db.url, max: 2 });
    pool.on('error', () => undefined);
    const u = new URL(db.url);
    proxy = await startCommitProxy({ host: u.hostname, port: Number(u.port) });
  });
  afterAll(async () => {
    await pool?.end();
    await proxy?.close();
    await db?.drop();
  });

  it('test_T313_two_processes_granting_in_the_window_produce_two_approvers', { timeout: scaled(120_000) }, async () => {
    await db.createSchema('quorum');
    const store = await createPgStore(pool, { schema: 'quorum' });
    try {
      const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'pay_313', amount: 100 }, principal: { agent: 'agent-7' } });
      const id = randomIds('apr');
      const now = Date.now();
      await store.putApprovalRequest({
        requestId: id,
        actionHash: action.actionHash,
        action,
        createdAt: storedTime(new Date(now)),
        expiresAt: storedTime(new Date(now + 60 * 60_000)),
        policyHash: `sha256:${'ab'.repeat(32)}`,
        approvalsRequired: 2,
      });

      const url = db.urlFor('quorum');
      const window = proxy.hold(/^\s*UPDATE\b[^;]*\bapprovals\b[^;]*\bapprovers\s*=/i);
      const ana = start({ kind: 'grant', url: proxy.route(url), approval_id: id, approver: 'ana', verified: ANA });
      const held = await Promise.race([
        window,
        ana.finished.then((f) => {
          throw new Error(`ANA's process ended before her UPDATE reached the proxy, so the window never opened: ${JSON.stringify(f.lines)} ${f.stderr}`);
        }),
      ]);
      let anaEnded = false;
      void ana.finished.then(() => (anaEnded = true));
      try {
        // BO answers in the window, straight to the server, from a process of his own.
        const bo = await start({ kind: 'grant', url, approval_id: id, approver: 'bo', verified: BO }).finished;
        const boLine = bo.lines.find((l) => 'granted' in l);
        expect(boLine, `BO's process finished its yes: ${bo.stderr}`).toMatchObject({ granted: false, error: 'ApprovalMismatch', reason: 'pending' });
        expect(anaEnded, "ANA's process is still waiting on her held UPDATE").toBe(false);
        const between = await store.getApproval(id);
        expect(
          between?.approvers?.map((a) => a.user),
          'BO counted while ANA waits',
        ).toEqual(['bo']);
      } finally {
        held.release();
      }
      const anaDone = await ana.finished;
      const anaLine = anaDone.lines.find((l) => 'granted' in l);
      expect(anaLine, `ANA's yes, counted again on what BO wrote: ${anaDone.stderr}`).toMatchObject({ granted: true, approver: 'ana' });

      const row = await store.getApproval(id);
      expect(row, 'granted by the second yes').toMatchObject({ status: 'granted' });
      expect(row!.approvers?.map((a) => a.user).sort(), 'two approvers, neither written over').toEqual(['ana', 'bo']);
      // The record is what a consumer reads: a third yes is refused, the count is closed.
      await expect(store.grantApproval(id, 'cy', { ...BO, user: 'cy' })).rejects.toBeInstanceOf(ApprovalMismatch);
    } finally {
      await store.close();
    }
  });
});
