// `ctrlrun approvals`, and `approve`/`deny` showing the exact action and asking on a terminal
// (issue 15): in-process with a scripted terminal, through the real binary, and through a real
// pseudo-terminal (util-linux `script`).
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ApprovalRequired, createAction, LocalApprovalProvider, protect, type ApprovalRecord, type JsonObject } from '@ctrlrun/kernel';
import { requestLines } from '../src/approval-view.js';
import { visible } from '../src/format.js';
import { main, type CliIo } from '@ctrlrun/cli';
import { fromFile, openStore } from '@ctrlrun/store-node';
import { executable, run, seed, spawnCli, storeBytes, tempDir, type RunResult } from './support.js';

/** Runs `ctrlrun` in-process as if at a terminal: `answers` are typed at each question, in order. */
async function atTerminal(argv: string[], cwd: string, answers: (string | null)[], env: Record<string, string> = {}): Promise<RunResult & { asked: string[] }> {
  let stdout = '';
  let stderr = '';
  const asked: string[] = [];
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    cwd,
    env,
    interactive: true,
    ask: async (q) => {
      asked.push(q);
      if (answers.length === 0) throw new Error(`unexpected question: ${q}`);
      return answers.shift()!;
    },
  };
  const code = await main(argv, io);
  return { code, stdout, stderr, asked };
}

const status = async (storePath: string, id: string) => {
  const store = await openStore(storePath, { readOnly: true });
  try {
    return (await store.getApproval(id))?.status;
  } finally {
    await store.close();
  }
};

const NAMESPACE_POLICY = `schema: ctrlrun.policy/v2
actions:
  k8s.delete_namespace:
    effect: "namespace:{cluster}:{name}"
    decision: approve
`;

/** A store with one request whose arguments an agent chose to confuse a person: `__proto__`, an escape sequence, a fake line. */
async function hostile(): Promise<{ dir: string; storePath: string; id: string }> {
  const dir = tempDir();
  writeFileSync(join(dir, 'ctrlrun.yaml'), NAMESPACE_POLICY);
  const control = await fromFile({ cwd: dir, env: {}, principal: { agent: 'ops-agent' }, logger: { warn: () => {} } });
  const args = JSON.parse('{"cluster":"c1","name":"prod\\u001b[2J\\ngranted: nothing","__proto__":"hidden?"}') as JsonObject;
  const err = await protect(() => null, { control, name: 'k8s.delete_namespace' })(args).catch((e: unknown) => e);
  await control.close();
  if (!(err instanceof ApprovalRequired)) throw new Error(`expected ApprovalRequired, got ${String(err)}`);
  return { dir, storePath: join(dir, '.ctrlrun', 'state.db'), id: err.requestId };
}

