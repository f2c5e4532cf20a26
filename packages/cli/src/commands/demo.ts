/**
 * `ctrlrun demo`: five ways an agent action goes wrong, and what stops each, run in-process on an
 * in-memory SQLite (sql.js) store with a fake remote. Evidence goes to `.ctrlrun/demo/`
 * (`state.db`, a real SQLite file; `receipts.jsonl`; `events.jsonl`; `ctrlrun.yaml`, its policy), deleted by name first so
 * runs repeat; never to the operator's store. A scenario that is not refused fails the run.
 *
 * @module
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { jsonlSink } from '@ctrlrun/kernel';
import { DEMO_POLICY_YAML, runDemo } from '@ctrlrun/kernel/demo';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import type { Command } from '../command.js';
import { STATE_DIR } from '../discovery.js';
import { appendRegularFile } from '../files.js';
import { shellQuote } from '../format.js';

/** The evidence files, each deleted by name before a run. */
export const DEMO_FILES = ['state.db', 'receipts.jsonl', 'events.jsonl', 'ctrlrun.yaml'] as const;

export const demo: Command = {
  name: 'demo',
  summary: 'run the five demo scenarios; evidence in .ctrlrun/demo/',
  positionals: [],
  options: {},
  async run({ io, out }) {
    const dir = join(io.cwd, STATE_DIR, 'demo');
    mkdirSync(dir, { recursive: true });
    for (const f of DEMO_FILES) rmSync(join(dir, f), { force: true });
    const shown = (f: string) => shellQuote(relative(io.cwd, join(dir, f)));
    const store = await createSqlJsStore();
    try {
      const report = await runDemo({
        store,
        write: out,
        sinks: [jsonlSink({ append: (file, line) => appendRegularFile(join(dir, file), line) })],
        evidence: { receipts: shown('receipts.jsonl'), events: shown('events.jsonl'), state: shown('state.db'), policy: shown('ctrlrun.yaml') },
      });
      writeFileSync(join(dir, 'state.db'), await store.export());
      // The demo's policy beside its store, so the commands it prints can answer what it left open.
      writeFileSync(join(dir, 'ctrlrun.yaml'), DEMO_POLICY_YAML);
      return report.ok ? 0 : 1;
    } finally {
      await store.close();
    }
  },
};
