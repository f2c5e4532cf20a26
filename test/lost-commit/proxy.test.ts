/**
 * Lost COMMIT on a real PostgreSQL server (spec 03 §3.4, T155–T156): `pg` talks to the server
 * through a TCP proxy that loses one COMMIT on cue — dropped unforwarded ("never received") or
 * forwarded and its answer withheld ("landed") — and can refuse the re-read's connection. Each
 * case runs a real `Control.execute` and checks the branch logged, the executor's call count, the
 * record read straight from the server, and that no effect is ever recorded `failed`.
 */
import { INSERT_LANDED, INSERT_FOUND_OTHER, INSERT_LOST_REISSUE, UPDATE_FOUND_OTHER, UPDATE_LANDED, UPDATE_LOST_REISSUE } from '@ctrlrun/kernel/store';
import { AmbiguousEffect, AmbiguousWrite, Control, DuplicateEffect, createAction, loadPolicy, verifyChain, type Clock } from '@ctrlrun/kernel';
import { createPgStore, type PgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';
import { startCommitProxy, type CommitProxy } from './commit-proxy.js';

const POLICY = loadPolicy(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);
const T0 = new Date('2026-01-01T12:00:00Z');

// Both ways a store writes on PostgreSQL: statement by statement (the default), and with
// `prepare: true`, each write step one statement whose outcome compares the row the reservation
// wrote without reading it first.
for (const prepare of [false, true])
  describePg(`lost COMMIT through a TCP proxy (prepare: ${prepare})`, (server) => {
    let db: FreshDatabase;
    let proxy: CommitProxy;
    const pools: pg.Pool[] = [];
    let cases = 0;

    beforeAll(async () => {
      db = await freshDatabase(server.url, 'lost_commit');
      const u = new URL(db.url);
      proxy = await startCommitProxy({ host: u.hostname, port: Number(u.port) });
    });
    afterAll(async () => {
      await Promise.all(pools.map((p) => p.end()));
      await proxy?.close();
      await db?.drop();
    });

    function pool(url: string): pg.Pool {
      const p = new pg.Pool({ connectionString: url, max: 4 });
      p.on('error', () => undefined); // an idle client cut by the proxy is dropped by the pool
      pools.push(p);
      return p;
    }

    /** One case: its own schema, a store and a Control whose connections go through the proxy. */
    async function scene(clock: Clock = () => T0) {
      const schema = `lost_${++cases}`;
      await db.createSchema(schema);
      const warnings: Record<string, unknown>[] = [];
      const logger = { warn: (_message: string, attributes?: unknown) => void warnings.push((attributes ?? {}) as Record<string, unknown>) };
      const store = await createPgStore(pool(proxy.route(db.url)), { schema, clock, logger, prepare });
      const control = new Control({ policy: POLICY, store, clock, logger: { warn: () => undefined } });
      const calls = { n: 0 };
      const action = createAction({ name: 'stripe.refund', arguments: { payment_id: `pay_${cases}`, amount: 500 }, principal: { agent: 'refund-agent' } });
      const key = `refund:pay_${cases}`;
      const row = async () => (await db.sql<Record<string, unknown>>(`SELECT * FROM "${schema}".effects WHERE effect_key = $1`, [key]))[0] ?? null;
      const branches = () => warnings.map((w) => w['branch']);
      openSchemas.push(schema);
      return { schema, store, control, calls, action, key, row, branches, warnings };
    }

    const openSchemas: string[] = [];
    afterEach(async () => {
      // Across every case: no effect is ever recorded failed by a lost commit.
      for (const schema of openSchemas.splice(0)) {
        const failed = await db.sql<{ n: string }>(`SELECT count(*)::text AS n FROM "${schema}".effects WHERE state = 'failed'`);
        expect(failed[0]!.n, `no failed effect in ${schema}`).toBe('0');
      }
    });

    // Not anchored: with prepare the effect row's INSERT/UPDATE travels in one statement with the
    // step's events (and receipt), a WITH … statement (combined.ts).
    const INSERT_EFFECT = /INSERT INTO "[^"]+"\.effects/;
    const UPDATE_EFFECT = /UPDATE "[^"]+"\.effects/;

    /**
     * The lost write was the outcome's compare-and-set on the row the reservation wrote, unread —
     * `updateEffectExact` in a transaction with `prepare: false`; with prepare, the outcome and its
     * kernel-sealed receipt as one statement that commits on its own (`appendOutcome`) — so the
     * intent the re-read settles is the remembered row, not one read.
     */
    function unread(statements: string[]): void {
      const updates = statements.filter((x) => UPDATE_EFFECT.test(x));
      expect(updates).toHaveLength(1);
      expect(updates[0]).toMatch(
        prepare
          ? /^WITH h AS \(SELECT seq, hash FROM [\s\S]* u AS \(UPDATE [\s\S]*updated_at IS NOT DISTINCT FROM/
          : /AND updated_at IS NOT DISTINCT FROM \$15::text$/,
      );
      if (prepare)
        expect(
          statements.filter((x) => /^\s*BEGIN/i.test(x)),
          'no transaction around it',
        ).toEqual([]);
      expect(
        statements.filter((x) => /^SELECT [\s\S]* FROM "[^"]+"\.effects/.test(x)),
        'the row was not read',
      ).toEqual([]);
    }

    /**
     * With prepare, the lost write was a fresh key's reservation and its events as one statement
     * that commits on its own (`reserveAlone`): no transaction around it.
     */
    function reservedAlone(statements: string[]): void {
      if (!prepare) return;
      expect(statements.filter((x) => INSERT_EFFECT.test(x))).toEqual([
        expect.stringMatching(/^WITH r AS \(INSERT INTO "[^"]+"\.effects[\s\S]*INSERT INTO "[^"]+"\.events/),
      ]);
      expect(
        statements.filter((x) => /^\s*BEGIN/i.test(x)),
        'no transaction around it',
      ).toEqual([]);
    }

    it('test_T155_a_connection_killed_during_commit_is_resolved_by_the_re_read (landed reservation → a1.row1.ours)', async () => {
      const s = await scene();
      const fired = proxy.arm({ mode: 'land', when: INSERT_EFFECT });
      const value = await s.control.execute(s.action, () => (s.calls.n++, { refund_id: 're_1' }));
      expect(await fired).toEqual(expect.arrayContaining([expect.stringMatching(INSERT_EFFECT)]));
      reservedAlone(await fired);
      expect(value).toEqual({ refund_id: 're_1' });
      expect(s.calls.n).toBe(1);
      expect(s.branches()).toEqual([INSERT_LANDED]);
      expect(s.warnings[0]).toMatchObject({ logger: 'ctrlrun.postgres', level: 'WARNING', branch: INSERT_LANDED });
      expect(await s.row()).toMatchObject({ state: 'committed', action_id: s.action.actionId, attempt: 1 });
    });

    it('a landed reservation whose re-read finds events of the same action after its own (another delivery refused on its row): landed, its own events found by what they hold', async () => {
      const s = await scene();
      // The same action delivered again, straight to the server, while the first one's reply is withheld: refused on the first one's row.
      const other = await createPgStore(pool(db.url), { schema: s.schema, clock: () => T0, prepare });
      const otherControl = new Control({ policy: POLICY, store: other, clock: () => T0, logger: { warn: () => undefined } });
      const refused: unknown[] = [];
      const fired = proxy.arm({
        mode: 'land',
        when: INSERT_EFFECT,
        interlude: async () => void refused.push(await otherControl.execute(s.action, () => (s.calls.n++, { refund_id: 're_other' })).catch((e: unknown) => e)),
      });
      const value = await s.control.execute(s.action, () => (s.calls.n++, { refund_id: 're_5' }));
      reservedAlone(await fired);
      expect(refused).toEqual([expect.any(DuplicateEffect)]);
      expect(value).toEqual({ refund_id: 're_5' });
      expect(s.calls.n).toBe(1);
      expect(s.branches()).toEqual([INSERT_LANDED]);
      const types = (await db.sql<{ type: string }>(`SELECT type FROM "${s.schema}".events WHERE action_id = $1 ORDER BY event_id`, [s.action.actionId])).map(
        (e) => e.type,
      );
      expect(types, 'the refusal came after the reservation, before the outcome').toContain('EFFECT_RESERVATION_REFUSED');
      expect(types.indexOf('EFFECT_RESERVATION_REFUSED')).toBeLessThan(types.indexOf('EXECUTION_COMMITTED'));
      expect(await s.row()).toMatchObject({ state: 'committed', action_id: s.action.actionId, attempt: 1 });
    });

    it('test_T155b_a_landed_commit_on_a_transition_is_found_by_the_re_read (a2.row1.landed)', async () => {
      const s = await scene();
      let fired: Promise<string[]> | null = null;
      // Armed from inside the executor: the next effect UPDATE is commitEffect's.
      const value = await s.control.execute(s.action, () => {
        s.calls.n++;
        fired = proxy.arm({ mode: 'land', when: UPDATE_EFFECT });
        return { refund_id: 're_2' };
      });
      expect(await fired!).toEqual(expect.arrayContaining([expect.stringMatching(UPDATE_EFFECT)]));
      unread(await fired!);
      expect(value).toEqual({ refund_id: 're_2' });
      expect(s.calls.n).toBe(1);
      expect(s.branches()).toEqual([UPDATE_LANDED]);
      expect(await s.row()).toMatchObject({ state: 'committed', result_json: '{"refund_id":"re_2"}' });
    });

    it('test_T155c_the_re_read_is_not_an_action_id_match (another row with our action_id → a1.row3.refuse; executor called once)', async () => {
      const s = await scene();
      // The same action, retried by another worker a second later, straight to the server.
      const other = await createPgStore(pool(db.url), { schema: s.schema, clock: () => new Date(T0.getTime() + 1000), prepare });
      const otherControl = new Control({ policy: POLICY, store: other, clock: () => new Date(T0.getTime() + 1000), logger: { warn: () => undefined } });
      const fired = proxy.arm({
        mode: 'drop',
        when: INSERT_EFFECT,
        interlude: async () => void (await otherControl.execute(s.action, () => (s.calls.n++, { refund_id: 're_other' }))),
      });
      const err = await s.control.execute(s.action, () => (s.calls.n++, { refund_id: 're_3' })).catch((e: unknown) => e);
      await fired;
      expect(err).toBeInstanceOf(DuplicateEffect);
      expect(err).toMatchObject({ state: 'committed' });
      expect(s.calls.n, 'the executor ran once, in the other worker').toBe(1);
      expect(s.branches()).toEqual([INSERT_FOUND_OTHER]);
      expect(await s.row()).toMatchObject({ state: 'committed', action_id: s.action.actionId, result_json: '{"refund_id":"re_other"}' });
    });

    it('test_T155d_a_never_received_commit_of_a_reservation_is_retried (a1.row2.reinsert)', async () => {
      const s = await scene();
      const fired = proxy.arm({ mode: 'drop', when: INSERT_EFFECT });
      const value = await s.control.execute(s.action, () => (s.calls.n++, { refund_id: 're_4' }));
      reservedAlone(await fired);
      expect(value).toEqual({ refund_id: 're_4' });
      expect(s.calls.n).toBe(1);
      expect(s.branches()).toEqual([INSERT_LOST_REISSUE]);
      expect(await s.row()).toMatchObject({ state: 'committed', attempt: 1 });
    });

    // T411a (spec 05 §5.1): the re-issue after a lost COMMIT carries the reservation's budget
    // charges, so the reservation and its charge land together or not at all — never a reserved
    // effect the ledger never saw (reserved=1, charged=0) and never a charge twice.
    for (const renewal of [false, true])
      for (const mode of ['drop', 'land'] as const)
        it(`test_T411a_an_ambiguous_commit_resolves_the_charge_with_the_reservation (${renewal ? 'renewal after FAILED' : 'first reservation'}, COMMIT ${mode === 'drop' ? 'never received' : 'landed'})`, async () => {
          const s = await scene();
          const charge = { grantId: 'support', metric: 'amount', amount: 700, limit: 10_000, window: 86_400 };
          const ledger = async () =>
            (await s.store.budgets!().consumptions({ effectKey: s.key })).map((r) => ({
              amount: r.amount,
              attempt: r.attempt,
              released: r.releasedAt !== null,
            }));
          if (renewal) {
            await s.store.reserveEffect(s.key, 'act_first', 5 * 60_000, undefined, [charge]);
            await s.store.beginExecution(s.key, 'act_first');
            await s.store.failEffect(s.key, 'act_first', 'declined by the bank');
          }
          const fired = proxy.arm({ mode, when: renewal ? UPDATE_EFFECT : INSERT_EFFECT });
          const reservation = await s.store.reserveEffect(s.key, 'act_lost', 5 * 60_000, undefined, [charge]);
          const statements = await fired;
          expect(
            statements.some((x) => /budget_ledger/.test(x)),
            'the lost transaction carried the charge',
          ).toBe(true);
          expect(reservation).toMatchObject({ attempt: renewal ? 2 : 1 });
          expect(s.branches()).toEqual([
            renewal ? (mode === 'drop' ? UPDATE_LOST_REISSUE : UPDATE_LANDED) : mode === 'drop' ? INSERT_LOST_REISSUE : INSERT_LANDED,
          ]);
          expect(await s.row()).toMatchObject({ state: 'reserved', action_id: 'act_lost', attempt: renewal ? 2 : 1 });
          expect(await ledger(), 'one live charge for the reservation that stands, none doubled').toEqual([
            ...(renewal ? [{ amount: 700n, attempt: 1, released: true }] : []),
            { amount: 700n, attempt: renewal ? 2 : 1, released: false },
          ]);
        });

    /** A COMMIT held until the re-read has looked (its branch logged), then let through: it lands while the re-issue waits on its row. */
    function lateCommit(s: { branches(): unknown[] }, after: string, when: RegExp): Promise<string[]> {
      let land!: () => void;
      const landAfter = new Promise<void>((resolve) => (land = resolve));
      void (async () => {
        // Bounded: a case that fails before the re-read leaves no loop behind.
        const deadline = Date.now() + 60_000;
        while (!s.branches().includes(after) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
        land();
      })();
      return proxy.arm({ mode: 'late', when, landAfter });
    }

    it('a reservation whose COMMIT lands after the re-read looked (a1.row2.reinsert, then a1.row1.ours): the re-issue meets our own row, and the action runs once, never refused', async () => {
      const s = await scene();
      const fired = lateCommit(s, INSERT_LOST_REISSUE, INSERT_EFFECT);
      const value = await s.control.execute(s.action, () => (s.calls.n++, { refund_id: 're_late' }));
      await fired;
      expect(value).toEqual({ refund_id: 're_late' });
      expect(s.calls.n).toBe(1);
      expect(s.branches()).toEqual([INSERT_LOST_REISSUE, INSERT_LANDED]);
      expect(await s.row()).toMatchObject({ state: 'committed', action_id: s.action.actionId, attempt: 1 });
      const started = await db.sql<{ n: string }>(`SELECT count(*)::text AS n FROM "${s.schema}".events WHERE action_id = $1 AND type = 'EXECUTION_STARTED'`, [
        s.action.actionId,
      ]);
      expect(started[0]!.n, "one start, the late COMMIT's").toBe('1');
    });

    it('an outcome whose COMMIT lands after the re-read looked (a2.row2.reissue, then a2.row1.landed): the caller gets its value, the receipt is the landed one', async () => {
      const s = await scene();
      let fired: Promise<string[]> | null = null;
      const value = await s.control.execute(s.action, () => {
        s.calls.n++;
        fired = lateCommit(s, UPDATE_LOST_REISSUE, UPDATE_EFFECT);
        return { refund_id: 're_late_2' };
      });
      await fired!;
      expect(value).toEqual({ refund_id: 're_late_2' });
      expect(s.calls.n).toBe(1);
      expect(s.branches()).toEqual([UPDATE_LOST_REISSUE, UPDATE_LANDED]);
      expect(await s.row()).toMatchObject({ state: 'committed', result_json: '{"refund_id":"re_late_2"}' });
      const receipts = await db.sql<{ status: string }>(`SELECT result AS status FROM "${s.schema}".receipts WHERE action_id = $1`, [s.action.actionId]);
      expect(receipts.map((r) => r.status)).toEqual(['committed']);
    });

    it('test_T155e_a_never_received_commit_of_a_transition_is_reissued (a2.row2.reissue)', async () => {
      const s = await scene();
      let fired: Promise<string[]> | null = null;
      const value = await s.control.execute(s.action, () => {
        s.calls.n++;
        fired = proxy.arm({ mode: 'drop', when: UPDATE_EFFECT });
        return { refund_id: 're_5' };
      });
      unread(await fired!);
      expect(value).toEqual({ refund_id: 're_5' });
      expect(s.calls.n).toBe(1);
      expect(s.branches()).toEqual([UPDATE_LOST_REISSUE]);
      expect(await s.row()).toMatchObject({ state: 'committed', result_json: '{"refund_id":"re_5"}' });
    });

    it('a never-received COMMIT of the unread compare-and-set, the row marked ambiguous by another worker meanwhile (a2.row3.refuse): refused as ambiguous, executor called once, never failed', async () => {
      const s = await scene();
      const other = await createPgStore(pool(db.url), { schema: s.schema, clock: () => T0, prepare });
      let fired: Promise<string[]> | null = null;
      const err = await s.control
        .execute(s.action, () => {
          s.calls.n++;
          fired = proxy.arm({
            mode: 'drop',
            when: UPDATE_EFFECT,
            // The outcome never reached the server; another worker sweeps the row before the re-read.
            interlude: async () => void (await other.markAmbiguous(s.key, s.action.actionId, 'swept by another worker')),
          });
          return { refund_id: 're_7' };
        })
        .catch((e: unknown) => e);
      unread(await fired!);
      expect(err).toBeInstanceOf(AmbiguousEffect);
      expect(s.calls.n).toBe(1);
      expect(s.branches()).toEqual([UPDATE_FOUND_OTHER]);
      expect(await s.row()).toMatchObject({ state: 'ambiguous', action_id: s.action.actionId, result_json: null });
    });

    it('a failed re-read after a lost outcome writes nothing more: the caller learns it is unknown, the row stays executing, never failed', async () => {
      const s = await scene();
      let fired: Promise<string[]> | null = null;
      const err = await s.control
        .execute(s.action, () => {
          s.calls.n++;
          fired = proxy.arm({ mode: 'drop', when: UPDATE_EFFECT, refuseAfter: 1 });
          return { refund_id: 're_8' };
        })
        .catch((e: unknown) => e);
      unread(await fired!);
      expect(err).toBeInstanceOf(AmbiguousWrite);
      expect((err as Error).message).toMatch(/re-read on a fresh connection failed/);
      expect(s.calls.n).toBe(1);
      expect(s.branches(), 'no branch taken without a re-read').toEqual([]);
      expect(await s.row()).toMatchObject({ state: 'executing', action_id: s.action.actionId, result_json: null });
    });

    it('test_T156_a_failed_re_read_writes_nothing (never-received reservation, re-read refused)', async () => {
      const s = await scene();
      const fired = proxy.arm({ mode: 'drop', when: INSERT_EFFECT, refuseAfter: 1 });
      const err = await s.control.execute(s.action, () => (s.calls.n++, 'never')).catch((e: unknown) => e);
      await fired;
      expect(err).toBeInstanceOf(AmbiguousWrite);
      expect((err as Error).message).toMatch(/re-read on a fresh connection failed/);
      expect(s.calls.n, 'never executed').toBe(0);
      expect(s.branches(), 'no branch taken without a re-read').toEqual([]);
      expect(await s.row(), 'nothing written').toBeNull();
      const types = (await db.sql<{ type: string }>(`SELECT type FROM "${s.schema}".events ORDER BY event_id`)).map((e) => e.type);
      expect(
        types.filter((t) => /^(EFFECT|EXECUTION)_/.test(t)),
        `nothing after the decision: ${types.join(', ')}`,
      ).toEqual([]);
    });

    it('test_T156_a_failed_re_read_after_a_landed_reservation_costs_availability_not_a_double_execution', async () => {
      const s = await scene();
      const fired = proxy.arm({ mode: 'land', when: INSERT_EFFECT, refuseAfter: 1 });
      const err = await s.control.execute(s.action, () => (s.calls.n++, 'never')).catch((e: unknown) => e);
      await fired;
      expect(err).toBeInstanceOf(AmbiguousWrite);
      expect(s.calls.n).toBe(0);
      // The reservation landed and stays as written (the reservation step writes the record
      // `executing` in the same transaction): a retry is refused while its lease lives.
      expect(await s.row()).toMatchObject({ state: 'executing', action_id: s.action.actionId });
      await expect((s.store as PgStore).reserveEffect(s.key, 'act_retry', 60_000)).rejects.toMatchObject({
        code: 'ERR_DUPLICATE_EFFECT',
        state: 'in_progress',
      });
    });

    /** The action has exactly one receipt, committed; no event of it twice; the chain verifies. */
    async function oneCommittedReceipt(s: Awaited<ReturnType<typeof scene>>): Promise<void> {
      const receipts = await db.sql<{ result: string }>(`SELECT result FROM "${s.schema}".receipts WHERE action_id = $1`, [s.action.actionId]);
      expect(receipts.map((r) => r.result)).toEqual(['committed']);
      const types = (await db.sql<{ type: string }>(`SELECT type FROM "${s.schema}".events WHERE action_id = $1 ORDER BY event_id`, [s.action.actionId])).map(
        (e) => e.type,
      );
      expect(new Set(types).size, `no event twice: ${types.join(', ')}`).toBe(types.length);
      expect(verifyChain(await s.store.receipts(), await s.store.chainHead()).ok).toBe(true);
    }

    /**
     * Cuts every connection each time one of the next `n` receipt parts (the chain head's UPDATE)
     * reaches the proxy. Each hold is armed once the one before is let go: its statement, met
     * again on the dead connection, is not the next one.
     */
    async function cutReceiptParts(n: number): Promise<void> {
      for (let i = 0; i < n; i++) {
        const held = await proxy.hold(/UPDATE "[^"]+"\.receipt_chain/);
        proxy.cutAll();
        held.release();
      }
    }

    if (!prepare)
      it('an outcome whose receipt part was cut mid-transaction once: written again with its receipt, each once, nothing settled', async () => {
        const s = await scene();
        const cuts = cutReceiptParts(1);
        const value = await s.control.execute(s.action, () => (s.calls.n++, { refund_id: 're_cut_once' }));
        await cuts;
        expect(value).toEqual({ refund_id: 're_cut_once' });
        expect(s.calls.n).toBe(1);
        expect(s.branches()).toEqual([]);
        await oneCommittedReceipt(s);
      });

    // Statement by statement only: with prepare the outcome and its receipt are one statement,
    // and a cut there is the outcome's own lost reply (settled above).
    if (!prepare)
      it("an outcome whose receipt part was cut mid-transaction twice, then its lone receipt's COMMIT lost (receipt.reissue): the outcome and its receipt stand, each once", async () => {
        const s = await scene();
        // The receipt part's connection cut, and again on the second try (T170: the outcome is then
        // written with its receipt pending, and the receipt chained alone: that COMMIT is lost).
        const cuts = cutReceiptParts(2);
        const fired = proxy.arm({ mode: 'drop', when: /UPDATE "[^"]+"\.receipts SET json/ });
        const running = s.control.execute(s.action, () => (s.calls.n++, { refund_id: 're_cut' }));
        await cuts;
        const value = await running;
        await fired;
        expect(value).toEqual({ refund_id: 're_cut' });
        expect(s.calls.n).toBe(1);
        expect(s.branches()).toEqual(['receipt.reissue']);
        expect(await s.row()).toMatchObject({ state: 'committed', result_json: '{"refund_id":"re_cut"}' });
        await oneCommittedReceipt(s);
      });

    if (!prepare)
      it("an outcome whose receipt part was cut mid-transaction twice, then its lone receipt's COMMIT landed with the reply lost (receipt.landed): the pending receipt is chained once", async () => {
        const s = await scene();
        const cuts = cutReceiptParts(2);
        const fired = proxy.arm({ mode: 'land', when: /UPDATE "[^"]+"\.receipts SET json/ });
        const running = s.control.execute(s.action, () => (s.calls.n++, { refund_id: 're_cut_landed' }));
        await cuts;
        const value = await running;
        await fired;
        expect(value).toEqual({ refund_id: 're_cut_landed' });
        expect(s.calls.n).toBe(1);
        expect(s.branches()).toEqual(['receipt.landed']);
        await oneCommittedReceipt(s);
        expect((await s.store.receipts()).every((r) => r.seq !== null)).toBe(true);
      });

    if (!prepare)
      it("an outcome whose receipt part was cut twice, then its lone receipt's connection cut before COMMIT: the receipt is written on the second try, once", async () => {
        const s = await scene();
        // Twice the outcome's receipt part, then the lone receipt's transaction (nothing of it committed).
        const cuts = cutReceiptParts(3);
        const running = s.control.execute(s.action, () => (s.calls.n++, { refund_id: 're_cut_twice' }));
        await cuts;
        const value = await running;
        expect(value).toEqual({ refund_id: 're_cut_twice' });
        expect(s.calls.n).toBe(1);
        expect(await s.row()).toMatchObject({ state: 'committed' });
        await oneCommittedReceipt(s);
      });
  });
