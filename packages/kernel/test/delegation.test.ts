// Delegation (spec 02 §3): Control.delegate / Control.revoke, containment at creation and at
// every evaluation, the creation rules in order, the chain walked to the root and never
// trusted, revocation by one write, unreadable rows, and the containment property.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Authority,
  AuthorityDenied,
  AuthorityEscalation,
  Control,
  Grant,
  IdentityError,
  InvalidArgument,
  callbackSink,
  createAction,
  loadPolicy,
  sequentialIds,
  type DelegationRecord,
  type EventRecord,
  type GrantInput,
} from '@ctrlrun/kernel';
import { grantToJson } from '@ctrlrun/kernel/store';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { T0, V3, action, rejection, rig } from './authority.fixtures.js';

const HOUR = 3_600_000;
const at = (ms: number) => new Date(T0.getTime() + ms).toISOString();
const CAROL = 'carol@example.com';
const CFO = { agent: 'cfo-agent', user: CAROL };
const FINANCE = { agent: 'finance-agent', user: CAROL };

const ACTIONS = `
actions:
  stripe.refund:
    resource: "payment:{payment_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
  customer.read:
    decision: allow
`;

function document(opts: { depth?: number; amount?: number; delegable?: boolean; expires?: string } = {}): string {
  return `${V3}authority:
  max_delegation_depth: ${opts.depth ?? 3}
  grants:
    - id: head-of-finance
      subject: { agent: cfo-agent, user: "${CAROL}" }
      actions: ["stripe.**"]
      resources: ["payment:*"]
      constraints: { amount_lte: ${opts.amount ?? 10000000}, currency_in: [EUR, USD] }
      environments: [production]
      expires_at: ${opts.expires ?? at(24 * HOUR)}
      delegable: ${opts.delegable ?? true}
    - id: reader
      subject: { agent: "*" }
      actions: [customer.read]
${ACTIONS}`;
}

/** A child of head-of-finance contained on every dimension. */
function child(extra: Partial<GrantInput> = {}): GrantInput {
  return {
    subject: { agent: 'finance-agent', user: CAROL },
    actions: ['stripe.refund'],
    resources: ['payment:*'],
    constraints: { amount_lte: 2500000, currency_in: ['EUR'] },
    environments: ['production'],
    expiresAt: at(12 * HOUR),
    delegable: true,
    ...extra,
  };
}

function refund(principal: { agent: string; user?: string | null }, amount = 1000) {
  return action({ principal, arguments: { amount, currency: 'EUR', payment_id: 'p1' }, resource: 'payment:p1' });
}

async function rows(r: Awaited<ReturnType<typeof rig>>): Promise<DelegationRecord[]> {
  return r.store.delegations({ includeRevoked: true });
}

