// `ctrlrun mcp-operator --authority FILE`: the grants in force loaded as the gateway's --authority
// loads them (one shared loader), named in the startup block; an unreadable file or an authority
// in two places is refused before anything listens.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '@ctrlrun/cli';
import { openStore } from '@ctrlrun/store-node';
import { CLI, NODE_TS, POLICY, start, workDir } from './support.js';

const TIMEOUT = 180_000;
const IDS = ['--principal-header', 'x-agent', '--user-header', 'x-user'];
const AUTHORITY = `schema: ctrlrun.policy/v3
authority:
  grants:
    - id: refunds-for-ana
      subject: { agent: "agent-ana" }
      actions: ["mcp.pay.refund"]
    - id: lookups-for-bo
      subject: { agent: "agent-bo" }
      actions: ["mcp.pay.lookup"]
`;

/** A work directory whose SQLite store exists (the operator creates none). */
async function withStore(policy: string): Promise<string> {
  const dir = workDir(policy);
  mkdirSync(join(dir, '.ctrlrun'));
  await (await openStore(join(dir, '.ctrlrun', 'state.db'))).close();
  writeFileSync(join(dir, 'authority.yaml'), AUTHORITY);
  return dir;
}

async function ctrlrun(cwd: string, argv: string[]): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const code = await main(argv, { stdout: () => {}, stderr: (t) => void (stderr += t), cwd, env: { CTRLRUN_CONFIG: join(cwd, 'ctrlrun.yaml') } });
  return { code, stderr };
}

describe('ctrlrun mcp-operator --authority', () => {
  it(
    'names the grants in force in the startup block, and says so when there are none',
    async () => {
      const dir = await withStore(POLICY);
      for (const [extra, line] of [
        [['--authority', join(dir, 'authority.yaml')], `authority 2 grant(s) from ${join(dir, 'authority.yaml')}`],
        [[], 'no authority: section — every principal is unrestricted'],
      ] as const) {
        const op = start([...NODE_TS, CLI, 'mcp-operator', '--listen', '127.0.0.1:0', ...IDS, ...extra], { CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml') });
        try {
          await op.waitFor(/listening on (\S+)/, 120_000);
          expect(op.stdout()).toContain(`${line}\n`);
        } finally {
          expect(await op.stop(), op.stderr()).toBe(0);
        }
      }
    },
    TIMEOUT,
  );

  it(
    'an unreadable file, a malformed one, or an authority: section in the policy too: refused, nothing listens',
    async () => {
      const dir = await withStore(POLICY);
      writeFileSync(join(dir, 'bad.yaml'), 'schema: ctrlrun.policy/v3\nauthority:\n  grants: 7\n');
      const inline = await withStore(
        `${POLICY.replace('ctrlrun.policy/v2', 'ctrlrun.policy/v3')}authority:\n  grants:\n    - id: g\n      subject: { agent: "a" }\n      actions: ["**"]\n`,
      );
      const missing = await ctrlrun(dir, ['mcp-operator', '--listen', '127.0.0.1:0', ...IDS, '--authority', 'missing.yaml']);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toMatch(/--authority .*missing\.yaml cannot be read/);
      const bad = await ctrlrun(dir, ['mcp-operator', '--listen', '127.0.0.1:0', ...IDS, '--authority', 'bad.yaml']);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toMatch(/grants/);
      const twice = await ctrlrun(inline, ['mcp-operator', '--listen', '127.0.0.1:0', ...IDS, '--authority', 'authority.yaml']);
      expect(twice.code).toBe(1);
      expect(twice.stderr).toMatch(/authority is declared twice/);
    },
    TIMEOUT,
  );
});
