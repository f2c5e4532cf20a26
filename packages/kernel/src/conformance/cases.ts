/**
 * The store conformance cases, written once against the public `StateStore` contract: every case
 * asserts the error's class (and `code`) and its `state`/`reason`, then reads the record back.
 * The cross-process case spawns OS processes through the factory's `processes` launcher, so this
 * file stays runtime-neutral. Run them with {@link run} from `./index.ts`.
 *
 * @module
 */
import { type Action } from '../action.js';
import { createAction } from '../action.js';
import { grantFromJson, grantToJson, Grant } from '../authority/grant.js';
import { parseJson, type JsonObject } from '../canonical.js';
import { ActionDenied, AmbiguousEffect, ApprovalMismatch, DuplicateEffect, InvalidArgument, NotExecuted } from '../errors.js';
import { GENESIS_HASH, hashDocument } from '../hash.js';
import { randomIds } from '../ids.js';
import type { EffectRecord, EventDraft, RequiredRole } from '../model.js';
import { buildReceipt } from '../receipt.js';
import type { Dialect } from '../store/driver.js';
import type { DelegationRecord, StateStore } from '../store/state-store.js';
import { MINUTE, storedTime, type Clock } from '../time.js';
import { expect } from './expect.js';
import { RETENTION_CASE_IDS, retentionCases } from './retention-cases.js';
import { BUDGET_CASE_IDS, budgetCases } from './budget-cases.js';
import { BREAK_GLASS_CASE_IDS, breakGlassCases } from './break-glass-cases.js';
import { LEASE, T0, manualClock, type ManualClock } from './clock.js';

export { LEASE, T0, manualClock, type ManualClock } from './clock.js';
const CONTENDERS = 8;
const ROUNDS = 12;

/** The cases of this suite, by spec id. */
export const CASE_IDS = [
  'e1-in-process',
  'e1-cross-process',
  'retry-table',
  'lease-expiry',
  'binding',
  'single-use',
  'expiry',
  'atomic-with-reservation',
  'approval-checked-first',
  'approval-threshold',
  'm-of-n-nth',
  'm-of-n-same-principal',
  'm-of-n-granted-refuses',
  'm-of-n-window',
  'm-of-n-unverifiable',
  'm-of-n-one-denial',
  'm-of-n-expiry',
  'm-of-n-one-required',
  'precondition-fingerprint',
  'edit-answer-race',
  'only-ambiguous',
  'two-resolutions',
  'no-failed-on-refusal',
  'no-not-executed',
  'ambiguous-survives',
  'terminal-states-survive',
  'session-ended-survives',
  'action-round-trip',
  'event-ids',
  'receipt-round-trip',
  'bounded-reads',
  'pending-per-principal',
  'insert-not-upsert',
  'revoke-atomic-idempotent',
  'grant-json-round-trip',
  'one-resumption',
  'extend-lease-refusals',
  'taken-once-cross-process',
  ...RETENTION_CASE_IDS,
  ...BUDGET_CASE_IDS,
  ...BREAK_GLASS_CASE_IDS,
] as const;

/** One case id. */
export type CaseId = (typeof CASE_IDS)[number];

/** One worker's line on stdout (docs/spec/03-production.md §7.2): `error` is the class name of its refusal, or null. */
export interface WorkerReport {
  won: boolean;
  action_id: string;
  error: string | null;
  message: string | null;
}

/**
 * One cross-process race: `contenders` OS processes open `url` and reserve `effectKey` at once,
 * or, with `continuation`, each try to take that held continuation.
 */
export interface RaceRequest {
  url: string;
  effectKey: string;
  contenders: number;
  continuation?: string;
}

/** What the parent saw: every worker's report, the barrier's arrivals, the fake remote's marker files. */
export interface RaceOutcome {
  reports: WorkerReport[];
  arrivals: number;
  marker: string[];
}

/** Spawns the worker processes of a cross-process case and collects what they did. */
export type ProcessRunner = (race: RaceRequest) => Promise<RaceOutcome>;

/** What a store's test file hands the suite. */
export interface StoreFactory {
  /** Shown in the test names. */
  name: string;
  dialect: Dialect;
  /** A store on fresh, private storage. */
  open(clock?: Clock): Promise<StateStore>;
  /**
   * An independent handle on the same storage as `store` (which the case has closed), or absent
   * when the storage does not outlive its handle (then the durability cases are not applicable,
   * and that declaration is checked).
   */
  reopen?(store: StateStore, clock?: Clock): Promise<StateStore>;
  /**
   * An address of `store`'s storage that a worker OS process can open, or absent when no other
   * process can reach it (then the cross-process cases are not applicable, and that declaration
   * is checked).
   */
  url?(store: StateStore): string;
  /** Runs the worker processes of the cross-process cases; required with `url`. */
  processes?: ProcessRunner;
  /** Cases not run here, each with its reason. */
  skip?: { reason: string; cases: CaseId[] }[];
}

export interface CaseDef {
  readonly suite: 'reservation' | 'approval' | 'resolution' | 'outcome' | 'durability' | 'evidence' | 'delegation' | 'continuation' | 'retention' | 'ledger';
  /** Needs `reopen`. */
  readonly durable?: boolean;
  /** Needs `url` (and `processes`). */
  readonly crossProcess?: boolean;
  /** The spec's test name this case also carries. */
  readonly test?: string;
  run(factory: StoreFactory): Promise<void>;
}

// ------------------------------------------------------------------------- helpers

type ErrorClass<E> = abstract new (...args: never[]) => E;

/** Awaits a refusal and asserts its class and fields (code, state, reason, …). */
async function refused<E extends Error>(
  p: Promise<unknown>,
  cls: ErrorClass<E>,
  fields: Record<string, unknown>,
  what: string,
  first?: (err: unknown) => void,
): Promise<E> {
  const outcome = await p.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  if (outcome.ok)
    expect.fail(
      `${what}: expected ${cls.name} ${JSON.stringify(fields)}, but it succeeded with ${JSON.stringify(outcome.value, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`,
    );
  const err = outcome.error as E;
  first?.(err);
  expect(err, `${what}: error class`).toBeInstanceOf(cls);
  expect(err, `${what}: error fields`).toMatchObject(fields);
  return err;
}

const DUP_IN_PROGRESS = { code: 'ERR_DUPLICATE_EFFECT', state: 'in_progress' };
const DUP_COMMITTED = { code: 'ERR_DUPLICATE_EFFECT', state: 'committed' };
const AMBIGUOUS = { code: 'ERR_AMBIGUOUS_EFFECT' };
const INVALID = { code: 'ERR_INVALID_ARGUMENT' };
const mismatch = (reason: string): Record<string, unknown> => ({ code: 'ERR_APPROVAL_MISMATCH', reason });
/** Verified approvers, as a resolving surface hands them to a store. */
const ANA = { agent: 'ops-console', user: 'ana', issuer: 'https://idp.example', entitled: [] as string[] };
const BO = { agent: 'ops-console', user: 'bo', issuer: 'https://idp.example', entitled: ['refund-limit'] };
const CY = { agent: 'ops-console', user: 'cy', issuer: null, entitled: [] as string[] };
const LEASE_EXPIRED_TEXT = 'lease expired: the worker holding this effect never finished';

let keyCounter = 0;
/** A fresh effect key (unique across cases sharing one store). */
function freshKey(prefix = 'refund'): string {
  keyCounter += 1;
  return `${prefix}:${keyCounter}-${randomIds('act').slice(4, 12)}`;
}

function act(): string {
  return randomIds('act');
}

function refundAction(amount: number | bigint = 2500, extra: Record<string, unknown> = {}): Action {
  return createAction({
    name: 'payments.refund',
    arguments: { amount, currency: 'EUR', ...extra },
    principal: { agent: 'support-bot', user: 'alice@example.com' },
    resource: 'customer:42',
  });
}

async function state(store: StateStore, key: string): Promise<EffectRecord> {
  const r = await store.getEffect(key);
  expect(r, `record ${key} exists`).not.toBeNull();
  return r!;
}

/** Drives `key` to a state with a fresh action; returns that action's id. */
async function drive(store: StateStore, key: string, to: 'reserved' | 'executing' | 'committed' | 'failed' | 'ambiguous'): Promise<string> {
  const a = act();
  await store.reserveEffect(key, a, LEASE);
  if (to === 'reserved') return a;
  await store.beginExecution(key, a);
  if (to === 'committed') await store.commitEffect(key, a, { refund_id: 'r-1' });
  if (to === 'failed') await store.failEffect(key, a, 'NotExecuted: card declined');
  if (to === 'ambiguous') await store.markAmbiguous(key, a, 'TimeoutError: the remote did not answer');
  return a;
}

/** Stores a pending request for `action` made now, lasting `ttl`; returns its id. */
async function request(
  store: StateStore,
  clock: Clock,
  action: Action,
  ttl = 15 * MINUTE,
  pinned: { approvalsRequired?: number; preconditionFingerprint?: string | null; requiredRoles?: readonly RequiredRole[] } = {},
): Promise<string> {
  const id = randomIds('apr');
  const now = clock();
  await store.putApprovalRequest({
    requestId: id,
    actionHash: action.actionHash,
    action,
    createdAt: storedTime(now),
    expiresAt: storedTime(new Date(now.getTime() + ttl)),
    policyHash: `sha256:${'ab'.repeat(32)}`,
    ...pinned,
  });
  return id;
}

async function granted(store: StateStore, clock: Clock, action: Action, ttl = 15 * MINUTE): Promise<string> {
  const id = await request(store, clock, action, ttl);
  await store.grantApproval(id, 'alice');
  return id;
}

async function status(store: StateStore, id: string): Promise<string> {
  const r = await store.getApproval(id);
  expect(r, `approval ${id} exists`).not.toBeNull();
  return r!.status;
}

async function withStore(factory: StoreFactory, clock: Clock, fn: (store: StateStore) => Promise<void>): Promise<void> {
  const store = await factory.open(clock);
  try {
    await fn(store);
  } finally {
    await store.close();
  }
}

/**
 * A store that declares no `reopen` or no `url` claims its storage does not outlive its handle:
 * two `open()` handles must then share nothing. A write visible through the other handle makes
 * the declaration false, and the case that relied on it fails.
 */
async function declaredHonestly(factory: StoreFactory, declaration: string): Promise<void> {
  const a = await factory.open(manualClock());
  const b = await factory.open(manualClock());
  try {
    const key = freshKey('honesty');
    await drive(a, key, 'committed');
    expect(await b.getEffect(key), `${factory.name} declares ${declaration}, so a write through one open() handle must be invisible to another`).toBeNull();
  } finally {
    await a.close();
    await b.close();
  }
}

// ------------------------------------------------------------------------- refusal paths

interface RefusalPath {
  readonly name: string;
  /** Sets the stage on `key` and returns the refused call plus the record expected afterwards. */
  run(
    store: StateStore,
    clock: ManualClock,
    key: string,
  ): Promise<{ call: Promise<unknown>; expected: (before: EffectRecord | null) => Partial<EffectRecord> }>;
  readonly cls: ErrorClass<Error>;
  readonly fields: Record<string, unknown>;
}

const unchanged = (before: EffectRecord | null): Partial<EffectRecord> => ({ ...before! });
// `before` is read while the refused call is already in flight: on a store with concurrent
// connections it may be the row before or after the kept write, so its `updatedAt` is not compared.
const ambiguated = (before: EffectRecord | null): Partial<EffectRecord> => {
  const { updatedAt: _either, ...rest } = before!;
  return { ...rest, state: 'ambiguous', error: LEASE_EXPIRED_TEXT, leaseExpiresAt: null };
};

