// Delegations the original 0.12.2 writes into a shared store (spec 05 §6.2, §3.2, §5.1): rows
// created via break-glass and hop, and grant_json carrying "tasks" and "budgets" always. This
// build reads them and enforces them: a task-bound grant (no call here names a task) is
// authority_task, a budgeted chain is charged in the reservation (budget_exhausted past its
// limit); a chain rooted in a break-glass envelope authorises while its opened grant keeps within
// the envelope's max_ttl. It never creates an ordinary delegation beneath an envelope, and its own
// delegations keep the original's containment on tasks and budgets.
import { describe, expect, it } from 'vitest';
import { ActionDenied, AuthorityDenied, AuthorityEscalation, createAction, type DelegationRecord } from '@ctrlrun/kernel';
import { grantFromJson } from '@ctrlrun/kernel/store';
import { rejection, rig } from './authority.fixtures.js';

const CFO = { agent: 'cfo-agent' };
const HELPER = { agent: 'helper-agent' };
const ID = (n: number) => `dlg_${n.toString(16).padStart(32, '0')}`;

/** A v7 document: a delegable root for refunds (with `root` added to it), a reader for anyone, an envelope. */
const document = (root = '', more = '') => `schema: ctrlrun.policy/v7
authority:
  grants:
    - id: head-of-finance
      subject: { agent: "cfo-agent" }
      actions: ["stripe.refund"]
      delegable: true
      expires_at: "2027-01-01T00:00:00+00:00"
${root}${more}    - id: reader
      subject: { agent: "*" }
      actions: ["customer.read"]
  break_glass:
    incident:
      subject: { agent: "*" }
      actions: ["stripe.**"]
      max_ttl: PT4H
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
  customer.read: {decision: allow}
`;

function refund(principal: { agent: string; user?: string | null } = HELPER, payment = 'p1') {
  return createAction({ name: 'stripe.refund', arguments: { payment_id: payment, amount: 700 }, principal, environment: 'production' });
}

/** Python's json.dumps(sort_keys=True, separators=(",", ":")): what 0.12.2 stores. */
function pythonJson(v: unknown): string {
  const sorted = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(sorted)
      : x !== null && typeof x === 'object'
        ? Object.fromEntries(
            Object.keys(x)
              .sort()
              .map((k) => [k, sorted((x as Record<string, unknown>)[k])]),
          )
        : x;
  return JSON.stringify(sorted(v));
}

/** A child grant_json exactly as 0.12.2's grant_to_json writes it: every key, tasks and budgets included. */
function originalGrant(over: Record<string, unknown> = {}): string {
  return pythonJson({
    subject: { agent: 'helper-agent', user: null },
    actions: ['stripe.refund'],
    resources: null,
    constraints: {},
    environments: null,
    expires_at: '2026-12-01T00:00:00+00:00',
    delegable: false,
    tasks: null,
    budgets: null,
    ...over,
  });
}

/** A row as 0.12.2 writes it. */
function originalRow(id: string, parentId: string, createdVia: string, grantJson: string, depth = 1): DelegationRecord {
  return {
    delegationId: id,
    parentId,
    depth,
    grantJson,
    createdByAgent: 'cfo-agent',
    createdByUser: createdVia === 'break-glass' ? 'oncall@example.com' : null,
    createdVia,
    createdAt: '2026-09-03T10:00:00.123456+00:00',
    revokedAt: null,
    revokedBy: null,
  };
}

