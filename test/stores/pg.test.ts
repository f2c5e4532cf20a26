// The store conformance suite on a real PostgreSQL server through a pg Pool (T154): one database
// for this file, a schema of its own for every open(); reopen() is a second store on that schema,
// and url() lets worker OS processes open the same schema (the cross-process case, T3). Both ways
// a store writes: one prepared statement per write step (the default), and statement by statement
// with prepare: false.
import type { StateStore } from '@ctrlrun/kernel';
import { createPgStore, type PgStore } from '@ctrlrun/store-node/pg';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { nodeProcesses } from '../conformance/cross-process.js';
import { describeStore } from '../conformance/store.case.js';
import { describePg, freshDatabase, type FreshDatabase } from '../support/pg-cluster.js';

describePg('PostgreSQL conformance', (server) => {
  let db: FreshDatabase;
  let pool: pg.Pool;
  let schemas = 0;
  beforeAll(async () => {
    db = await freshDatabase(server.url, 'conformance');
    pool = new pg.Pool({ connectionString: db.url, max: 12 });
    pool.on('error', () => undefined); // idle clients cut by DROP DATABASE … WITH (FORCE) at the end
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  describeStore({
    name: 'test_T154_postgres_passes_the_store_conformance_suite: pg Pool',
    dialect: 'postgres',
    open: async (clock) => {
      const schema = `case_${++schemas}`;
      await db.createSchema(schema);
      return createPgStore(pool, { clock, schema });
    },
    reopen: (old: StateStore, clock) => createPgStore(pool, { clock, schema: (old as PgStore).schema }),
    url: (store) => db.urlFor((store as PgStore).schema),
    processes: nodeProcesses(),
  });

  // With prepare: false, statement by statement in transactions, nothing named.
  describeStore({
    name: 'test_T154_postgres_passes_the_store_conformance_suite: pg Pool, prepare: false',
    dialect: 'postgres',
    open: async (clock) => {
      const schema = `case_${++schemas}`;
      await db.createSchema(schema);
      return createPgStore(pool, { clock, schema, prepare: false });
    },
    reopen: (old: StateStore, clock) => createPgStore(pool, { clock, schema: (old as PgStore).schema, prepare: false }),
    url: (store) => db.urlFor((store as PgStore).schema),
    processes: nodeProcesses(),
  });
});
