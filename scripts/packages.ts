/**
 * The publishable packages and what each must be to ship. Shared by `npm run check:packages`
 * (scripts/check-packages.ts) and the pack-and-install test (test/install/).
 *
 * A package is publishable when `packages/<dir>/package.json` exists and is not `"private": true`:
 * a package added under `packages/` is covered without editing anything here.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The part of a package.json these checks read. */
export interface Manifest {
  name?: unknown;
  version?: unknown;
  private?: unknown;
  description?: unknown;
  license?: unknown;
  repository?: unknown;
  engines?: unknown;
  sideEffects?: unknown;
  type?: unknown;
  files?: unknown;
  exports?: unknown;
  bin?: unknown;
  scripts?: unknown;
  publishConfig?: unknown;
  dependencies?: unknown;
  peerDependencies?: unknown;
  [key: string]: unknown;
}

export interface PackageInfo {
  /** The folder under `packages/`. */
  readonly dir: string;
  readonly path: string;
  readonly manifest: Manifest;
  readonly name: string;
  readonly version: string;
}

const readJson = (path: string): Manifest => JSON.parse(readFileSync(path, 'utf8')) as Manifest;

export function rootManifest(root = ROOT): Manifest {
  return readJson(join(root, 'package.json'));
}

/** Every `packages/*` with a package.json that is not private, sorted by folder. */
export function publishablePackages(root = ROOT): PackageInfo[] {
  const base = join(root, 'packages');
  return readdirSync(base, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(base, d.name, 'package.json')))
    .map((d) => {
      const manifest = readJson(join(base, d.name, 'package.json'));
      return { dir: d.name, path: join(base, d.name), manifest, name: String(manifest.name), version: String(manifest.version) };
    })
    .filter((p) => p.manifest.private !== true)
    .sort((a, b) => a.dir.localeCompare(b.dir));
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * What is wrong with one package's manifest and folder before it is packed, as sentences naming
 * the field; empty when it may ship. `all` is every publishable package (internal dependencies
 * must name their exact version, so the tarballs install together).
 */
export function manifestProblems(
  pkg: { dir: string; path: string; manifest: Manifest },
  root: Manifest,
  all: readonly { name: string; version: string }[],
  files: { readme: string | null; license: string | null; rootLicense: string },
): string[] {
  const m = pkg.manifest;
  const problems: string[] = [];
  const want = (ok: boolean, what: string) => void (ok || problems.push(what));
  want(typeof m.name === 'string' && m.name.startsWith('@ctrlrun/'), 'name: must be @ctrlrun/<name>');
  want(typeof m.version === 'string' && /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(m.version), 'version: must be a semver version');
  want(typeof m.description === 'string' && m.description.length > 0, 'description: missing');
  want(m.license === root.license && typeof m.license === 'string', `license: must be "${String(root.license)}" (the root package.json's)`);
  const repo = m.repository;
  const rootRepo = root.repository as { url?: unknown } | undefined;
  want(
    isObject(repo) && repo['type'] === 'git' && repo['url'] === rootRepo?.url && repo['directory'] === `packages/${pkg.dir}`,
    `repository: must be { "type": "git", "url": "${String(rootRepo?.url)}", "directory": "packages/${pkg.dir}" }`,
  );
  const rootEngines = root.engines as { node?: unknown } | undefined;
  want(isObject(m.engines) && m.engines['node'] === rootEngines?.node, `engines.node: must be "${String(rootEngines?.node)}" (the root package.json's)`);
  want(
    typeof m.sideEffects === 'boolean' || (Array.isArray(m.sideEffects) && m.sideEffects.every((s) => typeof s === 'string')),
    'sideEffects: must be false, true or a list of files',
  );
  want(m.type === 'module', 'type: must be "module"');
  want(
    isObject(m.exports) && Object.keys(m.exports).includes('.') && Object.keys(m.exports).includes('./package.json'),
    'exports: must map "." and "./package.json"',
  );
  if (isObject(m.exports)) {
    for (const [key, target] of Object.entries(m.exports)) {
      if (key === './package.json') continue;
      want(
        isObject(target) &&
          typeof target['types'] === 'string' &&
          typeof target['default'] === 'string' &&
          String(target['types']).startsWith('./dist/') &&
          String(target['default']).startsWith('./dist/'),
        `exports["${key}"]: must have "types" and "default" under ./dist/`,
      );
    }
  }
  want(Array.isArray(m.files) && m.files.includes('dist'), 'files: must list "dist" (and only what ships)');
  const scripts = isObject(m.scripts) ? m.scripts : {};
  want(
    typeof scripts['prepack'] === 'string' && /\btsc -b\b/.test(String(scripts['prepack'])),
    'scripts.prepack: must build (tsc -b), so a pack never ships without dist',
  );
  want(isObject(m.publishConfig) && m.publishConfig['access'] === 'public', 'publishConfig.access: must be "public" (a scoped package is private by default)');
  want(files.readme !== null && files.readme.trim().length > 0, 'README.md: missing');
  want(files.license === files.rootLicense, 'LICENSE: missing or not the same as the root LICENSE');
  for (const field of ['dependencies', 'peerDependencies'] as const) {
    const deps = isObject(m[field]) ? (m[field] as Record<string, unknown>) : {};
    for (const [dep, range] of Object.entries(deps)) {
      const internal = all.find((p) => p.name === dep);
      if (internal)
        want(
          range === internal.version,
          `${field}["${dep}"]: must be exactly "${internal.version}" (the workspace version), so the packed tarballs install together`,
        );
      else if (dep.startsWith('@ctrlrun/')) problems.push(`${field}["${dep}"]: no publishable package has that name`);
    }
  }
  return problems;
}

