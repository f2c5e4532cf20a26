// `ctrlrun approve REQUEST_ID --edit FILE`: a human approves edited arguments from a file or from
// standard input; the edit is decided again by the policy, and a bad file is named in the refusal.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main, type CliIo } from '@ctrlrun/cli';
import { openStore } from '@ctrlrun/store-node';
import { run, seed, type RunResult } from './support.js';

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
    expect((await record(s.storePath, doc['approval_id'] as string))?.status).toBe('granted');
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

  it('help names --edit', async () => {
    const s = await seed();
    const r = await run(['approve', '--help'], { cwd: s.dir });
    expect(r.stdout + r.stderr).toMatch(/--edit FILE/);
  });
});
