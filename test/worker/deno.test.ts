/** The HTTP suite against the Deno entry (`Deno.serve`), bundled and run by the `deno` npm package. */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { bundleDeno, denoCommand, root } from './bundle.js';
import { describeWorkerHttp, TEST_ENV } from './http.case.js';

const DENO_ENV = { DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1', NO_COLOR: '1' };
const entry = bundleDeno('deno-test');

describeWorkerHttp('Deno (Deno.serve)', async () => {
  const [command, prefix] = denoCommand();
  const child = spawn(command, [...prefix, 'run', '-A', '--node-modules-dir=manual', '--no-config', await entry], {
    cwd: root,
    env: { ...process.env, ...TEST_ENV, PORT: '0', HOST: '127.0.0.1', ...DENO_ENV },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const seen = (chunk: string): void => {
      output += chunk;
      const m = /on (http:\/\/[\w.:[\]]+)/.exec(output);
      if (m) resolve(m[1]!);
    };
    child.stdout.setEncoding('utf8').on('data', seen);
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`deno exited with ${String(code)} before listening: ${output}`)));
  });
  return {
    fetch: (path, init) => fetch(`${url}${path}`, init),
    close: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
});

it('DATABASE_URL reaches store-node on Deno; a SQLite file is refused with what to use instead', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ctrlrun-deno-'));
  const url = `sqlite:${join(dir, 'ctrlrun.db')}`;
  const [command, prefix] = denoCommand();
  const run = spawnSync(command, [...prefix, 'run', '-A', '--node-modules-dir=manual', '--no-config', await entry], {
    cwd: root,
    env: { ...process.env, ...TEST_ENV, ...DENO_ENV, PORT: '0', DATABASE_URL: url },
    encoding: 'utf8',
    timeout: 30_000,
  });
  await rm(dir, { recursive: true, force: true });
  expect(run.status).toBe(1);
  expect(run.stderr.startsWith(`error: DATABASE_URL ${url}: [better-sqlite3]`)).toBe(true);
  expect(run.stderr).toContain('DATABASE_URL may be postgres://… or pglite:…');
});
