/**
 * Fewer write transactions per action, the same evidence: a state change writes the events that
 * describe it in its own transaction (`TrailingEvents`), the events a pass drafts before its next
 * write go in with that write, the reservation step (approval, reservation, start) is one
 * transaction (`reserveForExecution`), and the outcome carries its receipt. Every case compares
 * against a store that ignores all of it (the contract before it existed), so the events and
 * receipts must be identical; only the number of BEGINs and statements differs.
 */
import {
  AmbiguousEffect,
  AmbiguousWrite,
  Control,
  DuplicateEffect,
  callbackSink,
  createAction,
  loadPolicy,
  sequentialIds,
  type EventDraft,
  type EventRecord,
  type Reservation,
  type StateStore,
} from '@ctrlrun/kernel';
import { MINUTE } from '../src/time.js';
import { SqlStateStore, type SqlDriver, type SqlExecutor, type TrailingEvents } from '@ctrlrun/kernel/store';
import { SqlJsDriver, type SqlJsModule } from '@ctrlrun/store-sqljs';
import initSqlJs from 'sql.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { REFUND_POLICY, T0 } from './harness.js';

let SQL: SqlJsModule;
beforeAll(async () => {
  SQL = (await initSqlJs()) as unknown as SqlJsModule;
});

const ROLL_BACK = Symbol('drop the COMMIT');

/** Counts BEGINs; optionally loses the COMMIT of the next transaction that runs a matching statement. */
class CountingDriver implements SqlDriver {
  readonly name = 'counting';
  readonly dialect = 'sqlite' as const;
  readonly capabilities = Object.freeze({ concurrentConnections: false });
  begins = 0;
  /** Statements sent inside transactions. */
  statements = 0;
  loss: { mode: 'land' | 'drop'; when: RegExp } | null = null;
  constructor(readonly inner: SqlJsDriver) {}
  query: SqlDriver['query'] = (sql, params) => this.inner.query(sql, params);
  exec: SqlDriver['exec'] = (sql) => this.inner.exec(sql);
  close = () => this.inner.close();

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.begins++;
    const loss = this.loss;
    let hit = false;
    let result!: T;
    try {
      await this.inner.transaction(async (tx) => {
        const watched: SqlExecutor = {
          query: (sql, params) => ((hit ||= loss !== null && loss.when.test(sql)), this.statements++, tx.query(sql, params)),
          exec: (sql) => (this.statements++, tx.exec(sql)),
        };
        result = await fn(watched);
        if (hit && loss!.mode === 'drop') throw ROLL_BACK;
        return result;
      });
    } catch (err) {
      if (err !== ROLL_BACK) throw err;
    }
    if (!hit) return result;
    this.loss = null;
    throw new AmbiguousWrite(`[counting] connection lost during COMMIT (${loss!.mode})`);
  }

  async reread<T>(fn: (ex: SqlExecutor) => Promise<T>): Promise<T> {
    return fn(this.inner);
  }
}

/** The contract as it was: no trailing events, no `appendEvents`, no `reserveForExecution`. */
function legacy(real: StateStore): StateStore {
  const strip = new Map<string | symbol, number>([
    ['reserveEffect', 3],
    ['consumeApprovalAndReserve', 5],
    ['beginExecution', 2],
    ['commitEffect', 3],
    ['failEffect', 3],
    ['markAmbiguous', 3],
    ['putReceipt', 1],
  ]);
  return new Proxy(real, {
    get(target, prop, receiver) {
      if (prop === 'appendEvents' || prop === 'reserveForExecution') return undefined;
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      const arity = strip.get(prop);
      return arity === undefined ? v.bind(target) : (...args: unknown[]) => (v as (...a: unknown[]) => unknown).apply(target, args.slice(0, arity));
    },
  });
}

async function scene(options: { legacy?: boolean; policy?: string } = {}) {
  const driver = new CountingDriver(await SqlJsDriver.open(SQL));
  const clock = () => T0;
  const real = await new SqlStateStore(driver, { clock, logger: { warn: () => undefined } }).open();
  const store = options.legacy ? legacy(real) : real;
  const sunk: EventRecord[] = [];
  const control = new Control({
    policy: loadPolicy(options.policy ?? REFUND_POLICY),
    store,
    clock,
    ids: sequentialIds(),
    principal: { agent: 'refund-agent' },
    sinks: [callbackSink({ onEvent: (e) => void sunk.push(e) })],
    logger: { warn: () => undefined },
  });
  driver.begins = 0; // only the case's own writes
  driver.statements = 0;
  return { driver, store: real, control, sunk };
}

const refund = (payment: string, amount = 500) =>
  createAction({ name: 'stripe.refund', arguments: { payment_id: payment, amount }, principal: { agent: 'refund-agent' } });

