/**
 * `npm run check:portability`: the same scenario (`test/portability/scenario.ts`: the six
 * steps of `@ctrlrun/kernel/try-it` on `@ctrlrun/store-sqljs`) runs in Node, Deno and workerd
 * (Node compatibility off). Each runtime's results must be what docs/spec/04-surfaces.md §4 says, and the three,
 * ids and times masked, must be identical. Prints one line per runtime; exits 1 if any runtime
 * fails, answers wrongly or differs.
 *
 * - Node runs the TypeScript source (tsx, `@ctrlrun/source`); sql.js is its Node build.
 * - Deno runs an esbuild bundle with `sql.js` left external, resolved from `node_modules`.
 * - workerd (miniflare) runs an esbuild bundle (`--platform=neutral`, browser main fields) with
 *   sql.js's browser build inside and its `.wasm` as a CompiledWasm module.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { basename, dirname, join, relative, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { build, type BuildOptions, type Metafile } from 'esbuild';
import { Miniflare } from 'miniflare';
import { firstDifference, mask, outcomes, unexpected } from '../test/portability/compare.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const here = join(root, 'test', 'portability');
// Inside the repository, so Deno's `--node-modules-dir=manual` finds `node_modules/sql.js` from it.
const out = join(root, 'node_modules', '.cache', 'ctrlrun-portability');
const require = createRequire(import.meta.url);
const TIMEOUT_MS = 45_000;
/**
 * No later than this workerd's own date (1.20260426), and before 2026-08-04, from which Node
 * compatibility would have to be switched off explicitly with `no_nodejs_compat` (STYLE 15c).
 * The worker also checks that `process` is absent.
 */
const COMPATIBILITY_DATE = '2026-04-01';

interface Report {
  runtime: { name: string; version: string };
  steps: unknown[];
}

interface Run {
  name: string;
  ms: number;
  report?: Report;
  error?: string;
}

const shared: BuildOptions = {
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  mainFields: ['browser', 'module', 'main'],
  conditions: ['@ctrlrun/source'],
  target: 'es2022',
  metafile: true,
  logLevel: 'silent',
  absWorkingDir: root,
};

async function bundle(entry: string, outfile: string, options: BuildOptions): Promise<Metafile> {
  const result = await build({ ...shared, ...options, entryPoints: [join(here, entry)], outfile: join(out, outfile) });
  return result.metafile!;
}

function withTimeout<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Runs a child process to completion; its stdout's last line is the report. */
function runChild(name: string, command: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Report> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) {
        reject(new Error(`${name} exited with ${signal ?? code}: ${(stderr || stdout).trim()}`));
        return;
      }
      try {
        resolveRun(JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as Report);
      } catch {
        reject(new Error(`${name} printed no JSON report: ${(stdout + stderr).trim()}`));
      }
    });
  });
}

async function timed(name: string, fn: () => Promise<Report>): Promise<Run> {
  const start = performance.now();
  try {
    const report = await withTimeout(name, fn());
    return { name, ms: performance.now() - start, report };
  } catch (error) {
    return { name, ms: performance.now() - start, error: error instanceof Error ? error.message : String(error) };
  }
}

function runNode(): Promise<Report> {
  return runChild('node', process.execPath, ['--conditions=@ctrlrun/source', '--import', 'tsx', join(here, 'node.ts')]);
}

async function runDeno(): Promise<Report> {
  await bundle('deno.ts', 'deno.mjs', { external: ['sql.js'] });
  // The postinstall script links the binary next to the package's launcher; without it, the
  // launcher (a Node script) finds the platform package itself.
  const pkg = dirname(require.resolve('deno/package.json'));
  const binary = join(pkg, process.platform === 'win32' ? 'deno.exe' : 'deno');
  const [command, prefix] = existsSync(binary) ? [binary, []] : [process.execPath, [join(pkg, 'bin.cjs')]];
  const entry = relative(root, join(out, 'deno.mjs'));
  return runChild('deno', command, [...prefix, 'run', '-A', '--node-modules-dir=manual', '--no-config', entry], {
    DENO_NO_UPDATE_CHECK: '1',
    DENO_NO_PROMPT: '1',
    NO_COLOR: '1',
  });
}

