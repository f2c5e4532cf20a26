// `ctrlrun scan` (issue 18, spec 04 §7): the fixtures under test/fixtures/scan through the real
// binary, the repository's own examples/, the refusals (exit 2), and a 5,000-file tree timed.
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { writeScanTree } from '../../../scripts/bench/_scan-tree.js';
import { CATALOGUE, callMatcher, isReadName, moduleMatcher, vocabularyVerb, VOCABULARY } from '../src/scan/catalogue.js';
import { globMatcher } from '../src/scan/scan.js';
import { run, spawnCli, tempDir } from './support.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/scan/', import.meta.url));
const EXAMPLES = fileURLToPath(new URL('../../../examples/', import.meta.url));
const LIMITS =
  /^ctrlrun scan is a finder, not a proof: it read \d+ files? .*did not read dependencies.*tool servers behind a gateway.*a clean run means nothing was found where it looked, not that nothing is there\.$/m;

/** A copy of a fixture in a fresh directory (so a run that wrote anything would show it). */
function copy(name: string): string {
  const dir = join(tempDir('ctrlrun-scan-'), name);
  cpSync(join(FIXTURES, name), dir, { recursive: true });
  return dir;
}

interface ScanDoc {
  schema: string;
  root: string;
  findings: {
    kind: string;
    file: string;
    line: number;
    column: number;
    rule: string;
    target: string;
    name: string;
    detail: string | null;
    why: string | null;
    suggested_policy: string | null;
  }[];
  suppressed: { file: string; line: number; target: string; reason: string }[];
  undetermined: { file: string; line: number; expression: string; why: string }[];
  totals: Record<string, number>;
  vocabulary: string[];
  policy: string | null;
  read_actions: string[];
  limits: { statement: string; not_read: string[] };
  exit_code: number;
}

const where = (d: ScanDoc) => d.findings.map((f) => `${f.file}:${f.line}:${f.column} ${f.rule}`);

