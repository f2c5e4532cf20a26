// The README's first example, exactly as a reader copies it: an ES module (top-level await) whose
// `console.log(…); // <printed> — <why>` lines say what each prints. Nothing is added to it: it
// must run as copied (no `policyYaml` or `stripe` supplied from outside).

export interface ReadmeExample {
  /** The block's text, verbatim (an ES module). */
  readonly module: string;
  /** What the README's comments say the module prints, one line each, in order. */
  readonly expected: string[];
}

export function firstReadmeExample(readme: string): ReadmeExample {
  const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  if (block === undefined) throw new Error('the README has no ```ts block');
  const expected: string[] = [];
  for (const line of block.split('\n')) {
    const m = /^console\.log\(.*\);\s*\/\/ (.*?)(?: — .*)?$/.exec(line);
    if (m) expected.push(m[1]!);
  }
  if (expected.length < 3)
    throw new Error(`the README's first example marks ${expected.length} printed values ("console.log(…); // <printed> — <why>"), expected at least 3`);
  return { module: block, expected };
}
