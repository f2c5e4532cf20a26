/**
 * Lost COMMIT without a server (spec 03 §3.4): the pure branch decision of Tables A1/A2, Table A's
 * reading of COMMIT errors, and SqlStateStore's settling of a lost COMMIT — each of the six named
 * branches, the one-re-issue bound and the failed re-read — driven through a scripted driver over
 * sql.js that loses COMMITs on cue. The same paths on a real server, through a TCP proxy, are in
 * proxy.test.ts.
 */
import {
  standaloneErrorOutcome,
  INSERT_LANDED,
  INSERT_FOUND_OTHER,
  INSERT_LOST_REISSUE,
  UPDATE_LANDED,
  UPDATE_FOUND_OTHER,
  UPDATE_LOST_REISSUE,
  LOST_COMMIT_BRANCHES,
  SqlStateStore,
  WRITTEN_COLUMNS,
  commitErrorOutcome,
  lostInsertBranch,
  lostUpdateBranch,
  sameWrittenColumns,
  type SqlDriver,
  type SqlExecutor,
} from '@ctrlrun/kernel/store';
import { AmbiguousEffect, AmbiguousWrite, DuplicateEffect, StoreError, type EffectRecord, type EventRecord } from '@ctrlrun/kernel';
import { MINUTE } from '../../packages/kernel/src/time.js';
import { SqlJsDriver, type SqlJsModule } from '@ctrlrun/store-sqljs';
import fc from 'fast-check';
import initSqlJs from 'sql.js';
import { beforeAll, describe, expect, it } from 'vitest';

const T0 = new Date('2026-01-01T12:00:00Z');
const LEASE = 5 * MINUTE;

function record(over: Partial<EffectRecord> = {}): EffectRecord {
  return {
    effectKey: 'refund:42',
    state: 'reserved',
    actionId: 'act_ours',
    attempt: 1,
    leaseExpiresAt: '2026-01-01T12:05:00+00:00',
    resultJson: null,
    error: null,
    createdAt: '2026-01-01T12:00:00+00:00',
    updatedAt: '2026-01-01T12:00:00+00:00',
    resolvedBy: null,
    ...over,
  };
}

/** A different value of the same column kind. */
function other(column: (typeof WRITTEN_COLUMNS)[number], r: EffectRecord): Partial<EffectRecord> {
  switch (column) {
    case 'attempt':
      return { attempt: r.attempt + 1 };
    case 'state':
      return { state: r.state === 'reserved' ? 'executing' : 'reserved' };
    case 'leaseExpiresAt':
      return { leaseExpiresAt: r.leaseExpiresAt === null ? '2026-01-01T12:05:00+00:00' : null };
    default:
      return { [column]: `${String(r[column])}x` };
  }
}

