// The commands that load the policy: stats (T86), delegate and revoke; run in-process.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import dns from 'node:dns';
import * as net from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Control, loadPolicy, protect } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { AUTHORITY_POLICY, grantYaml, run, seed, storeBytes, tempDir } from './support.js';

const OBSERVE_POLICY = `schema: ctrlrun.policy/v3
mode: observe
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_gte: 0, amount_lte: 100000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 1000000 }
        decision: approve
      - decision: deny
  iam.grant_admin:
    decision: deny
`;

/** An observe-mode store: an allowed refund, its duplicate, one needing approval, two denials, one ambiguous. */
async function observed(): Promise<string> {
  const dir = tempDir();
  writeFileSync(join(dir, 'ctrlrun.yaml'), OBSERVE_POLICY);
  mkdirSync(join(dir, '.ctrlrun'));
  const store = await openStore(join(dir, '.ctrlrun', 'state.db'));
  const control = new Control({ policy: loadPolicy(OBSERVE_POLICY), store, principal: { agent: 'refund-agent' }, logger: { warn: () => {} } });
  const refund = protect<Record<string, unknown>, unknown>(
    (a) => {
      if (a['payment_id'] === 'txn_4') throw new Error('connection reset after the request was sent');
      return { ok: true };
    },
    { control, name: 'stripe.refund' },
  );
  const grant = protect<Record<string, unknown>, unknown>(() => ({ ok: true }), { control, name: 'iam.grant_admin' });
  await refund({ payment_id: 'txn_1', amount: 50000 });
  await refund({ payment_id: 'txn_1', amount: 50000 });
  await refund({ payment_id: 'txn_2', amount: 200000 });
  await refund({ payment_id: 'txn_3', amount: 5000000 });
  await grant({ user: 'mallory' });
  await refund({ payment_id: 'txn_4', amount: 60000 }).catch(() => undefined);
  await store.close();
  return dir;
}

