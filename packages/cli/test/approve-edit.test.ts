// `ctrlrun approve REQUEST_ID --edit FILE`: a human approves edited arguments from a file or from
// standard input; the edit is decided again by the policy, and a bad file is named in the refusal.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main, type CliIo } from '@ctrlrun/cli';
import { createAction } from '@ctrlrun/kernel';
import { fromFile, openStore } from '@ctrlrun/store-node';
import { executable, run, seed, type RunResult } from './support.js';

const record = async (storePath: string, id: string) => {
  const store = await openStore(storePath, { readOnly: true });
  try {
    return await store.getApproval(id);
  } finally {
    await store.close();
  }
};

/** Runs `ctrlrun` in-process with `input` on standard input. */
async function withStdin(argv: string[], cwd: string, input: string): Promise<RunResult> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    cwd,
    env: {},
    readStdin: async (limit) => {
      if (new TextEncoder().encode(input).length > limit) throw new RangeError(`standard input holds more than the ${limit} bytes this command reads`);
      return input;
    },
  };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}

describe('ctrlrun approve --edit', () => {
  it('approves the arguments in FILE: the original is denied, a new request is granted, both argument sets and the new id are printed', async () => {
    const s = await seed();
    const id = s.pending[0];
    writeFileSync(join(s.dir, 'edit.json'), '{"payment_id": "txn_2", "amount": 150000}\n');
    const r = await run(['approve', id, '--edit', 'edit.json', '--as', 'alice'], { cwd: s.dir });
    expect(r.stderr).not.toMatch(/error|refused/i);
    expect(r.code).toBe(0);
    const newId = /^granted (apr_\S+) for (sha256:\S+) by alice: an edit of (\S+), which is now denied$/m.exec(r.stdout);
    expect(newId?.[3]).toBe(id);
    expect(r.stdout).toContain('proposed  "amount": 200000');
    expect(r.stdout).toContain('approved  "amount": 150000');
    expect((await record(s.storePath, id))?.status).toBe('denied');
    const fresh = await record(s.storePath, newId![1]!);
    expect(fresh?.status).toBe('granted');
    expect(fresh?.request.action.canonicalArguments).toEqual({ amount: 150000, payment_id: 'txn_2' });
    expect(fresh?.request.actionHash).toBe(newId![2]);
  });

  it("the agent's run of the original runs the edit; receipts and inspect show the edit as the receipt hashed it", async () => {
    const s = await seed();
    const id = s.pending[0];
    writeFileSync(join(s.dir, 'edit.json'), '{"payment_id": "txn_2", "amount": 150000, "note": "\\u202e"}');
    expect((await run(['approve', id, '--edit', 'edit.json', '--as', 'alice'], { cwd: s.dir })).code).toBe(0);
    const control = await fromFile({ cwd: s.dir, env: {}, principal: { agent: 'refund-agent' }, logger: { warn: () => {} } });
    const ran: unknown[] = [];
    try {
      const original = createAction(
        { name: 'stripe.refund', arguments: { payment_id: 'txn_2', amount: 200000 }, principal: { agent: 'refund-agent' } },
        { ids: control.ids },
      );
      await control.execute(original, (args) => void ran.push(args), { approvalId: id });
    } finally {
      await control.close();
    }
    expect(ran).toEqual([{ amount: 150000, note: '\u202e', payment_id: 'txn_2' }]);
    const list = await run(['receipts'], { cwd: s.dir });
    expect(list.stdout).toMatch(/stripe\.refund {2}approve\/committed {2}refund:txn_2 {2}refund-agent {2}edited by alice$/m);
    const ctr = /(ctr_\S+) {2}stripe\.refund {2}approve\/committed {2}refund:txn_2/.exec(list.stdout)![1]!;
    const shown = await run(['inspect', ctr], { cwd: s.dir });
    expect(shown.stdout).toContain(`edited by   alice, from request ${id}`);
    expect(shown.stdout).toMatch(new RegExp(`approval {4}apr_\\S+ {2}consumed by alice {2}\\(an edit of ${id}\\)`));
    const proposal = await run(['inspect', id], { cwd: s.dir });
    expect(proposal.stdout).toMatch(new RegExp(`approval {4}${id} {2}denied by alice {2}\\(answered with an edit: apr_\\S+\\)`));
    expect(shown.stdout).toMatch(/proposed {4}\{ ?"amount": 200000/);
    // The bidi override the editor typed is shown escaped, never raw.
    expect(shown.stdout).not.toContain('\u202e');
    expect(shown.stdout).toContain('\\u202e');
    expect((await run(['receipts', '--verify-chain'], { cwd: s.dir })).code).toBe(0);
  });

  it('reads the edit from standard input with -, and --json prints the proposed and approved arguments and the new id', async () => {
    const s = await seed();
    const id = s.pending[1];
    const r = await withStdin(['approve', id, '--edit', '-', '--as', 'alice', '--json'], s.dir, '{"payment_id":"txn_3","amount":250000,"__proto__":"x"}');
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(doc['edited_from']).toBe(id);
    expect(doc['status']).toBe('granted');
    expect(doc['proposed_arguments']).toEqual({ amount: 300000, payment_id: 'txn_3' });
    expect(JSON.stringify(doc['approved_arguments'])).toBe('{"__proto__":"x","amount":250000,"payment_id":"txn_3"}');
    expect(doc['request_id']).not.toBe(id);
    expect(doc['approval_id']).toBe(doc['request_id']);
    expect((await record(s.storePath, doc['request_id'] as string))?.status).toBe('granted');
    expect((await record(s.storePath, id))?.status).toBe('denied');
  });

  it('an edit the policy denies is refused with the rule and the request stays pending', async () => {
    const s = await seed();
    const id = s.pending[0];
    writeFileSync(join(s.dir, 'edit.json'), '{"payment_id": "txn_2", "amount": 9000000}');
    const r = await run(['approve', id, '--edit', 'edit.json', '--as', 'alice'], { cwd: s.dir });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('amount 9000000');
    expect(r.stderr).toContain('stays pending');
    expect((await record(s.storePath, id))?.status).toBe('pending');
  });

  it('a missing, non-regular, non-JSON, non-object or float edit is refused naming the file, and nothing is answered', async () => {
    const s = await seed();
    const id = s.pending[0];
    mkdirSync(join(s.dir, 'adir'));
    const cases: [string, string | null, RegExp][] = [
      ['missing.json', null, /missing\.json/],
      ['adir', null, /adir.*not a regular file/],
      ['bad.json', '{"amount": ', /bad\.json/],
      ['array.json', '[1, 2]', /array\.json: it holds an array/],
      ['float.json', '{"amount": 1.5}', /float\.json/],
      ['dup.json', '{"amount": 1, "amount": 2}', /dup\.json/],
    ];
    for (const [file, content, message] of cases) {
      if (content !== null) writeFileSync(join(s.dir, file), content);
      const r = await run(['approve', id, '--edit', file, '--as', 'alice'], { cwd: s.dir });
      expect(r.code, file).not.toBe(0);
      expect(r.stderr, file).toMatch(message);
    }
    const big = await withStdin(['approve', id, '--edit', '-', '--as', 'alice'], s.dir, `{"a":"${'x'.repeat(20 * 1024 * 1024)}"}`);
    expect(big.code).not.toBe(0);
    expect(big.stderr).toMatch(/standard input/);
    expect((await record(s.storePath, id))?.status).toBe('pending');
  });

  it('at a terminal, shows the request and the edited arguments and asks; only yes answers', async () => {
    const s = await seed();
    const id = s.pending[0];
    writeFileSync(join(s.dir, 'edit.json'), '{"payment_id": "txn_2", "amount": 150000, "memo": "\\u001b[2J"}');
    const asked: string[] = [];
    let stdout = '';
    const terminal = (answer: string): CliIo => ({
      stdout: (t) => void (stdout += t),
      stderr: () => undefined,
      cwd: s.dir,
      env: {},
      interactive: true,
      ask: async (q) => (asked.push(q), answer),
    });
    expect(await main(['approve', id, '--edit', 'edit.json', '--as', 'dana'], terminal('n'))).toBe(1);
    expect((await record(s.storePath, id))?.status).toBe('pending');
    expect(asked[0]).toBe(`grant ${id} (stripe.refund) with the edited arguments as dana? [y/N] `);
    expect(stdout).toContain('"amount": 200000');
    expect(stdout).toContain('  edited to   "amount": 150000');
    expect(stdout).toContain('"memo": "\\u001b[2J"');
    expect(stdout).not.toContain('\u001b');
    expect(await main(['approve', id, '--edit', 'edit.json', '--as', 'dana'], terminal('y'))).toBe(0);
    expect((await record(s.storePath, id))?.status).toBe('denied');
  });

  it('the real binary reads --edit - from a pipe, and refuses more than its input limit', async () => {
    const s = await seed();
    const bin = await executable();
    const piped = (args: string[], input: string) =>
      new Promise<RunResult>((resolve, reject) => {
        const child = spawn(process.execPath, [bin, ...args], {
          cwd: s.dir,
          env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '' },
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d: Buffer) => void (stdout += d.toString()));
        child.stderr.on('data', (d: Buffer) => void (stderr += d.toString()));
        child.stdin.on('error', () => undefined); // the child may stop reading before the end
        child.on('error', reject);
        child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
        child.stdin.end(input);
      });
    const big = await piped(['approve', s.pending[1], '--edit', '-', '--as', 'alice'], `{"a":"${'x'.repeat(17 * 1024 * 1024)}"}`);
    expect(big.code).toBe(1);
    expect(big.stderr).toMatch(/standard input holds more than the 16777216 bytes/);
    expect((await record(s.storePath, s.pending[1]))?.status).toBe('pending');
    const ok = await piped(['approve', s.pending[1], '--edit', '-', '--as', 'alice', '--json'], '{"payment_id":"txn_3","amount":100000}');
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ edited_from: s.pending[1], approved_arguments: { amount: 100000, payment_id: 'txn_3' } });
  }, 120_000);

  it('help names --edit', async () => {
    const s = await seed();
    const r = await run(['approve', '--help'], { cwd: s.dir });
    expect(r.stdout + r.stderr).toMatch(/--edit FILE/);
  });
});