describe('T75: a delegation authorizes within its limits, and only there', () => {
  it('test_t75_the_delegation_authorizes_an_action_within_its_limits', async () => {
    const r = await rig(document());
    const d = await r.control.delegate('head-of-finance', child(), { by: CFO });
    expect(d.delegationId).toMatch(/^dlg_[0-9a-f]{32}$/);
    expect(d.grant.id).toBe(d.delegationId);
    expect(d).toMatchObject({ parentId: 'head-of-finance', depth: 1, createdVia: 'api', createdBy: CFO, revokedAt: null });
    const [row] = await rows(r);
    expect(row).toMatchObject({
      delegationId: d.delegationId,
      parentId: 'head-of-finance',
      depth: 1,
      createdByAgent: 'cfo-agent',
      createdByUser: CAROL,
      createdVia: 'api',
      createdAt: '2026-09-03T10:12:01+00:00',
      revokedAt: null,
      revokedBy: null,
    });
    expect(row!.grantJson).toBe(grantToJson(d.grant));
    // The event reached the store and the sink, with no action.
    const created = r.events.filter((e) => e.type === 'DELEGATION_CREATED');
    expect(created).toHaveLength(1);
    expect(created[0]!.actionId).toBeNull();
    expect(created[0]!.data).toEqual({
      delegation_id: d.delegationId,
      parent_id: 'head-of-finance',
      depth: 1,
      created_by_agent: 'cfo-agent',
      created_by_user: CAROL,
      created_via: 'api',
    });
    expect((await r.store.events()).map((e) => e.type)).toEqual(['DELEGATION_CREATED']);

    await r.control.execute(refund(FINANCE), r.executor);
    expect(r.calls).toBe(1);
    expect(r.data('AUTHORITY_RESOLVED').at(-1)).toEqual({ reason: 'authority_grant', grant_id: d.delegationId, delegation_id: d.delegationId, depth: 1 });
  });

  it('test_t75_beyond_its_limits_is_authority_constraint_naming_the_delegation', async () => {
    const r = await rig(document());
    const d = await r.control.delegate('head-of-finance', child(), { by: CFO });
    const err = await rejection(r.control.execute(refund(FINANCE, 3000000), r.executor));
    expect(err).toMatchObject({ reason: 'authority_constraint', grantId: d.delegationId, delegationId: d.delegationId });
    expect(r.data('AUTHORITY_DENIED').at(-1)).toEqual({ reason: 'authority_constraint', grant_id: d.delegationId, delegation_id: d.delegationId, depth: 1 });
    expect(r.calls).toBe(0);
  });

  it('test_t75_creation_is_not_idempotent', async () => {
    const r = await rig(document());
    const a = await r.control.delegate('head-of-finance', child(), { by: CFO });
    const b = await r.control.delegate('head-of-finance', child(), { by: CFO });
    expect(a.delegationId).not.toBe(b.delegationId);
    expect(await rows(r)).toHaveLength(2);
  });

  it('test_t75_a_grant_with_an_id_is_refused_and_nothing_is_written', async () => {
    const r = await rig(document());
    expect(await rejection(r.control.delegate('head-of-finance', child({ id: 'mine' }), { by: CFO }))).toBeInstanceOf(InvalidArgument);
    expect(await rejection(r.control.delegate('head-of-finance', new Grant({ ...child(), id: 'mine' }), { by: CFO }))).toBeInstanceOf(InvalidArgument);
    // Bad input: unknown key, a decision, a reserved argument.
    for (const bad of [{ ...child(), action: ['x'] }, { ...child(), decision: 'allow' }, child({ constraints: { agent_eq: 'x' } })]) {
      expect(await rejection(r.control.delegate('head-of-finance', bad as GrantInput, { by: CFO }))).toBeInstanceOf(InvalidArgument);
    }
    expect(await rows(r)).toEqual([]);
    expect(await r.store.events()).toEqual([]);
  });

  it('a Control without authority has nothing to delegate or revoke', async () => {
    const r = await rig(V3 + ACTIONS);
    expect(await rejection(r.control.delegate('x', child(), { by: CFO }))).toBeInstanceOf(InvalidArgument);
    expect(await rejection(r.control.revoke('dlg_x'))).toBeInstanceOf(InvalidArgument);
  });
});

