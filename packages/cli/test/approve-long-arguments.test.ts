// `ctrlrun approve` at a terminal: arguments padded to push what matters off the screen. Every
// argument is shown whole (nothing the agent chose is hidden), and when they are long, a short
// view of every key, long strings cut and marked, comes right above the question.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ApprovalRequired, Control, EXAMPLE_POLICY_YAML, loadPolicy, protect } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { main, type CliIo } from '@ctrlrun/cli';

/** Files a request for `args` (an action the example policy sends to a human) and returns what an 80×24 terminal shows when `ctrlrun approve` asks. */
async function screenAtQuestion(args: Record<string, unknown>): Promise<{ rows: string[]; whole: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-approve-long-'));
  writeFileSync(join(dir, 'ctrlrun.yaml'), EXAMPLE_POLICY_YAML);
  mkdirSync(join(dir, '.ctrlrun'));
  const store = await openStore(join(dir, '.ctrlrun', 'state.db'));
  let id = '';
  try {
    const control = new Control({ policy: loadPolicy(EXAMPLE_POLICY_YAML), store, principal: { agent: 'ops-agent' }, logger: { warn: () => {} } });
    await protect<Record<string, unknown>, unknown>(() => 'deleted', { control, name: 'k8s.delete_namespace' })(args).catch((e: unknown) => {
      if (!(e instanceof ApprovalRequired)) throw e;
      id = e.requestId;
    });
  } finally {
    await store.close();
  }
  expect(id).toMatch(/^apr_/);
  let screen = '';
  const io: CliIo = {
    stdout: (t) => void (screen += t),
    stderr: (t) => void (screen += t),
    cwd: dir,
    env: {},
    interactive: true,
    ask: async (q) => {
      screen += q;
      return 'n';
    },
  };
  expect(await main(['approve', id, '--as', 'ana'], io)).toBe(1);
  const upToQuestion = screen.slice(0, screen.indexOf('[y/N]') + 5);
  const rows: string[] = [];
  for (const line of upToQuestion.split('\n')) {
    if (line.length === 0) rows.push('');
    for (let i = 0; i < line.length; i += 80) rows.push(line.slice(i, i + 80));
  }
  return { rows: rows.slice(-24), whole: upToQuestion };
}

describe('ctrlrun approve: arguments too long for the screen', () => {
  it('a value padded with 4,000 spaces: the cluster it names is on the screen the question is asked on, and the whole value is above', async () => {
    const cluster = `prod-eu-1${' '.repeat(4000)}sandbox-copy`;
    const { rows, whole } = await screenAtQuestion({ cluster, name: 'payments' });
    expect(rows.some((r) => r.includes('prod-eu-1'))).toBe(true);
    expect(rows.some((r) => r.includes('"name":"payments"'))).toBe(true);
    expect(whole).toContain(JSON.stringify(cluster));
    expect(whole).toMatch(/in short {4}\{"cluster":"prod-eu-1 +…\(\+\d+ characters cut\)","name":"payments"\}/);
  });

  it('short arguments: no second view', async () => {
    const { whole } = await screenAtQuestion({ cluster: 'prod-eu-1', name: 'payments' });
    expect(whole).not.toContain('in short');
  });
});
