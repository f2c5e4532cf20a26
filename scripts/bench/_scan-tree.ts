// A generated tree for `ctrlrun scan` timings: `files` TypeScript modules in folders of 100, each
// importing the next one in its folder (a ring of 100, so resolution crosses files), with an aliased child_process import,
// array built-ins, a protect()-covered call, and one uncovered shell call every 500 files.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Writes the tree under `root`; returns how many findings a scan must report (one per 500 files). */
export function writeScanTree(root: string, files: number, options: { tsconfig?: boolean } = {}): number {
  for (let i = 0; i < files; i++) {
    const dir = join(root, 'src', `m${Math.floor(i / 100)}`);
    if (i % 100 === 0) mkdirSync(dir, { recursive: true });
    const base = i - (i % 100);
    const n = base + ((i + 1 - base) % Math.min(100, files - base));
    writeFileSync(
      join(dir, `f${i}.ts`),
      [
        "import { exec as run } from 'node:child_process';",
        "import { protect } from '@ctrlrun/kernel';",
        `import { helper${n} } from '../m${Math.floor(n / 100)}/f${n}.js';`,
        `export function helper${i}(xs: number[]) {`,
        '  xs.push(1);',
        `  return xs.map((x) => x * ${i}).filter((x) => x > 2);`,
        '}',
        `export const guarded${i} = protect(async () => run('true'), { control: null as never, name: 'job.run' });`,
        i % 500 === 0 ? "export function purge() { run('rm -rf /tmp/x'); }" : `export const v${i} = helper${n};`,
        '',
      ].join('\n'),
    );
  }
  if (options.tsconfig)
    writeFileSync(
      join(root, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, types: [] }, include: ['src'] }),
    );
  return Math.ceil(files / 500);
}
