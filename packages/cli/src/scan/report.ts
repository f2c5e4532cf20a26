/**
 * How a scan is shown: the human text, the `ctrlrun.scan/v1` JSON document and SARIF 2.1.0 for
 * code scanning. Each carries the limits statement; none carries a score.
 *
 * @module
 */
import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as Sarif from 'sarif';
import { visible } from '../format.js';
import type { Finding, ScanResult } from './scan.js';

/** The schema tag of `--json`. */
export const SCAN_SCHEMA = 'ctrlrun.scan/v1';

/** What the scan did not read, every run. */
export const NOT_READ = [
  'dependencies (node_modules: a package is known only by the catalogue and, with a tsconfig.json, its type declarations)',
  'other services this code calls',
  'tool servers behind a gateway, and what an MCP tool does on its server',
  'code built or loaded at run time (eval, dynamic import, generated files)',
];

/** What a scan cannot see (docs/spec/04-surfaces.md §7), printed on every run, clean ones included. */
export function limitsStatement(r: ScanResult): string {
  return (
    `ctrlrun scan is a finder, not a proof: it read ${r.filesRead} file${r.filesRead === 1 ? '' : 's'} ` +
    `(${r.filesTyped} with type information), could not tell what ${r.undetermined.length} call${r.undetermined.length === 1 ? '' : 's'} ` +
    `${r.undetermined.length === 1 ? 'does' : 'do'} (listed as undetermined), and did not read ${NOT_READ.slice(0, 3).join('; ')}; ` +
    'a clean run means nothing was found where it looked, not that nothing is there.'
  );
}

/** The exit code (docs/spec/04-surfaces.md §7): 0 nothing; 1 anything, suppressed and undetermined included. */
export function exitCode(r: ScanResult): 0 | 1 {
  return r.findings.length + r.suppressed.length + r.undetermined.length === 0 ? 0 : 1;
}

const fileOf = (f: Finding) => ('unit' in f ? f.unit.rel : f.file);

/**
 * The suggested policy entry for a finding (action, effect template, decision), or null. A read
 * is given no effect template: its key would be reserved at most once, refusing the second read
 * of the same record as `DuplicateEffect`.
 */
export function suggestion(f: Finding): { action: string; effect: string | null; decision: string | null } | null {
  if (f.kind === 'unprotected_call') return { action: f.action, effect: f.effect, decision: 'approve' };
  if (f.kind === 'protected_action_not_in_policy') return { action: f.name, effect: f.read ? null : `${f.name.split('.').pop()}:{id}`, decision: 'approve' };
  if (f.kind === 'action_without_effect') return { action: f.name, effect: `${f.name.split('.').pop()}:{id}`, decision: null };
  return null;
}

/** The suggestion as a YAML block (under `actions:`), or flowed onto one line. */
export function suggestionYaml(f: Finding, flow = false): string | null {
  const s = suggestion(f);
  if (s === null) return null;
  const fields = [...(s.effect === null ? [] : [`effect: ${JSON.stringify(s.effect)}`]), ...(s.decision === null ? [] : [`decision: ${s.decision}`])];
  return flow ? `${s.action}: { ${fields.join(', ')} }` : `${s.action}:\n${fields.map((x) => `  ${x}`).join('\n')}`;
}

function subject(f: Finding): string {
  switch (f.kind) {
    case 'unprotected_call':
      return `${f.target}(…)`;
    case 'protected_action_not_in_policy':
      return `protect(…, { name: ${JSON.stringify(f.name)} }) — not in the policy`;
    case 'action_without_effect':
      return `${f.name} — can ${f.decisions.join(' or ')} with no effect: template`;
    case 'unparseable':
      return f.detail;
  }
}

function why(f: Finding): string | null {
  switch (f.kind) {
    case 'unprotected_call':
      return f.detail === null ? f.why : `${f.why} (${f.detail})`;
    case 'protected_action_not_in_policy':
      return 'an action the policy does not list is denied (unknown_action) every time it runs';
    case 'action_without_effect':
      return 'without an effect key nothing is reserved: a retry after a lost reply runs it again';
    default:
      return null;
  }
}

