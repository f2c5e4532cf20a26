import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBetterSqlite3Store, type BetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { afterAll } from 'vitest';
import { nodeProcesses } from '../conformance/cross-process.js';
import { describeStore } from '../conformance/store.case.js';

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-better-sqlite3-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
describeStore({
  name: 'better-sqlite3 temp file',
  dialect: 'sqlite',
  open: (clock) => createBetterSqlite3Store(join(dir, `store-${++files}.db`), { clock }),
  reopen: (old, clock) => createBetterSqlite3Store((old as BetterSqlite3Store).path, { clock }), // a second handle on the same file
  url: (store) => (store as BetterSqlite3Store).url,
  processes: nodeProcesses(),
});
