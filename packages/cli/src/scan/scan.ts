/**
 * `scanTree(options)`: walks a directory, parses its TypeScript and JavaScript with the
 * TypeScript compiler API (a program per tsconfig.json in the tree, so the checker can help;
 * syntax only elsewhere), runs the analysis, and lists the policy entries that can allow or
 * approve without an `effect:` (docs/spec/04-surfaces.md §7). Reads files only: never imports the tree, builds
 * no action, resolves no principal, evaluates no policy, opens no store.
 *
 * The tree is not trusted. Every file is read through the CLI's regular-file reader (a FIFO, a
 * device or an oversized file is refused, never waited on). Symbolic links are never followed by
 * the walk: one leading to a place inside the scanned directories is skipped (its target is read
 * where it lives), one leading out is skipped and listed as not followed. The compiler reads
 * beside the tree only type declarations and JSON (configs a tsconfig extends, package.json).
 *
 * @module
 */
import { existsSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import type * as TS from 'typescript';
import type { Policy } from '@ctrlrun/kernel';
import { isWithin, readRegularFile, UnreadableFile } from '../files.js';
import { analyze, type CallFinding, type ProtectedAction, type Suppressed, type Undetermined } from './analyze.js';
import { isReadName, type CatalogueEntry, type Wrapper } from './catalogue.js';
import type { Unit } from './resolve.js';

/** Directories never entered (VCS, caches, virtualenvs, build output, dependencies). */
export const SKIPPED_DIRS = new Set([
  '.git',
  '.hg',
  '.svn',
  '.jj',
  'node_modules',
  'dist',
  'build',
  'site-packages',
  '.cache',
  '.next',
  '.nuxt',
  '.turbo',
  '.parcel-cache',
  '.vite',
  '.yarn',
  '.pnpm-store',
  '.venv',
  'venv',
  '__pycache__',
  '.tox',
  '.mypy_cache',
  'coverage',
  '.ctrlrun',
]);
/** The file names read. */
export const SOURCE_FILE = /\.(?:[cm]?[jt]s|[jt]sx)$/;
/** A file larger than this is not parsed (it is listed as unreadable). */
export const MAX_FILE_BYTES = 4 * 1024 * 1024;
/** The largest file the compiler reads beside the sources (a declaration file, a config). */
const MAX_COMPILER_FILE_BYTES = 32 * 1024 * 1024;
/** What the compiler may read outside the scanned directories: type declarations and JSON. */
const READABLE_OUTSIDE = /(?:\.d\.[cm]?ts|\.json)$/;

/** Any finding, in the order of severity docs/spec/04-surfaces.md §7 gives. */
export type Finding =
  | CallFinding
  | {
      readonly kind: 'protected_action_not_in_policy';
      readonly file: string;
      readonly line: number;
      readonly column: number;
      readonly rule: 'not-in-policy';
      readonly target: string;
      readonly name: string;
      /** The name names a read ({@link isReadName}): the entry it needs has no `effect:`. */
      readonly read: boolean;
    }
  | {
      readonly kind: 'action_without_effect';
      readonly file: string;
      readonly line: number;
      readonly column: number;
      readonly rule: 'no-effect-template';
      readonly target: string;
      readonly name: string;
      readonly decisions: readonly string[];
    }
  | {
      readonly kind: 'unparseable';
      readonly file: string;
      readonly line: number;
      readonly column: number;
      readonly rule: 'syntax-error' | 'unreadable';
      readonly target: string;
      readonly name: string;
      readonly detail: string;
    };

export interface ScanOptions {
  readonly ts: typeof TS;
  /** The directory files are named relative to (the `root` of the report), resolved (no links). */
  readonly root: string;
  /** The directories walked, resolved (no links) and none inside another; default `[root]`. */
  readonly paths?: readonly string[];
  readonly exclude: readonly string[];
  readonly catalogue: readonly CatalogueEntry[];
  readonly wrappers: readonly Wrapper[];
  /** `ctrlrun gateway` URLs (see {@link AnalyzeOptions.gateways}). */
  readonly gateways: readonly string[];
  readonly vocabulary: readonly string[];
  /** The policy and where it was read, or null. */
  readonly policy: { readonly policy: Policy; readonly path: string; readonly text: string } | null;
}

export interface ScanResult {
  readonly root: string;
  readonly findings: readonly Finding[];
  readonly suppressed: readonly Suppressed[];
  readonly undetermined: readonly Undetermined[];
  readonly protectedActions: readonly ProtectedAction[];
  readonly filesRead: number;
  readonly filesExcluded: number;
  /** Symbolic links (relative to the root) not followed because they lead out of the scanned directories. */
  readonly notFollowed: readonly string[];
  /** Files parsed with a program (a tsconfig.json above them in the tree). */
  readonly filesTyped: number;
  /**
   * The policy's actions that can allow or approve with no `effect:` but name a read
   * ({@link isReadName}): not findings, since an effect key would refuse the second read of the
   * same record as `DuplicateEffect`; listed so that nothing is passed over unsaid.
   */
  readonly readActions: readonly string[];
  readonly tsconfigs: readonly string[];
}

const KIND_ORDER = ['unprotected_call', 'protected_action_not_in_policy', 'action_without_effect', 'unparseable'];

/** A glob over relative paths (`**` any directories, `*` within a name, `?` one character) as a test. */
export function globMatcher(pattern: string): (rel: string) => boolean {
  const glob = pattern.replace(/^(?:\.\/)+/, '').replace(/\/+$/, '');
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*' && glob[i + 1] === '*') {
      re += glob[i + 2] === '/' ? '(?:[^/]*/)*' : '.*';
      i += glob[i + 2] === '/' ? 2 : 1;
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^$(){}|[\]\\]/g, '\\$&');
  }
  // A pattern without a `/` matches a name at any depth; a directory pattern excludes what is under it.
  const anchored = glob.includes('/') ? `^${re}(?:/.*)?$` : `(?:^|/)${re}(?:/.*)?$`;
  const rx = new RegExp(anchored);
  return (rel) => rx.test(rel);
}

