/** The HTTP suite against the Node entry: `@hono/node-server` on 127.0.0.1, the embedded default. */
import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { startNodeWorker } from '../../worker/src/node.js';
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
