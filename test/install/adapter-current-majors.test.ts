// The adapters on today's framework versions (issue 35): `ai` 7 and the current `@openai/agents`
// need Node 22, so Node 22 and Node 24 are installed from the npm registry (scripts/other-node.ts,
// both at once) and everything here runs under each of them. The @ctrlrun packages of each adapter
// README's install line are packed once and installed from the tarballs, under each Node (the two
// installs side by side, from one npm cache), into an empty `{"type":"module"}` folder together with
// the README's other packages *without* the versions the README pins for Node 20 (`ai@6` → `ai`),
// which is what `npm install ai` gives a reader today: that install must succeed with no peer
// conflict, `npm ls` must find every peer range satisfied, each README example must print what the
// README says (`node example.ts`, Node 22.18+ strips the types, and `npx tsx example.ts`) and
// type-check against the current majors' types, and `npm install` of another package afterwards
// must succeed. On the machine's Node, `npm install @ctrlrun/openai-agents @openai/agents` (the
// version npm picks today) is followed by another `npm install`, which a peer range the pick breaks
// turns into ERESOLVE.
//
// Node 20 runs the same examples with the versions the READMEs pin for it in
// adapter-readmes.test.ts. Skipped with the reason printed where the registry or a Node package
// cannot be reached; under CI=true that is a failure.
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
const MAJORS = [22, 24] as const;
/** Each Node from the registry (installed side by side), or why not. */
const nodes: (OtherNode | string)[] = await Promise.all(
  MAJORS.map((major) => installNode(major, join(work, `node${major}`), scaled(600_000)).catch((e: Error) => e.message.split('\n')[0]!.slice(0, 300))),
);
const failed = MAJORS.flatMap((major, i) => (typeof nodes[i] === 'string' ? [`Node ${major}: ${nodes[i]}`] : []));
const unavailable = failed.length > 0 ? `could not install from the npm registry: ${failed.join('; ')}` : null;
if (unavailable && process.env['CI']) throw new Error(`CI: the current-majors adapter test needs Node 22 and 24: ${unavailable}`);
if (unavailable) console.warn(`[current-majors] skipped: ${unavailable}`);

/** A command with `node` first on PATH: `node`, `npm` and `npx` (npm's own script) run on it. */
function on(node: OtherNode, command: string, args: readonly string[], cwd: string, timeoutMs: number): Promise<Ran> {
  return run(command, args, { cwd, env: { ...quiet, PATH: `${dirname(node.bin)}${delimiter}${process.env['PATH'] ?? ''}` }, timeoutMs });
}

/** The package name of an install-line word, its version pin dropped (`ai@6` → `ai`). */
const unpinned = (spec: string) => splitSpec(spec).name;

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
}, scaled(120_000));