/** The symbolic links not followed, in one line (named, never read). */
function notFollowedLine(r: ScanResult): string {
  const n = r.notFollowed.length;
  return `not followed: ${n} symbolic link${n === 1 ? '' : 's'} leading out of the tree: ${r.notFollowed.join(', ')}`;
}

/** Why the policy's read actions without an `effect:` are not findings, before their names. */
export const READS_NOTE = 'reads without an effect: template, as they should be (a key would refuse the second read as DuplicateEffect)';

/** The human report, one line each. */
export function renderText(r: ScanResult, policyPath: string | null): string[] {
  const out: string[] = [];
  for (const kind of ['unprotected_call', 'protected_action_not_in_policy', 'action_without_effect', 'unparseable'] as const) {
    const list = r.findings.filter((f) => f.kind === kind);
    if (list.length === 0) continue;
    out.push(`${kind} (${list.length})`);
    for (const f of list) {
      out.push(visible(`  ${fileOf(f)}:${f.line}:${f.column}  ${subject(f)}  [${kind}: ${f.rule}]`));
      const w = why(f);
      if (w !== null) out.push(visible(`      why: ${w}`));
      const s = suggestionYaml(f, true);
      if (s !== null) out.push(visible(`      policy: ${s}`));
    }
    out.push('');
  }
  if (r.undetermined.length > 0) {
    out.push(`undetermined (${r.undetermined.length}) — can't tell`);
    for (const u of r.undetermined) out.push(visible(`  ${u.unit.rel}:${u.line}:${u.column}  ${u.expression}  — can't tell: ${u.why}`));
    out.push('');
  }
  if (r.suppressed.length > 0) {
    out.push(`suppressed (${r.suppressed.length})`);
    for (const s of r.suppressed) out.push(visible(`  ${s.unit.rel}:${s.line}:${s.column}  ${s.target}(…)  [${s.rule}] — ${s.reason}`));
    out.push('');
  }
  out.push(
    `findings ${r.findings.length}, suppressed ${r.suppressed.length}, undetermined ${r.undetermined.length}; files read ${r.filesRead}, excluded ${r.filesExcluded}`,
  );
  if (r.notFollowed.length > 0) out.push(visible(notFollowedLine(r)));
  out.push(visible(policyPath === null ? 'policy: none found (no ctrlrun.yaml in the tree; give --policy FILE)' : `policy: ${policyPath}`));
  if (r.readActions.length > 0) out.push(visible(`${READS_NOTE}: ${r.readActions.join(', ')}`));
  return out;
}

/** The `ctrlrun.scan/v1` document. */
export function renderJson(
  r: ScanResult,
  meta: { vocabulary: readonly string[]; policy: string | null; catalogue: readonly string[] },
): Record<string, unknown> {
  return {
    schema: SCAN_SCHEMA,
    root: r.root,
    findings: r.findings.map((f) => ({
      kind: f.kind,
      file: fileOf(f),
      line: f.line,
      column: f.column,
      rule: f.rule,
      target: f.target,
      name: f.name,
      detail:
        f.kind === 'unparseable'
          ? f.detail
          : f.kind === 'unprotected_call'
            ? f.detail
            : f.kind === 'action_without_effect'
              ? `can ${f.decisions.join(' or ')} with no effect: template`
              : null,
      why: why(f),
      suggested_policy: suggestionYaml(f),
    })),
    suppressed: r.suppressed.map((s) => ({ file: s.unit.rel, line: s.line, column: s.column, target: s.target, rule: s.rule, reason: s.reason })),
    undetermined: r.undetermined.map((u) => ({ file: u.unit.rel, line: u.line, column: u.column, expression: u.expression, why: u.why })),
    totals: {
      files_read: r.filesRead,
      files_excluded: r.filesExcluded,
      files_typed: r.filesTyped,
      findings: r.findings.length,
      suppressed: r.suppressed.length,
      undetermined: r.undetermined.length,
    },
    not_followed: [...r.notFollowed],
    read_actions: [...r.readActions],
    vocabulary: [...meta.vocabulary],
    catalogue: [...meta.catalogue],
    policy: meta.policy,
    limits: { statement: limitsStatement(r), not_read: NOT_READ },
    exit_code: exitCode(r),
  };
}

