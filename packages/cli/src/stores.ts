/**
 * Opening the operator's store. Readers (`receipts`, `effects`, `inspect`, `stats`) and answerers
 * (`approve`, `deny`, `resolve`) create and migrate nothing: a missing file, a missing schema or
 * one behind this build's migrations is a one-line refusal. Writers (`delegate`, `revoke`) create
 * the default store if it is absent.
 *
 * @module
 */
import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { StateStore } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { describeTarget, storeAddress, type StoreTarget } from './discovery.js';
import { CliRefusal } from './errors.js';

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
    return await openStore(storeAddress(target), { readOnly: true });
  } catch (err) {
    throw refusal(target, err, ' (this command creates and migrates nothing; a writer does)');
  }
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
    return await openStore(storeAddress(target));
  } catch (err) {
    throw refusal(target, err, '');
  }
}

/** Opens the store for a writer, creating (and migrating) it if absent. */
export async function openWriter(target: StoreTarget): Promise<StateStore> {
  if (target.kind === 'sqlite') mkdirSync(dirname(target.path), { recursive: true });
  try {
    return await openStore(storeAddress(target));
  } catch (err) {
    throw refusal(target, err, '');
  }
}