describe('ctrlrun scan over the basic fixture (syntax only)', () => {
  it('lists each uncovered consequential call with why and a policy entry; covered, read-only and built-in calls are not listed', async () => {
    const cwd = copy('basic');
    // A package that would act if anything under node_modules were loaded: node_modules is never read.
    mkdirSync(join(cwd, 'node_modules', 'evil'), { recursive: true });
    writeFileSync(join(cwd, 'node_modules', 'evil', 'index.js'), "require('node:fs').writeFileSync(__dirname + '/RAN', 'x');\n");
    const r = await spawnCli(['scan', '--json'], { cwd });
    expect(r.code).toBe(1);
    const d = JSON.parse(r.stdout) as ScanDoc;
    expect(d.schema).toBe('ctrlrun.scan/v1');
    expect(where(d)).toEqual([
      // Re-exports through local modules: an alias, a const bound to an import, a star, a namespace re-export.
      'src/cleanup.ts:6:3 catalogue:fs.delete',
      'src/cleanup.ts:7:3 catalogue:fs.write',
      'src/cleanup.ts:8:3 catalogue:child_process',
      'src/cleanup.ts:9:3 catalogue:fs.delete',
      // A suppression without a reason suppresses nothing.
      'src/cleanup.ts:11:3 catalogue:fs.delete',
      // AWS v3 commands through client.send (GetObjectCommand on line 15 is a read); a typed parameter.
      'src/cloud.ts:14:9 catalogue:aws.command',
      'src/cloud.ts:16:9 catalogue:aws.command',
      'src/cloud.ts:17:9 catalogue:k8s.write',
      'src/cloud.ts:19:9 catalogue:github.merge',
      'src/cloud.ts:20:9 catalogue:mcp.callTool',
      // SQL: the literal DELETE and the template DELETE; the SELECT is not listed.
      'src/db.ts:8:9 catalogue:pg.write',
      'src/db.ts:10:9 catalogue:pg.write',
      // Prisma through a local module's export.
      'src/db.ts:12:9 catalogue:prisma.write',
      'src/http.ts:3:9 catalogue:fetch.write',
      // require() with destructuring, and a member path through require.
      'src/legacy.cjs:4:1 catalogue:child_process',
      'src/legacy.cjs:5:1 catalogue:fs.delete',
      // The one refund outside protect.
      'src/payments.ts:9:10 catalogue:stripe.refund',
      // An aliased import and a namespace import.
      'src/shell.ts:7:3 catalogue:child_process',
      'src/shell.ts:8:3 catalogue:child_process',
      // The prepared DELETE (not the SELECT, not .run on it); a Stripe member the catalogue doesn't list, by its verb.
      'src/sqlite.ts:9:3 catalogue:sqlite.write',
      'src/sqlite.ts:11:3 vocabulary:cancel',
      // The tool no wrapper got.
      'src/tools.ts:19:56 catalogue:github.delete',
      // Names: refundOrder and createRefund; not refundsReport, deletedAt, items.push, cache.delete.
      'src/vocab.ts:17:9 vocabulary:refund',
      'src/vocab.ts:20:9 vocabulary:refund',
      'src/payments.ts:17:23 not-in-policy',
      'src/vocab.ts:12:15 not-in-policy',
      // report.send; not customer.read, a read (listed apart, below).
      'ctrlrun.yaml:7:1 no-effect-template',
      'src/broken.ts:2:10 syntax-error',
    ]);
    const shell = d.findings.find((f) => f.file === 'src/shell.ts' && f.line === 7)!;
    expect(shell).toMatchObject({
      kind: 'unprotected_call',
      target: 'run',
      name: 'child_process#exec',
      suggested_policy: 'shell.run:\n  effect: "shell:{command}"\n  decision: approve',
    });
    expect(shell.why).toMatch(/runs a program/);
    expect(d.findings.find((f) => f.file === 'src/cloud.ts' && f.line === 14)!.name).toBe('@aws-sdk/client-s3#S3Client.send(DeleteObjectCommand)');
    expect(d.findings.find((f) => f.file === 'src/cleanup.ts' && f.line === 11)!.detail).toMatch(/gives no reason/);
    expect(d.findings.filter((f) => f.kind === 'action_without_effect').map((f) => f.name)).toEqual(['report.send']);
    expect(d.read_actions).toEqual(['customer.read']);
    expect(d.suppressed.map((s) => `${s.file}:${s.line} ${s.reason}`)).toEqual([
      'src/cleanup.ts:10 a scratch directory this process created',
      'src/sideeffect.mjs:3 the marker T194 looks for',
    ]);
    // Dynamic member access, SQL built at run time and a computed HTTP method: can't tell.
    expect(d.undetermined.map((u) => `${u.file}:${u.line} ${u.expression}`)).toEqual([
      'src/db.ts:11 pool.query(sqlFor(table))',
      'src/dynamic.ts:7 handlers[name](args)',
      "src/dynamic.ts:8 (cp as any)[method]('ls')",
      'src/http.ts:6 fetch(url, { method })',
    ]);
    expect(d.totals).toEqual({ files_read: 18, files_excluded: 0, files_typed: 0, findings: 28, suppressed: 2, undetermined: 4 });
    expect(d.exit_code).toBe(1);
    expect(d.limits.statement).toMatch(LIMITS);
    expect(r.stderr.trim()).toBe(d.limits.statement);
  });

  it('test_T194_scan_never_imports_the_tree_it_reads', async () => {
    const cwd = copy('basic');
    // A package that would act if anything under node_modules were loaded.
    mkdirSync(join(cwd, 'node_modules', 'evil'), { recursive: true });
    writeFileSync(join(cwd, 'node_modules', 'evil', 'index.js'), "require('node:fs').writeFileSync(__dirname + '/RAN', 'x');\n");
    writeFileSync(join(cwd, 'src', 'uses-evil.ts'), "import 'evil';\nimport './sideeffect.mjs';\n");
    const r = await spawnCli(['scan'], { cwd });
    expect(r.code).toBe(1);
    // src/sideeffect.mjs writes src/IMPORTED when it runs; it was read (its call is listed as suppressed), never run.
    expect(r.stdout).toContain('src/sideeffect.mjs:3:1  writeFileSync(…)  [catalogue:fs.write] — the marker T194 looks for');
    expect(existsSync(join(cwd, 'src', 'IMPORTED'))).toBe(false);
    expect(existsSync(join(cwd, 'node_modules', 'evil', 'RAN'))).toBe(false);
  });

  it('test_T205_scan_resolves_no_principal_evaluates_no_policy_and_opens_no_store', async () => {
    const cwd = copy('basic');
    // Observe mode: a command that loaded the policy to decide would print its banner.
    const policyText = readFileSync(join(cwd, 'ctrlrun.yaml'), 'utf8');
    writeFileSync(join(cwd, 'ctrlrun.yaml'), `${policyText.replace('ctrlrun.policy/v2', 'ctrlrun.policy/v3')}mode: observe\n`);
    const before = readdirSync(cwd).sort();
    // A store URL no backend takes and a state file: any command that opened a store would refuse (exit 1 with an Error) or create it.
    const r = await spawnCli(['scan'], { cwd, env: { CTRLRUN_STORE_URL: 'nosuch://store', CTRLRUN_STATE: join(cwd, 'state.db') } });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('');
    expect(existsSync(join(cwd, 'state.db'))).toBe(false);
    expect(existsSync(join(cwd, '.ctrlrun'))).toBe(false);
    expect(readdirSync(cwd).sort()).toEqual(before);
    // The policy is read for its entries, never asked to decide: the refund stays listed though the
    // policy would approve it, and no banner of a command that loads a policy for its mode is printed.
    expect(r.stdout).toContain('src/payments.ts:9:10  stripe.refunds.create(…)  [unprotected_call: catalogue:stripe.refund]');
    expect(r.stdout + r.stderr).not.toMatch(/OBSERVE MODE|principal|agent:/);
  });

  it('prints file:line:col, the call, why and the suggested policy entry; totals and the policy; the limits statement last', async () => {
    const cwd = copy('basic');
    const r = await spawnCli(['scan'], { cwd });
    expect(r.code).toBe(1);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('unprotected_call (24)');
    expect(lines).toContain('  src/shell.ts:7:3  run(…)  [unprotected_call: catalogue:child_process]');
    const i = lines.indexOf('  src/shell.ts:7:3  run(…)  [unprotected_call: catalogue:child_process]');
    expect(lines[i + 1]).toMatch(/^ {6}why: runs a program with the agent’s privileges/);
    expect(lines[i + 2]).toBe('      policy: shell.run: { effect: "shell:{command}", decision: approve }');
    expect(lines).toContain("undetermined (4) — can't tell");
    expect(lines).toContain("  src/dynamic.ts:7:3  handlers[name](args)  — can't tell: the called member is chosen at run time (handlers[name])");
    expect(lines).toContain('suppressed (2)');
    expect(lines).toContain('findings 28, suppressed 2, undetermined 4; files read 18, excluded 0');
    expect(lines).toContain('reads without an effect: template, as they should be (a key would refuse the second read as DuplicateEffect): customer.read');
    expect(lines).toContain('policy: ctrlrun.yaml');
    expect(lines.at(-1)).toMatch(LIMITS);
    // Never a score.
    expect(r.stdout).not.toMatch(/%|score|\d+\s*\/\s*\d+/i);
  });

  it("--sarif is SARIF 2.1.0: one result per finding, suppressed calls carry their in-source suppression, can't-tell calls are notes", async () => {
    const cwd = copy('basic');
    const r = await spawnCli(['scan', '--sarif'], { cwd });
    expect(r.code).toBe(1);
    const s = JSON.parse(r.stdout) as {
      version: string;
      runs: {
        tool: { driver: { name: string; rules: { id: string }[] } };
        results: {
          ruleId: string;
          ruleIndex: number;
          level: string;
          message: { text: string };
          locations: { physicalLocation: { artifactLocation: { uri: string; uriBaseId: string }; region: { startLine: number; startColumn: number } } }[];
          suppressions?: { kind: string; justification: string }[];
        }[];
        invocations: { toolExecutionNotifications: { message: { text: string } }[] }[];
        properties: { limits: { statement: string } };
      }[];
    };
    expect(s.version).toBe('2.1.0');
    const run0 = s.runs[0]!;
    expect(run0.tool.driver.name).toBe('ctrlrun scan');
    expect(run0.results).toHaveLength(28 + 2 + 4);
    for (const res of run0.results) expect(run0.tool.driver.rules[res.ruleIndex]!.id).toBe(res.ruleId);
    const refund = run0.results.find((x) => x.ruleId === 'catalogue:stripe.refund')!;
    expect(refund.level).toBe('error');
    expect(refund.locations[0]!.physicalLocation).toEqual({
      artifactLocation: { uri: 'src/payments.ts', uriBaseId: '%SRCROOT%' },
      region: { startLine: 9, startColumn: 10 },
    });
    expect(refund.message.text).toContain('stripe.refund:\n  effect: "refund:{payment_intent}"');
    expect(run0.results.filter((x) => x.suppressions).map((x) => x.suppressions![0]!.justification)).toEqual([
      'a scratch directory this process created',
      'the marker T194 looks for',
    ]);
    expect(run0.results.filter((x) => x.ruleId === 'undetermined').every((x) => x.level === 'note')).toBe(true);
    expect(run0.properties.limits.statement).toMatch(LIMITS);
    expect(run0.invocations[0]!.toolExecutionNotifications[0]!.message.text).toMatch(LIMITS);
    expect(r.stderr).toMatch(LIMITS);
  });
});

