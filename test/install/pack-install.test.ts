// Installable as a product: every publishable package is packed with `npm pack` (its `prepack`
// builds it), the tarballs are installed into an empty directory with plain `npm install`, and
// what a new user would do runs from that install, never from the workspace: the README's first
// example, `npx ctrlrun init` and every command it prints as a next step, `npx ctrlrun demo` and
// the command it prints to read the evidence, `npx ctrlrun verify`, the command-line walkthrough
// (examples/refund.ts on the SQLite file, approve, inspect, receipts --verify-chain), and every
// `exports` entry of every package. Packed and installed sizes are printed.
//
// Third-party dependencies come from the npm registry (the local npm cache first). When npm cannot
// reach the registry the suite is skipped with the reason printed; under CI=true that is a failure.
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishablePackages, ROOT } from '../../scripts/packages.js';
import { scaled } from '../support/load.js';
import { firstReadmeExample } from './readme-example.js';

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of every child: nothing of the npm run, vitest or ctrlrun that started the test leaks in. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(npm_|ctrlrun_|vitest|node_options$|init_cwd$)/i.test(k)) continue;
    env[k] = v;
  }
  // npx never fetches a package called `ctrlrun` from the registry: the installed bin or nothing.
  return { ...env, npm_config_yes: 'false', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false', ...extra };
}

