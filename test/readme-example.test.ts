// The README's first example is code that runs as copied: saved verbatim as an ES module and run
// with Node, it prints what its `console.log(…); // <printed>` comments say.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { firstReadmeExample } from './install/readme-example.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

describe('README', () => {
  it('the first example runs as copied and prints what its comments say', () => {
    const example = firstReadmeExample(readme);
    // Nothing the block does not define or import: the old block used `policyYaml` and `stripe` from nowhere.
    expect(example.module).not.toMatch(/\bpolicyYaml\b|\bstripe\.refunds\b/);
    // A .mts file in the workspace: the packages resolve to their sources, as an install resolves them to dist.
    const file = fileURLToPath(new URL('./.readme-example.generated.mts', import.meta.url));
    writeFileSync(file, example.module);
    try {
      const r = spawnSync(process.execPath, ['--conditions=@ctrlrun/source', '--import', 'tsx', file], { cwd: ROOT, encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout.trimEnd().split('\n')).toEqual(example.expected);
    } finally {
      rmSync(file, { force: true });
    }
  });
});