describe('an allowed action writes its events with its state changes', () => {
  it('the events are those of the one-event-per-transaction path: types, order, data, ids; sinks see them in order', async () => {
    const now = await scene();
    const before = await scene({ legacy: true });
    const action = refund('txn_1');
    expect(await now.control.execute(action, () => ({ id: 're_1' }))).toEqual({ id: 're_1' });
    expect(await before.control.execute(action, () => ({ id: 're_1' }))).toEqual({ id: 're_1' });

    const events = await now.store.events();
    expect(events.map((e) => e.type)).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'EFFECT_RESERVED', 'EXECUTION_STARTED', 'EXECUTION_COMMITTED']);
    expect(events.find((e) => e.type === 'EFFECT_RESERVED')!.data).toEqual({ attempt: 1, lease_expires_at: new Date(T0.getTime() + 5 * MINUTE).toISOString() });
    expect(events.map((e) => e.eventId)).toEqual([1, 2, 3, 4, 5]);
    expect(events).toEqual(await before.store.events());
    expect(now.sunk).toEqual(events);
    expect(before.sunk).toEqual(events);
    expect(await now.store.receipts()).toEqual(await before.store.receipts());
  });

  it('takes 2 write transactions (reserve; outcome and receipt) where one event per transaction took 9', async () => {
    const now = await scene();
    const before = await scene({ legacy: true });
    await now.control.execute(refund('txn_2'), () => 'ok');
    await before.control.execute(refund('txn_2'), () => 'ok');
    expect(before.driver.begins).toBe(9);
    expect(now.driver.begins).toBe(2);
    // Reserve: insert the key executing (SQLite reads it only if it was taken), the four events
    // in one INSERT. Outcome: compare-and-set on the row the reservation wrote (unread), its
    // event, then the chain (lock the head, the row, the head's hash).
    expect(now.driver.statements).toBe(7);
    console.log(
      `allowed action: ${now.driver.begins} transactions / ${now.driver.statements} statements (one event per transaction: ${before.driver.begins} / ${before.driver.statements})`,
    );
  });

  it('a refused duplicate: the refused reservation, then its events and receipt in one transaction', async () => {
    const now = await scene();
    const before = await scene({ legacy: true });
    const [first, again] = [refund('txn_dup'), refund('txn_dup')];
    for (const s of [now, before]) {
      await s.control.execute(first, () => 'ok');
      s.driver.begins = 0;
      s.driver.statements = 0;
      await expect(s.control.execute(again, () => 'never')).rejects.toBeInstanceOf(DuplicateEffect);
    }
    expect(now.driver.begins).toBe(2);
    expect(before.driver.begins).toBe(5);
    expect(await now.store.events()).toEqual(await before.store.events());
    expect(await now.store.receipts()).toEqual(await before.store.receipts());
    expect(now.sunk).toEqual(await now.store.events());
    console.log(
      `refused duplicate: ${now.driver.begins} transactions / ${now.driver.statements} statements (one event per transaction: ${before.driver.begins} / ${before.driver.statements})`,
    );
  });

  it('an approved action: APPROVAL_CONSUMED and EFFECT_RESERVED ride on the consumption, unchanged', async () => {
    const action = refund('txn_3', 500_000);
    const run = async (s: Awaited<ReturnType<typeof scene>>) => {
      const id = await s.control.execute(action, () => 'never').catch((e: { requestId: string }) => e.requestId);
      await s.control.grantApproval(id, { approver: 'alice' });
      s.driver.begins = 0;
      s.driver.statements = 0;
      await s.control.execute(action, () => 'ok', { approvalId: id });
      return s.driver.begins;
    };
    const now = await scene();
    const before = await scene({ legacy: true });
    expect(await run(before)).toBe(10);
    expect(await run(now)).toBe(2);
    console.log(
      `approved action: ${now.driver.begins} transactions / ${now.driver.statements} statements (one event per transaction: ${before.driver.begins} / ${before.driver.statements})`,
    );
    expect(await now.store.receipts()).toEqual(await before.store.receipts());
    const events = await now.store.events();
    expect(events.slice(-6).map((e) => e.type)).toEqual([
      'ACTION_PROPOSED',
      'POLICY_EVALUATED',
      'APPROVAL_CONSUMED',
      'EFFECT_RESERVED',
      'EXECUTION_STARTED',
      'EXECUTION_COMMITTED',
    ]);
    expect(events).toEqual(await before.store.events());
    expect(now.sunk).toEqual(events);
  });

  it('failed and lost outcomes: EXECUTION_FAILED and EXECUTION_AMBIGUOUS are unchanged', async () => {
    const now = await scene();
    const before = await scene({ legacy: true });
    const { NotExecuted } = await import('@ctrlrun/kernel');
    const [failing, lost] = [refund('txn_4'), refund('txn_5')];
    for (const s of [now, before]) {
      await expect(
        s.control.execute(failing, () => {
          throw new NotExecuted('declined');
        }),
      ).rejects.toBeInstanceOf(NotExecuted);
      await expect(
        s.control.execute(lost, () => {
          throw new Error('read timeout');
        }),
      ).rejects.toThrow('read timeout');
    }
    const events = await now.store.events();
    expect(events.map((e) => e.type).filter((t) => t.startsWith('EXECUTION_'))).toEqual([
      'EXECUTION_STARTED',
      'EXECUTION_FAILED',
      'EXECUTION_STARTED',
      'EXECUTION_AMBIGUOUS',
    ]);
    expect(events).toEqual(await before.store.events());
    expect(now.sunk).toEqual(events);
    expect(await now.store.getEffect('refund:txn_5')).toMatchObject({ state: 'ambiguous' });
  });

  it('ACTION_PROPOSED is stored even when a step before the next event throws', async () => {
    const s = await scene();
    const policy = loadPolicy(REFUND_POLICY);
    const broken = new Proxy(policy, {
      get: (t, p) => {
        if (p === 'evaluate')
          return () => {
            throw new Error('policy exploded');
          };
        const v = Reflect.get(t, p, t) as unknown;
        return typeof v === 'function' ? v.bind(t) : v;
      },
    });
    const control = new Control({ policy: broken, store: s.store, clock: () => T0, principal: { agent: 'refund-agent' }, logger: { warn: () => undefined } });
    await expect(control.execute(refund('txn_6'), () => 'never')).rejects.toThrow('policy exploded');
    expect((await s.store.events()).map((e) => e.type)).toEqual(['ACTION_PROPOSED']);
  });
});