describe('rows the original 0.12.2 writes are read', () => {
  it('a plain row created via hop (tasks and budgets null) authorises as any delegation does', async () => {
    // grant_json with "tasks" and "budgets" reads as the grant it is: null dimensions, or the values (window in seconds).
    const plain = grantFromJson(originalGrant(), ID(1));
    expect([plain.tasks, plain.budgets, plain.expiresAt]).toEqual([null, null, '2026-12-01T00:00:00+00:00']);
    const bound = grantFromJson(
      originalGrant({
        tasks: ['ticket:*'],
        budgets: [
          { limit: 5, metric: 'count', window: 86400 },
          { limit: 100000, metric: 'amount', window: 3600 },
        ],
      }),
      ID(2),
    );
    expect([bound.tasks, bound.budgets]).toEqual([
      ['ticket:*'],
      [
        { metric: 'count', limit: 5, window: 86400 },
        { metric: 'amount', limit: 100000, window: 3600 },
      ],
    ]);
    const r = await rig(document());
    await r.store.putDelegation(originalRow(ID(1), 'head-of-finance', 'hop', originalGrant()));
    expect(await r.control.execute(refund(), r.executor)).toBe('ok');
    expect(r.calls).toBe(1);
    expect(r.data('AUTHORITY_RESOLVED').at(-1)).toEqual({ reason: 'authority_grant', grant_id: ID(1), delegation_id: ID(1), depth: 1 });
    expect(r.lastReceipt()['authority_grant_id']).toBe(ID(1));
    // And the row is readable for revocation, as any other.
    expect(await r.control.revoke(ID(1), { by: 'ops' })).toBe(true);
    expect(await rejection(r.control.execute(refund(), r.executor))).toMatchObject({ reason: 'authority_revoked' });
  });

  it('one malformed row still makes every action authority_unreadable, as before: invalid tasks or budgets, an unknown created_via', async () => {
    const bad: [string, string][] = [
      ['tasks []', originalGrant({ tasks: [] })],
      ['tasks [""]', originalGrant({ tasks: [''] })],
      ['tasks a string', originalGrant({ tasks: 'ticket:*' })],
      ['tasks [5]', originalGrant({ tasks: [5] })],
      ['budgets []', originalGrant({ budgets: [] })],
      ['budgets an object', originalGrant({ budgets: { limit: 5, metric: 'count', window: 60 } })],
      ['a budget with a fourth key', originalGrant({ budgets: [{ limit: 5, metric: 'count', window: 60, currency: 'EUR' }] })],
      ['a budget without a window', originalGrant({ budgets: [{ limit: 5, metric: 'count' }] })],
      ['an empty metric', originalGrant({ budgets: [{ limit: 5, metric: '', window: 60 }] })],
      ['a negative limit', originalGrant({ budgets: [{ limit: -1, metric: 'count', window: 60 }] })],
      ['a boolean limit', originalGrant({ budgets: [{ limit: true, metric: 'count', window: 60 }] })],
      ['a string limit', originalGrant({ budgets: [{ limit: '5', metric: 'count', window: 60 }] })],
      ['a fractional limit', originalGrant({ budgets: [{ limit: 1.5, metric: 'count', window: 60 }] })],
      ['a zero window', originalGrant({ budgets: [{ limit: 5, metric: 'count', window: 0 }] })],
      ['a boolean window', originalGrant({ budgets: [{ limit: 5, metric: 'count', window: true }] })],
      ['a duration window', originalGrant({ budgets: [{ limit: 5, metric: 'count', window: 'P1D' }] })],
      ['a window over a hundred years', originalGrant({ budgets: [{ limit: 5, metric: 'count', window: 100 * 365 * 86400 + 1 }] })],
    ];
    for (const [what, grantJson] of bad) {
      const r = await rig(document());
      await r.store.putDelegation(originalRow(ID(3), 'head-of-finance', 'hop', grantJson));
      const read = createAction({ name: 'customer.read', arguments: {}, principal: { agent: 'anyone' }, environment: 'production' });
      expect(await rejection(r.control.execute(read, r.executor)), what).toMatchObject({ reason: 'authority_unreadable', delegationId: ID(3) });
    }
    const r = await rig(document());
    await r.store.putDelegation(originalRow(ID(3), 'head-of-finance', 'shell', originalGrant()));
    expect(await rejection(r.control.execute(refund(CFO), r.executor))).toMatchObject({ reason: 'authority_unreadable' });
  });
});