/** The thirteen ways a store refuses around an effect; none may write `failed` or raise `NotExecuted`. */
const REFUSAL_PATHS: readonly RefusalPath[] = [
  // Reserving a key whose record is in each state that refuses: the record is left as it was.
  ...(
    [
      ['a live reserved lease', 'reserved', DuplicateEffect, DUP_IN_PROGRESS],
      ['a live executing lease', 'executing', DuplicateEffect, DUP_IN_PROGRESS],
      ['committed', 'committed', DuplicateEffect, DUP_COMMITTED],
      ['ambiguous', 'ambiguous', AmbiguousEffect, AMBIGUOUS],
    ] as const
  ).map(([what, state, cls, fields]): RefusalPath => ({
    name: `reserve over ${what}`,
    cls,
    fields,
    async run(store, _c, key) {
      await drive(store, key, state);
      return { call: store.reserveEffect(key, act(), LEASE), expected: unchanged };
    },
  })),
  {
    name: 'reserve over a lapsed reserved lease',
    cls: AmbiguousEffect,
    fields: AMBIGUOUS,
    async run(store, clock, key) {
      await drive(store, key, 'reserved');
      clock.advance(LEASE + 1);
      return { call: store.reserveEffect(key, act(), LEASE), expected: ambiguated };
    },
  },
  {
    name: 'reserve over a lapsed executing lease',
    cls: AmbiguousEffect,
    fields: AMBIGUOUS,
    async run(store, clock, key) {
      await drive(store, key, 'executing');
      clock.advance(LEASE + 1);
      return { call: store.reserveEffect(key, act(), LEASE), expected: ambiguated };
    },
  },
  {
    name: 'begin by another action while the lease is live',
    cls: DuplicateEffect,
    fields: DUP_IN_PROGRESS,
    async run(store, _c, key) {
      await drive(store, key, 'reserved');
      return { call: store.beginExecution(key, act()), expected: unchanged };
    },
  },
  {
    name: 'commit by another action while the lease is live',
    cls: DuplicateEffect,
    fields: DUP_IN_PROGRESS,
    async run(store, _c, key) {
      await drive(store, key, 'executing');
      return { call: store.commitEffect(key, act(), { ok: true }), expected: unchanged };
    },
  },
  {
    name: 'fail by another action while the lease is live',
    cls: DuplicateEffect,
    fields: DUP_IN_PROGRESS,
    async run(store, _c, key) {
      await drive(store, key, 'executing');
      return { call: store.failEffect(key, act(), 'NotExecuted: declined'), expected: unchanged };
    },
  },
  {
    name: 'fail by the holder after the record went ambiguous',
    cls: AmbiguousEffect,
    fields: AMBIGUOUS,
    async run(store, clock, key) {
      const holder = await drive(store, key, 'executing');
      clock.advance(LEASE + 1);
      await store.reserveEffect(key, act(), LEASE).catch(() => undefined); // a contender ambiguates the lapsed record
      return { call: store.failEffect(key, holder, 'NotExecuted: declined'), expected: unchanged };
    },
  },
  {
    name: 'fail by the holder after it committed',
    cls: DuplicateEffect,
    fields: DUP_COMMITTED,
    async run(store, _c, key) {
      const holder = await drive(store, key, 'committed');
      return { call: store.failEffect(key, holder, 'NotExecuted: declined'), expected: unchanged };
    },
  },
  {
    name: 'extend a lapsed lease',
    cls: AmbiguousEffect,
    fields: AMBIGUOUS,
    async run(store, clock, key) {
      const holder = await drive(store, key, 'executing');
      clock.advance(LEASE + 1);
      return { call: store.extendLease(key, holder, LEASE), expected: unchanged };
    },
  },
  {
    name: 'consume an approval and reserve over committed',
    cls: DuplicateEffect,
    fields: DUP_COMMITTED,
    async run(store, clock, key) {
      await drive(store, key, 'committed');
      const action = refundAction();
      const id = await granted(store, clock, action);
      return { call: store.consumeApprovalAndReserve(id, action.actionHash, key, action.actionId, LEASE), expected: unchanged };
    },
  },
];

async function runRefusalPaths(factory: StoreFactory, first?: (path: RefusalPath, err: unknown) => void): Promise<void> {
  expect(REFUSAL_PATHS).toHaveLength(13);
  for (const path of REFUSAL_PATHS) {
    const clock = manualClock();
    await withStore(factory, clock, async (store) => {
      const key = freshKey();
      const { call, expected } = await path.run(store, clock, key);
      call.catch(() => undefined); // settled below; on a concurrent store it may reject before it is awaited
      const before = await store.getEffect(key);
      await refused(call, path.cls, path.fields, path.name, first && ((err) => first(path, err)));
      const after = await state(store, key);
      expect(after.state, `${path.name}: no refusal writes failed`).not.toBe('failed');
      expect(after, `${path.name}: record afterwards`).toMatchObject(expected(before));
    });
  }
}

// ------------------------------------------------------------------------- the cases

/** Reserves and begins `key` for `action` (its id is the holder). */
async function executing(store: StateStore, key: string, action: Action): Promise<void> {
  await store.reserveEffect(key, action.actionId, LEASE);
  await store.beginExecution(key, action.actionId);
}

/** A fresh, unguessable continuation value. */
function continuationValue(): string {
  return `cont-${randomIds('act').slice(4)}`;
}

/** Every case of the continuation suite (docs/spec/01-core.md §10, docs/spec/03-production.md §3.1 and §4). */
const continuationCases: Record<'one-resumption' | 'extend-lease-refusals' | 'taken-once-cross-process', CaseDef> = {
  'taken-once-cross-process': {
    suite: 'continuation',
    crossProcess: true,
    async run(factory) {
      if (!factory.url) return declaredHonestly(factory, 'no url()');
      if (!factory.processes) throw new Error(`${factory.name} declares url() but gives no processes runner`);
      // The workers read the wall clock: the lease must be live for them.
      await withStore(factory, manualClock(new Date()), async (store) => {
        const key = freshKey();
        const action = refundAction(4300, { cross: true });
        await executing(store, key, action);
        const value = continuationValue();
        expect(await store.holdContinuation(action, key, value, LEASE), 'held').toBe(1);
        const out = await factory.processes!({ url: factory.url!(store), effectKey: key, contenders: CONTENDERS, continuation: value });
        const seen = JSON.stringify(out.reports);
        expect(out.arrivals, 'every worker reached the barrier').toBe(CONTENDERS);
        expect(out.reports, 'every worker reported').toHaveLength(CONTENDERS);
        const takers = out.reports.filter((r) => r.won);
        expect(takers, `exactly one process took it: ${seen}`).toHaveLength(1);
        expect(takers[0]!.action_id, 'the held action came back').toBe(action.actionId);
        const again = await refused(store.takeContinuation(value), InvalidArgument, INVALID, 'taking it again in the parent');
        // Every loser met the one uninformative refusal a taken value meets.
        for (const r of out.reports) {
          if (!r.won)
            expect({ error: r.error, message: r.message }, `a loser: ${seen}`).toEqual({ error: 'InvalidArgument', message: (again as Error).message });
        }
        expect(await store.continuationRounds(key), 'still one round').toBe(1);
        expect(await state(store, key), 'taking never moves the record').toMatchObject({ state: 'executing', actionId: action.actionId });
      });
    },
  },
  'one-resumption': {
    suite: 'continuation',
    test: 'test_T163_a_continuation_is_taken_once_and_never_after_its_lease',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const key = freshKey();
        const action = refundAction(4200, { flag: true });
        await executing(store, key, action);
        expect(await store.continuationRounds(key), 'never suspended').toBe(0);
        clock.advance(MINUTE);
        const first = continuationValue();
        expect(await store.holdContinuation(action, key, first, LEASE), 'first hold').toBe(1);
        expect(await store.continuationRounds(key)).toBe(1);
        // The lease is extended from now, and the record stays executing.
        expect(await state(store, key)).toMatchObject({
          state: 'executing',
          actionId: action.actionId,
          attempt: 1,
          leaseExpiresAt: storedTime(new Date(T0.getTime() + MINUTE + LEASE)),
        });

        // Another deployment's take is refused before anything is consumed.
        await refused(store.takeContinuation(first, { environment: 'staging' }), InvalidArgument, INVALID, 'taking from another environment');
        expect(await store.continuationRounds(key)).toBe(1);
        // Eight takers at once: exactly one gets it; the others learn only that it is unknown.
        const unknownMiss = await refused(store.takeContinuation(continuationValue()), InvalidArgument, INVALID, 'taking a value never held');
        const takes = await Promise.allSettled(Array.from({ length: CONTENDERS }, () => store.takeContinuation(first)));
        const won = takes.filter((t) => t.status === 'fulfilled');
        expect(won, 'exactly one resumption').toHaveLength(1);
        for (const t of takes) {
          if (t.status === 'rejected') {
            expect(t.reason, 'a losing take').toBeInstanceOf(InvalidArgument);
            expect((t.reason as Error).message, 'one uninformative message').toBe(unknownMiss.message);
          }
        }
        const taken = (won[0] as PromiseFulfilledResult<Awaited<ReturnType<StateStore['takeContinuation']>>>).value;
        expect(taken.effectKey).toBe(key);
        expect(taken.rounds).toBe(1);
        expect(taken.action.actionId).toBe(action.actionId);
        expect(taken.action.actionHash, 'the held action rebuilds the same hash').toBe(action.actionHash);
        expect(taken.action.canonicalArguments).toEqual(action.canonicalArguments);
        expect(taken.record).toMatchObject({ effectKey: key, state: 'executing', actionId: action.actionId });
        const again = await refused(store.takeContinuation(first), InvalidArgument, INVALID, 'a second take');
        expect(again.message).toBe(unknownMiss.message);
        expect(await state(store, key), 'a take moves no record').toMatchObject({ state: 'executing', actionId: action.actionId });

        // Suspended again: the next round, with a fresh value; the old one stays spent.
        const second = continuationValue();
        expect(await store.holdContinuation(action, key, second, LEASE), 'second hold').toBe(2);
        expect(await store.continuationRounds(key)).toBe(2);
        await refused(store.takeContinuation(first), InvalidArgument, INVALID, "the first round's value after a second hold");
        // A value held for one effect cannot be held for another.
        const other = freshKey();
        const otherAction = refundAction(99);
        await executing(store, other, otherAction);
        await refused(store.holdContinuation(otherAction, other, second, LEASE), InvalidArgument, INVALID, 'holding a value already held');
        expect(await store.continuationRounds(other)).toBe(0);
        expect((await store.takeContinuation(second)).rounds).toBe(2);

        // A continuation outlives its process, not its lease.
        const third = continuationValue();
        expect(await store.holdContinuation(action, key, third, LEASE)).toBe(3);
        const before = await state(store, key);
        clock.advance(LEASE + 1);
        await refused(store.takeContinuation(third), AmbiguousEffect, { ...AMBIGUOUS, effectKey: key }, 'taking after the lease lapsed');
        expect(await state(store, key), 'a refused take writes nothing').toEqual(before);
        await refused(store.takeContinuation(third), AmbiguousEffect, AMBIGUOUS, 'taking after the lease lapsed, again');
        await refused(store.holdContinuation(action, key, continuationValue(), LEASE), AmbiguousEffect, AMBIGUOUS, 'holding a lapsed lease');
        expect(await store.continuationRounds(key)).toBe(3);
      });
    },
  },

  'extend-lease-refusals': {
    suite: 'continuation',
    test: 'test_T26b_a_lease_is_extended_only_by_its_live_executing_holder',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        type Row = { name: string; stage: (key: string) => Promise<Action>; cls: ErrorClass<Error>; fields: Record<string, unknown> };
        const rows: Row[] = [
          { name: 'no record', cls: InvalidArgument, fields: INVALID, stage: async () => refundAction() },
          {
            name: 'own reserved',
            cls: DuplicateEffect,
            fields: DUP_IN_PROGRESS,
            stage: async (key) => {
              const a = refundAction();
              await store.reserveEffect(key, a.actionId, LEASE);
              return a;
            },
          },
          {
            name: "another's executing",
            cls: DuplicateEffect,
            fields: DUP_IN_PROGRESS,
            stage: async (key) => {
              await drive(store, key, 'executing');
              return refundAction();
            },
          },
          {
            name: 'own committed',
            cls: DuplicateEffect,
            fields: DUP_COMMITTED,
            stage: async (key) => {
              const a = refundAction();
              await executing(store, key, a);
              await store.commitEffect(key, a.actionId, { ok: true });
              return a;
            },
          },
          {
            name: 'own ambiguous',
            cls: AmbiguousEffect,
            fields: AMBIGUOUS,
            stage: async (key) => {
              const a = refundAction();
              await executing(store, key, a);
              await store.markAmbiguous(key, a.actionId, 'TimeoutError: lost');
              return a;
            },
          },
          {
            name: 'own failed',
            cls: InvalidArgument,
            fields: INVALID,
            stage: async (key) => {
              const a = refundAction();
              await executing(store, key, a);
              await store.failEffect(key, a.actionId, 'NotExecuted: declined');
              return a;
            },
          },
          {
            name: 'own lapsed executing',
            cls: AmbiguousEffect,
            fields: AMBIGUOUS,
            stage: async (key) => {
              const a = refundAction();
              await executing(store, key, a);
              clock.advance(LEASE + 1);
              return a;
            },
          },
        ];
        for (const row of rows) {
          for (const op of ['extendLease', 'holdContinuation'] as const) {
            clock.set(T0);
            const key = freshKey();
            const a = await row.stage(key);
            const before = await store.getEffect(key);
            const call = op === 'extendLease' ? store.extendLease(key, a.actionId, LEASE) : store.holdContinuation(a, key, continuationValue(), LEASE);
            await refused(call, row.cls, row.fields, `${op} on ${row.name}`);
            expect(await store.getEffect(key), `${op} on ${row.name}: nothing written`).toEqual(before);
            expect(await store.continuationRounds(key), `${op} on ${row.name}: nothing held`).toBe(0);
          }
        }
        // The live holder extends from now, and never shortens.
        clock.set(T0);
        const key = freshKey();
        const a = refundAction();
        await executing(store, key, a);
        clock.advance(MINUTE);
        expect((await store.extendLease(key, a.actionId, LEASE)).leaseExpiresAt).toBe(storedTime(new Date(T0.getTime() + MINUTE + LEASE)));
        expect((await store.extendLease(key, a.actionId, 1000)).leaseExpiresAt, 'never shortened').toBe(storedTime(new Date(T0.getTime() + MINUTE + LEASE)));
        expect(await store.holdContinuation(a, key, continuationValue(), 1000)).toBe(1);
        expect(await state(store, key), 'a hold never shortens either').toMatchObject({
          state: 'executing',
          leaseExpiresAt: storedTime(new Date(T0.getTime() + MINUTE + LEASE)),
        });
        await refused(store.holdContinuation(a, key, '', LEASE), InvalidArgument, INVALID, 'an empty continuation');
      });
    },
  },
};

