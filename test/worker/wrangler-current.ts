/**
 * Today's wrangler, for the `wrangler dev` test on a Node it runs on. The `wrangler` dev dependency
 * stays at 4.86.0, the last 4.x that runs on Node 20; the wrangler of today needs Node 22.12 or
 * later (its `engines`). {@link currentWrangler} installs that version with npm into a folder of
 * its own outside the clone, and, when the machine's Node is older, Node 22 from the npm registry
 * beside it (scripts/other-node.ts), and says which Node runs which wrangler.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { installNode } from '../../scripts/other-node.js';
import { run } from '../../scripts/pack-local.js';
import type { WranglerTarget } from './wrangler-dev.case.js';

/** The wrangler of today (4.164.0 was published the week this was written); raise it as wrangler moves. */
export const CURRENT_WRANGLER = '4.164.0';
/** Its `engines.node`: `>=22.12.0`. */
const NEEDS: readonly [number, number] = [22, 12];

/** Whether a Node version (`v22.23.5`) is one the current wrangler runs on. */
export function runsCurrentWrangler(version: string): boolean {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number) as [number, number];
  return major > NEEDS[0] || (major === NEEDS[0] && minor >= NEEDS[1]);
}

/**
 * `wrangler@CURRENT_WRANGLER` installed under `folder` and the Node to run it on: the machine's if
 * it is recent enough, else Node 22 installed from the registry into `folder`. Throws naming the
 * step that failed (the registry unreachable, npm's last error line).
 */
export async function currentWrangler(folder: string, timeoutMs: number): Promise<WranglerTarget> {
  mkdirSync(folder, { recursive: true });
  const node = runsCurrentWrangler(process.version)
    ? { bin: process.execPath, version: process.version }
    : await installNode(NEEDS[0], join(folder, 'node'), timeoutMs);
  const prefix = join(folder, 'wrangler');
  const args = ['install', '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--prefer-offline', '--prefix', prefix, `wrangler@${CURRENT_WRANGLER}`];
  // npm on that Node: wrangler's and workerd's install scripts run where wrangler will.
  const env = { npm_config_update_notifier: 'false', PATH: `${dirname(node.bin)}${delimiter}${process.env['PATH'] ?? ''}` };
  mkdirSync(prefix, { recursive: true });
  const r = await run('npm', args, { cwd: prefix, env, timeoutMs });
  if (r.code !== 0) throw new Error(`npm ${args.join(' ')} failed (exit ${r.code}): ${r.stderr.trim().split('\n').at(-1)?.slice(0, 300) ?? ''}`);
  const home = join(prefix, 'node_modules', 'wrangler');
  const wrangler = join(home, 'bin', 'wrangler.js');
  if (!existsSync(wrangler)) throw new Error(`npm installed wrangler@${CURRENT_WRANGLER} but ${wrangler} is missing`);
  const { version } = JSON.parse(readFileSync(join(home, 'package.json'), 'utf8')) as { version: string };
  return { label: `wrangler ${version} on Node ${node.version}`, node: node.bin, wrangler };
}