describe('ctrlrun scan with a tsconfig.json (type information)', () => {
  it("resolves a paths alias, tells a class's own push from an array's push, and knows a pg client by its inferred type; without the tsconfig none of them", async () => {
    const cwd = copy('typed');
    // The installed packages, so the checker finds pg's types (the scan itself never enters node_modules).
    symlinkSync(join(EXAMPLES, '..', 'node_modules'), join(cwd, 'node_modules'));
    const typed = JSON.parse((await spawnCli(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    // What connect() returns and the class field `this.pool` are pg clients only by their inferred types.
    expect(where(typed)).toEqual([
      'src/db.ts:13:10 catalogue:pg.write',
      'src/db.ts:20:12 catalogue:pg.write',
      'src/db.ts:26:1 catalogue:child_process',
      'src/git.ts:16:3 vocabulary:push',
      'src/git.ts:19:3 catalogue:fs.delete',
    ]);
    expect(typed.findings[0]!.name).toBe('pg#PoolClient.query(DELETE)');
    expect(typed.totals['files_typed']).toBe(3);
    const bare = copy('typed');
    rmSync(join(bare, 'tsconfig.json'));
    const syntaxOnly = JSON.parse((await spawnCli(['scan', '--json'], { cwd: bare })).stdout) as ScanDoc;
    expect(syntaxOnly.totals['files_typed']).toBe(0);
    // No paths mapping: '@/lib/fs' is a package the catalogue does not know, `git.push` is taken for the
    // built-in, and `client`/`this.pool` have no known origin. `exec.call(…)` needs no types.
    expect(where(syntaxOnly)).toEqual(['src/db.ts:26:1 catalogue:child_process']);
  });
});

describe('ctrlrun scan: a clean run, the limits statement, the exit codes', () => {
  it('test_T203_the_limits_sentence_is_in_every_run_including_a_clean_one', async () => {
    const cwd = copy('clean');
    const text = await spawnCli(['scan'], { cwd });
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(LIMITS);
    expect(text.stdout).toContain('findings 0, suppressed 0, undetermined 0; files read 1, excluded 0');
    const json = await spawnCli(['scan', '--json'], { cwd });
    expect(json.code).toBe(0);
    expect((JSON.parse(json.stdout) as ScanDoc).limits.statement).toMatch(LIMITS);
    expect((JSON.parse(json.stdout) as ScanDoc).exit_code).toBe(0);
    expect(json.stderr).toMatch(LIMITS);
    const sarif = await spawnCli(['scan', '--sarif'], { cwd });
    expect(sarif.code).toBe(0);
    expect(sarif.stderr).toMatch(LIMITS);
  });

  it('a suppressed call alone is exit 1; --exclude leaves a path out and counts it', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    mkdirSync(join(cwd, 'gen'));
    writeFileSync(join(cwd, 'a.ts'), "import { rmSync } from 'node:fs';\nrmSync('/tmp/x'); // ctrlrun: not-consequential — temp dir\n");
    writeFileSync(join(cwd, 'gen', 'b.ts'), "import { rmSync } from 'node:fs';\nrmSync('/srv');\n");
    const r = await run(['scan', '--json', '--exclude', 'gen/**'], { cwd });
    expect(r.code).toBe(1);
    const d = JSON.parse(r.stdout) as ScanDoc;
    expect(d.findings).toEqual([]);
    expect(d.suppressed).toHaveLength(1);
    expect(d.totals).toMatchObject({ files_read: 1, files_excluded: 1 });
    const all = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(where(all)).toEqual(['gen/b.ts:2:1 catalogue:fs.delete']);
  });

  it('--path below the working directory still finds the policy the other commands find (./ctrlrun.yaml, $CTRLRUN_CONFIG); SARIF names it by a file URI', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    mkdirSync(join(cwd, 'src'));
    writeFileSync(
      join(cwd, 'src', 'a #1.ts'),
      "import { protect } from '@ctrlrun/kernel';\nexport const f = protect(async () => 1, { control: null as never, name: 'report.send' });\nimport { rmSync } from 'node:fs';\nrmSync('/x');\n",
    );
    writeFileSync(join(cwd, 'ctrlrun.yaml'), 'schema: ctrlrun.policy/v2\nactions:\n  report.send:\n    decision: allow\n');
    const d = JSON.parse((await run(['scan', '--json', '--path', 'src'], { cwd })).stdout) as ScanDoc;
    expect(d.policy).toBe(join(cwd, 'ctrlrun.yaml'));
    expect(where(d)).toEqual(['a #1.ts:4:1 catalogue:fs.delete', `${join(cwd, 'ctrlrun.yaml')}:3:1 no-effect-template`]);
    const sarif = JSON.parse((await run(['scan', '--sarif', '--path', 'src'], { cwd })).stdout) as {
      runs: { results: { locations: { physicalLocation: { artifactLocation: unknown } }[] }[] }[];
    };
    expect(sarif.runs[0]!.results.map((x) => x.locations[0]!.physicalLocation.artifactLocation)).toEqual([
      { uri: 'a%20%231.ts', uriBaseId: '%SRCROOT%' },
      { uri: pathToFileURL(join(cwd, 'ctrlrun.yaml')).href },
    ]);
    writeFileSync(join(cwd, 'other.yaml'), 'schema: ctrlrun.policy/v2\nactions: {}\n');
    const byEnv = JSON.parse((await run(['scan', '--json', '--path', 'src'], { cwd, env: { CTRLRUN_CONFIG: 'other.yaml' } })).stdout) as ScanDoc;
    expect(byEnv.policy).toBe(join(cwd, 'other.yaml'));
    // The action is protected but the other policy lacks it.
    expect(where(byEnv)).toEqual(['a #1.ts:4:1 catalogue:fs.delete', 'a #1.ts:2:18 not-in-policy']);
    const blank = await run(['scan', '--path', 'src'], { cwd, env: { CTRLRUN_CONFIG: ' ' } });
    expect(blank.code).toBe(2);
    expect(blank.stderr).toMatch(/CTRLRUN_CONFIG is set but blank/);
  });

  it('exit 2 when it cannot run: not a directory, no source files, a policy that does not load, a bad vocabulary or catalogue; --json with --sarif is a usage error', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    writeFileSync(join(cwd, 'file.txt'), 'x');
    const notDir = await run(['scan', '--path', 'file.txt'], { cwd });
    expect(notDir.code).toBe(2);
    expect(notDir.stderr).toMatch(/^Error: .*file\.txt is not a directory/);
    const empty = await run(['scan'], { cwd });
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/no TypeScript or JavaScript source files/);
    writeFileSync(join(cwd, 'a.ts'), 'export {};\n');
    writeFileSync(join(cwd, 'ctrlrun.yaml'), 'schema: ctrlrun.policy/v9\nactions: {}\n');
    const policy = await run(['scan'], { cwd });
    expect(policy.code).toBe(2);
    expect(policy.stderr).toMatch(/^Error: .*unknown policy schema/);
    writeFileSync(join(cwd, 'ctrlrun.yaml'), 'schema: ctrlrun.policy/v2\nactions: {}\n');
    writeFileSync(join(cwd, 'verbs.txt'), 'refund\nRe-Fund!\n');
    const vocab = await run(['scan', '--vocabulary', 'verbs.txt'], { cwd });
    expect(vocab.code).toBe(2);
    expect(vocab.stderr).toMatch(/verbs\.txt: line 2 is not a verb/);
    expect(vocab.stderr).not.toContain('Re-Fund');
    const missing = await run(['scan', '--vocabulary', 'nowhere.txt'], { cwd });
    expect(missing.code).toBe(2);
    writeFileSync(
      join(cwd, 'ctrlrun.scan.yaml'),
      'schema: ctrlrun.scan-catalogue/v1\ncatalogue:\n  - id: x\n    module: m\n    call: f\n    why: because\n    __proto__: { polluted: true }\n',
    );
    const cat = await run(['scan'], { cwd });
    expect(cat.code).toBe(2);
    expect(cat.stderr).toMatch(/ctrlrun\.scan\.yaml: catalogue\[0\] \(line 7, column 5\): an unknown key; the keys are id, module/);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    const both = await run(['scan', '--json', '--sarif'], { cwd });
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/give --json or --sarif, not both/);
  });
});

