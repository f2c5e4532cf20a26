#!/usr/bin/env node
// The `ctrlrun` command. A published install runs the built CLI in ../dist. In a source checkout
// (../src present) it runs the TypeScript through tsx with the workspace's source condition, so
// the command never runs a stale build.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../src/bin.ts', import.meta.url));
if (existsSync(source)) {
  // tsx is resolved from here, not from the working directory the operator runs ctrlrun in.
  const tsx = import.meta.resolve('tsx');
  const r = spawnSync(process.execPath, ['--conditions=@ctrlrun/source', '--import', tsx, source, ...process.argv.slice(2)], { stdio: 'inherit' });
  if (r.error) {
    process.stderr.write(`Error: could not start the ctrlrun source build: ${r.error.message}\n`);
    process.exit(3);
  }
  if (r.signal) process.kill(process.pid, r.signal);
  process.exit(r.status ?? 1);
} else {
  await import('../dist/bin.js');
}