describe('ctrlrun approvals', () => {
  it('lists the pending requests with action, arguments, requester and expiry, and the command that answers them', async () => {
    const s = await seed();
    const before = storeBytes(s.storePath);
    const r = await run(['approvals'], { cwd: s.dir });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    // Oldest first, then by id (both requests may share a millisecond).
    const line = (id: string) => lines.find((l) => l.startsWith(id))!;
    expect(line(s.pending[0])).toMatch(
      new RegExp(
        `^${s.pending[0]} {2}pending {2}stripe\\.refund {2}\\{"amount":200000,"payment_id":"txn_2"\\} {2}by refund-agent {2}requested \\S+Z {2}expires \\S+Z$`,
      ),
    );
    expect(line(s.pending[1])).toContain(`${s.pending[1]}  pending  stripe.refund  {"amount":300000,"payment_id":"txn_3"}`);
    expect(lines[2]).toBe('answer with: npx ctrlrun approve REQUEST_ID --as NAME   (or: npx ctrlrun deny REQUEST_ID --as NAME)');
    expect(storeBytes(s.storePath)).toBe(before); // a reader writes nothing
  });

  it('--json is one ctrlrun.approvals/v1 document with the whole action and the rule', async () => {
    const s = await seed();
    const r = await run(['approvals', '--json'], { cwd: s.dir });
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout) as { schema: string; status: string; next_after: string | null; approvals: Record<string, unknown>[] };
    expect([doc.schema, doc.status, doc.next_after]).toEqual(['ctrlrun.approvals/v1', 'pending', null]);
    expect(doc.approvals.map((a) => a['request_id']).sort()).toEqual([...s.pending].sort());
    // The deprecated approval_id is the same id, kept for a release.
    for (const a of doc.approvals) expect(a['approval_id']).toBe(a['request_id']);
    for (const a of doc.approvals) for (const k of ['created_at', 'expires_at']) expect(a[k]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(doc.approvals.find((a) => a['request_id'] === s.pending[0])).toMatchObject({
      status: 'pending',
      expired: false,
      hash_matches: true,
      rule: 'rule[1]',
      action: {
        name: 'stripe.refund',
        arguments: { amount: 200000, payment_id: 'txn_2' },
        principal: { agent: 'refund-agent', user: null },
        environment: 'production',
      },
    });
    expect(doc.approvals[0]!['action_hash']).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(doc.approvals[1]!['action_hash']).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('--status, --limit with the next page named, --after, --all; bad flags are usage errors', async () => {
    const s = await seed();
    await run(['approve', s.pending[0], '--as', 'dana'], { cwd: s.dir });
    expect((await run(['approvals', '--json'], { cwd: s.dir })).stdout).not.toContain(s.pending[0]);
    const granted = JSON.parse((await run(['approvals', '--status', 'granted', '--json'], { cwd: s.dir })).stdout) as {
      approvals: { approval_id: string; approver: string }[];
    };
    expect(granted.approvals).toEqual([expect.objectContaining({ approval_id: s.pending[0], approver: 'dana' })]);
    // The store's order (oldest first, then id) decides which is first.
    const order = (
      JSON.parse((await run(['approvals', '--status', 'all', '--json'], { cwd: s.dir })).stdout) as { approvals: { approval_id: string }[] }
    ).approvals.map((a) => a.approval_id);
    expect([...order].sort()).toEqual([...s.pending].sort());
    const first = await run(['approvals', '--status', 'all', '--limit', '1'], { cwd: s.dir });
    expect(first.stdout).toContain(order[0]);
    expect(first.stdout).not.toContain(order[1]);
    expect(first.stdout).toContain(`more: ctrlrun approvals --after ${order[0]} --status all --limit 1`);
    const firstJson = JSON.parse((await run(['approvals', '--status', 'all', '--limit', '1', '--json'], { cwd: s.dir })).stdout) as { next_after: string };
    expect(firstJson.next_after).toBe(order[0]);
    const second = await run(['approvals', '--status', 'all', '--limit', '1', '--after', order[0]!], { cwd: s.dir });
    expect(second.stdout).toContain(order[1]);
    expect(second.stdout).not.toContain('more:');
    const every = JSON.parse((await run(['approvals', '--status', 'all', '--all', '--json'], { cwd: s.dir })).stdout) as {
      approvals: unknown[];
      next_after: null;
    };
    expect([every.approvals.length, every.next_after]).toEqual([2, null]);
    expect((await run(['approvals', '--status', 'denied'], { cwd: s.dir })).stdout).toBe('no denied approval requests\n');
    for (const argv of [
      ['--status', 'open'],
      ['--limit', '0'],
      ['--limit', '1.5'],
      ['--limit', '10001'],
    ]) {
      const bad = await run(['approvals', ...argv], { cwd: s.dir });
      expect(bad.code, argv.join(' ')).toBe(2);
      expect(bad.stderr).toMatch(/^Error: --(status|limit) /);
    }
    expect((await run(['approvals', '--after', 'apr_nope'], { cwd: s.dir })).code).toBe(1);
  });

  it('pages through many requests with --all (more than one store page)', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'ctrlrun.yaml'), NAMESPACE_POLICY);
    const control = await fromFile({ cwd: dir, env: {}, principal: { agent: 'ops-agent' }, logger: { warn: () => {} }, jsonl: false });
    const del = protect(() => null, { control, name: 'k8s.delete_namespace' });
    for (let i = 0; i < 7; i++) await del({ cluster: 'c', name: `ns${i}` }).catch(() => undefined);
    await control.close();
    const pages: string[] = [];
    let after: string | null = null;
    do {
      const r = await run(['approvals', '--limit', '3', '--json', ...(after ? ['--after', after] : [])], { cwd: dir });
      const doc = JSON.parse(r.stdout) as { approvals: { approval_id: string }[]; next_after: string | null };
      pages.push(...doc.approvals.map((a) => a.approval_id));
      after = doc.next_after;
    } while (after !== null);
    const all = JSON.parse((await run(['approvals', '--all', '--json'], { cwd: dir })).stdout) as { approvals: { approval_id: string }[] };
    expect(pages).toHaveLength(7);
    expect(new Set(pages).size).toBe(7);
    expect(all.approvals.map((a) => a.approval_id)).toEqual(pages);
  });

  it('an agent-chosen argument cannot add or rewrite a line; __proto__ is shown as the key it is', async () => {
    const h = await hostile();
    const r = await run(['approvals'], { cwd: h.dir });
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain('\u001b');
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(2); // the request and the hint
    expect(r.stdout).toContain('"__proto__":"hidden?"');
  });

  it('a list line shows every argument key: many keys and a long value cannot push amount and payment_id out of the line; a cut says how much', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'ctrlrun.yaml'), NAMESPACE_POLICY);
    const control = await fromFile({ cwd: dir, env: {}, principal: { agent: 'ops-agent' }, logger: { warn: () => {} } });
    const args: JsonObject = { cluster: 'c1', name: 'n1', aaa: 'x'.repeat(500), amount: 200000, payment_id: 'in_9' };
    for (let i = 0; i < 30; i++) args[`a${String(i).padStart(2, '0')}`] = i; // sort before "amount"
    const err = await protect(() => null, { control, name: 'k8s.delete_namespace' })(args).catch((e: unknown) => e);
    await control.close();
    expect(err).toBeInstanceOf(ApprovalRequired);
    const r = await run(['approvals'], { cwd: dir });
    expect(r.code).toBe(0);
    const line = r.stdout.split('\n')[0]!;
    expect(line).toContain('"amount":200000');
    expect(line).toContain('"payment_id":"in_9"');
    for (let i = 0; i < 30; i++) expect(line).toContain(`"a${String(i).padStart(2, '0')}":${i}`);
    expect(line).toContain(`"aaa":"${'x'.repeat(16)}…(+484 characters cut)"`);
  });
});

