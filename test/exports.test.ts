// Test what ships: every `exports` entry of every package imports from its built `dist` in plain
// Node (no source condition), as a consumer outside this repository would load it.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const packages = readdirSync(join(root, 'packages')).map((dir) => {
  const manifest = JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8')) as { name: string; exports: Record<string, unknown> };
  return { dir, name: manifest.name, specs: Object.keys(manifest.exports).filter((k) => k !== './package.json').map((k) => (k === '.' ? manifest.name : `${manifest.name}/${k.slice(2)}`)) };
});
const built = packages.every((p) => existsSync(join(root, 'packages', p.dir, 'dist')));
const why = 'the packages are not built (npm test runs `tsc -b` first; run it, then this test)';
if (!built && process.env['CI']) throw new Error(`CI: ${why}`);

describe.skipIf(!built)(`built packages${built ? '' : ` — skipped: ${why}`}`, () => {
  it('every exports entry of every package imports from dist in plain Node', () => {
    const specs = packages.flatMap((p) => p.specs);
    const script = `const specs = ${JSON.stringify(specs)};
      const out = {};
      for (const s of specs) { const m = await import(s); out[s] = Object.keys(m).length; }
      console.log(JSON.stringify(out));`;
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' })) as Record<string, number>;
    expect(Object.keys(out).sort()).toEqual([...specs].sort());
    for (const s of specs) expect(out[s], s).toBeGreaterThan(0);
  });
});
