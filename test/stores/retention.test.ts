/**
 * Retention (spec 05 §5.3–§5.4, issue 31) on every SQL store: sql.js, better-sqlite3, PGlite and
 * PostgreSQL. A prune leaves the chain verifiable across the gap, seeded from its checkpoint
 * (T540); through the newest receipt is refused (T541); the checkpoint moves only forward (T542);
 * a live hold in the prefix refuses it naming the hold, open-ended holds included, and only a
 * person's release lifts it (T545, T545b, T545c); an AMBIGUOUS effect in the prefix refuses it
 * naming the effect (T546's unsettled half); a prune that would add a break is refused (T544).
 * Then a 100,000-receipt better-sqlite3 store, seeded with bulk SQL, pruned to its last 1,000.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { Control, createAction, listHolds, loadPolicy, placeHold, pruneChain, PruneRefused, releaseHold, verifyChain, type StateStore } from '@ctrlrun/kernel';
import { buildReceipt, sealReceipt } from '@ctrlrun/kernel/store';
import { GENESIS_HASH } from '../../packages/kernel/src/hash.js';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { createPgStore } from '@ctrlrun/store-node/pg';
import { createPgliteStore } from '@ctrlrun/store-node/pglite';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

const POLICY = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);
const principal = { agent: 'refund-agent' };
const quiet = { warn: () => undefined };

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-retention-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `n` committed refunds, one receipt each (seq 1…n). */
async function refunds(store: StateStore, n: number, from = 0): Promise<void> {
  const control = new Control({ policy: POLICY, store });
  for (let i = from; i < from + n; i++) {
    await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `pay_${i}`, amount: 100 }, principal }), async () => ({ ok: i }));
  }
}

async function verifiedFromCheckpoint(store: StateStore) {
  const checkpoint = (await store.pruneCheckpoint?.()) ?? null;
  return { checkpoint, report: verifyChain(await store.receipts(), await store.chainHead(), { checkpoint }) };
}

async function refusal(p: Promise<unknown>): Promise<PruneRefused> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PruneRefused);
  return err as PruneRefused;
}