describe('Tables A1/A2: the branch decision (pure)', () => {
  it('names exactly the six branches of the spec', () => {
    expect(LOST_COMMIT_BRANCHES).toEqual(['a1.row1.ours', 'a1.row2.reinsert', 'a1.row3.refuse', 'a2.row1.landed', 'a2.row2.reissue', 'a2.row3.refuse']);
    expect(WRITTEN_COLUMNS).toEqual(['effectKey', 'state', 'actionId', 'attempt', 'leaseExpiresAt', 'createdAt', 'updatedAt']);
  });

  it('A1: identical row → ours; no row → reinsert; any other row → refuse', () => {
    const ours = record();
    expect(lostInsertBranch(ours, { ...ours })).toBe(INSERT_LANDED);
    expect(lostInsertBranch(ours, null)).toBe(INSERT_LOST_REISSUE);
    expect(lostInsertBranch(ours, record({ actionId: 'act_theirs' }))).toBe(INSERT_FOUND_OTHER);
  });

  it('A1: an action_id match alone is never ours — every one of the seven columns counts', () => {
    const ours = record();
    for (const column of WRITTEN_COLUMNS) {
      if (column === 'actionId') continue;
      const found = { ...ours, ...other(column, ours) };
      expect(found.actionId).toBe(ours.actionId);
      expect(lostInsertBranch(ours, found), column).toBe(INSERT_FOUND_OTHER);
    }
  });

  it('A1: columns the INSERT does not write (result, error, resolver) do not decide', () => {
    const ours = record();
    expect(lostInsertBranch(ours, { ...ours, resultJson: '{"x":1}', error: 'e', resolvedBy: 'cli:local' })).toBe(INSERT_LANDED);
  });

  it('A2: target → landed; unchanged pre-state → reissue; anything else or no row → refuse', () => {
    const prior = record({ state: 'executing', updatedAt: '2026-01-01T12:00:01+00:00' });
    const target = { ...prior, state: 'committed' as const, leaseExpiresAt: null, resultJson: '{}', updatedAt: '2026-01-01T12:00:02+00:00' };
    expect(lostUpdateBranch(prior, target, { ...target })).toBe(UPDATE_LANDED);
    expect(lostUpdateBranch(prior, target, { ...prior })).toBe(UPDATE_LOST_REISSUE);
    expect(lostUpdateBranch(prior, target, { ...prior, state: 'ambiguous', leaseExpiresAt: null })).toBe(UPDATE_FOUND_OTHER);
    expect(lostUpdateBranch(prior, target, null)).toBe(UPDATE_FOUND_OTHER);
    // A renewal: the same failed attempt is the pre-state; a renewal by someone else is not ours.
    const failed = record({ state: 'failed', leaseExpiresAt: null, actionId: 'act_old' });
    const renewed = {
      ...failed,
      state: 'reserved' as const,
      actionId: 'act_ours',
      attempt: 2,
      leaseExpiresAt: '2026-01-01T12:10:00+00:00',
      updatedAt: '2026-01-01T12:05:00+00:00',
    };
    expect(lostUpdateBranch(failed, renewed, { ...renewed })).toBe(UPDATE_LANDED);
    expect(lostUpdateBranch(failed, renewed, { ...failed })).toBe(UPDATE_LOST_REISSUE);
    expect(lostUpdateBranch(failed, renewed, { ...renewed, actionId: 'act_theirs' })).toBe(UPDATE_FOUND_OTHER);
  });

  it('property: the decision is exactly "all seven written columns equal"', () => {
    const text = fc.string({ maxLength: 6 });
    const effect = fc.record({
      effectKey: text,
      state: fc.constantFrom('reserved', 'executing', 'committed', 'failed', 'ambiguous' as const),
      actionId: text,
      attempt: fc.integer({ min: 1, max: 4 }),
      leaseExpiresAt: fc.option(text),
      resultJson: fc.option(text),
      error: fc.option(text),
      createdAt: fc.option(text),
      updatedAt: fc.option(text),
      resolvedBy: fc.option(text),
    }) as fc.Arbitrary<EffectRecord>;
    fc.assert(
      fc.property(effect, effect, effect, (prior, target, found) => {
        const same = (a: EffectRecord, b: EffectRecord) => WRITTEN_COLUMNS.every((c) => a[c] === b[c]);
        expect(sameWrittenColumns(found, target)).toBe(same(found, target));
        expect(lostInsertBranch(target, found)).toBe(same(found, target) ? INSERT_LANDED : INSERT_FOUND_OTHER);
        expect(lostUpdateBranch(prior, target, found)).toBe(
          same(found, target) ? UPDATE_LANDED : same(found, prior) ? UPDATE_LOST_REISSUE : UPDATE_FOUND_OTHER,
        );
      }),
    );
  });
});

