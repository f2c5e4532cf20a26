/**
 * `npm run check:packages` (part of `npm test`): every publishable package under `packages/`
 * (see scripts/packages.ts) is checked as it would ship.
 *
 * 1. The manifest and folder: license, repository, engines, sideEffects, exports, files, a
 *    prepack that builds, README, LICENSE, exact internal versions.
 * 2. Built once (`tsc -b` over the packages, incremental), then packed with `npm pack` into a
 *    temporary directory (scripts skipped: the build just ran; the pack-and-install test runs
 *    the real `prepack`).
 * 3. Each tarball: its file list (no tests, sources, maps, stale builds), `publint` on the
 *    tarball's bytes (warnings fail, suggestions are printed), and `@arethetypeswrong/core`
 *    with the ESM-only profile (node10 and require-from-CJS resolutions are out of scope: the
 *    packages are ESM only). Offline: nothing is fetched.
 *
 * 4. Every value an entry point exports is used somewhere outside the package's own source
 *    (scripts/unused-exports.ts): documentation, a test, another package, the examples.
 *
 * Prints one line per package with its packed and unpacked size; exits 1 on any problem.
 *
 * @module
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { checkPackage, createPackageFromTarballData } from '@arethetypeswrong/core';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import { allManifestProblems, publishablePackages, ROOT, tarballProblems } from './packages.js';
import { unusedExports } from './unused-exports.js';

const require = createRequire(import.meta.url);
const IGNORED_RESOLUTIONS = new Set(['node10', 'node16-cjs']);

interface PackResult {
  name: string;
  filename: string;
  size: number;
  unpackedSize: number;
  files: { path: string }[];
}

const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;

async function main(): Promise<number> {
  const problems = allManifestProblems();
  const packages = publishablePackages();
  // An export nobody documents or tests is exported for no one: keep it internal, or document it.
  for (const u of unusedExports()) problems.push(`exported but used by no documentation, test or other package: ${u}`);
  if (packages.length === 0) problems.push('no publishable package under packages/');

  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-b', ...packages.map((p) => p.path)], { cwd: ROOT, stdio: 'inherit' });

  const dest = mkdtempSync(join(tmpdir(), 'ctrlrun-pack-'));
  try {
    const out = execFileSync(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', dest, ...packages.flatMap((p) => ['-w', `packages/${p.dir}`])],
      { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const packed = JSON.parse(out) as PackResult[];
    for (const pkg of packages) {
      const result = packed.find((r) => r.name === pkg.name);
      if (!result) {
        problems.push(`${pkg.dir}: npm pack produced no tarball`);
        continue;
      }
      const data = new Uint8Array(readFileSync(join(dest, result.filename)));
      const found = tarballProblems(
        pkg,
        result.files.map((f) => f.path),
      ).map((p) => `${pkg.dir}: tarball: ${p}`);

      const lint = await publint({ pack: { tarball: data.slice().buffer }, level: 'suggestion' });
      for (const msg of lint.messages) {
        const text = `${pkg.dir}: publint ${msg.type}: ${formatMessage(msg, lint.pkg, { color: false }) ?? msg.code}`;
        if (msg.type === 'suggestion') console.log(`  ${text}`);
        else found.push(text);
      }

      const analysis = await checkPackage(createPackageFromTarballData(data));
      if (!analysis.types) found.push(`${pkg.dir}: arethetypeswrong: the package ships no types`);
      else
        for (const p of analysis.problems) {
          if ('resolutionKind' in p && IGNORED_RESOLUTIONS.has(p.resolutionKind)) continue;
          found.push(`${pkg.dir}: arethetypeswrong ${p.kind}: ${JSON.stringify(p)}`);
        }

      problems.push(...found);
      console.log(
        `${found.length === 0 ? 'ok  ' : 'FAIL'} ${pkg.name}@${pkg.version}  ${result.files.length} files, packed ${kib(result.size)}, unpacked ${kib(result.unpackedSize)}`,
      );
    }
  } finally {
    rmSync(dest, { recursive: true, force: true });
  }
  for (const p of problems) console.error(`  ✗ ${p}`);
  console.log(problems.length === 0 ? `check:packages: ${packages.length} packages ready to publish` : `check:packages: ${problems.length} problem(s)`);
  return problems.length === 0 ? 0 : 1;
}

process.exitCode = await main();