describe('T76 / T81: containment on every dimension; omission is never unlimited', () => {
  const widened: [string, Partial<GrantInput>][] = [
    ['subject', { subject: { agent: '*', user: CAROL } }],
    ['subject', { subject: { agent: 'finance-*', user: CAROL } }],
    ['subject', { subject: { user: CAROL } }],
    ['subject', { subject: { agent: 'finance-agent' } }],
    ['subject', { subject: { agent: 'finance-agent', user: 'mallory@example.com' } }],
    ['subject', { subject: { agent: 'finance-agent', user: '*' } }],
    ['actions', { actions: ['**'] }],
    ['actions', { actions: ['stripe.refund', 'iam.grant_admin'] }],
    ['resources', { resources: ['**'] }],
    ['resources', { resources: null }],
    ['constraints', { constraints: { amount_lte: 20000000, currency_in: ['EUR'] } }],
    ['constraints', { constraints: { currency_in: ['EUR'] } }],
    ['constraints', { constraints: { amount_lte: 100, currency_in: ['EUR', 'GBP'] } }],
    ['constraints', { constraints: { amount_lt: 100, currency_in: ['EUR'] } }],
    ['constraints', { constraints: null }],
    ['environments', { environments: ['production', 'staging'] }],
    ['environments', { environments: null }],
    ['expires_at', { expiresAt: at(48 * HOUR) }],
    ['expires_at', { expiresAt: null, delegable: false }],
  ];
  for (const [dimension, change] of widened) {
    it(`test_t76_each_dimension_violated_alone (${dimension}: ${JSON.stringify(change)})`, async () => {
      const r = await rig(document());
      const err = await rejection(r.control.delegate('head-of-finance', child(change), { by: CFO }));
      expect(err).toBeInstanceOf(AuthorityEscalation);
      expect(err).toMatchObject({ reason: 'containment', dimension, parentId: 'head-of-finance', code: 'ERR_AUTHORITY_ESCALATION' });
      expect(r.data('DELEGATION_REJECTED')).toEqual([{ reason: 'containment', parent_id: 'head-of-finance', dimension }]);
      expect(await rows(r)).toEqual([]);
    });
  }

  it('test_t81_omission_is_not_unlimited', async () => {
    const r = await rig(document());
    for (const [key, dimension] of [
      ['resources', 'resources'],
      ['constraints', 'constraints'],
      ['environments', 'environments'],
      ['expiresAt', 'expires_at'],
    ] as const) {
      const input: Record<string, unknown> = { ...child(), delegable: false };
      delete input[key];
      expect(await rejection(r.control.delegate('head-of-finance', input as unknown as GrantInput, { by: CFO })), key).toMatchObject({
        reason: 'containment',
        dimension,
      });
    }
    expect(await rows(r)).toEqual([]);
  });

  it('narrower on every dimension, and extra constraints, are accepted', async () => {
    const r = await rig(document());
    await r.control.delegate(
      'head-of-finance',
      child({ constraints: { amount_lte: 10, currency_in: ['USD'], urgent_eq: false }, actions: ['stripe.refund', 'stripe.ref*'] }),
      { by: CFO },
    );
    expect(await rows(r)).toHaveLength(1);
  });
});

describe('T76b: the creation rules, in order, first failure wins', () => {
  it('unknown_parent, parent_not_delegable, parent_not_valid, not_the_subject, max_depth, principal_expired', async () => {
    const r = await rig(document({ depth: 2 }));
    const expectRejected = async (parent: string, input: GrantInput, by: Parameters<Control['delegate']>[2]['by'], reason: string) => {
      const err = await rejection(r.control.delegate(parent, input, { by }));
      if (reason === 'principal_expired') expect(err).toBeInstanceOf(IdentityError);
      else expect(err).toMatchObject({ reason, parentId: parent, dimension: null });
      expect(r.data('DELEGATION_REJECTED').at(-1)).toEqual({ reason, parent_id: parent });
    };
    await expectRejected('no-such-grant', child(), CFO, 'unknown_parent');
    await expectRejected('reader', child(), { agent: 'anyone' }, 'parent_not_delegable');
    await expectRejected('head-of-finance', child(), { agent: 'cfo-agent' }, 'not_the_subject');
    await expectRejected('head-of-finance', child(), { agent: 'intern', user: CAROL }, 'not_the_subject');
    await expectRejected('head-of-finance', child(), { ...CFO, expiresAt: '2026-09-03T10:00:00Z' }, 'principal_expired');
    const d1 = await r.control.delegate('head-of-finance', child(), { by: CFO });
    const d2 = await r.control.delegate(d1.delegationId, child({ subject: { agent: 'clerk', user: CAROL } }), { by: FINANCE });
    expect(d2.depth).toBe(2);
    await expectRejected(d2.delegationId, child({ subject: { agent: 'x', user: CAROL } }), { agent: 'clerk', user: CAROL }, 'max_depth');
    const leaf = await r.control.delegate(d1.delegationId, child({ subject: { agent: 'leaf', user: CAROL }, delegable: false }), { by: FINANCE });
    await expectRejected(leaf.delegationId, child(), { agent: 'leaf', user: CAROL }, 'parent_not_delegable');
    await r.control.revoke(d1.delegationId, { by: 'ops' });
    await expectRejected(d1.delegationId, child(), FINANCE, 'unknown_parent');
    await expectRejected(d2.delegationId, child(), { agent: 'clerk', user: CAROL }, 'parent_not_valid');
    r.set(at(25 * HOUR));
    await expectRejected('head-of-finance', child({ expiresAt: at(26 * HOUR) }), CFO, 'parent_not_valid');
    expect(await rows(r)).toHaveLength(3);
  });

  it('the T80 chain: €100,000 → €25,000 → €2,000', async () => {
    const r = await rig(document());
    const finance = await r.control.delegate('head-of-finance', child({ constraints: { amount_lte: 2500000, currency_in: ['EUR'] } }), { by: CFO });
    const support = await r.control.delegate(
      finance.delegationId,
      child({ subject: { agent: 'support-agent', user: CAROL }, constraints: { amount_lte: 200000, currency_in: ['EUR'] }, delegable: false }),
      { by: FINANCE },
    );
    expect(support.depth).toBe(2);
    const supportAgent = { agent: 'support-agent', user: CAROL };
    expect(await rejection(r.control.execute(refund(supportAgent, 5000000), r.executor))).toMatchObject({
      reason: 'authority_constraint',
      delegationId: support.delegationId,
    });
    expect(
      await rejection(
        r.control.delegate(
          finance.delegationId,
          child({ subject: { agent: 'support-agent', user: CAROL }, constraints: { amount_lte: 5000000, currency_in: ['EUR'] } }),
          { by: FINANCE },
        ),
      ),
    ).toMatchObject({ reason: 'containment', dimension: 'constraints' });
    expect(
      await rejection(
        r.control.delegate(support.delegationId, child({ subject: { agent: 'x', user: CAROL }, constraints: { amount_lte: 1, currency_in: ['EUR'] } }), {
          by: supportAgent,
        }),
      ),
    ).toMatchObject({ reason: 'parent_not_delegable' });
    await r.control.execute(refund(supportAgent, 1500), r.executor);
    expect(r.data('AUTHORITY_RESOLVED').at(-1)).toMatchObject({ delegation_id: support.delegationId, depth: 2 });
  });
});

