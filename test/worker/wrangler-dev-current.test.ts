/**
 * examples/cloudflare/wrangler.toml under `wrangler dev` with today's wrangler (CURRENT_WRANGLER,
 * which refuses Node 20) on Node 22 or later: the machine's Node when it is recent enough, else
 * Node 22 from the npm registry. Both installed at test time into a temp folder (wrangler-current.ts);
 * the scenario is wrangler-dev.case.ts's, the one wrangler-dev.test.ts runs with the 4.86 dev
 * dependency. Skipped with the reason where the registry cannot be reached; under CI=true that is a
 * failure.
 */
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { scaled } from '../support/load.js';
import { wranglerDevSuite } from './wrangler-dev.case.js';
import { currentWrangler } from './wrangler-current.js';

const work = mkdtempSync(join(tmpdir(), 'ctrlrun-wrangler-current-'));
const target = await currentWrangler(work, scaled(600_000)).catch((e: Error) => {
  const why = `today's wrangler could not be installed: ${e.message.split('\n')[0]!.slice(0, 300)}`;
  if (process.env['CI']) throw new Error(`CI: ${why}`);
  return why;
});

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
}, scaled(120_000));

wranglerDevSuite(target);
