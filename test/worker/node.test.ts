/** The HTTP suite against the Node entry: `@hono/node-server` on 127.0.0.1, the embedded default. */
import { startNodeWorker } from '../../worker/src/node.js';
import { describeWorkerHttp, TEST_ENV } from './http.case.js';

describeWorkerHttp('Node (@hono/node-server)', async () => {
  const worker = await startNodeWorker({ env: TEST_ENV, port: 0, hostname: '127.0.0.1', print: () => undefined });
  return { fetch: (path, init) => fetch(`${worker.url}${path}`, init), close: () => worker.close() };
});
