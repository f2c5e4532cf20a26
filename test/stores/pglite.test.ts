// The store conformance suite on PGlite: one in-memory instance for the file (it takes seconds to
// start); every open() gets a schema of its own, so cases never share rows, and reopen() is a
// second store on the same schema. PGlite is one in-process session: no url() for workers.
import { PGlite } from '@electric-sql/pglite';
import type { StateStore } from '@ctrlrun/kernel';
import { createPgliteStore, type PgliteStore } from '@ctrlrun/store-node/pglite';
import { afterAll } from 'vitest';
import { describeStore } from '../conformance/store.case.js';

const db = new PGlite();
afterAll(() => db.close());
let schemas = 0;

describeStore({
  name: 'PGlite in memory',
  dialect: 'postgres',
  open: async (clock) => {
    const schema = `case_${++schemas}`;
    await db.exec(`CREATE SCHEMA ${schema}`);
    return createPgliteStore(db, { clock, schema });
  },
  reopen: (old: StateStore, clock) => createPgliteStore(db, { clock, schema: (old as PgliteStore).schema }),
});
