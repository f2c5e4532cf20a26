/**
 * `await store.close()` on PostgreSQL settles before the process may exit: the store's own
 * connection (unreferenced while idle, so that it never keeps a process alive) is held while it
 * ends. Found by the concurrency bench, whose process exited inside `close()` (Node's exit code
 * 13, a top-level await never settled) once every write of an allowed action went on that
 * connection and the pool held nothing else open.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { NODE_FLAGS } from '../processes/harness.js';
import { scaled } from '../support/load.js';
import { describePg, freshDatabase } from '../support/pg-cluster.js';

describePg('closing a PostgreSQL store', (server) => {
  it('a process that closes the store after ending its pool runs on past close()', async () => {
    const db = await freshDatabase(server.url, 'close_child');
    try {
      await db.createSchema('s');
      const child = spawnSync(process.execPath, [...NODE_FLAGS, join(import.meta.dirname, 'pg-close-child.ts'), db.url, 's'], {
        encoding: 'utf8',
        timeout: scaled(60_000),
      });
      expect(child.stderr).toBe('');
      expect({ status: child.status, stdout: child.stdout.trim() }).toEqual({ status: 0, stdout: 'after close' });
      expect(await db.sql<{ state: string }>('SELECT state FROM s.effects')).toEqual([{ state: 'committed' }]);
    } finally {
      await db.drop();
    }
  }, 120_000);
});
