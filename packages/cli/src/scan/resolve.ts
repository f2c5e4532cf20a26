/**
 * Where a name in scanned code comes from, read from the syntax tree only (with the type checker
 * as a fallback where a tsconfig.json gives one): imports (aliased, default, namespace),
 * `require`, destructuring, `new`, re-exports through local modules. Nothing here imports or
 * runs the code it reads.
 *
 * @module
 */
import { dirname, resolve as resolvePath } from 'node:path';
import type * as TS from 'typescript';
import { normalizeModule } from './catalogue.js';

/** One parsed file. */
export interface Unit {
  readonly file: string;
  /** Relative to the scanned root, with `/`. */
  readonly rel: string;
  readonly sf: TS.SourceFile;
  /** The program the file belongs to (a tsconfig.json above it in the tree), or null: syntax only. */
  readonly program: TS.Program | null;
  readonly options: TS.CompilerOptions | null;
}

/**
 * What an expression is, as far as the text says:
 * - `module`: a member path from an import (or a global: module `<global>`);
 * - `local`: a function, class or variable declared in the tree, plus a member path;
 * - `namespace`: a local module imported whole;
 * - `protected`: the result of a wrapper (`protect(…)`), plus a member path;
 * - `unknown`: a parameter, `this`, a call result, with the member names known;
 * - `dynamic`: reached through `obj[expr]` — can't tell.
 */
export type Origin =
  | { readonly kind: 'module'; readonly module: string; readonly path: readonly string[] }
  | { readonly kind: 'local'; readonly unit: Unit; readonly decl: TS.Node; readonly path: readonly string[] }
  | { readonly kind: 'namespace'; readonly unit: Unit }
  | { readonly kind: 'protected'; readonly path: readonly string[] }
  | { readonly kind: 'unknown'; readonly path: readonly string[] }
  | { readonly kind: 'dynamic'; readonly expression: string };

export interface Binding {
  readonly scope: TS.Node;
  /** The declaring node: import clause/specifier, namespace import, variable declaration, parameter, function or class. */
  readonly decl: TS.Node;
  /** Member path inside a destructuring pattern; null when not followable (array patterns). */
  readonly path: readonly string[] | null;
}

type ExportRef = { readonly kind: 'node'; readonly node: TS.Node } | { readonly kind: 'from'; readonly spec: string; readonly name: string | null };

const UNKNOWN: Origin = { kind: 'unknown', path: [] };
/** The export key of a CommonJS `module.exports = x` (no ES export can be named so). */
const CJS_EXPORT = '\0module.exports';
const GLOBAL_ROOTS = new Set(['globalThis', 'window', 'self', 'global']);
const SOURCE_EXTENSIONS = ['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs'];

/** Resolves names across the scanned units. One per scan. */
export class Resolver {
  readonly #ts: typeof TS;
  readonly #units: ReadonlyMap<string, Unit>;
  /** Module names resolved as packages even when a tsconfig maps them into the tree (wrappers, catalogue). */
  readonly #known: (module: string) => boolean;
  readonly #bindings = new Map<Unit, Map<string, Binding[]>>();
  readonly #exports = new Map<Unit, { named: Map<string, ExportRef>; stars: string[] }>();
  readonly #origins = new Map<TS.Node, Origin | 'pending'>();
  readonly #modules = new Map<string, Unit | null>();
  readonly #wrapper: (o: Origin) => boolean;

  readonly #catalogued: (module: string) => boolean;

  constructor(
    ts: typeof TS,
    units: ReadonlyMap<string, Unit>,
    modules: { known: (module: string) => boolean; catalogued: (module: string) => boolean },
    isWrapper: (o: Origin) => boolean,
  ) {
    this.#ts = ts;
    this.#units = units;
    this.#known = modules.known;
    this.#catalogued = modules.catalogued;
    this.#wrapper = isWrapper;
  }

  /** The unit a node belongs to. */
  unitOf(node: TS.Node): Unit | undefined {
    return this.#units.get(node.getSourceFile().fileName);
  }

  /** What `expr` (in `unit`) is. */
  originOf(expr: TS.Node, unit: Unit): Origin {
    const cached = this.#origins.get(expr);
    if (cached === 'pending') return UNKNOWN;
    if (cached !== undefined) return cached;
    this.#origins.set(expr, 'pending');
    let o = this.#compute(expr, unit);
    // Bases are resolved first, so the checker is asked about the shortest expression the text
    // could not place (`client` in a callback, `this.pool` in a class), and the member path follows.
    if (o.kind === 'unknown') o = this.#typeOrigin(expr, unit) ?? o;
    this.#origins.set(expr, o);
    return o;
  }

