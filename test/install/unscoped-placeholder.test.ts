// The placeholder published under the unscoped npm name `ctrlrun` (release/unscoped-ctrlrun): it
// holds the name so `npx --yes ctrlrun` without @ctrlrun/cli runs nobody else's code, and it runs
// nothing itself. Packed as npm would publish it, and its command run.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../scripts/packages.js';

const DIR = join(ROOT, 'release', 'unscoped-ctrlrun');
const manifest = JSON.parse(readFileSync(join(DIR, 'package.json'), 'utf8')) as Record<string, unknown>;
const cli = JSON.parse(readFileSync(join(ROOT, 'packages', 'cli', 'package.json'), 'utf8')) as Record<string, unknown>;

describe('the unscoped ctrlrun placeholder', () => {
  it('is the name ctrlrun at the release version, with no dependency, no script and only its command, README and licence', () => {
    expect(manifest['name']).toBe('ctrlrun');
    expect(manifest['version']).toBe(cli['version']);
    for (const key of ['dependencies', 'optionalDependencies', 'peerDependencies', 'scripts']) expect(manifest[key], key).toBeUndefined();
    expect(manifest['bin']).toEqual({ ctrlrun: './bin/ctrlrun.js' });
    const packed = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: DIR, encoding: 'utf8' })) as {
      files: { path: string }[];
    }[];
    expect(packed[0]!.files.map((f) => f.path).sort()).toEqual(['LICENSE', 'README.md', 'bin/ctrlrun.js', 'package.json']);
    expect(readFileSync(join(DIR, 'LICENSE'), 'utf8')).toBe(readFileSync(join(ROOT, 'LICENSE'), 'utf8'));
  });

  it('its command runs nothing: it names @ctrlrun/cli and exits 1, whatever it is asked', () => {
    for (const args of [[], ['approve', 'apr_1', '--as', 'x'], ['--help']]) {
      const r = spawnSync(process.execPath, [join(DIR, 'bin', 'ctrlrun.js'), ...args], { encoding: 'utf8' });
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('the ctrlrun command is @ctrlrun/cli');
      expect(r.stderr).toContain('npm install @ctrlrun/cli');
    }
  });
});
