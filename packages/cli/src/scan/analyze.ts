/**
 * The analysis of `ctrlrun scan` over parsed units: which calls are consequential (catalogue or
 * vocabulary), which are covered (lexically inside a function given to `protect` or an
 * adapter's wrapper, or a call of what `protect` returned), which are suppressed, and which
 * can't be told ("undetermined"). Reads syntax trees only.
 *
 * @module
 */
import { isBuiltin } from 'node:module';
import type * as TS from 'typescript';
import { callMatcher, gatewayKey, moduleMatcher, normalizeModule, vocabularyVerb, type CatalogueEntry, type Wrapper } from './catalogue.js';
import { Resolver, text, type Origin, type Unit } from './resolve.js';

/** A consequential call nothing covers. */
export interface CallFinding {
  readonly kind: 'unprotected_call';
  readonly unit: Unit;
  readonly line: number;
  readonly column: number;
  /** `catalogue:<id>` or `vocabulary:<verb>`. */
  readonly rule: string;
  /** The call as written (callee). */
  readonly target: string;
  /** What it resolved to: `module#member.path`, or the callee. */
  readonly name: string;
  readonly why: string;
  /** Suggested policy entry. */
  readonly action: string;
  readonly effect: string;
  /** A suppression comment without a reason (which has no effect), else null. */
  readonly detail: string | null;
}

/** A call that a `ctrlrun: not-consequential — <reason>` comment suppresses. */
export interface Suppressed {
  readonly unit: Unit;
  readonly line: number;
  readonly column: number;
  readonly target: string;
  readonly reason: string;
  readonly rule: string;
}

/** A call whose target or argument can't be read from the text. */
export interface Undetermined {
  readonly unit: Unit;
  readonly line: number;
  readonly column: number;
  readonly expression: string;
  readonly why: string;
}

/** A `protect(fn, { name })` call. */
export interface ProtectedAction {
  readonly unit: Unit;
  readonly line: number;
  readonly column: number;
  /** The action name, or null when the text doesn't give it (not a literal, nor a const bound to one). */
  readonly name: string | null;
  readonly suppliesEffect: boolean;
  /** The call as written (for the can't-tell list when the name is not known). */
  readonly expression: string;
}

/** A file whose analysis stopped part-way (what was found before stays listed). */
export interface Failure {
  readonly unit: Unit;
  readonly line: number;
  readonly column: number;
  readonly message: string;
}

export interface Analysis {
  readonly failures: Failure[];
  readonly findings: CallFinding[];
  readonly suppressed: Suppressed[];
  readonly undetermined: Undetermined[];
  readonly protectedActions: ProtectedAction[];
}

export interface AnalyzeOptions {
  readonly catalogue: readonly CatalogueEntry[];
  readonly wrappers: readonly Wrapper[];
  readonly vocabulary: readonly string[];
  /**
   * The URLs `ctrlrun gateway` listens on. An MCP `callTool` is covered when every
   * `client.connect(transport)` of its client in the same file hands it a transport built here on
   * one of these URLs (a literal); anything the text doesn't show stays a finding.
   */
  readonly gateways: readonly string[];
}

/**
 * Method names of the language's own objects (arrays, maps, sets, strings, promises, events,
 * the DOM): on a receiver whose type the text doesn't give, `items.push(x)` or `map.delete(k)` is
 * taken for the built-in and the vocabulary is not applied (with a tsconfig, the checker says).
 */
const BUILTIN_METHODS = new Set([
  'push',
  'pop',
  'shift',
  'unshift',
  'splice',
  'slice',
  'concat',
  'filter',
  'map',
  'forEach',
  'reduce',
  'find',
  'findIndex',
  'some',
  'every',
  'includes',
  'indexOf',
  'join',
  'sort',
  'reverse',
  'flat',
  'flatMap',
  'at',
  'fill',
  'get',
  'set',
  'has',
  'delete',
  'clear',
  'add',
  'keys',
  'values',
  'entries',
  'then',
  'catch',
  'finally',
  'toString',
  'remove',
  'removeChild',
  'removeAttribute',
  'removeItem',
  'removeListener',
  'removeEventListener',
  'removeAllListeners',
  'removeProperty',
  'pushState',
  'send',
  'emit',
  'replace',
  'split',
  'trim',
  'append',
]);

