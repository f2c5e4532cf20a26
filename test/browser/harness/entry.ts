/**
 * The Chromium harness page: registers each listed test file through the `vitest` stand-in,
 * runs them all, and leaves the results on `globalThis.__harness` for the Node side to read.
 * Files are imported one at a time so each test knows its file.
 */
import { beginFile, runAll, type Outcome } from './vitest-shim.js';

/** The test files that run in the tab: every kernel and sql.js suite that needs no Node API. */
const FILES: [string, () => Promise<unknown>][] = [
  ['packages/kernel/test/try-it.test.ts', () => import('../../../packages/kernel/test/try-it.test.js')],
  ['packages/kernel/test/try-it-remote-calls.test.ts', () => import('../../../packages/kernel/test/try-it-remote-calls.test.js')],
  ['packages/kernel/test/canonical.test.ts', () => import('../../../packages/kernel/test/canonical.test.js')],
  ['packages/kernel/test/control.test.ts', () => import('../../../packages/kernel/test/control.test.js')],
  ['packages/kernel/test/events.test.ts', () => import('../../../packages/kernel/test/events.test.js')],
  ['packages/kernel/test/policy-template.test.ts', () => import('../../../packages/kernel/test/policy-template.test.js')],
  ['packages/kernel/test/policy-yaml.test.ts', () => import('../../../packages/kernel/test/policy-yaml.test.js')],
  ['packages/kernel/test/policy-properties.test.ts', () => import('../../../packages/kernel/test/policy-properties.test.js')],
  ['packages/kernel/test/demo.test.ts', () => import('../../../packages/kernel/test/demo.test.js')],
  ['test/stores/sql-js.test.ts', () => import('../../stores/sql-js.test.js')],
  ['test/stores/sql-js-driver.test.ts', () => import('../../stores/sql-js-driver.test.js')],
  ['test/stores/sqlite-migrations.test.ts', () => import('../../stores/sqlite-migrations.test.js')],
  ['test/stores/broken-stores.test.ts', () => import('../../stores/broken-stores.test.js')],
  ['test/browser/harness/indexeddb.case.ts', () => import('./indexeddb.case.js')],
];

/** Tests that assert something about Node itself, by `file > title`, with why they don't apply here. */
const NOT_HERE: Record<string, string> = {
  'test/stores/sql-js-driver.test.ts > indexedDbPersistence > says so when there is no IndexedDB':
    'asserts that Node has no IndexedDB; Chromium has one (the IndexedDB cases run here instead)',
};

/** What the page leaves on `globalThis.__harness` for the Node side (`in-chromium.test.ts`) to read. */
export interface Harness {
  done: boolean;
  files: string[];
  results: Outcome[];
  measurements: Record<string, number>;
  error?: string;
}

const harness: Harness = { done: false, files: FILES.map(([f]) => f), results: [], measurements: {} };
(globalThis as { __harness?: Harness }).__harness = harness;

async function main(): Promise<void> {
  let measurements: Record<string, number> = {};
  for (const [file, load] of FILES) {
    beginFile(file);
    const mod = (await load()) as { measurements?: Record<string, number> };
    if (mod.measurements) measurements = mod.measurements;
  }
  const log = document.getElementById('log');
  await runAll((o) => {
    harness.results.push(o);
    if (log) log.textContent += `${o.status.padEnd(4)} ${o.file} > ${o.name}${o.error ? `\n     ${o.error}` : ''}${o.reason ? ` (${o.reason})` : ''}\n`;
  }, NOT_HERE);
  harness.measurements = measurements;
}

main()
  .catch((err: unknown) => {
    harness.error = err instanceof Error ? `${err.name}: ${err.message}\n${err.stack ?? ''}` : String(err);
  })
  .finally(() => {
    harness.done = true;
  });
