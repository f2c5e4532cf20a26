// `ctrlrun break-glass open` through the real executable, as a subprocess, against a SQLite file:
// an incident commander verified by their own token opens a grant beneath the policy's envelope,
// the agent acts under it (its receipt names the grant), the ttl passes, and the same action is
// refused. And what is refused: a person without the envelope's role, an unverified opener, an
// ordinary grant id, a ttl beyond max_ttl.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Control, createAction, loadPolicy } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { SignJWT } from 'jose';
import { run, spawnCli, tempDir } from './support.js';

const POLICY = `schema: ctrlrun.policy/v6
environment: prod
controls:
  incident-response:
    title: Only an incident commander opens break-glass
    approver_role: incident-commander
actions:
  payments.refund:
    resource: "payment:{payment_id}"
    effect: "refund:{payment_id}"
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
      max_ttl: PT4H
      controls: [incident-response]
`;

const GRANT = `subject: {agent: oncall-agent}
actions: [payments.refund]
environments: [prod]
resources: ["payment:EU-*"]
constraints: {amount_lte: 1000}
`;

const SECRET = 'a-shared-secret-of-forty-characters-long!';
const sign = (claims: Record<string, unknown>) =>
  new SignJWT({ iss: 'https://idp.example', aud: 'ctrlrun-operators', exp: Math.floor(Date.now() / 1000) + 300, ...claims })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .sign(new TextEncoder().encode(SECRET));

function identity(dir: string, token: string): string[] {
  return [
    '--identity-jwt',
    '--identity-jwt-algorithms',
    'HS256',
    '--identity-jwt-issuer',
    'https://idp.example',
    '--identity-jwt-audience',
    'ctrlrun-operators',
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
}

async function deployment(): Promise<{ dir: string; storePath: string }> {
  const dir = tempDir('ctrlrun-break-glass-');
  writeFileSync(join(dir, 'ctrlrun.yaml'), POLICY);
  writeFileSync(join(dir, 'grant.yaml'), GRANT);
  writeFileSync(join(dir, 'secret'), SECRET);
  writeFileSync(join(dir, 'ada.jwt'), await sign({ sub: 'laptop', email: 'ada@example.com', roles: ['incident-commander'] }));
  writeFileSync(join(dir, 'bob.jwt'), await sign({ sub: 'laptop', email: 'bob@example.com', roles: ['viewer'] }));
  mkdirSync(join(dir, '.ctrlrun'));
  return { dir, storePath: join(dir, '.ctrlrun', 'state.db') };
}

/** The agent's side: one refund through its own Control on the same SQLite file, with the real clock. */
async function refund(storePath: string, paymentId: string): Promise<{ outcome: unknown; grant: unknown }> {
  const store = await openStore(storePath);
  try {
    const control = new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => {} } });
    const action = createAction({
      name: 'payments.refund',
      arguments: { amount: 100, payment_id: paymentId },
      principal: { agent: 'oncall-agent', user: 'ada' },
      resource: `payment:${paymentId}`,
      environment: 'prod',
    });
    const outcome = await control
      .executeWithReceipt(action, () => 'refunded')
      .then(
        (r) => r.value,
        (e: unknown) => e,
      );
    const last = (await store.receipts()).at(-1);
    return { outcome, grant: last ? (JSON.parse(last.json ?? '{}') as Record<string, unknown>)['authority_grant_id'] : undefined };
  } finally {
    await store.close();
  }
}