/** Globals whose members are the platform's, never an agent's action (fetch is catalogued). */
const PLATFORM_GLOBALS = new Set([
  'console',
  'Math',
  'JSON',
  'Object',
  'Array',
  'Promise',
  'Reflect',
  'Number',
  'String',
  'Symbol',
  'Date',
  'Map',
  'Set',
  'WeakMap',
  'WeakSet',
  'document',
  'window',
  'navigator',
  'history',
  'location',
  'localStorage',
  'sessionStorage',
  'process',
  'Buffer',
  'URL',
  'URLSearchParams',
  'Headers',
  'crypto',
  'Intl',
  'Error',
  'setTimeout',
  'setInterval',
  'clearTimeout',
  'clearInterval',
  'queueMicrotask',
  'structuredClone',
  'describe',
  'it',
  'test',
  'expect',
  'beforeEach',
  'afterEach',
  'beforeAll',
  'afterAll',
  'require',
  'module',
  'exports',
]);

const SUPPRESS = /ctrlrun:\s*not-consequential\b(.*)$/;
const SQL_WRITE = /^\s*(?:\/\*[^]*?\*\/\s*|--[^\n]*\n\s*)*(insert|update|delete|drop|truncate|alter|create|grant|revoke|merge|replace|upsert|call|copy)\b/i;
const SQL_READ = /^\s*(?:\/\*[^]*?\*\/\s*|--[^\n]*\n\s*)*(select|with|show|explain|begin|commit|rollback|set|savepoint|release|pragma|values)\b/i;
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

type Verdict = { readonly kind: 'yes'; readonly detail?: string } | { readonly kind: 'no' } | { readonly kind: 'cant_tell'; readonly why: string };

