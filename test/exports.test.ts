// Test what ships: every `exports` entry of every package imports from its built `dist` in plain
// Node (no source condition), as a consumer outside this repository would load it.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const packages = readdirSync(join(root, 'packages')).map((dir) => {
  const manifest = JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8')) as { name: string; exports: Record<string, unknown> };
  return {
    dir,
    name: manifest.name,
    specs: Object.keys(manifest.exports)
      .filter((k) => k !== './package.json')
      .map((k) => (k === '.' ? manifest.name : `${manifest.name}/${k.slice(2)}`)),
  };
});
const built = packages.every((p) => existsSync(join(root, 'packages', p.dir, 'dist')));
const why = 'the packages are not built (npm test runs `tsc -b` first; run it, then this test)';
if (!built && process.env['CI']) throw new Error(`CI: ${why}`);

describe.skipIf(!built)(`built packages${built ? '' : ` — skipped: ${why}`}`, () => {
  it('every exports entry of every package imports from dist in plain Node', () => {
    const specs = packages.flatMap((p) => p.specs);
    const script = `const specs = ${JSON.stringify(specs)};
      const out = {};
      for (const s of specs) { const m = await import(s); out[s] = Object.keys(m).length; }
      console.log(JSON.stringify(out));`;
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' })) as Record<string, number>;
    expect(Object.keys(out).sort()).toEqual([...specs].sort());
    for (const s of specs) expect(out[s], s).toBeGreaterThan(0);
  });
});

// The root is what an application uses; a store author's names live on `/store`. Runs on source.
describe('the public root and the store subpath', () => {
  // The names ARCHITECTURE.md and the README document on the root.
  const documented = [
    'canonicalBytes',
    'canonicalJson',
    'createAction',
    'actionHash',
    'loadPolicy',
    'Policy',
    'Control',
    'protect',
    'verifyChain',
    'ActionDenied',
    'ApprovalRequired',
    'ApprovalMismatch',
    'AmbiguousEffect',
    'DuplicateEffect',
    'NotExecuted',
    'PolicyError',
    'InvalidArgument',
    'SchemaMismatch',
    'explainDecision',
    'toolRefusal',
    'ChainVerifier',
  ];
  // Store internals: table/lock constants, SQL text, lost-COMMIT rules, planners.
  const storeOnly = [
    'SqlStateStore',
    'openSqlStateStore',
    'sqliteDialect',
    'postgresDialect',
    'Mutex',
    'MIGRATION_LOCK_KEY',
    'MIGRATION_IDS',
    'SCHEMA_WRITER',
    'migrate',
    'quoteIdentifier',
    'commitErrorOutcome',
    'FAILED_WRITE_SQLSTATES',
    'LOST_COMMIT_BRANCHES',
    'WRITTEN_COLUMNS',
    'lostCommitBranch',
    'planReservation',
    'checkConsumable',
    'buildReceipt',
    'sealReceipt',
    'GENESIS_HASH',
    'hashDocument',
    'storedTime',
    'LEASE_EXPIRED',
    'transactionExecutor',
    'actionFromJson',
    'grantFromJson',
    'grantToJson',
    'RECEIPT_KEYS',
    'RECEIPT_EDIT_KEYS',
  ];
  // The kernel's own: what the one intake does for every surface, and helpers only its tests use.
  const internal = ['refuseDerivedArguments', 'resolveResourceTemplate', 'normalizeHeaders', 'MINUTE'];
  it('the root keeps every documented name and none of the store internals', async () => {
    const root: Record<string, unknown> = await import('@ctrlrun/kernel');
    for (const name of documented) expect(root[name], name).toBeDefined();
    for (const name of [...storeOnly, ...internal]) expect(name in root, `${name} leaks from the root`).toBe(false);
    expect(Object.keys(root).filter((k) => /_COLUMNS$|LOCK_KEY$|^A[12]_|Dialect$/.test(k))).toEqual([]);
  });
  it('@ctrlrun/kernel/store carries what a driver or store author needs', async () => {
    const store: Record<string, unknown> = await import('@ctrlrun/kernel/store');
    for (const name of storeOnly) expect(store[name], name).toBeDefined();
    for (const name of internal) expect(name in store, `${name} leaks from /store`).toBe(false);
  });
});
