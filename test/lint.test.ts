/**
 * The lint rule that keeps the Node-free packages Node-free (eslint.config.js, last block): run
 * through ESLint's own API with the repository's config, on snippets given the path of a file in
 * each package, it reports Node's globals and modules there, and nothing on Web-only code or in a
 * package that is allowed to use Node.
 */
import { builtinModules } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint, type Linter } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const eslint = new ESLint({ cwd: root });

async function lint(code: string, file: string): Promise<Linter.LintMessage[]> {
  const [result] = await eslint.lintText(code, { filePath: resolve(root, file) });
  return result!.messages;
}

const summary = (messages: Linter.LintMessage[]) => messages.map((m) => `${m.line}:${m.ruleId}`);

const NODE_FREE_FILES = [
  'packages/kernel/src/lint-probe.ts',
  'packages/kernel/src/store/lint-probe.ts',
  'packages/store-sqljs/src/lint-probe.ts',
  'packages/store-do/src/lint-probe.ts',
  'packages/mcp/src/lint-probe.ts',
];

const NODE_USE = [
  "import { readFileSync } from 'node:fs';", // 1
  "import { join } from 'path';", // 2
  "import { webcrypto } from 'crypto';", // 3
  "import { readFile } from 'fs/promises';", // 4
  "export { EventEmitter } from 'node:events';", // 5
  'export const home = process.env.HOME;', // 6
  "export const bytes = Buffer.from('x');", // 7
  'export const here = __dirname + __filename;', // 8 (two)
  "export const m = require('x');", // 9
  'setImmediate(() => {});', // 10
  'export const g = global;', // 11
  'export const p = globalThis.process;', // 12
  "export const later = () => import('node:os');", // 13
  'export const all = [readFileSync, join, webcrypto, readFile];', // 14
].join('\n');

const EXPECTED = [
  '1:no-restricted-imports',
  '2:no-restricted-imports',
  '3:no-restricted-imports',
  '4:no-restricted-imports',
  '5:no-restricted-imports',
  '6:no-restricted-globals',
  '7:no-restricted-globals',
  '8:no-restricted-globals',
  '8:no-restricted-globals',
  '9:no-restricted-globals',
  '10:no-restricted-globals',
  '11:no-restricted-globals',
  '12:no-restricted-properties',
  '13:no-restricted-syntax',
];

const WEB_ONLY = [
  "import { canonicalJson } from './canonical.js';",
  'export async function probe(url: string): Promise<string> {',
  '  const bytes = new Uint8Array(8);',
  '  globalThis.crypto.getRandomValues(bytes);',
  '  const process = { env: {} as Record<string, string> }; // a local, not the global',
  '  const response = await fetch(url, { headers: { "x-env": String(process.env.X) } });',
  '  setTimeout(() => {}, 0);',
  '  return canonicalJson([bytes.length, await response.text(), new TextEncoder().encode("x").length]);',
  '}',
].join('\n');

describe('lint: the Node-free packages', { timeout: 120_000 }, () => {
  it.each(NODE_FREE_FILES)("reports Node's globals and modules in %s", async (file) => {
    const messages = await lint(NODE_USE, file);
    expect(summary(messages).sort()).toEqual([...EXPECTED].sort());
    expect(messages.every((m) => m.severity === 2)).toBe(true);
    expect(messages.find((m) => m.line === 6)!.message).toContain("'process' is Node's");
  });

  it("reports every one of Node's module names, bare and with node:", async () => {
    const names = builtinModules.filter((n) => !n.startsWith('_') && !n.startsWith('node:'));
    expect(names.length).toBeGreaterThan(30);
    const code = names.flatMap((n, i) => [`import * as a${i} from '${n}';`, `import * as b${i} from 'node:${n}';`]).join('\n');
    const messages = await lint(code, 'packages/kernel/src/lint-probe.ts');
    const flagged = new Set(messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.line));
    const missed = code.split('\n').filter((_, i) => !flagged.has(i + 1));
    expect(missed).toEqual([]);
  });

  it('reports nothing on code that uses only Web APIs and its own modules', async () => {
    expect(summary(await lint(WEB_ONLY, 'packages/kernel/src/lint-probe.ts'))).toEqual([]);
    expect(summary(await lint(WEB_ONLY, 'packages/store-do/src/lint-probe.ts'))).toEqual([]);
  });

  it('leaves Node packages, tests and scripts free to use Node', async () => {
    for (const file of [
      'packages/store-node/src/lint-probe.ts',
      'packages/cli/src/lint-probe.ts',
      'packages/kernel/test/lint-probe.test.ts',
      'scripts/lint-probe.ts',
    ]) {
      expect(summary(await lint(NODE_USE, file)), file).toEqual([]);
    }
  });
});

describe('lint: the general rules', { timeout: 120_000 }, () => {
  it('reports debugger, var, a let never reassigned and == outside the null check', async () => {
    const code = ['export function f(a: unknown) {', '  debugger;', '  var x = 1;', '  let y = 2;', '  return a == 1 || a == null ? x + y : 0;', '}'].join(
      '\n',
    );
    expect(summary(await lint(code, 'packages/cli/src/lint-probe.ts'))).toEqual(['2:no-debugger', '3:no-var', '4:prefer-const', '5:eqeqeq']);
  });

  it('does not lint what it ignores (build output, deliberately broken fixtures)', async () => {
    for (const file of ['packages/kernel/dist/index.js', 'packages/cli/test/fixtures/scan/basic/src/x.ts', 'examples/vitepress/x.ts']) {
      expect(await eslint.isPathIgnored(resolve(root, file)), file).toBe(true);
    }
    expect(await eslint.isPathIgnored(resolve(root, 'packages/kernel/src/index.ts'))).toBe(false);
  });
});
