/**
 * `ctrlrun scan [PATH…] [--path DIR]… [--policy FILE] [--exclude GLOB]… [--vocabulary FILE]
 * [--catalogue FILE] [--list] [--json | --sarif]` (docs/spec/04-surfaces.md §7): the consequential calls in a
 * TypeScript/JavaScript tree that nothing protects, and the policy entries without `effect:`.
 * Reads text only; prints the limits statement on every run and never a score.
 *
 * The tree may be anyone's (a pull request in CI): every file is read through the regular-file
 * reader (a FIFO or a device is refused, a file is bounded), a file found in the tree
 * (`ctrlrun.yaml`, `ctrlrun.scan.yaml`, and a named file that lies in the tree) is refused when its
 * links lead out of it, and a refusal names the file and the line, never its text.
 *
 * @module
 */
import { existsSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve as resolvePath } from 'node:path';
import { PolicyError } from '@ctrlrun/kernel';
import type { Command } from '../command.js';
import { loadPolicyFile, POLICY_FILE, policyPath as discoveredPolicy } from '../discovery.js';
import { CliRefusal, UsageError } from '../errors.js';
import { isWithin, realPath, realPathWithin, UnreadableFile } from '../files.js';
import { CATALOGUE, loadCatalogueFile, loadVocabularyFile, VOCABULARY, WRAPPERS } from '../scan/catalogue.js';
import { visible } from '../format.js';
import { exitCode, limitsStatement, renderJson, renderSarif, renderText } from '../scan/report.js';
import { catalogueIn, scanTree } from '../scan/scan.js';
import { VERSION } from '../version.js';

/** Could not run: exit 2 (docs/spec/04-surfaces.md §7). */
const cannot = (message: string) => new CliRefusal(message, 2);

/** The deepest directory holding every one of `dirs` (absolute). */
export function commonDirectory(dirs: readonly string[]): string {
  const [first, ...rest] = dirs;
  if (first === undefined) throw new TypeError('commonDirectory: dirs is empty');
  let base = first;
  for (const d of rest) while (!isWithin(d, base)) base = dirname(base);
  return base;
}

/**
 * The directories a scan walks, from the PATHs and `--path`s (the union; `.` when none): each
 * resolved against `cwd` and then through its links, refused unless a directory; a directory
 * inside another given one, or given twice, is walked once. `root` is the deepest directory
 * holding them all: files are named relative to it, and its `ctrlrun.yaml` and
 * `ctrlrun.scan.yaml` are the tree's. `given` is what was typed, resolved against `cwd`.
 */
export function scanDirectories(cwd: string, paths: readonly string[]): { given: string[]; paths: string[]; root: string } | { notDirectory: string } {
  const given = (paths.length === 0 ? ['.'] : paths).map((p) => resolvePath(cwd, p));
  const real: string[] = [];
  for (const g of given) {
    let r: string;
    try {
      r = realPath(g);
      if (!statSync(r).isDirectory()) return { notDirectory: g };
    } catch {
      return { notDirectory: g };
    }
    real.push(r);
  }
  const unique = [...new Set(real)].sort();
  const walked = unique.filter((d) => !unique.some((o) => o !== d && isWithin(d, o)));
  return { given, paths: walked, root: commonDirectory(walked) };
}