/** The scenarios, on one store factory. */
function retentionSuite(open: () => Promise<StateStore>) {
  it('T540: a prune leaves the chain verifiable across the gap, seeded from its checkpoint', async () => {
    const store = await open();
    await refunds(store, 10);
    const before = await store.receipts();
    const hash5 = before.find((r) => r.seq === 5)!.hash;
    const result = await pruneChain(store, { through: 5, olderThanMs: 0, by: 'ana' });
    // The prune's own receipt was chained first (seq 11), then seq 1–5 deleted.
    expect(result.receiptSeq).toBe(11);
    expect(result.receiptsDeleted).toBe(5);
    expect(result.checkpoint).toMatchObject({ seq: 5, hash: hash5, schema: 'ctrlrun.receipt/v7' });
    const { checkpoint, report } = await verifiedFromCheckpoint(store);
    expect(checkpoint).toEqual({ seq: 5, hash: hash5 });
    expect(report).toMatchObject({ ok: true, verified: 6, chained: 6 });
    expect((await store.receipts()).map((r) => r.seq)).toEqual([6, 7, 8, 9, 10, 11]);
    // Unseeded, the same rows are `missing` at 1: the checkpoint is what makes the gap legitimate.
    expect(verifyChain(await store.receipts(), await store.chainHead()).breaks.map((b) => b.name)).toContain('missing');
    const last = (await store.receipts()).at(-1)!;
    expect(JSON.parse(last.json!)).toMatchObject({
      action: 'ctrlrun.retention.prune',
      arguments: { through: 5, older_than_seconds: 0 },
      principal: { user: 'ana' },
    });
    await store.close();
  });

  it('T541/T542: through the newest receipt is refused, and the checkpoint moves only forward', async () => {
    const store = await open();
    await refunds(store, 4);
    // The prune's receipt is seq 5, the newest: through 5 (or beyond) is refused.
    expect((await refusal(pruneChain(store, { through: 5, olderThanMs: 0, by: 'ana' }))).reason).toBe('through_head');
    await pruneChain(store, { through: 3, olderThanMs: 0, by: 'ana' });
    const again = await refusal(pruneChain(store, { through: 2, olderThanMs: 0, by: 'ana' }));
    expect(again.reason).toBe('not_forward');
    expect(again.message).toMatch(/already pruned through seq 3/);
    expect((await store.pruneCheckpoint!())!.seq).toBe(3);
    expect((await verifiedFromCheckpoint(store)).report.ok).toBe(true);
    await store.close();
  });

  it('T545/T545b/T545c: a live hold refuses a prune that would cross it, naming it; only a release lifts it', async () => {
    const store = await open();
    await refunds(store, 8);
    const hold = await placeHold(store, { fromSeq: 3, toSeq: 4, reason: 'litigation 2026-114', by: 'legal@acme' });
    expect(hold).toMatchObject({ fromSeq: 3, toSeq: 4, reason: 'litigation 2026-114', placedBy: 'legal@acme', releasedAt: null });
    expect(hold.holdId).toMatch(/^hold_[0-9a-f]{32}$/);
    // Below the hold is fine.
    await pruneChain(store, { through: 2, olderThanMs: 0, by: 'ana' });
    const refused = await refusal(pruneChain(store, { through: 5, olderThanMs: 0, by: 'ana' }));
    expect(refused.reason).toBe('held');
    expect(refused.detail.holdId).toBe(hold.holdId);
    expect(refused.message).toContain('litigation 2026-114');
    expect((await store.pruneCheckpoint!())!.seq).toBe(2);
    await releaseHold(store, hold.holdId, 'legal@acme');
    await expect(releaseHold(store, hold.holdId, 'legal@acme')).rejects.toThrow(/no live hold/);
    // An open-ended hold holds everything after its start.
    const open2 = await placeHold(store, { fromSeq: 6, reason: 'audit', by: 'legal@acme' });
    expect((await refusal(pruneChain(store, { through: 7, olderThanMs: 0, by: 'ana' }))).detail.holdId).toBe(open2.holdId);
    await pruneChain(store, { through: 5, olderThanMs: 0, by: 'ana' });
    expect((await listHolds(store)).map((h) => [h.holdId, h.releasedBy])).toEqual([
      [hold.holdId, 'legal@acme'],
      [open2.holdId, null],
    ]);
    expect((await verifiedFromCheckpoint(store)).report.ok).toBe(true);
    await store.close();
  });

  it('T546: an AMBIGUOUS effect in the prefix refuses the prune, naming the effect; resolved, it goes', async () => {
    const store = await open();
    await refunds(store, 2);
    const control = new Control({ policy: POLICY, store });
    await expect(
      control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: 'pay_lost', amount: 5 }, principal }), async () => {
        throw new Error('socket hang up');
      }),
    ).rejects.toThrow();
    expect((await store.getEffect('refund:pay_lost'))!.state).toBe('ambiguous');
    await refunds(store, 2, 10);
    const refused = await refusal(pruneChain(store, { through: 4, olderThanMs: 0, by: 'ana' }));
    expect(refused.reason).toBe('unsettled');
    expect(refused.detail.effectKey).toBe('refund:pay_lost');
    expect(refused.message).toContain('"refund:pay_lost" is AMBIGUOUS');
    expect(await store.pruneCheckpoint!()).toBeNull();
    expect((await store.receipts()).length).toBeGreaterThanOrEqual(6);
    await control.resolveEffect('refund:pay_lost', 'failed', { by: 'ana' });
    await pruneChain(store, { through: 4, olderThanMs: 0, by: 'ana' });
    expect((await verifiedFromCheckpoint(store)).report.ok).toBe(true);
    await store.close();
  });

  it('T546: a committed effect of the prefix charged inside the --older-than window refuses the prune, naming it; outside it, its ledger rows go with it', async () => {
    const store = await open();
    await refunds(store, 4);
    // A charge the original's ledger holds for the committed refund at seq 2 (this build charges none itself yet).
    const now = new Date().toISOString().replace('Z', '+00:00');
    await rawExec(
      store,
      `INSERT INTO budget_ledger(grant_id, metric, amount, effect_key, attempt, consumed_at) VALUES ('support', 'amount', 100, 'refund:pay_1', 1, '${now}')`,
    );
    const refused = await refusal(pruneChain(store, { through: 3, olderThanMs: 30 * 86_400_000, by: 'ana' }));
    expect(refused.reason).toBe('charged');
    expect(refused.detail.effectKey).toBe('refund:pay_1');
    expect(refused.message).toMatch(/inside the --older-than window/);
    const pruned = await pruneChain(store, { through: 3, olderThanMs: 0, by: 'ana' });
    expect(pruned.ledgerRowsDeleted).toBe(1);
    expect((await verifiedFromCheckpoint(store)).report.ok).toBe(true);
    await store.close();
  });

  it('T544: a prune that would add a break is refused with the seq named; a break already there does not refuse it (T543)', async () => {
    const store = await open();
    await refunds(store, 6);
    // Seq 4's stored document made unreadable: the checkpoint would be 3, seq 4 deleted, and the walk from 3 would find 5 `missing` 4.
    // Done through the store's own SQL: every store's receipts table is the same.
    const rows = await store.receipts();
    const r4 = rows.find((r) => r.seq === 4)!;
    await rawExec(store, `UPDATE receipts SET json = '{"not":"a receipt"}' WHERE receipt_id = '${r4.receipt_id}'`);
    const before = verifyChain(await store.receipts(), await store.chainHead());
    expect(before.breaks.map((b) => `${b.name}@${b.seq}`)).toEqual(['content_altered@4', 'link_broken@5']);
    const refused = await refusal(pruneChain(store, { through: 4, olderThanMs: 0, by: 'ana' }));
    expect(refused.reason).toBe('new_break');
    expect(refused.message).toMatch(/missing at seq 4/);
    // Pruning below the damage keeps the existing breaks and adds none: allowed.
    await pruneChain(store, { through: 2, olderThanMs: 0, by: 'ana' });
    const after = (await verifiedFromCheckpoint(store)).report;
    expect(after.breaks.map((b) => `${b.name}@${b.seq}`)).toEqual(['content_altered@4', 'link_broken@5']);
    await store.close();
  });
}