describe('Table A: what an error from COMMIT means', () => {
  it('40001 and 40P01 are failed writes; anything else, 57014 included, is ambiguous', () => {
    const pgError = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { code });
    expect(commitErrorOutcome(pgError('40001'))).toBe('failed');
    expect(commitErrorOutcome(pgError('40P01'))).toBe('failed');
    expect(commitErrorOutcome(new Error('wrapped', { cause: pgError('40001') }))).toBe('failed');
    expect(commitErrorOutcome(pgError('57014'))).toBe('ambiguous');
    expect(commitErrorOutcome(pgError('57P01'))).toBe('ambiguous');
    expect(commitErrorOutcome(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBe('ambiguous');
    expect(commitErrorOutcome(new Error('Connection terminated unexpectedly'))).toBe('ambiguous');
    expect(commitErrorOutcome('timeout')).toBe('ambiguous');
  });

  it('a write that commits on its own: an error the server reports rolls it back, save those that may come after the commit', () => {
    const server = (code: string, severity = 'ERROR') => Object.assign(new Error(`sqlstate ${code}`), { code, severity });
    for (const code of ['23505', '40001', '40P01', '22P02', '57014', 'P0001']) expect(standaloneErrorOutcome(server(code)), code).toBe('failed');
    expect(standaloneErrorOutcome(new Error('wrapped', { cause: server('23505') }))).toBe('failed');
    for (const code of ['57P01', '57P02', '08006', '08003', 'XX000', '58030', '53100'])
      expect(standaloneErrorOutcome(server(code, 'FATAL')), code).toBe('ambiguous');
    // A socket's error is never the server's report, even with a five-letter code.
    expect(standaloneErrorOutcome(Object.assign(new Error('write EPIPE'), { code: 'EPIPE', syscall: 'write' }))).toBe('ambiguous');
    expect(standaloneErrorOutcome(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBe('ambiguous');
    expect(standaloneErrorOutcome(new Error('Connection terminated unexpectedly'))).toBe('ambiguous');
    expect(standaloneErrorOutcome(Object.assign(new Error('no severity'), { code: '23505' }))).toBe('ambiguous');
    expect(standaloneErrorOutcome(undefined)).toBe('ambiguous');
  });
});

// ------------------------------------------------------------------ SqlStateStore settling a lost COMMIT

let SQL: SqlJsModule;
beforeAll(async () => {
  SQL = (await initSqlJs()) as unknown as SqlJsModule;
});

interface Loss {
  /** `land`: COMMIT happens, the reply is lost. `drop`: COMMIT never arrives (rolled back). */
  /** `late`: not applied at COMMIT; applied right after the re-read has looked (a COMMIT still on its way). */
  mode: 'land' | 'drop' | 'late';
  /** Only transactions whose statements match. */
  when: RegExp;
  /** How many matching transactions lose their COMMIT (default 1). */
  times?: number;
  /** `late`: what lands after the re-read instead of our own write (another writer's). */
  lateWrite?: (raw: SqlExecutor) => Promise<void>;
  /** Runs after the loss and before the caller hears of it: another writer's turn. */
  interlude?: (raw: SqlExecutor) => Promise<void>;
}

const ROLL_BACK = Symbol('drop the COMMIT');

/** A driver over sql.js that loses COMMITs on cue, and re-reads on the same database. */
class LossyDriver implements SqlDriver {
  readonly name = 'lossy';
  readonly dialect = 'sqlite' as const;
  readonly capabilities = Object.freeze({ concurrentConnections: false });
  loss: Loss | null = null;
  lost = 0;
  transactions = 0;
  rereads = 0;
  rereadFails = false;
  /** A `late` loss's write, applied after the next re-read. */
  late: (() => Promise<unknown>) | null = null;
  constructor(readonly inner: SqlJsDriver) {}
  query: SqlDriver['query'] = (sql, params) => this.inner.query(sql, params);
  exec: SqlDriver['exec'] = (sql) => this.inner.exec(sql);
  close = () => this.inner.close();

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.transactions++;
    const seen: string[] = [];
    const watch = (tx: SqlExecutor): SqlExecutor => ({ query: (s, p) => (seen.push(s), tx.query(s, p)), exec: (s) => (seen.push(s), tx.exec(s)) });
    const loss = this.loss;
    let result!: T;
    let hit = false;
    try {
      result = await this.inner.transaction(async (tx) => {
        result = await fn(watch(tx));
        hit = loss !== null && seen.some((s) => loss.when.test(s));
        if (hit && loss!.mode === 'late') this.late = () => (loss!.lateWrite ? loss!.lateWrite(this.inner) : this.inner.transaction(fn));
        if (hit && loss!.mode !== 'land') throw ROLL_BACK;
        return result;
      });
    } catch (err) {
      if (err !== ROLL_BACK) throw err;
    }
    if (!hit) return result;
    this.lost++;
    if (this.lost >= (loss!.times ?? 1)) this.loss = null;
    await loss!.interlude?.(this.inner);
    throw new AmbiguousWrite(`[lossy] connection lost during COMMIT (${loss!.mode})`);
  }

  async reread<T>(fn: (ex: SqlExecutor) => Promise<T>): Promise<T> {
    this.rereads++;
    if (this.rereadFails) throw new Error('connect ECONNREFUSED (the fresh connection was refused)');
    const found = await fn(this.inner);
    const late = this.late;
    this.late = null;
    await late?.();
    return found;
  }
}

async function lossyStore(clock: () => Date = () => T0) {
  const driver = new LossyDriver(await SqlJsDriver.open(SQL));
  const warnings: { message: string; attributes: Record<string, unknown> }[] = [];
  const logger = {
    warn: (message: string, attributes?: unknown) => void warnings.push({ message, attributes: (attributes ?? {}) as Record<string, unknown> }),
  };
  const store = await new SqlStateStore(driver, { clock, logger }).open();
  driver.transactions = 0; // count only the case's own writes, not the migrations at open
  const branches = () => warnings.map((w) => w.attributes['branch']);
  return { driver, store, warnings, branches };
}

const INSERT_EFFECT = /^INSERT INTO effects/;
const UPDATE_EFFECT = /^UPDATE effects/;

/** Another worker's row for `key`, written behind the store's back. */
async function theirRow(raw: SqlExecutor, key: string, over: Partial<EffectRecord>): Promise<void> {
  const r = record({ effectKey: key, ...over });
  await raw.query('INSERT INTO effects(effect_key, state, action_id, attempt, lease_expires_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
    r.effectKey,
    r.state,
    r.actionId,
    r.attempt,
    r.leaseExpiresAt,
    r.createdAt,
    r.updatedAt,
  ]);
}

describe('SqlStateStore settles a lost COMMIT by a re-read (scripted driver)', () => {
  it('a1.row1.ours: the INSERT landed — the reservation stands, logged at WARNING', async () => {
    const { driver, store, warnings, branches } = await lossyStore();
    driver.loss = { mode: 'land', when: INSERT_EFFECT };
    const r = await store.reserveEffect('refund:1', 'act_a', LEASE);
    expect(r).toMatchObject({ effectKey: 'refund:1', actionId: 'act_a', attempt: 1 });
    expect(branches()).toEqual([INSERT_LANDED]);
    expect(warnings[0]!.attributes).toMatchObject({ logger: 'ctrlrun.postgres', level: 'WARNING', branch: INSERT_LANDED, effectKey: 'refund:1' });
    expect(warnings[0]!.message).toContain(INSERT_LANDED);
    expect(await store.getEffect('refund:1')).toMatchObject({ state: 'reserved', actionId: 'act_a' });
    expect(driver.transactions).toBe(1); // nothing re-issued
  });

  it('a1.row2.reinsert: the INSERT never arrived — re-issued once, with the same values', async () => {
    const { driver, store, branches } = await lossyStore();
    driver.loss = { mode: 'drop', when: INSERT_EFFECT };
    const r = await store.reserveEffect('refund:2', 'act_a', LEASE);
    expect(branches()).toEqual([INSERT_LOST_REISSUE]);
    expect(driver.transactions).toBe(2);
    expect(await store.getEffect('refund:2')).toMatchObject({
      state: 'reserved',
      actionId: 'act_a',
      leaseExpiresAt: r.leaseExpiresAt,
      createdAt: '2026-01-01T12:00:00+00:00',
    });
  });

  it('a1.row2.reinsert, then a1.row1.ours: the INSERT landed after the re-read looked — the re-issue meets our own row, and the reservation stands', async () => {
    const { driver, store, branches } = await lossyStore();
    driver.loss = { mode: 'late', when: INSERT_EFFECT };
    const r = await store.reserveEffect('refund:late', 'act_a', LEASE);
    expect(r).toMatchObject({ effectKey: 'refund:late', actionId: 'act_a', attempt: 1 });
    expect(branches()).toEqual([INSERT_LOST_REISSUE, INSERT_LANDED]);
    expect(await store.getEffect('refund:late')).toMatchObject({ state: 'reserved', actionId: 'act_a', leaseExpiresAt: r.leaseExpiresAt });
  });

  it("a re-issue refused by another worker's row is refused still: the second re-read finds it not ours", async () => {
    const { driver, store, branches } = await lossyStore();
    // Ours never lands; another worker's row appears right after the re-read looked.
    driver.loss = {
      mode: 'late',
      when: INSERT_EFFECT,
      lateWrite: (raw) => theirRow(raw, 'refund:theirs', { actionId: 'act_b', state: 'executing', leaseExpiresAt: '2099-01-01T00:00:00+00:00' }),
    };
    const err = await store.reserveEffect('refund:theirs', 'act_a', LEASE).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DuplicateEffect);
    expect(branches()).toEqual([INSERT_LOST_REISSUE]);
    expect(await store.getEffect('refund:theirs')).toMatchObject({ actionId: 'act_b' });
  });

  it('a1.row2.reinsert re-issues the whole operation: approval consumption included', async () => {
    const { driver, store, branches } = await lossyStore();
    const { createAction } = await import('@ctrlrun/kernel');
    const { storedTime } = await import('@ctrlrun/kernel/store');
    const action = createAction({ name: 'stripe.refund', arguments: { amount: 5 }, principal: { agent: 'a' } });
    await store.putApprovalRequest({
      requestId: 'apr_1',
      actionHash: action.actionHash,
      action,
      createdAt: storedTime(T0),
      expiresAt: storedTime(new Date(T0.getTime() + 15 * MINUTE)),
      policyHash: null,
    });
    await store.grantApproval('apr_1', 'alice');
    driver.loss = { mode: 'drop', when: INSERT_EFFECT };
    await store.consumeApprovalAndReserve('apr_1', action.actionHash, 'refund:3', action.actionId, LEASE);
    expect(branches()).toEqual([INSERT_LOST_REISSUE]);
    expect((await store.getApproval('apr_1'))!.status).toBe('consumed');
    expect(await store.getEffect('refund:3')).toMatchObject({ state: 'reserved', actionId: action.actionId });
  });

  it('a1.row3.refuse: another row with our action_id is not ours — planned on and refused (test_T155c at unit level)', async () => {
    const { driver, store, branches } = await lossyStore();
    // The same action retried elsewhere a second later: same action_id, different lease and stamps.
    driver.loss = {
      mode: 'drop',
      when: INSERT_EFFECT,
      interlude: (raw) =>
        theirRow(raw, 'refund:4', {
          actionId: 'act_a',
          createdAt: '2026-01-01T12:00:01+00:00',
          updatedAt: '2026-01-01T12:00:01+00:00',
          leaseExpiresAt: '2026-01-01T12:05:01+00:00',
        }),
    };
    const err = await store.reserveEffect('refund:4', 'act_a', LEASE).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DuplicateEffect);
    expect(err).toMatchObject({ state: 'in_progress' });
    expect(branches()).toEqual([INSERT_FOUND_OTHER]);
    expect(driver.transactions).toBe(1);
    expect(await store.getEffect('refund:4')).toMatchObject({ updatedAt: '2026-01-01T12:00:01+00:00' }); // theirs, untouched
  });

  it('a2.row1.landed: a transition that landed is returned, not refused', async () => {
    const { driver, store, branches } = await lossyStore();
    await store.reserveEffect('refund:5', 'act_a', LEASE);
    await store.beginExecution('refund:5', 'act_a');
    driver.loss = { mode: 'land', when: UPDATE_EFFECT };
    const r = await store.commitEffect('refund:5', 'act_a', { refund_id: 're_1' });
    expect(r.state).toBe('committed');
    expect(branches()).toEqual([UPDATE_LANDED]);
    expect(await store.getEffect('refund:5')).toMatchObject({ state: 'committed', resultJson: '{"refund_id":"re_1"}' });
  });

  it('a2.row2.reissue: a transition that never arrived is re-issued once', async () => {
    const { driver, store, branches } = await lossyStore();
    await store.reserveEffect('refund:6', 'act_a', LEASE);
    driver.loss = { mode: 'drop', when: UPDATE_EFFECT };
    await store.beginExecution('refund:6', 'act_a');
    expect(branches()).toEqual([UPDATE_LOST_REISSUE]);
    expect(await store.getEffect('refund:6')).toMatchObject({ state: 'executing' });
  });

  it('a2.row3.refuse: the row moved on meanwhile — the predicate decides, and it is never failed', async () => {
    const { driver, store, branches } = await lossyStore();
    await store.reserveEffect('refund:7', 'act_a', LEASE);
    await store.beginExecution('refund:7', 'act_a');
    driver.loss = {
      mode: 'drop',
      when: UPDATE_EFFECT,
      interlude: async (raw) =>
        void (await raw.query("UPDATE effects SET state = 'ambiguous', lease_expires_at = NULL, error = 'operator' WHERE effect_key = ?", ['refund:7'])),
    };
    const err = await store.failEffect('refund:7', 'act_a', 'NotExecuted: declined').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousEffect);
    expect(branches()).toEqual([UPDATE_FOUND_OTHER]);
    expect((await store.getEffect('refund:7'))!.state).toBe('ambiguous');
  });

  it('a lost kept write (the ambiguation of a lapsed lease) that landed still raises its refusal', async () => {
    let now = T0.getTime();
    const { driver, store, branches } = await lossyStore(() => new Date(now));
    await store.reserveEffect('refund:8', 'act_a', LEASE);
    now += LEASE + 1;
    driver.loss = { mode: 'land', when: UPDATE_EFFECT };
    await expect(store.reserveEffect('refund:8', 'act_b', LEASE)).rejects.toBeInstanceOf(AmbiguousEffect);
    expect(branches()).toEqual([UPDATE_LANDED]);
    expect((await store.getEffect('refund:8'))!.state).toBe('ambiguous');
  });

  it('re-issue is bounded at one: a second lost COMMIT that did not land writes nothing and raises', async () => {
    const { driver, store, branches } = await lossyStore();
    driver.loss = { mode: 'drop', when: INSERT_EFFECT, times: 2 };
    const err = await store.reserveEffect('refund:9', 'act_a', LEASE).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect(String((err as Error).message)).toMatch(/lost again after one re-issue/);
    expect(branches()).toEqual([INSERT_LOST_REISSUE, INSERT_LOST_REISSUE]);
    expect(driver.transactions).toBe(2);
    expect(await store.getEffect('refund:9')).toBeNull();
  });

  it('a failed re-read raises AmbiguousWrite and writes nothing more (test_T156 at unit level)', async () => {
    const { driver, store, branches } = await lossyStore();
    driver.loss = { mode: 'drop', when: INSERT_EFFECT };
    driver.rereadFails = true;
    const err = await store.reserveEffect('refund:10', 'act_a', LEASE).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousWrite);
    expect((err as Error).message).toMatch(/re-read on a fresh connection failed/);
    expect(branches()).toEqual([]);
    expect(driver.transactions).toBe(1);
    expect(await store.getEffect('refund:10')).toBeNull();
  });

  it('its message names a key with a line break and a bidi override quoted and escaped, on one line', async () => {
    const { driver, store } = await lossyStore();
    driver.loss = { mode: 'drop', when: INSERT_EFFECT };
    driver.rereadFails = true;
    const key = 'refund:10\n[kernel] forged\u202e';
    const err = await store.reserveEffect(key, 'act_a', LEASE).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousWrite);
    expect((err as Error).message).toContain('reserveEffect on "refund:10\\n[kernel] forged\\u202e": the connection was lost during COMMIT');
    expect((err as Error).message).not.toMatch(/[\n\u202e]/);
  });

  it('a write that declares no effect row (an event) surfaces AmbiguousWrite unchanged', async () => {
    const { driver, store } = await lossyStore();
    driver.loss = { mode: 'land', when: /^INSERT INTO events/ };
    await expect(
      store.appendEvent({ ts: T0.toISOString(), type: 'EFFECT_RESERVED', actionId: null, effectKey: null, approvalId: null, data: {} }),
    ).rejects.toBeInstanceOf(AmbiguousWrite);
    expect(driver.rereads).toBe(0);
  });
});