  #compute(expr: TS.Node, unit: Unit): Origin {
    const ts = this.#ts;
    if (
      ts.isParenthesizedExpression(expr) ||
      ts.isAsExpression(expr) ||
      ts.isNonNullExpression(expr) ||
      ts.isSatisfiesExpression(expr) ||
      ts.isTypeAssertionExpression(expr) ||
      ts.isAwaitExpression(expr)
    ) {
      return this.originOf(expr.expression, unit);
    }
    if (ts.isIdentifier(expr)) {
      const b = this.lookup(expr.text, expr, unit);
      if (b === null)
        return GLOBAL_ROOTS.has(expr.text) ? { kind: 'module', module: '<global>', path: [] } : { kind: 'module', module: '<global>', path: [expr.text] };
      return this.#fromBinding(b, unit);
    }
    if (ts.isQualifiedName(expr)) return member(this.originOf(expr.left, unit), expr.right.text, this);
    if (ts.isPropertyAccessExpression(expr)) {
      const base = this.originOf(expr.expression, unit);
      // `exec.call(…)`, `exec.apply(…)`, `exec.bind(…)` are calls of `exec`.
      if (base.kind === 'module' && base.path.length > 0 && ['call', 'apply', 'bind'].includes(expr.name.text)) return base;
      return member(base, expr.name.text, this);
    }
    if (ts.isElementAccessExpression(expr)) {
      const key = literalKey(ts, expr.argumentExpression);
      const base = this.originOf(expr.expression, unit);
      if (key === null) return { kind: 'dynamic', expression: text(expr, unit) };
      return member(base, key, this);
    }
    if (ts.isCallExpression(expr)) {
      const callee = expr.expression;
      const arg0 = expr.arguments[0];
      if (ts.isIdentifier(callee) && callee.text === 'require' && arg0 && ts.isStringLiteralLike(arg0) && this.lookup('require', callee, unit) === null) {
        return this.#moduleOrigin(arg0.text, unit, null);
      }
      const c = this.originOf(callee, unit);
      if (this.#wrapper(c)) return { kind: 'protected', path: [] };
      // What a package's function returns is read as the package's (`new Pool().connect()` → Pool.connect).
      if (c.kind === 'module' || c.kind === 'protected') return c;
      return c.kind === 'dynamic' ? c : UNKNOWN;
    }
    if (ts.isNewExpression(expr)) {
      const c = this.originOf(expr.expression, unit);
      return c.kind === 'module' || c.kind === 'dynamic' ? c : c.kind === 'local' ? { ...c, path: [] } : UNKNOWN;
    }
    return UNKNOWN;
  }

  /** The binding `name` refers to at `ref`, or null (a global). */
  lookup(name: string, ref: TS.Node, unit: Unit): Binding | null {
    const candidates = this.#bindingsOf(unit).get(name);
    if (candidates === undefined) return null;
    for (let n: TS.Node | undefined = ref; n !== undefined; n = n.parent) {
      for (const c of candidates) if (c.scope === n) return c;
    }
    return null;
  }

  /** The declaration a name refers to, followed through local imports (for coverage by name). */
  declarationOf(id: TS.Identifier, unit: Unit): { decl: TS.Node; unit: Unit } | null {
    const b = this.lookup(id.text, id, unit);
    if (b === null) return null;
    const ts = this.#ts;
    const d = b.decl;
    if (ts.isImportSpecifier(d) || ts.isImportClause(d)) {
      const spec = (ts.isImportSpecifier(d) ? d.parent.parent.parent : d.parent).moduleSpecifier;
      if (!ts.isStringLiteral(spec)) return null;
      const target = this.#localModule(spec.text, unit);
      if (target === null) return null;
      const name = ts.isImportSpecifier(d) ? (d.propertyName ?? d.name).text : 'default';
      return this.#exportDeclaration(target, name, new Set());
    }
    return { decl: d, unit };
  }