describe("ctrlrun scan: the catalogue and the vocabulary are the operator's to extend", () => {
  it('ctrlrun.scan.yaml adds an entry (with its reason) and a wrapper; --vocabulary replaces the verbs; --list prints them', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    writeFileSync(
      join(cwd, 'ctrlrun.scan.yaml'),
      [
        'schema: ctrlrun.scan-catalogue/v1',
        'catalogue:',
        '  - id: acme.wire',
        '    module: "@acme/bank"',
        '    call: "**.wires.create"',
        '    why: sends money out of the company account',
        '    action: bank.wire',
        '    effect: "wire:{reference}"',
        'wrappers:',
        '  - { module: "@acme/guard", name: guarded }',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(cwd, 'bank.ts'),
      [
        "import { Bank } from '@acme/bank';",
        "import { guarded } from '@acme/guard';",
        'const bank = new Bank();',
        "bank.wires.create({ reference: 'r1' });",
        "export const safe = guarded(() => bank.wires.create({ reference: 'r2' }));",
        'archiveTicket();',
        'refundOrder();',
        'function archiveTicket() {}',
        'function refundOrder() {}',
        '',
      ].join('\n'),
    );
    const r = await run(['scan', '--json'], { cwd });
    const d = JSON.parse(r.stdout) as ScanDoc;
    expect(where(d)).toEqual(['bank.ts:4:1 catalogue:acme.wire', 'bank.ts:7:1 vocabulary:refund']);
    expect(d.findings[0]).toMatchObject({
      why: 'sends money out of the company account',
      suggested_policy: 'bank.wire:\n  effect: "wire:{reference}"\n  decision: approve',
    });
    writeFileSync(join(cwd, 'verbs.txt'), '# our verbs\narchive\n');
    const replaced = JSON.parse((await run(['scan', '--json', '--vocabulary', 'verbs.txt'], { cwd })).stdout) as ScanDoc;
    expect(where(replaced)).toEqual(['bank.ts:4:1 catalogue:acme.wire', 'bank.ts:6:1 vocabulary:archive']);
    expect(replaced.vocabulary).toEqual(['archive']);
    const list = await run(['scan', '--list'], { cwd });
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(`verbs (25): ${VOCABULARY.join(' ')}`);
    expect(list.stdout).toMatch(/^ {2}acme\.wire {2}@acme\/bank {2}\*\*\.wires\.create {2}— sends money out of the company account$/m);
    expect(list.stdout).toMatch(/^ {2}stripe\.refund {2}stripe {2}\*\*\.refunds\.create {2}— moves money back/m);
    expect(list.stdout).toContain('@acme/guard#guarded');
  });

  it("Node's own modules the catalogue doesn't list are the platform's: socket.destroy() and removeAllListeners() are not listed, your removeUser() is", async () => {
    const cwd = tempDir('ctrlrun-scan-');
    writeFileSync(
      join(cwd, 'a.ts'),
      [
        "import { EventEmitter } from 'node:events';",
        "import net from 'net';",
        "import { removeUser } from './users.js';",
        'new EventEmitter().removeAllListeners();',
        'net.connect(80).destroy();',
        'removeUser();',
        '',
      ].join('\n'),
    );
    writeFileSync(join(cwd, 'users.ts'), 'export function removeUser() {}\n');
    const d = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(where(d)).toEqual(['a.ts:6:1 vocabulary:remove']);
  });

  it('the vocabulary rule of spec 04 §7: a segment matches a verb or its plural, a compound word only the singular', () => {
    const verbs = new Set(VOCABULARY);
    expect(vocabularyVerb(['create_refund'], verbs)).toBe('refund');
    expect(vocabularyVerb(['refunds_report'], verbs)).toBeNull();
    expect(vocabularyVerb(['deleted_at'], verbs)).toBeNull();
    expect(vocabularyVerb(['deletedAt'], verbs)).toBeNull();
    expect(vocabularyVerb(['stripe', 'refunds', 'create'], verbs)).toBe('refund');
    expect(vocabularyVerb(['execute'], verbs)).toBeNull();
    fc.assert(
      fc.property(fc.constantFrom(...VOCABULARY), fc.stringMatching(/^[a-z]{1,8}$/), (verb, word) => {
        // A verb in a compound always matches; a word made of letters alone and no verb never does.
        expect(vocabularyVerb([`${word}_${verb}`], verbs)).not.toBeNull();
        expect(vocabularyVerb([`${word}${verb[0]!.toUpperCase()}${verb.slice(1)}`], verbs)).not.toBeNull();
      }),
    );
  });
});

