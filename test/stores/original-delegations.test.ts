/**
 * Delegations the original 0.12.2 wrote, on a real better-sqlite3 file (a copy of a store the
 * original's own migration code made; spec 05 §6.2, §6.1, §5.1). The rows are INSERTed exactly as
 * 0.12.2 writes them: `created_via` break-glass and hop, `grant_json` compact with sorted keys and
 * always "tasks" and "budgets" (window in seconds), times in Python's isoformat; its
 * DELEGATION_CREATED events likewise. Through a Control with an `authority:` section: a plain row
 * authorises as before, a budgeted one is charged in the original's ledger, a
 * task-bound one authority_task; one opened beneath a break-glass envelope authorises while its
 * expiry is within the envelope's max_ttl of its creation, and one that outlives it is
 * authority_escalation naming max_ttl; one malformed row still makes every action
 * authority_unreadable. The chain verifies.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { AuthorityDenied, Control, createAction, eventLine, loadPolicy, verifyChain, type StateStore } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'original', 'orig-migrate-empty-0008.db');
const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-original-delegations-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NOW = new Date('2026-09-03T10:12:01.000Z');
const ID = (n: number) => `dlg_${n.toString(16).padStart(32, '0')}`;

const POLICY = loadPolicy(`schema: ctrlrun.policy/v7
authority:
  grants:
    - id: head-of-finance
      subject: { agent: "cfo-agent" }
      actions: ["stripe.refund"]
      delegable: true
      expires_at: "2027-01-01T00:00:00+00:00"
  break_glass:
    incident:
      subject: { agent: "*" }
      actions: ["stripe.**"]
      max_ttl: PT4H
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);

/** A child's grant_json exactly as 0.12.2 writes it (json.dumps, sort_keys, compact): every key present. */
const grantJson = (agent: string, tasks: string, budgets: string, expires = '2026-12-01T00:00:00+00:00') =>
  `{"actions":["stripe.refund"],"budgets":${budgets},"constraints":{},"delegable":false,"environments":null,"expires_at":"${expires}","resources":null,"subject":{"agent":"${agent}","user":null},"tasks":${tasks}}`;

const ROWS: [string, string, string, string, string | null][] = [
  // [delegation_id, parent_id, created_via, grant_json, created_by_user]
  [ID(1), 'head-of-finance', 'hop', grantJson('hop-agent', 'null', 'null'), null],
  [ID(2), 'head-of-finance', 'hop', grantJson('budget-agent', 'null', '[{"limit":5,"metric":"count","window":86400}]'), null],
  [ID(3), 'head-of-finance', 'api', grantJson('task-agent', '["ticket:*"]', 'null'), null],
  [ID(4), 'incident', 'break-glass', grantJson('bg-agent', 'null', '[{"limit":5,"metric":"count","window":86400}]'), 'oncall@example.com'],
  // Opened at 10:00:00.123456 for two hours: inside the envelope's max_ttl (PT4H).
  [ID(5), 'incident', 'break-glass', grantJson('bg-live-agent', 'null', 'null', '2026-09-03T12:00:00+00:00'), 'oncall@example.com'],
];

/** A copy of the original's 0008 store with its delegation rows and DELEGATION_CREATED events, as 0.12.2 writes them. */
function storeWithOriginalRows(): string {
  const path = join(dir, `store-${Math.random().toString(16).slice(2)}.db`);
  copyFileSync(FIXTURE, path);
  const db = new Database(path);
  try {
    const row = db.prepare(
      'INSERT INTO delegations (delegation_id, parent_id, depth, grant_json, created_by_agent, created_by_user, created_via, created_at, revoked_at, revoked_by) VALUES (?, ?, 1, ?, ?, ?, ?, ?, NULL, NULL)',
    );
    const event = db.prepare('INSERT INTO events (ts, type, action_id, effect_key, approval_id, data_json) VALUES (?, ?, ?, NULL, NULL, ?)');
    for (const [id, parent, via, grant, user] of ROWS) {
      row.run(id, parent, grant, 'cfo-agent', user, via, '2026-09-03T10:00:00.123456+00:00');
      const data: Record<string, unknown> = {
        delegation_id: id,
        parent_id: parent,
        depth: 1,
        created_by_agent: 'cfo-agent',
        created_by_user: user,
        created_via: via,
      };
      if (via === 'break-glass') data['reason'] = 'INC-7: payments outage';
      // A hop is created inside an action, and its event names that action.
      const actionId = via === 'hop' ? 'act_0123456789abcdef0123456789abcdef' : null;
      event.run('2026-09-03T10:00:00.123456+00:00', 'DELEGATION_CREATED', actionId, JSON.stringify(data));
    }
  } finally {
    db.close();
  }
  return path;
}

function refund(agent: string, paymentId: string) {
  return createAction({ name: 'stripe.refund', arguments: { payment_id: paymentId, amount: 700 }, principal: { agent }, environment: 'production' });
}

async function outcome(control: Control, agent: string, paymentId: string, runs: { n: number }): Promise<unknown> {
  return control
    .execute(refund(agent, paymentId), () => {
      runs.n += 1;
      return 'refunded';
    })
    .catch((e: unknown) => e);
}