/** Runs the two passes: coverage first (it crosses files), then the calls. */
export function analyze(ts: typeof TS, units: ReadonlyMap<string, Unit>, options: AnalyzeOptions): Analysis {
  const wrappers = options.wrappers.map((w) => ({ module: moduleMatcher(normalizeModule(w.module)), name: w.name }));
  const isWrapper = (o: Origin) => o.kind === 'module' && o.path.length > 0 && wrappers.some((w) => w.name === o.path[o.path.length - 1] && w.module(o.module));
  const catalogue = options.catalogue.map((e) => ({ entry: e, module: moduleMatcher(normalizeModule(e.module)), call: callMatcher(e.call) }));
  const catalogued = (module: string) => catalogue.some((c) => c.module(module));
  const known = (module: string) => catalogued(module) || wrappers.some((w) => w.module(module));
  const resolver = new Resolver(ts, units, { known, catalogued }, isWrapper);
  const verbs = new Set(options.vocabulary);
  const gateways = new Set(options.gateways.map(gatewayKey).filter((k): k is string => k !== null));

  const calls = new Map<Unit, TS.CallExpression[]>();
  for (const unit of units.values()) {
    const list: TS.CallExpression[] = [];
    // An explicit stack, not recursion: a file nested thousands deep is read, not a crash.
    const stack: TS.Node[] = [unit.sf];
    while (stack.length > 0) {
      const n = stack.pop()!;
      if (ts.isCallExpression(n)) list.push(n);
      ts.forEachChild(n, (c) => {
        stack.push(c);
      });
    }
    list.reverse();
    calls.set(unit, list);
  }

  // A file the analysis cannot finish (nested deeper than the stack) is reported, never a crash of the whole scan.
  const failures = new Map<Unit, Failure>();
  const fail = (unit: Unit, call: TS.Node, e: unknown) => {
    if (failures.has(unit)) return;
    const message =
      e instanceof RangeError ? 'nested too deeply for this scan to read' : `the scan could not read this file (${e instanceof Error ? e.message : String(e)})`;
    failures.set(unit, { unit, ...position(unit, call), message });
  };

  // Pass 1: what the wrappers cover.
  const covered = new Set<TS.Node>();
  const protectedActions: ProtectedAction[] = [];
  const cover = (arg: TS.Expression, unit: Unit, depth: number): void => {
    if (depth > 8) return;
    let e: TS.Expression = arg;
    while (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e) || ts.isNonNullExpression(e)) e = e.expression;
    covered.add(e);
    if (ts.isIdentifier(e)) {
      const d = resolver.declarationOf(e, unit);
      if (d === null) return;
      if (ts.isVariableDeclaration(d.decl) && d.decl.initializer) cover(d.decl.initializer, d.unit, depth + 1);
      else covered.add(d.decl);
    } else if (ts.isObjectLiteralExpression(e)) {
      for (const p of e.properties) {
        if (ts.isShorthandPropertyAssignment(p)) cover(p.name, unit, depth + 1);
        else if (ts.isPropertyAssignment(p)) cover(p.initializer, unit, depth + 1);
      }
    } else if (ts.isArrayLiteralExpression(e)) {
      for (const el of e.elements) cover(el, unit, depth + 1);
    } else if (ts.isCallExpression(e) && ts.isPropertyAccessExpression(e.expression) && e.expression.name.text === 'bind') {
      cover(e.expression.expression, unit, depth + 1);
    }
  };
  for (const [unit, list] of calls) {
    for (const call of list) {
      try {
        const callee = resolver.originOf(call.expression, unit);
        if (!isWrapper(callee)) continue;
        const fn = call.arguments[0];
        if (fn !== undefined) cover(fn, unit, 0);
        if (callee.kind === 'module' && callee.path[callee.path.length - 1] === 'protect') {
          const opts = call.arguments[1];
          let name: string | null = null;
          let suppliesEffect = false;
          if (opts !== undefined && ts.isObjectLiteralExpression(opts)) {
            for (const p of opts.properties) {
              const key = p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) ? p.name.text : null;
              if ((key === 'name' || key === 'action') && ts.isPropertyAssignment(p)) name = constantText(ts, resolver, p.initializer, unit);
              if (key === 'effect') suppliesEffect = true;
            }
          }
          protectedActions.push({ unit, ...position(unit, call), name, suppliesEffect, expression: text(call, unit) });
        }
      } catch (e) {
        fail(unit, call, e);
      }
    }
  }
  const isCovered = (n: TS.Node): boolean => {
    for (let p: TS.Node | undefined = n; p !== undefined; p = p.parent) if (covered.has(p)) return true;
    return false;
  };
  for (const [unit] of calls) {
    try {
      coverHelpers(ts, resolver, unit, covered, isCovered);
    } catch (e) {
      fail(unit, unit.sf, e);
    }
  }

  // Pass 2: the calls.
  const findings: CallFinding[] = [];
  const suppressed: Suppressed[] = [];
  const undetermined: Undetermined[] = [];
  const comments = new Map<Unit, Map<number, string[]>>();
  const commentOn = (unit: Unit, call: TS.Node) =>
    suppression(unit, call, () => {
      let c = comments.get(unit);
      if (c === undefined) comments.set(unit, (c = commentsByLine(ts, unit.sf)));
      return c;
    });
  /** A call that can't be told, unless a reasoned suppression says someone read it. */
  const cantTell = (unit: Unit, call: TS.CallExpression, why: string) => {
    const reason = commentOn(unit, call);
    const at = position(unit, call);
    if (reason !== null && reason !== '') suppressed.push({ unit, ...at, target: text(call.expression, unit), reason, rule: 'undetermined' });
    else undetermined.push({ unit, ...at, expression: text(call, unit), why });
  };
  for (const [unit, list] of calls) {
    for (const call of list) {
      try {
        const origin = resolver.originOf(call.expression, unit);
        if (isWrapper(origin) || origin.kind === 'protected') continue;
        const target = text(call.expression, unit);
        let hit: { rule: string; name: string; why: string; action: string; effect: string } | null = null;
        if (origin.kind === 'dynamic') {
          if (!isCovered(call)) cantTell(unit, call, `the called member is chosen at run time (${origin.expression})`);
          continue;
        }
        // A catalogue entry whose module and member path match decides (its argument test included);
        // otherwise the vocabulary — for a catalogued package only on the member called, so that
        // `stripe.refunds.list` is a read while `stripe.payouts.cancel` is listed.
        let decided = false;
        const inCatalogue = origin.kind === 'module' && catalogued(origin.module);
        if (origin.kind === 'module' && inCatalogue) {
          for (const c of catalogue) {
            if (!c.module(origin.module) || !c.call(origin.path)) continue;
            decided = true;
            const v = condition(ts, resolver, c.entry, call, unit);
            if (v.kind === 'no') continue;
            if (v.kind === 'cant_tell') {
              if (!isCovered(call)) cantTell(unit, call, `${c.entry.id}: ${v.why}`);
              hit = null;
              break;
            }
            const name = `${origin.module}#${origin.path.join('.')}${v.detail ? `(${v.detail})` : ''}`;
            hit = { rule: `catalogue:${c.entry.id}`, name, why: c.entry.why, action: c.entry.action, effect: c.entry.effect };
            break;
          }
        }
        if (!decided) {
          const written = calleeSegments(ts, call.expression);
          const segments = origin.kind !== 'module' ? written : inCatalogue ? origin.path.slice(-1) : [...written, ...origin.path];
          const verb = vocabularyVerb(segments, verbs);
          if (verb !== null && !builtin(ts, call, unit, origin)) {
            const qualified = origin.kind === 'module' ? `${origin.module}#${origin.path.join('.')}` : target;
            const actionName = suggestedAction(inCatalogue ? [...written.slice(-2, -1), ...segments] : segments);
            hit = {
              rule: `vocabulary:${verb}`,
              name: qualified,
              why: `its name says ${JSON.stringify(verb)}: a ${verb} is an action the agent should not take twice or unchecked`,
              action: actionName,
              effect: `${actionName.split('.').pop()}:{id}`,
            };
          }
        }
        if (hit === null || isCovered(call)) continue;
        if (hit.rule === 'catalogue:mcp.callTool' && gateways.size > 0 && behindGateway(ts, resolver, call, unit, list, gateways)) continue;
        const pos = position(unit, call);
        const comment = commentOn(unit, call);
        if (comment !== null && comment !== '') {
          suppressed.push({ unit, ...pos, target, reason: comment, rule: hit.rule });
          continue;
        }
        findings.push({
          kind: 'unprotected_call',
          unit,
          ...pos,
          ...hit,
          target,
          detail: comment === '' ? 'the ctrlrun: not-consequential comment gives no reason, so it suppresses nothing' : null,
        });
      } catch (e) {
        fail(unit, call, e);
      }
    }
  }
  return { findings, suppressed, undetermined, protectedActions, failures: [...failures.values()] };
}