describe('ctrlrun scan: coverage by name across files', () => {
  it('a function declared in another file and passed to protect by name (through a re-export) is covered; calling it directly is still listed', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    mkdirSync(join(cwd, 'ops'));
    writeFileSync(
      join(cwd, 'ops', 'wipe.ts'),
      "import { rmSync } from 'node:fs';\nexport function wipeWorkspace(args: { dir: string }) {\n  rmSync(args.dir, { recursive: true });\n}\n",
    );
    writeFileSync(join(cwd, 'ops', 'index.ts'), "export { wipeWorkspace } from './wipe.js';\n");
    writeFileSync(
      join(cwd, 'agent.ts'),
      [
        "import { protect as guard } from '@ctrlrun/kernel';",
        "import { wipeWorkspace } from './ops/index.js';",
        'declare const control: never;',
        "export const wipe = guard(wipeWorkspace, { control, name: 'workspace.wipe', effect: 'workspace:{dir}' });",
        "await wipe({ dir: '/w' });",
        "wipeWorkspace({ dir: '/w' });",
        '',
      ].join('\n'),
    );
    const d = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    // The rmSync inside is covered. The direct call bypasses protect, but "wipe" is not one of the verbs.
    expect(where(d)).toEqual([]);
    writeFileSync(join(cwd, 'verbs.txt'), 'wipe\n');
    const withWipe = JSON.parse((await run(['scan', '--json', '--vocabulary', 'verbs.txt'], { cwd })).stdout) as ScanDoc;
    expect(where(withWipe)).toEqual(['agent.ts:6:1 vocabulary:wipe']);
    // Take the wrapper away and the call inside is listed.
    writeFileSync(join(cwd, 'agent.ts'), "import { wipeWorkspace } from './ops/index.js';\nwipeWorkspace({ dir: '/w' });\n");
    const bare = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(where(bare)).toEqual(['ops/wipe.ts:3:3 catalogue:fs.delete']);
  });
});

describe('ctrlrun scan: helpers only protected code calls', () => {
  it('a function of the file, not exported, referred to only from inside protect is covered (and its own helpers); one also called outside, or exported, is not', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    cpSync(join(FIXTURES, 'helpers.ts'), join(cwd, 'a.ts'));
    const d = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(where(d)).toEqual(['a.ts:15:10 catalogue:stripe.refund', 'a.ts:23:10 catalogue:stripe.refund']);
  });
});

describe('ctrlrun scan: the built-in catalogue', () => {
  it('every entry finds its call, each with its reason; the read beside it is not listed', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    cpSync(join(FIXTURES, 'catalogue.ts'), join(cwd, 'a.ts'));
    const d = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(d.findings.map((f) => f.rule)).toEqual(CATALOGUE.map((e) => `catalogue:${e.id}`));
    for (const f of d.findings) expect(f.why).toBe(CATALOGUE.find((e) => f.rule === `catalogue:${e.id}`)!.why);
    expect(d.undetermined).toEqual([]);
    expect(d.suppressed).toEqual([]);
  });
});

