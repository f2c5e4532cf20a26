/**
 * Opening the operator's store. Readers (`approvals`, `receipts`, `effects`, `inspect`, `stats`)
 * and answerers (`approve`, `deny`, `resolve`) create and migrate nothing: a missing schema or one
 * behind this build's migrations is a one-line refusal, and so is a missing file for an answerer;
 * a reader reads a SQLite file that does not exist yet as an empty store. Writers (`delegate`,
 * `revoke`) create the default store if it is absent.
 *
 * @module
 */
import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Clock, StateStore } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { describeTarget, storeAddress, type StoreTarget } from './discovery.js';
import { CliRefusal } from './errors.js';

/** The query parameter naming the PostgreSQL schema; peeled off before the driver sees the URL. */
export const SCHEMA_PARAM = 'ctrlrun_schema';

/** A PostgreSQL URL without `ctrlrun_schema`, and the schema it named (null: the role's current schema). */
export function peelSchema(url: string): { url: string; schema: string | null } {
  const q = url.indexOf('?');
  if (q < 0) return { url, schema: null };
  const params = new URLSearchParams(url.slice(q + 1));
  const schema = params.get(SCHEMA_PARAM);
  if (schema === null) return { url, schema: null };
  params.delete(SCHEMA_PARAM);
  const rest = params.toString();
  return { url: rest === '' ? url.slice(0, q) : `${url.slice(0, q)}?${rest}`, schema };
}

/**
 * Opens a store by address: a SQLite file (`sqlite:PATH`) through `openStore`, a PostgreSQL URL
 * through the pg driver with `ctrlrun_schema` peeled off into the schema option.
 */
export async function openAddress(address: string, options: { readOnly?: boolean; clock?: Clock } = {}): Promise<StateStore> {
  if (!/^postgres(ql)?:\/\//i.test(address)) return openStore(address, options);
  const { openPgStore } = await import('@ctrlrun/store-node/pg');
  const { url, schema } = peelSchema(address);
  return openPgStore(url, { ...options, ...(schema !== null ? { schema } : {}), logger: { warn: () => {} } });
}

function refusal(target: StoreTarget, err: unknown, hint: string): CliRefusal {
  const message = err instanceof Error ? err.message : String(err);
  return new CliRefusal(`the store ${describeTarget(target)} cannot be opened: ${message}${hint}`);
}

/** Opens an existing, up-to-date store read-only: nothing is created or migrated, no write can happen. */
export async function openReader(target: StoreTarget): Promise<StateStore> {
  if (target.kind === 'sqlite' && !existsSync(target.path)) {
    throw new CliRefusal(`no store at ${target.path}: nothing has been recorded there yet (a writer creates it: your protected code, or ctrlrun delegate)`);
  }
  try {
    return await openAddress(storeAddress(target), { readOnly: true });
  } catch (err) {
    throw refusal(target, err, ' (this command creates and migrates nothing; a writer does)');
  }
}

/**
 * Opens the store for a listing (`approvals`, `receipts`, `effects`, `stats`, `inspect`) as
 * {@link openReader} does, except that a SQLite file that does not exist yet (nothing has been
 * recorded, as right after `ctrlrun init`) reads as an empty store: the listing says what it says
 * of an empty store ("no pending approval requests", exit 0), and `note` is told where the store
 * was looked for. Nothing is created: the empty store is a sql.js database in memory, no file or
 * directory is made.
 */
export async function openListing(target: StoreTarget, note: (line: string) => void): Promise<StateStore> {
  if (target.kind === 'sqlite' && !existsSync(target.path)) {
    note(`(no store at ${target.path} yet: nothing has been recorded there; your protected code creates it)`);
    return createSqlJsStore();
  }
  return openReader(target);
}

/**
 * Opens an existing, up-to-date store for one answer (a grant, a denial, a resolution): checked
 * first through a read-only open, so a missing or outdated store is refused before any write
 * connection exists; the writable open then has nothing to migrate.
 */
export async function openAnswerer(target: StoreTarget, precheck: (reader: StateStore) => Promise<void>): Promise<StateStore> {
  const reader = await openReader(target);
  try {
    await precheck(reader);
  } finally {
    await reader.close();
  }
  try {
    return await openAddress(storeAddress(target));
  } catch (err) {
    throw refusal(target, err, '');
  }
}

/** Opens the store for a writer, creating (and migrating) it if absent. */
export async function openWriter(target: StoreTarget): Promise<StateStore> {
  if (target.kind === 'sqlite') mkdirSync(dirname(target.path), { recursive: true });
  try {
    return await openAddress(storeAddress(target));
  } catch (err) {
    throw refusal(target, err, '');
  }
}
