// Test-only: `node --import ./hide-better-sqlite3.mjs …` makes `better-sqlite3` unresolvable, as
// on a machine where the optional peer was never installed.
import { register } from 'node:module';

register('./hide-better-sqlite3-hooks.mjs', import.meta.url);
