/**
 * Builds `<ctrlrun-try-it>` into one ES module plus sql.js's wasm: `ctrlrun-try-it.js` and
 * `ctrlrun-sql.wasm`, side by side (the module finds the wasm next to itself). esbuild, browser
 * platform: a Node built-in anywhere in the graph fails the build. Class names are kept because
 * the kernel's errors take their `name` from their class and the element shows it.
 *
 *   node --import tsx playground/widget/build.ts [outDir] [--split]   (default playground/widget/dist)
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

/** What a build wrote. */
export interface WidgetBuild {
  /** The module a page loads (`ctrlrun-try-it.js`). */
  module: string;
  /** The wasm (`ctrlrun-sql.wasm`). */
  wasm: string;
  /** With `split`: the chunks the module imports when an element starts (the kernel side). */
  chunks: string[];
}

/**
 * Builds into `outDir`. By default one ES module with everything in it. With `split`, the module
 * holds only the element (its DOM, the guide, the rendering) and imports the kernel side
 * (`engine.ts`: the kernel, yaml, sql.js) as a chunk when an element starts, with the wasm.
 */
export async function buildWidget(outDir: string = join(here, 'dist'), options: { split?: boolean } = {}): Promise<WidgetBuild> {
  mkdirSync(outDir, { recursive: true });
  const result = await build({
    entryPoints: { 'ctrlrun-try-it': join(here, 'element.ts') },
    outdir: outDir,
    splitting: options.split === true,
    chunkNames: 'ctrlrun-try-it-[hash]',
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    keepNames: true,
    conditions: ['@ctrlrun/source', 'module'],
    legalComments: 'none',
    plugins: [inlineCss],
    metafile: true,
    logLevel: 'warning',
  });
  const written = Object.keys(result.metafile.outputs).map((f) => resolve(f));
  const module = join(outDir, MODULE_FILE);
  const wasm = join(outDir, WASM_OUT);
  copyFileSync(join(dirname(require.resolve('sql.js')), 'sql-wasm-browser.wasm'), wasm);
  return { module, wasm, chunks: written.filter((f) => f !== resolve(module)) };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const dir = args.find((a) => !a.startsWith('--'));
  const out = await buildWidget(dir ? resolve(dir) : undefined, { split: args.includes('--split') });
  console.log(`built ${[out.module, ...out.chunks, out.wasm].join(', ')}`);
}
