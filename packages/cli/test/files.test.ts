// Files the CLI reads must be regular files (issue 10, finding 13): a FIFO would block it forever,
// /dev/zero never ends, a directory is a mistake. Each is refused by name, quickly, for every file
// the CLI reads: the policy ($CTRLRUN_CONFIG), verify's --authority, delegate's --file, and the
// state directory's events.jsonl it appends to. Run through the real executable, killed if it
// hangs, so a regression is a reported failure and never a stuck test run.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readRegularFile, UnreadableFile, MAX_INPUT_BYTES } from '../src/files.js';
import { AUTHORITY_POLICY, grantYaml, run, seed, spawnCli, storeBytes, tempDir } from './support.js';

/** Generous: a spawned CLI answers in about a second here; only a hang comes near this. */
const HANG_KILL_MS = 60_000;

function fifo(path: string): string {
  const r = spawnSync('mkfifo', [path]);
  if (r.status !== 0) throw new Error(`mkfifo ${path} failed: ${r.stderr}`);
  return path;
}

/** Every kind of non-regular file, and how the refusal names it. */
function specials(dir: string): [string, string, RegExp][] {
  mkdirSync(join(dir, 'a-directory'));
  return [
    ['FIFO', fifo(join(dir, 'policy.fifo')), /named pipe \(FIFO\), not a regular file/],
    ['/dev/zero', '/dev/zero', /character device, not a regular file/],
    ['directory', join(dir, 'a-directory'), /directory, not a regular file/],
  ];
}

describe('readRegularFile', () => {
  it('reads a regular file and refuses the rest with a reason', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'p.yaml'), 'schema: x\n');
    expect(readRegularFile(join(dir, 'p.yaml'))).toBe('schema: x\n');
    for (const [, path, says] of specials(dir)) {
      const err = (() => {
        try {
          readRegularFile(path);
          return null;
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(UnreadableFile);
      expect((err as UnreadableFile).reason).toBe('not_regular');
      expect((err as Error).message).toMatch(says);
    }
    expect(() => readRegularFile(join(dir, 'absent.yaml'))).toThrow(expect.objectContaining({ reason: 'missing' }));
    expect(MAX_INPUT_BYTES).toBeGreaterThanOrEqual(1024 * 1024);
  });
});

describe('every file the CLI reads', { timeout: 16 * HANG_KILL_MS }, () => {
  it('CTRLRUN_CONFIG naming a FIFO, /dev/zero or a directory: one line naming it, no hang, nothing written', async () => {
    const s = await seed();
    const before = storeBytes(s.storePath);
    for (const [kind, path, says] of specials(s.dir)) {
      for (const argv of [
        ['stats'],
        ['verify'],
        ['approve', s.pending[0], '--as', 'dana'],
        ['revoke', 'dlg_00000000000000000000000000000000', '--by', 'dana'],
      ]) {
        // verify's --store-url is its scratch backend, never the operator's store.
        const args = argv[0] === 'verify' ? argv : [...argv, '--store-url', `sqlite://${s.storePath}`];
        const r = await spawnCli(args, {
          cwd: s.dir,
          env: { CTRLRUN_CONFIG: path },
          killAfterMs: HANG_KILL_MS,
        });
        const what = `${argv[0]} with CTRLRUN_CONFIG=${kind}`;
        expect(r.signal, `${what} hung and was killed`).toBeUndefined();
        expect(r.code, what).toBe(argv[0] === 'verify' ? 2 : 1);
        expect(r.stdout, what).toBe('');
        expect(r.stderr, what).toMatch(/^Error: [^\n]+\n$/);
        expect(r.stderr, what).toContain(path);
        expect(r.stderr, what).toMatch(says);
      }
    }
    expect(storeBytes(s.storePath)).toBe(before);
  });

  it('verify --authority, policy check --authority and delegate --file naming a FIFO or a device are refused by name', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'ctrlrun.yaml'), AUTHORITY_POLICY);
    writeFileSync(join(dir, 'finance.yaml'), grantYaml(2500000));
    for (const [kind, path, says] of specials(dir)) {
      const authority = await spawnCli(['verify', '--authority', path], { cwd: dir, killAfterMs: HANG_KILL_MS });
      expect(authority.signal, `verify --authority ${kind} hung`).toBeUndefined();
      expect(authority.code).toBe(2);
      expect(authority.stderr).toMatch(says);
      const check = await spawnCli(['policy', 'check', '--authority', path], { cwd: dir, killAfterMs: HANG_KILL_MS });
      expect(check.signal, `policy check --authority ${kind} hung`).toBeUndefined();
      expect(check.code).toBe(2);
      expect(check.stderr).toMatch(says);
      const grant = await spawnCli(['delegate', '--parent', 'head-of-support', '--file', path, '--as', 'head-of-support/dana@example.com'], {
        cwd: dir,
        killAfterMs: HANG_KILL_MS,
      });
      expect(grant.signal, `delegate --file ${kind} hung`).toBeUndefined();
      expect(grant.code).toBe(1);
      expect(grant.stderr).toMatch(/^Error: the grant file .* cannot be read: .*\n$/);
      expect(grant.stderr).toMatch(says);
    }
    expect(existsSync(join(dir, '.ctrlrun', 'state.db'))).toBe(false);
  });

  it('a store path naming a FIFO, /dev/zero or a directory is refused by name, for readers and writers', async () => {
    const s = await seed();
    for (const [kind, path] of specials(tempDir())) {
      for (const argv of [
        ['receipts'],
        ['effects'],
        ['approve', s.pending[0], '--as', 'dana'],
        ['revoke', 'dlg_00000000000000000000000000000000', '--by', 'dana'],
      ]) {
        for (const env of [{ CTRLRUN_STATE: path }, { CTRLRUN_STORE_URL: `sqlite://${path}` }] as Record<string, string>[]) {
          const r = await spawnCli(argv, { cwd: s.dir, env, killAfterMs: HANG_KILL_MS });
          const what = `${argv[0]} with ${JSON.stringify(env)} (${kind})`;
          expect(r.signal, `${what} hung`).toBeUndefined();
          expect(r.code, what).toBe(1);
          expect(r.stderr, what).toMatch(/^Error: [^\n]*(not a regular file|is a directory)[^\n]*\n$/);
        }
      }
    }
  });

  it('a FIFO planted as events.jsonl is not waited on: the answer is recorded, the sink failure is a warning', async () => {
    const s = await seed();
    fifo(join(s.dir, '.ctrlrun', 'events.jsonl'));
    const r = await spawnCli(['approve', s.pending[0], '--as', 'dana'], { cwd: s.dir, killAfterMs: HANG_KILL_MS });
    expect(r.signal, 'approve hung on a FIFO sink').toBeUndefined();
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^granted /);
    expect(r.stderr).toMatch(/^warning: .*jsonl/m);
    // In-process too (a hang here would block the test worker; the spawned run above proves it does not).
    expect((await run(['receipts', '--last', '1'], { cwd: s.dir })).code).toBe(0);
  });
});