function sh(command: string, args: readonly string[], options: { cwd: string; timeoutMs: number; env?: Record<string, string> }): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: cleanEnv(options.env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => void (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => void (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} did not finish within ${Math.round(options.timeoutMs / 1000)} s\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, options.timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs a command line as a README or the CLI prints it (`VAR=value npx ctrlrun …`), split on spaces. */
function asPrinted(line: string, cwd: string, timeoutMs: number): Promise<Ran> {
  const words = line.trim().split(/\s+/);
  const env: Record<string, string> = {};
  while (/^[A-Z_]+=/.test(words[0] ?? '')) {
    const [k, ...v] = words.shift()!.split('=');
    env[k!] = v.join('=');
  }
  return sh(words[0]!, words.slice(1), { cwd, timeoutMs, env });
}

const ok = (r: Ran) => `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;

function duBytes(path: string): number {
  const s = statSync(path, { throwIfNoEntry: false });
  if (!s) return 0;
  if (!s.isDirectory()) return s.size;
  return readdirSync(path).reduce((n, f) => n + duBytes(join(path, f)), 0);
}
const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;

// Is the registry reachable? One `npm ping`, decided before the suite is declared.
const packages = publishablePackages();
const ping = await sh('npm', ['ping'], { cwd: tmpdir(), timeoutMs: scaled(60_000) }).catch((e: Error) => ({ code: null, stdout: '', stderr: e.message }));
const offline = ping.code !== 0 ? `npm cannot reach the registry (npm ping: ${(ping.stderr.trim().split('\n').at(-1) ?? '').slice(0, 200)})` : null;
if (offline && process.env['CI']) throw new Error(`CI: the pack-and-install test needs the npm registry: ${offline}`);
if (offline) console.warn(`[pack-install] skipped: ${offline}`);

describe.skipIf(offline !== null)(`the packed packages, installed into an empty directory${offline ? ` — skipped: ${offline}` : ''}`, () => {
  let work = '';
  let app = '';
  const step = scaled(120_000);

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ctrlrun-install-'));
    const tarballs = join(work, 'tarballs');
    app = join(work, 'app');
    mkdirSync(tarballs);
    mkdirSync(app);
    // `npm pack` runs each package's prepack (its build), as `npm publish` does.
    const packed = await sh('npm', ['pack', '--json', '--pack-destination', tarballs, ...packages.flatMap((p) => ['-w', `packages/${p.dir}`])], {
      cwd: ROOT,
      timeoutMs: scaled(300_000),
    });
    expect(packed.code, ok(packed)).toBe(0);
    const results = JSON.parse(packed.stdout) as { name: string; filename: string; size: number; unpackedSize: number }[];
    expect(results.map((r) => r.name).sort()).toEqual(packages.map((p) => p.name).sort());
    for (const r of results) console.log(`[pack-install] ${r.name}: packed ${kib(r.size)}, unpacked ${kib(r.unpackedSize)}`);
    // Plain npm install of the tarballs into an empty directory (no package.json: npm writes one).
    const files = results.map((r) => join(tarballs, r.filename));
    const started = Date.now();
    const installed = await sh('npm', ['install', '--prefer-offline', ...files], { cwd: app, timeoutMs: scaled(900_000) });
    expect(installed.code, ok(installed)).toBe(0);
    console.log(`[pack-install] npm install of ${files.length} tarballs: ${Math.round((Date.now() - started) / 1000)} s`);
    for (const p of packages) console.log(`[pack-install] ${p.name}: installed ${kib(duBytes(join(app, 'node_modules', p.name)))}`);
    console.log(`[pack-install] node_modules in all (with every dependency and peer npm installed): ${kib(duBytes(join(app, 'node_modules')))}`);
  }, scaled(1_200_000));

  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  }, scaled(120_000));

  it('installed from the tarballs, not linked to the workspace: no sources, no tests', () => {
    for (const p of packages) {
      const dir = join(app, 'node_modules', p.name);
      const real = realpathSync(dir);
      expect(relative(ROOT, real).startsWith('..'), `${p.name} is installed at ${real}`).toBe(true);
      expect(existsSync(join(dir, 'src')), `${p.name} ships src/`).toBe(false);
      expect(existsSync(join(dir, 'test')), `${p.name} ships test/`).toBe(false);
      expect(existsSync(join(dir, 'LICENSE')) && existsSync(join(dir, 'README.md')), `${p.name} ships README.md and LICENSE`).toBe(true);
    }
  });

  it(
    "the README's first example runs from the install and prints what its comments say",
    async () => {
      const example = firstReadmeExample(readFileSync(join(ROOT, 'README.md'), 'utf8'));
      writeFileSync(join(app, 'readme-example.mjs'), example.module);
      const r = await sh(process.execPath, ['readme-example.mjs'], { cwd: app, timeoutMs: step });
      expect(r.code, ok(r)).toBe(0);
      expect(r.stdout.trimEnd().split('\n')).toEqual(example.expected);
    },
    step,
  );

  it(
    'every package README block marked <!-- runs: pack-install --> runs from the install',
    async () => {
      let ran = 0;
      for (const p of packages) {
        const readme = readFileSync(join(app, 'node_modules', p.name, 'README.md'), 'utf8');
        for (const [i, m] of [...readme.matchAll(/<!-- runs: pack-install[^>]*-->\n```(?:ts|js)\n([\s\S]*?)```/g)].entries()) {
          const file = `readme-${p.dir}-${i}.mjs`;
          writeFileSync(join(app, file), m[1]!);
          const r = await sh(process.execPath, [file], { cwd: app, timeoutMs: step });
          expect(r.code, `${p.name} README block ${i + 1}\n${ok(r)}`).toBe(0);
          ran++;
        }
      }
      expect(ran).toBeGreaterThanOrEqual(1);
    },
    step * 4,
  );

  it(
    'every exports entry of every package imports in plain Node (a missing optional peer is the only excuse)',
    async () => {
      const specs = packages.flatMap((p) => {
        const m = p.manifest as { exports: Record<string, unknown>; peerDependenciesMeta?: Record<string, { optional?: boolean }> };
        const optional = Object.entries(m.peerDependenciesMeta ?? {})
          .filter(([, v]) => v.optional === true)
          .map(([k]) => k);
        return Object.keys(m.exports)
          .filter((k) => k !== './package.json')
          .map((k) => ({ spec: k === '.' ? p.name : `${p.name}/${k.slice(2)}`, optional }));
      });
      const script = `const out = {};
      for (const s of ${JSON.stringify(specs.map((s) => s.spec))}) {
        try { out[s] = { exports: Object.keys(await import(s)).length }; } catch (e) { out[s] = { error: String(e?.code ?? '') + ' ' + String(e?.message ?? e) }; }
      }
      console.log(JSON.stringify(out));`;
      const r = await sh(process.execPath, ['--input-type=module', '-e', script], { cwd: app, timeoutMs: step });
      expect(r.code, ok(r)).toBe(0);
      const out = JSON.parse(r.stdout) as Record<string, { exports?: number; error?: string }>;
      for (const { spec, optional } of specs) {
        const got = out[spec]!;
        if (got.error !== undefined) {
          const peer = optional.find((o) => got.error!.includes(`'${o}'`));
          expect(got.error.startsWith('ERR_MODULE_NOT_FOUND') && peer !== undefined, `${spec}: ${got.error}`).toBe(true);
          console.log(`[pack-install] ${spec} needs its optional peer ${peer} (not installed): ${got.error.slice(0, 120)}`);
        } else expect(got.exports, spec).toBeGreaterThan(0);
      }
    },
    step,
  );

  it(
    'npx ctrlrun init, then every command it prints as a next step, as printed',
    async () => {
      const dir = join(app, 'my-agent');
      mkdirSync(dir);
      // npx finds the bin in ../node_modules, as it would in a project with ctrlrun installed.
      const init = await sh('npx', ['ctrlrun', 'init'], { cwd: dir, timeoutMs: step });
      expect(init.code, ok(init)).toBe(0);
      expect(existsSync(join(dir, 'ctrlrun.yaml'))).toBe(true);
      const next = init.stdout
        .split('\n')
        .map((l) => /^\s+(npx ctrlrun [^#<]*?)\s*(#.*)?$/.exec(l)?.[1])
        .filter((c): c is string => c !== undefined);
      expect(next.length, init.stdout).toBeGreaterThanOrEqual(2);
      for (const command of next) {
        const r = await asPrinted(command, dir, step);
        expect(r.code, `${command}\n${ok(r)}`).toBe(0);
      }
    },
    scaled(600_000),
  );

  it(
    'npx ctrlrun demo, then every command it prints, as printed',
    async () => {
      const demo = await sh('npx', ['ctrlrun', 'demo'], { cwd: app, timeoutMs: step });
      expect(demo.code, ok(demo)).toBe(0);
      const read = /^Read them:\s+(.*)$/m.exec(demo.stdout)?.[1];
      expect(read, demo.stdout).toMatch(/^CTRLRUN_STATE=\S+ npx ctrlrun receipts$/);
      const receipts = await asPrinted(read!, app, step);
      expect(receipts.code, ok(receipts)).toBe(0);
      const count = Number(/^Receipts \((\d+)\)/m.exec(demo.stdout)?.[1]);
      expect(receipts.stdout.trim().split('\n')).toHaveLength(count);
      // The commands that answer what it left open (the ambiguous refund, the pending request).
      const answers = demo.stdout
        .split('\n')
        .map((l) => /^\s+((?:[A-Z_]+=\S+ )+npx ctrlrun [^#]*?)\s*(?:#.*)?$/.exec(l)?.[1])
        .filter((c): c is string => c !== undefined);
      expect(answers.length, demo.stdout).toBe(3);
      for (const command of answers) {
        const r = await asPrinted(command, app, step);
        expect(r.code, `${command}\n${ok(r)}`).toBe(0);
      }
    },
    step * 2,
  );

  it(
    'npx ctrlrun verify proves the declared guarantees of the starter policy',
    async () => {
      const dir = join(app, 'verify');
      mkdirSync(dir);
      expect((await sh('npx', ['ctrlrun', 'init'], { cwd: dir, timeoutMs: step })).code).toBe(0);
      const r = await sh('npx', ['ctrlrun', 'verify'], { cwd: dir, timeoutMs: scaled(300_000) });
      expect(r.code, ok(r)).toBe(0);
      expect(r.stdout).toMatch(/^(\d+)\/\1 declared guarantees pass\./m);
    },
    scaled(300_000) + step,
  );

  it(
    'the SQLite driver comes with the CLI; a server store driver is optional and named with its install command when missing',
    async () => {
      const cli = JSON.parse(readFileSync(join(app, 'node_modules', '@ctrlrun', 'cli', 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
      expect(cli.dependencies['better-sqlite3']).toMatch(/^\^12\./);
      expect(existsSync(join(app, 'node_modules', 'better-sqlite3', 'package.json'))).toBe(true);
      if (existsSync(join(app, 'node_modules', 'pg')))
        return void console.warn('[pack-install] pg is installed here (a peer of another package): the missing-driver message is not checked');
      const r = await sh('npx', ['ctrlrun', 'receipts', '--store-url', 'postgresql://ctrlrun@127.0.0.1:1/ctrlrun'], { cwd: app, timeoutMs: step });
      expect(r.code, ok(r)).toBe(1);
      expect(r.stderr).toContain('npm install pg@8');
    },
    step,
  );

  it(
    'the command-line walkthrough on the SQLite file: refund, inspect the request, approve, refund again, receipts --verify-chain',
    async () => {
      const dir = join(app, 'walkthrough');
      mkdirSync(dir);
      expect((await sh('npx', ['ctrlrun', 'init'], { cwd: dir, timeoutMs: step })).code).toBe(0);
      // examples/refund.ts is plain JavaScript in TypeScript's clothes: it runs as a module as it is.
      cpSync(join(ROOT, 'examples', 'refund.ts'), join(dir, 'refund.mjs'));
      const first = await sh(process.execPath, ['refund.mjs'], { cwd: dir, timeoutMs: step });
      expect(first.code, ok(first)).toBe(0);
      const requestId = /ctrlrun approve (apr_[0-9a-f]{32})/.exec(first.stdout)?.[1];
      expect(requestId, first.stdout).toBeDefined();
      const inspected = await sh('npx', ['ctrlrun', 'inspect', requestId!], { cwd: dir, timeoutMs: step });
      expect(inspected.code, ok(inspected)).toBe(0);
      expect(inspected.stdout).toContain(`approval    ${requestId}  pending`);
      const approved = await sh('npx', ['ctrlrun', 'approve', requestId!, '--as', 'dana@example.com'], { cwd: dir, timeoutMs: step });
      expect(approved.code, ok(approved)).toBe(0);
      const second = await sh(process.execPath, ['refund.mjs', requestId!], { cwd: dir, timeoutMs: step });
      expect(second.stdout, ok(second)).toBe('refunded {"id":"re_txn_42","amount":120000}\n');
      const chain = await sh('npx', ['ctrlrun', 'receipts', '--verify-chain'], { cwd: dir, timeoutMs: step });
      expect(chain, ok(chain)).toMatchObject({ code: 0, stdout: 'chain: 1 of 1 receipts verified\nthe chain is intact\n' });
    },
    step * 6,
  );
});
