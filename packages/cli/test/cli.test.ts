// The ctrlrun commands, run in-process through main(argv, io) against seeded SQLite stores.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import BetterSqlite3 from 'better-sqlite3';
import { createAction, EXAMPLE_POLICY_YAML } from '@ctrlrun/kernel';
import { sqliteDialect } from '@ctrlrun/kernel/store';
import { COMMANDS, VERSION } from '@ctrlrun/cli';
import { openStore } from '@ctrlrun/store-node';
import { exampleControl, run, seed, storeBytes, tempDir } from './support.js';
import { scaled } from '../../../test/support/load.js';

const ONE_LINE = /^Error: [^\n]+\n$/;

/** The events the state directory's JSONL sink received (the sink a Control from the policy writes to). */
function sinkEvents(dir: string): Record<string, unknown>[] {
  const file = join(dir, '.ctrlrun', 'events.jsonl');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .trimEnd()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('the command line', () => {
  it('prints the version of the package', async () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(VERSION).toBe(pkg.version);
    expect(await run(['--version'], { cwd: tempDir() })).toEqual({ code: 0, stdout: `${pkg.version}\n`, stderr: '' });
  });

  it('has --help on every command, exit 0, naming every option', async () => {
    const cwd = tempDir();
    for (const cmd of COMMANDS) {
      const r = await run([cmd.name, '--help'], { cwd });
      expect(r.code, cmd.name).toBe(0);
      expect(r.stdout).toContain(`usage: ctrlrun ${cmd.name}`);
      for (const option of Object.keys(cmd.options)) expect(r.stdout, `${cmd.name} --${option}`).toContain(`--${option}`);
    }
    const all = await run(['--help'], { cwd });
    expect(all.code).toBe(0);
    for (const cmd of COMMANDS) expect(all.stdout).toContain(`  ${cmd.name}`);
  });

  it('exits 2 on a bad command line, with usage and a --help hint', async () => {
    const cwd = tempDir();
    for (const argv of [
      ['nope'],
      ['approve'],
      ['approve', 'a', 'b'],
      ['receipts', '--bogus'],
      ['effects', '--state', 'done'],
      ['receipts', '--last', '0'],
      ['receipts', '--last', 'x'],
    ]) {
      const r = await run(argv, { cwd });
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^Error: .+\n/);
      expect(r.stderr).toContain('--help');
    }
    expect((await run([], { cwd })).code).toBe(2);
  });
});

describe('init', () => {
  it('writes the starter policy, identical to the shipped example, and creates .ctrlrun/', async () => {
    const cwd = tempDir();
    const r = await run(['init'], { cwd });
    expect(r.code).toBe(0);
    expect(readFileSync(join(cwd, 'ctrlrun.yaml'), 'utf8')).toBe(EXAMPLE_POLICY_YAML);
    expect(existsSync(join(cwd, '.ctrlrun'))).toBe(true);
    expect(r.stdout).toContain(`wrote ${join(cwd, 'ctrlrun.yaml')}\n`);
    expect(r.stdout).toContain(`created ${join(cwd, '.ctrlrun')}/\n`);
    expect(r.stdout).toContain('protect');
  });

  it(
    'says what to run next, and every command it prints runs as printed in that directory',
    async () => {
      const cwd = tempDir();
      const r = await run(['init'], { cwd });
      const next = r.stdout
        .split('\n')
        .map((l) => /^\s+npx ctrlrun ([^#<]*?)\s*(#.*)?$/.exec(l)?.[1])
        .filter((c): c is string => c !== undefined);
      expect(next, r.stdout).toEqual(['policy check', 'verify', 'demo']);
      for (const command of next) {
        const ran = await run(command.split(' '), { cwd });
        expect(ran.code, `${command}: ${ran.stderr}`).toBe(0);
      }
      // And how a request is answered, once the user's code asks for one.
      expect(r.stdout).toMatch(/^\s+npx ctrlrun inspect <request_id>/m);
      expect(r.stdout).toMatch(/^\s+npx ctrlrun approve <request_id> --as <your name>/m);
    },
    scaled(120_000),
  );

  it('refuses to overwrite an existing policy without --force', async () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'ctrlrun.yaml'), 'mine\n');
    const r = await run(['init'], { cwd });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(ONE_LINE);
    expect(r.stderr).toContain('already exists');
    expect(readFileSync(join(cwd, 'ctrlrun.yaml'), 'utf8')).toBe('mine\n');
    expect((await run(['init', '--force'], { cwd })).code).toBe(0);
    expect(readFileSync(join(cwd, 'ctrlrun.yaml'), 'utf8')).toBe(EXAMPLE_POLICY_YAML);
  });
});