async function lastReceipt(store: StateStore): Promise<Record<string, unknown>> {
  return JSON.parse((await store.receipts()).at(-1)!.json ?? 'null') as Record<string, unknown>;
}

describe('delegations the original 0.12.2 wrote, on a better-sqlite3 store at 0008', () => {
  it('are read: plain authorises, budgeted is charged, task-bound authority_task, beneath an envelope within max_ttl authorises and beyond it authority_escalation', async () => {
    const path = storeWithOriginalRows();
    const store = await openStore(path);
    try {
      const control = new Control({ policy: POLICY, store, clock: () => NOW, logger: { warn: () => {} }, environment: 'production' });
      const runs = { n: 0 };

      expect(await outcome(control, 'hop-agent', 'p1', runs)).toBe('refunded');
      expect(await lastReceipt(store)).toMatchObject({ result: 'committed', authority_grant_id: ID(1) });

      // Budgeted: charged in the reservation, the row in the original's ledger.
      expect(await outcome(control, 'budget-agent', 'p2', runs)).toBe('refunded');
      expect(await lastReceipt(store)).toMatchObject({
        result: 'committed',
        authority_grant_id: ID(2),
        budget_charges: [{ grant_id: ID(2), metric: 'count', amount: 1 }],
      });
      expect((await store.budgets!().consumptions({ effectKey: 'refund:p2' })).map((c) => [c.grantId, c.metric, c.amount, c.attempt])).toEqual([
        [ID(2), 'count', 1n, 1],
      ]);

      const task = await outcome(control, 'task-agent', 'p3', runs);
      expect(task).toBeInstanceOf(AuthorityDenied);
      expect(task).toMatchObject({ reason: 'authority_task', grantId: ID(3) });
      expect(await lastReceipt(store)).toMatchObject({ result: 'denied', decision_reason: 'authority_task' });

      // Expiring months after it was opened: beyond the envelope's max_ttl, refused at evaluation.
      const glass = await outcome(control, 'bg-agent', 'p4', runs);
      expect(glass).toMatchObject({ reason: 'authority_escalation', grantId: ID(4) });
      const denied = (await store.events()).filter((e) => e.type === 'AUTHORITY_DENIED').at(-1)!;
      expect(denied.data).toMatchObject({ reason: 'authority_escalation', delegation_id: ID(4), dimension: 'max_ttl' });

      // Within it: the action runs, and the receipt names the break-glass grant.
      expect(await outcome(control, 'bg-live-agent', 'p5', runs)).toBe('refunded');
      expect(await lastReceipt(store)).toMatchObject({ result: 'committed', authority_grant_id: ID(5) });

      expect(runs.n).toBe(3);
      const report = verifyChain(await store.receipts(), await store.chainHead());
      expect([report.ok, report.verified, report.breaks]).toEqual([true, 5, []]);

      // The original's DELEGATION_CREATED events (break-glass with its reason, hop with its action) read as any other.
      const created = (await store.events()).filter((e) => e.type === 'DELEGATION_CREATED');
      expect(created.map((e) => [e.data['created_via'], e.actionId])).toEqual([
        ['hop', 'act_0123456789abcdef0123456789abcdef'],
        ['hop', 'act_0123456789abcdef0123456789abcdef'],
        ['api', null],
        ['break-glass', null],
        ['break-glass', null],
      ]);
      expect(created[3]!.data['reason']).toBe('INC-7: payments outage');
      for (const e of created) expect(JSON.parse(eventLine(e))).toMatchObject({ type: 'DELEGATION_CREATED' });
    } finally {
      await store.close();
    }
  });

  it('one malformed row among them still makes every action authority_unreadable', async () => {
    const path = storeWithOriginalRows();
    const db = new Database(path);
    // A budget with a fourth key: 0.12.2 refuses it on read (its budget keys are closed) and so does this build.
    db.prepare(
      "INSERT INTO delegations (delegation_id, parent_id, depth, grant_json, created_by_agent, created_by_user, created_via, created_at) VALUES (?, 'head-of-finance', 1, ?, 'cfo-agent', NULL, 'hop', '2026-09-03T10:00:00+00:00')",
    ).run(ID(9), grantJson('other-agent', 'null', '[{"currency":"EUR","limit":5,"metric":"amount","window":86400}]'));
    db.close();
    const store = await openStore(path);
    try {
      const control = new Control({ policy: POLICY, store, clock: () => NOW, logger: { warn: () => {} }, environment: 'production' });
      const runs = { n: 0 };
      for (const agent of ['hop-agent', 'cfo-agent']) {
        expect(await outcome(control, agent, `q-${agent}`, runs)).toMatchObject({ reason: 'authority_unreadable', delegationId: ID(9) });
      }
      expect(runs.n).toBe(0);
      expect(await lastReceipt(store)).toMatchObject({ result: 'denied', decision_reason: 'authority_unreadable' });
    } finally {
      await store.close();
    }
  });
});