describe('ctrlrun break-glass open (the real executable, a SQLite file)', () => {
  it('opens as the verified commander; the agent acts under it; when the ttl passes the same action is refused', async () => {
    const { dir, storePath } = await deployment();
    const opened = await spawnCli(
      [
        'break-glass',
        'open',
        '--envelope',
        'incident-payments',
        '--file',
        'grant.yaml',
        '--reason',
        'INC-4412',
        '--ttl',
        'PT3S',
        '--json',
        ...identity(dir, 'ada.jwt'),
      ],
      { cwd: dir },
    );
    expect(opened.stderr).toContain('break-glass dlg_');
    expect(opened.code).toBe(0);
    const d = JSON.parse(opened.stdout) as Record<string, string>;
    expect(d).toMatchObject({ parent_id: 'incident-payments', depth: 1, created_via: 'break-glass', created_by_user: 'ada@example.com', reason: 'INC-4412' });
    expect(d['delegation_id']).toMatch(/^dlg_[0-9a-f]{32}$/);

    // Within its ttl the agent's refund runs, and the receipt names the break-glass grant.
    const first = await refund(storePath, 'EU-42');
    expect(first).toEqual({ outcome: 'refunded', grant: d['delegation_id'] });

    // The ttl passes (a wait until the recorded expiry, not a deadline): refused, authority_expired.
    const expires = Date.parse(d['expires_at']!);
    while (Date.now() <= expires + 20) await new Promise((r) => setTimeout(r, Math.max(20, expires + 25 - Date.now())));
    const later = await refund(storePath, 'EU-43');
    expect(later.outcome).toMatchObject({ reason: 'authority_expired' });

    // The store says what happened: the row, and the event with created_via and the reason.
    const store = await openStore(storePath, { readOnly: true });
    try {
      expect(await store.getDelegation(d['delegation_id']!)).toMatchObject({
        createdVia: 'break-glass',
        parentId: 'incident-payments',
        createdByUser: 'ada@example.com',
      });
      const created = (await store.events()).filter((e) => e.type === 'DELEGATION_CREATED');
      expect(created.map((e) => e.data)).toEqual([
        {
          delegation_id: d['delegation_id'],
          parent_id: 'incident-payments',
          depth: 1,
          created_by_agent: 'laptop',
          created_by_user: 'ada@example.com',
          created_via: 'break-glass',
          reason: 'INC-4412',
        },
      ]);
    } finally {
      await store.close();
    }
  });

  it('refuses: a verified person without the role (approver_unentitled), a ttl beyond max_ttl, an ordinary grant id; nothing is opened', async () => {
    const { dir, storePath } = await deployment();
    const open = (token: string, envelope: string, ttl: string) =>
      run(['break-glass', 'open', '--envelope', envelope, '--file', 'grant.yaml', '--reason', 'INC-1', '--ttl', ttl, ...identity(dir, token)], { cwd: dir });
    const bob = await open('bob.jwt', 'incident-payments', 'PT1H');
    expect(bob.code).toBe(1);
    expect(bob.stderr).toContain('approver_unentitled');
    expect(bob.stderr).toContain('"incident-commander" required by control "incident-response"');
    const long = await open('ada.jwt', 'incident-payments', 'PT5H');
    expect(long.code).toBe(1);
    expect(long.stderr).toContain('containment (expires_at)');
    expect(long.stderr).toContain('max_ttl');
    const ordinary = await open('ada.jwt', 'everyday', 'PT1H');
    expect(ordinary.code).toBe(1);
    expect(ordinary.stderr).toContain('a grant is not an envelope');
    const store = await openStore(storePath, { readOnly: true });
    try {
      expect(await store.delegations({ includeRevoked: true })).toEqual([]);
      expect((await store.events()).filter((e) => e.type === 'DELEGATION_REJECTED').map((e) => e.data['reason'])).toEqual([
        'approver_unentitled',
        'containment',
        'unknown_parent',
      ]);
    } finally {
      await store.close();
    }
  });

  it('needs a verified opener: no --identity-jwt, or no roles claim, is a usage error before anything is opened; --help says how', async () => {
    const { dir } = await deployment();
    const plain = await run(['break-glass', 'open', '--envelope', 'incident-payments', '--file', 'grant.yaml', '--reason', 'INC-1', '--ttl', 'PT1H'], {
      cwd: dir,
    });
    expect(plain.code).toBe(2);
    expect(plain.stderr).toContain('needs a verified opener');
    const flags = identity(dir, 'ada.jwt');
    const noRoles = flags.filter((f, i) => f !== '--approver-roles-claim' && flags[i - 1] !== '--approver-roles-claim');
    const unroled = await run(['break-glass', 'open', '--envelope', 'incident-payments', '--file', 'grant.yaml', '--reason', 'INC-1', ...noRoles], {
      cwd: dir,
    });
    expect(unroled.code).toBe(2);
    expect(unroled.stderr).toContain('--approver-roles-claim');
    const noReason = await run(['break-glass', 'open', '--envelope', 'incident-payments', '--file', 'grant.yaml', ...flags], { cwd: dir });
    expect([noReason.code, noReason.stderr.split('\n')[0]]).toEqual([2, 'Error: missing --reason']);
    const other = await run(['break-glass', 'close'], { cwd: dir });
    expect(other.stderr).toContain("the one subcommand is 'open'");
    const help = await run(['break-glass', '--help'], { cwd: dir });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('usage: ctrlrun break-glass open [--envelope ID]');
    expect(help.stdout).toContain('--approver-token-file FILE');
    expect(help.stdout).toContain('ctrlrun revoke ID');
  });
});