  #exportDeclaration(unit: Unit, name: string, seen: Set<Unit>): { decl: TS.Node; unit: Unit } | null {
    if (seen.has(unit)) return null;
    seen.add(unit);
    const ex = this.#exportsOf(unit);
    const ref = ex.named.get(name);
    const ts = this.#ts;
    if (ref?.kind === 'node') {
      if (ts.isIdentifier(ref.node)) return this.declarationOf(ref.node, unit);
      return { decl: ref.node, unit };
    }
    const from = ref?.kind === 'from' ? [ref] : ex.stars.map((spec) => ({ spec, name }));
    for (const f of from) {
      const target = this.#localModule(f.spec, unit);
      if (target !== null && f.name !== null) {
        const found = this.#exportDeclaration(target, f.name, seen);
        if (found !== null) return found;
      }
    }
    return null;
  }

  #fromBinding(b: Binding, unit: Unit): Origin {
    const ts = this.#ts;
    const d = b.decl;
    const withPath = (o: Origin): Origin =>
      b.path === null ? (o.kind === 'dynamic' ? o : UNKNOWN) : b.path.reduce<Origin>((acc, name) => member(acc, name, this), o);
    if (ts.isImportClause(d)) {
      const spec = d.parent.moduleSpecifier;
      return ts.isStringLiteral(spec) ? this.#moduleOrigin(spec.text, unit, 'default') : UNKNOWN;
    }
    if (ts.isImportSpecifier(d)) {
      const spec = d.parent.parent.parent.moduleSpecifier;
      return ts.isStringLiteral(spec) ? this.#moduleOrigin(spec.text, unit, (d.propertyName ?? d.name).text) : UNKNOWN;
    }
    if (ts.isNamespaceImport(d)) {
      const spec = d.parent.parent.moduleSpecifier;
      return ts.isStringLiteral(spec) ? this.#moduleOrigin(spec.text, unit, null) : UNKNOWN;
    }
    if (ts.isImportEqualsDeclaration(d)) {
      const ref = d.moduleReference;
      return ts.isExternalModuleReference(ref) && ts.isStringLiteral(ref.expression) ? this.#moduleOrigin(ref.expression.text, unit, null) : UNKNOWN;
    }
    if (ts.isVariableDeclaration(d)) {
      if (d.initializer === undefined || ts.isForOfStatement(d.parent.parent) || ts.isForInStatement(d.parent.parent))
        return { kind: 'local', unit, decl: d, path: [] };
      // An initializer the text can't place leaves the variable unknown, so the checker is asked about it.
      return withPath(this.originOf(d.initializer, unit));
    }
    if (ts.isParameter(d)) {
      const type = d.type;
      if (type !== undefined && b.path !== null) {
        if (ts.isTypeReferenceNode(type)) return withPath(this.originOf(type.typeName, unit));
        if (ts.isTypeQueryNode(type)) return withPath(this.originOf(type.exprName, unit));
      }
      // A callback handed to a package's function gets what that package gives it:
      // `db.transaction(async (tx) => tx.delete(t))`, `pool.connect((err, client) => client.query(…))`.
      const fn = d.parent;
      if (
        type === undefined &&
        b.path !== null &&
        (ts.isArrowFunction(fn) || ts.isFunctionExpression(fn)) &&
        ts.isCallExpression(fn.parent) &&
        fn.parent.arguments.includes(fn)
      ) {
        const callee = this.originOf(fn.parent.expression, unit);
        // Only for a package the catalogue knows: an Express handler's `res` stays unknown, so `res.send()` reads as the built-in it is.
        if (callee.kind === 'module' && callee.module !== '<global>' && this.#catalogued(callee.module)) return withPath(callee);
      }
      return UNKNOWN;
    }
    return { kind: 'local', unit, decl: d, path: [] };
  }

  /** An import of `spec` from `unit`: a local module's export, or a package member path. */
  #moduleOrigin(spec: string, unit: Unit, name: string | null): Origin {
    const local = this.#localModule(spec, unit);
    if (local !== null) {
      // A CommonJS module that assigns one value to module.exports is that value, whole.
      if (name === null && this.#exportsOf(local).named.has(CJS_EXPORT)) return this.exportOrigin(local, CJS_EXPORT, new Set());
      return name === null ? { kind: 'namespace', unit: local } : this.exportOrigin(local, name, new Set());
    }
    return { kind: 'module', module: normalizeModule(spec), path: name === null ? [] : [name] };
  }

  /** What the export `name` of a local module is. */
  exportOrigin(unit: Unit, name: string, seen: Set<Unit>): Origin {
    if (seen.has(unit)) return UNKNOWN;
    seen.add(unit);
    const ts = this.#ts;
    const ex = this.#exportsOf(unit);
    const ref = ex.named.get(name) ?? (name === 'default' ? ex.named.get(CJS_EXPORT) : undefined);
    if (ref?.kind === 'node') {
      const n = ref.node;
      if (ts.isFunctionDeclaration(n) || ts.isClassDeclaration(n)) return { kind: 'local', unit, decl: n, path: [] };
      if (ts.isVariableDeclaration(n) || ts.isIdentifier(n) || ts.isExpression(n)) {
        if (ts.isVariableDeclaration(n)) return this.#fromBinding({ scope: unit.sf, decl: n, path: [] }, unit);
        return this.originOf(n, unit);
      }
      return UNKNOWN;
    }
    if (ref?.kind === 'from') return this.#reexport(ref.spec, ref.name, unit, seen);
    for (const spec of ex.stars) {
      const local = this.#localModule(spec, unit);
      if (local === null) return { kind: 'module', module: normalizeModule(spec), path: [name] };
      const o = this.exportOrigin(local, name, seen);
      if (!(o.kind === 'unknown' && o.path.length === 0)) return o;
    }
    return UNKNOWN;
  }

  #reexport(spec: string, name: string | null, unit: Unit, seen: Set<Unit>): Origin {
    const local = this.#localModule(spec, unit);
    if (local === null) return { kind: 'module', module: normalizeModule(spec), path: name === null ? [] : [name] };
    return name === null ? { kind: 'namespace', unit: local } : this.exportOrigin(local, name, seen);
  }

  /** The scanned unit `spec` names from `unit`, or null (a package, or a file not scanned). */
  #localModule(spec: string, unit: Unit): Unit | null {
    const key = `${unit.file}\0${spec}`;
    const cached = this.#modules.get(key);
    if (cached !== undefined) return cached;
    let found: Unit | null = null;
    if (spec.startsWith('./') || spec.startsWith('../') || spec === '.' || spec === '..') {
      const base = resolvePath(dirname(unit.file), spec);
      const stem = base.replace(/\.(?:[cm]?js|jsx)$/, '');
      const candidates = [base, ...SOURCE_EXTENSIONS.map((e) => stem + e), ...SOURCE_EXTENSIONS.map((e) => `${base}/index${e}`)];
      for (const c of candidates) {
        const u = this.#units.get(c);
        if (u !== undefined) {
          found = u;
          break;
        }
      }
    } else if (unit.options !== null && !this.#known(normalizeModule(spec))) {
      const ts = this.#ts;
      const r = ts.resolveModuleName(spec, unit.file, unit.options, ts.sys).resolvedModule;
      if (r !== undefined && !r.isExternalLibraryImport && !/[\\/]node_modules[\\/]/.test(r.resolvedFileName))
        found = this.#units.get(r.resolvedFileName) ?? null;
    }
    this.#modules.set(key, found);
    return found;
  }

  /** Where the checker says a value's type is declared: a package under node_modules. */
  #typeOrigin(expr: TS.Node, unit: Unit): Origin | null {
    const program = unit.program;
    if (program === null || !this.#ts.isExpression(expr)) return null;
    const checker = program.getTypeChecker();
    let sym: TS.Symbol | undefined;
    try {
      const t = checker.getTypeAtLocation(expr);
      sym = t.aliasSymbol ?? t.getSymbol();
    } catch {
      return null;
    }
    const decl = sym?.declarations?.[0];
    if (sym === undefined || decl === undefined) return null;
    const pkg = packageOf(decl.getSourceFile().fileName);
    return pkg === null ? null : { kind: 'module', module: pkg, path: [sym.getName()] };
  }

  #exportsOf(unit: Unit): { named: Map<string, ExportRef>; stars: string[] } {
    let ex = this.#exports.get(unit);
    if (ex !== undefined) return ex;
    const ts = this.#ts;
    const named = new Map<string, ExportRef>();
    const stars: string[] = [];
    const exported = (n: TS.Node) => ts.canHaveModifiers(n) && (ts.getModifiers(n) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    const isDefault = (n: TS.Node) => ts.canHaveModifiers(n) && (ts.getModifiers(n) ?? []).some((m) => m.kind === ts.SyntaxKind.DefaultKeyword);
    for (const s of unit.sf.statements) {
      // CommonJS: `module.exports = { a, b: c }`, `module.exports = x`, `exports.a = …`.
      if (ts.isExpressionStatement(s) && ts.isBinaryExpression(s.expression) && s.expression.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
        const { left, right } = s.expression;
        const target = ts.isPropertyAccessExpression(left) ? left.getText(unit.sf) : '';
        if (target === 'module.exports') {
          if (ts.isObjectLiteralExpression(right)) {
            for (const p of right.properties) {
              if (ts.isShorthandPropertyAssignment(p)) named.set(p.name.text, { kind: 'node', node: p.name });
              else if (ts.isPropertyAssignment(p) && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)))
                named.set(p.name.text, { kind: 'node', node: p.initializer });
            }
          } else named.set(CJS_EXPORT, { kind: 'node', node: right });
        } else if (
          ts.isPropertyAccessExpression(left) &&
          (target.startsWith('exports.') || target.startsWith('module.exports.')) &&
          target.split('.').length === (target.startsWith('exports.') ? 2 : 3)
        ) {
          named.set(left.name.text, { kind: 'node', node: right });
        }
        continue;
      }
      if ((ts.isFunctionDeclaration(s) || ts.isClassDeclaration(s)) && exported(s)) {
        if (isDefault(s)) named.set('default', { kind: 'node', node: s });
        if (s.name) named.set(s.name.text, { kind: 'node', node: s });
      } else if (ts.isVariableStatement(s) && exported(s)) {
        for (const d of s.declarationList.declarations) if (ts.isIdentifier(d.name)) named.set(d.name.text, { kind: 'node', node: d });
      } else if (ts.isExportAssignment(s) && !s.isExportEquals) {
        named.set('default', { kind: 'node', node: s.expression });
      } else if (ts.isExportDeclaration(s) && !s.isTypeOnly) {
        const spec = s.moduleSpecifier && ts.isStringLiteral(s.moduleSpecifier) ? s.moduleSpecifier.text : null;
        const clause = s.exportClause;
        if (clause === undefined) {
          if (spec !== null) stars.push(spec);
        } else if (ts.isNamespaceExport(clause)) {
          if (spec !== null) named.set(clause.name.text, { kind: 'from', spec, name: null });
        } else {
          for (const e of clause.elements) {
            const local = e.propertyName ?? e.name;
            const localName = ts.isIdentifier(local) ? local.text : local.text;
            named.set(e.name.text, spec !== null ? { kind: 'from', spec, name: localName } : { kind: 'node', node: local });
          }
        }
      }
    }
    ex = { named, stars };
    this.#exports.set(unit, ex);
    return ex;
  }

  #bindingsOf(unit: Unit): Map<string, Binding[]> {
    let map = this.#bindings.get(unit);
    if (map !== undefined) return map;
    map = collectBindings(this.#ts, unit.sf);
    this.#bindings.set(unit, map);
    return map;
  }
}