const RULE_TEXT: Record<Finding['kind'], string> = {
  unprotected_call: 'A consequential call that no protect() or adapter wrapper covers',
  protected_action_not_in_policy: 'A protected action the policy does not list (denied as unknown_action)',
  action_without_effect: 'A policy entry that can allow or approve with no effect: template',
  unparseable: 'A file the scan could not read or parse',
};

/** SARIF 2.1.0 for code scanning: one rule per finding rule, suppressed calls carry their in-source suppression. */
export function renderSarif(r: ScanResult, meta: { version: string }): Sarif.Log {
  const rules = new Map<string, Sarif.ReportingDescriptor>();
  const ruleFor = (id: string, kind: Finding['kind'] | 'undetermined', description: string) => {
    if (!rules.has(id))
      rules.set(id, {
        id,
        name: kind,
        shortDescription: { text: kind === 'undetermined' ? "A call ctrlrun scan can't tell" : RULE_TEXT[kind] },
        fullDescription: { text: description },
        help: {
          text: `${description}. Wrap the call with protect() and list its action in the policy, or suppress it with a trailing // ctrlrun: not-consequential — <reason>.`,
        },
      });
    return [...rules.keys()].indexOf(id);
  };
  // A file outside the tree (the policy found beside the working directory) is an absolute file URI.
  const artifact = (file: string): Sarif.ArtifactLocation =>
    isAbsolute(file) ? { uri: pathToFileURL(file).href } : { uri: file.split('/').map(encodeURIComponent).join('/'), uriBaseId: '%SRCROOT%' };
  const location = (file: string, line: number, column: number): Sarif.Location => ({
    physicalLocation: { artifactLocation: artifact(file), region: { startLine: line, startColumn: column } },
  });
  const results: Sarif.Result[] = [];
  for (const f of r.findings) {
    const w = why(f);
    const s = suggestionYaml(f);
    const ruleIndex = ruleFor(f.rule, f.kind, w ?? RULE_TEXT[f.kind]);
    results.push({
      ruleId: f.rule,
      ruleIndex,
      level: f.kind === 'unparseable' ? 'warning' : 'error',
      message: { text: `${subject(f)}${w ? ` — ${w}` : ''}${s ? `. Suggested policy entry:\n${s}` : ''}` },
      locations: [location(fileOf(f), f.line, f.column)],
      properties: { kind: f.kind, target: f.target, name: f.name },
    });
  }
  for (const s of r.suppressed) {
    results.push({
      ruleId: s.rule,
      ruleIndex: ruleFor(s.rule, 'unprotected_call', RULE_TEXT.unprotected_call),
      level: 'error',
      message: { text: `${s.target}(…) — suppressed: ${s.reason}` },
      locations: [location(s.unit.rel, s.line, s.column)],
      suppressions: [{ kind: 'inSource', justification: s.reason }],
    });
  }
  for (const u of r.undetermined) {
    results.push({
      ruleId: 'undetermined',
      ruleIndex: ruleFor('undetermined', 'undetermined', "The call's target or arguments are chosen at run time; read it by hand"),
      level: 'note',
      message: { text: `can't tell: ${u.expression} — ${u.why}` },
      locations: [location(u.unit.rel, u.line, u.column)],
    });
  }
  const statement = limitsStatement(r);
  return {
    $schema: 'https://json.schemastore.org/sarif-2.1.0.json',
    version: '2.1.0',
    runs: [
      {
        tool: { driver: { name: 'ctrlrun scan', semanticVersion: meta.version, rules: [...rules.values()] } },
        originalUriBaseIds: { '%SRCROOT%': { uri: pathToFileURL(r.root.endsWith('/') ? r.root : `${r.root}/`).href } },
        invocations: [
          {
            executionSuccessful: true,
            toolExecutionNotifications: [
              { level: 'note', message: { text: statement } },
              ...(r.notFollowed.length > 0 ? [{ level: 'note' as const, message: { text: notFollowedLine(r) } }] : []),
            ],
          },
        ],
        results,
        properties: { limits: { statement, not_read: NOT_READ } },
      },
    ],
  };
}