describe('budgets on delegations the original wrote are charged', () => {
  it('a budgeted delegation (as 0.12.2 writes it) is charged, and refused budget_exhausted past its limit', async () => {
    const r = await rig(document());
    await r.store.putDelegation(originalRow(ID(1), 'head-of-finance', 'api', originalGrant({ budgets: [{ limit: 1, metric: 'count', window: 86400 }] })));
    expect(await r.control.execute(refund(), r.executor)).toBe('ok');
    expect(r.lastReceipt()).toMatchObject({
      result: 'committed',
      authority_grant_id: ID(1),
      budget_charges: [{ grant_id: ID(1), metric: 'count', amount: 1 }],
    });
    const again = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p2', amount: 700 }, principal: HELPER, environment: 'production' });
    const err = await rejection(r.control.execute(again, r.executor));
    expect(err).toBeInstanceOf(ActionDenied);
    expect(err['reason']).toBe('budget_exhausted');
    expect(r.calls).toBe(1);
    expect(r.data('ACTION_DENIED').at(-1)).toEqual({ reason: 'budget_exhausted', grant_id: ID(1), metric: 'count', window: 86400 });
    expect(r.lastReceipt()).toMatchObject({ result: 'denied', decision: 'deny', decision_reason: 'budget_exhausted', effect_key: null, budget_charges: [] });
    expect(await r.store.getEffect('refund:p2')).toBeNull();
  });

  it('a budget anywhere above the deciding grant is charged too: a plain hop row under a budgeted root', async () => {
    const r = await rig(document('      budgets: [{metric: count, limit: 1, window: P1D}]\n'));
    // Contained on budgets, as 0.12.2 requires of a child.
    await r.store.putDelegation(originalRow(ID(1), 'head-of-finance', 'hop', originalGrant({ budgets: [{ limit: 1, metric: 'count', window: 86400 }] })));
    expect(await r.control.execute(refund(), r.executor)).toBe('ok');
    // The root's budget is spent: the root, deciding for its own subject, is refused.
    const mine = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p3', amount: 700 }, principal: CFO, environment: 'production' });
    expect(await rejection(r.control.execute(mine, r.executor))).toMatchObject({ reason: 'budget_exhausted', grantId: 'head-of-finance' });
    expect(r.calls).toBe(1);
  });

  it('observe mode records budget_exhausted as what enforce mode would have refused, charges nothing, and runs', async () => {
    const r = await rig(`mode: observe\n${document()}`);
    await r.store.putDelegation(originalRow(ID(1), 'head-of-finance', 'api', originalGrant({ budgets: [{ limit: 0, metric: 'count', window: 86400 }] })));
    expect(await r.control.execute(refund(), r.executor)).toBe('ok');
    expect(r.lastReceipt()['would_have']).toMatchObject({ blocked_reason: 'budget_exhausted' });
    expect(r.lastReceipt()['budget_charges']).toEqual([{ grant_id: ID(1), metric: 'count', amount: 1 }]);
    expect(await r.store.budgets!().consumptions()).toEqual([]);
  });
});