describe('T77–T79: every evaluation walks the chain to the root', () => {
  it('test_t77_a_parent_that_expires_after_creation', async () => {
    const r = await rig(document());
    const d = await r.control.delegate('head-of-finance', child({ expiresAt: at(24 * HOUR) }), { by: CFO });
    const before = await rows(r);
    r.set(at(24 * HOUR + 1));
    const err = await rejection(r.control.execute(refund(FINANCE), r.executor));
    expect(err).toMatchObject({ reason: 'authority_escalation', delegationId: d.delegationId });
    expect(r.data('AUTHORITY_DENIED').at(-1)).toMatchObject({ reason: 'authority_escalation', expired_parent_id: 'head-of-finance' });
    expect(await rows(r)).toEqual(before);
  });

  it('test_t77b_a_narrowed_parent_narrows_its_children', async () => {
    const r = await rig(document());
    const d = await r.control.delegate('head-of-finance', child(), { by: CFO });
    // The file is edited and reloaded over the same store: the root now caps at 1,000,000.
    const narrowed = new Control({ policy: loadPolicy(document({ amount: 1000000 })), store: r.store, clock: r.clock, logger: { warn: () => {} } });
    const err = await rejection(narrowed.execute(refund(FINANCE), r.executor));
    expect(err).toMatchObject({ reason: 'authority_escalation', delegationId: d.delegationId });
    const denied = (await r.store.events()).filter((e) => e.type === 'AUTHORITY_DENIED').at(-1)!;
    expect(denied.data).toMatchObject({ reason: 'authority_escalation', dimension: 'constraints' });
    // Setting `delegable: false` on the root shuts the chain (rule 6), naming no dimension.
    const shut = new Control({ policy: loadPolicy(document({ delegable: false })), store: r.store, clock: r.clock, logger: { warn: () => {} } });
    expect(await rejection(shut.execute(refund(FINANCE), r.executor))).toMatchObject({ reason: 'authority_escalation' });
    const last = (await r.store.events()).filter((e) => e.type === 'AUTHORITY_DENIED').at(-1)!;
    expect(last.data).toEqual({ reason: 'authority_escalation', grant_id: d.delegationId, delegation_id: d.delegationId, depth: 1 });
  });

  async function hand(r: Awaited<ReturnType<typeof rig>>, id: string, parentId: string, extra: Partial<DelegationRecord> = {}) {
    const grant = new Grant(child());
    await r.store.putDelegation({
      delegationId: id,
      parentId,
      depth: 1,
      grantJson: grantToJson(grant),
      createdByAgent: 'cfo-agent',
      createdByUser: CAROL,
      createdVia: 'api',
      createdAt: '2026-09-03T10:00:00+00:00',
      revokedAt: null,
      revokedBy: null,
      ...extra,
    });
  }
  const ID = (n: number) => `dlg_${n.toString(16).padStart(32, '0')}`;

  it('test_t77c_a_missing_ancestor_is_authority_escalation', async () => {
    const r = await rig(document());
    await hand(r, ID(1), ID(99));
    expect(await rejection(r.control.execute(refund(FINANCE), r.executor))).toMatchObject({ reason: 'authority_escalation', delegationId: ID(1) });
    expect(r.data('AUTHORITY_DENIED').at(-1)).toMatchObject({ missing_parent_id: ID(99) });
  });

  it('test_t77d_a_cycle_is_authority_unreadable', async () => {
    const r = await rig(document());
    await hand(r, ID(1), ID(2));
    await hand(r, ID(2), ID(1));
    expect(await rejection(r.control.execute(refund(FINANCE), r.executor))).toMatchObject({ reason: 'authority_unreadable' });
    expect(r.data('AUTHORITY_DENIED').at(-1)).toMatchObject({ reason: 'authority_unreadable', cycle_at: ID(1) });
  });

  it('test_T79_depth_is_walked_never_trusted', async () => {
    const r = await rig(document({ depth: 1 }));
    const d1 = await r.control.delegate('head-of-finance', child(), { by: CFO });
    expect(await rejection(r.control.delegate(d1.delegationId, child({ subject: { agent: 'clerk', user: CAROL } }), { by: FINANCE }))).toMatchObject({
      reason: 'max_depth',
    });
    // A row written by hand two levels down, whose column claims depth 1, is still depth 2.
    await hand(r, ID(7), d1.delegationId, { grantJson: grantToJson(new Grant(child({ subject: { agent: 'clerk', user: CAROL } }))), depth: 1 });
    expect(await rejection(r.control.execute(refund({ agent: 'clerk', user: CAROL }), r.executor))).toMatchObject({ reason: 'authority_escalation' });
    expect(r.data('AUTHORITY_DENIED').at(-1)).toMatchObject({ depth_exceeded: 2, depth: 2 });
    // The depth-1 delegation itself still authorizes.
    await r.control.execute(refund(FINANCE), r.executor);
  });

  it('test_T79_max_delegation_depth_0_disables_delegation_and_denies_existing_ones', async () => {
    const r = await rig(document());
    await r.control.delegate('head-of-finance', child(), { by: CFO });
    const off = new Control({ policy: loadPolicy(document({ depth: 0 })), store: r.store, clock: r.clock, ids: sequentialIds(), logger: { warn: () => {} } });
    expect(await rejection(off.execute(refund(FINANCE), r.executor))).toMatchObject({ reason: 'authority_escalation' });
    expect(await rejection(off.delegate('head-of-finance', child(), { by: CFO }))).toMatchObject({ reason: 'max_depth' });
  });

  it('one unreadable row denies every action as authority_unreadable', async () => {
    for (const corrupt of [{ grantJson: '{"actions":"x"}' }, { createdVia: 'shell' }, { grantJson: 'not json' }]) {
      const r = await rig(document());
      await hand(r, ID(3), 'head-of-finance', corrupt);
      // Even an action a root grant covers.
      const read = action({ name: 'customer.read', resource: null, principal: { agent: 'anyone' } });
      expect(await rejection(r.control.execute(read, r.executor))).toMatchObject({ reason: 'authority_unreadable', delegationId: ID(3) });
      expect(r.data('AUTHORITY_DENIED').at(-1)).toEqual({ reason: 'authority_unreadable', delegation_id: ID(3), depth: 0 });
    }
    const r = await rig(document());
    await r.store.putDelegation({
      delegationId: 'head-of-finance-2',
      parentId: 'head-of-finance',
      depth: 1,
      grantJson: grantToJson(new Grant(child())),
      createdByAgent: 'x',
      createdByUser: null,
      createdVia: 'api',
      createdAt: '2026-09-03T10:00:00+00:00',
      revokedAt: null,
      revokedBy: null,
    });
    expect(await rejection(r.control.execute(refund(FINANCE), r.executor))).toMatchObject({ reason: 'authority_unreadable' });
  });
});

