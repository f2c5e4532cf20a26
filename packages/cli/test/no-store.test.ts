// Right after `ctrlrun init` nothing has been recorded and the store file does not exist: a
// listing says what it says of an empty store (exit 0) and creates nothing; an answer still
// refuses (issue 35).
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run, seed, spawnCli, tempDir } from './support.js';

const NOTE = /^\(no store at (.+) yet: nothing has been recorded there; your protected code creates it\)\n/;

describe('listings before anything was recorded', { timeout: 120_000 }, () => {
  it('after init: approvals says nothing is pending, and every listing reads an empty store; no file is created', async () => {
    const dir = tempDir();
    expect((await run(['init'], { cwd: dir })).code).toBe(0);
    const storePath = join(dir, '.ctrlrun', 'state.db');
    const cases: [string[], string][] = [
      [['approvals'], 'no pending approval requests\n'],
      [['approvals', '--status', 'all'], 'no approval requests\n'],
      [['approvals', '--json'], '{"schema":"ctrlrun.approvals/v1","status":"pending","approvals":[],"next_after":null}\n'],
      [['receipts'], 'no receipts yet\n'],
      [['receipts', '--verify-chain'], 'chain: 0 of 0 receipts verified\nthe chain is intact\n'],
      [['effects'], 'no effects yet\n'],
      [['effects', '--state', 'ambiguous'], 'no effects are ambiguous\n'],
    ];
    for (const [argv, stdout] of cases) {
      const r = await run(argv, { cwd: dir });
      expect({ argv, code: r.code, stdout: r.stdout }).toEqual({ argv, code: 0, stdout });
      expect(NOTE.exec(r.stderr)?.[1]).toBe(storePath);
    }
    const stats = await run(['stats', '--json'], { cwd: dir });
    expect(stats.code).toBe(0);
    expect(JSON.parse(stats.stdout)).toMatchObject({ actions: 0, denied: 0, approvals_requested: 0, approvals_pending: 0 });
    // inspect of an id the store cannot know is still a refusal, after the note.
    const inspect = await run(['inspect', 'act_nope'], { cwd: dir });
    expect(inspect.code).toBe(1);
    expect(inspect.stderr).toMatch(new RegExp(`${NOTE.source}Error: no action act_nope\\n$`));
    expect(readdirSync(join(dir, '.ctrlrun'))).toEqual([]);
    expect(existsSync(storePath)).toBe(false);
  });

  it('a store path in a directory that does not exist: nothing is made there either (the real binary)', async () => {
    const dir = tempDir();
    const storePath = join(dir, 'not-yet', 'deeper', 'state.db');
    const r = await spawnCli(['approvals'], { cwd: dir, env: { CTRLRUN_STATE: storePath } });
    expect(r).toEqual({ code: 0, stdout: 'no pending approval requests\n', stderr: expect.stringMatching(NOTE) as unknown });
    expect(existsSync(join(dir, 'not-yet'))).toBe(false);
  });

  it('the answers still refuse a missing store, and an existing store lists as before (no note)', async () => {
    const dir = tempDir();
    await run(['init'], { cwd: dir });
    const approve = await run(['approve', 'apr_00000000000000000000000000000000', '--as', 'dana'], { cwd: dir });
    expect(approve.code).toBe(1);
    expect(approve.stderr).toMatch(/^Error: no store at /);
    expect(readdirSync(join(dir, '.ctrlrun'))).toEqual([]);
    const s = await seed();
    const listed = await run(['approvals'], { cwd: s.dir });
    expect(listed.code).toBe(0);
    expect(listed.stderr).toBe('');
    expect(listed.stdout).toContain(s.pending[0]);
  });
});
