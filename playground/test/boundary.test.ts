/**
 * The page's boundaries, checked on what the compiler and the bundler see rather than on the
 * source text: the page bundles for a platform with no Node (esbuild `platform: neutral`, which
 * refuses `node:` built-ins) and references no Node global; its modules reach the kernel only
 * through the names listed here; and a grant can come only from the Approve form's handler
 * (TypeScript's syntax tree: one `op: 'approve'` request, in `onApprove`, wired to that form).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { build, type BuildOptions } from 'esbuild';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');
const here = join(root, 'playground', 'src');
const widgetDir = join(root, 'playground', 'widget');
/** The page's and the `<ctrlrun-try-it>` element's modules (the element's build script is Node, not page code). */
const sources = [
  ...readdirSync(here)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => `src/${f}`),
  ...readdirSync(widgetDir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && f !== 'build.ts')
    .map((f) => `widget/${f}`),
];
const sourcePath = (f: string): string => join(root, 'playground', f);
const parse = (path: string): ts.SourceFile => ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);

const NODE_GLOBALS = ['process', 'Buffer', 'require', '__dirname', '__filename', 'global', 'setImmediate'];
/** Bundles `entry` for a runtime without Node, every Node global replaced by a marker: returns the markers found. */
async function nodeGlobalsIn(options: BuildOptions): Promise<string[]> {
  const out = await build({
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'neutral',
    mainFields: ['browser', 'module', 'main'],
    conditions: ['@ctrlrun/source'],
    // sql.js is the WASM engine, checked in workerd by check:portability; the page's assets are Vite's.
    external: ['sql.js', 'sql.js/*', '*.css'],
    logLevel: 'silent',
    define: Object.fromEntries(NODE_GLOBALS.map((g) => [g, `__NODE_GLOBAL_${g}__`])),
    ...options,
  });
  return [...new Set([...out.outputFiles![0]!.text.matchAll(/__NODE_GLOBAL_(\w+?)__/g)].map((m) => m[1]!))];
}

function walk(node: ts.Node, visit: (n: ts.Node) => void): void {
  visit(node);
  node.forEachChild((c) => walk(c, visit));
}