describe('ctrlrun scan: CommonJS', () => {
  it('require() of a local module follows module.exports (an object, one value) and exports.x', async () => {
    const cwd = copy('cjs');
    const d = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(d.findings.map((f) => `${f.file}:${f.line} ${f.rule} ${f.name}`)).toEqual([
      'main.js:6 catalogue:child_process child_process#exec',
      'main.js:7 catalogue:fs.delete fs#rmSync',
      'main.js:8 catalogue:child_process child_process#execSync',
      'main.js:9 catalogue:fs.delete fs#unlinkSync',
      'main.js:10 catalogue:child_process child_process#spawn',
      'main.js:11 catalogue:child_process child_process#execSync',
    ]);
  });
});

describe('ctrlrun scan: callbacks', () => {
  it("a callback's parameters given by a catalogued package (Drizzle and Prisma transactions, a pg client) are that package's; an Express res is not", async () => {
    const cwd = tempDir('ctrlrun-scan-');
    cpSync(join(FIXTURES, 'callbacks.ts'), join(cwd, 'a.ts'));
    const d = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(where(d)).toEqual(['a.ts:11:9 catalogue:drizzle.write', 'a.ts:15:3 catalogue:pg.write', 'a.ts:18:41 catalogue:prisma.write']);
    expect(d.undetermined).toEqual([]);
  });
});

describe('ctrlrun scan: the action protect() names', () => {
  it("a const (here or imported) names it as a literal would; a name known only at run time is can't tell", async () => {
    const cwd = tempDir('ctrlrun-scan-');
    writeFileSync(
      join(cwd, 'ctrlrun.yaml'),
      'schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    decision: approve\n',
    );
    writeFileSync(join(cwd, 'names.ts'), "export const REFUND = 'stripe.refund';\nexport const PURGE = 'ops.purge' as const;\n");
    writeFileSync(
      join(cwd, 'agent.ts'),
      [
        "import { protect } from '@ctrlrun/kernel';",
        "import { REFUND, PURGE } from './names.js';",
        'declare const control: never;',
        'export const refund = protect(async () => 1, { control, name: REFUND });',
        'export const purge = protect(async () => 1, { control, name: PURGE });',
        'export const make = (name: string) => protect(async () => 1, { control, name });',
        '',
      ].join('\n'),
    );
    const d = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(where(d)).toEqual(['agent.ts:5:22 not-in-policy']);
    expect(d.findings[0]!.name).toBe('ops.purge');
    expect(d.undetermined.map((u) => `${u.file}:${u.line} ${u.why}`)).toEqual([
      'agent.ts:6 protect() names its action at run time, so whether the policy lists it is unknown',
    ]);
  });
});

