// The adapters on today's framework versions (issue 35): `ai` 7 and the current `@openai/agents`
// need Node 22, so Node 22 is installed from the npm registry (scripts/other-node.ts) and
// everything here runs under it. The @ctrlrun packages of each adapter README's install line are
// packed and installed from the tarballs into an empty `{"type":"module"}` folder together with
// the README's other packages *without* the versions the README pins for Node 20 (`ai@6` → `ai`),
// which is what `npm install ai` gives a reader today: that install must succeed with no peer
// conflict, `npm ls` must find every peer range satisfied, each README example must print what the
// README says (`node example.ts`, Node 22 strips the types, and `npx tsx example.ts`) and
// type-check against the current majors' types, and `npm install` of another package afterwards
// must succeed. On the machine's Node, `npm install @ctrlrun/openai-agents @openai/agents` (the
// version npm picks today) is followed by another `npm install`, which a peer range the pick breaks
// turns into ERESOLVE.
//
// Skipped with the reason printed where the registry or Node 22's package cannot be reached;
// under CI=true that is a failure.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installNode, type OtherNode } from '../../scripts/other-node.js';
import { packPackages, run, withInternalDependencies, type Packed, type Ran } from '../../scripts/pack-local.js';
import { ROOT } from '../../scripts/packages.js';
import { scaled } from '../support/load.js';
import { adapterReadme, splitSpec } from './adapter-readme.js';

const ADAPTERS = ['ai-sdk', 'openai-agents', 'langgraph'] as const;
const readmes = ADAPTERS.map((dir) => ({ dir, ...adapterReadme(readFileSync(join(ROOT, 'packages', dir, 'README.md'), 'utf8'), `packages/${dir}/README.md`) }));
const peerRanges = Object.fromEntries(
  ADAPTERS.map((dir) => [
    dir,
    (JSON.parse(readFileSync(join(ROOT, 'packages', dir, 'package.json'), 'utf8')) as { peerDependencies: Record<string, string> }).peerDependencies,
  ]),
);

