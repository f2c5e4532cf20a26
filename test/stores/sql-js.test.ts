import { createSqlJsStore, type SqlJsPersistence } from '@ctrlrun/store-sqljs';
import { describeStore } from '../conformance/store.case.js';

describeStore({ name: 'sql.js in memory', dialect: 'sqlite', open: (clock) => createSqlJsStore({ clock }) });

// A persistence pair over an in-memory bytes map: reopen loads what the last commit saved.
const storages = new WeakMap<object, SqlJsPersistence>();
const memory = (): SqlJsPersistence => {
  let bytes: Uint8Array | null = null;
  return {
    load: async () => bytes,
    save: async (b) => {
      bytes = b;
    },
  };
};
describeStore({
  name: 'sql.js persisted',
  dialect: 'sqlite',
  open: async (clock) => {
    const persistence = memory();
    const s = await createSqlJsStore({ clock, persistence });
    storages.set(s, persistence);
    return s;
  },
  reopen: async (old, clock) => {
    const persistence = storages.get(old)!;
    const s = await createSqlJsStore({ clock, persistence });
    storages.set(s, persistence);
    return s;
  },
});