async function runWorkerd(): Promise<Report> {
  // `browser` picks sql.js's browser build from its `exports`; the default one imports `node:fs`.
  const metafile = await bundle('workerd.ts', 'workerd.mjs', { external: ['*.wasm'], conditions: ['@ctrlrun/source', 'browser'] });
  // The `.wasm` must be the one built with the sql.js glue that went into the bundle.
  const glue = Object.keys(metafile.inputs).filter((input) => /node_modules\/sql\.js\/dist\/[^/]+\.js$/.test(input));
  if (glue.length !== 1) throw new Error(`expected one sql.js build in the workerd bundle, found ${glue.join(', ') || 'none'}`);
  const wasmPath = join(root, glue[0]!.replace(/\.js$/, '.wasm'));
  const mf = new Miniflare({
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [], // no nodejs_compat: the kernel must not need it
    modulesRoot: out,
    modules: [
      { type: 'ESModule', path: join(out, 'workerd.mjs'), contents: await readFile(join(out, 'workerd.mjs'), 'utf8') },
      { type: 'CompiledWasm', path: join(out, 'sql-wasm.wasm'), contents: await readFile(wasmPath) },
    ],
  });
  try {
    const response = await mf.dispatchFetch('http://portability.invalid/');
    const text = await response.text();
    if (!response.ok) throw new Error(`workerd answered ${response.status}: ${text} (sql.js build ${basename(wasmPath)})`);
    const report = JSON.parse(text) as Report;
    // Inside, workerd only says `Cloudflare-Workers`; its version is the package miniflare runs.
    const workerd = createRequire(require.resolve('miniflare')).resolve('workerd/package.json');
    report.runtime.version = `${(JSON.parse(await readFile(workerd, 'utf8')) as { version: string }).version} (${report.runtime.version})`;
    return report;
  } finally {
    await mf.dispose();
  }
}

function digest(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 12);
}

async function main(): Promise<number> {
  const started = performance.now();
  await mkdir(out, { recursive: true });
  await writeFile(join(out, 'package.json'), '{ "type": "module" }\n');
  const runs = await Promise.all([timed('node', runNode), timed('deno', runDeno), timed('workerd', runWorkerd)]);

  const reference = runs.find((r) => r.report)?.report;
  const referenceMasked = reference ? mask(reference.steps) : undefined;
  let failed = false;
  for (const run of runs) {
    const label = run.name.padEnd(8);
    const time = `${Math.round(run.ms)} ms`.padStart(8);
    if (!run.report) {
      failed = true;
      console.log(`${label} FAIL ${time}  ${run.error ?? 'no report'}`);
      continue;
    }
    const masked = mask(run.report.steps);
    const difference = firstDifference(referenceMasked, masked);
    const wrong = unexpected(run.report.steps);
    if (difference || wrong) failed = true;
    const version = `${run.report.runtime.name} ${run.report.runtime.version}`.padEnd(40);
    const status = wrong ? 'BAD ' : difference ? 'DIFF' : 'ok  ';
    const detail = wrong
      ? `not what docs/spec/04-surfaces.md §4 says: ${wrong}`
      : difference
        ? `differs from ${runs.find((r) => r.report)?.name}: ${difference}`
        : `${run.report.steps.length} calls as docs/spec/04-surfaces.md §4 says, masked results ${digest(masked)}`;
    console.log(`${label} ${status} ${time}  ${version} ${detail}`);
  }
  const total = `${((performance.now() - started) / 1000).toFixed(1)} s`;
  console.log(failed ? `portability: FAILED (${total})` : `portability: node, deno and workerd agree (${total}): ${outcomes(reference?.steps ?? [])}`);
  return failed ? 1 : 0;
}

process.exitCode = await main();
