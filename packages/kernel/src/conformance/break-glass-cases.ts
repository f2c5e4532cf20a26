/**
 * Break-glass conformance cases, under the original 0.12.2's test names (`tests/test_break_glass.py`,
 * T326–T337): a grant opened beneath a declared envelope is a delegation row, and a store that
 * loses its parent link, its `created_via` or its creation time loses the containment the envelope
 * exists to impose. So these run on every store: opening (who may, with what expiry, inside what),
 * acting under it, its expiry and the envelope's `max_ttl` re-checked at every evaluation,
 * revocation and attenuation beneath it, and the receipt naming it.
 *
 * @module
 */
import { createAction, type Action } from '../action.js';
import type { Delegation } from '../authority/authority.js';
import type { Dimension } from '../authority/containment.js';
import type { GrantInput } from '../authority/grant.js';
import { Control } from '../control/control.js';
import type { VerifiedPrincipal } from '../control/presented.js';
import { ActionDenied, AuthorityEscalation, IdentityError, InvalidArgument } from '../errors.js';
import { callbackSink } from '../events.js';
import { randomIds } from '../ids.js';
import type { EventRecord, StoredReceipt } from '../model.js';
import { loadPolicy } from '../policy/index.js';
import type { StateStore } from '../store/state-store.js';
import { storedTime } from '../time.js';
import { expect } from './expect.js';
import type { CaseDef, StoreFactory } from './cases.js';
import { manualClock, type ManualClock } from './clock.js';

/** The break-glass cases, by id. */
export const BREAK_GLASS_CASE_IDS = [
  'break-glass-created',
  'break-glass-authorises',
  'break-glass-expires',
  'break-glass-narrowed-max-ttl',
  'break-glass-widened-max-ttl',
  'break-glass-needs-expiry',
  'break-glass-beyond-max-ttl',
  'break-glass-containment',
  'break-glass-envelope-alone',
  'break-glass-unknown-envelope',
  'break-glass-receipt-names',
  'break-glass-ordinary-named',
  'break-glass-refusal-names-none',
  'break-glass-opener-not-subject',
  'break-glass-opener-unentitled',
  'break-glass-without-approvers',
  'break-glass-no-asserted-opener',
  'break-glass-grant-not-envelope',
  'break-glass-delegate-not-beneath',
  'break-glass-unknown-control',
  'break-glass-roleless-control',
  'break-glass-row-readable',
  'break-glass-revoked',
  'break-glass-attenuates',
  'break-glass-cannot-outlive',
] as const;

type BreakGlassCaseId = (typeof BREAK_GLASS_CASE_IDS)[number];

const HOUR = 3_600_000;
const MIN = 60_000;
const KEY = 'refund:EU-42';

/** The original's document: an everyday grant, and an envelope for payments gated by an incident commander's role. */
const BREAK_GLASS_POLICY = `schema: ctrlrun.policy/v7
environment: prod
controls:
  incident-response:
    title: Only an incident commander opens break-glass
    approver_role: incident-commander
actions:
  payments.refund:
    resource: "payment:{payment_id}"
    decision: allow
authority:
  grants:
    - id: everyday
      subject: {agent: "ops-agent"}
      actions: ["payments.read"]
  break_glass:
    incident-payments:
      subject: {agent: "oncall-*"}
      actions: ["payments.*"]
      environments: ["prod"]
      resources: ["payment:*"]
      constraints: {amount_lte: 50000}
      tasks: ["incident:*"]
      budgets: [{metric: amount, limit: 100000, window: P1D}]
      max_ttl: PT4H
      controls: [incident-response]
`;

const COMMANDER: VerifiedPrincipal = {
  agent: 'human:ada',
  user: 'ada@example.com',
  issuer: 'https://issuer.example',
  claims: { roles: ['incident-commander'] },
};
const BYSTANDER: VerifiedPrincipal = { agent: 'human:bob', user: 'bob@example.com', claims: { roles: ['viewer'] } };
const ONCALL = { agent: 'oncall-agent', user: 'ada' };
const TASK = 'incident:4412';

/**
 * One widening per dimension the envelope constrains, each refused naming it. `expires_at` is the
 * one dimension not here: an envelope carries no expiry, and what bounds a grant in time is
 * `max_ttl` (its own cases). A unit test checks this table covers every other dimension.
 */
