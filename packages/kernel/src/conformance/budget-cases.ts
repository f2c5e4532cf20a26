/**
 * The budget ledger's conformance cases (spec 05 §5.1, §5.5), under the original's test names
 * (`tests/test_ledger.py`, `tests/test_budget_holds.py`): the predicate and the charge in the
 * reservation's transaction, the window, the chain, the holds and releases, and the refusals a
 * `Control` gives on top of them. The original's store suite has no ledger case; these run on
 * every store this build ships.
 *
 * @module
 */
import { createAction, type Action } from '../action.js';
import { BudgetExhausted, type BudgetCharge, type LedgerEntry } from '../budget.js';
import { Control } from '../control/control.js';
import { ActionDenied, NotExecuted } from '../errors.js';
import { callbackSink } from '../events.js';
import { randomIds, sequentialIds } from '../ids.js';
import type { EventRecord, StoredReceipt } from '../model.js';
import { loadPolicy } from '../policy/index.js';
import type { StateStore } from '../store/state-store.js';
import { storedTime, type Clock } from '../time.js';
import { expect } from './expect.js';
import type { CaseDef, StoreFactory } from './cases.js';
import { LEASE, T0, manualClock, type ManualClock } from './clock.js';

/** The ledger cases, by id. */
export const BUDGET_CASE_IDS = [
  'budget-one-transaction',
  'budget-refusal-names',
  'budget-unbudgeted',
  'budget-window-forgets',
  'budget-window-floor',
  'budget-replayed-insert',
  'budget-chain',
  'budget-chain-any-exhausted',
  'budget-inclusive-zero',
  'budget-two-on-one-metric',
  'budget-commit-holds',
  'budget-fail-releases',
  'budget-ambiguity-holds',
  'budget-lapsed-lease-holds',
  'budget-resolve-failed-releases',
  'budget-resolve-committed-holds',
  'budget-release-idempotent',
  'budget-renewal-charges-again',
  'budget-control-refusal',
  'budget-control-no-approval-event',
  'budget-control-unmeasurable',
  'budget-control-unkeyed',
  'budget-control-chain',
] as const;

type BudgetCaseId = (typeof BUDGET_CASE_IDS)[number];

const HOUR = 3600;
const DAY = 86400;

let counter = 0;
function key(): string {
  counter += 1;
  return `refund:b${counter}-${randomIds('act').slice(4, 12)}`;
}

function charge(amount: number | bigint, limit: number | bigint, extra: Partial<BudgetCharge> = {}): BudgetCharge {
  return { grantId: 'support', metric: 'amount', amount, limit, window: DAY, ...extra };
}

async function withStore(factory: StoreFactory, clock: Clock, fn: (store: StateStore) => Promise<void>): Promise<void> {
  const store = await factory.open(clock);
  try {
    await fn(store);
  } finally {
    await store.close();
  }
}

function ledgerOf(store: StateStore) {
  const l = store.budgets?.();
  expect(l === undefined, `${store.name} keeps a budget ledger (budgets())`).toBe(false);
  return l!;
}

async function rows(store: StateStore, effectKey: string): Promise<LedgerEntry[]> {
  return ledgerOf(store).consumptions({ effectKey });
}

async function exhausted(p: Promise<unknown>, what: string): Promise<BudgetExhausted> {
  const out = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(out, `${what}: refused with BudgetExhausted`).toBeInstanceOf(BudgetExhausted);
  expect(out, `${what}: the reason`).toMatchObject({ code: 'ERR_ACTION_DENIED', reason: 'budget_exhausted' });
  return out as BudgetExhausted;
}

/** Reserves and starts a fresh key under `charges`; returns the key and the action id. */
async function charged(store: StateStore, charges: readonly BudgetCharge[]): Promise<{ k: string; a: string }> {
  const k = key();
  const a = randomIds('act');
  await store.reserveEffect(k, a, LEASE, undefined, charges);
  await store.beginExecution(k, a);
  return { k, a };
}