describe('approve and deny show the exact action and ask on a terminal', () => {
  it('shows name, every argument as hashed, hash, requester, expiry and rule, then asks; no is exit 1 and nothing written', async () => {
    const s = await seed();
    const before = storeBytes(s.storePath);
    const no = await atTerminal(['approve', s.pending[0], '--as', 'dana'], s.dir, ['n']);
    expect(no.code).toBe(1);
    expect(no.asked).toEqual([`grant ${s.pending[0]} (stripe.refund) as dana? [y/N] `]);
    const lines = no.stdout.split('\n');
    expect(lines[0]).toBe(`approval request ${s.pending[0]}  (pending)`);
    expect(lines).toContain('  action      stripe.refund');
    expect(lines).toContain('  arguments   "amount": 200000');
    expect(lines).toContain('              "payment_id": "txn_2"');
    expect(lines.some((l) => /^ {2}hash {8}sha256:[0-9a-f]{64}$/.test(l))).toBe(true);
    expect(lines.some((l) => /^ {2}requester {3}refund-agent, at \S+Z$/.test(l))).toBe(true);
    expect(lines.some((l) => /^ {2}expires {5}\S+Z$/.test(l))).toBe(true);
    expect(lines).toContain('  rule        rule[1] (when requested)');
    expect(lines.find((l) => l.includes('now: '))).toMatch(/now: needs a human's approval: .*amount 200000 .*\(rule\[1\]\)$/);
    expect(no.stderr).toBe('Error: not granted: the answer was "n"; nothing was written (give --yes to answer without asking)\n');
    expect(storeBytes(s.storePath)).toBe(before);
    // End of input is no answer, too.
    expect((await atTerminal(['deny', s.pending[0], '--as', 'dana'], s.dir, [null])).code).toBe(1);
    expect(await status(s.storePath, s.pending[0])).toBe('pending');

    const yes = await atTerminal(['approve', s.pending[0], '--as', 'dana'], s.dir, ['y']);
    expect(yes.code).toBe(0);
    expect(yes.stdout).toMatch(new RegExp(`\\ngranted ${s.pending[0]} for sha256:[0-9a-f]{64} by dana\\nexpires \\S+Z\\n$`));
    expect(await status(s.storePath, s.pending[0])).toBe('granted');
    const deny = await atTerminal(['deny', s.pending[1], '--as', 'dana'], s.dir, ['YES']);
    expect([deny.code, deny.asked[0]]).toEqual([0, `deny ${s.pending[1]} (stripe.refund) as dana? [y/N] `]);
    expect(await status(s.storePath, s.pending[1])).toBe('denied');
  });

  it('--yes answers without showing or asking; off a terminal nothing is asked and the output is what scripts read', async () => {
    const s = await seed();
    const yes = await atTerminal(['approve', s.pending[0], '--as', 'dana', '--yes'], s.dir, []);
    expect(yes.code).toBe(0);
    expect(yes.stdout).toMatch(/^granted apr_[0-9a-f]{32} for sha256:[0-9a-f]{64} by dana\nexpires \S+Z\n$/);
    const script = await run(['deny', s.pending[1], '--as', 'dana'], { cwd: s.dir });
    expect(script).toEqual({ code: 0, stdout: `denied ${s.pending[1]} by dana\n`, stderr: '' });
  });

  it('an agent-chosen argument is escaped in the display: one line per argument, no escape sequence reaches the terminal', async () => {
    const h = await hostile();
    const r = await atTerminal(['deny', h.id, '--as', 'dana'], h.dir, ['n']);
    expect(r.code).toBe(1);
    expect(r.stdout).not.toContain('\u001b');
    const lines = r.stdout.split('\n');
    // Canonical key order: __proto__ sorts first, and is shown as the key it is.
    expect(lines).toContain('  arguments   "__proto__": "hidden?"');
    expect(lines).toContain('              "cluster": "c1"');
    expect(lines).toContain('              "name": "prod\\u001b[2J\\ngranted: nothing"');
    expect(lines.filter((l) => l.startsWith('granted'))).toEqual([]);
  });

  it('property: whatever the agent puts in the arguments, the display has one visible line per canonical argument', () => {
    // Mostly the characters that move a terminal's cursor or text, and some of everything else.
    const unit = fc.oneof(
      fc.constantFrom('\n', '\r', '\t', '\u001b', '\u0085', '\u2028', '\u2029', '\u202e', '\u2066', '\u200b', '"', '\\', ' ', 'a'),
      fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
    );
    const text = (maxLength: number) => fc.string({ unit, maxLength });
    const key = text(12).filter((k) => k !== 'data_scope');
    const value = fc.oneof(text(40), fc.integer(), fc.boolean(), fc.constant(null), fc.array(text(8), { maxLength: 3 }));
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(key, value), { selector: ([k]) => k, maxLength: 6 }), (pairs) => {
        let action;
        try {
          action = createAction({ name: 'k8s.delete_namespace', arguments: Object.fromEntries(pairs) as JsonObject, principal: { agent: 'a' } });
        } catch {
          return; // the kernel refused the arguments (e.g. a lone surrogate): nothing to show
        }
        const record: ApprovalRecord = {
          request: {
            requestId: 'apr_0',
            actionHash: action.actionHash,
            action,
            createdAt: '2026-01-01T00:00:00+00:00',
            expiresAt: '2099-01-01T00:00:00+00:00',
            policyHash: null,
          },
          status: 'pending',
          approver: null,
          grantedAt: null,
          consumedAt: null,
        };
        // As the terminal receives them: each line through visible(), as out() writes it.
        const shown = requestLines({ record, rule: 'decision' }, null).map(visible).join('\n').split('\n');
        const argLines = shown.filter((l) => l.startsWith('  arguments   ') || l.startsWith(' '.repeat(14)));
        const keys = Object.keys(action.canonicalArguments);
        expect(argLines).toHaveLength(Math.max(1, keys.length));
        keys.forEach((k, i) => expect(argLines[i]!.slice(14).startsWith(visible(JSON.stringify(k)))).toBe(true));
        for (const l of shown) expect(l).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
      }),
      { numRuns: 300 },
    );
  });

  it('a request whose stored action was altered is neither shown nor answered', async () => {
    const s = await seed();
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(s.storePath);
    const row = db.prepare('SELECT action_json FROM approvals WHERE approval_id = ?').get(s.pending[0]) as { action_json: string };
    db.prepare('UPDATE approvals SET action_json = ? WHERE approval_id = ?').run(row.action_json.replace('200000', '2000'), s.pending[0]);
    db.close();
    const r = await atTerminal(['approve', s.pending[0], '--as', 'dana'], s.dir, ['y']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      /^Error: approval request apr_\S+: its stored action hashes to sha256:\S+, not the sha256:\S+ it is bound to; the record was altered/,
    );
    expect(await status(s.storePath, s.pending[0])).toBe('pending');
    expect((await run(['approvals'], { cwd: s.dir })).stdout).toContain('(ALTERED: the stored action does not match its hash)');
  });

  it('--json carries the answer and the whole request; on a terminal the display goes to stderr', async () => {
    const s = await seed();
    const r = await atTerminal(['approve', s.pending[0], '--as', 'dana', '--json'], s.dir, ['y']);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('  action      stripe.refund');
    const doc = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(doc).toMatchObject({
      request_id: s.pending[0],
      approval_id: s.pending[0],
      status: 'granted',
      approver: 'dana',
      request: { status: 'pending', action: { arguments: { amount: 200000, payment_id: 'txn_2' } }, rule: 'rule[1]' },
    });
    const denied = await run(['deny', s.pending[1], '--as', 'dana', '--json'], { cwd: s.dir });
    expect(denied.code).toBe(0);
    expect(JSON.parse(denied.stdout)).toMatchObject({
      request_id: s.pending[1],
      approval_id: s.pending[1],
      status: 'denied',
      request: { request_id: s.pending[1] },
    });
  });
});