export const BREAK_GLASS_WIDENINGS: readonly [Partial<GrantInput>, Dimension][] = [
  [{ subject: { agent: '*' } }, 'subject'],
  [{ actions: ['*'] }, 'actions'],
  [{ environments: ['prod', 'staging'] }, 'environments'],
  [{ constraints: { amount_lte: 90000 } }, 'constraints'],
  [{ resources: ['*'] }, 'resources'],
  [{ tasks: ['*'] }, 'tasks'],
  [{ budgets: [{ metric: 'amount', limit: 200000, window: 86400 }] }, 'budgets'],
];

/** The grant an incident commander opens: narrower than the envelope on every dimension, expiring `ms` from `clock`. */
function grant(clock: ManualClock, ms: number | null, over: Partial<GrantInput> = {}): GrantInput {
  return {
    subject: { agent: 'oncall-agent' },
    actions: ['payments.refund'],
    environments: ['prod'],
    resources: ['payment:EU-*'],
    constraints: { amount_lte: 1000 },
    tasks: ['incident:4412'],
    budgets: [{ metric: 'amount', limit: 5000, window: 86400 }],
    expiresAt: ms === null ? null : storedTime(new Date(clock().getTime() + ms)),
    ...over,
  };
}

function refund(amount = 100, principal: { agent: string; user?: string | null; expiresAt?: string | null } = ONCALL): Action {
  return createAction({
    name: 'payments.refund',
    arguments: { amount, payment_id: 'EU-42' },
    principal,
    resource: 'payment:EU-42',
    environment: 'prod',
  });
}

interface Rig {
  control: Control;
  events: EventRecord[];
  receipts: StoredReceipt[];
  calls: () => number;
  executor: () => string;
  /** Runs the refund as ONCALL under the incident's task; `key` defaults to {@link KEY}. */
  act(amount?: number, key?: string): Promise<unknown>;
  open(envelope: string, g: GrantInput, reason?: string, verified?: VerifiedPrincipal): Promise<Delegation>;
  data(type: string): Record<string, unknown>[];
}

function rig(store: StateStore, clock: ManualClock, options: { policy?: string; approvers?: boolean } = {}): Rig {
  const events: EventRecord[] = [];
  const receipts: StoredReceipt[] = [];
  const control = new Control({
    policy: loadPolicy(options.policy ?? BREAK_GLASS_POLICY),
    store,
    clock,
    ids: randomIds,
    sinks: [callbackSink({ onEvent: (e) => void events.push(e), onReceipt: (r) => void receipts.push(r) })],
    logger: { warn: () => undefined },
    ...(options.approvers === false ? {} : { approvers: { rolesClaim: 'roles' } }),
  });
  let calls = 0;
  const executor = () => {
    calls += 1;
    return 'refunded';
  };
  return {
    control,
    events,
    receipts,
    executor,
    calls: () => calls,
    act: (amount = 100, key = KEY) => control.execute(refund(amount), executor, { effectKey: key, task: TASK }),
    open: (envelope, g, reason = 'INC-4412', verified = COMMANDER) => control.breakGlass(envelope, g, { verified, reason }),
    data: (type) => events.filter((e) => e.type === type).map((e) => e.data as Record<string, unknown>),
  };
}

async function refusal(p: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  const out = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(out, 'refused').toBeInstanceOf(Error);
  return out as Error & Record<string, unknown>;
}

async function noneBeneath(store: StateStore, envelope: string): Promise<void> {
  const rows = await store.delegations({ includeRevoked: true });
  expect(
    rows.filter((r) => r.parentId === envelope).map((r) => r.delegationId),
    `no delegation beneath ${envelope}`,
  ).toEqual([]);
}

function run(
  id: BreakGlassCaseId,
  test: string,
  body: (store: StateStore, clock: ManualClock, factory: StoreFactory) => Promise<void>,
): [BreakGlassCaseId, CaseDef] {
  return [
    id,
    {
      suite: 'delegation',
      test,
      async run(factory) {
        const clock = manualClock();
        const store = await factory.open(clock);
        try {
          await body(store, clock, factory);
        } finally {
          await store.close();
        }
      },
    },
  ];
}

