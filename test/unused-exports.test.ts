// check:packages fails on a value a package exports that no documentation, test or other package
// uses (scripts/unused-exports.ts): found in a package as it would be written (check:packages runs it
// on this repository's packages).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { unusedExports } from '../scripts/unused-exports.js';

const root = mkdtempSync(join(tmpdir(), 'ctrlrun-exports-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('exports used by no one', () => {
  it('a value nobody outside the package names is reported; a used value and a type are not', () => {
    const pkg = join(root, 'packages', 'demo');
    mkdirSync(join(pkg, 'src'), { recursive: true });
    writeFileSync(
      join(pkg, 'package.json'),
      JSON.stringify({
        name: '@x/demo',
        version: '1.0.0',
        type: 'module',
        exports: { '.': { '@ctrlrun/source': './src/index.ts', default: './dist/index.js' } },
      }),
    );
    writeFileSync(
      join(pkg, 'src', 'index.ts'),
      "export const usedByTheDocs = 1;\nexport function forgotten(): number { return 2; }\nexport interface Options { a: number }\nexport { helper } from './inner.js';\n",
    );
    writeFileSync(join(pkg, 'src', 'inner.ts'), 'export const helper = () => forgottenToo;\nconst forgottenToo = 3;\n');
    writeFileSync(join(root, 'README.md'), 'Call `usedByTheDocs`.\n');
    writeFileSync(join(root, 'CHANGELOG.md'), '`forgotten` and `helper` were added.\n');
    expect(unusedExports(root)).toEqual(['@x/demo: forgotten (packages/demo/src/index.ts)', '@x/demo: helper (packages/demo/src/index.ts)']);
  });
});