/** A member of an origin. */
function member(base: Origin, name: string, resolver: Resolver): Origin {
  switch (base.kind) {
    case 'module':
      return { kind: 'module', module: base.module, path: [...base.path, name] };
    case 'namespace':
      return resolver.exportOrigin(base.unit, name, new Set());
    case 'dynamic':
      // Reached through `obj[k]`, but the member called is named: `labels[i].padEnd()` is a padEnd.
      return { kind: 'unknown', path: [name] };
    default:
      return { ...base, path: [...base.path, name] };
  }
}

function literalKey(ts: typeof TS, e: TS.Expression): string | null {
  if (ts.isStringLiteralLike(e) || ts.isNumericLiteral(e)) return e.text;
  // A well-known symbol (`it[Symbol.iterator]()`) names its member.
  if (ts.isPropertyAccessExpression(e) && ts.isIdentifier(e.expression) && e.expression.text === 'Symbol') return `[Symbol.${e.name.text}]`;
  return null;
}

/** An expression's text on one line, at most 120 characters. */
export function text(node: TS.Node, unit: Unit): string {
  const t = node.getText(unit.sf).replace(/\s+/g, ' ');
  return t.length > 120 ? `${t.slice(0, 119)}…` : t;
}

/** The npm package a declaration file belongs to (`@types/x` → `x`), or null (the tree, Node's own types). */
export function packageOf(fileName: string): string | null {
  const i = fileName.lastIndexOf('/node_modules/');
  if (i < 0) return null;
  const parts = fileName.slice(i + '/node_modules/'.length).split('/');
  let name = parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  if (name.startsWith('@types/')) name = name.slice('@types/'.length).replace(/^(.+)__(.+)$/, '@$1/$2');
  if (name === 'node' || name === 'typescript') return null;
  return name;
}