const quiet = { npm_config_yes: 'false', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
const shown = (r: Ran) => `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;

const work = mkdtempSync(join(tmpdir(), 'ctrlrun-current-majors-'));
/** Node 22 from the registry, or why not. */
const node22: OtherNode | string = await installNode(22, join(work, 'node22'), scaled(600_000)).catch((e: Error) => e.message.split('\n')[0]!.slice(0, 300));
const unavailable = typeof node22 === 'string' ? `Node 22 could not be installed from the npm registry: ${node22}` : null;
if (unavailable && process.env['CI']) throw new Error(`CI: the current-majors adapter test needs Node 22: ${unavailable}`);
if (unavailable) console.warn(`[current-majors] skipped: ${unavailable}`);

/** A command with Node 22 first on PATH: `node`, `npm` and `npx` (npm's own script) run on it. */
function on22(command: string, args: readonly string[], cwd: string, timeoutMs: number): Promise<Ran> {
  const bin = dirname((node22 as OtherNode).bin);
  return run(command, args, { cwd, env: { ...quiet, PATH: `${bin}${delimiter}${process.env['PATH'] ?? ''}` }, timeoutMs });
}

/** The package name of an install-line word, its version pin dropped (`ai@6` → `ai`). */
const unpinned = (spec: string) => splitSpec(spec).name;

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
}, scaled(120_000));

describe.skipIf(unavailable !== null)(`the adapters on the current framework majors, under Node 22${unavailable ? ` — skipped: ${unavailable}` : ''}`, () => {
  const app = join(work, 'app');
  const step = scaled(120_000);
  let packed: Packed[] = [];

  beforeAll(async () => {
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), '{"type":"module"}\n');
    const words = readmes.flatMap((r) => r.install);
    const ours = [...new Set(words.filter((w) => w.startsWith('@ctrlrun/')))];
    packed = await packPackages(join(work, 'tarballs'), withInternalDependencies(ours));
    const theirs = [...new Set(words.filter((w) => !w.startsWith('@ctrlrun/')).map(unpinned))];
    // tsx for `npx tsx example.ts`, Node's types for the type check (the frameworks' types use them).
    const specs = [...packed.map((p) => p.file), ...theirs, 'tsx', '@types/node@22'];
    const v = await on22('node', ['--version'], app, step);
    expect(v.stdout.trim()).toBe((node22 as OtherNode).version);
    console.log(`[current-majors] on Node ${v.stdout.trim()}: npm install ${specs.map((s) => s.replace(`${work}/`, '')).join(' ')}`);
    const installed = await on22('npm', ['install', '--prefer-online', ...specs], app, scaled(900_000));
    expect(installed.code, shown(installed)).toBe(0);
    expect(installed.stderr, 'a peer range the current versions break').not.toMatch(/ERESOLVE|peer dep/i);
  }, scaled(1_200_000));

  it(
    'the current majors are installed (ai 7 or later, @openai/agents 0.20 or later) and every peer range is satisfied (npm ls)',
    async () => {
      const version = (name: string) => (JSON.parse(readFileSync(join(app, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
      const got = Object.fromEntries(['ai', '@openai/agents', '@langchain/langgraph', '@langchain/core'].map((n) => [n, version(n)]));
      console.log(
        `[current-majors] installed: ${Object.entries(got)
          .map(([n, x]) => `${n}@${x}`)
          .join(' ')}; peer ranges: ${JSON.stringify(peerRanges)}`,
      );
      expect(Number(got['ai']!.split('.')[0])).toBeGreaterThanOrEqual(7);
      expect(Number(got['@openai/agents']!.split('.')[1])).toBeGreaterThanOrEqual(20);
      const ls = await on22('npm', ['ls', '--all'], app, step);
      expect(ls.code, shown(ls)).toBe(0);
      expect(ls.stdout, 'an invalid or missing (not optional) dependency').not.toMatch(/invalid|UNMET (?!OPTIONAL)/);
    },
    step,
  );

  for (const readme of readmes) {
    it(
      `packages/${readme.dir}/README.md: the example prints what the README says (node example.ts and npx tsx example.ts) and type-checks`,
      async () => {
        const dir = join(app, readme.dir);
        mkdirSync(dir);
        writeFileSync(join(dir, 'example.ts'), readme.example);
        for (const [command, args] of [
          ['node', ['example.ts']],
          ['npx', ['tsx', 'example.ts']],
        ] as const) {
          const r = await on22(command, args, dir, step);
          expect(r.code, `${command} ${args.join(' ')}\n${shown(r)}`).toBe(0);
          expect(r.stdout, `${command} ${args.join(' ')}`).toBe(readme.prints);
        }
        // Our declarations against the current majors' (skipLibCheck off: theirs are checked too).
        const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
        const flags = ['--noEmit', '--strict', '--module', 'nodenext', '--target', 'es2022', '--skipLibCheck', 'false'];
        const checked = await on22('node', [tsc, ...flags, 'example.ts'], dir, step);
        expect(checked.code, `tsc ${flags.join(' ')} example.ts\n${shown(checked)}`).toBe(0);
      },
      step * 3,
    );
  }

  it(
    'npm install of another package afterwards succeeds (no ERESOLVE)',
    async () => {
      const r = await on22('npm', ['install', '--prefer-offline', 'ms'], app, scaled(600_000));
      expect(r.code, shown(r)).toBe(0);
      expect(r.stderr).not.toContain('ERESOLVE');
    },
    scaled(600_000),
  );

  it(
    "on the machine's Node: npm install @ctrlrun/openai-agents @openai/agents, then npm install of another package, with no ERESOLVE",
    async () => {
      const dir = join(work, 'agents-unpinned');
      mkdirSync(dir);
      writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n');
      const ours = withInternalDependencies(['openai-agents']).map((p) => packed.find((x) => x.name === p.name)!.file);
      const first = await run('npm', ['install', '--prefer-offline', ...ours, '@openai/agents'], { cwd: dir, env: quiet, timeoutMs: scaled(900_000) });
      expect(first.code, shown(first)).toBe(0);
      expect(first.stderr).not.toMatch(/ERESOLVE|peer dep/i);
      const second = await run('npm', ['install', '--prefer-offline', 'ms'], { cwd: dir, env: quiet, timeoutMs: scaled(600_000) });
      expect(second.code, shown(second)).toBe(0);
      expect(second.stderr).not.toContain('ERESOLVE');
    },
    scaled(1_500_000),
  );
});
