/**
 * One store with the current original (ctrlrun 0.12.2, schema 0008; spec 05). The two fixtures
 * were made by the original's own migration code (../fixtures/original/README.md): one new, one
 * written by this project at 0004 and then migrated by the original. Each is opened (a copy) on a
 * real better-sqlite3 file, an action runs once, the chain verifies, and `schema_version` lists
 * exactly the original's eight ids. Then the invariants a second writer must keep on such a
 * store (spec 05 §4.5, §5.1): a request needing several verified approvers is not granted by one
 * answer, a request filed against a precondition fingerprint is not used without the recheck, a
 * row with an impossible threshold is unreadable, and a move to `failed` releases the original's
 * budget charges in its own transaction (and nothing else does).
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import {
  ApprovalMismatch,
  ApprovalRequired,
  Control,
  createAction,
  DuplicateEffect,
  loadPolicy,
  NotExecuted,
  verifyChain,
  type Clock,
  type StateStore,
} from '@ctrlrun/kernel';
import { MIGRATION_IDS } from '@ctrlrun/kernel/store';
import { openStore } from '@ctrlrun/store-node';
import { CLI, NODE_TS, ROOT } from '../mcp/support.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'original');
const EMPTY = 'orig-migrate-empty-0008.db';
const TS_THEN_ORIGINAL = 'ts-written-then-orig-migrated-0008.db';

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-original-0008-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** A fresh copy of a fixture (a test never writes to the fixture itself). */
function copyOf(name: string): string {
  const path = join(dir, `${++n}-${name}`);
  copyFileSync(join(FIXTURES, name), path);
  return path;
}

const POLICY = loadPolicy(`
schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
`);

const quiet = { warn: () => {} };

function control(store: StateStore, clock?: Clock): Control {
  return new Control({ policy: POLICY, store, logger: quiet, ...(clock ? { clock } : {}) });
}

function refund(paymentId: string, amount: number) {
  return createAction({
    name: 'stripe.refund',
    arguments: { payment_id: paymentId, amount },
    principal: { agent: 'ts-agent', user: 'ana@example.com' },
    environment: 'production',
  });
}

function sqlite(path: string) {
  return new Database(path);
}

type Row = Record<string, unknown>;

/** The schema as a comparable value: each table's columns (name, type, not null, key) and each index's columns. */
function schemaOf(path: string): Row {
  const db = new Database(path, { readonly: true });
  try {
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as Row[]).map((r) =>
      String(r['name']),
    );
    const out: Row = {};
    for (const t of tables) {
      out[t] = {
        columns: db.prepare(`SELECT name, type, "notnull", pk FROM pragma_table_info(?)`).all(t),
        indexes: (db.prepare(`SELECT name, "unique", origin FROM pragma_index_list(?) ORDER BY name`).all(t) as Row[]).map((i) => ({
          // An automatic index's name is SQLite's (sqlite_autoindex_<table>_<n>); what it covers is what counts.
          unique: i['unique'],
          origin: i['origin'],
          name: String(i['name']).startsWith('sqlite_autoindex_') ? 'auto' : i['name'],
          columns: (db.prepare('SELECT name FROM pragma_index_info(?)').all(String(i['name'])) as Row[]).map((c) => c['name']),
        })),
      };
    }
    return out;
  } finally {
    db.close();
  }
}