describe('a refused state change writes none of its events', () => {
  it('a held key: the refusal path writes EFFECT_RESERVATION_REFUSED, never EFFECT_RESERVED', async () => {
    const s = await scene();
    await s.store.reserveEffect('refund:txn_7', 'act_other', 5 * MINUTE);
    await expect(s.control.execute(refund('txn_7'), () => 'never')).rejects.toBeInstanceOf(DuplicateEffect);
    const types = (await s.store.events()).map((e) => e.type);
    expect(types).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'EFFECT_RESERVATION_REFUSED']);
    expect(s.sunk.map((e) => e.type)).toEqual(types);
  });

  it('reserveEffect: a refusal, and a kept write raised after commit (lapsed lease → ambiguous), store no drafts', async () => {
    const s = await scene();
    const draft = (type: EventDraft['type']): EventDraft => ({
      ts: T0.toISOString(),
      type,
      actionId: 'act_b',
      effectKey: 'refund:k',
      approvalId: null,
      data: {},
    });
    const events: TrailingEvents<Reservation> = { drafts: () => [draft('EFFECT_RESERVED')] };
    await s.store.reserveEffect('refund:k', 'act_a', 5 * MINUTE);
    await expect(s.store.reserveEffect('refund:k', 'act_b', 5 * MINUTE, events)).rejects.toBeInstanceOf(DuplicateEffect);
    expect(events.stored).toBeUndefined();
    // A lease that lapsed: the row is kept ambiguous (committed), the refusal raised, no events.
    let now = T0.getTime();
    const moving = await new SqlStateStore(new CountingDriver(await SqlJsDriver.open(SQL)), {
      clock: () => new Date(now),
      logger: { warn: () => undefined },
    }).open();
    await moving.reserveEffect('refund:lapsed', 'act_a', MINUTE);
    now += 2 * MINUTE;
    let called = 0;
    const kept: TrailingEvents<Reservation> = { drafts: () => (called++, [draft('EFFECT_RESERVED')]) };
    await expect(moving.reserveEffect('refund:lapsed', 'act_b', MINUTE, kept)).rejects.toBeInstanceOf(AmbiguousEffect);
    expect(await moving.getEffect('refund:lapsed')).toMatchObject({ state: 'ambiguous', actionId: 'act_a' });
    expect(called).toBe(0);
    expect(kept.stored).toBeUndefined();
    expect(await moving.events()).toEqual([]);
    expect(await s.store.events()).toEqual([]);
  });
});

