// A package README's example is a file of that package, shown verbatim as the README's last
// ```ts block, and running it prints the plain ``` block that follows "it prints:".
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

export function describeReadmeExample(packageDir: string, example: string): void {
  describe('README', () => {
    it(`shows ${example} verbatim, and running it prints what the README says`, () => {
      const readme = readFileSync(join(packageDir, 'README.md'), 'utf8');
      const file = join(packageDir, example);
      const blocks = [...readme.matchAll(/```(\w*)\n([\s\S]*?)```/g)];
      expect(blocks.at(-1)![2]).toBe(readFileSync(file, 'utf8'));
      const printed = blocks.find((b) => b[1] === '' && b.index! > readme.indexOf('it prints:'))![2];
      const out = execFileSync(process.execPath, ['--conditions=@ctrlrun/source', '--import', 'tsx', file], { cwd: packageDir, encoding: 'utf8' });
      expect(out).toBe(printed);
    });
  });
}