describe('T78: revocation is one write, transitive by the walk', () => {
  it('test_t78_a_revoked_parent_denies_its_grandchild', async () => {
    const r = await rig(document());
    const d1 = await r.control.delegate('head-of-finance', child(), { by: CFO });
    const d2 = await r.control.delegate(d1.delegationId, child({ subject: { agent: 'clerk', user: CAROL } }), { by: FINANCE });
    const clerk = { agent: 'clerk', user: CAROL };
    await r.control.execute(refund(clerk), r.executor);
    const before = await rows(r);
    r.advance(1000);
    expect(await r.control.revoke(d1.delegationId, { by: 'ops@example.com' })).toBe(true);
    const after = await rows(r);
    // One write: only the revoked row changed.
    expect(after.find((x) => x.delegationId === d2.delegationId)).toEqual(before.find((x) => x.delegationId === d2.delegationId));
    expect(after.find((x) => x.delegationId === d1.delegationId)).toMatchObject({ revokedAt: '2026-09-03T10:12:02+00:00', revokedBy: 'ops@example.com' });
    expect(r.events.filter((e) => e.type === 'DELEGATION_REVOKED').map((e) => [e.actionId, e.data])).toEqual([
      [null, { delegation_id: d1.delegationId, revoked_by: 'ops@example.com' }],
    ]);
    const err = await rejection(r.control.execute(refund(clerk), r.executor));
    expect(err).toBeInstanceOf(AuthorityDenied);
    expect(err).toMatchObject({ reason: 'authority_revoked', delegationId: d2.delegationId });
    expect(await rejection(r.control.execute(refund(FINANCE), r.executor))).toMatchObject({ reason: 'authority_revoked' });
    expect(r.calls).toBe(1);
  });

  it('revoking twice succeeds without a second event; unknown and root ids are refused', async () => {
    const r = await rig(document());
    const d = await r.control.delegate('head-of-finance', child(), { by: CFO });
    expect(await r.control.revoke(d.delegationId)).toBe(true);
    expect(await r.control.revoke(d.delegationId, { by: 'someone-else' })).toBe(false);
    expect(r.events.filter((e) => e.type === 'DELEGATION_REVOKED')).toHaveLength(1);
    expect(r.events.filter((e) => e.type === 'DELEGATION_REVOKED')[0]!.data).toEqual({ delegation_id: d.delegationId, revoked_by: null });
    expect(r.warnings.join('\n')).toMatch(/already revoked/);
    expect((await r.store.getDelegation(d.delegationId))!.revokedBy).toBeNull();
    expect(await rejection(r.control.revoke('dlg_nope'))).toBeInstanceOf(InvalidArgument);
    expect((await rejection(r.control.revoke('head-of-finance'))).message).toMatch(/root grant.*delegable: false/);
  });
});