describe('ctrlrun scan: reads need no effect: template (issue 35)', () => {
  it("over init's starter policy: its reads are no findings (listed as reads), and a protected read the policy lacks is suggested without an effect", async () => {
    const cwd = tempDir('ctrlrun-scan-');
    expect((await run(['init'], { cwd })).code).toBe(0);
    writeFileSync(
      join(cwd, 'agent.ts'),
      [
        "import { protect } from '@ctrlrun/kernel';",
        'declare const control: never;',
        "export const customer = protect(async () => 1, { control, name: 'customer.read' });",
        "export const invoice = protect(async () => 1, { control, name: 'invoice.read' });",
        "export const orders = protect(async () => 1, { control, name: 'orders.list' });",
        "export const report = protect(async () => 1, { control, name: 'report.send' });",
        '',
      ].join('\n'),
    );
    const r = await run(['scan', '--json'], { cwd });
    const d = JSON.parse(r.stdout) as ScanDoc;
    expect(d.findings.map((f) => `${f.kind} ${f.name}: ${f.suggested_policy}`)).toEqual([
      'protected_action_not_in_policy orders.list: orders.list:\n  decision: approve',
      'protected_action_not_in_policy report.send: report.send:\n  effect: "send:{id}"\n  decision: approve',
    ]);
    expect(d.read_actions).toEqual(['customer.read', 'invoice.read']);
    const text = await run(['scan'], { cwd });
    expect(text.stdout).not.toMatch(/customer\.read: \{ effect|invoice\.read: \{ effect/);
    expect(text.stdout).toContain(
      'reads without an effect: template, as they should be (a key would refuse the second read as DuplicateEffect): customer.read, invoice.read',
    );
  });

  it('a read is named by a read verb and by no verb of the vocabulary', () => {
    const verbs = new Set(VOCABULARY);
    for (const name of ['customer.read', 'invoices.list', 'crm.get_contact', 'fs.readFile', 'listInvoices', 'docs.search', 'orders.lookup'])
      expect({ name, read: isReadName(name, verbs) }).toEqual({ name, read: true });
    for (const name of [
      'email.send',
      'refund.get_and_cancel',
      'reads.delete',
      'reader.update',
      'customer.readiness',
      'customer.update',
      'read.customer_then_refund',
    ])
      expect({ name, read: isReadName(name, verbs) }).toEqual({ name, read: false });
  });
});

describe('ctrlrun scan: MCP tools behind the gateway', () => {
  it('a callTool whose client connects only to a gateway URL from ctrlrun.scan.yaml is covered; one to another server, or to a URL read at run time, is not', async () => {
    const cwd = copy('gateway');
    const d = JSON.parse((await spawnCli(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(where(d)).toEqual(['src/agent.ts:13:9 catalogue:mcp.callTool', 'src/agent.ts:17:9 catalogue:mcp.callTool']);
    // Without the gateway list, the gated client's call is a finding too.
    rmSync(join(cwd, 'ctrlrun.scan.yaml'));
    const bare = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(where(bare)).toEqual([
      'src/agent.ts:9:9 catalogue:mcp.callTool',
      'src/agent.ts:13:9 catalogue:mcp.callTool',
      'src/agent.ts:17:9 catalogue:mcp.callTool',
    ]);
  });

  it('refuses a gateway that is not an http(s) URL (exit 2)', async () => {
    const cwd = copy('gateway');
    writeFileSync(join(cwd, 'ctrlrun.scan.yaml'), 'schema: ctrlrun.scan-catalogue/v1\ngateways: ["file:///etc/passwd"]\n');
    const r = await run(['scan'], { cwd });
    expect(r.code).toBe(2);
    // Named by its place, never quoted: the file may be a tree's, read into someone else's log.
    expect(r.stderr).toMatch(/gateways\[0\] \(line 2, column 12\): must be an http\(s\) URL/);
    expect(r.stderr).not.toContain('passwd');
  });
});

describe('ctrlrun scan: the globs it parses (property)', () => {
  const name = fc.stringMatching(/^[A-Za-z0-9_$-]{1,8}$/);
  const path = fc.array(name, { minLength: 1, maxLength: 5 });

  it('--exclude: a path excludes itself and what is under it, however it is written; * stays within a name', () => {
    fc.assert(
      fc.property(path, name, (segments, file) => {
        const rel = segments.join('/');
        for (const written of [rel, `./${rel}`, `${rel}/`]) {
          expect(globMatcher(written)(rel)).toBe(true);
          expect(globMatcher(written)(`${rel}/${file}.ts`)).toBe(true);
        }
        expect(globMatcher(`${rel}/**`)(`${rel}/${file}.ts`)).toBe(true);
        expect(globMatcher(`${rel}x`)(rel)).toBe(false);
        // A bare name matches at any depth; `*` never crosses a `/`.
        expect(globMatcher(segments.at(-1)!)(`deep/${rel}`)).toBe(true);
        if (segments.length > 1) expect(globMatcher(`${segments[0]}/*`)(`${segments[0]}/${segments.slice(1).join('/')}`)).toBe(true);
        expect(globMatcher('*.ts')(`${rel}/${file}.ts`)).toBe(true);
        expect(globMatcher(`${segments[0]}*.ts`)(`${rel}.js`)).toBe(false);
      }),
    );
  });

  it('catalogue calls: ** is any names before, * within one name, {a,b} either; other characters are literal', () => {
    fc.assert(
      fc.property(path, name, (segments, extra) => {
        const last = segments.at(-1)!;
        expect(callMatcher(`**.${last}`)(segments)).toBe(true);
        expect(callMatcher(`**.${last}`)([...segments, extra])).toBe(extra === last);
        expect(callMatcher(segments.join('.'))(segments)).toBe(true);
        expect(callMatcher(`{${extra},${last}}`)([last])).toBe(true);
        expect(callMatcher(`${last.slice(0, 1)}*`)([last])).toBe(true);
        expect(callMatcher(`${last.slice(0, 1)}*`)([last, extra])).toBe(false);
        // Regex metacharacters in a written name are literal.
        expect(callMatcher('a.b')(['aXb'])).toBe(false);
        expect(moduleMatcher('@aws-sdk/client-*')(`@aws-sdk/client-${last}`)).toBe(true);
        expect(moduleMatcher('@aws-sdk/client-*')(`@aws-sdk/clientX${last}`)).toBe(false);
      }),
    );
    // Whatever an operator writes in ctrlrun.scan.yaml compiles to a matcher; none throws.
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), path, (glob, segments) => {
        expect(typeof callMatcher(glob)(segments)).toBe('boolean');
        expect(typeof moduleMatcher(glob)(segments.join('/'))).toBe('boolean');
        expect(typeof globMatcher(glob)(segments.join('/'))).toBe('boolean');
      }),
    );
  });
});

describe('ctrlrun scan: untrusted trees', () => {
  it('prints a control character in a file name or the code as an escape, never raw', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    writeFileSync(join(cwd, 'evil\u001b[2J.ts'), "import { rmSync } from 'node:fs';\nrmSync('/x'); // ctrlrun: not-consequential — ok\u001b[31m red\n");
    const r = await run(['scan'], { cwd });
    expect(r.code).toBe(1);
    expect(r.stdout).not.toMatch(/\u001b/);
    expect(r.stdout).toContain('evil\\x1b[2J.ts:2:1');
  });

  it('a suppression is a comment: the same words inside a string suppress nothing; a comment on the first line of a call spread over lines does', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    writeFileSync(
      join(cwd, 'a.ts'),
      [
        "import { rmSync } from 'node:fs';",
        "rmSync('/srv', { note: '// ctrlrun: not-consequential — a string, not a comment' });",
        'rmSync(`/srv/${1} /* ctrlrun: not-consequential — in a template */`);',
        'rmSync( // ctrlrun: not-consequential — the build output this script made',
        "  '/tmp/out',",
        ');',
        "rmSync('/tmp/y'); /* ctrlrun: not-consequential: block comments count too */",
        '',
      ].join('\n'),
    );
    const d = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(where(d)).toEqual(['a.ts:2:1 catalogue:fs.delete', 'a.ts:3:1 catalogue:fs.delete']);
    expect(d.suppressed.map((x) => `${x.line} ${x.reason}`)).toEqual(['4 the build output this script made', '7 block comments count too']);
  });

  it("only a called member chosen at run time is can't tell: a member named on a value reached through obj[k] is read by its name", async () => {
    const cwd = tempDir('ctrlrun-scan-');
    writeFileSync(
      join(cwd, 'a.ts'),
      [
        'declare const labels: string[]; declare const i: number; declare const handlers: Record<string, () => void>; declare const k: string;',
        'declare const clients: Record<string, { deleteAccount(): void }>; declare const it: Iterable<number>;',
        'labels[i]!.padEnd(4);',
        'handlers[k]!();',
        'clients[k]!.deleteAccount();',
        'it[Symbol.iterator]();',
        'handlers[k + 1]!(); // ctrlrun: not-consequential — the handlers are all read-only lookups',
        '',
      ].join('\n'),
    );
    const d = JSON.parse((await run(['scan', '--json'], { cwd })).stdout) as ScanDoc;
    expect(d.undetermined.map((u) => `${u.line} ${u.expression}`)).toEqual(['4 handlers[k]!()']);
    expect(where(d)).toEqual(['a.ts:5:1 vocabulary:delete']);
    // Someone read it and said why: suppressed, still listed.
    expect(d.suppressed.map((x) => `${x.line} ${x.reason}`)).toEqual(['7 the handlers are all read-only lookups']);
  });

  it('a file nested deeper than the stack is an unreadable finding, and the rest of the tree is still read', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    writeFileSync(join(cwd, 'chain.ts'), `import * as fs from 'fs';\nfs${'.x'.repeat(30000)}.rmSync('/');\nfs.rmSync('/y');\n`);
    writeFileSync(join(cwd, 'nest.ts'), `const x = ${'['.repeat(100000)}${']'.repeat(100000)};\n`);
    writeFileSync(join(cwd, 'ok.ts'), "import { execSync } from 'node:child_process';\nexecSync('make deploy');\n");
    const r = await run(['scan', '--json'], { cwd });
    expect(r.code).toBe(1);
    const d = JSON.parse(r.stdout) as ScanDoc;
    expect(d.findings.map((f) => `${f.file}:${f.line} ${f.rule} ${f.detail ?? ''}`.trim())).toEqual([
      'chain.ts:3 catalogue:fs.delete',
      'ok.ts:2 catalogue:child_process',
      'chain.ts:2 unreadable nested too deeply for this scan to read',
      'nest.ts:1 unreadable nested too deeply for the parser',
    ]);
  });

  it('any text at all: the scan answers 0 or 1 with a document, never a crash (property)', async () => {
    const cwd = tempDir('ctrlrun-scan-');
    const snippets = fc.constantFrom(
      'import { exec } from "child_process";',
      'exec(x);',
      'obj[k]();',
      'fetch(u, {method: m});',
      '`${',
      '/*',
      'protect(',
      ')',
      '{',
      '__proto__.delete()',
      'require("fs").rmSync(p)',
      'export * from "./a.js";',
      '\u0000',
      '\u2028',
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(snippets, fc.string({ maxLength: 20 })), { maxLength: 30 }), async (parts) => {
        writeFileSync(join(cwd, 'a.ts'), parts.join('\n'));
        writeFileSync(join(cwd, 'b.js'), parts.reverse().join(' '));
        const r = await run(['scan', '--json'], { cwd });
        expect([0, 1]).toContain(r.code);
        const d = JSON.parse(r.stdout) as ScanDoc;
        expect(d.exit_code).toBe(r.code);
        const text = await run(['scan'], { cwd });
        expect(text.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u2028]/);
      }),
      { numRuns: 25 },
    );
  });
});