/** Runs the scan. Throws nothing for a bad file: it is a finding. */
export function scanTree(options: ScanOptions): ScanResult {
  const { ts, root } = options;
  const paths = options.paths ?? [root];
  const inside = (real: string) => paths.some((p) => isWithin(real, p));
  const excluded = options.exclude.map(globMatcher);
  const files: string[] = [];
  const configs: string[] = [];
  const notFollowed: string[] = [];
  let filesExcluded = 0;
  const walk = (dir: string): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const path = join(dir, e.name);
      const rel = relative(root, path).split(sep).join('/');
      if (e.isDirectory()) {
        if (SKIPPED_DIRS.has(e.name)) continue;
        if (excluded.some((m) => m(rel))) {
          filesExcluded++;
          continue;
        }
        walk(path);
      } else if (e.isFile()) {
        if (e.name === 'tsconfig.json') configs.push(path);
        if (!SOURCE_FILE.test(e.name) || /\.d\.[cm]?ts$/.test(e.name)) continue;
        if (excluded.some((m) => m(rel))) {
          filesExcluded++;
          continue;
        }
        files.push(path);
      } else if (e.isSymbolicLink()) {
        // Never followed: inside, its target is read where it lives; outside, it is listed.
        if (SKIPPED_DIRS.has(e.name) || excluded.some((m) => m(rel))) continue;
        let target: string;
        try {
          target = realpathSync(path);
        } catch {
          continue; // dangling: nothing to read
        }
        if (inside(target)) continue;
        let isDir = false;
        try {
          isDir = statSync(target).isDirectory();
        } catch {
          continue;
        }
        if (isDir || e.name === 'tsconfig.json' || (SOURCE_FILE.test(e.name) && !/\.d\.[cm]?ts$/.test(e.name))) notFollowed.push(rel);
      }
    }
  };
  for (const p of paths) walk(p);

  const findings: Finding[] = [];
  const units = new Map<string, Unit>();
  const texts = new Map<string, string>();
  const relOf = (file: string) => relative(root, file).split(sep).join('/');
  /** A file that is not read: named as it was found, with why. */
  const unreadable = (file: string, detail: string): Finding => {
    const rel = relOf(file);
    return { kind: 'unparseable', file: rel, line: 1, column: 1, rule: 'unreadable', target: rel, name: rel, detail };
  };
  for (const file of files) {
    try {
      texts.set(file, readRegularFile(file, { maxBytes: MAX_FILE_BYTES }));
    } catch (e) {
      if (!(e instanceof UnreadableFile)) throw e;
      findings.push(unreadable(file, e.reason === 'too_large' ? `larger than ${MAX_FILE_BYTES} bytes; not read` : e.message));
    }
  }

  // A program per tsconfig.json: each file goes to the nearest one above it in the tree.
  const configSet = new Set(configs);
  const groups = new Map<string | null, string[]>();
  for (const file of texts.keys()) {
    let config: string | null = null;
    for (let d = dirname(file); ; d = dirname(d)) {
      const c = join(d, 'tsconfig.json');
      if (configSet.has(c)) {
        config = c;
        break;
      }
      if (d === root || dirname(d) === d) break;
    }
    const list = groups.get(config);
    if (list) list.push(file);
    else groups.set(config, [file]);
  }
  let filesTyped = 0;
  for (const [config, group] of groups) {
    const compiler = config === null ? null : programFor(ts, config, group, texts, inside);
    if (compiler !== null) filesTyped += group.length;
    for (const file of group) {
      let sf: TS.SourceFile | undefined;
      try {
        sf = compiler?.program.getSourceFile(file) ?? ts.createSourceFile(file, texts.get(file)!, ts.ScriptTarget.Latest, true, scriptKind(ts, file));
      } catch (e) {
        const detail = e instanceof RangeError ? 'nested too deeply for the parser' : `the parser failed (${(e as Error).message})`;
        findings.push({ kind: 'unparseable', file: relOf(file), line: 1, column: 1, rule: 'unreadable', target: relOf(file), name: relOf(file), detail });
        continue;
      }
      const unit: Unit = { file, rel: relOf(file), sf, program: compiler?.program ?? null, options: compiler?.options ?? null };
      units.set(file, unit);
      const diagnostics = (sf as unknown as { parseDiagnostics?: readonly TS.DiagnosticWithLocation[] }).parseDiagnostics ?? [];
      const first = diagnostics[0];
      if (first !== undefined) {
        const lc = sf.getLineAndCharacterOfPosition(first.start);
        const message = ts.flattenDiagnosticMessageText(first.messageText, ' ');
        findings.push({
          kind: 'unparseable',
          file: unit.rel,
          line: lc.line + 1,
          column: lc.character + 1,
          rule: 'syntax-error',
          target: unit.rel,
          name: unit.rel,
          detail: message,
        });
      }
    }
  }

  const analysis = analyze(ts, units, options);
  findings.push(...analysis.findings);
  for (const f of analysis.failures)
    findings.push({
      kind: 'unparseable',
      file: f.unit.rel,
      line: f.line,
      column: f.column,
      rule: 'unreadable',
      target: f.unit.rel,
      name: f.unit.rel,
      detail: f.message,
    });
  const policy = options.policy;
  const verbs = new Set(options.vocabulary);
  const readActions: string[] = [];
  if (policy !== null) {
    const policyRel = relOf(policy.path).startsWith('..') ? policy.path : relOf(policy.path);
    const listed = new Set(policy.policy.actionNames);
    for (const p of analysis.protectedActions) {
      if (p.name === null) {
        analysis.undetermined.push({
          unit: p.unit,
          line: p.line,
          column: p.column,
          expression: p.expression,
          why: 'protect() names its action at run time, so whether the policy lists it is unknown',
        });
        continue;
      }
      if (listed.has(p.name)) continue;
      findings.push({
        kind: 'protected_action_not_in_policy',
        file: p.unit.rel,
        line: p.line,
        column: p.column,
        rule: 'not-in-policy',
        target: p.name,
        name: p.name,
        read: isReadName(p.name, verbs),
      });
    }
    const supplied = new Set(analysis.protectedActions.filter((p) => p.suppliesEffect && p.name !== null).map((p) => p.name));
    for (const name of policy.policy.actionNames) {
      if (policy.policy.action(name)?.effect !== null || supplied.has(name)) continue;
      const decisions = [...new Set((policy.policy.rules(name) ?? []).map((r) => r.decision))].filter((d) => d === 'allow' || d === 'approve');
      if (decisions.length === 0) continue;
      if (isReadName(name, verbs)) {
        readActions.push(name);
        continue;
      }
      findings.push({
        kind: 'action_without_effect',
        file: policyRel,
        line: keyLine(policy.text, name),
        column: 1,
        rule: 'no-effect-template',
        target: name,
        name,
        decisions,
      });
    }
  }
  const fileOf = (f: Finding) => ('unit' in f ? f.unit.rel : f.file);
  findings.sort((a, b) => KIND_ORDER.indexOf(a.kind) - KIND_ORDER.indexOf(b.kind) || cmp(fileOf(a), fileOf(b)) || a.line - b.line || a.column - b.column);
  const byPlace = <T extends { unit: Unit; line: number; column: number }>(a: T, b: T) => cmp(a.unit.rel, b.unit.rel) || a.line - b.line || a.column - b.column;
  return {
    root,
    findings,
    suppressed: analysis.suppressed.sort(byPlace),
    undetermined: analysis.undetermined.sort(byPlace),
    protectedActions: analysis.protectedActions,
    filesRead: units.size,
    filesExcluded,
    notFollowed,
    filesTyped,
    readActions,
    tsconfigs: [...groups.keys()].filter((c): c is string => c !== null).map(relOf),
  };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function scriptKind(ts: typeof TS, file: string): TS.ScriptKind {
  if (file.endsWith('.tsx')) return ts.ScriptKind.TSX;
  if (file.endsWith('.jsx')) return ts.ScriptKind.JSX;
  if (/\.[cm]?js$/.test(file)) return ts.ScriptKind.JS;
  return ts.ScriptKind.TS;
}