describe('containment property: a child is accepted only if it is inside its parent on every dimension', () => {
  const agents = ['p-agent', 'c-agent', 'other'];
  const users = [null, 'u1', 'u2'];
  const names = ['stripe.refund', 'stripe.charge', 'stripe.refund.partial', 'iam.grant'];
  const resources = [null, 'payment:1', 'payment:2:x', 'cust:1'];
  const envs = ['production', 'staging'];
  const sub = <T>(xs: readonly T[]) => fc.subarray([...xs], { minLength: 1 });
  const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
  const constraints = fc.record(
    {
      amount_lte: maybe(fc.integer({ min: 0, max: 100 })),
      amount_gte: maybe(fc.integer({ min: 0, max: 100 })),
      currency_in: maybe(sub(['EUR', 'USD', 'GBP'])),
      kind_eq: maybe(fc.constantFrom('a', 'b')),
    },
    { requiredKeys: [] },
  );
  const grant = (agentPool: string[], userPool: (string | null)[]) =>
    fc.record({
      subject: fc.record({ agent: fc.constantFrom(...agentPool), user: fc.constantFrom(...userPool) }),
      actions: sub(['stripe.refund', 'stripe.*', 'stripe.**', 'stripe.ref*', '**']),
      resources: fc.option(sub(['payment:*', 'payment:**', 'payment:1', '**']), { nil: null }),
      constraints,
      environments: fc.option(sub(envs), { nil: null }),
      hours: fc.option(fc.integer({ min: 1, max: 6 }), { nil: null }),
    });
  const strip = (c: Record<string, unknown>) => Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined));
  const request = fc.record({
    agent: fc.constantFrom(...agents),
    user: fc.constantFrom(...users),
    name: fc.constantFrom(...names),
    resource: fc.constantFrom(...resources),
    environment: fc.constantFrom(...envs),
    amount: fc.integer({ min: 0, max: 110 }),
    currency: fc.constantFrom('EUR', 'USD', 'GBP'),
    kind: fc.constantFrom('a', 'b'),
    hours: fc.integer({ min: 0, max: 7 }),
  });

  // The child starts as a copy of its parent and each dimension is then kept, replaced at
  // random, or dropped, so that accepted children are common and near-misses are too.
  const keepOr = <T>(a: fc.Arbitrary<T>) => fc.oneof({ arbitrary: fc.constant<'keep'>('keep'), weight: 3 }, { arbitrary: a, weight: 1 });
  const childChanges = fc.record({
    agent: fc.oneof({ arbitrary: fc.constant('c-agent'), weight: 6 }, { arbitrary: fc.constantFrom('c*', '*', null), weight: 1 }),
    user: keepOr(fc.constantFrom(null, 'u1', 'u2', 'u*')),
    actions: keepOr(sub(['stripe.refund', 'stripe.*', 'stripe.**', 'stripe.ref*', '**'])),
    resources: keepOr(fc.option(sub(['payment:*', 'payment:**', 'payment:1', '**']), { nil: null })),
    constraints: fc.record({
      amount_lte: keepOr(maybe(fc.integer({ min: 0, max: 100 }))),
      amount_gte: keepOr(maybe(fc.integer({ min: 0, max: 100 }))),
      currency_in: keepOr(maybe(sub(['EUR', 'USD', 'GBP']))),
      kind_eq: keepOr(maybe(fc.constantFrom('a', 'b'))),
    }),
    environments: keepOr(fc.option(sub(envs), { nil: null })),
    hours: keepOr(fc.option(fc.integer({ min: 1, max: 7 }), { nil: null })),
  });

  it('for every request the accepted child authorizes, the parent authorizes too', async () => {
    const store = await createSqlJsStore({ clock: () => T0 });
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(
        grant(['p-agent', '*'], [null, 'u1', 'u*']),
        childChanges,
        fc.array(request, { minLength: 20, maxLength: 20 }),
        async (p, c, requests) => {
          const expiresAt = (h: number | null) => (h === null ? null : at(h * HOUR));
          const pick = <T>(v: T | 'keep', fallback: T): T => (v === 'keep' ? fallback : v);
          const parentConstraints = strip(p.constraints) as Record<string, unknown>;
          const childConstraints: Record<string, unknown> = {};
          for (const [k, v] of Object.entries(c.constraints)) {
            const value = pick(v as unknown, parentConstraints[k]);
            if (value !== undefined) childConstraints[k] = value;
          }
          const parent = new Grant({
            id: 'root',
            subject: p.subject,
            actions: p.actions,
            resources: p.resources,
            constraints: parentConstraints,
            environments: p.environments,
            expiresAt: at((p.hours ?? 6) * HOUR),
            delegable: true,
          });
          let childGrant: Grant;
          try {
            childGrant = new Grant({
              subject: { agent: c.agent, user: pick(c.user, p.subject.user) },
              actions: pick(c.actions, p.actions),
              resources: pick(c.resources, p.resources),
              constraints: childConstraints,
              environments: pick(c.environments, p.environments),
              expiresAt: expiresAt(pick(c.hours, p.hours ?? 6)),
            });
          } catch {
            return true;
          }
          const by = { agent: 'p-agent', user: 'u1' };
          try {
            await new Authority([parent]).planDelegation('root', childGrant, { by, store, now: T0, ids: sequentialIds() });
          } catch (err) {
            if (err instanceof AuthorityEscalation && err.reason === 'containment') return true;
            throw err;
          }
          accepted++;
          // The child names one agent (no wildcard).
          if (childGrant.subject.agent === null || childGrant.subject.agent.includes('*')) return false;
          for (const q of requests) {
            const make = (agent: string) =>
              createAction({
                name: q.name,
                arguments: { amount: q.amount, currency: q.currency, kind: q.kind },
                principal: { agent, user: q.user },
                resource: q.resource,
                environment: q.environment,
              });
            const now = new Date(T0.getTime() + q.hours * HOUR);
            const allows = (g: Grant, a: ReturnType<typeof make>) => g.matchesShape(a) && g.constraintsHold(a.canonicalArguments, []) && !g.isExpired(now);
            // Delegation hands the parent's authority to another agent, so "who" is compared
            // through the user alone: the same request, by the parent's own agent.
            if (allows(childGrant, make(childGrant.subject.agent)) && !allows(parent, make(by.agent))) return false;
          }
          return true;
        },
      ),
      { numRuns: 400 },
    );
    // The property is about accepted children, so enough of them must occur.
    expect(accepted).toBeGreaterThan(40);
    await store.close();
  });
});