/** Every declaration of a file, with the scope it is visible in. */
function collectBindings(ts: typeof TS, sf: TS.SourceFile): Map<string, Binding[]> {
  const map = new Map<string, Binding[]>();
  const add = (name: string, b: Binding) => {
    const list = map.get(name);
    if (list) list.push(b);
    else map.set(name, [b]);
  };
  const isScope = (n: TS.Node) =>
    ts.isBlock(n) ||
    ts.isSourceFile(n) ||
    ts.isModuleBlock(n) ||
    ts.isCaseBlock(n) ||
    ts.isForStatement(n) ||
    ts.isForOfStatement(n) ||
    ts.isForInStatement(n) ||
    ts.isFunctionLike(n) ||
    ts.isCatchClause(n) ||
    ts.isClassStaticBlockDeclaration(n);
  const blockOf = (n: TS.Node): TS.Node => {
    for (let p = n.parent; ; p = p.parent) if (p === undefined || isScope(p)) return p ?? sf;
  };
  const functionOf = (n: TS.Node): TS.Node => {
    for (let p = n.parent; ; p = p.parent)
      if (p === undefined || ts.isFunctionLike(p) || ts.isSourceFile(p) || ts.isClassStaticBlockDeclaration(p)) return p ?? sf;
  };
  const bindName = (name: TS.BindingName, scope: TS.Node, decl: TS.Node, path: readonly string[] | null) => {
    if (ts.isIdentifier(name)) {
      add(name.text, { scope, decl, path });
      return;
    }
    if (ts.isObjectBindingPattern(name)) {
      for (const el of name.elements) {
        let key: string | null = null;
        if (el.dotDotDotToken) key = null;
        else if (el.propertyName === undefined) key = ts.isIdentifier(el.name) ? el.name.text : null;
        else if (ts.isIdentifier(el.propertyName) || ts.isStringLiteral(el.propertyName) || ts.isNumericLiteral(el.propertyName)) key = el.propertyName.text;
        const next = path === null ? null : el.dotDotDotToken ? path : key === null ? null : [...path, key];
        bindName(el.name, scope, decl, next);
      }
      return;
    }
    for (const el of name.elements) if (!ts.isOmittedExpression(el)) bindName(el.name, scope, decl, null);
  };
  const visit = (n: TS.Node): void => {
    if (ts.isImportClause(n)) {
      if (n.name) add(n.name.text, { scope: sf, decl: n, path: [] });
      const nb = n.namedBindings;
      if (nb && ts.isNamespaceImport(nb)) add(nb.name.text, { scope: sf, decl: nb, path: [] });
      else if (nb) for (const s of nb.elements) add(s.name.text, { scope: sf, decl: s, path: [] });
      return;
    }
    if (ts.isImportEqualsDeclaration(n)) add(n.name.text, { scope: blockOf(n), decl: n, path: [] });
    else if (ts.isVariableDeclaration(n)) {
      const list = n.parent;
      const lexical = ts.isVariableDeclarationList(list) && (list.flags & (ts.NodeFlags.Let | ts.NodeFlags.Const)) !== 0;
      const scope = ts.isCatchClause(list) ? list : lexical ? blockOf(n) : functionOf(n);
      bindName(n.name, scope, n, []);
    } else if (ts.isParameter(n)) bindName(n.name, n.parent, n, []);
    else if ((ts.isFunctionDeclaration(n) || ts.isClassDeclaration(n)) && n.name) add(n.name.text, { scope: blockOf(n), decl: n, path: [] });
    else if ((ts.isFunctionExpression(n) || ts.isClassExpression(n)) && n.name) add(n.name.text, { scope: n, decl: n, path: [] });
    ts.forEachChild(n, (c) => {
      stack.push(c);
    });
  };
  // An explicit stack, not recursion: a file nested thousands deep is read, not a crash.
  const stack: TS.Node[] = [sf];
  while (stack.length > 0) visit(stack.pop()!);
  return map;
}
