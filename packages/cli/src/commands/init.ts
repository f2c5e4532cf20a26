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
    out('next: edit the policy (unknown actions are denied), then wrap an action with protect(fn, { control, name });');
    out("      a pending approval is answered with 'ctrlrun approve <request_id>'.");
    return 0;
  },
};