describe('an edit-then-approve whose COMMIT was lost (scripted driver)', () => {
  const INSERT_APPROVAL = /^INSERT INTO approvals/;

  async function pendingRequest(store: SqlStateStore) {
    const { createAction } = await import('@ctrlrun/kernel');
    const { storedTime } = await import('@ctrlrun/kernel/store');
    const proposed = createAction({ name: 'stripe.refund', arguments: { amount: 500 }, principal: { agent: 'a' } });
    const edited = createAction({ name: 'stripe.refund', arguments: { amount: 400 }, principal: { agent: 'a' } });
    await store.putApprovalRequest({
      requestId: 'apr_p',
      actionHash: proposed.actionHash,
      action: proposed,
      createdAt: storedTime(T0),
      expiresAt: storedTime(new Date(T0.getTime() + 15 * MINUTE)),
      policyHash: null,
    });
    return { edited, write: { requestId: 'apr_p', editedRequestId: 'apr_e', action: edited, approver: 'alice', policyHash: null } };
  }

  it('edit.landed: both rows and the events landed — the edit stands, logged at WARNING, nothing re-issued', async () => {
    const { driver, store, warnings, branches } = await lossyStore();
    const { edited, write } = await pendingRequest(store);
    driver.loss = { mode: 'land', when: INSERT_APPROVAL };
    driver.transactions = 0;
    const events = {
      drafts: () => [
        { ts: T0.toISOString(), type: 'APPROVAL_GRANTED' as const, actionId: null, effectKey: null, approvalId: 'apr_e', data: { edited_from: 'apr_p' } },
      ],
      stored: undefined as unknown,
    };
    const r = await store.editApproval(write, events as never);
    expect(r.approved).toMatchObject({ approvalId: 'apr_e', actionHash: edited.actionHash, approver: 'alice' });
    expect(branches()).toEqual(['edit.landed']);
    expect(warnings[0]!.attributes).toMatchObject({ level: 'WARNING', branch: 'edit.landed', approvalId: 'apr_p' });
    expect(driver.transactions).toBe(1);
    expect((await store.getApproval('apr_p'))!.status).toBe('denied');
    expect((await store.getApproval('apr_e'))!.status).toBe('granted');
    expect((await store.events()).filter((e) => e.approvalId === 'apr_e')).toHaveLength(1);
  });

  it('edit.reissue: the edit never arrived — re-issued once, with its events once', async () => {
    const { driver, store, branches } = await lossyStore();
    const { write } = await pendingRequest(store);
    driver.loss = { mode: 'drop', when: INSERT_APPROVAL };
    driver.transactions = 0;
    const events = {
      drafts: () => [{ ts: T0.toISOString(), type: 'APPROVAL_GRANTED' as const, actionId: null, effectKey: null, approvalId: 'apr_e', data: {} }],
    };
    await store.editApproval(write, events);
    expect(branches()).toEqual(['edit.reissue']);
    expect(driver.transactions).toBe(2);
    expect((await store.getApproval('apr_e'))!.status).toBe('granted');
    expect((await store.events()).filter((e) => e.approvalId === 'apr_e')).toHaveLength(1);
  });

  it('edit.reissue, then edit.landed: the edit landed after the re-read looked — the re-issue is refused, and the late edit stands, its events once', async () => {
    const { driver, store, branches } = await lossyStore();
    const { edited, write } = await pendingRequest(store);
    driver.loss = { mode: 'late', when: INSERT_APPROVAL };
    const events = {
      drafts: () => [{ ts: T0.toISOString(), type: 'APPROVAL_GRANTED' as const, actionId: null, effectKey: null, approvalId: 'apr_e', data: {} }],
    };
    const r = await store.editApproval(write, events);
    expect(r.approved).toMatchObject({ approvalId: 'apr_e', actionHash: edited.actionHash, approver: 'alice' });
    expect(branches()).toEqual(['edit.reissue', 'edit.landed']);
    expect((await store.getApproval('apr_e'))!.status).toBe('granted');
    expect((await store.events()).filter((e) => e.approvalId === 'apr_e')).toHaveLength(1);
  });

  it('edit.refuse: another answer won meanwhile — refused as answered, and the edit is not there', async () => {
    const { driver, store, branches } = await lossyStore();
    const { write } = await pendingRequest(store);
    driver.loss = {
      mode: 'drop',
      when: INSERT_APPROVAL,
      interlude: async (raw) =>
        void (await raw.query("UPDATE approvals SET status = 'granted', approver = 'bob', granted_at = ? WHERE approval_id = 'apr_p'", [
          '2026-01-01T12:00:00+00:00',
        ])),
    };
    const err = await store.editApproval(write).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'ApprovalMismatch', reason: 'granted' });
    expect(branches()).toEqual(['edit.refuse']);
    expect(await store.getApproval('apr_e')).toBeNull();
    expect((await store.getApproval('apr_p'))!.approver).toBe('bob');
  });

  it('a failed re-read raises AmbiguousWrite naming the request, and writes nothing more', async () => {
    const { driver, store, branches } = await lossyStore();
    const { write } = await pendingRequest(store);
    driver.loss = { mode: 'drop', when: INSERT_APPROVAL };
    driver.rereadFails = true;
    const err = await store.editApproval(write).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousWrite);
    expect((err as Error).message).toMatch(/editApproval of apr_p.*re-read on a fresh connection failed/);
    expect(branches()).toEqual([]);
    expect(await store.getApproval('apr_e')).toBeNull();
  });
});

