/** The HTTP suite against the Deno entry (`Deno.serve`), bundled and run by the `deno` npm package. */
import { spawn } from 'node:child_process';
import { bundleDeno, denoCommand, root } from './bundle.js';
import { describeWorkerHttp, TEST_ENV } from './http.case.js';

describeWorkerHttp('Deno (Deno.serve)', async () => {
  const entry = await bundleDeno('deno-test');
  const [command, prefix] = denoCommand();
  const child = spawn(command, [...prefix, 'run', '-A', '--node-modules-dir=manual', '--no-config', entry], {
    cwd: root,
    env: { ...process.env, ...TEST_ENV, PORT: '0', HOST: '127.0.0.1', DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1', NO_COLOR: '1' },
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
