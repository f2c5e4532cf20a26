/**
 * `@ctrlrun/cli`: the `ctrlrun` command, callable in-process as `main(argv, io)`.
 *
 * @module
 */
export { main } from './main.js';
export { type CliIo } from './io.js';
export { COMMANDS } from './commands/index.js';
export { VERSION } from './version.js';
export { UsageError } from './errors.js';
export type { Command, Invocation, OptionSpec } from './command.js';
export { renderActionSummary } from './action-summary.js';
export { verifyBadge } from '@ctrlrun/kernel/verify';
