/**
 * examples/cloudflare/wrangler.toml under `wrangler dev` with the `wrangler` dev dependency (4.86.0,
 * the last 4.x that runs on Node 20) on the machine's Node (the scenario: wrangler-dev.case.ts).
 * On a Node that today's wrangler runs on (22.12 and later), wrangler-dev-current.test.ts runs the
 * same scenario with today's wrangler instead, and this one is skipped saying so.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { root } from './bundle.js';
import { DEV_WRANGLER, wranglerDevSuite } from './wrangler-dev.case.js';
import { runsCurrentWrangler } from './wrangler-current.js';

function target() {
  if (runsCurrentWrangler(process.version)) return `Node ${process.version} runs today's wrangler: wrangler-dev-current.test.ts runs this scenario with it`;
  if (!existsSync(DEV_WRANGLER)) {
    const missing = 'wrangler is not installed (it is a dev dependency: npm ci)';
    if (process.env['CI']) throw new Error(`CI: ${missing}`);
    return missing;
  }
  const { version } = JSON.parse(readFileSync(join(root, 'node_modules', 'wrangler', 'package.json'), 'utf8')) as { version: string };
  return { label: `wrangler ${version} on Node ${process.version}`, node: process.execPath, wrangler: DEV_WRANGLER };
}

wranglerDevSuite(target());
