// `ctrlrun approvals` on a request needing two verified approvers (spec 05 §4): the listing and
// its JSON say "1 of 2 approvals: ana"; an unverified `ctrlrun approve` never counts toward it.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ApprovalMismatch, ApprovalRequired, Control, loadPolicy, protect } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { SignJWT } from 'jose';
import { run, tempDir } from './support.js';

const POLICY = `schema: ctrlrun.policy/v6
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    approvals_required: 2
    decision: approve
`;

async function filed(withAna = true): Promise<{ dir: string; storePath: string; id: string }> {
  const dir = tempDir();
  writeFileSync(join(dir, 'ctrlrun.yaml'), POLICY);
  mkdirSync(join(dir, '.ctrlrun'), { recursive: true });
  const storePath = join(dir, '.ctrlrun', 'state.db');
  const store = await openStore(storePath);
  const control = new Control({
    policy: loadPolicy(POLICY),
    store,
    principal: { agent: 'refund-agent' },
    approvers: { rolesClaim: 'roles' },
    logger: { warn: () => {} },
  });
  const err = await protect(() => 'ran', { control, name: 'stripe.refund' })({ payment_id: 'txn_9', amount: 5000 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApprovalRequired);
  const id = (err as ApprovalRequired).requestId;
  if (withAna) {
    const counted = await control
      .grantApproval(id, { approver: 'ana', verified: { agent: 'inbox', user: 'ana', issuer: 'https://idp.example' } })
      .catch((e: unknown) => e);
    expect(counted).toBeInstanceOf(ApprovalMismatch);
  }
  await store.close();
  return { dir, storePath, id };
}

describe('ctrlrun approvals with approvals_required: 2', () => {
  it('the listing says "1 of 2 approvals: ana"; --json carries approvals_required, approvers and progress', async () => {
    const { dir, id } = await filed();
    const listed = await run(['approvals'], { cwd: dir });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(id);
    expect(listed.stdout).toContain('1 of 2 approvals: ana');
    const json = await run(['approvals', '--json'], { cwd: dir });
    const row = (JSON.parse(json.stdout) as { approvals: Record<string, unknown>[] }).approvals[0]!;
    expect(row).toMatchObject({ approvals_required: 2, progress: '1 of 2 approvals: ana', approvers: [{ agent: 'inbox', user: 'ana', entitled: [] }] });
  });

  it('ctrlrun approve (no verified identity) does not count toward two: refused, saying so, and the request stays pending', async () => {
    const { dir, storePath, id } = await filed();
    const answered = await run(['approve', id, '--as', 'bo', '--yes'], { cwd: dir });
    expect(answered.code).not.toBe(0);
    expect(answered.stderr).toContain('no verified identity');
    const store = await openStore(storePath, { readOnly: true });
    try {
      expect((await store.getApproval(id))?.status).toBe('pending');
    } finally {
      await store.close();
    }
  });
});

describe('ctrlrun approve with a configured identity (--identity-jwt … --approver-token-file)', () => {
  const SECRET = 'a-shared-secret-of-forty-characters-long!';
  const sign = (claims: Record<string, unknown>) =>
    new SignJWT({ iss: 'https://idp.example', aud: 'ctrlrun-approvers', exp: Math.floor(Date.now() / 1000) + 300, ...claims })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .sign(new TextEncoder().encode(SECRET));
  const flags = (dir: string, token: string) => [
    '--yes',
    '--identity-jwt',
    '--identity-jwt-algorithms',
    'HS256',
    '--identity-jwt-issuer',
    'https://idp.example',
    '--identity-jwt-audience',
    'ctrlrun-approvers',
    '--identity-jwt-token-type',
    'JWT',
    '--identity-jwt-secret-file',
    join(dir, 'secret'),
    '--identity-jwt-user-claim',
    'email',
    '--identity-jwt-claim',
    'roles',
    '--approver-roles-claim',
    'roles',
    '--approver-token-file',
    join(dir, token),
  ];

  it('two verified people: the first is recorded "1 of 2 approvals: dee@example.com" (exit 0), the same token again is refused, the second grants', async () => {
    const { dir, storePath, id } = await filed(false);
    writeFileSync(join(dir, 'secret'), SECRET);
    writeFileSync(join(dir, 'dee.jwt'), await sign({ sub: 'laptop', email: 'dee@example.com', roles: ['finance'] }));
    writeFileSync(join(dir, 'bo.jwt'), await sign({ sub: 'laptop', email: 'bo@example.com' }));
    const first = await run(['approve', id, ...flags(dir, 'dee.jwt')], { cwd: dir });
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("recorded dee@example.com's approval");
    expect(first.stdout).toContain('1 of 2 approvals: dee@example.com');
    const again = await run(['approve', id, ...flags(dir, 'dee.jwt')], { cwd: dir });
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain('already approved it');
    const second = await run(['approve', id, ...flags(dir, 'bo.jwt')], { cwd: dir });
    expect(second.code).toBe(0);
    expect(second.stdout).toContain(`granted ${id}`);
    const store = await openStore(storePath, { readOnly: true });
    try {
      const record = await store.getApproval(id);
      expect(record?.status).toBe('granted');
      expect(record?.approvers?.map((a) => [a.user, a.issuer, a.entitled])).toEqual([
        ['dee@example.com', 'https://idp.example', []],
        ['bo@example.com', 'https://idp.example', []],
      ]);
    } finally {
      await store.close();
    }
  });

  it('a token signed with another secret is refused and nothing is recorded; --as with a token, or a token file without --identity-jwt, is a usage error', async () => {
    const { dir, storePath, id } = await filed();
    writeFileSync(join(dir, 'secret'), SECRET);
    writeFileSync(
      join(dir, 'forged.jwt'),
      await new SignJWT({ iss: 'https://idp.example', aud: 'ctrlrun-approvers', exp: Math.floor(Date.now() / 1000) + 300, sub: 'x', email: 'eve@example.com' })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .sign(new TextEncoder().encode('another-secret-of-forty-characters-long!!')),
    );
    const forged = await run(['approve', id, ...flags(dir, 'forged.jwt')], { cwd: dir });
    expect(forged.code).not.toBe(0);
    expect(forged.stderr).toContain('was refused');
    expect((await run(['approve', id, '--as', 'eve', ...flags(dir, 'forged.jwt')], { cwd: dir })).stderr).toContain('give --as or --identity-jwt');
    expect((await run(['approve', id, '--yes', '--approver-token-file', 'x'], { cwd: dir })).stderr).toContain('--approver-token-file needs --identity-jwt');
    const store = await openStore(storePath, { readOnly: true });
    try {
      expect((await store.getApproval(id))?.approvers?.length).toBe(1);
    } finally {
      await store.close();
    }
  });
});

describe('ctrlrun mcp-operator --approver-roles-claim', () => {
  it('needs --identity-jwt and the claim copied onto the principal; refused by name before anything is served', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'ctrlrun.yaml'), POLICY);
    const alone = await run(['mcp-operator', '--stdio', '--approver-roles-claim', 'roles'], { cwd: dir });
    expect(alone.code).not.toBe(0);
    expect(alone.stderr).toContain('--approver-roles-claim needs --identity-jwt');
    writeFileSync(join(dir, 'secret'), 'a-shared-secret-of-forty-characters-long!');
    const jwt = [
      '--identity-jwt',
      '--identity-jwt-algorithms',
      'HS256',
      '--identity-jwt-issuer',
      'https://idp.example',
      '--identity-jwt-audience',
      'ops',
      '--identity-jwt-token-type',
      'JWT',
      '--identity-jwt-secret-file',
      join(dir, 'secret'),
      '--identity-jwt-user-claim',
      'email',
    ];
    const uncopied = await run(['mcp-operator', ...jwt, '--approver-roles-claim', 'roles'], { cwd: dir });
    expect(uncopied.stderr).toContain('--approver-roles-claim roles needs --identity-jwt-claim roles');
  });

  it('the Control it builds computes entitlement from that claim', async () => {
    const { commandControl } = await import('../src/mcp-http.js');
    const store = await (await import('@ctrlrun/store-sqljs')).createSqlJsStore();
    const policy = loadPolicy(
      'schema: ctrlrun.policy/v6\ncontrols:\n  refund-limit: {title: Limit, approver_role: finance}\nactions:\n  stripe.refund:\n    controls: [refund-limit]\n    decision: approve\n',
    );
    const control = commandControl({ policy, environment: undefined, target: { kind: 'memory' } as never }, store, () => {}, {
      approvers: { rolesClaim: 'roles' },
    });
    expect(control.approverIdentity).toEqual({ rolesClaim: 'roles' });
    const err = await protect(() => 1, { control, name: 'stripe.refund' })({ id: 'x' }, { principal: { agent: 'refund-agent' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalRequired);
    const id = (err as ApprovalRequired).requestId;
    await control.grantApproval(id, { approver: 'mcp-operator:ana', verified: { agent: 'mcp', user: 'ana', claims: { roles: ['finance'] } } });
    expect((await store.getApproval(id))?.approvers?.[0]?.entitled).toEqual(['refund-limit']);
  });
});
