/**
 * No import circle in any package (`npm run check:cycles`, part of `npm test`): every value import
 * between a package's own source files (`import … from './x.js'`, `export … from`, a bare
 * `import './x.js'`) is an edge, and a strongly connected set of more than one file — or a file
 * importing itself — is a circle, printed with the files in it. `import type` is not an edge (it
 * is erased); nor is a dynamic `import()` (it loads later, never during the importer's own load).
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The source folders checked: every package's and the worker's. */
export function sourceRoots(root = ROOT): string[] {
  const packages = readdirSync(join(root, 'packages')).map((p) => join(root, 'packages', p, 'src'));
  return [...packages, join(root, 'worker', 'src'), join(root, 'playground', 'src')].filter((d) => existsSync(d));
}

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (/\.(ts|tsx|mts)$/.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

const STATEMENT = /(?:^|\n)\s*(import|export)\s+(type\s+)?([^;'"]*?)\s*from\s*'(\.{1,2}\/[^']+)'|(?:^|\n)\s*import\s+'(\.{1,2}\/[^']+)'/g;

/** The files `file` imports values from (relative specifiers, resolved to source files). */
export function valueImports(file: string, text = readFileSync(file, 'utf8')): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(STATEMENT)) {
    const spec = m[4] ?? m[5]!;
    if (m[2] !== undefined) continue; // import type / export type
    // `import { type A, type B } from …`: only types named, erased too.
    const names = m[3] ?? '';
    if (
      /^\{[^}]*\}$/.test(names.trim()) &&
      names.replace(/[{}\s]/g, '') !== '' &&
      names.split(',').every((n) => n.trim() === '' || /^type\s/.test(n.trim().replace(/^\{\s*/, '')))
    )
      continue;
    const base = resolve(dirname(file), spec).replace(/\.(m?js|tsx?)$/, '');
    const found = [`${base}.ts`, `${base}.tsx`, `${base}.mts`, join(base, 'index.ts')].find((p) => existsSync(p));
    if (found !== undefined) out.push(found);
  }
  return out;
}

/** Each import circle among `files` (Tarjan's strongly connected components), its files sorted. */
export function importCycles(files: readonly string[], importsOf: (file: string) => string[] = valueImports): string[][] {
  const graph = new Map(files.map((f) => [resolve(f), importsOf(f).map((d) => resolve(d))]));
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)!) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)!.includes(v)) cycles.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

/** Every circle in the repository's packages. */
export function repositoryCycles(root = ROOT): string[][] {
  return sourceRoots(root).flatMap((dir) => importCycles(sources(dir)));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const cycles = repositoryCycles();
  for (const c of cycles) console.error(`import circle (${c.length} files):\n${c.map((f) => `  ${relative(ROOT, f)}`).join('\n')}`);
  if (cycles.length > 0) {
    console.error('break each circle: move what the lower file needs down to it, or import only types (`import type`)');
    process.exit(1);
  }
  console.log(`check:cycles: no import circle in ${sourceRoots().length} source folders`);
}
