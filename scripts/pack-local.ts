/**
 * The packages before they are published: `npm run pack:local -- <project> [package …] [--print]`
 * packs the publishable workspaces with `npm pack` (each one's prepack builds it, as a publish
 * would) into `<project>/ctrlrun-packages/`, then runs `npm install <the tarballs>` in
 * `<project>`, so its package.json names them by path (`file:ctrlrun-packages/…tgz`) and a later
 * `npm install` there still finds them. With package names (`kernel`, `store-sqljs`,
 * `@ctrlrun/ai-sdk`…) only those are installed, with the @ctrlrun packages they depend on (their
 * exact versions are not on the registry yet); without, all of them. `--print` packs and prints
 * the install line without running it. A project without a package.json gets
 * `{ "private": true, "type": "module" }` (the READMEs' examples are ES modules).
 *
 * The test/install tests pack with {@link packPackages} too.
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { publishablePackages, ROOT, type PackageInfo } from './packages.js';

/** The folder of the project the tarballs are packed into. */
export const PACK_DIR = 'ctrlrun-packages';

/** The workspaces that are private (never packed): they run from a clone only. */
export const CLONE_ONLY: Readonly<Record<string, string>> = {
  '@ctrlrun/worker': 'the HTTP gateway and its operator inbox: npm run worker',
  '@ctrlrun/playground': 'the Try-it page and the <ctrlrun-try-it> widget: npm run playground, npm run build:widget',
};

/**
 * The publishable packages named (a folder under packages/ or a full name), with every @ctrlrun
 * package they depend on, sorted by folder; all of them when none is named. An unknown name
 * throws, naming the ones there are.
 */
export function withInternalDependencies(names: readonly string[], all: readonly PackageInfo[] = publishablePackages()): PackageInfo[] {
  if (names.length === 0) return [...all];
  const byName = new Map(all.map((p) => [p.name, p]));
  const wanted = new Set<string>();
  const add = (p: PackageInfo) => {
    if (wanted.has(p.name)) return;
    wanted.add(p.name);
    for (const field of ['dependencies', 'peerDependencies'] as const) {
      const deps = (p.manifest[field] ?? {}) as Record<string, string>;
      for (const dep of Object.keys(deps)) {
        const internal = byName.get(dep);
        if (internal) add(internal);
      }
    }
  };
  for (const name of names) {
    const p = all.find((x) => x.name === name || x.dir === name || x.name === `@ctrlrun/${name}`);
    if (p) {
      add(p);
      continue;
    }
    const full = name.startsWith('@ctrlrun/') ? name : `@ctrlrun/${name}`;
    const cloneOnly = CLONE_ONLY[full] !== undefined ? ` (${full} is private, ${CLONE_ONLY[full]}, in a clone only)` : '';
    throw new Error(`no publishable package is called ${JSON.stringify(name)}${cloneOnly}; there are: ${all.map((x) => x.dir).join(', ')}`);
  }
  return all.filter((p) => wanted.has(p.name));
}