describe('an application composed by fromFile and the CLI answering it share one store', () => {
  it('protect({ wait }) names the request and the command; ctrlrun approve answers it; the call runs once', async () => {
    const s = await seed();
    const told: string[] = [];
    const control = await fromFile({ cwd: s.dir, env: {}, principal: { agent: 'refund-agent' }, logger: { warn: (m: string) => void told.push(m) } });
    let runs = 0;
    const poll = { sleep: async () => new Promise<void>((r) => setTimeout(r, 20)) };
    const refund = protect((a: { payment_id: string; amount: number }) => `re_${a.payment_id}_${++runs}`, {
      control,
      name: 'stripe.refund',
      wait: { provider: new LocalApprovalProvider(control.store, { pollMs: 20, ...poll }), timeoutMs: 60_000 },
    });
    const waiting = refund({ payment_id: 'txn_9', amount: 250000 });
    // The application said what it waits for: the request id and the command that answers it.
    while (told.length === 0) await new Promise((r) => setTimeout(r, 10));
    const id = /approval request (apr_[0-9a-f]{32})/.exec(told[0]!)![1]!;
    expect(told[0]).toContain(`answer with: npx ctrlrun approve ${id} --as NAME`);
    const answer = await run(['approve', id, '--as', 'dana'], { cwd: s.dir });
    expect(answer.code).toBe(0);
    expect(await waiting).toBe('re_txn_9_1');
    await control.close();
    expect(runs).toBe(1);
  });
});