function run(id: BudgetCaseId, test: string, body: (store: StateStore, clock: ManualClock) => Promise<void>): [BudgetCaseId, CaseDef] {
  return [
    id,
    {
      suite: 'ledger',
      test,
      async run(factory) {
        const clock = manualClock();
        await withStore(factory, clock, (store) => body(store, clock));
      },
    },
  ];
}

// ---------------------------------------------------------------- the Control cases' rig

const policyText = (
  effect: string,
  decision = 'allow',
  budgets = '      budgets: [{metric: amount, limit: 5000, window: P1D}, {metric: count, limit: 3, window: PT1H}]\n',
) => `schema: ctrlrun.policy/v7
authority:
  grants:
    - id: support
      subject: { agent: "support-agent" }
      actions: ["payments.refund"]
      delegable: true
      expires_at: "2027-01-01T00:00:00+00:00"
${budgets}actions:
  payments.refund:
${effect}    decision: ${decision}
`;

function refund(payment: string, amount: unknown, agent = 'support-agent'): Action {
  const args: Record<string, unknown> = { payment_id: payment, currency: 'EUR' };
  if (amount !== undefined) args['amount'] = amount;
  return createAction({ name: 'payments.refund', arguments: args as never, principal: { agent }, environment: 'production' });
}

function rig(store: StateStore, clock: Clock, yaml: string) {
  const events: EventRecord[] = [];
  const receipts: StoredReceipt[] = [];
  const control = new Control({
    policy: loadPolicy(yaml),
    store,
    clock,
    ids: sequentialIds(),
    sinks: [callbackSink({ onEvent: (e) => void events.push(e), onReceipt: (r) => void receipts.push(r) })],
    logger: { warn: () => undefined },
    environment: 'production',
  });
  let calls = 0;
  const executor = () => {
    calls += 1;
    return 'refunded';
  };
  return { control, events, receipts, executor, calls: () => calls, last: () => receipts.at(-1)!.document };
}

async function denial(p: Promise<unknown>): Promise<ActionDenied> {
  const out = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(out, 'refused with ActionDenied').toBeInstanceOf(ActionDenied);
  return out as ActionDenied;
}

const KEYED = '    effect: "refund:{payment_id}"\n';