export const breakGlassCases: Record<BreakGlassCaseId, CaseDef> = Object.fromEntries([
  run('break-glass-created', 'test_T326_a_break_glass_grant_is_created_beneath_its_envelope', async (store, clock) => {
    const r = rig(store, clock);
    const opened = await r.open('incident-payments', grant(clock, 2 * HOUR), 'INC-4412');
    expect([opened.parentId, opened.depth, opened.createdVia, opened.createdBy.agent, opened.createdBy.user]).toEqual([
      'incident-payments',
      1,
      'break-glass',
      'human:ada',
      'ada@example.com',
    ]);
    const row = await store.getDelegation(opened.delegationId);
    expect(row, 'the row, read back').toMatchObject({ parentId: 'incident-payments', depth: 1, createdVia: 'break-glass', createdByAgent: 'human:ada' });
    expect(r.data('DELEGATION_CREATED'), 'the event carries created_via and the reason').toEqual([
      {
        delegation_id: opened.delegationId,
        parent_id: 'incident-payments',
        depth: 1,
        created_by_agent: 'human:ada',
        created_by_user: 'ada@example.com',
        created_via: 'break-glass',
        reason: 'INC-4412',
      },
    ]);
    expect((await store.events()).filter((e) => e.type === 'DELEGATION_CREATED').length, 'stored, not only sent').toBe(1);
  }),

  run('break-glass-authorises', 'test_T326b_an_action_under_a_live_break_glass_grant_is_allowed', async (store, clock) => {
    const r = rig(store, clock);
    const opened = await r.open('incident-payments', grant(clock, 2 * HOUR));
    expect(await r.act(), 'the grant authorised the refund').toBe('refunded');
    expect(r.calls()).toBe(1);
    expect(r.receipts.at(-1)!.document, 'committed').toMatchObject({ result: 'committed', authority_grant_id: opened.delegationId });
    expect(r.data('AUTHORITY_RESOLVED').at(-1)).toMatchObject({ grant_id: opened.delegationId, delegation_id: opened.delegationId, depth: 1 });
  }),

  run('break-glass-expires', 'test_T327_after_its_expiry_the_action_is_denied', async (store, clock) => {
    const r = rig(store, clock);
    await r.open('incident-payments', grant(clock, 2 * HOUR));
    expect(await r.act()).toBe('refunded');
    clock.advance(3 * HOUR);
    const err = await refusal(r.act(100, 'refund:EU-43'));
    expect(err, 'denied').toBeInstanceOf(ActionDenied);
    expect(err['reason']).toBe('authority_expired');
    expect(r.calls(), 'the executor ran once, before the expiry').toBe(1);
  }),

  run('break-glass-narrowed-max-ttl', 'test_T327_narrowing_max_ttl_cuts_a_grant_already_open', async (store, clock) => {
    const r = rig(store, clock);
    const opened = await r.open('incident-payments', grant(clock, 3 * HOUR));
    expect(await r.act()).toBe('refunded');
    // The same store and the same open grant, under the envelope narrowed to fifteen minutes.
    const narrowed = rig(store, clock, { policy: BREAK_GLASS_POLICY.replace('PT4H', 'PT15M') });
    clock.advance(30 * MIN);
    const err = await refusal(narrowed.act(100, 'refund:EU-43'));
    expect(err, 'denied').toBeInstanceOf(ActionDenied);
    expect(err['reason']).toBe('authority_escalation');
    expect(narrowed.calls()).toBe(0);
    expect(narrowed.data('AUTHORITY_DENIED').at(-1), 'the dimension is max_ttl').toMatchObject({
      reason: 'authority_escalation',
      grant_id: opened.delegationId,
      dimension: 'max_ttl',
    });
    // Within the window the narrowed envelope still allows, a grant opened under it authorises.
    await narrowed.open('incident-payments', grant(clock, 10 * MIN));
    expect(await narrowed.act(100, 'refund:EU-44')).toBe('refunded');
  }),

  run('break-glass-widened-max-ttl', 'test_T327_widening_max_ttl_does_not_extend_a_grant_already_open', async (store, clock) => {
    const r = rig(store, clock);
    await r.open('incident-payments', grant(clock, 1 * HOUR));
    clock.advance(2 * HOUR);
    const widened = rig(store, clock, { policy: BREAK_GLASS_POLICY.replace('PT4H', 'PT8H') });
    const err = await refusal(widened.act());
    expect(err['reason']).toBe('authority_expired');
    expect(widened.calls()).toBe(0);
  }),

  run('break-glass-needs-expiry', 'test_T328_a_grant_with_no_expiry_is_refused', async (store, clock) => {
    const r = rig(store, clock);
    const err = await refusal(r.open('incident-payments', grant(clock, null)));
    expect(err).toBeInstanceOf(AuthorityEscalation);
    expect([err['reason'], err['dimension']]).toEqual(['containment', 'expires_at']);
    expect(r.data('DELEGATION_REJECTED')).toEqual([{ parent_id: 'incident-payments', reason: 'containment', dimension: 'expires_at' }]);
    await noneBeneath(store, 'incident-payments');
  }),

  run('break-glass-beyond-max-ttl', 'test_T328_a_grant_beyond_max_ttl_is_refused', async (store, clock) => {
    const r = rig(store, clock);
    const err = await refusal(r.open('incident-payments', grant(clock, 5 * HOUR)));
    expect(err).toBeInstanceOf(AuthorityEscalation);
    expect([err['reason'], err['dimension']]).toEqual(['containment', 'expires_at']);
    expect(err.message, 'names max_ttl').toContain('max_ttl');
    await noneBeneath(store, 'incident-payments');
    // Exactly max_ttl is inside it.
    const edge = await r.open('incident-payments', grant(clock, 4 * HOUR));
    expect(edge.createdVia).toBe('break-glass');
  }),

  run('break-glass-containment', 'test_T329_a_grant_wider_than_its_envelope_is_refused_per_dimension', async (store, clock) => {
    const r = rig(store, clock);
    for (const [over, dimension] of BREAK_GLASS_WIDENINGS) {
      const err = await refusal(r.open('incident-payments', grant(clock, HOUR, over)));
      expect(err, dimension).toBeInstanceOf(AuthorityEscalation);
      expect([err['reason'], err['dimension']], dimension).toEqual(['containment', dimension]);
    }
    await noneBeneath(store, 'incident-payments');
  }),

  run('break-glass-envelope-alone', 'test_T330_a_deployment_with_only_an_envelope_evaluates_as_0_7_0', async (store, clock) => {
    const r = rig(store, clock);
    const err = await refusal(r.act());
    expect(err).toBeInstanceOf(ActionDenied);
    expect(err['reason'], 'the envelope authorises nothing itself').toBe('no_authority');
    expect(r.calls()).toBe(0);
  }),

  run('break-glass-unknown-envelope', 'test_T331_an_unknown_envelope_is_refused_by_name', async (store, clock) => {
    const r = rig(store, clock);
    const err = await refusal(r.open('no-such-envelope', grant(clock, HOUR)));
    expect(err).toBeInstanceOf(AuthorityEscalation);
    expect(err['reason']).toBe('unknown_parent');
    expect(err.message).toContain('no-such-envelope');
    expect(r.data('DELEGATION_REJECTED')).toEqual([{ parent_id: 'no-such-envelope', reason: 'unknown_parent' }]);
  }),

  run('break-glass-receipt-names', 'test_T333_the_receipt_names_the_break_glass_grant', async (store, clock) => {
    const r = rig(store, clock);
    const opened = await r.open('incident-payments', grant(clock, 2 * HOUR));
    await r.act();
    const stored = (await store.receipts()).at(-1)!;
    expect(JSON.parse(stored.json ?? '{}')['authority_grant_id'], 'the stored receipt').toBe(opened.delegationId);
  }),

  run('break-glass-ordinary-named', 'test_T333_an_ordinary_grant_is_named_too', async (store, clock) => {
    const policy = BREAK_GLASS_POLICY.replace('actions: ["payments.read"]', 'actions: ["payments.*"]').replace(
      'subject: {agent: "ops-agent"}',
      'subject: {agent: "oncall-agent"}',
    );
    const r = rig(store, clock, { policy });
    await r.act();
    expect(r.receipts.at(-1)!.document['authority_grant_id']).toBe('everyday');
  }),

  run('break-glass-refusal-names-none', 'test_T333_a_refusal_before_the_authority_gate_names_no_grant', async (store, clock) => {
    const r = rig(store, clock);
    const opened = await r.open('incident-payments', grant(clock, 2 * HOUR));
    await r.act();
    expect(r.receipts.at(-1)!.document['authority_grant_id']).toBe(opened.delegationId);
    const lapsed = refund(100, { ...ONCALL, expiresAt: storedTime(new Date(clock().getTime() - 5 * MIN)) });
    const err = await refusal(r.control.execute(lapsed, r.executor, { effectKey: 'refund:EU-99', task: TASK }));
    expect(err['reason']).toBe('principal_expired');
    const denied = r.receipts.filter((x) => x.document['result'] === 'denied');
    expect(denied.length).toBe(1);
    expect(denied[0]!.document['authority_grant_id'], 'the refusal names no grant').toBeNull();
  }),

  run('break-glass-opener-not-subject', 'test_T334_the_opener_is_the_resolved_principal_not_the_envelopes_subject', async (store, clock) => {
    const r = rig(store, clock);
    const opened = await r.open('incident-payments', grant(clock, HOUR));
    expect(opened.createdBy.agent, 'opened by a human the envelope subject oncall-* does not match').toBe('human:ada');
    expect(opened.grant.subject.agent).toBe('oncall-agent');
  }),

  run('break-glass-opener-unentitled', 'test_T334_an_opener_without_the_control_role_is_refused', async (store, clock) => {
    const r = rig(store, clock);
    const err = await refusal(r.open('incident-payments', grant(clock, HOUR), 'INC-4412', BYSTANDER));
    expect(err).toBeInstanceOf(AuthorityEscalation);
    expect(err['reason']).toBe('approver_unentitled');
    expect(err.message).toContain('incident-response');
    expect(err.message).toContain('incident-commander');
    expect(r.data('DELEGATION_REJECTED')).toEqual([
      { parent_id: 'incident-payments', reason: 'approver_unentitled', control: 'incident-response', role: 'incident-commander' },
    ]);
    await noneBeneath(store, 'incident-payments');
    // A role claim that is not a list of strings holds nothing either.
    const odd = { ...COMMANDER, claims: { roles: { 'incident-commander': true } } };
    expect((await refusal(r.open('incident-payments', grant(clock, HOUR), 'INC-4412', odd)))['reason']).toBe('approver_unentitled');
  }),

  run('break-glass-without-approvers', 'test_T334_with_no_approver_identity_it_cannot_be_opened_at_all', async (store, clock) => {
    const r = rig(store, clock, { approvers: false });
    const err = await refusal(r.open('incident-payments', grant(clock, HOUR)));
    expect(err).toBeInstanceOf(InvalidArgument);
    expect(err.message).toContain('approver identity');
    await noneBeneath(store, 'incident-payments');
  }),

  run('break-glass-no-asserted-opener', 'test_T334_there_is_no_parameter_that_asserts_the_opener', async (store, clock) => {
    const r = rig(store, clock);
    // An opener named by the caller (`by`) is an assertion, and the roles would be read off it:
    // only a principal a resolving surface verified opens an envelope.
    const asserted = { by: { agent: 'human:ada', claims: { roles: ['incident-commander'] } }, reason: 'INC-4412' } as never;
    const err = await refusal(r.control.breakGlass('incident-payments', grant(clock, HOUR), asserted));
    expect(err).toBeInstanceOf(IdentityError);
    expect(err.message).toContain('verified');
    await noneBeneath(store, 'incident-payments');
  }),

  run('break-glass-grant-not-envelope', 'test_T334b_an_ordinary_grant_id_is_not_an_envelope', async (store, clock) => {
    const r = rig(store, clock);
    const err = await refusal(r.open('everyday', grant(clock, HOUR, { actions: ['payments.read'] })));
    expect(err).toBeInstanceOf(AuthorityEscalation);
    expect(err['reason']).toBe('unknown_parent');
    expect(err.message).toContain('a grant is not an envelope');
    await noneBeneath(store, 'everyday');
  }),

  run('break-glass-delegate-not-beneath', 'test_T334b_delegate_may_not_name_an_envelope_as_its_parent', async (store, clock) => {
    const r = rig(store, clock);
    for (const via of ['api', 'cli'] as const) {
      const err = await refusal(r.control.delegate('incident-payments', grant(clock, null), { by: ONCALL, via }));
      expect(err, via).toBeInstanceOf(AuthorityEscalation);
      expect(err['reason'], via).toBe('unknown_parent');
      expect(err.message, via).toContain('not a grant');
    }
    expect(await store.delegations({ includeRevoked: true })).toEqual([]);
  }),

  run('break-glass-unknown-control', 'test_T334_an_envelope_citing_an_unknown_control_cannot_be_opened', async (store, clock) => {
    const r = rig(store, clock, { policy: BREAK_GLASS_POLICY.replace('[incident-response]', '[incident-respones]') });
    for (const opener of [BYSTANDER, COMMANDER]) {
      const err = await refusal(r.open('incident-payments', grant(clock, HOUR), 'INC-4412', opener));
      expect(err).toBeInstanceOf(InvalidArgument);
      expect(err.message).toContain('incident-respones');
    }
    expect(await store.delegations({ includeRevoked: true })).toEqual([]);
  }),

  run('break-glass-roleless-control', 'test_T334_an_envelope_citing_a_control_with_no_role_cannot_be_opened', async (store, clock) => {
    const r = rig(store, clock, { policy: BREAK_GLASS_POLICY.replace('    approver_role: incident-commander\n', '') });
    const err = await refusal(r.open('incident-payments', grant(clock, HOUR), 'INC-4412', BYSTANDER));
    expect(err).toBeInstanceOf(InvalidArgument);
    expect(err.message).toContain('approver_role');
    await noneBeneath(store, 'incident-payments');
  }),

  run('break-glass-row-readable', 'test_T335_a_break_glass_row_does_not_make_the_deployment_unreadable', async (store, clock) => {
    const r = rig(store, clock);
    const opened = await r.open('incident-payments', grant(clock, 2 * HOUR));
    const authority = loadPolicy(BREAK_GLASS_POLICY).authority!;
    const result = await authority.evaluate(refund(), { now: clock(), store, task: TASK });
    expect(result, 'read, and it passes').toMatchObject({ passed: true, reason: 'authority_grant', grantId: opened.delegationId });
  }),

  run('break-glass-revoked', 'test_T336_revoking_it_stops_everything_beneath', async (store, clock) => {
    const r = rig(store, clock);
    const opened = await r.open('incident-payments', grant(clock, 2 * HOUR, { delegable: true }));
    const beneath = await r.control.delegate(opened.delegationId, grant(clock, HOUR, { constraints: { amount_lte: 500 } }), { by: ONCALL });
    expect(await r.control.revoke(opened.delegationId, { by: 'human:ada' })).toBe(true);
    for (const d of [opened, beneath]) expect(await store.getDelegation(d.delegationId), 'the row stays').not.toBeNull();
    const err = await refusal(r.act());
    expect(err).toBeInstanceOf(ActionDenied);
    expect(err['reason']).toBe('authority_revoked');
    expect(r.calls()).toBe(0);
  }),

  run('break-glass-attenuates', 'test_T337_a_delegation_beneath_it_is_created_and_attenuates', async (store, clock) => {
    const r = rig(store, clock);
    const opened = await r.open('incident-payments', grant(clock, 2 * HOUR, { delegable: true }));
    const beneath = await r.control.delegate(opened.delegationId, grant(clock, HOUR, { constraints: { amount_lte: 500 } }), { by: ONCALL });
    expect([beneath.depth, beneath.createdVia]).toEqual([2, 'api']);
    expect(await r.act(100)).toBe('refunded');
    expect(r.calls()).toBe(1);
    // It cannot widen what it was given.
    const err = await refusal(r.control.delegate(opened.delegationId, grant(clock, HOUR, { constraints: { amount_lte: 5000 } }), { by: ONCALL }));
    expect([err['reason'], err['dimension']]).toEqual(['containment', 'constraints']);
  }),

  run('break-glass-cannot-outlive', 'test_T337_a_delegation_beneath_it_cannot_outlive_it', async (store, clock) => {
    const r = rig(store, clock);
    const opened = await r.open('incident-payments', grant(clock, HOUR, { delegable: true }));
    const err = await refusal(r.control.delegate(opened.delegationId, grant(clock, 3 * HOUR), { by: ONCALL }));
    expect(err).toBeInstanceOf(AuthorityEscalation);
    expect([err['reason'], err['dimension']]).toEqual(['containment', 'expires_at']);
  }),
]) as Record<BreakGlassCaseId, CaseDef>;
