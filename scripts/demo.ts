// `npm run demo`: the five scenarios on an in-memory sql.js store, evidence under .ctrlrun/demo/.
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { jsonlSink } from '@ctrlrun/kernel';
import { runDemo } from '@ctrlrun/kernel/demo';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

const dir = join(process.cwd(), '.ctrlrun', 'demo');
mkdirSync(dir, { recursive: true });
for (const f of ['state.db', 'receipts.jsonl', 'events.jsonl']) rmSync(join(dir, f), { force: true });
const rel = (f: string) => relative(process.cwd(), join(dir, f)) || f;

const store = await createSqlJsStore();
const report = await runDemo({
  store,
  write: (line) => console.log(line),
  sinks: [jsonlSink({ append: (file, line) => appendFileSync(join(dir, file), line) })],
  evidence: { receipts: rel('receipts.jsonl'), events: rel('events.jsonl'), state: rel('state.db') },
});
writeFileSync(join(dir, 'state.db'), await store.export());
await store.close();
process.exitCode = report.ok ? 0 : 1;
