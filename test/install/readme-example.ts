// The README's first example as a JavaScript module to run where the packages are installed: each
// `await …; // 'value'` line records what it produced, and the module prints the list as JSON.
// `policyYaml` is the try-it policy and `stripe` a fake that succeeds, as the README says.

export interface ReadmeExample {
  /** The module's text (ES module, top-level await). */
  readonly module: string;
  /** What the README's comments say each marked line produces, in order. */
  readonly expected: string[];
}

export function firstReadmeExample(readme: string): ReadmeExample {
  const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  if (block === undefined) throw new Error('the README has no ```ts block');
  const lines = block.split('\n');
  const expected: string[] = [];
  const body = lines
    .filter((l) => !l.startsWith('import '))
    .map((l) => {
      const m = /^await (.*);\s*\/\/ '([^']+)'/.exec(l);
      if (!m) return l;
      expected.push(m[2]!);
      return `seen.push(await ${m[1]});`;
    });
  if (expected.length < 3) throw new Error(`the README's first example marks ${expected.length} results ("await …; // 'value'"), expected at least 3`);
  const module = [
    ...lines.filter((l) => l.startsWith('import ')),
    "import { TRY_IT_POLICY_YAML as policyYaml } from '@ctrlrun/kernel/try-it';",
    'const seen = [];',
    "const stripe = { refunds: { create: (r) => ({ ...r, status: 'succeeded' }) } };",
    ...body,
    "console.log(JSON.stringify(seen.map((v) => (typeof v === 'object' && v !== null ? v.status : v))));",
  ].join('\n');
  return { module, expected };
}