describe('through the real binary', () => {
  it('approvals --help, --json; approve --json and deny --help', async () => {
    const s = await seed();
    const help = await spawnCli(['approvals', '--help'], { cwd: s.dir });
    expect(help.code).toBe(0);
    for (const flag of ['--status STATUS', '--limit N', '--after REQUEST_ID', '--all', '--json', '--store-url URL']) expect(help.stdout).toContain(flag);
    const list = await spawnCli(['approvals', '--json'], { cwd: s.dir });
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as { approvals: unknown[] }).approvals).toHaveLength(2);
    const denyHelp = await spawnCli(['deny', '--help'], { cwd: s.dir });
    expect(denyHelp.stdout).toContain('--yes');
    expect(denyHelp.stdout).toContain('On a terminal');
    // Not a terminal (stdin is not a TTY): answered without asking, as scripts expect.
    const granted = await spawnCli(['approve', s.pending[0], '--as', 'dana', '--json'], { cwd: s.dir });
    expect(granted.stderr).toBe('');
    expect(JSON.parse(granted.stdout)).toMatchObject({ request_id: s.pending[0], approval_id: s.pending[0], status: 'granted', approver: 'dana' });
    const human = await spawnCli(['approvals', '--status', 'granted'], { cwd: s.dir });
    expect(human.stdout).toContain(`${s.pending[0]}  granted  stripe.refund`);
    expect(human.stdout).toContain('answered by dana');
  });
});