describe('approve and deny', () => {
  it('approve --as NAME grants through the kernel: APPROVAL_GRANTED bound to the hash, in the store and the configured sink', async () => {
    const s = await seed();
    const r = await run(['approve', s.pending[0], '--as', 'dana@example.com'], { cwd: s.dir });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [granted, expires] = r.stdout.trimEnd().split('\n');
    expect(granted).toMatch(new RegExp(`^granted ${s.pending[0]} for sha256:[0-9a-f]{64} by dana@example\\.com$`));
    expect(expires).toMatch(/^expires \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const store = await openStore(s.storePath, { readOnly: true });
    const record = await store.getApproval(s.pending[0]);
    expect(record?.status).toBe('granted');
    expect(record?.approver).toBe('dana@example.com');
    const event = (await store.events()).at(-1)!;
    expect(event.type).toBe('APPROVAL_GRANTED');
    expect(event.approvalId).toBe(s.pending[0]);
    expect(event.data).toEqual({ approver: 'dana@example.com', action_hash: record!.request.actionHash });
    expect(granted).toContain(record!.request.actionHash);
    await store.close();
    // The sink an application composed from the same policy writes to (events.jsonl beside the store) got it too.
    expect(sinkEvents(s.dir).at(-1)).toMatchObject({ type: 'APPROVAL_GRANTED', event_id: event.eventId, approval_id: s.pending[0], data: event.data });
  });

  it('who answers: --as, else $CTRLRUN_APPROVER, else the OS login name; never cli:local', async () => {
    const s = await seed();
    expect((await run(['approve', s.pending[0]], { cwd: s.dir, env: { CTRLRUN_APPROVER: 'ops-on-call' }, userName: () => 'ana' })).stdout).toMatch(
      / by ops-on-call\n/,
    );
    expect((await run(['deny', s.pending[1]], { cwd: s.dir, userName: () => 'ana' })).stdout).toBe(`denied ${s.pending[1]} by ana\n`);
    const flagWins = await run(['resolve', s.ambiguousKey, '--failed', '--as', 'dana'], {
      cwd: s.dir,
      env: { CTRLRUN_APPROVER: 'ops-on-call' },
      userName: () => 'ana',
    });
    expect(flagWins.stdout.split('\n')[0]).toBe(`${s.ambiguousKey} resolved failed by dana`);
    const store = await openStore(s.storePath, { readOnly: true });
    expect((await store.getApproval(s.pending[0]))?.approver).toBe('ops-on-call');
    expect((await store.getApproval(s.pending[1]))?.approver).toBe('ana');
    expect((await store.getEffect(s.ambiguousKey))?.resolvedBy).toBe('dana');
    expect((await store.events()).filter((e) => JSON.stringify(e.data).includes('cli:local'))).toEqual([]);
    await store.close();
    expect(sinkEvents(s.dir).map((e) => e['type'])).toEqual(['APPROVAL_GRANTED', 'APPROVAL_DENIED', 'EFFECT_RESOLVED']);
  });

  it('an empty, blank or control-character name, or none to be found, is refused: exit 2, one line, nothing written', async () => {
    const s = await seed();
    const before = storeBytes(s.storePath);
    const cases: [string[], Record<string, string>, (() => string) | undefined, RegExp][] = [
      [['--as', ''], {}, undefined, /--as "" is empty/],
      [['--as', '  '], {}, undefined, /is empty/],
      [['--as', 'dana\nAPPROVED by the CFO'], {}, undefined, /control/],
      [['--as', 'dana\u202e'], {}, undefined, /control/],
      [['--as', 'x'.repeat(300)], {}, undefined, /longer than 256/],
      [[], { CTRLRUN_APPROVER: '' }, undefined, /CTRLRUN_APPROVER "" is empty/],
      [[], { CTRLRUN_APPROVER: 'ana\x1b[2J' }, undefined, /CTRLRUN_APPROVER .* control/],
      [
        [],
        {},
        () => {
          throw new Error('ENOENT: no passwd entry');
        },
        /cannot tell who is answering .*--as NAME or set CTRLRUN_APPROVER/,
      ],
      [[], {}, () => '', /login name "" is empty/],
    ];
    for (const [flags, env, userName, says] of cases) {
      for (const argv of [
        ['approve', s.pending[0]],
        ['deny', s.pending[0]],
        ['resolve', s.ambiguousKey, '--failed'],
      ]) {
        const r = await run([...argv, ...flags], { cwd: s.dir, env, ...(userName ? { userName } : {}) });
        expect(r.code, `${argv[0]} ${JSON.stringify(flags)} ${JSON.stringify(env)}`).toBe(2);
        expect(r.stdout).toBe('');
        expect(r.stderr.split('\n')[0]).toMatch(says);
        expect(r.stderr).not.toMatch(/[\x00-\x09\x0b-\x1f\u202e]/);
      }
    }
    expect(storeBytes(s.storePath)).toBe(before);
    expect(sinkEvents(s.dir)).toEqual([]);
  });

  it('the granted approval lets the same action run once (approve from a second terminal)', async () => {
    const s = await seed();
    expect((await run(['approve', s.pending[0]], { cwd: s.dir })).code).toBe(0);
    const store = await openStore(s.storePath);
    const control = exampleControl(store);
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_2', amount: 200000 }, principal: { agent: 'refund-agent' } });
    expect(await control.execute(action, () => 'refunded', { approvalId: s.pending[0] })).toBe('refunded');
    await store.close();
  });

  it('deny records APPROVAL_DENIED', async () => {
    const s = await seed();
    const r = await run(['deny', s.pending[1], '--as', 'dana'], { cwd: s.dir });
    expect(r).toEqual({ code: 0, stdout: `denied ${s.pending[1]} by dana\n`, stderr: '' });
    const store = await openStore(s.storePath, { readOnly: true });
    expect((await store.getApproval(s.pending[1]))?.status).toBe('denied');
    const event = (await store.events()).at(-1)!;
    expect([event.type, event.approvalId, event.data]).toEqual(['APPROVAL_DENIED', s.pending[1], { approver: 'dana' }]);
    expect(sinkEvents(s.dir).at(-1)).toMatchObject({ type: 'APPROVAL_DENIED', approval_id: s.pending[1], data: { approver: 'dana' } });
    await store.close();
  });

  it('an unknown or already answered request is one line, exit 1, and no write', async () => {
    const s = await seed();
    expect((await run(['approve', s.pending[0]], { cwd: s.dir })).code).toBe(0);
    const before = storeBytes(s.storePath);
    for (const argv of [
      ['approve', 'apr_00000000000000000000000000000000'],
      ['deny', 'apr_nope'],
      ['approve', s.pending[0]],
      ['deny', s.pending[0]],
    ]) {
      const r = await run(argv, { cwd: s.dir });
      expect(r.code, argv.join(' ')).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(ONE_LINE);
      expect(r.stderr).toContain(argv[1]!);
    }
    expect(storeBytes(s.storePath)).toBe(before);
  });
});

describe('resolve', () => {
  it('test_T10_resolve_failed_permits_a_retry', async () => {
    const s = await seed();
    const r = await run(['resolve', s.ambiguousKey, '--failed', '--as', 'dana'], { cwd: s.dir });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe(`${s.ambiguousKey} resolved failed by dana`);
    expect(r.stdout).toContain('retry is now permitted');
    const store = await openStore(s.storePath);
    const resolved = (await store.events()).at(-1)!;
    expect([resolved.type, resolved.effectKey, resolved.data]).toEqual([
      'EFFECT_RESOLVED',
      s.ambiguousKey,
      { state: 'failed', resolver: 'dana', resolved_by: 'human' },
    ]);
    expect(sinkEvents(s.dir).at(-1)).toMatchObject({ type: 'EFFECT_RESOLVED', effect_key: s.ambiguousKey, data: resolved.data });
    expect((await store.getEffect(s.ambiguousKey))?.resolvedBy).toBe('dana');
    const control = exampleControl(store);
    const retry = createAction({ name: 'email.send', arguments: { message_id: 'm1', to: 'ana@example.com' }, principal: { agent: 'refund-agent' } });
    expect(await control.execute(retry, () => 'sent')).toBe('sent');
    expect((await store.getEffect(s.ambiguousKey))?.attempt).toBe(2);
    await store.close();
  });

  it('--committed leaves a retry refused as a duplicate', async () => {
    const s = await seed();
    const r = await run(['resolve', s.ambiguousKey, '--committed', '--as', 'dana'], { cwd: s.dir });
    expect(r).toEqual({ code: 0, stdout: `${s.ambiguousKey} resolved committed by dana\n`, stderr: '' });
    const store = await openStore(s.storePath);
    const retry = createAction({ name: 'email.send', arguments: { message_id: 'm1', to: 'ana@example.com' }, principal: { agent: 'refund-agent' } });
    await expect(exampleControl(store).execute(retry, () => 'sent')).rejects.toMatchObject({ name: 'DuplicateEffect', state: 'committed' });
    await store.close();
  });

  it('needs exactly one of --committed|--failed (exit 2, naming both)', async () => {
    const s = await seed();
    for (const argv of [
      ['resolve', s.ambiguousKey],
      ['resolve', s.ambiguousKey, '--committed', '--failed'],
    ]) {
      const r = await run(argv, { cwd: s.dir });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('committed|failed');
    }
  });

  it('a record that is not AMBIGUOUS, or no record, is refused with no write', async () => {
    const s = await seed();
    const before = storeBytes(s.storePath);
    const committed = await run(['resolve', 'refund:txn_1', '--failed'], { cwd: s.dir });
    expect(committed.code).toBe(1);
    expect(committed.stderr).toMatch(ONE_LINE);
    expect(committed.stderr).toContain('refund:txn_1 is committed, not ambiguous');
    const unknown = await run(['resolve', 'refund:nope', '--committed'], { cwd: s.dir });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe('Error: no effect refund:nope\n');
    expect(storeBytes(s.storePath)).toBe(before);
  });
});

describe('receipts', () => {
  it('lists one line per receipt: finished_at, id, action, decision/result, effect key, agent', async () => {
    const s = await seed();
    const r = await run(['receipts'], { cwd: s.dir });
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z {2}ctr_[0-9a-f]{32} {2}customer\.read {2}allow\/committed {2}- {2}refund-agent$/);
    expect(lines[1]).toMatch(/ {2}stripe\.refund {2}allow\/committed {2}refund:txn_1 {2}refund-agent$/);
    expect(lines[2]).toMatch(/ {2}email\.send {2}allow\/ambiguous {2}email:m1 {2}refund-agent$/);
    expect(lines[3]).toMatch(/ {2}iam\.grant_admin {2}deny\/denied {2}- {2}refund-agent$/);
    const last = await run(['receipts', '--last', '1', '--json'], { cwd: s.dir });
    const docs = last.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(docs.map((d) => d['action'])).toEqual(['iam.grant_admin']);
    expect(docs[0]!['seq']).toBe(4);
    expect((await run(['receipts', '--control', 'SOC2-CC6.1'], { cwd: s.dir })).stdout).toBe("no receipts cite 'SOC2-CC6.1'\n");
  });

  it('an empty store has no receipts yet', async () => {
    const dir = tempDir();
    const store = await openStore(join(dir, 'empty.db'));
    await store.close();
    expect(await run(['receipts', '--store-url', 'sqlite://empty.db'], { cwd: dir })).toEqual({ code: 0, stdout: 'no receipts yet\n', stderr: '' });
  });

  it('test_the_verify_chain_flag_reports_a_break_by_seq_and_by_name', async () => {
    const s = await seed();
    const intact = await run(['receipts', '--verify-chain'], { cwd: s.dir });
    expect(intact).toEqual({ code: 0, stdout: 'chain: 4 of 4 receipts verified\nthe chain is intact\n', stderr: '' });
    // Alter receipt 2 in the file, as someone with write access to the database could.
    const db = new BetterSqlite3(s.storePath);
    const row = db.prepare('SELECT json FROM receipts WHERE seq = 2').get() as { json: string };
    db.prepare('UPDATE receipts SET json = ? WHERE seq = 2').run(row.json.replace('"allow"', '"deny"'));
    db.close();
    const broken = await run(['receipts', '--verify-chain'], { cwd: s.dir });
    expect(broken.code).toBe(1);
    // Receipt 2 hashes differently now, so receipt 3's link to it breaks too.
    expect(broken.stdout).toMatch(/^chain: 2 of 4 receipts verified\n {2}content_altered at seq 2: .+\n {2}link_broken at seq 3: .+\n$/);
    const json = await run(['receipts', '--verify-chain', '--json', '--last', '1'], { cwd: s.dir });
    expect(json.code).toBe(1);
    const report = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(Object.keys(report)).toEqual([
      'ok',
      'verified',
      'chained',
      'unchained',
      'head_seq',
      'head_hash',
      'breaks',
      'column_findings',
      'pruned_through',
      'pending',
    ]);
    expect(report['ok']).toBe(false);
    expect(report['breaks']).toEqual([
      { name: 'content_altered', seq: 2, detail: expect.any(String) },
      { name: 'link_broken', seq: 3, detail: expect.any(String) },
    ]);
  });
});

