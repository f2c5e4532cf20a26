/**
 * `ctrlrun scan [--path DIR] [--policy FILE] [--exclude GLOB]… [--vocabulary FILE]
 * [--catalogue FILE] [--list] [--json | --sarif]` (docs/spec/04-surfaces.md §7): the consequential calls in a
 * TypeScript/JavaScript tree that nothing protects, and the policy entries without `effect:`.
 * Reads text only; prints the limits statement on every run and never a score.
 *
 * @module
 */
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve as resolvePath } from 'node:path';
import { PolicyError } from '@ctrlrun/kernel';
import type { Command } from '../command.js';
import { loadPolicyFile, POLICY_FILE, policyPath as discoveredPolicy } from '../discovery.js';
import { CliRefusal, UsageError } from '../errors.js';
import { CATALOGUE, loadCatalogueFile, loadVocabularyFile, VOCABULARY, WRAPPERS } from '../scan/catalogue.js';
import { visible } from '../format.js';
import { exitCode, limitsStatement, renderJson, renderSarif, renderText } from '../scan/report.js';
import { catalogueIn, scanTree } from '../scan/scan.js';
import { VERSION } from '../version.js';

/** Could not run: exit 2 (docs/spec/04-surfaces.md §7). */
const cannot = (message: string) => new CliRefusal(message, 2);

export const scan: Command = {
  name: 'scan',
  summary: 'list consequential calls nothing protects, and policy entries without an effect: template',
  positionals: [],
  options: {
    path: { type: 'string', value: 'DIR', help: 'the tree to read (default: the working directory)' },
    policy: {
      type: 'string',
      value: 'FILE',
      help: 'the policy (default: ctrlrun.yaml at the top of the tree, else $CTRLRUN_CONFIG, else ./ctrlrun.yaml if there is one)',
    },
    exclude: { type: 'string', value: 'GLOB', multiple: true, help: 'leave out paths matching GLOB (relative to DIR; repeatable)' },
    vocabulary: { type: 'string', value: 'FILE', help: 'replace the verb list with the verbs in FILE (one a line)' },
    catalogue: { type: 'string', value: 'FILE', help: 'add catalogue entries and wrappers from FILE (default: ctrlrun.scan.yaml at the top of the tree)' },
    list: { type: 'boolean', help: 'print the verbs, the catalogue and the wrappers, and exit' },
    json: { type: 'boolean', help: 'the ctrlrun.scan/v1 document on stdout' },
    sarif: { type: 'boolean', help: 'SARIF 2.1.0 on stdout, for code scanning' },
  },
  details:
    'Exit 0: nothing found. 1: anything found, suppressed or undetermined. 2: could not run (not a directory, no source files, the policy, catalogue or vocabulary does not load).\n' +
    'Covered: a call lexically inside a function given to protect() or an adapter wrapper (protectTool, protectTools), inside a function given to one by name, or a call of what protect() returned. ' +
    'Suppress one call with a trailing comment: // ctrlrun: not-consequential — <reason> (no reason, no effect).\n' +
    'Never imports or runs the tree; builds no action, resolves no principal, evaluates no policy, opens no store. A finder, not a proof: there is no score.',
  async run({ io, values, out, err }) {
    if (values['json'] === true && values['sarif'] === true) throw new UsageError('give --json or --sarif, not both');
    const root = resolvePath(io.cwd, (values['path'] as string | undefined) ?? '.');
    const vocabulary = values['vocabulary'] === undefined ? VOCABULARY : loadVocabularyFile(resolvePath(io.cwd, values['vocabulary'] as string));
    let rootOk = false;
    try {
      rootOk = statSync(root).isDirectory();
    } catch {
      rootOk = false;
    }
    const cataloguePath = values['catalogue'] !== undefined ? resolvePath(io.cwd, values['catalogue'] as string) : rootOk ? catalogueIn(root) : null;
    const extra = cataloguePath === null ? { entries: [], wrappers: [], gateways: [] } : loadCatalogueFile(cataloguePath);
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
    if (!rootOk) throw cannot(`${root} is not a directory`);

    // The policy: --policy, else ctrlrun.yaml at the top of the tree, else the one the other commands
    // find ($CTRLRUN_CONFIG, else ./ctrlrun.yaml when there is one); none is not an error.
    let policyPath: string | null = null;
    let policy = null;
    try {
      if (values['policy'] !== undefined) policyPath = resolvePath(io.cwd, values['policy'] as string);
      else if (existsSync(join(root, POLICY_FILE))) policyPath = join(root, POLICY_FILE);
      else {
        const found = discoveredPolicy(io);
        if (io.env['CTRLRUN_CONFIG'] !== undefined || existsSync(found)) policyPath = found;
      }
      if (policyPath !== null) {
        policy = { ...loadPolicyFile(policyPath), path: policyPath };
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
