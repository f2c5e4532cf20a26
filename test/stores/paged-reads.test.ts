// The paged reads streaming views use (receiptsInChain, receiptsOffChain, effectsPage), on the
// SQLite dialect (sql.js) and on a real PostgreSQL server: the same rows, in keyset pages.
import { createAction, sequentialIds, type StateStore } from '@ctrlrun/kernel';
import { buildReceipt, storedTime } from '@ctrlrun/kernel/store';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { createPgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

async function fill(store: StateStore): Promise<void> {
  const ids = sequentialIds();
  for (let i = 1; i <= 23; i++) {
    const action = createAction({ name: 'refund', arguments: { n: i }, principal: { agent: 'a' } }, { ids });
    const at = storedTime(new Date(Date.UTC(2026, 0, 1, 0, 0, i)));
    await store.putReceipt(buildReceipt(action, {
      receiptId: `rcp_${String(100 - i)}`, decision: 'allow', decisionReason: 'r', approvalId: null, approver: null, effectKey: null, attempt: 1,
      result: 'committed', error: null, startedAt: at, finishedAt: at, policyHash: null, policyVersion: null, controls: [],
    }));
    const key = `k:${String(i % 7)}:${i}`;
    await store.reserveEffect(key, `act_${i}`, 60_000);
    if (i % 3 === 0) {
      await store.beginExecution(key, `act_${i}`);
      await store.commitEffect(key, `act_${i}`, null);
    }
  }
}

async function pagedReceipts(store: StateStore, limit: number) {
  const rows = [];
  for (let after: { seq: number; receiptId: string } | null = null; ; ) {
    const page = await store.receiptsInChain!({ after, limit });
    rows.push(...page);
    if (page.length < limit) return rows;
    after = { seq: page.at(-1)!.seq!, receiptId: page.at(-1)!.receipt_id };
  }
}

async function pagedEffects(store: StateStore, limit: number, state?: 'committed') {
  const rows = [];
  for (let after: { createdAt: string | null; effectKey: string } | null = null; ; ) {
    const page = await store.effectsPage!({ state, after, limit });
    rows.push(...page);
    if (page.length < limit) return rows;
    after = { createdAt: page.at(-1)!.createdAt, effectKey: page.at(-1)!.effectKey };
  }
}

function pagedReadCases(open: () => Promise<StateStore>): void {
  it('receipts: keyset pages cover the chain in seq order; the newest page is its end; nothing is off the chain', async () => {
    const store = await open();
    try {
      await fill(store);
      const whole = await store.receipts();
      for (const limit of [1, 4, 23, 100]) expect(await pagedReceipts(store, limit)).toEqual(whole);
      expect((await store.receiptsInChain!({ newest: true, limit: 3 })).map((r) => r.seq)).toEqual([21, 22, 23]);
      expect(await store.receiptsOffChain!({ limit: 5 })).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('effects: keyset pages give every record (or one state) once, by (createdAt, effectKey); newest from the end', async () => {
    const store = await open();
    try {
      await fill(store);
      const byKey = (a: { createdAt: string | null; effectKey: string }, b: typeof a) => ((a.createdAt ?? '') < (b.createdAt ?? '') ? -1 : (a.createdAt ?? '') > (b.createdAt ?? '') ? 1 : a.effectKey < b.effectKey ? -1 : 1);
      const all = (await store.listEffects()).sort(byKey);
      for (const limit of [1, 5, 23]) expect(await pagedEffects(store, limit)).toEqual(all);
      const committed = all.filter((e) => e.state === 'committed');
      expect(await pagedEffects(store, 2, 'committed')).toEqual(committed);
      expect(await store.effectsPage!({ newest: true, limit: 4 })).toEqual(all.slice(-4));
      expect(await store.effectsPage!({ state: 'committed', newest: true, limit: 2 })).toEqual(committed.slice(-2));
      await expect(store.effectsPage!({ state: 'done' as never, limit: 2 })).rejects.toThrow(/unknown effect state/);
    } finally {
      await store.close();
    }
  });
}

describe('paged reads on sql.js', () => pagedReadCases(() => createSqlJsStore()));

describePg('paged reads on PostgreSQL', (server) => {
  let db: FreshDatabase;
  let pool: pg.Pool;
  let n = 0;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'paged');
    pool = new pg.Pool({ connectionString: db.url, max: 4 });
    pool.on('error', () => undefined);
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });
  pagedReadCases(async () => {
    const schema = `paged_${++n}`;
    await db.createSchema(schema);
    return createPgStore(pool, { schema });
  });
});