describe('a store the original 0.12.2 migrated to 0008 opens here, and what we write it reads', () => {
  for (const fixture of [EMPTY, TS_THEN_ORIGINAL]) {
    it(`test_T414_${fixture}: opens untouched (the eight ids, no migration applied), one action runs once, the chain verifies`, async () => {
      const path = copyOf(fixture);
      const before = sqlite(path).prepare('SELECT migration_id, applied_at, ctrlrun_version FROM schema_version ORDER BY migration_id').all();
      expect((before as Row[]).map((r) => r['migration_id'])).toEqual([...MIGRATION_IDS]);
      const receiptsBefore = fixture === EMPTY ? 0 : 8;

      const store = await openStore(path);
      try {
        expect((await store.appliedMigrations()).map((m) => m.migrationId)).toEqual([...MIGRATION_IDS]);
        const c = control(store);
        let runs = 0;
        const result = await c.execute(refund('orig_p1', 700), () => ++runs);
        expect(result).toBe(1);
        // Once: the same call again meets the committed effect.
        await expect(c.execute(refund('orig_p1', 700), () => ++runs)).rejects.toBeInstanceOf(DuplicateEffect);
        expect(runs).toBe(1);
        if (fixture === TS_THEN_ORIGINAL) {
          // What this project wrote before the original migrated the file is still read: the committed refund and the ambiguous one.
          await expect(c.execute(refund('ts_a1', 500), () => ++runs)).rejects.toBeInstanceOf(DuplicateEffect);
          expect((await store.getEffect('refund:ts_amb'))?.state).toBe('ambiguous');
          expect(runs).toBe(1);
        }
        const report = verifyChain(await store.receipts(), await store.chainHead());
        expect(report.breaks).toEqual([]);
        expect(report.ok).toBe(true);
        expect(report.verified).toBe(receiptsBefore + (fixture === TS_THEN_ORIGINAL ? 3 : 2));
      } finally {
        await store.close();
      }
      // Reopening applied nothing: schema_version is exactly as the original left it.
      expect(sqlite(path).prepare('SELECT migration_id, applied_at, ctrlrun_version FROM schema_version ORDER BY migration_id').all()).toEqual(before);
    });
  }

  it('test_T538_a_store_we_create_is_the_schema_the_original_creates: every table, column, type, key and index of 0001–0008', async () => {
    const ours = join(dir, 'ours-new.db');
    await (await openStore(ours)).close();
    expect(schemaOf(ours)).toEqual(schemaOf(join(FIXTURES, EMPTY)));
    // And recorded as the original records it: the eight ids, in order — what it calls up to date.
    const ids = (sqlite(ours).prepare('SELECT migration_id FROM schema_version ORDER BY rowid').all() as Row[]).map((r) => r['migration_id']);
    expect(ids).toEqual([...MIGRATION_IDS]);
  });

  it('test_T538b_a_store_of_ours_at_0004_migrates_forward_on_open_and_keeps_its_chain', async () => {
    // The 0008 fixture's tables and rows as this project wrote them at 0004: drop what 0005–0008 added.
    const path = copyOf(TS_THEN_ORIGINAL);
    const db = sqlite(path);
    const receipts = db.prepare('SELECT receipt_id, json, hash FROM receipts ORDER BY seq').all();
    for (const t of ['budget_ledger', 'anchors', 'prune_checkpoint', 'holds']) db.exec(`DROP TABLE ${t}`);
    for (const c of ['precondition_fingerprint', 'approvers', 'required_roles', 'approvals_required']) db.exec(`ALTER TABLE approvals DROP COLUMN ${c}`);
    db.exec("DELETE FROM schema_version WHERE migration_id >= '0005'");
    db.close();
    const store = await openStore(path);
    try {
      const applied = await store.appliedMigrations();
      expect(applied.map((m) => m.migrationId)).toEqual([...MIGRATION_IDS]);
      expect(applied.slice(4).every((m) => m.ctrlrunVersion.startsWith('ctrlrun-ts'))).toBe(true);
      const report = verifyChain(await store.receipts(), await store.chainHead());
      expect(report).toMatchObject({ ok: true, verified: 8 });
    } finally {
      await store.close();
    }
    expect(sqlite(path).prepare('SELECT receipt_id, json, hash FROM receipts ORDER BY seq').all()).toEqual(receipts);
    expect(schemaOf(path)).toEqual(schemaOf(join(FIXTURES, TS_THEN_ORIGINAL)));
  });
});