/** The line of an action's key in the policy text (1 when not found). */
function keyLine(text: string, name: string): number {
  const esc = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const re = new RegExp(`^\\s+(?:${esc}|"${esc}"|'${esc}')\\s*:`);
  const i = text.split(/\r?\n/).findIndex((l) => re.test(l));
  return i < 0 ? 1 : i + 1;
}

/**
 * A program over `files` with the options of `config` (JavaScript allowed, nothing emitted), or
 * null when the config cannot be read (the files are then read by syntax only). The host serves
 * the texts already read, so each file is read once.
 */
function programFor(
  ts: typeof TS,
  config: string,
  files: readonly string[],
  texts: ReadonlyMap<string, string>,
  inside: (real: string) => boolean,
): { program: TS.Program; options: TS.CompilerOptions } | null {
  // What else the compiler reads (configs it extends, declaration files, sources the walk did not
  // read) goes through the regular-file reader, so a tree cannot point it at a device or a huge
  // file; and once its links are resolved it is inside the scanned directories, or a declaration
  // file or JSON (the types of dependencies, a shared tsconfig): a link out of the tree to any
  // other file is not read.
  const guarded = (p: string): string | undefined => {
    try {
      const real = realpathSync(p);
      if (!inside(real) && !READABLE_OUTSIDE.test(real)) return undefined;
      return readRegularFile(real, { maxBytes: MAX_COMPILER_FILE_BYTES });
    } catch {
      return undefined;
    }
  };
  const read = ts.readConfigFile(config, guarded);
  if (read.error) return null;
  let parsed: TS.ParsedCommandLine;
  try {
    parsed = ts.parseJsonConfigFileContent(read.config, { ...ts.sys, readFile: guarded }, dirname(config), undefined, config);
  } catch {
    return null;
  }
  const options: TS.CompilerOptions = {
    ...parsed.options,
    allowJs: true,
    checkJs: false,
    noEmit: true,
    skipLibCheck: true,
    composite: false,
    incremental: false,
    declaration: false,
  };
  const host = ts.createCompilerHost(options, true);
  host.readFile = (p) => texts.get(p) ?? guarded(p);
  host.getSourceFile = (p, lang) => {
    const t = texts.get(p) ?? guarded(p);
    return t === undefined ? undefined : ts.createSourceFile(p, t, lang, true, scriptKind(ts, p));
  };
  // Following every import depth-first recurses once per file in a chain: on a chain deeper than the
  // stack, keep the files of the tree only (no package types), and failing that read by syntax only.
  for (const attempt of [options, { ...options, noResolve: true }]) {
    try {
      const program = ts.createProgram({ rootNames: [...files], options: attempt, host });
      for (const f of files) program.getSourceFile(f);
      return { program, options: attempt };
    } catch (e) {
      if (!(e instanceof RangeError)) return null;
    }
  }
  return null;
}

/** Whether `dir/ctrlrun.scan.yaml` exists. */
export function catalogueIn(dir: string): string | null {
  const p = join(dir, 'ctrlrun.scan.yaml');
  return existsSync(p) ? p : null;
}