/** The problems of every publishable package, `dir: problem`. */
export function allManifestProblems(root = ROOT): string[] {
  const all = publishablePackages(root);
  const rootM = rootManifest(root);
  const rootLicense = readFileSync(join(root, 'LICENSE'), 'utf8');
  const read = (p: string) => (existsSync(p) ? readFileSync(p, 'utf8') : null);
  const problems = all.flatMap((p) =>
    manifestProblems(p, rootM, all, { readme: read(join(p.path, 'README.md')), license: read(join(p.path, 'LICENSE')), rootLicense }).map(
      (x) => `${p.dir}: ${x}`,
    ),
  );
  problems.push(...versionProblems(all));
  return problems;
}

/** All packages are released together at one version (RELEASING.md): any other is named. */
export function versionProblems(all: readonly { dir: string; version: string }[]): string[] {
  const first = all[0];
  if (!first) return [];
  return all
    .filter((p) => p.version !== first.version)
    .map((p) => `${p.dir}: version ${p.version} differs from ${first.dir}'s ${first.version} (every package is released at one version)`);
}

/**
 * What a tarball may hold, by path inside the package: the manifest, README, LICENSE, CHANGELOG,
 * built JavaScript and declarations under dist/ (each from a source file that exists, so a
 * deleted module's stale build never ships), and the bin scripts. No tests, sources, source maps
 * or build info.
 */
export function tarballProblems(pkg: { dir: string; path: string; manifest: Manifest }, files: readonly string[]): string[] {
  const problems: string[] = [];
  const binFiles = new Set(Object.values(isObject(pkg.manifest.bin) ? pkg.manifest.bin : {}).map((b) => String(b).replace(/^\.\//, '')));
  for (const f of files) {
    if (['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md'].includes(f)) continue;
    if (binFiles.has(f)) continue;
    const built = /^dist\/(.+)\.(js|d\.ts)$/.exec(f);
    if (built) {
      if (/(^|\/)(test|__tests__)\//.test(built[1]!) || /\.(test|spec)$/.test(built[1]!)) problems.push(`${f}: a test in the tarball`);
      else if (!existsSync(join(pkg.path, 'src', `${built[1]}.ts`)) && !existsSync(join(pkg.path, 'src', `${built[1]}.tsx`)))
        problems.push(`${f}: built from no file in src/ (a stale build; delete dist and rebuild)`);
      continue;
    }
    problems.push(`${f}: not meant to ship (only package.json, README.md, LICENSE, CHANGELOG.md, dist/**/*.js, dist/**/*.d.ts and the bin scripts)`);
  }
  for (const must of ['package.json', 'README.md', 'LICENSE']) if (!files.includes(must)) problems.push(`${must}: not in the tarball`);
  if (!files.some((f) => f.startsWith('dist/'))) problems.push('dist/: not in the tarball (was it built?)');
  return problems;
}

// `node --import tsx scripts/packages.ts`: the publishable packages as npm workspace flags
// (`-w packages/kernel -w …`), for the release workflow.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(
    publishablePackages()
      .map((p) => `-w packages/${p.dir}`)
      .join(' '),
  );
}