describe('the original’s invariants, kept by every write of ours on a shared store', () => {
  /** A store on a copy of the empty 0008 fixture, a Control on it, and one pending request for a 200,000 refund. */
  async function pendingRequest(paymentId: string) {
    const path = copyOf(EMPTY);
    const store = await openStore(path);
    const c = control(store);
    const action = refund(paymentId, 200_000);
    const err = (await c.execute(action, () => 'ran').catch((e: unknown) => e)) as ApprovalRequired;
    expect(err).toBeInstanceOf(ApprovalRequired);
    return { path, store, c, action, id: err.requestId };
  }

  it('a request is filed with approvals_required = 1 (the original reads NULL as 1 but writes the integer)', async () => {
    const { path, store, id } = await pendingRequest('p_req');
    await store.close();
    expect(
      sqlite(path).prepare('SELECT approvals_required, precondition_fingerprint, approvers, required_roles FROM approvals WHERE approval_id = ?').get(id),
    ).toEqual({
      approvals_required: 1,
      precondition_fingerprint: null,
      approvers: null,
      required_roles: null,
    });
  });

  it('the approvers column is written in the original’s text, byte for byte (spec 05 §4.1), and read back', async () => {
    const { path, store, id } = await pendingRequest('p_text');
    sqlite(path).prepare('UPDATE approvals SET approvals_required = 2 WHERE approval_id = ?').run(id);
    try {
      // A name outside ASCII, a role id, no issuer: Python's json.dumps(list, sort_keys=True) text.
      await store.grantApproval(id, 'zoë', { agent: 'inbox', user: 'zoë 😀', issuer: null, entitled: ['refund-limit'] }).catch((e: unknown) => e);
      const text = sqlite(path).prepare('SELECT approvers FROM approvals WHERE approval_id = ?').get(id) as { approvers: string };
      const at = (await store.getApproval(id))!.approvers![0]!.grantedAt;
      expect(at, 'Python isoformat: +00:00, six fraction digits when non-zero').toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?\+00:00$/);
      expect(text.approvers).toBe(
        `[{"agent": "inbox", "entitled": ["refund-limit"], "granted_at": "${at}", "issuer": null, "user": "zo\\u00eb \\ud83d\\ude00"}]`,
      );
      // A row written that way by the original counts toward the next verified yes here.
      await store.grantApproval(id, 'ana', { agent: 'inbox', user: 'ana', issuer: 'https://idp.example', entitled: [] });
      expect((await store.getApproval(id))?.approvers?.map((a) => a.user)).toEqual(['zoë 😀', 'ana']);
      // A corrupt value makes the approval unusable, as in the original.
      sqlite(path).prepare('UPDATE approvals SET approvers = \'{"agent": 1}\' WHERE approval_id = ?').run(id);
      await expect(store.getApproval(id)).rejects.toThrow(/approvers is not a JSON array/);
    } finally {
      await store.close();
    }
  });

  it('test_T310_a_request_needing_two_verified_approvers_is_not_granted_by_one_answer_here: it stays pending, and the call does not run', async () => {
    const { path, store, c, action, id } = await pendingRequest('p_m_of_n');
    // As the original pins it on a request it files with approvals_required: 2.
    sqlite(path).prepare('UPDATE approvals SET approvals_required = 2 WHERE approval_id = ?').run(id);
    try {
      const err = (await c.grantApproval(id, { approver: 'bob' }).catch((e: unknown) => e)) as ApprovalMismatch;
      expect(err).toBeInstanceOf(ApprovalMismatch);
      expect(err.reason).toBe('pending');
      expect(err.message).toMatch(/needs 2 verified approvers/);
      expect((await store.getApproval(id))?.status).toBe('pending');
      let runs = 0;
      await expect(c.execute(action, () => ++runs, { approvalId: id })).rejects.toBeInstanceOf(ApprovalMismatch);
      expect(runs).toBe(0);
      // A denial still denies (one no is enough, as in the original).
      await c.denyApproval(id, { approver: 'bob' });
      expect((await store.getApproval(id))?.status).toBe('denied');
    } finally {
      await store.close();
    }
  });

  it('test_T324_an_impossible_threshold_makes_the_row_unreadable, never a one-answer grant', async () => {
    for (const bad of [0, -1, 1.5, "'two'"]) {
      const { path, store, c, id } = await pendingRequest(`p_bad_${String(bad).replace(/\W/g, '')}`);
      sqlite(path).exec(`UPDATE approvals SET approvals_required = ${bad} WHERE approval_id = '${id}'`);
      try {
        await expect(c.grantApproval(id, { approver: 'bob' }), String(bad)).rejects.toThrow(/approvals_required is not an integer of at least 1/);
        expect(sqlite(path).prepare('SELECT status FROM approvals WHERE approval_id = ?').get(id)).toEqual({ status: 'pending' });
      } finally {
        await store.close();
      }
    }
  });

  it('test_T255_an_approval_filed_against_a_precondition_fingerprint_is_never_used_without_the_recheck: precondition_missing, left granted, nothing ran', async () => {
    const { path, store, c, action, id } = await pendingRequest('p_pre');
    sqlite(path)
      .prepare('UPDATE approvals SET precondition_fingerprint = ? WHERE approval_id = ?')
      .run(`sha256:${'ab'.repeat(32)}`, id);
    try {
      await c.grantApproval(id, { approver: 'bob' });
      let runs = 0;
      const err = (await c.execute(action, () => ++runs, { approvalId: id }).catch((e: unknown) => e)) as ApprovalMismatch;
      expect(err).toBeInstanceOf(ApprovalMismatch);
      expect(err.reason).toBe('precondition_missing');
      expect(runs).toBe(0);
      expect((await store.getApproval(id))?.status).toBe('granted');
      expect(await store.getEffect('refund:p_pre')).toBeNull();
      const invalidated = (await store.events()).filter((e) => e.type === 'APPROVAL_INVALIDATED');
      expect(invalidated.map((e) => e.data['reason'])).toEqual(['precondition_missing']);
    } finally {
      await store.close();
    }
  });

  /** Charges as the original writes them, for `key` under two grants, one already released. */
  function charge(path: string, key: string, other = true): void {
    const db = sqlite(path);
    const insert = db.prepare(
      'INSERT INTO budget_ledger(grant_id, metric, amount, effect_key, attempt, consumed_at, released_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    insert.run('g-refunds', 'amount', 700, key, 1, '2026-12-01T10:00:00.123456+00:00', null);
    insert.run('g-daily', 'count', 1, key, 1, '2026-12-01T10:00:00.123456+00:00', null);
    insert.run('g-old', 'count', 1, key, 0, '2026-11-30T10:00:00+00:00', '2026-11-30T10:00:01+00:00');
    if (other) insert.run('g-refunds', 'amount', 900, 'refund:someone-else', 1, '2026-12-01T10:00:00+00:00', null);
    db.close();
  }
  const ledger = (path: string) =>
    sqlite(path).prepare('SELECT grant_id, effect_key, released_at FROM budget_ledger ORDER BY id').all() as {
      grant_id: string;
      effect_key: string;
      released_at: string | null;
    }[];

  it('test_T416_fail_releases: a failed attempt releases its charges in the same transaction, as +00:00 text; other keys and released rows untouched', async () => {
    const path = copyOf(EMPTY);
    charge(path, 'refund:p_fail');
    const at = new Date('2026-12-04T09:30:00.250Z');
    const store = await openStore(path, { clock: () => at });
    try {
      const c = control(store, () => at);
      await expect(
        c.execute(refund('p_fail', 700), () => {
          throw new NotExecuted('card declined');
        }),
      ).rejects.toThrow(/card declined/);
      expect((await store.getEffect('refund:p_fail'))?.state).toBe('failed');
    } finally {
      await store.close();
    }
    expect(ledger(path)).toEqual([
      { grant_id: 'g-refunds', effect_key: 'refund:p_fail', released_at: '2026-12-04T09:30:00.250000+00:00' },
      { grant_id: 'g-daily', effect_key: 'refund:p_fail', released_at: '2026-12-04T09:30:00.250000+00:00' },
      { grant_id: 'g-old', effect_key: 'refund:p_fail', released_at: '2026-11-30T10:00:01+00:00' },
      { grant_id: 'g-refunds', effect_key: 'refund:someone-else', released_at: null },
    ]);
  });

  it('test_T415_commit_holds and test_T417_ambiguity_holds; test_T419_a_human_resolving_FAILED_releases, test_T420_resolving_COMMITTED_holds', async () => {
    const path = copyOf(EMPTY);
    for (const k of ['refund:p_ok', 'refund:p_amb', 'refund:p_amb2']) charge(path, k, k === 'refund:p_ok');
    const store = await openStore(path);
    try {
      const c = control(store);
      await c.execute(refund('p_ok', 700), () => 'ok');
      for (const p of ['p_amb', 'p_amb2'])
        await expect(
          c.execute(refund(p, 700), () => {
            throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
          }),
        ).rejects.toThrow();
      expect((await store.getEffect('refund:p_amb'))?.state).toBe('ambiguous');
      const held = () => ledger(path).filter((r) => r.grant_id !== 'g-old' && r.effect_key !== 'refund:someone-else' && r.released_at !== null);
      expect(held()).toEqual([]);
      await c.resolveEffect('refund:p_amb2', 'committed', { by: 'ops@example.com' });
      expect(held()).toEqual([]);
      await c.resolveEffect('refund:p_amb', 'failed', { by: 'ops@example.com' });
      expect(held().map((r) => r.effect_key)).toEqual(['refund:p_amb', 'refund:p_amb']);
    } finally {
      await store.close();
    }
  });
});

