// The README's example is the file examples/refund-agent.ts, and it prints what the README says.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const pkg = join(import.meta.dirname, '..');
const readme = readFileSync(join(pkg, 'README.md'), 'utf8');
const file = join(pkg, 'examples', 'refund-agent.ts');

describe('README', () => {
  it('shows examples/refund-agent.ts verbatim, and running it prints what the README says', () => {
    const blocks = [...readme.matchAll(/```(\w*)\n([\s\S]*?)```/g)];
    expect(blocks.at(-1)![2]).toBe(readFileSync(file, 'utf8'));
    const printed = blocks.find((b) => b[1] === '' && b.index! > readme.indexOf('it prints:'))![2];
    const out = execFileSync(process.execPath, ['--conditions=@ctrlrun/source', '--import', 'tsx', file], { cwd: pkg, encoding: 'utf8' });
    expect(out).toBe(printed);
  });
});