export const scan: Command = {
  name: 'scan',
  summary: 'list consequential calls nothing protects, and policy entries without an effect: template',
  positionals: ['[PATH…]'],
  options: {
    path: { type: 'string', value: 'DIR', multiple: true, help: 'a tree to read, as a PATH is (repeatable; default: the working directory)' },
    policy: {
      type: 'string',
      value: 'FILE',
      help: 'the policy (default: ctrlrun.yaml at the top of the tree, else $CTRLRUN_CONFIG, else ./ctrlrun.yaml if there is one)',
    },
    exclude: { type: 'string', value: 'GLOB', multiple: true, help: 'leave out paths matching GLOB (relative to the top of the tree; repeatable)' },
    vocabulary: { type: 'string', value: 'FILE', help: 'replace the verb list with the verbs in FILE (one a line)' },
    catalogue: { type: 'string', value: 'FILE', help: 'add catalogue entries and wrappers from FILE (default: ctrlrun.scan.yaml at the top of the tree)' },
    list: { type: 'boolean', help: 'print the verbs, the catalogue and the wrappers, and exit' },
    json: { type: 'boolean', help: 'the ctrlrun.scan/v1 document on stdout' },
    sarif: { type: 'boolean', help: 'SARIF 2.1.0 on stdout, for code scanning' },
  },
  details:
    'PATH and --path DIR name directories (any number; the union is read, the working directory when none). ' +
    'The top of the tree is the deepest directory holding them all: files are named relative to it, --exclude globs match against it, and its ctrlrun.yaml and ctrlrun.scan.yaml are used.\n' +
    'Exit 0: nothing found. 1: anything found, suppressed or undetermined. 2: could not run (not a directory, no source files, the policy, catalogue or vocabulary does not load).\n' +
    'Covered: a call lexically inside a function given to protect() or an adapter wrapper (protectTool, protectTools), inside a function given to one by name, or a call of what protect() returned. ' +
    'Suppress one call with a trailing comment: // ctrlrun: not-consequential — <reason> (no reason, no effect).\n' +
    'A policy entry named by a read verb (customer.read, invoices.list, get_customer; no verb of the vocabulary) needs no effect: template and is listed as a read, not a finding: ' +
    'an effect key is reserved at most once, so the second read of the same record would be refused as DuplicateEffect.\n' +
    'Never imports or runs the tree; builds no action, resolves no principal, evaluates no policy, opens no store. A finder, not a proof: there is no score.\n' +
    'Made for trees you do not trust: only regular files are read (a FIFO or a device is refused), symbolic links are not followed ' +
    '(one leading inside is read where it points, one leading out is listed as not followed, and a ctrlrun.yaml or ctrlrun.scan.yaml in the tree that leads out is refused), ' +
    'and an error names the file and the line, never its text.',
  async run({ io, values, positionals, out, err }) {
    if (values['json'] === true && values['sarif'] === true) throw new UsageError('give --json or --sarif, not both');
    const dirs = scanDirectories(io.cwd, [...positionals, ...((values['path'] as string[] | undefined) ?? [])]);
    const tree = 'notDirectory' in dirs ? null : dirs;
    /** The tree directory a file lies in (as typed or resolved), which its links must not leave; null when it is not in the tree. */
    const treeOf = (file: string): string | null => {
      if (tree === null) return null;
      const dir = dirname(file);
      let realDir: string | null = null;
      try {
        realDir = realPath(dir);
      } catch {
        realDir = null;
      }
      const holder = tree.given.find((g) => isWithin(file, g)) ?? tree.paths.find((p) => isWithin(file, p) || (realDir !== null && isWithin(realDir, p)));
      if (holder !== undefined) return holder;
      return isWithin(file, tree.root) || (realDir !== null && isWithin(realDir, tree.root)) ? tree.root : null;
    };
    /** The file to read: `file` itself, or its resolved path when it must stay inside `within`. */
    const checked = (file: string, within: string | null, what: string): string => {
      if (within === null) return file;
      try {
        return realPathWithin(file, within);
      } catch (e) {
        if (!(e instanceof UnreadableFile) || e.reason === 'missing') return file; // the reader says it is missing
        throw cannot(`${what} ${file} cannot be read: ${e.message}`);
      }
    };

    const vocabularyFile = values['vocabulary'] === undefined ? null : resolvePath(io.cwd, values['vocabulary'] as string);
    const vocabulary = vocabularyFile === null ? VOCABULARY : loadVocabularyFile(vocabularyFile, treeOf(vocabularyFile));
    let cataloguePath: string | null = null;
    let catalogueWithin: string | null = null;
    if (values['catalogue'] !== undefined) {
      cataloguePath = resolvePath(io.cwd, values['catalogue'] as string);
      catalogueWithin = treeOf(cataloguePath);
    } else if (tree !== null) {
      cataloguePath = catalogueIn(tree.root);
      catalogueWithin = tree.root;
    }
    const extra = cataloguePath === null ? { entries: [], wrappers: [], gateways: [] } : loadCatalogueFile(cataloguePath, catalogueWithin);
    const catalogue = [...CATALOGUE, ...extra.entries];
    const wrappers = [...WRAPPERS, ...extra.wrappers];
    if (values['list'] === true) {
      out(`verbs (${vocabulary.length}): ${vocabulary.join(' ')}`);
      out(`catalogue (${catalogue.length}):`);
      for (const e of catalogue) out(visible(`  ${e.id}  ${e.module}  ${e.call}${e.when ? `  when ${JSON.stringify(e.when)}` : ''}  — ${e.why}`));
      out(`wrappers (${wrappers.length}): ${wrappers.map((w) => visible(`${w.module}#${w.name}`)).join(' ')}`);
      out(`gateways (${extra.gateways.length}): ${extra.gateways.map(visible).join(' ')}`);
      return 0;
    }
    if (tree === null) throw cannot(`${(dirs as { notDirectory: string }).notDirectory} is not a directory`);
    const root = tree.root;

    // The policy: --policy, else ctrlrun.yaml at the top of the tree, else the one the other commands
    // find ($CTRLRUN_CONFIG, else ./ctrlrun.yaml when there is one); none is not an error. One found
    // in the tree or the working directory must not lead out of it; one named must not lead out of
    // the tree when it lies in the tree.
    let policyPath: string | null = null;
    let policyWithin: string | null = null;
    let policy = null;
    try {
      if (values['policy'] !== undefined) {
        policyPath = resolvePath(io.cwd, values['policy'] as string);
        policyWithin = treeOf(policyPath);
      } else if (existsSync(join(root, POLICY_FILE))) {
        policyPath = join(root, POLICY_FILE);
        policyWithin = root;
      } else {
        const found = discoveredPolicy(io);
        if (io.env['CTRLRUN_CONFIG'] !== undefined) {
          policyPath = found;
          policyWithin = treeOf(found);
        } else if (existsSync(found)) {
          policyPath = found;
          policyWithin = treeOf(found) ?? io.cwd;
        }
      }
      if (policyPath !== null) {
        policy = { ...loadPolicyFile(checked(policyPath, policyWithin, 'the policy')), path: policyPath };
      }
    } catch (e) {
      if (e instanceof PolicyError) throw cannot(e.message);
      throw e;
    }

    // Loaded here, not at start-up: the other commands never pay for the compiler.
    const compiler = await import('typescript');
    const ts = compiler.default as unknown as typeof compiler;
    const result = scanTree({
      ts,
      root,
      paths: tree.paths,
      exclude: (values['exclude'] as string[] | undefined) ?? [],
      catalogue,
      wrappers,
      gateways: extra.gateways,
      vocabulary,
      policy,
    });
    if (result.filesRead === 0 && result.findings.length === 0) throw cannot(`no TypeScript or JavaScript source files under ${root}`);

    const statement = limitsStatement(result);
    if (values['json'] === true) {
      out(JSON.stringify(renderJson(result, { vocabulary, policy: policyPath, catalogue: catalogue.map((e) => e.id) })));
      err(statement);
    } else if (values['sarif'] === true) {
      out(JSON.stringify(renderSarif(result, { version: VERSION })));
      err(statement);
    } else {
      const shown = policyPath === null ? null : relative(root, policyPath);
      for (const line of renderText(result, shown === null || shown.startsWith('..') || isAbsolute(shown) ? policyPath : shown)) out(line);
      out('');
      out(statement);
    }
    return exitCode(result);
  },
};
