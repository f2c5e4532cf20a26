/**
 * Builds `<ctrlrun-try-it>` into one ES module plus sql.js's wasm: `ctrlrun-try-it.js` and
 * `ctrlrun-sql.wasm`, side by side (the module finds the wasm next to itself). esbuild, browser
 * platform: a Node built-in anywhere in the graph fails the build. Class names are kept because
 * the kernel's errors take their `name` from their class and the element shows it.
 *
 *   node --import tsx playground/widget/build.ts [outDir]   (default playground/widget/dist)
 */
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

/** The module's file name. */
export const MODULE_FILE = 'ctrlrun-try-it.js';
/** The wasm's file name (the element's `WASM_FILE`). */
export const WASM_OUT = 'ctrlrun-sql.wasm';

/** `import css from './style.css?inline'` (Vite's spelling) as the file's text. */
const inlineCss: Plugin = {
  name: 'inline-css',
  setup(b) {
    b.onResolve({ filter: /\.css\?inline$/ }, (args) => ({ path: resolve(args.resolveDir, args.path.replace(/\?inline$/, '')), namespace: 'inline-css' }));
    b.onLoad({ filter: /.*/, namespace: 'inline-css' }, (args) => ({ contents: readFileSync(args.path, 'utf8'), loader: 'text' }));
  },
};

/** Builds into `outDir`; returns the two files' paths. */
export async function buildWidget(outDir: string = join(here, 'dist')): Promise<{ module: string; wasm: string }> {
  mkdirSync(outDir, { recursive: true });
  const module = join(outDir, MODULE_FILE);
  await build({
    entryPoints: [join(here, 'element.ts')],
    outfile: module,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    keepNames: true,
    conditions: ['@ctrlrun/source', 'module'],
    legalComments: 'none',
    plugins: [inlineCss],
    logLevel: 'warning',
  });
  const wasm = join(outDir, WASM_OUT);
  copyFileSync(join(dirname(require.resolve('sql.js')), 'sql-wasm-browser.wasm'), wasm);
  return { module, wasm };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = await buildWidget(process.argv[2] ? resolve(process.argv[2]) : undefined);
  console.log(`built ${out.module} and ${out.wasm}`);
}