describe('T75b: delegation events reach every sink', () => {
  it('DELEGATION_CREATED / REJECTED / REVOKED go to the store and to each sink, in order', async () => {
    const seen: [string, string][] = [];
    const r = await rig(document(), {
      sinks: [
        callbackSink({ name: 'one', onEvent: (e: EventRecord) => void seen.push(['one', e.type]) }),
        callbackSink({ name: 'two', onEvent: (e: EventRecord) => void seen.push(['two', e.type]) }),
      ],
    });
    const d = await r.control.delegate('head-of-finance', child(), { by: CFO });
    await rejection(r.control.delegate('head-of-finance', child({ actions: ['**'] }), { by: CFO }));
    await r.control.revoke(d.delegationId);
    expect(seen).toEqual([
      ['one', 'DELEGATION_CREATED'],
      ['two', 'DELEGATION_CREATED'],
      ['one', 'DELEGATION_REJECTED'],
      ['two', 'DELEGATION_REJECTED'],
      ['one', 'DELEGATION_REVOKED'],
      ['two', 'DELEGATION_REVOKED'],
    ]);
    expect((await r.store.events()).every((e) => e.actionId === null)).toBe(true);
  });
});

describe('the README section on grants, delegation and revoke', () => {
  it('its policy loads and its delegate / revoke steps behave as it says', async () => {
    const readme = readFileSync(fileURLToPath(new URL('../../../README.md', import.meta.url)), 'utf8');
    const start = readme.indexOf('\n## Who may act: grants, delegation, observe mode\n');
    expect(start).toBeGreaterThanOrEqual(0);
    const section = readme.slice(start);
    const yaml = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    const ts = /```ts\n([\s\S]*?)```/.exec(section)![1]!;
    const r = await rig(yaml);
    const dana = { agent: 'head-of-support', user: 'dana@example.com' };
    const support = { agent: 'support-agent', user: 'dana@example.com' };
    expect(ts).toContain("control.delegate('head-of-support'");
    const d = await r.control.delegate(
      'head-of-support',
      { subject: support, actions: ['stripe.refund'], constraints: { amount_lte: 200000 }, expiresAt: '2027-06-30T12:00:00Z' },
      { by: dana },
    );
    const ask = (amount: number) => r.control.execute(action({ principal: support, resource: null, arguments: { amount } }), r.executor);
    await ask(1000);
    expect(
      await rejection(r.control.delegate('head-of-support', { subject: support, actions: ['stripe.refund'], expiresAt: '2027-06-30T12:00:00Z' }, { by: dana })),
    ).toMatchObject({ reason: 'containment', dimension: 'constraints' });
    await r.control.revoke(d.delegationId, { by: 'ops@example.com' });
    expect(await rejection(ask(1000))).toMatchObject({ reason: 'authority_revoked' });
  });
});
