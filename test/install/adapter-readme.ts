// What an adapter README tells a reader to do, read from its text: the install line (the first
// `npm install` of its first ```sh block), the example (its last ```ts block, verbatim), what the
// example prints (the plain ``` block after "it prints:") and the packages the example imports.

export interface AdapterReadme {
  /** The words after `npm install` on the install line (flags left out), as written. */
  readonly install: string[];
  /** The example, verbatim. */
  readonly example: string;
  /** What the README says the example prints, verbatim. */
  readonly prints: string;
}

export function adapterReadme(readme: string, file = 'README.md'): AdapterReadme {
  const blocks = [...readme.matchAll(/```(\w*)\n([\s\S]*?)```/g)];
  const sh = blocks.find((b) => b[1] === 'sh')?.[2];
  const line = sh?.split('\n').find((l) => /^npm install /.test(l));
  if (line === undefined) throw new Error(`${file}: its first \`\`\`sh block has no npm install line`);
  const install = line
    .replace(/\s#.*$/, '')
    .trim()
    .split(/\s+/)
    .slice(2)
    .filter((w) => !w.startsWith('-'));
  const example = blocks.filter((b) => b[1] === 'ts').at(-1)?.[2];
  if (example === undefined) throw new Error(`${file}: no \`\`\`ts block`);
  const after = readme.indexOf('it prints:');
  const prints = after < 0 ? undefined : blocks.find((b) => b[1] === '' && b.index! > after)?.[2];
  if (prints === undefined) throw new Error(`${file}: no plain \`\`\` block after "it prints:"`);
  return { install, example, prints };
}

/** The package a specifier names (`ai/test` → `ai`, `@scope/x/y` → `@scope/x`); null for `node:` and relative ones. */
export function packageOf(specifier: string): string | null {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:')) return null;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** The packages a module imports (static `import … from '…'` and `import '…'`), sorted. */
export function importedPackages(module: string): string[] {
  const specs = [...module.matchAll(/^\s*import\s+(?:[\s\S]*?\s+from\s+)?['"]([^'"]+)['"]/gm)].map((m) => m[1]!);
  return [...new Set(specs.map(packageOf).filter((p): p is string => p !== null))].sort();
}

/** `name@range` split (a scoped name keeps its leading `@`). */
export function splitSpec(spec: string): { name: string; range: string | undefined } {
  const at = spec.indexOf('@', 1);
  return at < 0 ? { name: spec, range: undefined } : { name: spec.slice(0, at), range: spec.slice(at + 1) };
}
