// The paged reads streaming views use (receiptsInChain, receiptsOffChain, effectsPage), on the
// SQLite dialect (sql.js) and on a real PostgreSQL server: the same rows, in keyset pages.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAction, sequentialIds, type StateStore } from '@ctrlrun/kernel';
import { buildReceipt, storedTime } from '@ctrlrun/kernel/store';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { createPgStore } from '@ctrlrun/store-node/pg';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

async function fill(store: StateStore): Promise<void> {
  const ids = sequentialIds();
  for (let i = 1; i <= 23; i++) {
    const action = createAction({ name: 'refund', arguments: { n: i }, principal: { agent: 'a' } }, { ids });
    const at = storedTime(new Date(Date.UTC(2026, 0, 1, 0, 0, i)));
    await store.putReceipt(
      buildReceipt(action, {
        receiptId: `rcp_${String(100 - i)}`,
        decision: 'allow',
        decisionReason: 'r',
        approvalId: null,
        approver: null,
        effectKey: null,
        attempt: 1,
        result: 'committed',
        error: null,
        startedAt: at,
        finishedAt: at,
        policyHash: null,
        policyVersion: null,
        controls: [],
      }),
    );
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
  for (let after: { seq: number; receiptId: string } | null = null; ;) {
    const page = await store.receiptsInChain!({ after, limit });
    rows.push(...page);
    if (page.length < limit) return rows;
    after = { seq: page.at(-1)!.seq!, receiptId: page.at(-1)!.receipt_id };
  }
}

async function pagedEffects(store: StateStore, limit: number, state?: 'committed') {
  const rows = [];
  for (let after: { createdAt: string | null; effectKey: string } | null = null; ;) {
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
      const byKey = (a: { createdAt: string | null; effectKey: string }, b: typeof a) =>
        (a.createdAt ?? '') < (b.createdAt ?? '') ? -1 : (a.createdAt ?? '') > (b.createdAt ?? '') ? 1 : a.effectKey < b.effectKey ? -1 : 1;
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

describe('paged reads on better-sqlite3', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-paged-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let n = 0;
  const file = (): Database.Database => new Database(join(dir, `state-${n++}.db`));
  pagedReadCases(() => createBetterSqlite3Store(file()));

  it('receipts: a page visits its own rows of the seq index, not every row before it (a long chain pages in linear time)', async () => {
    const db = file();
    const store = await createBetterSqlite3Store(db);
    try {
      const insert = db.prepare('INSERT INTO receipts(receipt_id, json, seq, prev_hash, hash) VALUES (?, ?, ?, ?, ?)');
      db.transaction(() => {
        for (let seq = 1; seq <= 20_000; seq++) insert.run(`rcp_${seq}`, '{}', seq, 'p', 'h');
      })();
      // typeof(seq) is the one term of the page's WHERE that the index does not decide, so it is
      // called once per row the page visits: counting the calls counts the rows visited.
      let visited = 0;
      db.function('typeof', { deterministic: true }, (v: unknown) => {
        visited++;
        return v === null ? 'null' : typeof v === 'string' ? 'text' : Number.isInteger(v) ? 'integer' : 'real';
      });
      const page = await store.receiptsInChain!({ after: { seq: 19_000, receiptId: 'rcp_19000' }, limit: 100 });
      expect(page.map((r) => r.seq)).toEqual(Array.from({ length: 100 }, (_, i) => 19_001 + i));
      expect(visited).toBeLessThan(1_000);
    } finally {
      await store.close();
    }
  });
});

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