/**
 * Whether the client of `client.callTool(…)` is connected only to a gateway: every
 * `client.connect(t)` in the file (at least one) gets a transport constructed on a literal URL
 * that is one of `gateways`.
 */
function behindGateway(
  ts: typeof TS,
  resolver: Resolver,
  call: TS.CallExpression,
  unit: Unit,
  calls: readonly TS.CallExpression[],
  gateways: ReadonlySet<string>,
): boolean {
  const callee = call.expression;
  if (!ts.isPropertyAccessExpression(callee) || !ts.isIdentifier(callee.expression)) return false;
  const client = resolver.declarationOf(callee.expression, unit);
  if (client === null) return false;
  let connects = 0;
  for (const c of calls) {
    const e = c.expression;
    if (!ts.isPropertyAccessExpression(e) || e.name.text !== 'connect' || !ts.isIdentifier(e.expression)) continue;
    if (resolver.declarationOf(e.expression, unit)?.decl !== client.decl) continue;
    connects++;
    const url = transportUrl(ts, resolver, c.arguments[0], unit);
    if (url === null || !gateways.has(gatewayKey(url) ?? '')) return false;
  }
  return connects > 0;
}

/** The literal URL a transport is constructed on (`new XTransport(new URL('…'))`, or a name bound to one), or null. */
function transportUrl(ts: typeof TS, resolver: Resolver, arg: TS.Expression | undefined, unit: Unit): string | null {
  let e = arg;
  if (e !== undefined && ts.isIdentifier(e)) {
    const d = resolver.declarationOf(e, unit);
    e = d !== null && d.unit === unit && ts.isVariableDeclaration(d.decl) && (d.decl.parent.flags & ts.NodeFlags.Const) !== 0 ? d.decl.initializer : undefined;
  }
  if (e === undefined || !ts.isNewExpression(e) || !/Transport$/.test(e.expression.getText(unit.sf))) return null;
  let u = e.arguments?.[0];
  if (u !== undefined && ts.isNewExpression(u) && ts.isIdentifier(u.expression) && u.expression.text === 'URL') u = u.arguments?.[0];
  return u !== undefined && ts.isStringLiteralLike(u) ? u.text : null;
}

