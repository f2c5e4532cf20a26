// ESLint (flat config), run by `npm run lint` and so by `npm test`.
//
// A small set of rules the tree keeps, not a style guide (no formatting rules: layout is
// Prettier's, `npm run format`). The one rule that matters most is the last block: the packages that must run without
// Node (browsers, Deno, Cloudflare Workers) cannot name Node's globals or import its modules.
// `test/lint.test.ts` proves that block catches what it should.
//
// No type-aware rules (e.g. no-floating-promises): with typescript-eslint's project service the
// whole tree took about a minute on a 2-core machine, against about 10 s without.
import { builtinModules } from 'node:module';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

/** The packages whose source must stay Node-free (ARCHITECTURE: the kernel and the stores it runs on anywhere). */
export const NODE_FREE = ['packages/kernel/src/**', 'packages/store-sqljs/src/**', 'packages/store-do/src/**', 'packages/mcp/src/**'];

/** Node's own module names, bare (`fs`, `fs/promises`, …); the `node:` spelling is caught by a pattern. */
const nodeModules = builtinModules.filter((name) => !name.startsWith('_') && !name.startsWith('node:'));
const notHere = 'This package must run without Node (browsers, Deno, Workers): take it as a parameter or use a Web API.';

export default defineConfig(
  {
    ignores: [
      '**/node_modules/**',
      '**/dist/**', // build output, the playground's and the widget's too
      'examples/vitepress/**',
      'packages/cli/test/fixtures/**', // deliberately odd code the scanner reads
      'test-artifacts/**',
      '**/.ctrlrun/**',
      '**/.wrangler/**', // wrangler dev's bundles and local state
      'test/.readme-example.generated.ts',
    ],
  },
  {
    files: ['**/*.{ts,tsx,mts,cts,js,mjs,cjs}'],
    languageOptions: {
      parser: tseslint.parser,
      ecmaVersion: 2022,
      sourceType: 'module',
    },
    // Off: a few files keep disable comments for rules this set does not run (no-control-regex,
    // no-explicit-any), which say why the code looks as it does.
    linterOptions: { reportUnusedDisableDirectives: 'off' },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      'no-debugger': 'error',
      'no-var': 'error',
      'prefer-const': ['error', { destructuring: 'all' }],
      eqeqeq: ['error', 'smart'],
      'no-dupe-keys': 'error',
      'no-duplicate-case': 'error',
      'no-self-assign': 'error',
      'no-self-compare': 'error',
      'no-unsafe-finally': 'error',
      'no-unsafe-negation': 'error',
      'no-cond-assign': ['error', 'except-parens'],
      'no-empty-pattern': 'error',
      'use-isnan': 'error',
      'valid-typeof': 'error',
      'require-yield': 'error',
      'no-new-wrappers': 'error',
      'no-eval': 'error',
      'no-implied-eval': 'error',
      'no-new-func': 'error',
      'no-caller': 'error',
      'no-with': 'error',
      '@typescript-eslint/no-unsafe-declaration-merging': 'error',
      '@typescript-eslint/no-duplicate-enum-values': 'error',
      '@typescript-eslint/prefer-namespace-keyword': 'error',
    },
  },
  {
    // Shipped code only: tests build sparse arrays, throw strings, write `__proto__` and
    // '${…}' on purpose, to see that the code under test copes.
    files: ['**/*.{ts,tsx,mts,cts,js,mjs,cjs}'],
    ignores: ['test/**', '**/test/**', '**/*.test.ts'],
    rules: {
      'no-sparse-arrays': 'error',
      'no-template-curly-in-string': 'error',
      'no-throw-literal': 'error',
      'no-proto': 'error',
    },
  },
  {
    files: NODE_FREE,
    rules: {
      'no-restricted-globals': [
        'error',
        ...['process', 'Buffer', 'require', '__dirname', '__filename', 'global', 'setImmediate', 'clearImmediate', 'module', 'exports'].map((name) => ({
          name,
          message: `'${name}' is Node's. ${notHere}`,
        })),
      ],
      'no-restricted-properties': [
        'error',
        ...['process', 'Buffer', 'require', 'setImmediate'].map((property) => ({
          object: 'globalThis',
          property,
          message: `globalThis.${property} is Node's. ${notHere}`,
        })),
      ],
      'no-restricted-imports': [
        'error',
        {
          paths: nodeModules.map((name) => ({ name, message: `'${name}' is a Node module. ${notHere}` })),
          patterns: [{ regex: '^node:', message: `Node modules cannot be imported here. ${notHere}` }],
        },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: 'ImportExpression[source.value=/^node:/]',
          message: `Node modules cannot be imported here. ${notHere}`,
        },
      ],
    },
  },
);