describe('what this build does not implement fails closed', () => {
  it('a task-bound delegation is refused by the authority walk: authority_task, before the policy is consulted', async () => {
    const r = await rig(document());
    await r.store.putDelegation(originalRow(ID(1), 'head-of-finance', 'hop', originalGrant({ tasks: ['ticket:*'] })));
    const err = await rejection(r.control.execute(refund(), r.executor));
    expect(err).toBeInstanceOf(AuthorityDenied);
    expect(err).toMatchObject({ reason: 'authority_task', grantId: ID(1), delegationId: ID(1) });
    expect(r.data('AUTHORITY_DENIED').at(-1)).toEqual({ reason: 'authority_task', grant_id: ID(1), delegation_id: ID(1), depth: 1 });
    expect(r.types()).not.toContain('POLICY_EVALUATED');
    expect(r.lastReceipt()).toMatchObject({ result: 'denied', decision_reason: 'authority_task' });
    expect(r.calls).toBe(0);
  });

  it('a task-bound grant is one failed candidate, not a veto: another grant covering the call lets it through', async () => {
    // "a-ticket" sorts before "head-of-finance": the lowest clean id would have been the task-bound one.
    const r = await rig(
      document('', '    - id: a-ticket\n      subject: { agent: "cfo-agent" }\n      actions: ["stripe.refund"]\n      tasks: ["ticket:*"]\n'),
    );
    expect(await r.control.execute(refund(CFO), r.executor)).toBe('ok');
    expect(r.lastReceipt()['authority_grant_id']).toBe('head-of-finance');
    // Alone, it is authority_task (outranking a constraint that also fails, as in the original).
    const only = await rig(
      document(
        '',
        '    - id: a-ticket\n      subject: { agent: "clerk" }\n      actions: ["stripe.refund"]\n      tasks: ["ticket:*"]\n      constraints: { amount_lte: 1 }\n',
      ),
    );
    expect(await rejection(only.control.execute(refund({ agent: 'clerk' }), only.executor))).toMatchObject({ reason: 'authority_task', grantId: 'a-ticket' });
  });

  it('a 0.12.2 child that escapes its parent on tasks or budgets is authority_escalation naming the dimension', async () => {
    const cases: [string, string, string][] = [
      ['      tasks: ["ticket:*"]\n', originalGrant(), 'tasks'],
      ['      tasks: ["ticket:*"]\n', originalGrant({ tasks: ['other:*'] }), 'tasks'],
      ['      budgets: [{metric: count, limit: 5, window: P1D}]\n', originalGrant(), 'budgets'],
      ['      budgets: [{metric: count, limit: 5, window: P1D}]\n', originalGrant({ budgets: [{ limit: 5, metric: 'count', window: 3600 }] }), 'budgets'],
      ['      budgets: [{metric: count, limit: 5, window: P1D}]\n', originalGrant({ budgets: [{ limit: 6, metric: 'count', window: 86400 }] }), 'budgets'],
      ['      budgets: [{metric: count, limit: 5, window: P1D}]\n', originalGrant({ budgets: [{ limit: 5, metric: 'amount', window: 86400 }] }), 'budgets'],
    ];
    for (const [root, child, dimension] of cases) {
      const r = await rig(document(root));
      await r.store.putDelegation(originalRow(ID(1), 'head-of-finance', 'api', child));
      expect(await rejection(r.control.execute(refund(), r.executor)), child).toMatchObject({ reason: 'authority_escalation' });
      expect(r.data('AUTHORITY_DENIED').at(-1), child).toMatchObject({ reason: 'authority_escalation', dimension });
    }
  });

  it('a delegation the original opened beneath a break-glass envelope authorises within max_ttl; beyond it, or under an undeclared envelope, it does not', async () => {
    const r = await rig(document());
    // Opened 10:00:00.123456 (Python isoformat), expiring two hours later: inside max_ttl PT4H.
    await r.store.putDelegation(originalRow(ID(1), 'incident', 'break-glass', originalGrant({ delegable: true, expires_at: '2026-09-03T12:00:00+00:00' })));
    expect(await r.control.execute(refund(), r.executor)).toBe('ok');
    expect(r.lastReceipt()['authority_grant_id']).toBe(ID(1));
    expect(r.data('AUTHORITY_RESOLVED').at(-1)).toEqual({ reason: 'authority_grant', grant_id: ID(1), delegation_id: ID(1), depth: 1 });
    // A hop beneath it attenuates and authorises through the envelope root (delegable there by what it is).
    await r.store.putDelegation(
      originalRow(ID(2), ID(1), 'hop', originalGrant({ subject: { agent: 'sub-agent', user: null }, expires_at: '2026-09-03T11:00:00+00:00' }), 2),
    );
    expect(await r.control.execute(refund({ agent: 'sub-agent' }, 'p2'), r.executor)).toBe('ok');
    expect(r.lastReceipt()['authority_grant_id']).toBe(ID(2));
    // Expiring later than max_ttl after it was opened: refused at evaluation, naming max_ttl.
    await r.store.putDelegation(originalRow(ID(3), 'incident', 'break-glass', originalGrant({ subject: { agent: 'late-agent', user: null } })));
    const late = await rejection(r.control.execute(refund({ agent: 'late-agent' }), r.executor));
    expect(late).toMatchObject({ reason: 'authority_escalation', grantId: ID(3) });
    expect(late.message).toContain('max_ttl');
    expect(r.data('AUTHORITY_DENIED').at(-1)).toEqual({
      reason: 'authority_escalation',
      grant_id: ID(3),
      delegation_id: ID(3),
      depth: 1,
      dimension: 'max_ttl',
    });
    // Beneath an envelope this document does not declare: a missing parent, as in the original.
    await r.store.putDelegation(originalRow(ID(4), 'elsewhere', 'break-glass', originalGrant({ subject: { agent: 'third-agent', user: null } })));
    expect(await rejection(r.control.execute(refund({ agent: 'third-agent' }), r.executor))).toMatchObject({ reason: 'authority_escalation' });
    expect(r.data('AUTHORITY_DENIED').at(-1)).toMatchObject({ grant_id: ID(4), missing_parent_id: 'elsewhere' });
    expect(r.calls).toBe(2);
    // After its expiry the break-glass row and the hop beneath it are refused.
    r.advance(2 * 3600_000);
    expect(await rejection(r.control.execute(refund(HELPER, 'p5'), r.executor))).toMatchObject({ reason: 'authority_expired' });
  });
});

