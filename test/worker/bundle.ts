/**
 * Builds the worker's entry points the way a deployment would, for the workerd and Deno runs
 * and the bench: esbuild, ESM, the `@ctrlrun/source` condition.
 *
 * - workerd: `--platform=neutral` with browser main fields and the `browser` condition, so
 *   sql.js's browser build goes in; its `.wasm` import stays external and is handed to the
 *   worker as a CompiledWasm module (what wrangler does with a `.wasm` import).
 * - Deno: `sql.js` and the server stores' drivers stay external and resolve from `node_modules`
 *   (run from the repository root with `--node-modules-dir=manual`); `@ctrlrun/store-node` is
 *   bundled, so the store and the app share one copy of the kernel.
 */
import { createRequire } from 'node:module';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type BuildOptions, type Plugin } from 'esbuild';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Inside the repository, so Deno finds `node_modules` from the bundle. */
export const out = join(root, 'node_modules', '.cache', 'ctrlrun-worker');
const require = createRequire(import.meta.url);

/**
 * Before 2026-08-04, from which Node compatibility would have to be switched off explicitly
 * (`no_nodejs_compat`); no later than the pinned workerd's own date.
 */
export const COMPATIBILITY_DATE = '2026-04-01';

const shared: BuildOptions = {
  bundle: true,
  format: 'esm',
  target: 'es2022',
  conditions: ['@ctrlrun/source'],
  metafile: true,
  logLevel: 'silent',
  absWorkingDir: root,
};

/** A built workerd worker: the script and the sql.js `.wasm` it imports. */
export interface WorkerdBundle {
  script: string;
  scriptPath: string;
  /** The module name the script imports the `.wasm` under. */
  wasmName: string;
  wasm: Uint8Array;
  /** Every source file that went in (repository-relative). */
  inputs: string[];
}

/** Bundles a workerd entry (the worker's own unless `entry` names another, e.g. a test's). */
export async function bundleWorkerd(name = 'workerd', entry = join(root, 'worker', 'src', 'runtime', 'workerd.ts')): Promise<WorkerdBundle> {
  await mkdir(out, { recursive: true });
  const wasmPaths: string[] = [];
  // The `.wasm` import becomes a sibling module of the script, resolved from where sql.js is.
  const wasmPlugin: Plugin = {
    name: 'wasm-module',
    setup(b) {
      b.onResolve({ filter: /\.wasm$/ }, (args) => {
        const path = require.resolve(args.path, { paths: [args.resolveDir] });
        wasmPaths.push(path);
        return { path: `./${basename(path)}`, external: true };
      });
    },
  };
  const scriptPath = join(out, `${name}.mjs`);
  const result = await build({
    ...shared,
    entryPoints: [entry],
    outfile: scriptPath,
    platform: 'neutral',
    mainFields: ['browser', 'module', 'main'],
    conditions: ['@ctrlrun/source', 'browser', 'workerd', 'worker'],
    minify: true,
    plugins: [wasmPlugin],
  });
  if (wasmPaths.length !== 1) throw new Error(`expected one .wasm import in the workerd bundle, found ${wasmPaths.length}`);
  return {
    script: await readFile(scriptPath, 'utf8'),
    scriptPath,
    wasmName: basename(wasmPaths[0]!),
    wasm: await readFile(wasmPaths[0]!),
    inputs: Object.keys(result.metafile!.inputs),
  };
}

/**
 * Any module for workerd, as {@link bundleWorkerd} builds the worker (no `.wasm` allowed):
 * `alias` replaces imports (the conformance run swaps `vitest` for the harness's stand-in).
 */
export async function bundleWorkerdModule(
  entry: string,
  name: string,
  alias: Record<string, string> = {},
): Promise<{ script: string; scriptPath: string; inputs: string[] }> {
  await mkdir(out, { recursive: true });
  const scriptPath = join(out, `${name}.mjs`);
  const result = await build({
    ...shared,
    entryPoints: [join(root, entry)],
    outfile: scriptPath,
    platform: 'neutral',
    mainFields: ['browser', 'module', 'main'],
    conditions: ['@ctrlrun/source', 'browser', 'workerd', 'worker'],
    alias,
  });
  return { script: await readFile(scriptPath, 'utf8'), scriptPath, inputs: Object.keys(result.metafile!.inputs) };
}

export async function bundleDeno(name = 'deno', entry = 'deno.ts'): Promise<string> {
  await mkdir(out, { recursive: true });
  await writeFile(join(out, 'package.json'), '{ "type": "module" }\n');
  const outfile = join(out, `${name}.mjs`);
  // store-node goes in (one kernel in the process); its database drivers resolve from node_modules.
  await build({
    ...shared,
    entryPoints: [join(root, 'worker', 'src', 'runtime', entry)],
    outfile,
    platform: 'neutral',
    mainFields: ['module', 'main'],
    // pkce-challenge (the MCP SDK client's) has only browser and node builds, which a neutral
    // bundle cannot pick between: Deno resolves it from node_modules itself, as it does sql.js.
    external: ['sql.js', 'better-sqlite3', 'pg', '@electric-sql/pglite', 'pkce-challenge', 'node:*'],
  });
  return relative(root, outfile);
}

/** The deno binary the `deno` npm package installed (or its Node launcher). */
export function denoCommand(): [string, string[]] {
  const pkg = dirname(require.resolve('deno/package.json'));
  const binary = join(pkg, process.platform === 'win32' ? 'deno.exe' : 'deno');
  return existsSync(binary) ? [binary, []] : [process.execPath, [join(pkg, 'bin.cjs')]];
}
