/**
 * Ended operator sessions (the inbox's sign-out), kept in the store so that every process and
 * isolate sharing it refuses a copy of the session cookie, not only the one that signed out. The
 * table is created by the first sign-out, never by a migration (see `DialectSql.sessionsEnded`);
 * until then no session was ended, and a read finds that out from the catalogue.
 *
 * @module
 */
import { InvalidArgument } from '../errors.js';
import { storedTime } from '../time.js';
import type { SqlEngine } from './engine.js';

const SESSION_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** Engines whose store is known to hold the table (it is never dropped). */
const created = new WeakSet<SqlEngine>();

function checkSessionId(sessionId: unknown): string {
  if (typeof sessionId !== 'string' || !SESSION_ID.test(sessionId)) throw new InvalidArgument('sessionId must be 1-128 of A-Z a-z 0-9 _ -');
  return sessionId;
}

export async function endSession(e: SqlEngine, sessionId: string, expiresAt: number): Promise<void> {
  const id = checkSessionId(sessionId);
  if (!Number.isSafeInteger(expiresAt) || expiresAt < 0)
    throw new InvalidArgument('expiresAt must be a time in ms since the epoch (a non-negative safe integer)');
  const sql = e.sql.sql;
  await e.write('endSession', async (tx, now) => {
    // Postgres: concurrent CREATE TABLE IF NOT EXISTS can collide; the migration lock orders them.
    if (sql.migrationLock !== null) await e.query(tx, sql.migrationLock);
    await e.query(tx, sql.sessionsEnded.create);
    await e.query(tx, sql.sessionsEnded.prune, [now.getTime()]);
    await e.query(tx, sql.sessionsEnded.insert, [id, storedTime(now), expiresAt]);
  });
  created.add(e);
}

export async function sessionEnded(e: SqlEngine, sessionId: string): Promise<boolean> {
  const id = checkSessionId(sessionId);
  const sql = e.sql.sql.sessionsEnded;
  return e.read(async (ex) => {
    if (!created.has(e)) {
      if ((await e.query(ex, sql.exists)).rows.length === 0) return false;
      created.add(e);
    }
    return (await e.query(ex, sql.select, [id])).rows.length > 0;
  });
}