describe.skipIf(unavailable !== null)(
  `the adapters on the current framework majors, under Node 22 and 24${unavailable ? ` — skipped: ${unavailable}` : ''}`,
  () => {
    const step = scaled(120_000);
    /** Per Node: its binary and the folder the README's packages were installed into under it. */
    const targets = MAJORS.map((major, i) => ({ major, node: nodes[i] as OtherNode, app: join(work, `app${major}`) }));
    let packed: Packed[] = [];

    beforeAll(async () => {
      const words = readmes.flatMap((r) => r.install);
      const ours = [...new Set(words.filter((w) => w.startsWith('@ctrlrun/')))];
      packed = await packPackages(join(work, 'tarballs'), withInternalDependencies(ours));
      const theirs = [...new Set(words.filter((w) => !w.startsWith('@ctrlrun/')).map(unpinned))];
      // One install per Node, side by side (the npm cache is shared; npm runs on that Node).
      await Promise.all(
        targets.map(async ({ major, node, app }) => {
          mkdirSync(app);
          writeFileSync(join(app, 'package.json'), '{"type":"module"}\n');
          // tsx for `npx tsx example.ts`, that Node's types for the type check (the frameworks' types use them).
          const specs = [...packed.map((p) => p.file), ...theirs, 'tsx', `@types/node@${major}`];
          const v = await on(node, 'node', ['--version'], app, step);
          expect(v.stdout.trim()).toBe(node.version);
          const started = Date.now();
          const installed = await on(node, 'npm', ['install', '--prefer-online', ...specs], app, scaled(900_000));
          expect(installed.code, `Node ${node.version}: ${shown(installed)}`).toBe(0);
          expect(installed.stderr, `Node ${node.version}: a peer range the current versions break`).not.toMatch(/ERESOLVE|peer dep/i);
          console.log(
            `[current-majors] on Node ${node.version}: npm install ${specs.map((s) => s.replace(`${work}/`, '')).join(' ')} (${Math.round((Date.now() - started) / 1000)} s)`,
          );
        }),
      );
    }, scaled(1_200_000));

    // The two Nodes' checks run side by side (each one's steps in order: the later npm install
    // changes node_modules): their child processes keep both cores busy, so Node 24 adds little to
    // Node 22's time. Each Node's examples are type-checked in one tsc program (the frameworks'
    // declarations are read once, not once per example).
    for (const target of targets) {
      it.concurrent(
        `Node ${target.major}: the current majors installed (ai 7+, @openai/agents 0.20+) with every peer range satisfied (npm ls); each adapter README's example prints what its README says (node example.ts and npx tsx example.ts) and type-checks; a later npm install succeeds`,
        async () => {
          const { node, app } = target;
          const version = (name: string) => (JSON.parse(readFileSync(join(app, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
          const got = Object.fromEntries(['ai', '@openai/agents', '@langchain/langgraph', '@langchain/core'].map((n) => [n, version(n)]));
          console.log(
            `[current-majors] Node ${node.version} installed: ${Object.entries(got)
              .map(([n, x]) => `${n}@${x}`)
              .join(' ')}; peer ranges: ${JSON.stringify(peerRanges)}`,
          );
          expect(Number(got['ai']!.split('.')[0])).toBeGreaterThanOrEqual(7);
          expect(Number(got['@openai/agents']!.split('.')[1])).toBeGreaterThanOrEqual(20);
          const ls = await on(node, 'npm', ['ls', '--all'], app, step);
          expect(ls.code, shown(ls)).toBe(0);
          expect(ls.stdout, 'an invalid or missing (not optional) dependency').not.toMatch(/invalid|UNMET (?!OPTIONAL)/);

          const examples: string[] = [];
          for (const readme of readmes) {
            const dir = join(app, readme.dir);
            mkdirSync(dir);
            writeFileSync(join(dir, 'example.ts'), readme.example);
            examples.push(join(readme.dir, 'example.ts'));
            for (const [command, args] of [
              ['node', ['example.ts']],
              ['npx', ['tsx', 'example.ts']],
            ] as const) {
              const r = await on(node, command, args, dir, step);
              const what = `Node ${node.version}, packages/${readme.dir}/README.md: ${command} ${args.join(' ')}`;
              expect(r.code, `${what}\n${shown(r)}`).toBe(0);
              expect(r.stdout, what).toBe(readme.prints);
            }
          }
          // Our declarations against the current majors' (skipLibCheck off: theirs are checked too).
          const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
          const flags = ['--noEmit', '--strict', '--module', 'nodenext', '--target', 'es2022', '--skipLibCheck', 'false'];
          const checked = await on(node, 'node', [tsc, ...flags, ...examples], app, step * 2);
          expect(checked.code, `Node ${node.version}: tsc ${flags.join(' ')} ${examples.join(' ')}\n${shown(checked)}`).toBe(0);

          const later = await on(node, 'npm', ['install', '--prefer-offline', 'ms'], app, scaled(600_000));
          expect(later.code, `Node ${node.version}: npm install ms\n${shown(later)}`).toBe(0);
          expect(later.stderr).not.toContain('ERESOLVE');
        },
        scaled(1_500_000),
      );
    }

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
  },
);