describe('what this build creates', () => {
  it('never a delegation beneath an envelope (unknown_parent); beneath a grant the original opened under one, as beneath any delegation', async () => {
    const r = await rig(document());
    const child = { subject: HELPER, actions: ['stripe.refund'], expiresAt: '2026-09-03T12:00:00+00:00' };
    const err = await rejection(r.control.delegate('incident', child, { by: { agent: 'oncall' } }));
    expect(err).toBeInstanceOf(AuthorityEscalation);
    expect(err).toMatchObject({ reason: 'unknown_parent' });
    expect(err.message).toContain('break-glass envelope');
    expect(r.data('DELEGATION_REJECTED').at(-1)).toEqual({ reason: 'unknown_parent', parent_id: 'incident' });
    await r.store.putDelegation(
      originalRow(
        ID(0xa1),
        'incident',
        'break-glass',
        originalGrant({ subject: { agent: 'oncall', user: null }, delegable: true, actions: ['stripe.refund'], expires_at: '2026-09-03T13:00:00+00:00' }),
      ),
    );
    const beneath = await r.control.delegate(ID(0xa1), child, { by: { agent: 'oncall' } });
    expect([beneath.parentId, beneath.depth, beneath.createdVia]).toEqual([ID(0xa1), 2, 'api']);
    expect((await r.store.delegations()).map((d) => d.delegationId)).toEqual([ID(0xa1), beneath.delegationId]);
  });

  it('children keep the parent tasks and budgets (containment), and write tasks and budgets null when they have none, as the original does', async () => {
    const tasked = await rig(document('      tasks: ["ticket:*"]\n'));
    const base = { subject: HELPER, actions: ['stripe.refund'], expiresAt: '2026-12-01T00:00:00+00:00' };
    expect(await rejection(tasked.control.delegate('head-of-finance', base, { by: CFO }))).toMatchObject({ reason: 'containment', dimension: 'tasks' });
    expect(await rejection(tasked.control.delegate('head-of-finance', { ...base, tasks: ['other:1'] }, { by: CFO }))).toMatchObject({
      reason: 'containment',
      dimension: 'tasks',
    });
    const narrower = await tasked.control.delegate('head-of-finance', { ...base, tasks: ['ticket:42'] }, { by: CFO });
    expect(narrower.grant.tasks).toEqual(['ticket:42']);
    expect(await rejection(tasked.control.execute(refund(), tasked.executor))).toMatchObject({ reason: 'authority_task' });

    const budgeted = await rig(document('      budgets: [{metric: amount, limit: 100000, window: P1D}]\n'));
    for (const budgets of [null, [{ metric: 'amount', limit: 100001, window: 86400 }], [{ metric: 'amount', limit: 100000, window: 'PT1H' }]]) {
      expect(await rejection(budgeted.control.delegate('head-of-finance', { ...base, budgets }, { by: CFO })), JSON.stringify(budgets)).toMatchObject({
        reason: 'containment',
        dimension: 'budgets',
      });
    }
    const within = await budgeted.control.delegate(
      'head-of-finance',
      {
        ...base,
        budgets: [
          { metric: 'amount', limit: 50000, window: 'P7D' },
          { metric: 'count', limit: 3, window: 'PT1H' },
        ],
      },
      { by: CFO },
    );
    expect(within.grant.budgets).toHaveLength(2);
    expect(await budgeted.control.execute(refund(), budgeted.executor)).toBe('ok');
    expect(budgeted.lastReceipt()['budget_charges']).toHaveLength(3);

    // A plain child: the row is as this build wrote it before, which 0.12.2 reads as null dimensions.
    const plain = await rig(document());
    const d = await plain.control.delegate('head-of-finance', base, { by: CFO });
    const row = (await plain.store.getDelegation(d.delegationId))!;
    expect(row.createdVia).toBe('api');
    expect(JSON.parse(row.grantJson)).toMatchObject({ tasks: null, budgets: null });
  });
});