describe('stats', () => {
  afterEach(() => void vi.restoreAllMocks());

  it('enforced refusals and approval requests show up, and stay visible after a switch to observe', async () => {
    // The seeded store ran in enforce mode: one denial (iam.grant_admin), two requests awaiting a human.
    const s = await seed();
    const enforce = await run(['stats', '--json'], { cwd: s.dir });
    expect(JSON.parse(enforce.stdout)).toMatchObject({
      mode: 'enforce',
      denied: 1,
      enforced_denied: 1,
      enforced_blocked: 0,
      approvals_requested: 2,
      approvals_pending: 2,
    });
    const human = (await run(['stats'], { cwd: s.dir })).stdout.split('\n');
    expect(human).toContain(`${'approval requests'.padEnd(30)}${'2'.padStart(6)}`);
    expect(human).toContain(`${'   still pending'.padEnd(30)}${'2'.padStart(6)}`);
    // The team switches the policy to observe: the enforced refusal is not reported as 0.
    writeFileSync(join(s.dir, 'ctrlrun.yaml'), OBSERVE_POLICY);
    const observe = await run(['stats', '--json'], { cwd: s.dir });
    expect(JSON.parse(observe.stdout)).toMatchObject({
      mode: 'observe',
      would_have_been_denied: 0,
      enforced_denied: 1,
      enforced_denied_by_reason: { decision: 1 },
    });
    const lines = (await run(['stats'], { cwd: s.dir })).stdout.split('\n');
    expect(lines).toContain(`${'denied (enforced)'.padEnd(30)}${'1'.padStart(6)}`);
    expect(lines).toContain(`   ${'decision'.padEnd(27)}${'1'.padStart(6)}`);
  });

  it('test_T86_stats_counts_what_observe_mode_recorded', async () => {
    const dir = await observed();
    const r = await run(['stats', '--json'], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('OBSERVE MODE — nothing is enforced\n');
    const doc = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(Object.keys(doc)).toEqual([
      'schema',
      'mode',
      'since',
      'from',
      'to',
      'actions',
      'would_have_been_denied',
      'denied_by_reason',
      'would_have_needed_approval',
      'would_have_been_blocked',
      'blocked_by_reason',
      'ambiguous_outcomes',
      'enforced_denied',
      'enforced_denied_by_reason',
      'enforced_blocked',
      'approvals_requested',
      'approvals_pending',
    ]);
    expect(doc).toMatchObject({
      schema: 'ctrlrun.stats/v1',
      mode: 'observe',
      since: null,
      actions: 6,
      would_have_been_denied: 2,
      denied_by_reason: { decision: 1, 'rule[2]': 1 },
      would_have_needed_approval: 1,
      would_have_been_blocked: 1,
      blocked_by_reason: { duplicate: 1 },
      ambiguous_outcomes: 1,
    });
    const human = await run(['stats'], { cwd: dir });
    const lines = human.stdout.split('\n');
    expect(lines[0]).toMatch(/^ctrlrun — \S+Z \.\. \S+Z {3}\(observe mode\)$/);
    expect(lines).toContain(`${'actions'.padEnd(30)}${'6'.padStart(6)}`);
    expect(lines).toContain(`${'would have been denied'.padEnd(30)}${'2'.padStart(6)}`);
    expect(lines).toContain(`   ${'rule[2]'.padEnd(27)}${'1'.padStart(6)}`);
    expect(human.stdout).toContain('not counted');
    const future = await run(['stats', '--json', '--since', '2999-01-01T00:00:00Z'], { cwd: dir });
    expect(JSON.parse(future.stdout)).toMatchObject({ actions: 0, from: null, to: null, since: '2999-01-01T00:00:00.000Z' });
  });

  it('test_T86_stats_reaches_no_network', async () => {
    const dir = await observed();
    const fetchSpy = vi.fn(async () => new Response('no'));
    vi.stubGlobal('fetch', fetchSpy);
    const connect = vi.spyOn(net.Socket.prototype, 'connect');
    const lookup = vi.spyOn(dns, 'lookup');
    const r = await run(['stats', '--json', '--since', '7d'], { cwd: dir });
    expect(r.code).toBe(0);
    expect([fetchSpy.mock.calls.length, connect.mock.calls.length, lookup.mock.calls.length]).toEqual([0, 0, 0]);
    // The stubs are live: a connection attempt is seen.
    await fetch('http://127.0.0.1:1/');
    const socket = new net.Socket();
    socket.on('error', () => undefined);
    socket.connect(1, '127.0.0.1');
    socket.destroy();
    expect([fetchSpy.mock.calls.length, connect.mock.calls.length]).toEqual([1, 1]);
    vi.unstubAllGlobals();
  });

  it('a --since that is not ISO with an offset or <n>m|h|d is a usage error', async () => {
    const dir = await observed();
    for (const since of ['yesterday', '7w', '0d', '2026-01-01T00:00:00', '10']) {
      const r = await run(['stats', '--since', since], { cwd: dir });
      expect(r.code, since).toBe(2);
      expect(r.stderr).toContain('<n>m, <n>h, <n>d');
    }
  });
});

describe('delegate and revoke', () => {
  async function authorityDir(): Promise<string> {
    const dir = tempDir();
    writeFileSync(join(dir, 'ctrlrun.yaml'), AUTHORITY_POLICY);
    writeFileSync(join(dir, 'finance.yaml'), grantYaml(2500000));
    writeFileSync(join(dir, 'wider.yaml'), grantYaml(20000000));
    return dir;
  }

  it('delegate creates a delegation beneath a grant, through Control, recorded as created_via cli', async () => {
    const dir = await authorityDir();
    const r = await run(['delegate', '--parent', 'head-of-support', '--file', 'finance.yaml', '--as', 'head-of-support/dana@example.com'], { cwd: dir });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [created, parent, hint] = r.stdout.trimEnd().split('\n');
    expect(created).toMatch(/^created dlg_[0-9a-f]{32}$/);
    const id = created!.slice('created '.length);
    expect(parent).toBe('parent head-of-support at depth 1');
    expect(hint).toContain(`ctrlrun revoke ${id}`);
    const json = await run(['delegate', '--parent', id, '--file', 'finance.yaml', '--as', 'finance-agent/dana@example.com', '--json'], { cwd: dir });
    expect(json.code).toBe(0);
    const doc = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(Object.keys(doc)).toEqual(['delegation_id', 'parent_id', 'depth', 'created_by_agent', 'created_by_user', 'created_via', 'created_at']);
    expect(doc).toMatchObject({ parent_id: id, depth: 2, created_by_agent: 'finance-agent', created_by_user: 'dana@example.com', created_via: 'cli' });
    const store = await openStore(join(dir, '.ctrlrun', 'state.db'), { readOnly: true });
    expect((await store.getDelegation(id))?.createdVia).toBe('cli');
    expect((await store.events()).filter((e) => e.type === 'DELEGATION_CREATED')).toHaveLength(2);
    await store.close();
  });

  it('an escalation is refused: exit 1, <reason>: <message>, no row', async () => {
    const dir = await authorityDir();
    const r = await run(['delegate', '--parent', 'head-of-support', '--file', 'wider.yaml', '--as', 'head-of-support/dana@example.com'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^Error: containment \(constraints\): [^\n]+\n$/);
    const store = await openStore(join(dir, '.ctrlrun', 'state.db'), { readOnly: true });
    expect(await store.delegations({ includeRevoked: true })).toEqual([]);
    expect((await store.events()).map((e) => [e.type, e.data['reason']])).toEqual([['DELEGATION_REJECTED', 'containment']]);
    await store.close();
  });

  it('delegate needs --parent, --file and --as AGENT[/USER] (exit 2)', async () => {
    const dir = await authorityDir();
    for (const argv of [
      ['delegate', '--file', 'finance.yaml', '--as', 'a'],
      ['delegate', '--parent', 'head-of-support', '--as', 'a'],
      ['delegate', '--parent', 'head-of-support', '--file', 'finance.yaml'],
      ['delegate', '--parent', 'head-of-support', '--file', 'finance.yaml', '--as', '/dana'],
      // A principal with a control or bidi character would be recorded and shown as something else.
      ['delegate', '--parent', 'head-of-support', '--file', 'finance.yaml', '--as', 'head-of-support\u202e/dana'],
      ['delegate', '--parent', 'head-of-support', '--file', 'finance.yaml', '--as', 'head-of-support/dana\r'],
      ['revoke', 'dlg_00000000000000000000000000000000', '--by', ''],
      ['revoke', 'dlg_00000000000000000000000000000000', '--by', 'ana\x1b[8m'],
    ]) {
      const r = await run(argv, { cwd: dir });
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr).not.toMatch(/[\x00-\x09\x0b-\x1f\u202e]/);
    }
    expect(existsSync(join(dir, '.ctrlrun', 'state.db'))).toBe(false);
  });

  it('revoke takes a delegation back once; again is exit 0 naming when; an unknown id writes nothing', async () => {
    const dir = await authorityDir();
    const created = await run(['delegate', '--parent', 'head-of-support', '--file', 'finance.yaml', '--as', 'head-of-support/dana@example.com'], { cwd: dir });
    const id = created.stdout.split('\n')[0]!.slice('created '.length);
    const r = await run(['revoke', id], { cwd: dir, userName: () => 'ops-ana' });
    expect(r).toEqual({ code: 0, stdout: `revoked ${id} by ops-ana\nevery delegation beneath it is denied from the next evaluation\n`, stderr: '' });
    const again = await run(['revoke', id, '--by', 'someone-else'], { cwd: dir });
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`^${id} was already revoked at \\S+Z by ops-ana; nothing changed\\n$`));
    const path = join(dir, '.ctrlrun', 'state.db');
    const before = storeBytes(path);
    const unknown = await run(['revoke', 'dlg_00000000000000000000000000000000'], { cwd: dir });
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toMatch(/^Error: [^\n]*dlg_0{32}[^\n]*\n$/);
    expect(storeBytes(path)).toBe(before);
  });
});
