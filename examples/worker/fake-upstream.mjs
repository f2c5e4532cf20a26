// A stand-in for a payment provider: `node examples/worker/fake-upstream.mjs [port]` (default 8788).
// POST /refunds refunds once per Idempotency-Key; GET /count shows how many refunds ran.
import { createServer } from 'node:http';

export function startFakeUpstream(port = 8788, host = '127.0.0.1', { delayMs = 0 } = {}) {
  const refunds = new Map();
  let calls = 0;
  const server = createServer((req, res) => {
    let body = '';
    req
      .setEncoding('utf8')
      .on('data', (c) => (body += c))
      .on('end', () => {
        if (req.method === 'GET' && req.url === '/count') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ calls, refunds: refunds.size }));
          return;
        }
        if (req.method !== 'POST' || req.url !== '/refunds') return void res.writeHead(404).end();
        calls++;
        const key = req.headers['idempotency-key'] ?? `anon-${calls}`;
        const args = JSON.parse(body);
        refunds.set(key, { id: `re_${args.payment_id}`, amount: args.amount, authorization: req.headers.authorization ?? null });
        setTimeout(
          () =>
            res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ id: `re_${args.payment_id}`, amount: args.amount, status: 'succeeded' })),
          delayMs,
        );
      });
  });
  return new Promise((resolve) =>
    server.listen(port, host, () => {
      const { port: bound } = server.address();
      resolve({
        url: `http://${host}:${bound}`,
        calls: () => calls,
        refunds,
        close: () =>
          new Promise((r) => {
            server.close(() => r());
            server.closeAllConnections();
          }),
      });
    }),
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const up = await startFakeUpstream(Number(process.argv[2] ?? 8788));
  console.log(`fake upstream on ${up.url} (POST /refunds, GET /count)`);
}