/** Every case, runnable on its own (the broken-store fixtures call them directly). */
export const storeCases: Record<CaseId, CaseDef> = {
  ...continuationCases,
  // ----------------------------------------------------------------- reservation
  'e1-in-process': {
    suite: 'reservation',
    async run(factory) {
      await withStore(factory, manualClock(), async (store) => {
        for (let round = 0; round < ROUNDS; round++) {
          const key = `refund:e1-${round}`;
          const ids = Array.from({ length: CONTENDERS }, () => act());
          let release!: () => void;
          const gate = new Promise<void>((r) => (release = r));
          const calls = ids.map((id) => gate.then(() => store.reserveEffect(key, id, LEASE)));
          release();
          const settled = await Promise.allSettled(calls);
          const winners = ids.filter((_id, i) => settled[i]!.status === 'fulfilled');
          expect(winners, `round ${round}: exactly one winner`).toHaveLength(1);
          const winner = winners[0]!;
          const won = settled[ids.indexOf(winner)] as PromiseFulfilledResult<unknown>;
          expect(won.value).toEqual({ effectKey: key, actionId: winner, attempt: 1, leaseExpiresAt: '2026-01-01T12:05:00+00:00' });
          for (const s of settled) {
            if (s.status === 'rejected') {
              expect(s.reason, `round ${round}: loser error`).toBeInstanceOf(DuplicateEffect);
              expect(s.reason).toMatchObject(DUP_IN_PROGRESS);
            }
          }
          expect(await state(store, key)).toMatchObject({ state: 'reserved', actionId: winner, attempt: 1 });
        }
      });
    },
  },

  'e1-cross-process': {
    suite: 'reservation',
    crossProcess: true,
    test: 'test_T3_exactly_one_agent_reserves_and_seven_are_blocked',
    async run(factory) {
      if (!factory.url) return declaredHonestly(factory, 'no url()');
      if (!factory.processes) throw new Error(`${factory.name} declares url() but gives no processes runner`);
      await withStore(factory, manualClock(), async (store) => {
        const key = 'refund:e1x';
        const out = await factory.processes!({ url: factory.url!(store), effectKey: key, contenders: CONTENDERS });
        const seen = JSON.stringify(out.reports);
        expect(out.arrivals, 'every worker reached the barrier').toBe(CONTENDERS);
        expect(out.reports, 'every worker reported').toHaveLength(CONTENDERS);
        const winners = out.reports.filter((r) => r.won);
        expect(winners, `exactly one winner: ${seen}`).toHaveLength(1);
        const winner = winners[0]!;
        expect(winner.error, `the winner finished without error: ${seen}`).toBeNull();
        expect(out.marker, 'the remote was called exactly once').toEqual(['called']);
        for (const r of out.reports) {
          if (!r.won) expect(['DuplicateEffect', 'AmbiguousEffect'], `loser ${r.action_id}: ${r.error} ${r.message}`).toContain(r.error);
        }
        expect(new Set(out.reports.map((r) => r.action_id)).size, 'each worker its own action').toBe(CONTENDERS);
        expect(await state(store, key)).toMatchObject({ state: 'committed', actionId: winner.action_id, attempt: 1, leaseExpiresAt: null });
      });
    },
  },

  'retry-table': {
    suite: 'reservation',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        // No record: granted, attempt 1, lease now + lease.
        const k1 = freshKey();
        const a1 = act();
        expect(await store.reserveEffect(k1, a1, LEASE)).toEqual({ effectKey: k1, actionId: a1, attempt: 1, leaseExpiresAt: '2026-01-01T12:05:00+00:00' });
        expect(await store.getEffect(k1)).toEqual({
          effectKey: k1,
          state: 'reserved',
          actionId: a1,
          attempt: 1,
          leaseExpiresAt: '2026-01-01T12:05:00+00:00',
          resultJson: null,
          error: null,
          createdAt: '2026-01-01T12:00:00+00:00',
          updatedAt: '2026-01-01T12:00:00+00:00',
          resolvedBy: null,
        });

        // committed → DuplicateEffect(committed), nothing written.
        const k2 = freshKey();
        await drive(store, k2, 'committed');
        let before = await store.getEffect(k2);
        await refused(store.reserveEffect(k2, act(), LEASE), DuplicateEffect, { ...DUP_COMMITTED, effectKey: k2 }, 'committed row');
        expect(await store.getEffect(k2)).toEqual(before);

        // ambiguous → AmbiguousEffect naming the holder, nothing written.
        const k3 = freshKey();
        const holder3 = await drive(store, k3, 'ambiguous');
        before = await store.getEffect(k3);
        await refused(store.reserveEffect(k3, act(), LEASE), AmbiguousEffect, { ...AMBIGUOUS, effectKey: k3, actionId: holder3 }, 'ambiguous row');
        expect(await store.getEffect(k3)).toEqual(before);

        // failed → renewal: attempt + 1, created_at kept, result/error/resolved_by cleared.
        const k4 = freshKey();
        await drive(store, k4, 'failed');
        clock.advance(MINUTE);
        const a4 = act();
        expect(await store.reserveEffect(k4, a4, LEASE)).toEqual({ effectKey: k4, actionId: a4, attempt: 2, leaseExpiresAt: '2026-01-01T12:06:00+00:00' });
        expect(await store.getEffect(k4)).toEqual({
          effectKey: k4,
          state: 'reserved',
          actionId: a4,
          attempt: 2,
          leaseExpiresAt: '2026-01-01T12:06:00+00:00',
          resultJson: null,
          error: null,
          createdAt: '2026-01-01T12:00:00+00:00',
          updatedAt: '2026-01-01T12:01:00+00:00',
          resolvedBy: null,
        });
        // …also a failed record left by a resolution: resolved_by is cleared too.
        const k4b = freshKey();
        await drive(store, k4b, 'ambiguous');
        await store.resolveEffect(k4b, 'failed', 'cli:local');
        expect(await state(store, k4b)).toMatchObject({ state: 'failed', resolvedBy: 'cli:local' });
        const a4b = act();
        expect(await store.reserveEffect(k4b, a4b, LEASE)).toMatchObject({ attempt: 2, actionId: a4b });
        expect(await state(store, k4b)).toMatchObject({ state: 'reserved', actionId: a4b, attempt: 2, error: null, resolvedBy: null, resultJson: null });

        // reserved / executing with a live lease → DuplicateEffect(in_progress), also at the exact expiry instant.
        for (const to of ['reserved', 'executing'] as const) {
          const k = freshKey();
          const holder = await drive(store, k, to);
          before = await store.getEffect(k);
          await refused(store.reserveEffect(k, act(), LEASE), DuplicateEffect, { ...DUP_IN_PROGRESS, effectKey: k }, `${to}, live`);
          clock.advance(LEASE); // now == lease_expires_at: still live
          await refused(store.reserveEffect(k, act(), LEASE), DuplicateEffect, DUP_IN_PROGRESS, `${to}, at the expiry instant`);
          expect(await store.getEffect(k)).toEqual(before);
          // …one millisecond later: AmbiguousEffect, and the record is written ambiguous (kept).
          clock.advance(1);
          await refused(store.reserveEffect(k, act(), LEASE), AmbiguousEffect, { ...AMBIGUOUS, effectKey: k, actionId: holder }, `${to}, lapsed`);
          expect(await store.getEffect(k)).toEqual({
            ...before!,
            state: 'ambiguous',
            leaseExpiresAt: null,
            error: LEASE_EXPIRED_TEXT,
            updatedAt: storedTime(clock()),
          });
        }

        // Bad input: refused, nothing written.
        const k5 = freshKey();
        for (const lease of [0, -1, 1.5, Number.NaN]) {
          await refused(store.reserveEffect(k5, act(), lease), InvalidArgument, INVALID, `lease ${lease}`);
        }
        await refused(store.reserveEffect('', act(), LEASE), InvalidArgument, INVALID, 'empty key');
        await refused(store.reserveEffect(k5, '', LEASE), InvalidArgument, INVALID, 'empty action id');
        expect(await store.getEffect(k5)).toBeNull();
      });
    },
  },

  'lease-expiry': {
    suite: 'reservation',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const key = freshKey();
        const holder = await drive(store, key, 'executing');
        clock.advance(LEASE + 1);
        // Reads never transition: there is no reaper.
        expect(await state(store, key)).toMatchObject({ state: 'executing', actionId: holder, leaseExpiresAt: '2026-01-01T12:05:00+00:00' });
        expect((await store.listEffects()).find((r) => r.effectKey === key)).toMatchObject({ state: 'executing' });
        // The next contender finds the lapse: AmbiguousEffect, and the record is ambiguous — never free.
        await refused(store.reserveEffect(key, act(), LEASE), AmbiguousEffect, { ...AMBIGUOUS, effectKey: key, actionId: holder }, 'contender after the lapse');
        expect(await state(store, key)).toMatchObject({ state: 'ambiguous', actionId: holder, attempt: 1, leaseExpiresAt: null, error: LEASE_EXPIRED_TEXT });
        // It stays refused for everyone, and the late holder cannot commit over it.
        await refused(store.reserveEffect(key, act(), LEASE), AmbiguousEffect, AMBIGUOUS, 'second contender');
        await refused(store.commitEffect(key, holder, { ok: true }), AmbiguousEffect, AMBIGUOUS, 'late commit by the holder');
        expect(await state(store, key)).toMatchObject({ state: 'ambiguous', resultJson: null, error: LEASE_EXPIRED_TEXT });
      });
    },
  },

  // ----------------------------------------------------------------- approval
  binding: {
    suite: 'approval',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const approved = refundAction(2500);
        const mutated = refundAction(2501);
        expect(mutated.actionHash).not.toBe(approved.actionHash);
        const id = await granted(store, clock, approved);
        await refused(store.consumeApproval(id, mutated.actionHash), ApprovalMismatch, { ...mismatch('mismatch'), approvalId: id }, 'another hash');
        expect(await store.getApproval(id)).toMatchObject({ status: 'granted', approver: 'alice', consumedAt: null });
        const key = freshKey();
        await refused(
          store.consumeApprovalAndReserve(id, mutated.actionHash, key, mutated.actionId, LEASE),
          ApprovalMismatch,
          mismatch('mismatch'),
          'another hash, with a key',
        );
        expect(await store.getEffect(key)).toBeNull();
        expect(await status(store, id)).toBe('granted');
        // The approved action itself still consumes it.
        expect(await store.consumeApproval(id, approved.actionHash)).toMatchObject({ approvalId: id, actionHash: approved.actionHash, approver: 'alice' });
        expect(await status(store, id)).toBe('consumed');
      });
    },
  },

  'single-use': {
    suite: 'approval',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const id = await request(store, clock, action);
        clock.advance(MINUTE);
        expect(await store.grantApproval(id, 'alice')).toEqual({
          approvalId: id,
          actionHash: action.actionHash,
          approver: 'alice',
          grantedAt: '2026-01-01T12:01:00+00:00',
          expiresAt: '2026-01-01T12:15:00+00:00',
        });
        clock.advance(MINUTE);
        expect(await store.consumeApproval(id, action.actionHash)).toEqual({
          approvalId: id,
          actionHash: action.actionHash,
          approver: 'alice',
          grantedAt: '2026-01-01T12:01:00+00:00',
          expiresAt: '2026-01-01T12:15:00+00:00',
        });
        expect(await store.getApproval(id)).toMatchObject({ status: 'consumed', consumedAt: '2026-01-01T12:02:00+00:00' });
        await refused(store.consumeApproval(id, action.actionHash), ApprovalMismatch, { ...mismatch('consumed'), approvalId: id }, 'replay');
        const key = freshKey();
        await refused(
          store.consumeApprovalAndReserve(id, action.actionHash, key, action.actionId, LEASE),
          ApprovalMismatch,
          mismatch('consumed'),
          'replay with a key',
        );
        expect(await store.getEffect(key)).toBeNull();
        // A replayed grant never resurrects it.
        await refused(store.grantApproval(id, 'bob'), ApprovalMismatch, mismatch('consumed'), 'grant after use');
        expect(await store.getApproval(id)).toMatchObject({ status: 'consumed', approver: 'alice', consumedAt: '2026-01-01T12:02:00+00:00' });
      });
    },
  },

  expiry: {
    suite: 'approval',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const atEdge = await granted(store, clock, action);
        const late = await granted(store, clock, action);
        const pending = await request(store, clock, action);
        const withKey = await granted(store, clock, action);
        expect(await store.findGrantedApproval(action.actionHash)).toMatchObject({ actionHash: action.actionHash });

        clock.advance(15 * MINUTE); // now == expires_at: still usable
        expect(await store.consumeApproval(atEdge, action.actionHash)).toMatchObject({ approvalId: atEdge });

        clock.advance(1); // checked at consumption, not only at grant
        await refused(store.consumeApproval(late, action.actionHash), ApprovalMismatch, { ...mismatch('expired'), approvalId: late }, 'consume after expiry');
        expect(await status(store, late)).toBe('expired'); // the kept write
        await refused(store.consumeApproval(late, action.actionHash), ApprovalMismatch, mismatch('expired'), 'consume again');
        expect(await status(store, late)).toBe('expired');

        await refused(store.grantApproval(pending, 'alice'), ApprovalMismatch, mismatch('expired'), 'grant after expiry');
        expect(await store.getApproval(pending)).toMatchObject({ status: 'expired', approver: null, grantedAt: null });

        const key = freshKey();
        await refused(
          store.consumeApprovalAndReserve(withKey, action.actionHash, key, action.actionId, LEASE),
          ApprovalMismatch,
          mismatch('expired'),
          'consume with a key after expiry',
        );
        expect(await status(store, withKey)).toBe('expired');
        expect(await store.getEffect(key)).toBeNull();
        expect(await store.findGrantedApproval(action.actionHash)).toBeNull();
      });
    },
  },

  'atomic-with-reservation': {
    suite: 'approval',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        // Both halves land together.
        const action = refundAction();
        const id = await granted(store, clock, action);
        const key = freshKey();
        const [approval, reservation] = await store.consumeApprovalAndReserve(id, action.actionHash, key, action.actionId, LEASE);
        expect(approval).toMatchObject({ approvalId: id, actionHash: action.actionHash, approver: 'alice' });
        expect(reservation).toEqual({ effectKey: key, actionId: action.actionId, attempt: 1, leaseExpiresAt: '2026-01-01T12:05:00+00:00' });
        expect(await status(store, id)).toBe('consumed');
        expect(await state(store, key)).toMatchObject({ state: 'reserved', actionId: action.actionId });

        // A refused reservation leaves the approval granted (T12), whatever the refusal.
        const cases = [
          { to: 'committed' as const, lapse: false, cls: DuplicateEffect, fields: DUP_COMMITTED, after: 'committed' },
          { to: 'executing' as const, lapse: false, cls: DuplicateEffect, fields: DUP_IN_PROGRESS, after: 'executing' },
          { to: 'ambiguous' as const, lapse: false, cls: AmbiguousEffect, fields: AMBIGUOUS, after: 'ambiguous' },
          { to: 'executing' as const, lapse: true, cls: AmbiguousEffect, fields: AMBIGUOUS, after: 'ambiguous' },
        ];
        for (const c of cases) {
          const k = freshKey();
          await drive(store, k, c.to);
          const next = refundAction();
          const apr = await granted(store, clock, next);
          if (c.lapse) clock.advance(LEASE + 1);
          await refused(
            store.consumeApprovalAndReserve(apr, next.actionHash, k, next.actionId, LEASE),
            c.cls as ErrorClass<Error>,
            c.fields,
            `${c.to}${c.lapse ? ' (lapsed)' : ''}`,
          );
          expect(await store.getApproval(apr), `${c.to}: approval stays granted`).toMatchObject({ status: 'granted', consumedAt: null });
          expect(await state(store, k)).toMatchObject({ state: c.after });
        }

        // A failed key is renewed and the approval consumed, together.
        const kf = freshKey();
        await drive(store, kf, 'failed');
        const retry = refundAction();
        const aprF = await granted(store, clock, retry);
        const [, renewed] = await store.consumeApprovalAndReserve(aprF, retry.actionHash, kf, retry.actionId, LEASE);
        expect(renewed).toMatchObject({ attempt: 2, actionId: retry.actionId });
        expect(await status(store, aprF)).toBe('consumed');
      });
    },
  },

  'edit-answer-race': {
    suite: 'approval',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        // Optional: a store without it cannot take edits (Control refuses them before any write).
        const edit = store.editApproval?.bind(store);
        if (edit === undefined) return;
        const proposed = refundAction(9000);
        const edited = refundAction(7000);
        const id = await request(store, clock, proposed);
        clock.advance(MINUTE);
        const newId = randomIds('apr');
        const trailing = {
          drafts: () => [
            {
              ts: '2026-01-01T12:01:00.000Z',
              type: 'APPROVAL_GRANTED',
              actionId: null,
              effectKey: null,
              approvalId: newId,
              data: { approver: 'alice', edited_from: id },
            } satisfies EventDraft,
          ],
          stored: undefined as unknown,
        };
        const result = await edit({ requestId: id, editedRequestId: newId, action: edited, approver: 'alice', policyHash: null }, trailing as never);
        expect(result.approved).toEqual({
          approvalId: newId,
          actionHash: edited.actionHash,
          approver: 'alice',
          grantedAt: '2026-01-01T12:01:00+00:00',
          expiresAt: '2026-01-01T12:15:00+00:00',
        });
        expect(result.proposed).toMatchObject({ status: 'denied', approver: 'alice' });
        expect(await store.getApproval(id)).toMatchObject({ status: 'denied', approver: 'alice', grantedAt: null });
        const written = await store.getApproval(newId);
        expect(written).toMatchObject({
          status: 'granted',
          approver: 'alice',
          request: { actionHash: edited.actionHash, expiresAt: '2026-01-01T12:15:00+00:00' },
        });
        // Written granted at its creation: how the control path tells an edited grant without reading events.
        expect(written!.grantedAt, 'an edited request is granted at its creation').toBe(written!.request.createdAt);
        if (store.lastApprovalEvent) expect((await store.lastApprovalEvent(newId, 'APPROVAL_GRANTED'))?.data).toEqual({ approver: 'alice', edited_from: id });
        // The edited grant is bound to the edited hash, once.
        await refused(store.consumeApproval(newId, proposed.actionHash), ApprovalMismatch, mismatch('mismatch'), 'the proposed hash on the edited grant');
        await refused(
          edit({ requestId: id, editedRequestId: randomIds('apr'), action: edited, approver: 'bob', policyHash: null }),
          ApprovalMismatch,
          mismatch('denied'),
          'edit after the edit',
        );

        // Racing answers of one pending request: edits, grants and denials; exactly one wins, whole.
        const contested = await request(store, clock, proposed);
        const ids = Array.from({ length: CONTENDERS }, () => randomIds('apr'));
        const calls = ids.map((n, i) =>
          i % 3 === 0
            ? store.grantApproval(contested, `granter-${i}`)
            : i % 3 === 1
              ? store.denyApproval(contested, `denier-${i}`)
              : edit({ requestId: contested, editedRequestId: n, action: refundAction(7000 + i), approver: `editor-${i}`, policyHash: null }),
        );
        const settled = await Promise.allSettled(calls);
        const won = settled.map((r, i) => (r.status === 'fulfilled' ? i : -1)).filter((i) => i >= 0);
        expect(won, 'exactly one answer wins').toHaveLength(1);
        for (const r of settled) if (r.status === 'rejected') expect(r.reason, 'a losing answer').toBeInstanceOf(ApprovalMismatch);
        const winner = won[0]!;
        const record = await store.getApproval(contested);
        const kinds = ['granted', 'denied', 'denied'] as const;
        expect(record).toMatchObject({
          status: kinds[winner % 3],
          approver: winner % 3 === 0 ? `granter-${winner}` : winner % 3 === 1 ? `denier-${winner}` : `editor-${winner}`,
        });
        // Only the winning edit's row exists; no loser left half a write.
        for (const [i, n] of ids.entries()) {
          if (i % 3 !== 2) continue;
          const row = await store.getApproval(n);
          if (i === winner) expect(row).toMatchObject({ status: 'granted', approver: `editor-${i}` });
          else expect(row, `losing edit ${i} wrote nothing`).toBeNull();
        }
      });
    },
  },

  'approval-threshold': {
    // What a request pins (spec 05 §4.5): several approvers needed, or a precondition fingerprint.
    // This build verifies no approver and rechecks no precondition, so neither is ever used by it.
    suite: 'approval',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        // The default, read back: one answer grants.
        const one = await request(store, clock, action);
        expect((await store.getApproval(one))?.request.approvalsRequired ?? 1, 'approvalsRequired by default').toBe(1);

        // Two needed: one (unverified) yes never grants it; it stays pending; a no denies it.
        const two = await request(store, clock, action, 15 * MINUTE, { approvalsRequired: 2 });
        expect((await store.getApproval(two))?.request.approvalsRequired, 'approvalsRequired read back').toBe(2);
        await refused(store.grantApproval(two, 'alice'), ApprovalMismatch, mismatch('pending'), 'one yes on two needed');
        expect(await status(store, two)).toBe('pending');
        await refused(store.consumeApproval(two, action.actionHash), ApprovalMismatch, mismatch('pending'), 'consuming it');
        await store.denyApproval(two, 'bob');
        expect(await status(store, two)).toBe('denied');

        // A fingerprinted request: granted, but never consumed (with or without a reservation); left granted.
        const fingerprint = `sha256:${'cd'.repeat(32)}`;
        const pre = await request(store, clock, action, 15 * MINUTE, { preconditionFingerprint: fingerprint });
        expect((await store.getApproval(pre))?.request.preconditionFingerprint, 'fingerprint read back').toBe(fingerprint);
        await store.grantApproval(pre, 'alice');
        await refused(store.consumeApproval(pre, action.actionHash), ApprovalMismatch, mismatch('precondition_missing'), 'consume');
        const key = freshKey();
        await refused(
          store.consumeApprovalAndReserve(pre, action.actionHash, key, action.actionId, LEASE),
          ApprovalMismatch,
          mismatch('precondition_missing'),
          'consume and reserve',
        );
        expect(await status(store, pre)).toBe('granted');
        expect(await store.getEffect(key), 'nothing reserved').toBeNull();

        // Malformed pins are refused, nothing written.
        for (const bad of [{ approvalsRequired: 0 }, { approvalsRequired: 1.5 }, { preconditionFingerprint: 'sha256:short' }])
          await refused(request(store, clock, action, 15 * MINUTE, bad), InvalidArgument, INVALID, `a malformed pin ${JSON.stringify(bad)}`);
      });
    },
  },

  // Quorum approvals (spec 05 §4.3, the original's count_grant): N distinct verified approvers.
  'm-of-n-nth': {
    suite: 'approval',
    test: 'test_T310_the_approval_is_consumable_only_after_the_nth',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const id = await request(store, clock, action, 15 * MINUTE, { approvalsRequired: 3 });
        const said = await refused(store.grantApproval(id, 'ana', ANA), ApprovalMismatch, mismatch('pending'), 'the first of three');
        expect(said.message, 'the refusal says the count').toContain('1 of 3 approvals: ana');
        expect(said.counted, 'the yes was counted').toBe(true);
        await refused(store.consumeApproval(id, action.actionHash), ApprovalMismatch, mismatch('pending'), 'consuming after one');
        clock.advance(1000);
        const second = await refused(store.grantApproval(id, 'bo', BO), ApprovalMismatch, mismatch('pending'), 'the second of three');
        expect(second.message).toContain('2 of 3 approvals: ana, bo');
        const partial = await store.getApproval(id);
        expect(partial, 'pending, the two recorded in order').toMatchObject({ status: 'pending', approver: null, grantedAt: null });
        expect(partial!.approvers, 'two verified approvers').toEqual([
          { ...ANA, grantedAt: '2026-01-01T12:00:00+00:00' },
          { ...BO, grantedAt: '2026-01-01T12:00:01+00:00' },
        ]);
        clock.advance(1234);
        const approval = await store.grantApproval(id, 'cy', CY);
        expect(approval, 'the third grants it').toMatchObject({ approvalId: id, approver: 'cy', grantedAt: '2026-01-01T12:00:02.234000+00:00' });
        expect(approval.approvers?.map((a) => a.user)).toEqual(['ana', 'bo', 'cy']);
        const consumed = await store.consumeApproval(id, action.actionHash);
        expect(
          consumed.approvers?.map((a) => a.user),
          'consumption names the approvers',
        ).toEqual(['ana', 'bo', 'cy']);
        expect(await store.getApproval(id)).toMatchObject({ status: 'consumed', approvers: approval.approvers });
      });
    },
  },

  'm-of-n-same-principal': {
    suite: 'approval',
    test: 'test_T311_a_second_grant_from_the_same_principal_counts_once',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const id = await request(store, clock, action, 15 * MINUTE, { approvalsRequired: 2 });
        await refused(store.grantApproval(id, 'ana', ANA), ApprovalMismatch, mismatch('pending'), 'the first yes');
        clock.advance(1000);
        // The same (agent, user), even through another issuer or with other roles: refused, saying so.
        const again = await refused(
          store.grantApproval(id, 'ana again', { ...ANA, issuer: 'https://other.example', entitled: ['refunds'] }),
          ApprovalMismatch,
          mismatch('pending'),
          'the same person again',
        );
        expect(again.message).toContain('ana already approved it');
        expect(again.counted, 'the second yes was not counted').toBe(false);
        expect(again.message).toContain('1 of 2 approvals: ana');
        const row = await store.getApproval(id);
        expect(row, 'still pending').toMatchObject({ status: 'pending' });
        expect(row!.approvers, 'counted once, as first recorded').toEqual([{ ...ANA, grantedAt: '2026-01-01T12:00:00+00:00' }]);
        // The same user under another agent is another principal.
        await store.grantApproval(id, 'ana elsewhere', { ...ANA, agent: 'inbox' });
        expect(await status(store, id)).toBe('granted');
      });
    },
  },

  'm-of-n-granted-refuses': {
    suite: 'approval',
    test: 'test_T312_a_grant_after_the_record_is_granted_is_refused',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const id = await request(store, clock, action, 15 * MINUTE, { approvalsRequired: 2 });
        await refused(store.grantApproval(id, 'ana', ANA), ApprovalMismatch, mismatch('pending'), 'the first yes');
        await store.grantApproval(id, 'bo', BO);
        await refused(store.grantApproval(id, 'cy', CY), ApprovalMismatch, mismatch('granted'), 'a third yes');
        await refused(store.denyApproval(id, 'cy', CY), ApprovalMismatch, mismatch('granted'), 'a no after');
        expect(
          (await store.getApproval(id))!.approvers?.map((a) => a.user),
          'the third is not recorded',
        ).toEqual(['ana', 'bo']);
      });
    },
  },

  'm-of-n-window': {
    suite: 'approval',
    test: 'test_T313_two_processes_granting_in_the_window_produce_two_approvers',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const id = await request(store, clock, action, 15 * MINUTE, { approvalsRequired: 2 });
        // Both read the request pending with no approver; each write is a compare-and-set on what it read.
        const outcomes = await Promise.allSettled([store.grantApproval(id, 'ana', ANA), store.grantApproval(id, 'bo', BO)]);
        const granted = outcomes.filter((o) => o.status === 'fulfilled');
        expect(granted.length, 'exactly one of the two reaches two').toBe(1);
        const pending = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
        expect(pending.reason, 'the other was counted first').toMatchObject(mismatch('pending'));
        const row = await store.getApproval(id);
        expect(row).toMatchObject({ status: 'granted' });
        expect(row!.approvers?.map((a) => a.user).sort(), 'two approvers, neither lost').toEqual(['ana', 'bo']);
      });
    },
  },

  'm-of-n-unverifiable': {
    suite: 'approval',
    test: 'test_T316_an_unverifiable_yes_does_not_count',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const id = await request(store, clock, action, 15 * MINUTE, { approvalsRequired: 2 });
        await refused(store.grantApproval(id, 'ana', ANA), ApprovalMismatch, mismatch('pending'), 'one verified yes');
        const unverified = await refused(store.grantApproval(id, 'cli:local'), ApprovalMismatch, mismatch('pending'), 'an unverified yes');
        expect(unverified.message).toContain('no verified identity');
        expect(unverified.message).toContain('1 of 2 approvals: ana');
        const row = await store.getApproval(id);
        expect(row).toMatchObject({ status: 'pending', approver: null });
        expect(row!.approvers?.length, 'the unverified yes left no trace').toBe(1);
      });
    },
  },

  'm-of-n-one-denial': {
    suite: 'approval',
    test: 'test_T317_one_denial_denies_a_request_holding_n_minus_one',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const id = await request(store, clock, action, 15 * MINUTE, { approvalsRequired: 3 });
        await refused(store.grantApproval(id, 'ana', ANA), ApprovalMismatch, mismatch('pending'), 'one');
        await refused(store.grantApproval(id, 'bo', BO), ApprovalMismatch, mismatch('pending'), 'two');
        const denied = await store.denyApproval(id, 'cy', CY);
        expect(denied).toMatchObject({ status: 'denied', approver: 'cy' });
        const row = await store.getApproval(id);
        expect(row).toMatchObject({ status: 'denied', approver: 'cy', grantedAt: null });
        expect(
          row!.approvers?.map((a) => a.user),
          'the denier is appended',
        ).toEqual(['ana', 'bo', 'cy']);
        await refused(store.consumeApproval(id, action.actionHash), ActionDenied, { reason: 'approval_denied' }, 'consuming it');
        // An unverified no denies as well.
        const other = await request(store, clock, action, 15 * MINUTE, { approvalsRequired: 2 });
        await refused(store.grantApproval(other, 'ana', ANA), ApprovalMismatch, mismatch('pending'), 'one of two');
        await store.denyApproval(other, 'cli:local');
        expect(await store.getApproval(other)).toMatchObject({ status: 'denied', approver: 'cli:local' });
      });
    },
  },

  'm-of-n-expiry': {
    suite: 'approval',
    test: 'test_T318_grants_do_not_extend_the_requests_expiry',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const id = await request(store, clock, action, 15 * MINUTE, { approvalsRequired: 2 });
        const expiresAt = (await store.getApproval(id))!.request.expiresAt;
        clock.advance(10 * MINUTE);
        await refused(store.grantApproval(id, 'ana', ANA), ApprovalMismatch, mismatch('pending'), 'one of two');
        expect((await store.getApproval(id))!.request.expiresAt, 'unchanged by a partial grant').toBe(expiresAt);
        clock.advance(5 * MINUTE + 1);
        await refused(store.grantApproval(id, 'bo', BO), ApprovalMismatch, mismatch('expired'), 'the second after expiry');
        expect(await status(store, id)).toBe('expired');
      });
    },
  },

  'm-of-n-one-required': {
    suite: 'approval',
    test: 'test_T319_one_required_is_unchanged',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        // Unverified: granted by one answer, no approvers recorded (the 0.7 path).
        const plain = await request(store, clock, action);
        const approval = await store.grantApproval(plain, 'cli:local');
        expect(approval).toEqual({
          approvalId: plain,
          actionHash: action.actionHash,
          approver: 'cli:local',
          grantedAt: storedTime(clock()),
          expiresAt: approval.expiresAt,
        });
        expect((await store.getApproval(plain))!.approvers, 'none recorded').toBe(undefined);
        // Verified: granted by one answer, the approver recorded.
        const verified = await request(store, clock, action);
        expect((await store.grantApproval(verified, 'ana', ANA)).approvers).toEqual([{ ...ANA, grantedAt: storedTime(clock()) }]);
        // Required roles are pinned and read back in order.
        const roles = [
          { control: 'refund-limit', role: 'finance' },
          { control: 'pii', role: 'privacy officer' },
        ];
        const pinned = await request(store, clock, action, 15 * MINUTE, { requiredRoles: roles });
        expect((await store.getApproval(pinned))!.request.requiredRoles).toEqual(roles);
        for (const bad of [{ requiredRoles: [{ control: '', role: 'x' }] }, { requiredRoles: 'finance' as unknown as [] }])
          await refused(request(store, clock, action, 15 * MINUTE, bad), InvalidArgument, INVALID, `malformed roles ${JSON.stringify(bad)}`);
        for (const bad of [{ agent: '' }, { entitled: 'x' }, { user: 7 }])
          await refused(
            store.grantApproval(pinned, 'ana', { ...ANA, ...bad } as unknown as typeof ANA),
            InvalidArgument,
            INVALID,
            `a malformed verified approver ${JSON.stringify(bad)}`,
          );
        expect(await status(store, pinned), 'nothing written by a malformed answer').toBe('pending');
      });
    },
  },

  'precondition-fingerprint': {
    suite: 'approval',
    test: 'test_T253_a_moved_fingerprint_refuses_by_its_own_reason',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const then = `sha256:${'cd'.repeat(32)}`;
        const now = `sha256:${'ef'.repeat(32)}`;
        const id = await request(store, clock, action, 15 * MINUTE, { preconditionFingerprint: then });
        await store.grantApproval(id, 'alice');
        // Changed, missing on the pass's side, a recheck that never ran: refused, left granted.
        await refused(store.consumeApproval(id, action.actionHash, now), ApprovalMismatch, mismatch('precondition_changed'), 'a moved fingerprint');
        await refused(store.consumeApproval(id, action.actionHash, null), ApprovalMismatch, mismatch('precondition_missing'), 'no provider on the pass');
        await refused(store.consumeApproval(id, action.actionHash), ApprovalMismatch, mismatch('precondition_missing'), 'no recheck ran');
        const key = freshKey();
        await refused(
          store.consumeApprovalAndReserve(id, action.actionHash, key, action.actionId, LEASE, undefined, now),
          ApprovalMismatch,
          mismatch('precondition_changed'),
          'a moved fingerprint with a key',
        );
        if (store.reserveForExecution)
          await refused(
            store.reserveForExecution({ key, actionId: action.actionId, leaseMs: LEASE, approval: { id, actionHash: action.actionHash, precondition: now } }),
            ApprovalMismatch,
            mismatch('precondition_changed'),
            'a moved fingerprint in one step',
          );
        expect(await status(store, id), 'left granted').toBe('granted');
        expect(await store.getEffect(key), 'nothing reserved').toBeNull();
        // The same world: consumed, with the reservation.
        const [approval] = await store.consumeApprovalAndReserve(id, action.actionHash, key, action.actionId, LEASE, undefined, then);
        expect(approval).toMatchObject({ approvalId: id, preconditionFingerprint: then });
        expect(await status(store, id)).toBe('consumed');
        // A fingerprint on the pass's side only is one side only.
        const bare = await granted(store, clock, action);
        await refused(store.consumeApproval(bare, action.actionHash, now), ApprovalMismatch, mismatch('precondition_missing'), 'no fingerprint pinned');
        expect(await store.consumeApproval(bare, action.actionHash, null), 'none on either side').toMatchObject({ approvalId: bare });
        await refused(store.consumeApproval(id, action.actionHash, 'sha256:short'), InvalidArgument, INVALID, 'a malformed recheck');
      });
    },
  },

  'approval-checked-first': {
    suite: 'approval',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const other = refundAction(9999);

        // Mismatch beats a committed key.
        const kc = freshKey();
        await drive(store, kc, 'committed');
        const id1 = await granted(store, clock, action);
        await refused(
          store.consumeApprovalAndReserve(id1, other.actionHash, kc, other.actionId, LEASE),
          ApprovalMismatch,
          mismatch('mismatch'),
          'mismatch over committed',
        );
        expect(await status(store, id1)).toBe('granted');

        // Unknown beats a committed key.
        await refused(
          store.consumeApprovalAndReserve('apr_unknown', action.actionHash, kc, action.actionId, LEASE),
          ApprovalMismatch,
          mismatch('unknown'),
          'unknown over committed',
        );
        expect(await state(store, kc)).toMatchObject({ state: 'committed' });

        // Denied beats an ambiguous key.
        const ka = freshKey();
        await drive(store, ka, 'ambiguous');
        const id2 = await request(store, clock, action);
        await store.denyApproval(id2, 'bob');
        await refused(
          store.consumeApprovalAndReserve(id2, action.actionHash, ka, action.actionId, LEASE),
          ActionDenied,
          { code: 'ERR_ACTION_DENIED', reason: 'approval_denied' },
          'denied over ambiguous',
        );
        expect(await store.getApproval(id2)).toMatchObject({ status: 'denied', approver: 'bob' });

        // Pending beats an in-progress key.
        const kp = freshKey();
        await drive(store, kp, 'reserved');
        const id3 = await request(store, clock, action);
        await refused(
          store.consumeApprovalAndReserve(id3, action.actionHash, kp, action.actionId, LEASE),
          ApprovalMismatch,
          mismatch('pending'),
          'pending over in progress',
        );

        // A refused approval is raised before the reservation is planned: a lapsed record is not ambiguated.
        const kl = freshKey();
        const holder = await drive(store, kl, 'executing');
        const used = await granted(store, clock, action, LEASE - MINUTE);
        await store.consumeApproval(used, action.actionHash);
        const stale = await granted(store, clock, action, LEASE - MINUTE);
        clock.advance(LEASE + 1);
        await refused(
          store.consumeApprovalAndReserve(used, action.actionHash, kl, action.actionId, LEASE),
          ApprovalMismatch,
          mismatch('consumed'),
          'consumed over lapsed',
        );
        await refused(
          store.consumeApprovalAndReserve(stale, action.actionHash, kl, action.actionId, LEASE),
          ApprovalMismatch,
          mismatch('expired'),
          'expired over lapsed',
        );
        expect(await status(store, stale)).toBe('expired');
        expect(await state(store, kl)).toMatchObject({ state: 'executing', actionId: holder, error: null });
      });
    },
  },

  // ----------------------------------------------------------------- resolution
  'only-ambiguous': {
    suite: 'resolution',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        await refused(store.resolveEffect(freshKey(), 'committed', 'cli:local'), InvalidArgument, INVALID, 'no record');
        for (const to of ['reserved', 'executing', 'committed', 'failed'] as const) {
          const k = freshKey();
          await drive(store, k, to);
          const before = await store.getEffect(k);
          for (const target of ['committed', 'failed'] as const) {
            await refused(store.resolveEffect(k, target, 'cli:local'), InvalidArgument, INVALID, `resolve ${to} → ${target}`);
          }
          expect(await store.getEffect(k), `${to} unchanged`).toEqual(before);
        }
        const k = freshKey();
        await drive(store, k, 'ambiguous');
        const before = await store.getEffect(k);
        await refused(store.resolveEffect(k, 'executing' as 'committed', 'cli:local'), InvalidArgument, INVALID, 'resolve to executing');
        await refused(store.resolveEffect(k, 'committed', ''), InvalidArgument, INVALID, 'empty resolver');
        await refused(store.resolveEffect(k, 'committed', 'cli:local\nrm -rf'), InvalidArgument, INVALID, 'two-line resolver');
        expect(await store.getEffect(k)).toEqual(before);
        clock.advance(MINUTE);
        expect(await store.resolveEffect(k, 'committed', 'cli:local')).toMatchObject({ state: 'committed', resolvedBy: 'cli:local' });
        expect(await store.getEffect(k)).toEqual({
          ...before!,
          state: 'committed',
          leaseExpiresAt: null,
          resolvedBy: 'cli:local',
          updatedAt: '2026-01-01T12:01:00+00:00',
          error: 'resolved committed by cli:local (was: TimeoutError: the remote did not answer)',
        });
      });
    },
  },

  'two-resolutions': {
    suite: 'resolution',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const k = freshKey();
        await drive(store, k, 'ambiguous');
        await store.resolveEffect(k, 'committed', 'cli:local');
        await refused(store.resolveEffect(k, 'failed', 'reconcile:payments.refund'), InvalidArgument, INVALID, 'second resolution');
        expect(await state(store, k)).toMatchObject({
          state: 'committed',
          resolvedBy: 'cli:local',
          error: 'resolved committed by cli:local (was: TimeoutError: the remote did not answer)',
        });
        await refused(store.reserveEffect(k, act(), LEASE), DuplicateEffect, DUP_COMMITTED, 'retry after resolved committed');

        const kf = freshKey();
        await drive(store, kf, 'ambiguous');
        await store.resolveEffect(kf, 'failed', 'reconcile:payments.refund');
        await refused(store.resolveEffect(kf, 'committed', 'cli:local'), InvalidArgument, INVALID, 'second resolution of failed');
        expect(await state(store, kf)).toMatchObject({
          state: 'failed',
          resolvedBy: 'reconcile:payments.refund',
          error: 'resolved failed by reconcile:payments.refund (was: TimeoutError: the remote did not answer)',
        });
        // resolve failed permits a retry (T10), which clears the resolution.
        const retry = act();
        expect(await store.reserveEffect(kf, retry, LEASE)).toMatchObject({ attempt: 2, actionId: retry });
        expect(await state(store, kf)).toMatchObject({ state: 'reserved', resolvedBy: null, error: null });
      });
    },
  },

  // ----------------------------------------------------------------- outcome
  'no-failed-on-refusal': {
    suite: 'outcome',
    async run(factory) {
      await runRefusalPaths(factory);
    },
  },

  'no-not-executed': {
    suite: 'outcome',
    async run(factory) {
      const seen = new Set<string>();
      await runRefusalPaths(factory, (path, err) => {
        expect(err, `${path.name}: a store never raises NotExecuted`).not.toBeInstanceOf(NotExecuted);
        expect((err as { code?: string }).code, `${path.name}: code`).not.toBe('ERR_NOT_EXECUTED');
        expect((err as Error).name, `${path.name}: name`).not.toBe('NotExecuted');
        seen.add((err as Error).name);
      });
      expect([...seen].sort()).toEqual(['AmbiguousEffect', 'DuplicateEffect']);
      // Transitions on a missing record are InvalidArgument, not NotExecuted either.
      await withStore(factory, manualClock(), async (store) => {
        const k = freshKey();
        const a = act();
        await refused(store.beginExecution(k, a), InvalidArgument, INVALID, 'begin without a record');
        await refused(store.commitEffect(k, a, null), InvalidArgument, INVALID, 'commit without a record');
        await refused(store.failEffect(k, a, 'NotExecuted: declined'), InvalidArgument, INVALID, 'fail without a record');
        await refused(store.markAmbiguous(k, a, 'TimeoutError'), InvalidArgument, INVALID, 'mark without a record');
        expect(await store.getEffect(k)).toBeNull();
      });
    },
  },

  // ----------------------------------------------------------------- durability
  'ambiguous-survives': {
    suite: 'durability',
    durable: true,
    async run(factory) {
      if (!factory.reopen) return declaredHonestly(factory, 'no reopen()');
      const clock = manualClock();
      let store = await factory.open(clock);
      const marked = freshKey();
      const crashed = freshKey();
      let holder: string;
      try {
        await drive(store, marked, 'ambiguous');
        holder = await drive(store, crashed, 'executing'); // the worker dies here
      } finally {
        await store.close();
      }
      clock.advance(LEASE + 1);
      store = await factory.reopen!(store, clock);
      try {
        expect(await state(store, marked)).toMatchObject({ state: 'ambiguous', error: 'TimeoutError: the remote did not answer' });
        // Opening never transitions: the lapsed record is still executing until a contender plans.
        expect(await state(store, crashed)).toMatchObject({ state: 'executing', actionId: holder });
        await refused(store.reserveEffect(marked, act(), LEASE), AmbiguousEffect, { ...AMBIGUOUS, effectKey: marked }, 'blind retry after restart');
        await refused(
          store.reserveEffect(crashed, act(), LEASE),
          AmbiguousEffect,
          { ...AMBIGUOUS, effectKey: crashed, actionId: holder },
          'contender after restart',
        );
      } finally {
        await store.close();
      }
      store = await factory.reopen!(store, clock);
      try {
        expect(await state(store, crashed)).toMatchObject({ state: 'ambiguous', error: LEASE_EXPIRED_TEXT, actionId: holder });
        expect(await state(store, marked)).toMatchObject({ state: 'ambiguous' });
        await refused(store.reserveEffect(crashed, act(), LEASE), AmbiguousEffect, AMBIGUOUS, 'still refused after a second restart');
      } finally {
        await store.close();
      }
    },
  },

  'terminal-states-survive': {
    suite: 'durability',
    durable: true,
    async run(factory) {
      if (!factory.reopen) return declaredHonestly(factory, 'no reopen()');
      const clock = manualClock();
      let store = await factory.open(clock);
      const committed = freshKey();
      const failed = freshKey();
      const resolved = freshKey();
      const action = refundAction();
      let approvalId: string;
      let before: (EffectRecord | null)[];
      let head: unknown;
      try {
        const a = act();
        await store.reserveEffect(committed, a, LEASE);
        await store.beginExecution(committed, a);
        await store.commitEffect(committed, a, { refund_id: 'r-77', amount: 2500, big: 2n ** 60n });
        await drive(store, failed, 'failed');
        await drive(store, resolved, 'ambiguous');
        await store.resolveEffect(resolved, 'committed', 'cli:local');
        approvalId = await granted(store, clock, action);
        await store.consumeApproval(approvalId, action.actionHash);
        await store.putReceipt(receiptDraft(action, 'committed', committed));
        before = await Promise.all([committed, failed, resolved].map((k) => store.getEffect(k)));
        head = await store.chainHead();
      } finally {
        await store.close();
      }
      store = await factory.reopen!(store, clock);
      try {
        const after = await Promise.all([committed, failed, resolved].map((k) => store.getEffect(k)));
        expect(after).toEqual(before);
        expect(after.map((r) => r?.state)).toEqual(['committed', 'failed', 'committed']);
        expect(after[0]!.resultJson).toBe('{"refund_id":"r-77","amount":2500,"big":1152921504606846976}');
        expect(after[2]!.resolvedBy).toBe('cli:local');
        expect(await status(store, approvalId)).toBe('consumed');
        expect(await store.chainHead()).toEqual(head);
        await refused(store.reserveEffect(committed, act(), LEASE), DuplicateEffect, DUP_COMMITTED, 'committed after restart');
        await refused(store.reserveEffect(resolved, act(), LEASE), DuplicateEffect, DUP_COMMITTED, 'resolved after restart');
        await refused(store.consumeApproval(approvalId, action.actionHash), ApprovalMismatch, mismatch('consumed'), 'approval after restart');
        expect(await store.reserveEffect(failed, act(), LEASE)).toMatchObject({ attempt: 2 });
      } finally {
        await store.close();
      }
    },
  },

  'session-ended-survives': {
    suite: 'durability',
    durable: true,
    async run(factory) {
      const clock = manualClock();
      let store = await factory.open(clock);
      const signedOut = randomIds('apr').replace(/^apr_/, 's');
      const expires = T0.getTime() + 8 * 60 * MINUTE;
      try {
        if (!store.endSession || !store.sessionEnded) return;
        // Nothing ended yet (the table does not exist): every session lives.
        expect(await store.sessionEnded(signedOut), 'before any sign-out').toBe(false);
        await store.endSession(signedOut, expires);
        expect(await store.sessionEnded(signedOut), 'after its sign-out').toBe(true);
        expect(await store.sessionEnded('another-session'), 'another session').toBe(false);
        // Idempotent; a record past its expiry is dropped by the next sign-out.
        await store.endSession(signedOut, expires);
        await store.endSession('long-gone', T0.getTime() - 1);
        await store.endSession('next-one', expires);
        expect(await store.sessionEnded('long-gone'), 'an expired record').toBe(false);
        expect(await store.sessionEnded(signedOut), 'still ended').toBe(true);
        await refused(store.endSession('not a session id', expires), InvalidArgument, INVALID, 'a malformed session id');
        await refused(store.endSession('ok-id', Number.NaN), InvalidArgument, INVALID, 'an expiry that is not a time');
      } finally {
        await store.close();
      }
      if (!factory.reopen) return declaredHonestly(factory, 'no reopen()');
      store = await factory.reopen(store, clock);
      try {
        // Another handle (another process, isolate or instance) reads the sign-out from the store.
        expect(await store.sessionEnded!(signedOut), 'after a restart').toBe(true);
        expect(await store.sessionEnded!('another-session'), 'another session after a restart').toBe(false);
      } finally {
        await store.close();
      }
    },
  },

  // ----------------------------------------------------------------- evidence
  'action-round-trip': {
    suite: 'evidence',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const args: Record<string, unknown> = {
          amount: 2500,
          negative: -7,
          zero: 0,
          huge: 2n ** 60n + 1n,
          flag: true,
          off: false,
          nothing: null,
          text: 'naïve – 東京 🎉 "quoted" \\ back',
          nested: { list: [1, 'two', [3n ** 40n], { deep: true }], empty: {}, none: [] },
        };
        Object.defineProperty(args, '__proto__', { value: 'data, not a prototype', enumerable: true, writable: true, configurable: true });
        const action = createAction({
          name: 'payments.refund',
          arguments: args,
          principal: {
            agent: 'support-bot',
            user: 'alice@example.com',
            claims: { role: 'support', level: 3, verified: true },
            issuer: 'https://id.example',
            expiresAt: '2026-01-02T00:00:00+05:30',
          },
          resource: 'customer:42',
          environment: 'staging',
        });
        expect(action.canonical).toContain('"__proto__":"data, not a prototype"');
        const id = await request(store, clock, action);
        const record = await store.getApproval(id);
        expect(record).not.toBeNull();
        const back = record!.request.action;
        expect(back.actionHash).toBe(action.actionHash);
        expect(back.canonical).toBe(action.canonical);
        expect(back.actionId).toBe(action.actionId);
        expect({ name: back.name, resource: back.resource, environment: back.environment }).toEqual({
          name: 'payments.refund',
          resource: 'customer:42',
          environment: 'staging',
        });
        expect(back.principal).toMatchObject({
          agent: 'support-bot',
          user: 'alice@example.com',
          claims: { role: 'support', level: 3, verified: true },
          issuer: 'https://id.example',
          expiresAt: '2026-01-02T00:00:00+05:30',
        });
        const a = back.arguments as Record<string, unknown>;
        // Types, not only values: a bigint stays a bigint, a boolean never becomes 0/1.
        expect(typeof a['huge']).toBe('bigint');
        expect(a['huge']).toBe(2n ** 60n + 1n);
        expect(typeof a['amount']).toBe('number');
        expect(a['flag']).toBe(true);
        expect(a['off']).toBe(false);
        expect(a['nothing']).toBeNull();
        expect(a['text']).toBe('naïve – 東京 🎉 "quoted" \\ back');
        expect(Object.prototype.hasOwnProperty.call(a, '__proto__')).toBe(true);
        const list = (a['nested'] as { list: unknown[] }).list;
        expect(typeof (list[2] as unknown[])[0]).toBe('bigint');
        expect(list[3]).toEqual({ deep: true });
        expect(record!.request).toMatchObject({
          requestId: id,
          actionHash: action.actionHash,
          createdAt: '2026-01-01T12:00:00+00:00',
          expiresAt: '2026-01-01T12:15:00+00:00',
          policyHash: `sha256:${'ab'.repeat(32)}`,
        });
        const listed = await store.approvalsFor(action.actionHash);
        expect(listed.map((r) => r.request.requestId)).toEqual([id]);
        expect(listed[0]!.request.action.actionHash).toBe(action.actionHash);
      });
    },
  },

  'event-ids': {
    suite: 'evidence',
    async run(factory) {
      await withStore(factory, manualClock(), async (store) => {
        const drafts: EventDraft[] = [
          {
            ts: '2026-01-01T12:00:00.000Z',
            type: 'ACTION_PROPOSED',
            actionId: 'act_1',
            effectKey: null,
            approvalId: null,
            data: { name: 'payments.refund', amount: 2500 },
          },
          {
            ts: '2026-01-01T12:00:00.001Z',
            type: 'POLICY_EVALUATED',
            actionId: 'act_1',
            effectKey: null,
            approvalId: null,
            data: { decision: 'approve', reason: 'rule[0]', controls: ['four-eyes'] },
          },
          {
            ts: '2026-01-01T12:00:00.002Z',
            type: 'APPROVAL_REQUESTED',
            actionId: 'act_1',
            effectKey: null,
            approvalId: 'apr_1',
            data: { big: 2n ** 62n, text: 'ü 東京', flag: false, nothing: null },
          },
          {
            ts: '2026-01-01T12:00:00.003Z',
            type: 'EFFECT_RESERVED',
            actionId: 'act_1',
            effectKey: 'refund:1',
            approvalId: 'apr_1',
            data: { nested: { a: [1, 2, { b: true }] } },
          },
          { ts: '2026-01-01T12:00:00.004Z', type: 'EXECUTION_COMMITTED', actionId: 'act_1', effectKey: 'refund:1', approvalId: null, data: {} },
        ];
        const appended = [];
        for (const d of drafts) appended.push(await store.appendEvent(d));
        const ids = appended.map((e) => e.eventId);
        for (let i = 0; i < ids.length; i++) {
          expect(Number.isSafeInteger(ids[i]), 'event ids are integers').toBe(true);
          if (i > 0) expect(ids[i]!, 'event ids increase').toBeGreaterThan(ids[i - 1]!);
        }
        const stored = await store.events();
        expect(
          stored.map((e) => e.eventId),
          'stored ids are the ids handed out, in order',
        ).toEqual(ids);
        for (let i = 0; i < drafts.length; i++) {
          const d = drafts[i]!;
          const s = stored[i]!;
          expect({ ts: s.ts, type: s.type, actionId: s.actionId, effectKey: s.effectKey, approvalId: s.approvalId }).toEqual({
            ts: d.ts,
            type: d.type,
            actionId: d.actionId,
            effectKey: d.effectKey,
            approvalId: d.approvalId,
          });
          expect({ ...s.data }).toEqual(d.data);
        }
        expect(typeof stored[2]!.data['big']).toBe('bigint');
        // A later event still gets a larger id.
        const later = await store.appendEvent({ ...drafts[0]!, ts: '2026-01-01T12:00:01.000Z' });
        expect(later.eventId).toBeGreaterThan(ids[ids.length - 1]!);
        // The newest event of one type for one action (how a resumption reads its suspension back).
        if (store.lastEvent) {
          expect((await store.lastEvent('act_1', 'ACTION_PROPOSED'))?.eventId, 'the newest of two').toBe(later.eventId);
          expect((await store.lastEvent('act_1', 'EFFECT_RESERVED'))?.data).toEqual(drafts[3]!.data);
          expect(await store.lastEvent('act_2', 'ACTION_PROPOSED'), 'another action').toBeNull();
          expect(await store.lastEvent('act_1', 'EXECUTION_SUSPENDED'), 'another type').toBeNull();
        }
      });
    },
  },

  'receipt-round-trip': {
    suite: 'evidence',
    async run(factory) {
      await withStore(factory, manualClock(), async (store) => {
        expect(await store.chainHead()).toEqual({ seq: 0, hash: GENESIS_HASH });
        const action = refundAction();
        const drafts = [receiptDraft(action, 'committed', 'refund:r1'), receiptDraft(action, 'denied', null), receiptDraft(action, 'ambiguous', 'refund:r3')];
        let prev = GENESIS_HASH;
        const stored = [];
        for (let i = 0; i < drafts.length; i++) {
          const r = await store.putReceipt(drafts[i]!);
          expect(r.seq).toBe(i + 1);
          expect(r.prevHash).toBe(prev);
          const parsed = parseJson(r.json) as JsonObject;
          expect(r.hash, 'the hash is over the stored document').toBe(hashDocument(parsed));
          expect(parsed['seq']).toBe(i + 1);
          expect(parsed['prev_hash']).toBe(prev);
          expect('hash' in parsed).toBe(false);
          expect(Object.keys(parsed)).toEqual(Object.keys(drafts[i]!.document));
          expect({ ...parsed, seq: null, prev_hash: null }).toEqual({ ...drafts[i]!.document });
          prev = r.hash;
          stored.push(r);
        }
        expect(await store.chainHead()).toEqual({ seq: 3, hash: prev });
        const rows = await store.receipts();
        expect(rows).toEqual(
          stored.map((r, i) => ({
            receipt_id: drafts[i]!.receiptId,
            action_id: action.actionId,
            effect_key: drafts[i]!.effectKey,
            result: drafts[i]!.result,
            json: r.json,
            ts: drafts[i]!.finishedAt,
            seq: i + 1,
            prev_hash: r.prevHash,
            hash: r.hash,
          })),
        );
      });
    },
  },

  'bounded-reads': {
    suite: 'evidence',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const action = refundAction();
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) ids.push((await store.putReceipt(receiptDraft(action, 'committed', `refund:b${i}`))).document['receipt_id'] as string);
        const all = await store.receipts();
        // Pages by seq, each at most `limit` rows, the same rows as the full read.
        expect(await store.receiptsAfter(0, 2)).toEqual(all.slice(0, 2));
        expect(await store.receiptsAfter(2, 2)).toEqual(all.slice(2, 4));
        expect(await store.receiptsAfter(4, 100)).toEqual(all.slice(4));
        expect(await store.receiptsAfter(5, 100)).toEqual([]);
        expect(await store.getReceipt(ids[3]!)).toEqual(all[3]);
        expect(await store.getReceipt('ctr_missing')).toBeNull();
        for (const [after, limit] of [
          [-1, 1],
          [0, 0],
          [0, 10_001],
          [1.5, 1],
        ] as const) {
          await refused(store.receiptsAfter(after, limit), InvalidArgument, INVALID, `receiptsAfter(${after}, ${limit})`);
        }

        // Approvals: pages in (createdAt, id) order, optionally by status; equal timestamps are split by id.
        const made: string[] = [];
        for (let i = 0; i < 5; i++) {
          made.push(await request(store, clock, refundAction(100 + i)));
          if (i % 2 === 1) clock.advance(1000);
        }
        await store.denyApproval(made[1]!, 'alice');
        const everything = await store.listApprovals();
        const walk = async (status?: 'pending'): Promise<string[]> => {
          const seen: string[] = [];
          let after: { createdAt: string; requestId: string } | null = null;
          for (;;) {
            const page = await store.approvalsPage({ status, after, limit: 2 });
            expect(page.length).toBeLessThanOrEqual(2);
            seen.push(...page.map((r) => r.request.requestId));
            if (page.length < 2) return seen;
            const last = page.at(-1)!;
            after = { createdAt: last.request.createdAt, requestId: last.request.requestId };
          }
        };
        const byPosition = [...everything].sort((a, b) =>
          a.request.createdAt === b.request.createdAt
            ? a.request.requestId < b.request.requestId
              ? -1
              : 1
            : a.request.createdAt < b.request.createdAt
              ? -1
              : 1,
        );
        expect(await walk()).toEqual(byPosition.map((r) => r.request.requestId));
        expect(await walk('pending')).toEqual(byPosition.filter((r) => r.status === 'pending').map((r) => r.request.requestId));
        await refused(store.approvalsPage({ status: 'maybe' as never, limit: 1 }), InvalidArgument, INVALID, 'an unknown status');
      });
    },
  },

  'pending-per-principal': {
    suite: 'approval',
    async run(factory) {
      const clock = manualClock();
      await withStore(factory, clock, async (store) => {
        const by = (agent: string, user: string | null, n: number) => createAction({ name: 'x.act', arguments: { n }, principal: { agent, user } });
        await request(store, clock, by('bot', 'u-1', 1), 10 * MINUTE);
        await request(store, clock, by('bot', 'u-1', 2), 30 * MINUTE);
        await request(store, clock, by('bot', null, 3));
        await request(store, clock, by('other', 'u-1', 4));
        // An argument that looks like a principal is not one.
        await request(
          store,
          clock,
          createAction({ name: 'x.act', arguments: { principal: { agent: 'bot', user: 'u-1' } }, principal: { agent: 'other', user: null } }),
        );
        const answered = await request(store, clock, by('bot', 'u-1', 6));
        await store.denyApproval(answered, 'alice');
        expect(await store.countPendingApprovals({ agent: 'bot', user: 'u-1' })).toBe(2);
        expect(await store.countPendingApprovals({ agent: 'bot', user: null })).toBe(1);
        expect(await store.countPendingApprovals({ agent: 'other', user: null })).toBe(1);
        expect(await store.countPendingApprovals({ agent: 'nobody', user: null })).toBe(0);
        // Expired requests stop counting, though still written pending.
        clock.advance(20 * MINUTE);
        expect(await store.countPendingApprovals({ agent: 'bot', user: 'u-1' })).toBe(1);
      });
    },
  },

  'insert-not-upsert': {
    suite: 'delegation',
    test: 'test_put_delegation_is_never_an_upsert',
    async run(factory) {
      await withStore(factory, manualClock(), async (store) => {
        const first = delegationRow();
        await store.putDelegation(first);
        // The same id again, with different content: refused, and the first act is untouched.
        const second = delegationRow({
          delegationId: first.delegationId,
          parentId: 'another-grant',
          createdByAgent: 'mallory',
          grantJson: grantToJson(new Grant({ subject: { agent: 'mallory' }, actions: ['**'] })),
        });
        await refused(store.putDelegation(second), InvalidArgument, INVALID, 'a second put under one id');
        expect(await store.getDelegation(first.delegationId)).toEqual(first);
        expect(await store.delegations()).toEqual([first]);
        expect(await store.delegationsFor('head-of-finance')).toEqual([first]);
        expect(await store.delegationsFor('another-grant')).toEqual([]);
        expect(await store.getDelegation(randomIds('dlg'))).toBeNull();
        // A child is listed under its parent, oldest first.
        const child = delegationRow({ parentId: first.delegationId, depth: 2, createdAt: storedTime(new Date(T0.getTime() + 1000)) });
        await store.putDelegation(child);
        expect(await store.delegationsFor(first.delegationId)).toEqual([child]);
        expect((await store.delegations()).map((d) => d.delegationId)).toEqual([first.delegationId, child.delegationId]);
      });
    },
  },

  'revoke-atomic-idempotent': {
    suite: 'delegation',
    async run(factory) {
      await withStore(factory, manualClock(), async (store) => {
        const row = delegationRow();
        await store.putDelegation(row);
        const at = storedTime(new Date(T0.getTime() + 60_000));
        expect(await store.revokeDelegation(row.delegationId, 'ops@example.com', at)).toBe(true);
        const revoked = { ...row, revokedAt: at, revokedBy: 'ops@example.com' };
        expect(await store.getDelegation(row.delegationId)).toEqual(revoked);
        // Again: false, nothing written (the first revocation's time and author stand).
        expect(await store.revokeDelegation(row.delegationId, 'someone-else', storedTime(new Date(T0.getTime() + 120_000)))).toBe(false);
        expect(await store.getDelegation(row.delegationId)).toEqual(revoked);
        await refused(store.revokeDelegation(randomIds('dlg'), 'ops', at), InvalidArgument, INVALID, 'revoking an unknown delegation');
        // Live listings leave it out; the full listing keeps it.
        expect(await store.delegations()).toEqual([]);
        expect(await store.delegations({ includeRevoked: true })).toEqual([revoked]);
        // Concurrent revocations: exactly one wins.
        const contested = delegationRow();
        await store.putDelegation(contested);
        const results = await Promise.all(Array.from({ length: CONTENDERS }, (_, i) => store.revokeDelegation(contested.delegationId, `revoker-${i}`, at)));
        expect(results.filter(Boolean)).toHaveLength(1);
        const winner = results.indexOf(true);
        expect(await store.getDelegation(contested.delegationId)).toMatchObject({ revokedAt: at, revokedBy: `revoker-${winner}` });
        // A revocation by nobody in particular records null.
        const anonymous = delegationRow();
        await store.putDelegation(anonymous);
        expect(await store.revokeDelegation(anonymous.delegationId, null, at)).toBe(true);
        expect((await store.getDelegation(anonymous.delegationId))!.revokedBy).toBeNull();
      });
    },
  },

  'grant-json-round-trip': {
    suite: 'delegation',
    async run(factory) {
      await withStore(factory, manualClock(), async (store) => {
        const row = delegationRow({ createdByUser: null });
        expect(row.grantJson).toContain('"expires_at":"2026-01-02T17:30:00+05:30"');
        await store.putDelegation(row);
        const back = (await store.getDelegation(row.delegationId))!;
        // Stored verbatim: the same text, the offset as written, and a null user stays null.
        expect(back.grantJson).toBe(row.grantJson);
        expect(back.createdByUser).toBeNull();
        expect(back.depth).toBe(1);
        const grant = grantFromJson(back.grantJson, back.delegationId);
        expect(grant.expiresAt).toBe('2026-01-02T17:30:00+05:30');
        expect(grant.constraints['amount_lte']!.operand).toBe(2500000);
        // Text the store does not understand is still kept byte for byte (non-ASCII, key order).
        const odd = delegationRow({
          grantJson:
            '{"subject":{"user":"zoë","agent":"a"},"actions":["x"],"resources":null,"constraints":{},"environments":null,"expires_at":null,"delegable":false}',
        });
        await store.putDelegation(odd);
        expect((await store.getDelegation(odd.delegationId))!.grantJson).toBe(odd.grantJson);
      });
    },
  },
  ...budgetCases,
  ...retentionCases,
  ...breakGlassCases,
};

