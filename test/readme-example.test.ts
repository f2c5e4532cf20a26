// The README's first example is code that runs: each `await …; // 'value'` line must produce that value.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const block = /```ts\n([\s\S]*?)```/.exec(readme)![1]!;

describe('README', () => {
  it('the first example runs and prints what its comments say', async () => {
    const lines = block.split('\n');
    const imports = lines.filter((l) => l.startsWith('import '));
    const body = lines.filter((l) => !l.startsWith('import '));
    const expected: string[] = [];
    const rewritten = body.map((l) => {
      const m = /^await (.*);\s*\/\/ '([^']+)'/.exec(l);
      if (!m) return l;
      expected.push(m[2]!);
      return `seen.push(await ${m[1]});`;
    });
    expect(expected.length).toBeGreaterThanOrEqual(3);
    const file = new URL('./.readme-example.generated.ts', import.meta.url);
    writeFileSync(
      file,
      [
        ...imports,
        "import { TRY_IT_POLICY_YAML as policyYaml } from '@ctrlrun/kernel/try-it';",
        'export const seen: unknown[] = [];',
        "const stripe = { refunds: { create: (r: unknown) => ({ ...(r as object), status: 'succeeded' }) } };",
        ...rewritten,
      ].join('\n'),
    );
    try {
      const mod = (await import(file.href)) as { seen: unknown[] };
      const got = mod.seen.map((v) => (typeof v === 'object' && v !== null ? (v as { status: string }).status : v));
      expect(got).toEqual(expected);
    } finally {
      rmSync(file, { force: true });
    }
  });
});
