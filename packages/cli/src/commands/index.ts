/**
 * Every command, in the order `ctrlrun --help` lists them.
 *
 * @module
 */
import type { Command } from '../command.js';
import { approvals } from './approvals.js';
import { approve, deny } from './approve.js';
import { breakGlass } from './break-glass.js';
import { budgets } from './budgets.js';
import { delegate, revoke } from './delegate.js';
import { demo } from './demo.js';
import { effects } from './effects.js';
import { gateway } from './gateway.js';
import { init } from './init.js';
import { inspect } from './inspect.js';
import { policy } from './policy.js';
import { mcpOperator } from './mcp-operator.js';
import { receipts } from './receipts.js';
import { resolve } from './resolve.js';
import { anchor, hold, prune, release } from './retention.js';
import { scan } from './scan.js';
import { stats } from './stats.js';
import { verify } from './verify.js';

/** The commands this build has, sorted by name. */
export const COMMANDS: readonly Command[] = [
  anchor,
  approvals,
  approve,
  breakGlass,
  budgets,
  delegate,
  demo,
  deny,
  effects,
  gateway,
  hold,
  init,
  inspect,
  mcpOperator,
  policy,
  prune,
  receipts,
  release,
  resolve,
  revoke,
  scan,
  stats,
  verify,
];
