// Opening a PostgreSQL store at a URL whose server accepts the connection and never answers (a
// stuck proxy, a wrong port on a host that swallows traffic): refused after the connect timeout,
// naming the address and what sets the timeout, rather than waited on for ever. No server needed.
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { InvalidArgument, StoreError } from '@ctrlrun/kernel';
import { openPgStore } from '@ctrlrun/store-node/pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let blackHole: Server;
let port = 0;
let connections = 0;
const sockets = new Set<Socket>();
beforeAll(async () => {
  blackHole = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
  port = (blackHole.address() as AddressInfo).port;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => blackHole.close(() => resolve()));
});

async function refusal(url: string): Promise<Error> {
  return openPgStore(url).then(
    async (store) => {
      await store.close();
      throw new Error('expected a refusal, but it opened');
    },
    (err: unknown) => err as Error,
  );
}

describe('openPgStore on a server that never answers', () => {
  it('is refused after 10 s by default, naming the address (no password) and what sets the timeout', async () => {
    const err = await refusal(`postgres://agent:secret@127.0.0.1:${port}/db`);
    expect(err).toBeInstanceOf(StoreError);
    expect(err.message).toContain(`postgres://***@127.0.0.1:${port}/db`);
    expect(err.message).toContain('no answer within 10 s; connect_timeout in the URL sets it');
    expect(err.message).not.toContain('secret');
  }, 60_000);

  it("the URL's connect_timeout (seconds) sets it", async () => {
    const err = await refusal(`postgres://agent:secret@127.0.0.1:${port}/db?connect_timeout=1`);
    expect(err).toBeInstanceOf(StoreError);
    expect(err.message).toContain('no answer within 1 s');
  }, 60_000);

  it('a connect_timeout that is not a whole number of seconds is refused by name before any connection', async () => {
    const before = connections;
    for (const bad of ['x', '-1', '1.5', '', '1e3', '9999999']) {
      const err = await refusal(`postgres://agent:secret@127.0.0.1:${port}/db?connect_timeout=${bad}`);
      expect(err, bad).toBeInstanceOf(InvalidArgument);
      expect(err.message).toContain(`connect_timeout must be a whole number of seconds, got ${JSON.stringify(bad)}`);
    }
    expect(connections).toBe(before);
  });
});
