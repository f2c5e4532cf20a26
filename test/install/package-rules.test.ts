// The rules `npm run check:packages` holds every publishable package to (scripts/packages.ts):
// the packages in this repository pass them, and each rule catches the mistake it names.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  allManifestProblems,
  manifestProblems,
  publishablePackages,
  ROOT,
  rootManifest,
  tarballProblems,
  versionProblems,
  type Manifest,
} from '../../scripts/packages.js';

const root = rootManifest();
const all = publishablePackages();
const kernel = all.find((p) => p.dir === 'kernel')!;
const rootLicense = readFileSync(join(ROOT, 'LICENSE'), 'utf8');
const good: { readme: string | null; license: string | null; rootLicense: string } = { readme: '# @ctrlrun/kernel\n', license: rootLicense, rootLicense };
const check = (change: (m: Manifest) => void, files = good) => {
  const manifest = structuredClone(kernel.manifest);
  change(manifest);
  return manifestProblems({ ...kernel, manifest }, root, all, files);
};

describe('check:packages rules', () => {
  it('discovers every packages/* that is not private, and the repository passes every rule', () => {
    expect(all.map((p) => p.dir)).toEqual(expect.arrayContaining(['cli', 'kernel', 'store-node', 'store-sqljs']));
    expect(all.every((p) => p.manifest.private !== true)).toBe(true);
    expect(root.license).toBe('MIT');
    expect(allManifestProblems()).toEqual([]);
  });

  it('the kernel as it is: no problem', () => {
    expect(check(() => {})).toEqual([]);
  });

  const cases: [string, (m: Manifest) => void, RegExp][] = [
    ['no license', (m) => delete m.license, /^license:/],
    ['another license', (m) => (m.license = 'ISC'), /^license: must be "MIT"/],
    ['no repository', (m) => delete m.repository, /^repository:/],
    ['the repository of another folder', (m) => ((m.repository as { directory: string }).directory = 'packages/cli'), /"directory": "packages\/kernel"/],
    ['no engines', (m) => delete m.engines, /^engines\.node/],
    ['no sideEffects', (m) => delete m.sideEffects, /^sideEffects/],
    ['no prepack build', (m) => ((m.scripts as Record<string, string>)['prepack'] = 'echo'), /^scripts\.prepack/],
    ['not public', (m) => delete m.publishConfig, /^publishConfig\.access/],
    ['an export without types', (m) => delete (m.exports as Record<string, Record<string, string>>)['./errors']!['types'], /^exports\["\.\/errors"\]/],
    ['files without dist', (m) => (m.files = ['src']), /^files:/],
    ['CommonJS', (m) => (m.type = 'commonjs'), /^type:/],
  ];
  for (const [what, change, message] of cases) {
    it(`refuses ${what}`, () => {
      const problems = check(change);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(message);
    });
  }

  it('refuses an internal dependency that is not the exact workspace version', () => {
    const cli = all.find((p) => p.dir === 'cli')!;
    const manifest = structuredClone(cli.manifest);
    (manifest.dependencies as Record<string, string>)['@ctrlrun/kernel'] = '^0.1.0';
    (manifest.dependencies as Record<string, string>)['@ctrlrun/nope'] = '0.1.0';
    const problems = manifestProblems({ ...cli, manifest }, root, all, { ...good, readme: 'x' });
    expect(problems).toEqual([
      expect.stringMatching(/^dependencies\["@ctrlrun\/kernel"\]: must be exactly "0\.1\.0"/),
      expect.stringMatching(/^dependencies\["@ctrlrun\/nope"\]: no publishable package/),
    ]);
  });

  it('refuses a missing README and a LICENSE that is not the root one', () => {
    expect(check(() => {}, { ...good, readme: null })).toEqual(['README.md: missing']);
    expect(check(() => {}, { ...good, license: 'Copyright me' })).toEqual([expect.stringMatching(/^LICENSE:/)]);
    expect(check(() => {}, { ...good, license: null })).toEqual([expect.stringMatching(/^LICENSE:/)]);
  });

  it('one version across packages', () => {
    expect(
      versionProblems([
        { dir: 'a', version: '1.0.0' },
        { dir: 'b', version: '1.0.0' },
      ]),
    ).toEqual([]);
    expect(
      versionProblems([
        { dir: 'a', version: '1.0.0' },
        { dir: 'b', version: '1.0.1' },
      ]),
    ).toEqual([expect.stringMatching(/^b: version 1\.0\.1 differs from a's 1\.0\.0/)]);
  });

  it('a tarball holds only the manifest, README, LICENSE, built dist from existing sources, and bin scripts', () => {
    const ok = ['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts', 'dist/verify/index.js', 'dist/store/migrations.d.ts'];
    expect(tarballProblems(kernel, ok)).toEqual([]);
    const cli = all.find((p) => p.dir === 'cli')!;
    expect(tarballProblems(cli, ['package.json', 'README.md', 'LICENSE', 'bin/ctrlrun.js', 'dist/bin.js'])).toEqual([]);
    const bad = tarballProblems(kernel, [
      'package.json',
      'dist/index.js',
      'dist/index.js.map',
      'dist/gone-module.js',
      'src/index.ts',
      'test/hash.test.ts',
      'dist/test/x.test.js',
      'tsconfig.tsbuildinfo',
      'bin/ctrlrun.js',
    ]);
    expect(bad).toEqual([
      expect.stringMatching(/^dist\/index\.js\.map: not meant to ship/),
      expect.stringMatching(/^dist\/gone-module\.js: built from no file in src\//),
      expect.stringMatching(/^src\/index\.ts: not meant to ship/),
      expect.stringMatching(/^test\/hash\.test\.ts: not meant to ship/),
      expect.stringMatching(/^dist\/test\/x\.test\.js: a test in the tarball/),
      expect.stringMatching(/^tsconfig\.tsbuildinfo: not meant to ship/),
      expect.stringMatching(/^bin\/ctrlrun\.js: not meant to ship/),
      'README.md: not in the tarball',
      'LICENSE: not in the tarball',
    ]);
    expect(tarballProblems(kernel, ['package.json', 'README.md', 'LICENSE'])).toEqual([expect.stringMatching(/^dist\/: not in the tarball/)]);
  });
});