describe('effects', () => {
  it('lists records oldest first, filtered by --state', async () => {
    const s = await seed();
    const all = await run(['effects'], { cwd: s.dir });
    const lines = all.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^refund:txn_1 {2}committed {2}attempt 1 {2}act_[0-9a-f]{32} {2}\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(lines[1]).toMatch(/^email:m1 {2}ambiguous {2}attempt 1 {2}act_/);
    expect((await run(['effects', '--state', 'ambiguous'], { cwd: s.dir })).stdout).toMatch(/^email:m1 {2}ambiguous/);
    expect((await run(['effects', '--state', 'new'], { cwd: s.dir })).stdout).toBe('no effects are new\n');
    expect((await run(['effects', '--state', 'failed'], { cwd: s.dir })).stdout).toBe('no effects are failed\n');
  });

  it('test_T177d_an_expired_lease_is_displayed_as_expired_and_the_display_transitions_nothing', async () => {
    const dir = tempDir();
    const path = join(dir, 'lease.db');
    const store = await openStore(path, { clock: () => new Date('2026-01-01T00:00:00Z') });
    await store.reserveEffect('refund:txn_7', 'act_00000000000000000000000000000007', 1000);
    await store.close();
    const before = storeBytes(path);
    const r = await run(['effects', '--store-url', `sqlite://${path}`], { cwd: dir });
    expect(r.stdout).toMatch(/^refund:txn_7 {2}reserved {2}attempt 1 {2}act_0+7 {2}2026-01-01T00:00:00\.000Z {2}\(lease expired\)\n$/);
    expect(storeBytes(path)).toBe(before);
  });
});

