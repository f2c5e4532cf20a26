// A store or upstream URL in a CLI message shows no part of its password, whatever the password
// holds: `s3cr3t@ssw0rd` was once printed as `***@ssw0rd` (issue 27). One mask, the kernel's
// maskUrl, for every message; its property test is in packages/kernel/test/mask-url.test.ts.
import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { run, tempDir } from './support.js';

const PASSWORD = 's3cr3t@ssw0rd';

/** A port on 127.0.0.1 nothing listens on (bound, then released): a connection there is refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Neither half of the password, nor the whole, anywhere in what was printed. */
function expectNoPassword(text: string): void {
  for (const part of [PASSWORD, 's3cr3t', 'ssw0rd']) expect(text).not.toContain(part);
}

describe('store and upstream URLs in CLI messages', () => {
  it('a PostgreSQL store that cannot be reached is named without any of its password', async () => {
    const port = await closedPort();
    const r = await run(['receipts', '--store-url', `postgres://agent:${PASSWORD}@127.0.0.1:${port}/db`], { cwd: tempDir() });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`the store postgres://***@127.0.0.1:${port}/db cannot be opened`);
    expectNoPassword(r.stdout + r.stderr);
  });

  it('the same URL in $CTRLRUN_STORE_URL, and one with the password as ?password=', async () => {
    const port = await closedPort();
    const env = { CTRLRUN_STORE_URL: `postgresql://agent:${PASSWORD}@127.0.0.1:${port}/db?sslmode=disable` };
    const r = await run(['effects'], { cwd: tempDir(), env });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`postgresql://***@127.0.0.1:${port}/db?sslmode=disable`);
    expectNoPassword(r.stdout + r.stderr);
    const q = await run(['receipts', '--store-url', `postgres://127.0.0.1:${port}/db?user=agent&password=${encodeURIComponent(PASSWORD)}`], { cwd: tempDir() });
    expect(q.stderr).toContain(`postgres://127.0.0.1:${port}/db?user=agent&password=***`);
    expectNoPassword(q.stdout + q.stderr);
  });

  it('a store URL with an unknown scheme is refused with its password masked', async () => {
    const r = await run(['receipts', '--store-url', `mysql://agent:${PASSWORD}@db.internal/app`], { cwd: tempDir() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no backend for the store URL "mysql://***@db.internal/app"');
    expectNoPassword(r.stdout + r.stderr);
  });

  it('gateway: an --upstream holding credentials is refused before anything connects, masked', async () => {
    const r = await run(['gateway', '--alias', 'x', '--principal', 'agent', '--upstream', `http://agent:${PASSWORD}@127.0.0.1:1/mcp`], { cwd: tempDir() });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--upstream "http://***@127.0.0.1:1/mcp" holds credentials');
    expectNoPassword(r.stdout + r.stderr);
    const bad = await run(['gateway', '--alias', 'x', '--principal', 'agent', '--upstream', `ftp://agent:${PASSWORD}@h/mcp`], { cwd: tempDir() });
    expect(bad.stderr).toContain('--upstream must be an http(s):// URL, got "ftp://***@h/mcp"');
    expectNoPassword(bad.stdout + bad.stderr);
  });
});
