// T30: a process importing ctrlrun pulls in no module from an extra. The optional peers (jose,
// OpenTelemetry, the database drivers, the MCP SDK, hono) are loaded only by the subpath or the
// store address that needs them: a fresh Node process imports each entry point with a resolve
// hook that records every specifier, and none of the extras appears.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const EXTRAS = ['jose', '@opentelemetry/api', 'better-sqlite3', 'pg', '@electric-sql/pglite', 'sql.js', 'hono', '@modelcontextprotocol/sdk'];
const RECORD = `
export async function resolve(specifier, context, next) {
  if (!specifier.startsWith('.') && !specifier.startsWith('/') && !specifier.startsWith('file:') && !specifier.startsWith('node:') && !specifier.startsWith('data:')) {
    process.stderr.write('RESOLVED ' + specifier + '\\n');
  }
  return next(specifier, context);
}`;
const HOOK = `data:text/javascript,${encodeURIComponent(`import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(RECORD)}`)});`)}`;

/** Runs `entry`'s import in a fresh process; the bare specifiers resolved, and whether the import finished. */
function importIn(entry: string): { resolved: string[]; imported: boolean } {
  const r = spawnSync(
    process.execPath,
    [
      '--conditions=@ctrlrun/source',
      '--import',
      'tsx',
      '--import',
      HOOK,
      '--input-type=module',
      '-e',
      `await import(${JSON.stringify(entry)}); console.error('IMPORTED');`,
    ],
    { cwd: root, encoding: 'utf8' },
  );
  const lines = String(r.stderr).split('\n');
  return { resolved: lines.filter((l) => l.startsWith('RESOLVED ')).map((l) => l.slice(9)), imported: lines.includes('IMPORTED') };
}

describe('T30 no extra is pulled in by an import', { timeout: 120_000 }, () => {
  it('test_T30_a_subprocess_importing_ctrlrun_pulls_in_no_module_from_an_extra', () => {
    for (const entry of [
      '@ctrlrun/kernel',
      '@ctrlrun/kernel/store',
      '@ctrlrun/kernel/verify',
      '@ctrlrun/kernel/conformance',
      '@ctrlrun/kernel/try-it',
      '@ctrlrun/store-node',
      '@ctrlrun/cli',
    ]) {
      const { resolved, imported } = importIn(entry);
      expect(imported, `${entry} imported`).toBe(true);
      expect(resolved, `${entry} resolved something`).toContain(entry);
      const extras = resolved.filter((s) => EXTRAS.some((x) => s === x || s.startsWith(`${x}/`)));
      expect(extras, `${entry} pulled in`).toEqual([]);
    }
  });

  it('the hook sees an extra when one is imported (negative control)', () => {
    expect(importIn('jose').resolved).toContain('jose');
    expect(importIn('pg').resolved).toContain('pg');
  });
});