describe('inspect', () => {
  const INSPECTION_KEYS = ['schema', 'action_id', 'receipt', 'effect', 'approvals', 'events'];

  it('test_T18_inspect_json_emits_the_inspection_schema', async () => {
    const s = await seed();
    const r = await run(['inspect', s.actions.lost, '--json'], { cwd: s.dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^\{\n {2}"schema": "ctrlrun\.inspection\/v2",\n/);
    const doc = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(Object.keys(doc)).toEqual(INSPECTION_KEYS);
    expect(doc['action_id']).toBe(s.actions.lost);
    expect((doc['receipt'] as Record<string, unknown>)['result']).toBe('ambiguous');
    expect(Object.keys(doc['effect'] as object)).toEqual([
      'effect_key',
      'state',
      'action_id',
      'attempt',
      'created_at',
      'updated_at',
      'lease_expires_at',
      'error',
      'resolved_by',
    ]);
    expect((doc['effect'] as Record<string, unknown>)['state']).toBe('ambiguous');
    const events = doc['events'] as Record<string, unknown>[];
    expect(events.map((e) => e['type'])).toEqual(['ACTION_PROPOSED', 'POLICY_EVALUATED', 'EFFECT_RESERVED', 'EXECUTION_STARTED', 'EXECUTION_AMBIGUOUS']);
    expect(Object.keys(events[0]!)).toEqual(['event_id', 'ts', 'type', 'action_id', 'effect_key', 'approval_id', 'data']);
    expect(doc['approvals']).toEqual([]);
  });

  it('a suspended action has no receipt: its hash comes from ACTION_PROPOSED and its approval is listed', async () => {
    const s = await seed();
    const json = JSON.parse((await run(['inspect', s.actions.suspended, '--json'], { cwd: s.dir })).stdout) as Record<string, unknown>;
    expect(json['receipt']).toBeNull();
    const approvals = json['approvals'] as Record<string, unknown>[];
    expect(approvals.map((a) => [a['request_id'], a['status']])).toEqual([[s.pending[0], 'pending']]);
    // request_id is the name in every view; approval_id, the same id, stays for the inspection/v2 readers.
    expect(Object.keys(approvals[0]!)).toEqual([
      'request_id',
      'approval_id',
      'action_hash',
      'status',
      'approver',
      'created_at',
      'expires_at',
      'granted_at',
      'consumed_at',
    ]);
    expect(approvals[0]!['approval_id']).toBe(approvals[0]!['request_id']);
    for (const k of ['created_at', 'expires_at']) expect(approvals[0]![k]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    const human = await run(['inspect', s.actions.suspended], { cwd: s.dir });
    const lines = human.stdout.split('\n');
    expect(lines[0]).toBe(`${s.actions.suspended}  stripe.refund`);
    expect(lines).toContain('principal   refund-agent');
    expect(lines).toContain('arguments   { "amount": 200000, "payment_id": "txn_2" }');
    expect(lines).toContain('decision    approve (rule[1])');
    expect(lines).toContain(`approval    ${s.pending[0]}  pending`);
    expect(lines).toContain('receipt     -  (awaiting a human)');
    expect(human.stdout).toMatch(/\n {2}[ \d]{3}  \S+Z  APPROVAL_REQUESTED {10}action_hash=sha256:[0-9a-f]{64} expires_at=\S+Z\n/);
  });

  it('inspect takes the approval request id the agent printed, or a receipt id ctrlrun receipts printed', async () => {
    const s = await seed();
    const byAction = await run(['inspect', s.actions.suspended, '--json'], { cwd: s.dir });
    expect(byAction.code).toBe(0);
    expect(await run(['inspect', s.pending[0], '--json'], { cwd: s.dir })).toEqual(byAction);
    // The second pending request belongs to another action: not the same story.
    const other = JSON.parse((await run(['inspect', s.pending[1], '--json'], { cwd: s.dir })).stdout) as Record<string, unknown>;
    expect(other['action_id']).not.toBe(s.actions.suspended);
    expect((other['approvals'] as { approval_id: string }[]).map((a) => a.approval_id)).toEqual([s.pending[1]]);
    const receipts = (await run(['receipts', '--json'], { cwd: s.dir })).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string>);
    const refund = receipts.find((r) => r['action_id'] === s.actions.refund)!;
    expect((await run(['receipts'], { cwd: s.dir })).stdout).toContain(refund['receipt_id']);
    expect(await run(['inspect', refund['receipt_id']!, '--json'], { cwd: s.dir })).toEqual(await run(['inspect', s.actions.refund, '--json'], { cwd: s.dir }));
  });

  it('an unknown action id: exit 1, no action <id> on stderr, stdout empty', async () => {
    const s = await seed();
    expect(await run(['inspect', 'act_nope', '--json'], { cwd: s.dir })).toEqual({ code: 1, stdout: '', stderr: 'Error: no action act_nope\n' });
  });
});

describe('stores the CLI is pointed at', () => {
  it('readers never create a store, and name what is missing', async () => {
    const dir = tempDir();
    // The answers refuse a missing store; the listings read it as empty and say where they looked (issue 35; no-store.test.ts).
    for (const argv of [
      ['approve', 'apr_x'],
      ['deny', 'apr_x'],
      ['resolve', 'k', '--failed'],
    ]) {
      const r = await run(argv, { cwd: dir });
      expect(r.code, argv[0]).toBe(1);
      expect(r.stderr).toMatch(ONE_LINE);
      expect(r.stderr).toContain(join(dir, '.ctrlrun', 'state.db'));
    }
    for (const [argv, code] of [
      [['receipts'], 0],
      [['effects'], 0],
      [['inspect', 'act_x'], 1],
    ] as const) {
      const r = await run([...argv], { cwd: dir });
      expect(r.code, argv[0]).toBe(code);
      expect(r.stderr).toContain(`no store at ${join(dir, '.ctrlrun', 'state.db')} yet`);
    }
    expect(existsSync(join(dir, '.ctrlrun'))).toBe(false);
  });

  it('test_T152b_no_flag_opens_a_database_without_migrating: a store behind this build is refused, not migrated', async () => {
    const dir = tempDir();
    const path = join(dir, 'old.db');
    const db = new BetterSqlite3(path);
    db.exec(sqliteDialect.sql.createSchemaVersion);
    for (const statement of sqliteDialect.migrations['0001_baseline']) db.exec(statement);
    db.prepare(sqliteDialect.sql.insertSchemaVersion).run('0001_baseline', '2026-01-01T00:00:00+00:00', 'ctrlrun 0.5.0');
    db.close();
    const before = storeBytes(path);
    for (const argv of [['receipts'], ['effects'], ['approve', 'apr_x'], ['resolve', 'k', '--failed'], ['stats']]) {
      writeFileSync(join(dir, 'ctrlrun.yaml'), EXAMPLE_POLICY_YAML);
      const r = await run([...argv, '--store-url', 'sqlite://old.db'], { cwd: dir });
      expect(r.code, argv[0]).toBe(1);
      expect(r.stderr).toMatch(ONE_LINE);
      expect(r.stderr).toContain('old.db');
      expect(r.stderr).toContain('a writer does');
    }
    expect(storeBytes(path)).toBe(before);
  });

  it('CTRLRUN_STATE and CTRLRUN_CONFIG move the default store; the flag beats CTRLRUN_STORE_URL', async () => {
    const s = await seed();
    const elsewhere = tempDir();
    expect((await run(['receipts', '--last', '1'], { cwd: elsewhere, env: { CTRLRUN_STATE: s.storePath } })).stdout).toContain('iam.grant_admin');
    expect((await run(['receipts', '--last', '1'], { cwd: elsewhere, env: { CTRLRUN_CONFIG: join(s.dir, 'ctrlrun.yaml') } })).stdout).toContain(
      'iam.grant_admin',
    );
    const flag = await run(['receipts', '--last', '1', '--store-url', `sqlite://${s.storePath}`], {
      cwd: elsewhere,
      env: { CTRLRUN_STORE_URL: 'sqlite://nowhere.db' },
    });
    expect(flag.stdout).toContain('iam.grant_admin');
    const blank = await run(['receipts'], { cwd: elsewhere, env: { CTRLRUN_STATE: ' ' } });
    expect(blank.code).toBe(1);
    expect(blank.stderr).toContain('CTRLRUN_STATE is set but blank');
  });

  it('a store URL of no known backend, or one that does not open, is one line and exit 1', async () => {
    const s = await seed();
    const before = storeBytes(s.storePath);
    const unknown = await run(['receipts', '--store-url', 'mysql://db/x'], { cwd: s.dir });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(ONE_LINE);
    expect(unknown.stderr).toContain('expected sqlite://<path> or postgresql://');
    writeFileSync(join(s.dir, 'junk.db'), 'not a database at all, just text that is long enough to be a header');
    const junk = await run(['effects', '--store-url', 'sqlite://junk.db'], { cwd: s.dir });
    expect(junk.code).toBe(1);
    expect(junk.stderr).toMatch(ONE_LINE);
    expect(junk.stderr).toContain('junk.db');
    const unreachable = await run(['receipts', '--store-url', 'postgresql://nobody@127.0.0.1:1/none'], { cwd: s.dir });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(ONE_LINE);
    expect(storeBytes(s.storePath)).toBe(before);
  });

  it('a store URL with a query string or fragment is refused by every command, and no file appears', async () => {
    const s = await seed();
    const before = storeBytes(s.storePath);
    const entries = () => readdirSync(join(s.dir, '.ctrlrun')).sort();
    const listed = entries();
    for (const url of [`sqlite://${s.storePath}?mode=ro`, `sqlite:${s.storePath}#x`, 'sqlite://new.db?mode=rwc']) {
      for (const argv of [['receipts'], ['effects'], ['approve', s.pending[0], '--as', 'dana'], ['revoke', 'dlg_x', '--by', 'dana']]) {
        const r = await run([...argv, '--store-url', url], { cwd: s.dir });
        expect(r.code, `${argv[0]} ${url}`).toBe(1);
        expect(r.stderr).toMatch(ONE_LINE);
        expect(r.stderr).toMatch(/query string|fragment/);
      }
    }
    expect(entries()).toEqual(listed);
    expect(readdirSync(s.dir).sort()).toEqual(['.ctrlrun', 'ctrlrun.yaml']);
    expect(storeBytes(s.storePath)).toBe(before);
  });

  it('a policy that does not load is one line and exit 1, with nothing written', async () => {
    const s = await seed();
    writeFileSync(join(s.dir, 'ctrlrun.yaml'), 'schema: ctrlrun.policy/v9\nactions: {}\n');
    const before = storeBytes(s.storePath);
    for (const argv of [
      ['stats'],
      ['revoke', 'dlg_00000000000000000000000000000000'],
      ['delegate', '--parent', 'g', '--file', 'g.yaml', '--as', 'a'],
      ['approve', s.pending[0], '--as', 'dana'],
      ['deny', s.pending[0], '--as', 'dana'],
      ['resolve', s.ambiguousKey, '--failed', '--as', 'dana'],
    ]) {
      const r = await run(argv, { cwd: s.dir });
      expect(r.code, argv[0]).toBe(1);
      expect(r.stderr).toMatch(ONE_LINE);
      expect(r.stderr).toContain('ctrlrun.policy/v9');
    }
    expect(storeBytes(s.storePath)).toBe(before);
  });
});