export const budgetCases: Record<BudgetCaseId, CaseDef> = Object.fromEntries([
  run('budget-one-transaction', 'test_T408_a_charge_and_its_reservation_are_one_transaction', async (store, clock) => {
    const { k } = await charged(store, [charge(2500, 3000)]);
    expect(await rows(store, k), 'one row, under the reservation attempt, at the store clock').toMatchObject([
      { grantId: 'support', metric: 'amount', amount: 2500n, effectKey: k, attempt: 1, consumedAt: storedTime(T0), releasedAt: null },
    ]);
    // Refused: no reservation, no row, on each of the three reservation methods.
    const k2 = key();
    await exhausted(store.reserveEffect(k2, randomIds('act'), LEASE, undefined, [charge(1000, 3000)]), 'reserveEffect over the limit');
    expect(await store.getEffect(k2), 'no reservation').toBeNull();
    expect(await rows(store, k2), 'no charge').toEqual([]);
    if (store.reserveForExecution) {
      await exhausted(
        store.reserveForExecution({ key: k2, actionId: randomIds('act'), leaseMs: LEASE, approval: null, charges: [charge(1000, 3000)] }),
        'reserveForExecution',
      );
      expect(await store.getEffect(k2)).toBeNull();
    }
    const action = createAction({ name: 'payments.refund', arguments: { amount: 1000 }, principal: { agent: 'a' } });
    const id = randomIds('apr');
    await store.putApprovalRequest({
      requestId: id,
      actionHash: action.actionHash,
      action,
      createdAt: storedTime(clock()),
      expiresAt: storedTime(new Date(clock().getTime() + 600_000)),
      policyHash: null,
    });
    await store.grantApproval(id, 'ana');
    await exhausted(
      store.consumeApprovalAndReserve(id, action.actionHash, k2, action.actionId, LEASE, undefined, undefined, [charge(1000, 3000)]),
      'consumeApprovalAndReserve',
    );
    expect(await store.getApproval(id), 'the approval stays granted').toMatchObject({ status: 'granted' });
    expect(await store.getEffect(k2)).toBeNull();
    expect(await rows(store, k2)).toEqual([]);
  }),

  run('budget-refusal-names', 'test_T408a_the_refusal_names_the_grant_the_metric_and_the_window', async (store) => {
    await charged(store, [charge(2345, 5678)]);
    const err = await exhausted(store.reserveEffect(key(), randomIds('act'), LEASE, undefined, [charge(4321, 5678)]), 'over');
    expect(err, 'grant, metric, window').toMatchObject({ grantId: 'support', metric: 'amount', window: DAY });
    expect(err.message).toContain('"support"');
    expect(err.message).toContain('"amount"');
    expect(err.message).toContain(`${DAY} s`);
    for (const n of ['2345', '5678', '4321', '3333']) expect(err.message, `the balance is never disclosed (${n})`).not.toContain(n);
  }),

  run('budget-unbudgeted', 'test_T408b_an_unbudgeted_reservation_takes_the_0_8_0_path', async (store) => {
    const k = key();
    await store.reserveEffect(k, randomIds('act'), LEASE);
    expect(await rows(store, k), 'no charge').toEqual([]);
    await charged(store, [charge(0, 0)]);
    // Nothing budgeted is refused whatever the ledger holds.
    await store.reserveEffect(key(), randomIds('act'), LEASE, undefined, []);
  }),

  run('budget-window-forgets', 'test_T408c_the_rolling_window_forgets', async (store, clock) => {
    const hourly = charge(1, 1, { metric: 'count', window: HOUR });
    await charged(store, [hourly]);
    await exhausted(charged(store, [hourly]), 'a second within the hour');
    clock.advance(HOUR * 1000 + 1);
    await charged(store, [hourly]);
    expect(await ledgerOf(store).spent('support', 'count', HOUR), 'only the new charge is in the window').toBe(1n);
  }),

  run('budget-window-floor', 'test_T408d_the_window_is_closed_at_the_floor', async (store, clock) => {
    const hourly = charge(1, 1, { metric: 'count', window: HOUR });
    await charged(store, [hourly]);
    clock.advance(HOUR * 1000);
    // consumed_at == now − window: still in the window.
    await exhausted(charged(store, [hourly]), 'exactly one window later');
    clock.advance(1);
    await charged(store, [hourly]);
  }),

  run('budget-replayed-insert', 'test_T411_a_replayed_insert_does_not_double_charge', async (store) => {
    // One (effect_key, attempt, grant_id, metric) written twice in one transaction: one row.
    const { k } = await charged(store, [charge(100, 1000), charge(100, 1000, { window: HOUR })]);
    expect((await rows(store, k)).length, 'one row').toBe(1);
    expect(await ledgerOf(store).spent('support', 'amount', DAY)).toBe(100n);
  }),

  run('budget-chain', 'test_T412_a_three_level_chain_charges_all_three', async (store) => {
    const chain = ['head-of-finance', 'dlg_parent', 'dlg_child'].map((g) => charge(700, 1000, { grantId: g }));
    const { k } = await charged(store, chain);
    expect((await rows(store, k)).map((r) => [r.grantId, r.amount])).toEqual([
      ['head-of-finance', 700n],
      ['dlg_parent', 700n],
      ['dlg_child', 700n],
    ]);
  }),

  run('budget-chain-any-exhausted', 'test_T412a_any_exhausted_ancestor_refuses_the_whole_reservation', async (store) => {
    await charged(store, [charge(900, 1000, { grantId: 'head-of-finance' })]);
    const chain = [
      charge(200, 1000, { grantId: 'dlg_child' }),
      charge(200, 5000, { grantId: 'dlg_parent' }),
      charge(200, 1000, { grantId: 'head-of-finance' }),
    ];
    const k = key();
    const err = await exhausted(store.reserveEffect(k, randomIds('act'), LEASE, undefined, chain), 'the root is spent');
    expect(err.grantId, 'the exhausted ancestor is named').toBe('head-of-finance');
    expect(await rows(store, k), 'no charge on any level').toEqual([]);
    expect(await store.getEffect(k)).toBeNull();
    expect(await ledgerOf(store).spent('dlg_child', 'amount', DAY)).toBe(0n);
  }),

  run('budget-inclusive-zero', 'test_the_predicate_is_inclusive_and_a_zero_limit_admits_a_zero_amount', async (store) => {
    await charged(store, [charge(2500, 5000)]);
    await charged(store, [charge(2500, 5000)]);
    await exhausted(charged(store, [charge(1, 5000)]), 'one past the limit');
    await charged(store, [charge(0, 0, { grantId: 'zero' })]);
    await charged(store, [charge(0, 0, { grantId: 'zero' })]);
    await exhausted(charged(store, [charge(1, 0, { grantId: 'zero' })]), 'one against a zero limit');
    // Past 2^53, exact.
    const big = 2n ** 60n;
    await charged(store, [charge(big, big, { grantId: 'big' })]);
    expect(await ledgerOf(store).spent('big', 'amount', DAY)).toBe(big);
    await exhausted(charged(store, [charge(1, big, { grantId: 'big' })]), 'one past 2^60');
  }),

  run('budget-two-on-one-metric', 'test_T406a_two_budgets_on_one_metric_is_the_shape_SS2_2_exists_for', async (store, clock) => {
    // 20 an hour and 30 a day, on one metric: one row per action, each window its own limit.
    const both = [charge(1, 2, { metric: 'count', window: HOUR }), charge(1, 3, { metric: 'count', window: DAY })];
    await charged(store, both);
    await charged(store, both);
    await exhausted(charged(store, both), 'the hourly limit');
    clock.advance(HOUR * 1000 + 1);
    const { k } = await charged(store, both);
    expect((await rows(store, k)).length).toBe(1);
    await exhausted(charged(store, both), 'the daily limit, though the hour is fresh');
  }),

  run('budget-commit-holds', 'test_T415_commit_holds_permanently', async (store) => {
    const { k, a } = await charged(store, [charge(600, 1000)]);
    await store.commitEffect(k, a, { ok: true });
    expect((await rows(store, k))[0]!.releasedAt).toBeNull();
    await exhausted(charged(store, [charge(600, 1000)]), 'the committed charge holds');
  }),

  run('budget-fail-releases', 'test_T416_fail_releases', async (store, clock) => {
    const { k, a } = await charged(store, [charge(600, 1000)]);
    clock.advance(5000);
    await store.failEffect(k, a, 'NotExecuted: card declined');
    expect((await rows(store, k))[0]!.releasedAt, 'released in the transaction that failed it').toBe(storedTime(clock()));
    expect(await ledgerOf(store).spent('support', 'amount', DAY)).toBe(0n);
    await charged(store, [charge(600, 1000)]);
  }),

  run('budget-ambiguity-holds', 'test_T417_ambiguity_holds', async (store) => {
    const { k, a } = await charged(store, [charge(600, 1000)]);
    await store.markAmbiguous(k, a, 'TimeoutError: no answer');
    expect((await rows(store, k))[0]!.releasedAt).toBeNull();
    await exhausted(charged(store, [charge(600, 1000)]), 'an ambiguous charge holds');
  }),

  run('budget-lapsed-lease-holds', 'test_T418_a_lapsed_lease_holds', async (store, clock) => {
    await charged(store, [charge(600, 1000)]);
    clock.advance(LEASE + 1000);
    await exhausted(charged(store, [charge(600, 1000)]), 'a lapsed lease holds its charge');
  }),

  run('budget-resolve-failed-releases', 'test_T419_a_human_resolving_FAILED_releases', async (store, clock) => {
    const { k, a } = await charged(store, [charge(600, 1000)]);
    await store.markAmbiguous(k, a, 'TimeoutError: no answer');
    clock.advance(60_000);
    await store.resolveEffect(k, 'failed', 'ops:ana');
    expect((await rows(store, k))[0]!.releasedAt).toBe(storedTime(clock()));
    await charged(store, [charge(600, 1000)]);
  }),

  run('budget-resolve-committed-holds', 'test_T420_a_human_resolving_COMMITTED_holds', async (store) => {
    const { k, a } = await charged(store, [charge(600, 1000)]);
    await store.markAmbiguous(k, a, 'TimeoutError: no answer');
    await store.resolveEffect(k, 'committed', 'ops:ana');
    expect((await rows(store, k))[0]!.releasedAt).toBeNull();
    await exhausted(charged(store, [charge(600, 1000)]), 'held');
  }),

  run('budget-release-idempotent', 'test_T421_the_release_is_idempotent', async (store, clock) => {
    const { k, a } = await charged(store, [charge(600, 1000)]);
    await store.failEffect(k, a, 'NotExecuted: declined');
    const first = (await rows(store, k))[0]!.releasedAt;
    clock.advance(60_000);
    // A second move to failed (the renewal's attempt) never rewrites the first release.
    const a2 = randomIds('act');
    await store.reserveEffect(k, a2, LEASE, undefined, [charge(600, 1000)]);
    await store.beginExecution(k, a2);
    await store.failEffect(k, a2, 'NotExecuted: declined again');
    const after = await rows(store, k);
    expect(after.map((r) => [r.attempt, r.releasedAt])).toEqual([
      [1, first],
      [2, storedTime(clock())],
    ]);
  }),

  run('budget-renewal-charges-again', 'test_T426_a_renewal_after_FAILED_charges_again', async (store) => {
    const { k, a } = await charged(store, [charge(600, 1000)]);
    await store.failEffect(k, a, 'NotExecuted: declined');
    const a2 = randomIds('act');
    const r = await store.reserveEffect(k, a2, LEASE, undefined, [charge(600, 1000)]);
    expect(r.attempt).toBe(2);
    expect((await rows(store, k)).map((x) => [x.attempt, x.releasedAt === null])).toEqual([
      [1, false],
      [2, true],
    ]);
    expect(await ledgerOf(store).spent('support', 'amount', DAY)).toBe(600n);
  }),

  run('budget-control-refusal', 'test_T433_the_refusal_names_the_grant_the_metric_and_the_window', async (store, clock) => {
    // Also test_T443_a_refused_receipt_records_no_charge.
    const r = rig(store, clock, policyText(KEYED));
    expect(await r.control.execute(refund('p1', 3000), r.executor)).toBe('refunded');
    expect(r.last()['budget_charges'], 'the committed receipt carries the charges').toEqual([
      { grant_id: 'support', metric: 'amount', amount: 3000 },
      { grant_id: 'support', metric: 'count', amount: 1 },
    ]);
    const err = await denial(r.control.execute(refund('p2', 2001), r.executor));
    expect(err).toMatchObject({ reason: 'budget_exhausted', grantId: 'support', metric: 'amount', window: DAY });
    expect(err.message).not.toContain('3000');
    expect(r.calls()).toBe(1);
    const denied = r.events.filter((e) => e.type === 'ACTION_DENIED').at(-1)!;
    expect(denied.data).toEqual({ reason: 'budget_exhausted', grant_id: 'support', metric: 'amount', window: DAY });
    expect(denied.effectKey, 'the event carries no effect key').toBeNull();
    expect(r.last(), 'a denied receipt, no effect key, no charge').toMatchObject({
      result: 'denied',
      decision: 'deny',
      decision_reason: 'budget_exhausted',
      effect_key: null,
      budget_charges: [],
    });
    expect(await store.getEffect('refund:p2'), 'nothing reserved').toBeNull();
    // A failed effect's charge is released: the next refund fits again.
    const failing = () => {
      throw new NotExecuted('card declined');
    };
    await r.control.execute(refund('p3', 0), failing).catch(() => undefined);
    expect(await r.control.execute(refund('p4', 2000), r.executor)).toBe('refunded');
    expect(await ledgerOf(store).spent('support', 'amount', DAY)).toBe(5000n);
  }),

  run('budget-control-no-approval-event', 'test_T437_a_budget_refusal_writes_no_approval_event', async (store, clock) => {
    const r = rig(store, clock, policyText(KEYED, 'approve', '      budgets: [{metric: amount, limit: 1000, window: P1D}]\n'));
    await r.control.execute(refund('p1', 800), r.executor).catch(() => undefined);
    const id = r.events.find((e) => e.type === 'APPROVAL_REQUESTED')!.approvalId!;
    await r.control.grantApproval(id, { approver: 'ana' });
    // Someone else spends the budget meanwhile (the ledger is shared by every writer).
    await store.reserveEffect(key(), randomIds('act'), LEASE, undefined, [charge(500, 1000)]);
    const before = r.events.length;
    const err = await denial(r.control.execute(refund('p1', 800), r.executor, { approvalId: id }));
    expect(err.reason).toBe('budget_exhausted');
    const types = r.events.slice(before).map((e) => e.type);
    expect(
      types.filter((t) => t.startsWith('APPROVAL_')),
      'no approval event',
    ).toEqual([]);
    expect(await store.getApproval(id), 'the approval stays granted').toMatchObject({ status: 'granted' });
    expect(r.calls()).toBe(0);
  }),

  run('budget-control-unmeasurable', 'test_T440_a_negative_metric_value_is_refused', async (store, clock) => {
    // Also test_T441_an_action_with_no_metric_argument_is_refused.
    const r = rig(store, clock, policyText(KEYED));
    for (const [payment, amount] of [
      ['n', -1],
      ['absent', undefined],
      ['bool', true],
      ['text', '100'],
    ] as const) {
      const err = await denial(r.control.execute(refund(payment, amount), r.executor));
      expect(err.reason, String(amount)).toBe('budget_unmeasurable');
      const denied = r.events.filter((e) => e.type === 'ACTION_DENIED').at(-1)!;
      expect(denied.data['reason']).toBe('budget_unmeasurable');
      expect(typeof denied.data['error']).toBe('string');
      expect(r.last()).toMatchObject({ result: 'denied', decision_reason: 'budget_unmeasurable', budget_charges: [] });
      expect(await store.getEffect(`refund:${payment}`)).toBeNull();
    }
    expect(r.calls()).toBe(0);
    expect(await ledgerOf(store).consumptions()).toEqual([]);
  }),

  run('budget-control-unkeyed', 'test_T442_a_budgeted_grant_refuses_an_action_with_no_effect_key', async (store, clock) => {
    const r = rig(store, clock, policyText(''));
    const err = await denial(r.control.execute(refund('p1', 10), r.executor));
    expect(err.reason).toBe('budget_unkeyed');
    expect(r.last()).toMatchObject({ result: 'denied', decision_reason: 'budget_unkeyed' });
    expect(r.calls()).toBe(0);
  }),

  run('budget-control-chain', 'test_T412b_every_ancestor_is_charged_through_a_real_chain', async (store, clock) => {
    const r = rig(store, clock, policyText(KEYED));
    const child = await r.control.delegate(
      'support',
      {
        subject: { agent: 'helper-agent' },
        actions: ['payments.refund'],
        expiresAt: '2026-12-01T00:00:00+00:00',
        budgets: [
          { metric: 'amount', limit: 1000, window: 'P1D' },
          { metric: 'count', limit: 3, window: 'PT1H' },
        ],
      },
      { by: { agent: 'support-agent' } },
    );
    expect(await r.control.execute(refund('c1', 700, 'helper-agent'), r.executor)).toBe('refunded');
    const id = child.delegationId;
    expect(r.last()['budget_charges']).toEqual([
      { grant_id: id, metric: 'amount', amount: 700 },
      { grant_id: id, metric: 'count', amount: 1 },
      { grant_id: 'support', metric: 'amount', amount: 700 },
      { grant_id: 'support', metric: 'count', amount: 1 },
    ]);
    expect((await rows(store, 'refund:c1')).map((x) => x.grantId)).toEqual([id, id, 'support', 'support']);
    // The child's own limit refuses though the root has room.
    const err = await denial(r.control.execute(refund('c2', 400, 'helper-agent'), r.executor));
    expect(err).toMatchObject({ reason: 'budget_exhausted', grantId: id, metric: 'amount' });
  }),
]) as Record<BudgetCaseId, CaseDef>;
