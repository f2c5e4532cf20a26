/**
 * Names a package exports that nobody outside its own source uses: for each publishable package
 * and each entry of its `exports` map (the `@ctrlrun/source` file), every exported name (values and
 * types, as TypeScript sees the module) is looked for, as a whole word, in the documentation and
 * the code around it — the README and docs, every test, the other packages, the worker, the
 * playground and the examples, and the package's own README and tests; not its own `src`, nor the
 * CHANGELOG (which names what was removed). Only values count: a type is part of the signature of
 * the value that takes or returns it. A name
 * found nowhere there is exported for no one: keep it internal, or document it. Part of
 * `npm run check:packages`.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { publishablePackages, ROOT } from './packages.js';

const SKIP = new Set(['node_modules', 'dist', '.git', '.vitepress', 'cache', 'test-artifacts', 'coverage']);
const TEXT = /\.(ts|tsx|mts|js|mjs|cjs|md|json|yaml|yml|html|vue)$/;

function walk(dir: string, exclude: string, out: string[] = []): string[] {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const path = join(dir, name);
    if (path === exclude) continue;
    const stat = statSync(path);
    if (stat.isDirectory()) walk(path, exclude, out);
    else if (TEXT.test(name) && stat.size < 4_000_000 && name !== 'package-lock.json' && name !== 'CHANGELOG.md') out.push(path);
  }
  return out;
}

/** Every word (identifier-like token) in the files. */
function words(files: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const f of files) for (const m of readFileSync(f, 'utf8').matchAll(/[A-Za-z_$][A-Za-z0-9_$]*/g)) out.add(m[0]);
  return out;
}

/** The `@ctrlrun/source` file of each entry of the exports map, by subpath. */
function entries(manifest: Record<string, unknown>, dir: string): [string, string][] {
  const map = manifest['exports'];
  if (typeof map !== 'object' || map === null) return [];
  const out: [string, string][] = [];
  for (const [sub, target] of Object.entries(map as Record<string, unknown>)) {
    const source = typeof target === 'object' && target !== null ? (target as Record<string, unknown>)['@ctrlrun/source'] : undefined;
    if (typeof source === 'string') out.push([sub, resolve(dir, source)]);
  }
  return out;
}

/** The names each entry exports, as the compiler sees them. */
function exportedNames(files: readonly string[]): Map<string, string[]> {
  const program = ts.createProgram([...files], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
    skipLibCheck: true,
    allowImportingTsExtensions: false,
  });
  const checker = program.getTypeChecker();
  const out = new Map<string, string[]>();
  for (const f of files) {
    const source = program.getSourceFile(f);
    const symbol = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    // Values only: a type (an options interface, a result shape) is part of the signature of the
    // value that takes or returns it, and an application annotating its code needs it.
    const values = (symbol === undefined ? [] : checker.getExportsOfModule(symbol)).filter((s) => {
      const target = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s;
      return (target.flags & ts.SymbolFlags.Value) !== 0;
    });
    out.set(
      f,
      values.map((s) => s.getName()).filter((n) => n !== 'default'),
    );
  }
  return out;
}

/** `<package><subpath>: <name>` for every export used nowhere outside the package's source. */
export function unusedExports(root = ROOT): string[] {
  const packages = publishablePackages(root);
  const all = packages.flatMap((p) => entries(p.manifest as Record<string, unknown>, p.path).map(([sub, file]) => ({ pkg: p, sub, file })));
  const names = exportedNames(all.map((e) => e.file));
  const corpora = new Map<string, Set<string>>();
  const problems: string[] = [];
  for (const { pkg, sub, file } of all) {
    let corpus = corpora.get(pkg.dir);
    if (corpus === undefined) {
      corpus = words(walk(root, join(pkg.path, 'src')));
      corpora.set(pkg.dir, corpus);
    }
    for (const name of names.get(file) ?? []) {
      if (!corpus.has(name)) problems.push(`${pkg.name}${sub === '.' ? '' : sub.slice(1)}: ${name} (${relative(root, file)})`);
    }
  }
  return problems;
}