/** A delegation row under a root grant, as `Control.delegate` would write it. */
function delegationRow(extra: Partial<DelegationRecord> = {}): DelegationRecord {
  const grant = new Grant({
    subject: { agent: 'finance-agent', user: 'carol@example.com' },
    actions: ['stripe.refund'],
    constraints: { amount_lte: 2500000 },
    expiresAt: '2026-01-02T17:30:00+05:30',
  });
  return {
    delegationId: randomIds('dlg'),
    parentId: 'head-of-finance',
    depth: 1,
    grantJson: grantToJson(grant),
    createdByAgent: 'cfo-agent',
    createdByUser: 'carol@example.com',
    createdVia: 'api',
    createdAt: storedTime(T0),
    revokedAt: null,
    revokedBy: null,
    ...extra,
  };
}

let receiptCounter = 0;
function receiptDraft(action: Action, result: 'committed' | 'denied' | 'ambiguous', effectKey: string | null) {
  receiptCounter += 1;
  const ms = String(receiptCounter % 1000).padStart(3, '0');
  return buildReceipt(action, {
    receiptId: randomIds('ctr'),
    decision: result === 'denied' ? 'deny' : 'allow',
    decisionReason: result === 'denied' ? 'rule[1]' : 'rule[0]',
    approvalId: null,
    approver: null,
    effectKey,
    attempt: 1,
    result,
    execution: result === 'denied' ? null : result,
    error: result === 'ambiguous' ? 'TimeoutError: the remote did not answer' : null,
    startedAt: '2026-01-01T12:00:00.000Z',
    finishedAt: `2026-01-01T12:00:01.${ms}Z`,
    policyHash: `sha256:${'cd'.repeat(32)}`,
    policyVersion: '2026-01',
    controls: ['four-eyes'],
  });
}