describe('a lost COMMIT settles the events with the write, exactly once', () => {
  const draft = (n: number): EventDraft => ({
    ts: T0.toISOString(),
    type: 'EFFECT_RESERVED',
    actionId: 'act_a',
    effectKey: 'refund:lost',
    approvalId: null,
    data: { n },
  });

  for (const [mode, what] of [
    ['land', 'landed (a1.row1.ours): not written again'],
    ['drop', 'never arrived (a1.row2.reinsert): re-issued with the write'],
  ] as const) {
    it(`reserveEffect whose COMMIT was lost and ${what}`, async () => {
      const driver = new CountingDriver(await SqlJsDriver.open(SQL));
      const store = await new SqlStateStore(driver, { clock: () => T0, logger: { warn: () => undefined } }).open();
      await store.appendEvent(draft(0));
      driver.loss = { mode, when: /^INSERT INTO effects/ };
      const events: TrailingEvents<Reservation> = { drafts: (r) => [draft(r.attempt), draft(r.attempt + 1)] };
      const r = await store.reserveEffect('refund:lost', 'act_a', MINUTE, events);
      expect(r).toMatchObject({ attempt: 1 });
      const stored = await store.events();
      expect(stored.map((e) => e.data)).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }]);
      expect(events.stored).toEqual(stored.slice(1));
    });
  }

  for (const [mode, what] of [
    ['land', 'landed (a1.row1.ours)'],
    ['drop', 'never arrived (a1.row2.reinsert)'],
  ] as const) {
    it(`reserveForExecution whose COMMIT was lost and ${what}: the executing row is ours, its events once`, async () => {
      const driver = new CountingDriver(await SqlJsDriver.open(SQL));
      const warned: unknown[] = [];
      const store = await new SqlStateStore(driver, { clock: () => T0, logger: { warn: (...a: unknown[]) => void warned.push(a) } }).open();
      driver.loss = { mode, when: /^INSERT INTO effects/ };
      const events: TrailingEvents<[unknown, Reservation]> = { drafts: ([, r]) => [draft(r.attempt), { ...draft(r.attempt + 1), type: 'EXECUTION_STARTED' }] };
      const [approval, r] = await store.reserveForExecution({ key: 'refund:lost', actionId: 'act_a', leaseMs: MINUTE, approval: null }, events);
      expect(approval).toBeNull();
      expect(r).toMatchObject({ attempt: 1 });
      expect(await store.getEffect('refund:lost')).toMatchObject({ state: 'executing', actionId: 'act_a', attempt: 1 });
      const stored = await store.events();
      expect(stored.map((e) => e.type)).toEqual(['EFFECT_RESERVED', 'EXECUTION_STARTED']);
      expect(events.stored).toEqual(stored);
      expect(JSON.stringify(warned)).toContain(mode === 'land' ? 'a1.row1.ours' : 'a1.row2.reinsert');
    });
  }

  for (const [mode, what] of [
    ['land', 'landed (a2.row1.landed)'],
    ['drop', 'never arrived (a2.row2.reissue)'],
  ] as const) {
    it(`commitEffect with its receipt whose COMMIT was lost and ${what}: one receipt, no gap`, async () => {
      const driver = new CountingDriver(await SqlJsDriver.open(SQL));
      const store = await new SqlStateStore(driver, { clock: () => T0, logger: { warn: () => undefined } }).open();
      const control = new Control({
        policy: loadPolicy(REFUND_POLICY),
        store,
        clock: () => T0,
        ids: sequentialIds(),
        principal: { agent: 'refund-agent' },
        logger: { warn: () => undefined },
      });
      driver.loss = { mode, when: /^UPDATE effects/ };
      const { receipt } = await control.executeWithReceipt(refund('txn_lost'), () => 'ok');
      expect(receipt.seq).toBe(1);
      const rows = await store.receipts();
      expect(rows.map((r) => r.seq)).toEqual([1]);
      expect((await store.events()).filter((e) => e.type === 'EXECUTION_COMMITTED')).toHaveLength(1);
      expect(await store.getEffect('refund:txn_lost')).toMatchObject({ state: 'committed' });
    });
  }

  for (const [mode, what] of [
    ['land', 'landed (a2.row1.landed)'],
    ['drop', 'never arrived (a2.row2.reissue)'],
  ] as const) {
    it(`commitEffect whose COMMIT was lost and ${what}: EXECUTION_COMMITTED once`, async () => {
      const driver = new CountingDriver(await SqlJsDriver.open(SQL));
      const store = await new SqlStateStore(driver, { clock: () => T0, logger: { warn: () => undefined } }).open();
      await store.reserveEffect('refund:lost', 'act_a', MINUTE);
      await store.beginExecution('refund:lost', 'act_a');
      driver.loss = { mode, when: /^UPDATE effects/ };
      const events: TrailingEvents<unknown> = { drafts: () => [{ ...draft(9), type: 'EXECUTION_COMMITTED' }] };
      await store.commitEffect('refund:lost', 'act_a', { id: 're_1' }, events);
      const stored = await store.events();
      expect(stored.map((e) => e.type)).toEqual(['EXECUTION_COMMITTED']);
      expect(events.stored).toEqual(stored);
      expect(await store.getEffect('refund:lost')).toMatchObject({ state: 'committed', resultJson: '{"id":"re_1"}' });
    });
  }
});
