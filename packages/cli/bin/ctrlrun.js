#!/usr/bin/env node
// The `ctrlrun` command. A published install runs the built CLI in ../dist. In a source checkout
// (../src present) it runs the TypeScript through tsx with the workspace's source condition, so
// the command never runs a stale build.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../src/bin.ts', import.meta.url));
if (existsSync(source)) {
  // tsx is the checkout's dev dependency, resolved from here, not from the working directory the
  // operator runs ctrlrun in.
  const tsx = import.meta.resolve('tsx');
  // The TypeScript runs in a child process with this one's stdio. Signals sent to this process
  // (a supervisor's SIGTERM, a SIGINT, …) are passed on to it, and its exit code or signal becomes
  // this process's: stopping `ctrlrun` stops the command, and never leaves it running alone. No
  // third process watches the two (foreground-child's watchdog died of a terminal's Ctrl-C, which
  // the whole process group gets, and the launcher then killed the command with SIGKILL and crashed).
  // CTRLRUN_SIGNALS_PASSED_ON tells the command that a signal may reach it twice (see untilSignalled).
  const child = spawn(process.execPath, ['--conditions=@ctrlrun/source', '--import', tsx, source, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, CTRLRUN_SIGNALS_PASSED_ON: '1' },
  });
  const passOn = new Map();
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR2', 'SIGBREAK']) {
    const listener = () => {
      try {
        child.kill(signal);
      } catch {
        // Already gone: its exit decides.
      }
    };
    try {
      process.on(signal, listener);
      passOn.set(signal, listener);
    } catch {
      // Not a signal on this platform.
    }
  }
  child.on('error', (err) => {
    process.stderr.write(`Error: could not start the ctrlrun source build: ${err.message}\n`);
    process.exit(3);
  });
  child.on('exit', (code, signal) => {
    for (const [s, listener] of passOn) process.off(s, listener);
    if (signal === null) process.exit(code ?? 1);
    // Ended by a signal: so does this process (kept alive until it arrives).
    setTimeout(() => process.exit(1), 2000);
    process.kill(process.pid, signal);
  });
} else {
  await import('../dist/bin.js');
}