describe("ctrlrun scan over this repository's examples/", () => {
  it('finds nothing: the two read actions need no effect: template (listed as reads), and the protected refund is covered and in the policy', async () => {
    const r = await spawnCli(['scan', '--json', '--path', EXAMPLES], { cwd: tempDir() });
    expect(r.code).toBe(0);
    const d = JSON.parse(r.stdout) as ScanDoc;
    expect(d.findings).toEqual([]);
    expect(d.read_actions).toEqual(['customer.read', 'invoice.read']);
    expect(d.undetermined).toEqual([]);
    expect(d.suppressed).toEqual([]);
    expect(d.policy).toBe(join(EXAMPLES, 'ctrlrun.yaml'));
  });

  it('the README "ctrlrun scan" section quotes this output verbatim', async () => {
    const readme = readFileSync(join(EXAMPLES, '..', 'README.md'), 'utf8');
    const start = readme.indexOf('\n## ctrlrun scan\n');
    expect(start).toBeGreaterThanOrEqual(0);
    const block = /```text\n\$ cd examples && npx ctrlrun scan\n([\s\S]*?)\n```/.exec(readme.slice(start))?.[1];
    expect(block).toBeDefined();
    const r = await run(['scan'], { cwd: EXAMPLES });
    expect(r.code).toBe(0);
    expect(block!.split('\n')).toEqual(r.stdout.trimEnd().split('\n'));
    // Its ctrlrun.scan.yaml example is a catalogue file the scan loads.
    const yamlBlock = /```yaml\n(# ctrlrun\.scan\.yaml\n[\s\S]*?)\n```/.exec(readme.slice(start))?.[1];
    expect(yamlBlock).toBeDefined();
    const cwd = tempDir('ctrlrun-scan-');
    writeFileSync(join(cwd, 'ctrlrun.scan.yaml'), yamlBlock!);
    const list = await run(['scan', '--list'], { cwd });
    expect(list.code).toBe(0);
    expect(list.stdout).toContain('@acme/guard#guarded');
    expect(list.stdout).toContain('gateways (1): http://127.0.0.1:8900/mcp');
  });
});

describe('ctrlrun scan is fast', () => {
  it('reads a generated 5,000-file tree (time printed, not asserted)', async () => {
    const root = tempDir('ctrlrun-scan-bench-');
    const FILES = 5000;
    const expected = writeScanTree(root, FILES);
    const started = performance.now();
    const r = await run(['scan', '--json'], { cwd: root });
    const seconds = (performance.now() - started) / 1000;
    const d = JSON.parse(r.stdout) as ScanDoc;
    expect(d.totals['files_read']).toBe(FILES);
    expect(d.findings).toHaveLength(expected);
    console.log(`ctrlrun scan: ${FILES} files in ${seconds.toFixed(2)} s (syntax only, in-process)`);
  }, 600_000);
});
