// The three adapter READMEs' examples, run as a reader runs them (issue 35): the @ctrlrun packages
// of each README's install line are packed (scripts/pack-local.ts's packPackages, as
// `npm run pack:local` packs them) and installed from the tarballs into an empty folder whose
// package.json is `{"type":"module"}`, with the rest of each install line from the npm registry
// (one install for the three: a version a README names is taken as the repository's
// package-lock has it when that satisfies it, so the npm cache serves it and it runs on Node 20).
// Each example is copied verbatim into `example.ts` and run with `npx tsx example.ts`, as its
// README says (and `node example.ts` too where this Node strips types); its output must be what the
// README says it prints. Afterwards `npm install` of another package must succeed: a peer range
// the install line's versions break is an ERESOLVE there, or a warning here.
//
// Offline, the suite is skipped with the reason printed; under CI=true that is a failure.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packPackages, run, withInternalDependencies, type Ran } from '../../scripts/pack-local.js';
import { ROOT } from '../../scripts/packages.js';
import { scaled } from '../support/load.js';
import { adapterReadme, splitSpec } from './adapter-readme.js';

const ADAPTERS = ['ai-sdk', 'openai-agents', 'langgraph'] as const;
const readmes = ADAPTERS.map((dir) => ({ dir, ...adapterReadme(readFileSync(join(ROOT, 'packages', dir, 'README.md'), 'utf8'), `packages/${dir}/README.md`) }));

const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
/** A registry spec as installed here: the lock's version when it satisfies what is written (`ai@6` → `ai@6.0.326`), else as written. */
function pinned(spec: string): string {
  const { name, range } = splitSpec(spec);
  const locked = lock.packages[`node_modules/${name}`]?.version;
  if (locked === undefined) return spec;
  if (range === undefined || range === locked || locked.startsWith(`${range}.`)) return `${name}@${locked}`;
  return spec;
}

/** npx never fetches what is not installed (run() keeps npm run's and vitest's variables out). */
const quiet = { npm_config_yes: 'false', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
const sh = (command: string, args: readonly string[], cwd: string, timeoutMs: number): Promise<Ran> => run(command, args, { cwd, env: quiet, timeoutMs });
const shown = (r: Ran) => `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;

const ping = await sh('npm', ['ping'], tmpdir(), scaled(60_000)).catch((e: Error) => ({ code: null, stdout: '', stderr: e.message }));
const offline = ping.code !== 0 ? `npm cannot reach the registry (npm ping: ${(ping.stderr.trim().split('\n').at(-1) ?? '').slice(0, 200)})` : null;
if (offline && process.env['CI']) throw new Error(`CI: the adapter README test needs the npm registry: ${offline}`);
if (offline) console.warn(`[adapter-readmes] skipped: ${offline}`);

/** Node ≥ 22.18 and ≥ 23.6 run a .ts file by stripping its types. */
const stripsTypes = Boolean((process.features as { typescript?: unknown }).typescript);

describe.skipIf(offline !== null)(
  `the adapter READMEs' examples, from the packed tarballs in an empty folder${offline ? ` — skipped: ${offline}` : ''}`,
  () => {
    let work = '';
    let app = '';
    const step = scaled(120_000);

    beforeAll(async () => {
      work = mkdtempSync(join(tmpdir(), 'ctrlrun-adapter-readmes-'));
      app = join(work, 'app');
      mkdirSync(app);
      writeFileSync(join(app, 'package.json'), '{"type":"module"}\n');
      const words = readmes.flatMap((r) => r.install);
      const ours = [...new Set(words.filter((w) => w.startsWith('@ctrlrun/')))];
      const packed = await packPackages(join(work, 'tarballs'), withInternalDependencies(ours));
      const theirs = [...new Set(words.filter((w) => !w.startsWith('@ctrlrun/')).map(pinned))];
      // tsx, for `npx tsx example.ts` (npx would otherwise ask to fetch it).
      const specs = [...packed.map((p) => p.file), ...theirs, pinned('tsx')];
      console.log(`[adapter-readmes] npm install ${specs.map((s) => s.replace(`${work}/`, '')).join(' ')}`);
      const started = Date.now();
      const installed = await sh('npm', ['install', '--prefer-offline', ...specs], app, scaled(900_000));
      expect(installed.code, shown(installed)).toBe(0);
      expect(installed.stderr, 'a peer range the install line breaks').not.toContain('ERESOLVE');
      console.log(`[adapter-readmes] installed in ${Math.round((Date.now() - started) / 1000)} s`);
    }, scaled(1_200_000));

    afterAll(async () => {
      if (work) await rm(work, { recursive: true, force: true });
    }, scaled(120_000));

    for (const readme of readmes) {
      it(
        `packages/${readme.dir}/README.md: the example, copied into example.ts, prints what the README says (npx tsx example.ts)`,
        async () => {
          const dir = join(app, readme.dir);
          mkdirSync(dir);
          writeFileSync(join(dir, 'example.ts'), readme.example);
          const r = await sh('npx', ['tsx', 'example.ts'], dir, step);
          expect(r.code, shown(r)).toBe(0);
          expect(r.stdout).toBe(readme.prints);
          if (stripsTypes) {
            const n = await sh(process.execPath, ['example.ts'], dir, step);
            expect(n.code, `node example.ts\n${shown(n)}`).toBe(0);
            expect(n.stdout).toBe(readme.prints);
          } else console.log(`[adapter-readmes] node ${process.version} does not strip types: node example.ts not tried`);
        },
        step * 2,
      );
    }

    it(
      'without "type": "module" it stops at top-level await, as the READMEs warn',
      async () => {
        const dir = join(app, 'not-a-module');
        mkdirSync(dir);
        writeFileSync(join(dir, 'package.json'), '{}\n');
        writeFileSync(join(dir, 'example.ts'), readmes[0]!.example);
        const r = await sh('npx', ['tsx', 'example.ts'], dir, step);
        expect(r.code, shown(r)).not.toBe(0);
        expect(r.stderr).toContain('Top-level await is currently not supported with the "cjs" output format');
      },
      step,
    );

    it(
      'npm install of another package afterwards succeeds (no ERESOLVE)',
      async () => {
        const r = await sh('npm', ['install', '--prefer-offline', pinned('ms')], app, scaled(600_000));
        expect(r.code, shown(r)).toBe(0);
        expect(r.stderr).not.toContain('ERESOLVE');
        const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
        expect(Object.keys(manifest.dependencies)).toContain('ms');
      },
      scaled(600_000),
    );
  },
);
