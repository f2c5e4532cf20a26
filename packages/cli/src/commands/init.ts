/**
 * `ctrlrun init`: writes the starter policy `./ctrlrun.yaml` (the shipped example, byte for byte)
 * and creates `./.ctrlrun/`. An existing policy is never overwritten without `--force`.
 *
 * @module
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EXAMPLE_POLICY_YAML } from '@ctrlrun/kernel';
import type { Command } from '../command.js';
import { POLICY_FILE, STATE_DIR } from '../discovery.js';
import { CliRefusal } from '../errors.js';

/**
 * What `init` prints after writing: each indented `npx ctrlrun …` line without a `<placeholder>`
 * runs as written in the directory init wrote (the pack-and-install test runs every one).
 */
export const NEXT_STEPS: readonly string[] = [
  'next, in this directory:',
  '  npx ctrlrun policy check     # what a missing or mistyped argument would let through (none in the starter)',
  '  npx ctrlrun verify           # prove the declared guarantees against ./ctrlrun.yaml',
  '  npx ctrlrun demo             # five ways an agent action goes wrong, each refused',
  'then edit ctrlrun.yaml (unknown actions are denied) and wrap an action with protect(fn, { control, name }),',
  "control = await fromFile({ principal: { agent: '…' } }) from @ctrlrun/store-node (this policy and store, as the CLI finds them); answer its approval requests with",
  '  npx ctrlrun inspect <request_id>     # what a human would approve',
  '  npx ctrlrun approve <request_id> --as <your name>',
];

export const init: Command = {
  name: 'init',
  summary: 'write the starter policy ./ctrlrun.yaml and create ./.ctrlrun/',
  positionals: [],
  options: {
    force: { type: 'boolean', help: 'overwrite an existing ctrlrun.yaml' },
  },
  async run({ io, values, out }) {
    const path = join(io.cwd, POLICY_FILE);
    if (existsSync(path) && values['force'] !== true) {
      throw new CliRefusal(`${path} already exists and was not overwritten (use --force to replace it)`);
    }
    writeFileSync(path, EXAMPLE_POLICY_YAML);
    const dir = join(io.cwd, STATE_DIR);
    mkdirSync(dir, { recursive: true });
    out(`wrote ${path}`);
    out(`created ${dir}/`);
    for (const line of NEXT_STEPS) out(line);
    return 0;
  },
};