/**
 * A function of this file that is not exported and is referred to only from covered code
 * (`protect(async (a) => doRefund(a))` with `doRefund` declared beside it) is covered too: nothing
 * else can call it. Repeated until nothing changes, so a helper of a helper counts.
 */
function coverHelpers(ts: typeof TS, resolver: Resolver, unit: Unit, covered: Set<TS.Node>, isCovered: (n: TS.Node) => boolean): void {
  const exported = new Set<string>();
  const helpers = new Map<TS.Node, { name: TS.Identifier; refs: TS.Node[] }>();
  const hasExport = (n: TS.Node) => ts.canHaveModifiers(n) && (ts.getModifiers(n) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  for (const st of unit.sf.statements) {
    if (ts.isExportDeclaration(st) && st.moduleSpecifier === undefined && st.exportClause && ts.isNamedExports(st.exportClause)) {
      for (const e of st.exportClause.elements) exported.add((e.propertyName ?? e.name).text);
    } else if (ts.isExportAssignment(st) && ts.isIdentifier(st.expression)) exported.add(st.expression.text);
  }
  const stack: TS.Node[] = [unit.sf];
  const ids: TS.Identifier[] = [];
  while (stack.length > 0) {
    const n = stack.pop()!;
    if (ts.isIdentifier(n)) ids.push(n);
    else if (ts.isFunctionDeclaration(n) && n.name && n.body && !hasExport(n)) helpers.set(n, { name: n.name, refs: [] });
    else if (
      ts.isVariableDeclaration(n) &&
      ts.isIdentifier(n.name) &&
      n.initializer &&
      (ts.isArrowFunction(n.initializer) || ts.isFunctionExpression(n.initializer)) &&
      !hasExport(n.parent.parent)
    ) {
      helpers.set(n, { name: n.name, refs: [] });
    }
    ts.forEachChild(n, (c) => {
      stack.push(c);
    });
  }
  if (helpers.size === 0) return;
  const names = new Set([...helpers.values()].map((h) => h.name.text));
  for (const id of ids) {
    if (!names.has(id.text)) continue;
    const b = resolver.lookup(id.text, id, unit);
    const h = b === null ? undefined : helpers.get(b.decl);
    if (h !== undefined && h.name !== id) h.refs.push(id);
  }
  for (let changed = true; changed;) {
    changed = false;
    for (const [decl, h] of helpers) {
      if (covered.has(decl) || exported.has(h.name.text) || h.refs.length === 0 || !h.refs.every(isCovered)) continue;
      covered.add(decl);
      changed = true;
    }
  }
}

/** 1-based line and column of a node's start. */
export function position(unit: Unit, node: TS.Node): { line: number; column: number } {
  const lc = unit.sf.getLineAndCharacterOfPosition(node.getStart(unit.sf));
  return { line: lc.line + 1, column: lc.character + 1 };
}

/**
 * The comments of a file by line, read from the syntax tree's trivia (so `// …` inside a string or
 * a template is text, not a comment).
 */
function commentsByLine(ts: typeof TS, sf: TS.SourceFile): Map<number, string[]> {
  const byLine = new Map<number, string[]>();
  const seen = new Set<number>();
  const take = (ranges: readonly TS.CommentRange[] | undefined) => {
    for (const r of ranges ?? []) {
      if (seen.has(r.pos)) continue;
      seen.add(r.pos);
      const line = sf.getLineAndCharacterOfPosition(r.pos).line;
      const list = byLine.get(line);
      const text = sf.text.slice(r.pos, r.end);
      if (list) list.push(text);
      else byLine.set(line, [text]);
    }
  };
  const stack: TS.Node[] = [sf];
  while (stack.length > 0) {
    const n = stack.pop()!;
    // A comment on the line a node starts (after the token before it) is "trailing" at its pos.
    take(ts.getLeadingCommentRanges(sf.text, n.pos));
    take(ts.getTrailingCommentRanges(sf.text, n.pos));
    take(ts.getTrailingCommentRanges(sf.text, n.end));
    ts.forEachChild(n, (c) => {
      stack.push(c);
    });
  }
  take(ts.getLeadingCommentRanges(sf.text, sf.endOfFileToken.pos));
  return byLine;
}

/** The reason of a `ctrlrun: not-consequential — <reason>` comment on the call's first or last line ('' without one), or null. */
function suppression(unit: Unit, call: TS.Node, comments: () => Map<number, string[]>): string | null {
  const sf = unit.sf;
  const lines = new Set([sf.getLineAndCharacterOfPosition(call.getStart(sf)).line, sf.getLineAndCharacterOfPosition(call.getEnd()).line]);
  for (const line of lines) {
    for (const comment of comments().get(line) ?? []) {
      const m = SUPPRESS.exec(comment.replace(/\*\/$/, '').replace(/[\r\n]+/g, ' '));
      if (m) return m[1]!.replace(/^\s*(?:[—–:-]+)\s*/, '').trim();
    }
  }
  return null;
}

/** The names a callee is written with: `this.billing.refunds.create` → billing, refunds, create. */
function calleeSegments(ts: typeof TS, e: TS.Expression): string[] {
  const out: string[] = [];
  for (let n: TS.Expression = e; ;) {
    if (ts.isPropertyAccessExpression(n)) {
      out.unshift(n.name.text);
      n = n.expression;
    } else if (ts.isElementAccessExpression(n)) {
      if (ts.isStringLiteralLike(n.argumentExpression)) out.unshift(n.argumentExpression.text);
      n = n.expression;
    } else if (ts.isCallExpression(n) || ts.isParenthesizedExpression(n) || ts.isNonNullExpression(n) || ts.isAsExpression(n) || ts.isAwaitExpression(n)) {
      n = n.expression;
    } else {
      if (ts.isIdentifier(n)) out.unshift(n.text);
      return out;
    }
  }
}

/** A call of the platform's own objects (an array's `push`, a map's `delete`), as far as can be told. */
function builtin(ts: typeof TS, call: TS.CallExpression, unit: Unit, origin: Origin): boolean {
  if (origin.kind === 'module' && origin.module === '<global>' && PLATFORM_GLOBALS.has(origin.path[0] ?? '')) return true;
  // Node's own modules the catalogue doesn't list (events, net, stream…): `socket.destroy()` is the platform's.
  if (origin.kind === 'module' && origin.module !== '<global>' && isBuiltin(origin.module)) return true;
  const callee = call.expression;
  const nameNode = ts.isPropertyAccessExpression(callee) ? callee.name : ts.isIdentifier(callee) ? callee : null;
  if (unit.program !== null && nameNode !== null) {
    try {
      const decls = unit.program.getTypeChecker().getSymbolAtLocation(nameNode)?.declarations ?? [];
      if (decls.length > 0) {
        return decls.every((d) => {
          const sf = d.getSourceFile();
          return unit.program!.isSourceFileDefaultLibrary(sf) || /[\\/]node_modules[\\/]@types[\\/]node[\\/]/.test(sf.fileName);
        });
      }
    } catch {
      // The checker gave up on this file: fall back to the names.
    }
  }
  const local = origin.kind === 'local' && (ts.isFunctionDeclaration(origin.decl) || ts.isClassDeclaration(origin.decl)) && origin.path.length === 0;
  return ts.isPropertyAccessExpression(callee) && origin.kind !== 'module' && !local && BUILTIN_METHODS.has(callee.name.text);
}

/** A policy action name for a call found by the vocabulary: `billing.refundOrder` → `billing.refund_order`. */
function suggestedAction(segments: readonly string[]): string {
  const snake = (s: string) =>
    s
      .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
      .replace(/[^A-Za-z0-9_]/g, '_')
      .toLowerCase();
  const tail = segments
    .slice(-2)
    .map(snake)
    .filter((s) => s !== '');
  return tail.length === 0 ? 'app.action' : tail.join('.');
}

/** Whether the arguments make a catalogued call consequential. */
function condition(ts: typeof TS, resolver: Resolver, entry: CatalogueEntry, call: TS.CallExpression, unit: Unit): Verdict {
  const when = entry.when;
  if (when === undefined) return { kind: 'yes' };
  if (when.sql !== undefined) {
    const arg = call.arguments[when.sql];
    if (arg === undefined) return { kind: 'no' };
    const sql = staticText(ts, arg);
    if (sql === null) {
      // `{ text: '…' }` query configs (pg).
      if (ts.isObjectLiteralExpression(arg)) {
        const t = arg.properties.find((p) => ts.isPropertyAssignment(p) && p.name.getText(unit.sf) === 'text');
        if (t && ts.isPropertyAssignment(t)) return sqlVerdict(staticText(ts, t.initializer));
      }
      return sqlVerdict(null);
    }
    return sqlVerdict(sql);
  }
  if (when.method !== undefined) {
    const opts = call.arguments[when.method];
    if (opts === undefined) return { kind: 'no' };
    if (!ts.isObjectLiteralExpression(opts)) return { kind: 'cant_tell', why: 'the request options are not written here, so the method is unknown' };
    let method: string | null | undefined;
    for (const p of opts.properties) {
      if (ts.isSpreadAssignment(p)) method = null;
      else if (p.name?.getText(unit.sf).replace(/^['"]|['"]$/g, '') === 'method') method = ts.isPropertyAssignment(p) ? staticText(ts, p.initializer) : null;
    }
    if (method === undefined) return { kind: 'no' };
    if (method === null) return { kind: 'cant_tell', why: 'the HTTP method is computed at run time' };
    return READ_METHODS.has(method.toUpperCase()) ? { kind: 'no' } : { kind: 'yes', detail: method.toUpperCase() };
  }
  if (when.command !== undefined) {
    const arg = call.arguments[0];
    if (arg === undefined) return { kind: 'no' };
    let e: TS.Expression = arg;
    while (ts.isParenthesizedExpression(e) || ts.isAsExpression(e)) e = e.expression;
    let command: string | null = null;
    if (ts.isNewExpression(e)) {
      const o = resolver.originOf(e.expression, unit);
      command = o.kind === 'module' ? (o.path[o.path.length - 1] ?? null) : ts.isIdentifier(e.expression) ? e.expression.text : null;
    } else if (ts.isIdentifier(e)) {
      const d = resolver.declarationOf(e, unit);
      if (d && ts.isVariableDeclaration(d.decl) && d.decl.initializer && ts.isNewExpression(d.decl.initializer)) {
        const o = resolver.originOf(d.decl.initializer.expression, d.unit);
        command = o.kind === 'module' ? (o.path[o.path.length - 1] ?? null) : null;
      }
    }
    if (command === null) return { kind: 'cant_tell', why: 'the command sent is not constructed here' };
    return new RegExp(when.command).test(command) ? { kind: 'yes', detail: command } : { kind: 'no' };
  }
  return { kind: 'yes' };
}

function sqlVerdict(sql: string | null): Verdict {
  if (sql === null) return { kind: 'cant_tell', why: 'the SQL is built at run time, so whether it writes is unknown' };
  const write = SQL_WRITE.exec(sql);
  if (write) return { kind: 'yes', detail: write[1]!.toUpperCase() };
  if (SQL_READ.test(sql)) return { kind: 'no' };
  return { kind: 'cant_tell', why: 'the SQL does not start with a statement keyword this scan reads' };
}

/** A string literal's text, or that of a `const` bound to one (in this file or imported from the tree), else null. */
function constantText(ts: typeof TS, resolver: Resolver, e: TS.Expression, unit: Unit): string | null {
  if (ts.isStringLiteralLike(e)) return e.text;
  if (!ts.isIdentifier(e)) return null;
  const d = resolver.declarationOf(e, unit);
  if (d === null || !ts.isVariableDeclaration(d.decl) || (d.decl.parent.flags & ts.NodeFlags.Const) === 0) return null;
  let init = d.decl.initializer;
  while (init !== undefined && (ts.isAsExpression(init) || ts.isSatisfiesExpression(init) || ts.isParenthesizedExpression(init))) init = init.expression;
  return init !== undefined && ts.isStringLiteralLike(init) ? init.text : null;
}

/** A string literal's text, or a template's head (enough for the SQL verb), else null. */
function staticText(ts: typeof TS, e: TS.Expression): string | null {
  if (ts.isStringLiteralLike(e)) return e.text;
  if (ts.isTemplateExpression(e)) return e.head.text.trim() === '' ? null : e.head.text;
  if (ts.isTaggedTemplateExpression(e)) return staticText(ts, e.template as TS.Expression);
  return null;
}
