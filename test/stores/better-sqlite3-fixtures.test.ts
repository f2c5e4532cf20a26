/**
 * The conformance suite proves it can fail on the cross-process declarations (spec 03 §7):
 * T140 `falsely-declares-no-url` — a store whose handles share one file but declares no url and
 * no reopen fails e1-cross-process and ambiguous-survives; T143 — the two E1 cases are not
 * redundant: a store with deferred transactions passes e1-in-process and fails e1-cross-process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { nodeProcesses } from '../conformance/cross-process.js';
import { storeCases, type CaseId, type StoreFactory } from '../conformance/store.case.js';
import { openStore as openDeferred } from '../processes/deferred-opener.js';

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-bs3-fixtures-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

async function failure(id: CaseId, factory: StoreFactory): Promise<Error | null> {
  return storeCases[id].run(factory).then(
    () => null,
    (err: unknown) => err as Error,
  );
}

describe('T140 falsely-declares-no-url', () => {
  // Every open() lands on one file, yet the factory declares neither url() nor reopen().
  const shared = join(dir, 'shared.db');
  const liar: StoreFactory = { name: 'falsely declares no url', dialect: 'sqlite', open: (clock) => createBetterSqlite3Store(shared, { clock }) };

  for (const id of ['e1-cross-process', 'ambiguous-survives'] as const) {
    it(`test_T140_falsely_declares_no_url_fails_${id.replace(/-/g, '_')}`, { timeout: 120_000 }, async () => {
      const err = await failure(id, liar);
      expect(err, `${id} must fail`).not.toBeNull();
      expect(err!.name).toBe('AssertionError');
      expect(err!.message).toMatch(/declares no (url|reopen)\(\)/);
    });
  }

  it('an honest declaration passes as not applicable (private files per open)', async () => {
    const honest: StoreFactory = {
      name: 'private files',
      dialect: 'sqlite',
      open: (clock) => createBetterSqlite3Store(join(dir, `private-${++files}.db`), { clock }),
    };
    expect(await failure('e1-cross-process', honest)).toBeNull();
    expect(await failure('ambiguous-survives', honest)).toBeNull();
  });
});

describe('T143 the two E1 cases are not redundant', () => {
  const paths = new WeakMap<object, string>();
  const deferred: StoreFactory = {
    name: 'deferred transactions',
    dialect: 'sqlite',
    async open(clock) {
      const path = join(dir, `deferred-${++files}.db`);
      await (await createBetterSqlite3Store(path)).close(); // migrated and in WAL mode
      const store = await openDeferred(path, { clock });
      paths.set(store, path);
      return store;
    },
    url: (store) => `sqlite:${paths.get(store)!}`,
    processes: nodeProcesses({ opener: pathToFileURL(join(import.meta.dirname, '..', 'processes', 'deferred-opener.ts')).href }),
  };

  it('test_T143_deferred_transactions_pass_e1_in_process_and_fail_e1_cross_process', { timeout: 600_000 }, async () => {
    expect(await failure('e1-in-process', deferred)).toBeNull();
    // The cross-process case catches the deferred store by a race between OS processes; on a
    // loaded machine one round may see the processes never overlap. It must be caught within five.
    let err: Error | null = null;
    for (let round = 0; round < 5 && err === null; round++) err = await failure('e1-cross-process', deferred);
    expect(err, 'e1-cross-process must fail').not.toBeNull();
    expect(err!.name).toBe('AssertionError');
  });
});
