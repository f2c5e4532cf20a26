/**
 * T163: a continuation outlives its process, not its lease. Two independent better-sqlite3 handles
 * on one file stand in for two processes: one suspends, the other resumes (once).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Control, InvalidArgument, Suspended, createAction, loadPolicy, type JsonObject } from '@ctrlrun/kernel';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-continuation-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const POLICY = `schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`;

describe('continuations across store handles', () => {
  it('test_T163_a_continuation_outlives_its_process_and_is_taken_once', async () => {
    const path = join(dir, 'state.db');
    const clock = () => new Date('2026-01-01T12:00:00Z');
    const first = await createBetterSqlite3Store(path, { clock });
    const a = new Control({ policy: loadPolicy(POLICY), store: first, clock, logger: { warn: () => {} } });
    const action = createAction({
      name: 'stripe.refund',
      arguments: { payment_id: 'txn_x', amount: 700 },
      principal: { agent: 'refund-agent' },
      resource: null,
    });
    const seen: JsonObject[] = [];
    await expect(
      a.execute(action, () => {
        throw new Suspended('tok-cross');
      }),
    ).rejects.toBeInstanceOf(Suspended);
    await first.close();

    const second = await createBetterSqlite3Store(path, { clock });
    const third = await createBetterSqlite3Store(path, { clock });
    try {
      const b = new Control({ policy: loadPolicy(POLICY), store: second, clock, logger: { warn: () => {} } });
      const c = new Control({ policy: loadPolicy(POLICY), store: third, clock, logger: { warn: () => {} } });
      const done = await b.resumeWithReceipt('tok-cross', (args) => {
        seen.push(args);
        return { ok: true };
      });
      expect(done.value).toEqual({ ok: true });
      expect(done.receipt.document).toMatchObject({
        action_id: action.actionId,
        action_hash: action.actionHash,
        result: 'committed',
        effect_key: 'refund:txn_x',
      });
      expect(seen).toEqual([action.canonicalArguments]);
      await expect(c.resume('tok-cross', (args) => seen.push(args))).rejects.toBeInstanceOf(InvalidArgument);
      expect(seen).toHaveLength(1);
      expect(await third.getEffect('refund:txn_x')).toMatchObject({ state: 'committed', attempt: 1 });
      expect((await third.events()).map((e) => e.type)).toEqual([
        'ACTION_PROPOSED',
        'POLICY_EVALUATED',
        'EFFECT_RESERVED',
        'EXECUTION_STARTED',
        'EXECUTION_SUSPENDED',
        'EXECUTION_RESUMED',
        'EXECUTION_COMMITTED',
      ]);
    } finally {
      await second.close();
      await third.close();
    }
  });
});