/** Raw SQL on the store's own database, for tampering (each store below registers its handle). */
const rawHandles = new WeakMap<StateStore, (sql: string) => Promise<void>>();
async function rawExec(store: StateStore, sql: string): Promise<void> {
  const run = rawHandles.get(store);
  if (!run) throw new Error('no raw handle for this store');
  await run(sql);
}

describe('retention on sql.js', () => {
  retentionSuite(async () => {
    const store = await createSqlJsStore();
    rawHandles.set(store, async (sql) => void (await store.driver.exec(sql)));
    return store;
  });
});

let files = 0;
describe('retention on better-sqlite3', () => {
  retentionSuite(async () => {
    const path = join(dir, `r${++files}.db`);
    const store = await createBetterSqlite3Store(path);
    rawHandles.set(store, async (sql) => {
      const db = new Database(path);
      db.exec(sql);
      db.close();
    });
    return store;
  });
});

describe('retention on PGlite', () => {
  retentionSuite(async () => {
    const lite = new PGlite();
    const store = await createPgliteStore(lite);
    rawHandles.set(store, async (sql) => void (await lite.exec(sql)));
    const close = store.close.bind(store);
    store.close = async () => {
      await close();
      await lite.close();
    };
    return store;
  });
});

describePg('retention on PostgreSQL', (server) => {
  let db: FreshDatabase;
  const pools: pg.Pool[] = [];
  let schemas = 0;
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await db?.drop();
  });
  retentionSuite(async () => {
    db ??= await freshDatabase(server.url, 'retention');
    const schema = `ret_${++schemas}`;
    await db.createSchema(schema);
    const pool = new pg.Pool({ connectionString: db.url, max: 4 });
    pool.on('error', () => undefined);
    pools.push(pool);
    const store = await createPgStore(pool, { schema, logger: quiet });
    rawHandles.set(store, async (sql) => void (await db.sql(`SET search_path = "${schema}"; ${sql}`)));
    return store;
  });
});

describe('a 100,000-receipt store pruned to its last 1,000 (better-sqlite3)', () => {
  it('verifies ok, seeded from the checkpoint', { timeout: 600_000 }, async () => {
    const N = 100_000;
    const path = join(dir, 'big.db');
    await (await createBetterSqlite3Store(path)).close();
    // Seeded with bulk SQL: documents built and sealed as the store seals them, inserted in one transaction.
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'pay_bulk', amount: 1 }, principal });
    const db = new Database(path);
    const insert = db.prepare(
      'INSERT INTO receipts(receipt_id, action_id, effect_key, result, json, ts, seq, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    let prev = GENESIS_HASH;
    db.transaction(() => {
      for (let seq = 1; seq <= N; seq++) {
        const t = new Date(Date.UTC(2026, 0, 1) + seq * 1000).toISOString();
        const draft = buildReceipt(action, {
          receiptId: `ctr_${seq.toString(16).padStart(32, '0')}`,
          decision: 'allow',
          decisionReason: 'bulk',
          approvalId: null,
          approver: null,
          effectKey: null,
          attempt: 1,
          result: 'committed',
          error: null,
          startedAt: t,
          finishedAt: t,
          policyHash: null,
          policyVersion: null,
          controls: [],
        });
        const sealed = sealReceipt(draft.document, seq, prev);
        insert.run(draft.receiptId, action.actionId, null, 'committed', sealed.json, t.replace('Z', '+00:00'), seq, prev, sealed.hash);
        prev = sealed.hash;
      }
      db.prepare('UPDATE receipt_chain SET seq = ?, hash = ? WHERE id = 1').run(N, prev);
    })();
    db.close();

    const store = await createBetterSqlite3Store(path);
    // The prune's receipt is N + 1; keep the last 1,000 receipts: N − 999 … N + 1 minus the newest one is 1,000 with it.
    const through = N + 1 - 1000;
    const result = await pruneChain(store, { through, olderThanMs: 0, by: 'ana' });
    expect(result.receiptsDeleted).toBe(through);
    expect(result.checkpoint.seq).toBe(through);
    const { checkpoint, report } = await verifiedFromCheckpoint(store);
    expect(checkpoint!.seq).toBe(through);
    expect(report).toMatchObject({ ok: true, verified: 1000, chained: 1000, head_seq: N + 1 });
    await store.close();
  });
});
