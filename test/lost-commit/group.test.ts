/**
 * A lost COMMIT of a group (group commit on, pg asked for it): the shared COMMIT of the outcomes
 * of seven callers is lost through the TCP proxy — forwarded with its answer withheld ("landed")
 * or dropped unforwarded ("never received") — and each caller's write is settled by its own
 * re-read on a fresh connection, one named branch each (spec 03 §3.4): landed → answered as
 * written; lost → re-issued alone, once. Every executor runs once, every caller is answered, no
 * effect is recorded failed, and the chain verifies. Then the store conformance suite on pg with
 * group commit on.
 */
import { UPDATE_LANDED, UPDATE_LOST_REISSUE } from '@ctrlrun/kernel/store';
import { Control, createAction, loadPolicy, verifyChain, type StateStore } from '@ctrlrun/kernel';
import { createPgStore, type PgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { nodeProcesses } from '../conformance/cross-process.js';
import { describeStore } from '../conformance/store.case.js';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';
import { startCommitProxy, type CommitProxy } from './commit-proxy.js';

const POLICY = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);
const CALLERS = 8;
const UPDATE_EFFECT = /UPDATE "[^"]+"\.effects/;

describePg('lost COMMIT of a group (group commit on)', (server) => {
  let db: FreshDatabase;
  let proxy: CommitProxy;
  const pools: pg.Pool[] = [];
  let schemas = 0;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'lost_group');
    const u = new URL(db.url);
    proxy = await startCommitProxy({ host: u.hostname, port: Number(u.port) });
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await proxy?.close();
    await db?.drop();
  });
  function pool(url: string): pg.Pool {
    const p = new pg.Pool({ connectionString: url, max: 12 });
    p.on('error', () => undefined);
    pools.push(p);
    return p;
  }

  for (const [mode, branch] of [
    ['land', UPDATE_LANDED],
    ['drop', UPDATE_LOST_REISSUE],
  ] as const) {
    it(`the group's COMMIT lost (${mode}): every caller settled by its own re-read (${branch}), each executor once`, async () => {
      const schema = `group_${++schemas}`;
      await db.createSchema(schema);
      const warnings: Record<string, unknown>[] = [];
      const logger = { warn: (_m: string, attributes?: unknown) => void warnings.push((attributes ?? {}) as Record<string, unknown>) };
      const store = await createPgStore(pool(proxy.route(db.url)), { schema, logger, groupCommit: true });
      const control = new Control({ policy: POLICY, store, logger: { warn: () => undefined } });
      // One action first: the engine then knows the chain head, and the next outcome written at once stands alone.
      await control.execute(
        createAction({ name: 'stripe.refund', arguments: { payment_id: `lg_${schemas}_first`, amount: 5 }, principal: { agent: 'a' } }),
        () => 0,
      );
      const calls = Array<number>(CALLERS).fill(0);
      let arrived = 0;
      let open!: () => void;
      const inside = new Promise<void>((r) => (open = r));
      let fired!: Promise<string[]>;
      const results = await Promise.allSettled(
        Array.from({ length: CALLERS }, (_, i) =>
          control.execute(
            createAction({ name: 'stripe.refund', arguments: { payment_id: `lg_${schemas}_${i}`, amount: 5 }, principal: { agent: 'a' } }),
            async () => {
              calls[i]!++;
              if (++arrived === CALLERS) {
                // Every reservation is written: the next transaction is the group's (the first
                // outcome to arrive is written at once, alone, as one statement with no BEGIN).
                fired = proxy.arm({ mode, when: /^\s*BEGIN/i });
                open();
              }
              await inside;
              return { refund: i };
            },
          ),
        ),
      );
      const statements = await fired;
      expect(
        statements.some((s) => UPDATE_EFFECT.test(s)),
        'the lost COMMIT wrote outcomes',
      ).toBe(true);
      expect(results.map((r) => r.status)).toEqual(Array(CALLERS).fill('fulfilled'));
      expect(calls).toEqual(Array(CALLERS).fill(1));
      // One re-read and branch per caller of the group (a prepared statement bound again is not
      // seen twice by the proxy, so the group's size is read from the branches).
      const branches = warnings.map((w) => w['branch']);
      expect(branches.length, 'the lost COMMIT was a group').toBeGreaterThan(1);
      expect(branches).toEqual(Array(branches.length).fill(branch));
      const rows = await db.sql<{ state: string }>(`SELECT state FROM "${schema}".effects`);
      expect(rows.map((r) => r.state)).toEqual(Array(CALLERS + 1).fill('committed'));
      expect(verifyChain(await store.receipts(), await store.chainHead())).toMatchObject({ ok: true, verified: CALLERS + 1 });
      await store.close();
    });
  }

  describeStore({
    name: 'the store conformance suite on pg with group commit on',
    dialect: 'postgres',
    open: async (clock) => {
      const schema = `conf_${++schemas}`;
      await db.createSchema(schema);
      return createPgStore(pool(db.url), { clock, schema, groupCommit: true });
    },
    reopen: (old: StateStore, clock) => createPgStore(pool(db.url), { clock, schema: (old as PgStore).schema, groupCommit: true }),
    url: (store) => db.urlFor((store as PgStore).schema),
    processes: nodeProcesses(),
  });
});