describe('a store the original pruned: the chain is verified from its checkpoint, by the library and the CLI', () => {
  it('test_T540_a_prune_leaves_the_chain_verifiable_across_the_gap (receipts 1–3 deleted as the original prunes them)', async () => {
    const path = copyOf(TS_THEN_ORIGINAL);
    const db = sqlite(path);
    const third = db.prepare('SELECT hash FROM receipts WHERE seq = 3').get() as { hash: string };
    db.prepare('INSERT INTO prune_checkpoint(id, seq, hash, schema, at) VALUES (1, 3, ?, ?, ?)').run(
      third.hash,
      'ctrlrun.receipt/v7',
      '2026-12-04T20:00:00+00:00',
    );
    db.exec('DELETE FROM receipts WHERE seq IS NOT NULL AND seq <= 3');
    db.close();
    const store = await openStore(path);
    try {
      const checkpoint = await store.pruneCheckpoint();
      expect(checkpoint).toEqual({ seq: 3, hash: third.hash });
      expect(verifyChain(await store.receipts(), await store.chainHead(), { checkpoint })).toMatchObject({ ok: true, verified: 5, breaks: [] });
      // And an action written after the prune extends it.
      await control(store).execute(refund('after_prune', 100), () => 'ok');
      expect(verifyChain(await store.receipts(), await store.chainHead(), { checkpoint })).toMatchObject({ ok: true, verified: 6 });
      // Without the checkpoint the start looks missing: what every store the original pruned reported before.
      expect(verifyChain(await store.receipts(), await store.chainHead()).breaks.map((b) => b.name)).toContain('missing');
    } finally {
      await store.close();
    }
    const out = execFileSync(process.execPath, [...NODE_TS, CLI, 'receipts', '--verify-chain', '--store-url', `sqlite://${path}`], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(out).toContain('chain: 6 of 6 receipts verified');
    expect(out).toContain('receipts up to seq 3 were pruned; the chain is verified from its checkpoint');
    expect(out).toContain('the chain is intact');
  });

  it('an edited column is shown beside the verdict, as a finding, and the CLI exits 0 (the original calls the chain intact)', async () => {
    const path = copyOf(TS_THEN_ORIGINAL);
    sqlite(path).exec("UPDATE receipts SET result = 'failed' WHERE seq = 2");
    const out = execFileSync(process.execPath, [...NODE_TS, CLI, 'receipts', '--verify-chain', '--store-url', `sqlite://${path}`, '--json'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    const report = JSON.parse(out) as { ok: boolean; breaks: unknown[]; column_findings: { name: string; seq: number }[] };
    expect(report.ok).toBe(true);
    expect(report.breaks).toEqual([]);
    expect(report.column_findings.map((f) => [f.name, f.seq])).toEqual([['column_mismatch', 2]]);
  });
});
