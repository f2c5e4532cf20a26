/** The HTTP suite against the Node entry: `@hono/node-server` on 127.0.0.1, the embedded default. */
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startNodeWorker } from '../../worker/src/runtime/node.js';
import { describeWorkerHttp, TEST_ENV } from './http.case.js';

describeWorkerHttp('Node (@hono/node-server)', async () => {
  const worker = await startNodeWorker({ env: TEST_ENV, port: 0, hostname: '127.0.0.1', print: () => undefined });
  return { fetch: (path, init) => fetch(`${worker.url}${path}`, init), close: () => worker.close() };
});

describe('the Node entry on a port already taken', () => {
  it('refuses with a message that names the address and says what to do (PORT, HOST)', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      const started = startNodeWorker({ env: TEST_ENV, port, hostname: '127.0.0.1', print: () => undefined });
      await expect(started).rejects.toThrow(`127.0.0.1:${port} is already in use`);
      await expect(started).rejects.toThrow(/PORT=0 for any free port; HOST picks the address/);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });
});

describe('the Node entry stopped as its banner is printed', () => {
  it.runIf(process.platform !== 'win32')('a SIGINT sent the moment the banner says where to connect closes the worker and exits 0', async () => {
    const entry = fileURLToPath(new URL('../../worker/src/runtime/node.ts', import.meta.url));
    // Sends SIGINT from inside the process right after the banner's line: whoever reads it may.
    const atBanner = `data:text/javascript,const log=console.log;console.log=(...a)=>{log(...a);if(String(a[0]).includes('http://127.0.0.1:'))process.kill(process.pid,'SIGINT')}`;
    const child = spawn(process.execPath, ['--conditions=@ctrlrun/source', '--import', import.meta.resolve('tsx'), '--import', atBanner, entry], {
      env: { PATH: process.env['PATH'] ?? '', ...TEST_ENV, PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => void (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => void (out += d.toString()));
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) => child.on('exit', (code, signal) => ok({ code, signal })));
    expect({ ...exit, out }).toMatchObject({ code: 0, signal: null, out: expect.stringContaining('http://127.0.0.1:') });
  });
});

describe('the Node entry stopped while it starts', () => {
  it.runIf(process.platform !== 'win32')(
    'a SIGINT while its store never answers ends the process by the signal at once (nothing to close yet)',
    async () => {
      // A "database" that accepts connections and never says a word: the worker waits at start.
      const blackHole = createServer((socket) => socket.on('error', () => undefined));
      const connected = new Promise<void>((resolve) => blackHole.once('connection', () => resolve()));
      await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
      const { port } = blackHole.address() as AddressInfo;
      const entry = fileURLToPath(new URL('../../worker/src/runtime/node.ts', import.meta.url));
      const child = spawn(process.execPath, ['--conditions=@ctrlrun/source', '--import', import.meta.resolve('tsx'), entry], {
        env: { PATH: process.env['PATH'] ?? '', ...TEST_ENV, PORT: '0', DATABASE_URL: `postgres://u:p@127.0.0.1:${port}/db` },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => void (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => void (out += d.toString()));
      const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) => child.on('exit', (code, signal) => ok({ code, signal })));
      try {
        // Its stop listeners are installed before it connects: it is starting, and waiting.
        await connected;
        child.kill('SIGINT');
        expect({ ...(await exit), out }).toMatchObject({ code: null, signal: 'SIGINT' });
      } finally {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        blackHole.close();
      }
    },
    60_000,
  );
});
