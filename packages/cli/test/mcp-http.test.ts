// What the MCP commands parse from their command line: --upstream-command, --listen, --path.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../src/errors.js';
import { checkPath, parseListen, splitCommand } from '../src/mcp-http.js';

/** Quotes a word for splitCommand the way a person would in a shell. */
const quote = (w: string) => (w === '' || /[\s'"\\]/.test(w) ? (w.includes("'") ? `"${w.replace(/["\\]/g, '\\$&')}"` : `'${w}'`) : w);

describe('splitCommand', () => {
  it('splits words and keeps quoted spaces; every word survives quoting (property)', () => {
    expect(splitCommand("npx -y  @scope/server \"/a dir/x\" 'it''s'")).toEqual(['npx', '-y', '@scope/server', '/a dir/x', 'its']);
    expect(splitCommand('node "say \\"hi\\""')).toEqual(['node', 'say "hi"']);
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: fc.constantFrom('a', 'b', ' ', '\t', "'", '"', '\\', '/', '-', 'é') }), { minLength: 1, maxLength: 6 }),
        (words) => {
          expect(splitCommand(words.map(quote).join(' '))).toEqual(words);
        },
      ),
    );
  });

  it('refuses an empty command and an unterminated quote', () => {
    for (const bad of ['', '   ', 'node "x', "node 'x"]) expect(() => splitCommand(bad), bad).toThrow(UsageError);
  });
});

describe('parseListen and checkPath', () => {
  it('HOST:PORT with IPv6 in brackets; anything else is a usage error', () => {
    expect(parseListen('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseListen('[::1]:8900')).toEqual({ host: '[::1]', port: 8900 });
    expect(parseListen('localhost:65535')).toEqual({ host: 'localhost', port: 65535 });
    for (const bad of ['127.0.0.1', ':80', '127.0.0.1:65536', '::1:80', 'a b:1', '127.0.0.1:-1', '127.0.0.1:8900\n'])
      expect(() => parseListen(bad), bad).toThrow(UsageError);
  });

  it('an absolute path, not under /ctrlrun/', () => {
    expect(checkPath('/mcp')).toBe('/mcp');
    expect(checkPath('/a/b-c')).toBe('/a/b-c');
    for (const bad of ['mcp', '/ctrlrun', '/ctrlrun/mcp', '/mcp?x=1', '/m cp', '']) expect(() => checkPath(bad), bad).toThrow(UsageError);
  });
});

describe('untilSignalled', () => {
  /**
   * Runs the fixture that waits for SIGINT and then closes for four seconds; sends SIGINT once it
   * listens, and again `repeats` times, each 1.5 s after the previous (so past the one-second window
   * however late the process handles them).
   */
  async function stop(
    env: Record<string, string>,
    repeats: number,
    signal: NodeJS.Signals = 'SIGINT',
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }> {
    const fixture = fileURLToPath(new URL('./fixtures/signal-repeat.ts', import.meta.url));
    const child = spawn(process.execPath, ['--conditions=@ctrlrun/source', '--import', import.meta.resolve('tsx'), fixture], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...env },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => void (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => void (out += d.toString()));
    const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) => child.on('exit', (code, signal) => ok({ code, signal })));
    const until = async (line: string) => {
      for (let waited = 0; !out.includes(line) && child.exitCode === null && waited < 60_000; waited += 20) await new Promise((r) => setTimeout(r, 20));
    };
    await until('ready\n');
    child.kill(signal);
    await until('stopping\n');
    for (let i = 0; i < repeats; i++) {
      await new Promise((r) => setTimeout(r, 1500));
      child.kill(signal);
    }
    return { ...(await exit), out };
  }

  it.runIf(process.platform !== 'win32')(
    'under the launcher, the pass-on of a Ctrl-C, however late, does not cut the close short; a further one stops',
    async () => {
      expect(await stop({ CTRLRUN_SIGNALS_PASSED_ON: '1' }, 1)).toEqual({ code: 0, signal: null, out: 'ready\nstopping\nclosed\n' });
      expect(await stop({ CTRLRUN_SIGNALS_PASSED_ON: '1' }, 2)).toEqual({ code: null, signal: 'SIGINT', out: 'ready\nstopping\n' });
    },
    120_000,
  );

  it.runIf(process.platform !== 'win32')(
    "under the launcher, a SIGTERM (docker stop, kill: the launcher's alone, passed on once) repeated after a second stops the process at once",
    async () => {
      expect(await stop({ CTRLRUN_SIGNALS_PASSED_ON: '1' }, 1, 'SIGTERM')).toEqual({ code: null, signal: 'SIGTERM', out: 'ready\nstopping\n' });
    },
    120_000,
  );

  it.runIf(process.platform !== 'win32')(
    "the launcher's word is not passed on to the processes the command starts",
    async () => {
      const fixture = fileURLToPath(new URL('./fixtures/signals-env-child.ts', import.meta.url));
      const run = (env: Record<string, string>) =>
        new Promise<string>((ok, fail) => {
          const child = spawn(process.execPath, ['--conditions=@ctrlrun/source', '--import', import.meta.resolve('tsx'), fixture], {
            stdio: ['ignore', 'pipe', 'inherit'],
            env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...env },
          });
          let out = '';
          child.stdout.on('data', (d: Buffer) => void (out += d.toString()));
          child.on('error', fail);
          child.on('exit', () => ok(out));
        });
      expect(await run({ CTRLRUN_SIGNALS_PASSED_ON: '1' })).toBe('this process: true; its child sees: unset\n');
      expect(await run({})).toBe('this process: false; its child sees: unset\n');
    },
    60_000,
  );

  it.runIf(process.platform !== 'win32')(
    'without it, a repeat after a second stops the process as the signal does',
    async () => {
      expect(await stop({}, 1)).toEqual({ code: null, signal: 'SIGINT', out: 'ready\nstopping\n' });
    },
    120_000,
  );
});

describe('serveHttpUntilSignalled', () => {
  it.runIf(process.platform !== 'win32')('a SIGINT sent the moment "listening on" is said closes the server and exits 0', async () => {
    const fixture = fileURLToPath(new URL('./fixtures/signal-at-listening.ts', import.meta.url));
    const child = spawn(process.execPath, ['--conditions=@ctrlrun/source', '--import', import.meta.resolve('tsx'), fixture], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => void (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => void (out += d.toString()));
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) => child.on('exit', (code, signal) => ok({ code, signal })));
    expect({ ...exit, out }).toMatchObject({ code: 0, signal: null, out: expect.stringMatching(/^listening on http:\/\/127\.0\.0\.1:\d+\/mcp\nclosed\n$/) });
  });
});