/** Runs the real binary inside a pseudo-terminal (util-linux `script`), typing `input` once the prompt appears. */
function inPty(args: string[], cwd: string, input: string): Promise<{ code: number; output: string }> {
  return (async () => {
    const bin = await executable();
    const command = [process.execPath, bin, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    return new Promise((resolve, reject) => {
      const child = spawn('script', ['-qfec', command, '/dev/null'], {
        cwd,
        env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', TERM: 'dumb' },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let output = '';
      let typed = false;
      const kill = setTimeout(() => child.kill('SIGKILL'), 120_000);
      child.stdout.on('data', (d: Buffer) => {
        output += d.toString();
        if (!typed && output.includes('[y/N]')) {
          typed = true;
          child.stdin.write(input);
        }
      });
      child.on('error', reject);
      child.on('close', (code) => {
        clearTimeout(kill);
        resolve({ code: code ?? -1, output });
      });
    });
  })();
}

const hasScript = spawnSync('script', ['--version']).status === 0;
if (!hasScript) console.warn('skipped: the pseudo-terminal tests need util-linux `script`, which is not installed here');

describe.skipIf(!hasScript)('in a real pseudo-terminal', () => {
  it('approve shows the action and asks; "n" writes nothing; "y" grants', async () => {
    const s = await seed();
    const no = await inPty(['approve', s.pending[0], '--as', 'dana'], s.dir, 'n\r');
    expect(no.output).toContain(`approval request ${s.pending[0]}  (pending)`);
    expect(no.output).toContain('"payment_id": "txn_2"');
    expect(no.output).toContain(`grant ${s.pending[0]} (stripe.refund) as dana? [y/N]`);
    expect(no.output).toContain('Error: not granted: the answer was "n"');
    expect(no.code).toBe(1);
    expect(await status(s.storePath, s.pending[0])).toBe('pending');
    const yes = await inPty(['approve', s.pending[0], '--as', 'dana'], s.dir, 'y\r');
    expect(yes.output).toMatch(new RegExp(`granted ${s.pending[0]} for sha256:[0-9a-f]{64} by dana`));
    expect(yes.code).toBe(0);
    expect(await status(s.storePath, s.pending[0])).toBe('granted');
    // --yes in a terminal asks nothing.
    const direct = await inPty(['deny', s.pending[1], '--as', 'dana', '--yes'], s.dir, '');
    expect(direct.output).not.toContain('[y/N]');
    expect(direct.code).toBe(0);
    expect(await status(s.storePath, s.pending[1])).toBe('denied');
  }, 240_000);
});
