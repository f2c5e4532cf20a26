#!/usr/bin/env node
// The `ctrlrun` command. A published install runs the built CLI in ../dist. In a source checkout
// (../src present) it runs the TypeScript through tsx with the workspace's source condition, so
// the command never runs a stale build.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../src/bin.ts', import.meta.url));
if (existsSync(source)) {
  // tsx and foreground-child are the checkout's dev dependencies, resolved from here, not from the
  // working directory the operator runs ctrlrun in.
  const tsx = import.meta.resolve('tsx');
  const { foregroundChild } = await import('foreground-child');
  // The TypeScript runs in a child process with this one's stdio. Signals sent to this process
  // (a supervisor's SIGTERM, a SIGINT, …) are passed on to it, and its exit code or signal becomes
  // this process's: stopping `ctrlrun` stops the command, and never leaves it running alone.
  const child = foregroundChild(process.execPath, ['--conditions=@ctrlrun/source', '--import', tsx, source, ...process.argv.slice(2)]);
  child.on('error', (err) => {
    process.stderr.write(`Error: could not start the ctrlrun source build: ${err.message}\n`);
    process.exit(3);
  });
} else {
  await import('../dist/bin.js');
}