describe('a receipt written on its own whose COMMIT was lost (scripted driver)', () => {
  const INSERT_RECEIPT = /^INSERT INTO receipts/;

  async function aReceipt() {
    const { createAction } = await import('@ctrlrun/kernel');
    const { buildReceipt } = await import('../../packages/kernel/src/receipt.js');
    const action = createAction({ name: 'stripe.refund', arguments: { amount: 500 }, principal: { agent: 'a' } });
    const draft = buildReceipt(action, {
      receiptId: `ctr_${Math.random().toString(16).slice(2)}`,
      decision: 'allow',
      decisionReason: 'rule[0]',
      approvalId: null,
      approver: null,
      effectKey: 'refund:r',
      attempt: 1,
      result: 'committed',
      execution: 'committed',
      error: null,
      startedAt: '2026-01-01T12:00:00.000Z',
      finishedAt: '2026-01-01T12:00:01.000Z',
      policyHash: null,
      policyVersion: null,
      controls: [],
    });
    // Two pending events of the pass, written in the receipt's transaction.
    const trail = {
      drafts: () =>
        ['EXECUTION_COMMITTED', 'EFFECT_COMMITTED'].map((type) => ({
          ts: T0.toISOString(),
          type: type as 'EFFECT_RESERVED',
          actionId: action.actionId,
          effectKey: 'refund:r',
          approvalId: null,
          data: { pass: type },
        })),
    } as { drafts: () => never[]; stored?: EventRecord[] };
    return { action, draft, trail };
  }

  async function evidence(store: SqlStateStore, actionId: string) {
    const { verifyChain } = await import('@ctrlrun/kernel');
    const receipts = await store.receipts();
    const events = (await store.events()).filter((e) => e.actionId === actionId);
    return { receipts: receipts.length, events: events.map((e) => e.eventId), chain: verifyChain(receipts, await store.chainHead()).ok };
  }

  it('receipt.landed: the COMMIT landed — the stored receipt and the events that landed with it, nothing written twice', async () => {
    const { driver, store, branches } = await lossyStore();
    const { action, draft, trail } = await aReceipt();
    driver.loss = { mode: 'land', when: INSERT_RECEIPT };
    const stored = await store.putReceipt(draft, trail);
    expect(branches()).toEqual(['receipt.landed']);
    expect(driver.transactions).toBe(1);
    const after = await evidence(store, action.actionId);
    expect(after).toEqual({ receipts: 1, events: trail.stored!.map((e) => e.eventId), chain: true });
    expect(after.events).toHaveLength(2);
    expect((await store.receipts())[0]!.hash).toBe(stored.hash);
  });

  it('receipt.reissue: the COMMIT never arrived — written once more, the chain whole', async () => {
    const { driver, store, branches } = await lossyStore();
    const { action, draft, trail } = await aReceipt();
    driver.loss = { mode: 'drop', when: INSERT_RECEIPT };
    const stored = await store.putReceipt(draft, trail);
    expect(branches()).toEqual(['receipt.reissue']);
    expect(driver.transactions).toBe(2);
    expect(await evidence(store, action.actionId)).toEqual({ receipts: 1, events: trail.stored!.map((e) => e.eventId), chain: true });
    expect(trail.stored).toHaveLength(2);
    expect(stored.document['receipt_id']).toBe(draft.receiptId);
  });

  it('the COMMIT landed after the re-read: the re-issue is refused as stored, one more look returns what landed', async () => {
    const { driver, store, branches } = await lossyStore();
    const { action, draft, trail } = await aReceipt();
    driver.loss = { mode: 'late', when: INSERT_RECEIPT };
    const stored = await store.putReceipt(draft, trail);
    expect(branches()).toEqual(['receipt.reissue', 'receipt.landed']);
    const after = await evidence(store, action.actionId);
    expect(after).toEqual({ receipts: 1, events: trail.stored!.map((e) => e.eventId), chain: true });
    expect(after.events).toHaveLength(2);
    expect((await store.receipts())[0]!.hash).toBe(stored.hash);
  });

  it('lost twice and not landed: tried once more from the start (nothing was written), and written once', async () => {
    const { driver, store, branches } = await lossyStore();
    const { action, draft, trail } = await aReceipt();
    driver.loss = { mode: 'drop', when: INSERT_RECEIPT, times: 2 };
    await store.putReceipt(draft, trail);
    // Lost, absent, re-issued; lost again, absent: a StoreError — then the write from the start, which lands.
    expect(branches()).toEqual(['receipt.reissue', 'receipt.reissue']);
    expect(driver.transactions).toBe(3);
    expect(await evidence(store, action.actionId)).toEqual({ receipts: 1, events: trail.stored!.map((e) => e.eventId), chain: true });
  });

  it('lost on every try and never landed: a StoreError that says so (never AmbiguousWrite); a failed re-read: AmbiguousWrite', async () => {
    const { driver, store } = await lossyStore();
    const { draft, trail } = await aReceipt();
    driver.loss = { mode: 'drop', when: INSERT_RECEIPT, times: 4 };
    const err = await store.putReceipt(draft, trail).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect(err).not.toBeInstanceOf(AmbiguousWrite);
    expect((err as Error).message).toMatch(/lost again after one re-issue/);
    expect(await store.receipts()).toHaveLength(0);
    const second = await aReceipt();
    driver.loss = { mode: 'drop', when: INSERT_RECEIPT };
    driver.rereadFails = true;
    const unknown = await store.putReceipt(second.draft, second.trail).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(AmbiguousWrite);
    expect((unknown as Error).message).toMatch(/putReceipt of ctr_.*re-read on a fresh connection failed/);
  });
});