/** The environment of an npm child: nothing of the `npm run` that started this script leaks in. */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(npm_package_|npm_lifecycle_|npm_config_(prefix|local_prefix|workspaces?|include_workspace_root)$|init_cwd$|node_options$|vitest)/i.test(k)) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end, its output collected (or shown, with `inherit`); past `timeoutMs` it is killed and the promise rejects. */
export function run(
  command: string,
  args: readonly string[],
  options: { cwd: string; inherit?: boolean; env?: Record<string, string>; timeoutMs?: number },
): Promise<Ran> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: childEnv(options.env),
      stdio: options.inherit ? 'inherit' : ['ignore', 'pipe', 'pipe'],
      shell: process.platform === 'win32',
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => void (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => void (stderr += d.toString()));
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            child.kill('SIGKILL');
            fail(
              new Error(`${command} ${args.join(' ')} did not finish within ${Math.round(options.timeoutMs! / 1000)} s\nstdout: ${stdout}\nstderr: ${stderr}`),
            );
          }, options.timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      fail(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

export interface Packed {
  readonly name: string;
  readonly version: string;
  /** The tarball's absolute path. */
  readonly file: string;
  /** Its size, packed and unpacked, in bytes. */
  readonly size: number;
  readonly unpackedSize: number;
}

/** `npm pack` of the given packages (their prepack builds them) into `dest`, created if missing. */
export async function packPackages(dest: string, packages: readonly PackageInfo[]): Promise<Packed[]> {
  mkdirSync(dest, { recursive: true });
  const r = await run('npm', ['pack', '--json', '--pack-destination', dest, ...packages.flatMap((p) => ['-w', `packages/${p.dir}`])], { cwd: ROOT });
  if (r.code !== 0) throw new Error(`npm pack failed (exit ${r.code}):\n${r.stderr.trim()}`);
  // npm prints the prepack builds' output before the JSON.
  const json = r.stdout.slice(r.stdout.search(/^\[/m));
  const results = JSON.parse(json) as { name: string; version: string; filename: string; size: number; unpackedSize: number }[];
  const missing = packages.filter((p) => !results.some((x) => x.name === p.name));
  if (missing.length > 0) throw new Error(`npm pack made no tarball for ${missing.map((p) => p.name).join(', ')}`);
  return results.map((x) => ({ name: x.name, version: x.version, file: join(dest, x.filename), size: x.size, unpackedSize: x.unpackedSize }));
}

/** A shell word as the user would type it (quoted only when it must be). */
const word = (s: string) => (/^[\w@./:+=-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

async function main(argv: readonly string[]): Promise<number> {
  const print = argv.includes('--print');
  const [target, ...names] = argv.filter((a) => a !== '--print');
  if (target === undefined || target.startsWith('-')) {
    console.error('usage: npm run pack:local -- <project folder> [package …] [--print]');
    console.error(
      `  packages: ${publishablePackages()
        .map((p) => p.dir)
        .join(', ')} (default: all; the @ctrlrun packages they need come with them)`,
    );
    return 2;
  }
  const project = resolve(process.env['INIT_CWD'] ?? process.cwd(), target);
  if (!existsSync(project) || !statSync(project).isDirectory()) {
    console.error(`${project}: no such folder (make it first: mkdir ${word(target)})`);
    return 2;
  }
  const inside = relative(ROOT, project);
  if (inside === '' || (!inside.startsWith('..') && !inside.startsWith(sep) && !/^[a-z]:/i.test(inside))) {
    console.error(`${project} is inside this clone (${ROOT}): install into a project of your own, outside it`);
    return 2;
  }
  let packages: PackageInfo[];
  try {
    packages = withInternalDependencies(names);
  } catch (e) {
    console.error((e as Error).message);
    return 2;
  }
  const manifest = join(project, 'package.json');
  if (!existsSync(manifest)) {
    writeFileSync(manifest, `${JSON.stringify({ private: true, type: 'module' }, null, 2)}\n`);
    console.log(`${manifest}: written ({ "private": true, "type": "module" })`);
  } else if ((JSON.parse(readFileSync(manifest, 'utf8')) as { type?: unknown }).type !== 'module') {
    console.log(`note: ${manifest} does not say "type": "module"; the READMEs' examples (top-level await) need an ES module (.mjs, .mts, or that field)`);
  }
  console.log(`packing ${packages.map((p) => p.name).join(', ')} (each is built first)…`);
  const packed = await packPackages(join(project, PACK_DIR), packages);
  for (const p of packed) console.log(`  ${relative(project, p.file)}  ${(p.size / 1024).toFixed(1)} KiB`);
  const args = ['install', ...packed.map((p) => `./${relative(project, p.file).split(sep).join('/')}`)];
  // npm installs a missing peer at its newest: @openai/agents 0.15 and later need Node 22 (its
  // openai dependency says so), so on Node 20 the newest that runs there is asked for by name.
  const declared = JSON.parse(readFileSync(manifest, 'utf8')) as Record<string, Record<string, string> | undefined>;
  const hasAgents = ['dependencies', 'devDependencies', 'peerDependencies'].some((f) => declared[f]?.['@openai/agents'] !== undefined);
  if (packages.some((p) => p.name === '@ctrlrun/openai-agents') && !hasAgents && Number(process.versions.node.split('.')[0]) < 22) {
    args.push('@openai/agents@0.14');
    console.log(`@ctrlrun/openai-agents: on Node ${process.versions.node}, @openai/agents@0.14 (the newest release that runs on Node 20) is installed with it`);
  }
  console.log(`\nin ${project}:\n  npm ${args.map(word).join(' ')}\n`);
  if (print) return 0;
  const r = await run('npm', args, { cwd: project, inherit: true });
  if (r.code !== 0) console.error(`npm install exited ${r.code}`);
  return r.code ?? 1;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (e: unknown) => {
      console.error(e instanceof Error ? e.message : String(e));
      process.exitCode = 1;
    },
  );
}
