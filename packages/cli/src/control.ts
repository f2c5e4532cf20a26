/**
 * For the commands that load the policy (`stats`, `delegate`, `revoke`, `verify`, and the
 * answers `approve`, `deny`, `resolve`): the banner under observe mode (printed by the first
 * four only: an answer to one request is not where an operator needs the reminder), the deployment's
 * environment, who answers, and a `Control` composed as `from_file` composes it (the policy's
 * inline authority, a JSONL sink in the state directory).
 *
 * @module
 */
import { userInfo } from 'node:os';
import { dirname } from 'node:path';
import type { ApproverIdentity, Control, Policy, StateStore } from '@ctrlrun/kernel';
import { fromFile, type FileControl } from '@ctrlrun/store-node';
import { OBSERVE_BANNER, type Invocation } from './command.js';
import { loadPolicyFile, policyPath, storeTarget, type StoreTarget } from './discovery.js';
import { CliRefusal, UsageError } from './errors.js';
import { hasUnsafe } from './format.js';
import type { CliIo } from './io.js';
import { openAnswerer } from './stores.js';

/** Prints the observe-mode banner to stderr, first, every run. */
export function banner(policy: Policy, err: (line: string) => void): void {
  if (policy.mode === 'observe') err(OBSERVE_BANNER);
}

/** The longest name recorded as who answered. */
const MAX_ACTOR_LENGTH = 256;

/** Why `name` cannot be recorded as who answered, or null: blank, too long, or not one visible line. */
function actorProblem(name: string): string | null {
  if (name.trim() === '') return 'is empty';
  if (name.length > MAX_ACTOR_LENGTH) return `is longer than ${MAX_ACTOR_LENGTH} characters`;
  if (hasUnsafe(name)) return 'holds a control, format or line-separator character';
  return null;
}

/**
 * Who answers an approval or resolves an effect, as recorded on the record and its event: the
 * flag (`--as NAME`, or `--by` for `revoke`), else `$CTRLRUN_APPROVER`, else the login name of the
 * operating-system user running the command. Never a made-up name: a blank or control-character
 * name, or no name at all, is refused with exit 2 before anything is opened.
 */
export function operatorName(io: CliIo, flag: string | undefined, option: string): string {
  if (flag !== undefined) {
    const problem = actorProblem(flag);
    if (problem !== null) throw new UsageError(`${option} ${JSON.stringify(flag)} ${problem}: name who answers, on one line`);
    return flag;
  }
  const env = io.env['CTRLRUN_APPROVER'];
  if (env !== undefined) {
    const problem = actorProblem(env);
    if (problem !== null) throw new CliRefusal(`CTRLRUN_APPROVER ${JSON.stringify(env)} ${problem}: unset it, or name who answers on one line`, 2);
    return env;
  }
  let login: string;
  try {
    login = (io.userName ?? (() => userInfo().username))();
  } catch (e) {
    throw new CliRefusal(
      `cannot tell who is answering (the system has no name for this user: ${e instanceof Error ? e.message : String(e)}); give ${option} NAME or set CTRLRUN_APPROVER`,
      2,
    );
  }
  const problem = actorProblem(login);
  if (problem !== null) throw new CliRefusal(`the login name ${JSON.stringify(login)} ${problem}; give ${option} NAME or set CTRLRUN_APPROVER`, 2);
  return login;
}

/**
 * A Control over the operator's policy and store, composed by `fromFile` as an application
 * composes it (the JSONL files beside a SQLite store, none for PostgreSQL; the policy's inline
 * authority; `$CTRLRUN_ENVIRONMENT`). Close it when done (the JSONL files); the store stays the
 * caller's.
 */
export function operatorControl(
  io: CliIo,
  policy: Policy,
  store: StateStore,
  target: StoreTarget,
  warn: (line: string) => void,
  approvers: ApproverIdentity | null = null,
): Promise<FileControl> {
  return fromFile({
    ...(approvers === null ? {} : { approvers }),
    env: io.env,
    cwd: io.cwd,
    path: policyPath(io),
    policy,
    store,
    stateDir: target.kind === 'sqlite' ? dirname(target.path) : null,
    logger: { warn: (message: string) => warn(`warning: ${message}`) },
  });
}

/**
 * Runs one human answer (`approve`, `deny`, `resolve`) through the kernel: resolves who answers
 * (`--as`), checks the store through a reader with `precheck`, loads the policy, then lets
 * `confirm` (still on the reader, with the policy) show what is answered and ask — nothing is
 * written on a refusal of any of these — then hands `answer` a Control composed by
 * {@link operatorControl} (same sinks, the kernel's clock) and always closes the store.
 * Resolves to exit code 0.
 */
export async function answeringControl(
  inv: Invocation,
  precheck: (reader: StateStore) => Promise<void>,
  answer: (control: Control, who: string) => Promise<void>,
  confirm?: (reader: StateStore, policy: Policy, who: string) => Promise<void>,
  verified: { who: string; approvers: ApproverIdentity | null } | null = null,
): Promise<number> {
  const { io, values, err } = inv;
  // A configured identity (a verified token) names who answers; else --as, $CTRLRUN_APPROVER, the login.
  const who = verified?.who ?? operatorName(io, values['as'] as string | undefined, '--as');
  const target = storeTarget(io, values['store-url'] as string | undefined);
  const loaded: { policy?: Policy } = {};
  // The store and the request are checked first (a missing store is named before a missing
  // policy); the policy loads before any write connection exists.
  const store = await openAnswerer(target, async (reader) => {
    await precheck(reader);
    loaded.policy = loadPolicyFile(policyPath(io)).policy;
    if (confirm !== undefined) await confirm(reader, loaded.policy, who);
  });
  try {
    const control = await operatorControl(io, loaded.policy!, store, target, err, verified?.approvers ?? null);
    try {
      await answer(control, who);
    } finally {
      await control.close();
    }
    return 0;
  } finally {
    await store.close();
  }
}