describe('the playground boundary', { timeout: 120_000 }, () => {
  it('the page and everything it bundles (kernel, sql.js store) need no Node: neutral platform, no Node global', async () => {
    expect(await nodeGlobalsIn({ entryPoints: [join(here, 'main.ts')] })).toEqual([]);
    expect(await nodeGlobalsIn({ entryPoints: [join(widgetDir, 'element.ts')], outdir: '/nowhere', splitting: true })).toEqual([]);
    // The kernel's every entry point too.
    const manifest = JSON.parse(readFileSync(join(root, 'packages', 'kernel', 'package.json'), 'utf8')) as {
      exports: Record<string, { '@ctrlrun/source'?: string }>;
    };
    const entries = Object.values(manifest.exports).flatMap((e) =>
      typeof e === 'object' && e['@ctrlrun/source'] ? [join(root, 'packages', 'kernel', e['@ctrlrun/source'])] : [],
    );
    expect(entries.length).toBeGreaterThan(5);
    // jose and OpenTelemetry are optional peers of two subpaths, resolved by the application.
    expect(await nodeGlobalsIn({ entryPoints: entries, outdir: '/nowhere', splitting: true, external: ['sql.js', 'jose', '@opentelemetry/api'] })).toEqual([]);
  });

  it('the check itself fails on a Node global or a node: import (negative controls)', async () => {
    expect(await nodeGlobalsIn({ stdin: { contents: 'export const env = process.env.X; export const b = typeof Buffer;', loader: 'ts' } })).toEqual([
      'process',
      'Buffer',
    ]);
    // A local of that name is not the global.
    expect(await nodeGlobalsIn({ stdin: { contents: 'export function f(process: { x: 1 }) { return process.x; }', loader: 'ts' } })).toEqual([]);
    await expect(
      nodeGlobalsIn({ stdin: { contents: "import { readFileSync } from 'node:fs'; export const r = readFileSync;", loader: 'ts', resolveDir: root } }),
    ).rejects.toThrow(/node:fs/);
  });

  it('the page reaches the kernel only through these names (no Control, no grant, no provider)', () => {
    const imported: string[] = [];
    for (const f of sources) {
      for (const st of parse(sourcePath(f)).statements) {
        if (!ts.isImportDeclaration(st) || !ts.isStringLiteral(st.moduleSpecifier) || !st.moduleSpecifier.text.startsWith('@ctrlrun/')) continue;
        const nb = st.importClause?.namedBindings;
        expect(nb && ts.isNamedImports(nb), `${f}: a namespace or default import of ${st.moduleSpecifier.text}`).toBe(true);
        for (const e of (nb as ts.NamedImports).elements)
          if (!e.isTypeOnly && !st.importClause!.isTypeOnly) imported.push(`${st.moduleSpecifier.text} ${(e.propertyName ?? e.name).text}`);
      }
    }
    // createAction and loadPolicy build what the element shows (the canonical JSON behind a hash, a
    // policy attribute); ChainVerifier and verifyChain only read receipts; none writes, grants or decides.
    expect([...new Set(imported)].sort()).toEqual([
      '@ctrlrun/kernel ChainVerifier',
      '@ctrlrun/kernel createAction',
      '@ctrlrun/kernel loadPolicy',
      '@ctrlrun/kernel verifyChain',
      '@ctrlrun/kernel/demo runDemo',
      '@ctrlrun/kernel/store GENESIS_HASH',
      '@ctrlrun/kernel/try-it TRY_IT_POLICY_YAML',
      '@ctrlrun/kernel/try-it TRY_IT_PRINCIPAL',
      '@ctrlrun/kernel/try-it createTryIt',
      '@ctrlrun/store-sqljs createSqlJsStore',
      '@ctrlrun/store-sqljs indexedDbPersistence',
    ]);
  });

  it('one approve request, built in approveRequest, which only the Approve forms reach; nothing assigned onto a global', () => {
    /** The name of the function, method or accessor around `n`. */
    const enclosing = (n: ts.Node, sf: ts.SourceFile): string => {
      for (let fn: ts.Node | undefined = n.parent; fn; fn = fn.parent) {
        if ((ts.isFunctionDeclaration(fn) || ts.isMethodDeclaration(fn)) && fn.name) return fn.name.getText(sf);
      }
      return '(top level)';
    };
    /** The callees of the calls around `n`, innermost first. */
    const callChain = (n: ts.Node, sf: ts.SourceFile): string[] => {
      const chain: string[] = [];
      for (let at = n.parent; at; at = at.parent) if (ts.isCallExpression(at)) chain.push(at.expression.getText(sf));
      return chain;
    };
    const approves: string[] = [];
    const callers: string[] = [];
    const handlerUses: { f: string; chain: string[] }[] = [];
    for (const f of sources) {
      const sf = parse(sourcePath(f));
      walk(sf, (n) => {
        if (ts.isPropertyAssignment(n) && n.name.getText(sf) === 'op' && ts.isStringLiteral(n.initializer) && n.initializer.text === 'approve')
          approves.push(`${f} ${enclosing(n, sf)}`);
        // A call of approveRequest, directly or as a member (the element reaches it through its lazily loaded engine).
        if (ts.isCallExpression(n)) {
          const callee = n.expression;
          const name = ts.isIdentifier(callee) ? callee.text : ts.isPropertyAccessExpression(callee) ? callee.name.getText(sf) : '';
          if (name === 'approveRequest') callers.push(`${f} ${enclosing(n, sf)}`);
        }
        // Every use of an Approve handler that is not its own declaration.
        if (
          (ts.isIdentifier(n) && n.text === 'onApprove' && !ts.isFunctionDeclaration(n.parent)) ||
          (ts.isPrivateIdentifier(n) && n.text === '#onApprove' && !ts.isMethodDeclaration(n.parent))
        ) {
          handlerUses.push({ f, chain: callChain(n, sf) });
        }
        if (ts.isBinaryExpression(n) && n.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
          let target: ts.Expression = n.left;
          while (ts.isPropertyAccessExpression(target) || ts.isElementAccessExpression(target)) target = target.expression;
          expect(
            ts.isIdentifier(target) && ['window', 'globalThis', 'self'].includes(target.text) && target !== n.left,
            `${f}: assigns onto ${n.left.getText(sf)}`,
          ).toBe(false);
        }
      });
    }
    expect(approves).toEqual(['src/session.ts approveRequest']);
    expect(callers.sort()).toEqual(['src/main.ts onApprove', 'widget/element.ts #onApprove']);
    // Each handler is used once: inside its Approve form's submit listener, through the serialiser.
    expect(handlerUses.map((u) => u.f).sort()).toEqual(['src/main.ts', 'widget/element.ts']);
    const page = handlerUses.find((u) => u.f === 'src/main.ts')!.chain;
    expect(page.slice(0, 2)).toEqual(['serial', 'ui.approveForm.addEventListener']);
    const element = handlerUses.find((u) => u.f === 'widget/element.ts')!.chain;
    expect(element.slice(0, 3)).toEqual(['this.#onApprove', 'this.#serial', 'ui.approveForm.addEventListener']);
  });

  it('the try-it module grants in one place: the approve op', () => {
    const sf = parse(join(root, 'packages', 'kernel', 'src', 'try-it.ts'));
    const grants: string[] = [];
    walk(sf, (n) => {
      if (ts.isCallExpression(n) && ts.isPropertyAccessExpression(n.expression) && n.expression.name.text === 'grantApproval') {
        let guard: ts.Node | undefined = n.parent;
        while (guard && !ts.isIfStatement(guard)) guard = guard.parent;
        grants.push(guard && ts.isIfStatement(guard) ? guard.expression.getText(sf) : '(unguarded)');
      }
    });
    expect(grants).toEqual(["request.op === 'approve'"]);
  });
});