describe('an outcome whose receipt part failed once (its connection lost, say)', () => {
  it('is written again with its receipt in one transaction: no receipt written alone after it (a crash between the two would leave none)', async () => {
    const { Control, createAction, loadPolicy, verifyChain } = await import('@ctrlrun/kernel');
    const inner = await SqlJsDriver.open(SQL);
    let failures = 1;
    const driver: SqlDriver = {
      name: 'flaky',
      dialect: inner.dialect,
      capabilities: inner.capabilities,
      query: (sql, params) => inner.query(sql, params),
      exec: (sql) => inner.exec(sql),
      close: () => inner.close(),
      transaction: (fn) =>
        inner.transaction((tx) =>
          fn({
            query: (sql, params) => {
              if (failures > 0 && /receipt_chain/.test(sql) && /^UPDATE/.test(sql)) {
                failures--;
                return Promise.reject(new Error('Connection terminated unexpectedly'));
              }
              return tx.query(sql, params);
            },
            exec: (sql) => tx.exec(sql),
          }),
        ),
    };
    const store = await new SqlStateStore(driver, { clock: () => T0, logger: { warn: () => undefined } }).open();
    let alone = 0;
    const put = store.putReceipt.bind(store);
    store.putReceipt = (...args) => (alone++, put(...args));
    const control = new Control({
      policy: loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    decision: allow\n'),
      store,
      clock: () => T0,
      logger: { warn: () => undefined },
    });
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 5 }, principal: { agent: 'a' } });
    expect(await control.execute(action, () => ({ ok: true }))).toEqual({ ok: true });
    expect(failures, 'the receipt part failed once').toBe(0);
    expect(alone, 'no receipt written on its own').toBe(0);
    const receipts = await store.receipts();
    expect(receipts.map((r) => r.result)).toEqual(['committed']);
    expect(verifyChain(receipts, await store.chainHead()).ok).toBe(true);
  });
});
