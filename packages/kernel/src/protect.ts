/**
 * `protect(fn, options)`: the JavaScript shape of the reference's decorator. An async function
 * taking one plain-object argument goes in; a function that runs every call through
 * {@link Control.execute} comes out.
 *
 * @module
 */
import type { Action, Principal } from './action.js';
import { isPlainObject, type JsonObject } from './canonical.js';
import { describeError, type Control, type PreconditionProvider, type ReconcileHook } from './control.js';
import { LocalApprovalProvider, type ApprovalProvider } from './approval-providers.js';
import { ActionDenied, AmbiguousEffect, ApprovalRequired, DuplicateEffect, IdentityError, InvalidArgument, NotExecuted } from './errors.js';
import { ambientCall } from './ambient.js';
import { intake, type Intake } from './intake.js';
import { neverSent } from './never-sent.js';
import { parseTemplate, refuseDerivedArguments } from './policy/index.js';
import { checkDuration } from './time.js';

/** Per-call extras: who is acting and which approval is presented (no ambient state needed). */
export interface CallOptions {
  /**
   * The acting principal; else the Control's default principal. With an identity provider on
   * the Control, only a hint: the provider's answer is in force.
   */
  principal?: { agent: string; user?: string | null } | Principal;
  /** Request headers for a header or JWT identity provider (any case). */
  headers?: Readonly<Record<string, string>>;
  /**
   * A granted approval to present (its request id). An offer, never a decision. Left out, the
   * ambient one (`withApproval` on Node) is presented; `null` presents none.
   */
  approvalId?: string | null;
  /**
   * The caller's signal. Aborted before the call reaches the control path, nothing is written;
   * aborted while the call waits for a human (`wait`), the wait stops and the call rejects with
   * `ApprovalRequired` (the request stays open, `ACTION_DENIED {reason: wait_abandoned}` is recorded) and never
   * runs by itself. Once the function has been called, the signal changes nothing.
   */
  signal?: AbortSignal;
  /**
   * The task this call works on (a grant bound to `tasks` covers only calls naming one it
   * matches); recorded as the receipt's `task`, never hashed.
   */
  task?: string | null;
}

/** What {@link ProtectOptions.wait}'s `onWaiting` is told when a call starts waiting for a human. */
export interface WaitingFor {
  /** The approval request a human must answer (`apr_…`). */
  readonly requestId: string;
  /** The action's name. */
  readonly name: string;
  /** The hash the answer is bound to. */
  readonly actionHash: string;
  /** The commands that answer it from a terminal (see {@link answerCommands}). */
  readonly approve: string;
  readonly deny: string;
}

/**
 * The commands a person runs to answer request `requestId` from a terminal beside the store:
 * `npx ctrlrun approve apr_… --as NAME` and `npx ctrlrun deny apr_… --as NAME` (`NAME` is who
 * answers, recorded on the record). Another provider (a webhook, an MCP operator) answers too.
 */
export function answerCommands(requestId: string): { approve: string; deny: string } {
  return { approve: `npx ctrlrun approve ${requestId} --as NAME`, deny: `npx ctrlrun deny ${requestId} --as NAME` };
}

/** Options of {@link protect}. */
export interface ProtectOptions {
  control: Control;
  /** The action name the policy matches exactly. */
  name: string;
  /** Effect template (`refund:{payment_id}`); beats the policy's `effect:`. */
  effect?: string;
  /** Resource template (`payment:{payment_id}`), resolved against the bound arguments; hashed. */
  resource?: string;
  /** Default argument values, bound before hashing. */
  defaults?: Record<string, unknown>;
  /** Reservation lease in ms. */
  lease?: number;
  reconcile?: ReconcileHook;
  reconcileEagerly?: boolean;
  /**
   * A precondition provider (see `ExecuteOptions.preconditions`): the world's state the approval
   * is requested against, asked again when the approval is presented; a change refuses the call.
   */
  preconditions?: PreconditionProvider;
  /**
   * `fn` sends one request and nothing else has an effect (a single `fetch`, one API call): an
   * error it throws that the kernel's {@link neverSent} proves never left (a failed name lookup,
   * a failed `connect`, a failed TLS handshake) is recorded FAILED, as the worker's HTTP forwarder
   * and the MCP gateway record the same lost reply, and a retry may run. Default `false`: every
   * error but `NotExecuted` is AMBIGUOUS (spec 01 §6), since `fn` may have acted before it threw.
   */
  oneRequest?: boolean;
  /**
   * On `ApprovalRequired`, wait for the human's answer (a {@link LocalApprovalProvider} polling
   * the Control's store, unless `provider` is given) and run the same action again presenting
   * the request. A denial, an expiry or a consumed approval is then refused by the control path
   * as usual; no answer in `timeoutMs` (or before the request expires) is `ApprovalTimeout`.
   *
   * Before waiting, the call says what it waits for: `onWaiting` is called with the request id
   * and the commands that answer it ({@link WaitingFor}); without `onWaiting`, one line goes to
   * the Control's logger (`[ctrlrun] stripe.refund is waiting for a human: approval request
   * apr_…; answer with: npx ctrlrun approve apr_… --as NAME`). An `onWaiting` that throws is
   * logged and the wait goes on.
   */
  wait?: boolean | { timeoutMs?: number; provider?: ApprovalProvider; onWaiting?: (waiting: WaitingFor) => void };
}

/**
 * A protected function: `(args, call?) => Promise<result>`. Its `action(args, call?)` builds the
 * canonical action a call with these arguments would run (principal resolved, defaults bound,
 * resource resolved) and writes nothing: what an adapter asks `control.evaluate` or
 * `control.openApproval` about.
 */
export type Protected<A extends object, R> = ((args: A, call?: CallOptions) => Promise<R>) & {
  readonly action: (args: A, call?: CallOptions) => Promise<Action>;
  /**
   * An agent framework's "must a human approve this call?" for these exact arguments: `true`
   * when the decision is `approve`, and then the approval request is filed (or the open one for
   * this action hash is re-found) so that the human's answer can only grant these arguments.
   * `false` for allow and deny (calling the function then runs or refuses it), for arguments
   * that make no action (the call says why), and always in observe mode. Never runs `fn`.
   */
  readonly needsApproval: (args: A, call?: CallOptions) => Promise<boolean>;
};

/** Tells `onWaiting`, else the Control's logger, what a call is about to wait for. */
function announceWait(control: Control, onWaiting: ((waiting: WaitingFor) => void) | undefined, waiting: WaitingFor): void {
  if (onWaiting === undefined) {
    control.logger.warn(
      `[ctrlrun] ${waiting.name} is waiting for a human: approval request ${waiting.requestId}; answer with: ${waiting.approve} (or: ${waiting.deny})`,
    );
    return;
  }
  try {
    onWaiting(waiting);
  } catch (err) {
    control.logger.warn(
      `[ctrlrun] ${waiting.name}: wait.onWaiting raised ${err instanceof Error ? err.message : String(err)}; waiting for ${waiting.requestId} anyway`,
    );
  }
}

/** The executor behind {@link Protected.needsApproval}: reached only if the decision changed to allow. */
const askOnly = (): never => {
  throw new NotExecuted('asked only whether a human must approve; nothing was run');
};

/**
 * Wraps `fn` so every call goes through the control path: bind defaults, build the canonical
 * action, decide, approve, reserve, execute, record. `fn` receives the canonical arguments, never
 * the caller's objects.
 */
export function protect<A extends object = JsonObject, R = unknown>(fn: (args: A) => R | Promise<R>, options: ProtectOptions): Protected<A, R> {
  if (typeof fn !== 'function') throw new InvalidArgument('protect needs a function');
  if (!options || typeof options !== 'object' || !options.control) throw new InvalidArgument('protect needs { control, name }');
  const { control } = options;
  if (typeof options.name !== 'string' || options.name === '') throw new InvalidArgument('protect needs a non-empty action name');
  const name = options.name;
  if (options.effect !== undefined) parseTemplate(options.effect, 'decoration');
  if (options.resource !== undefined) parseTemplate(options.resource, 'decoration');
  if (options.lease !== undefined) checkDuration(options.lease, 'lease');
  if (options.reconcile !== undefined && typeof options.reconcile !== 'function') throw new InvalidArgument('reconcile must be a function');
  if (options.reconcileEagerly && options.reconcile === undefined) throw new InvalidArgument('reconcileEagerly needs a reconcile hook');
  if (options.oneRequest !== undefined && typeof options.oneRequest !== 'boolean') throw new InvalidArgument('oneRequest must be a boolean');
  if (options.preconditions !== undefined && typeof options.preconditions !== 'function') throw new InvalidArgument('preconditions must be a function');
  const defaults = options.defaults ?? {};
  if (!isPlainObject(defaults)) throw new InvalidArgument('defaults must be a plain object');
  refuseDerivedArguments(defaults);

  const wait = options.wait === undefined || options.wait === false ? null : options.wait === true ? {} : options.wait;
  if (wait !== null && (typeof wait !== 'object' || Array.isArray(wait))) throw new InvalidArgument('wait must be true, false or { timeoutMs?, provider? }');
  if (wait?.timeoutMs !== undefined) checkDuration(wait.timeoutMs, 'wait.timeoutMs');
  if (wait?.provider !== undefined && typeof wait.provider?.wait !== 'function') throw new InvalidArgument('wait.provider must be an ApprovalProvider');
  if (wait?.onWaiting !== undefined && typeof wait.onWaiting !== 'function') throw new InvalidArgument('wait.onWaiting must be a function');

  const entry = control.policy.action(name);
  let warned = false;

  // The one intake builds the action and its options; what the call leaves out, the ambient
  // context (withContext / withApproval on Node) may supply.
  const build = (args: A, call: CallOptions): Promise<Intake> => {
    const ambient = call.principal === undefined || call.approvalId === undefined ? ambientCall() : undefined;
    return intake(control, {
      name,
      arguments: args,
      principal: call.principal ?? ambient?.principal ?? null,
      ...(call.headers ? { headers: call.headers } : {}),
      defaults,
      ...(options.resource !== undefined ? { resourceTemplate: options.resource } : {}),
      ...(options.effect !== undefined ? { effectTemplate: options.effect } : {}),
      approvalId: call.approvalId !== undefined ? call.approvalId : (ambient?.approvalId ?? null),
    });
  };

  const protectedFn = async (args: A, call: CallOptions = {}): Promise<R> => {
    const { action, options: exec } = await build(args, call);
    if (!warned && options.effect !== undefined && entry?.effect && entry.effect !== options.effect) {
      warned = true;
      control.logger.warn(`[ctrlrun] ${name}: protect's effect template ${options.effect} overrides the policy's ${entry.effect}`);
    }
    if (options.lease !== undefined) exec.lease = options.lease;
    if (options.reconcile !== undefined) exec.reconcile = options.reconcile;
    if (options.reconcileEagerly !== undefined) exec.reconcileEagerly = options.reconcileEagerly;
    if (options.preconditions !== undefined) exec.preconditions = options.preconditions;
    if (call.task !== undefined) exec.task = call.task;
    // fn gets the canonical arguments: the shape it declared, as the action was hashed.
    const run = options.oneRequest
      ? async (canonicalArgs: JsonObject) => {
          try {
            return await fn(canonicalArgs as unknown as A);
          } catch (err) {
            if (err instanceof NotExecuted || !neverSent(err)) throw err;
            const code = (err as { cause?: { code?: unknown } }).cause?.code;
            throw new NotExecuted(`${name}: the request was never sent (${describeError(err)}${typeof code === 'string' ? `, ${code}` : ''})`, { cause: err });
          }
        }
      : (canonicalArgs: JsonObject) => fn(canonicalArgs as unknown as A);
    if (call.signal !== undefined && (typeof call.signal !== 'object' || call.signal === null || typeof call.signal.throwIfAborted !== 'function')) {
      throw new InvalidArgument('signal must be an AbortSignal');
    }
    call.signal?.throwIfAborted();
    try {
      return await control.execute(action, run, exec);
    } catch (err) {
      if (wait === null || !(err instanceof ApprovalRequired)) throw err;
      announceWait(control, wait.onWaiting, { requestId: err.requestId, name, actionHash: action.actionHash, ...answerCommands(err.requestId) });
      await control.waitForAnswer(action, err.requestId, {
        ...(wait.provider ? { provider: wait.provider } : {}),
        ...(wait.timeoutMs !== undefined ? { timeoutMs: wait.timeoutMs } : {}),
        ...(call.signal ? { signal: call.signal } : {}),
      });
      // The same action, now presenting the request: the control path decides what the answer allows.
      return control.execute(action, run, { ...exec, approvalId: err.requestId });
    }
  };
  const needsApproval = async (args: A, call: CallOptions = {}): Promise<boolean> => {
    if (control.observing) return false; // observe mode never interrupts
    let built: Intake;
    try {
      built = await build(args, { ...call, approvalId: null });
    } catch (err) {
      if (err instanceof InvalidArgument || err instanceof ActionDenied || err instanceof IdentityError) return false;
      throw err;
    }
    const { action, options: ask } = built;
    if ((await control.evaluate(action, { task: call.task ?? null })).decision !== 'approve') return false;
    try {
      // The control path files the request (or names the open one) and never reaches the executor.
      // With the call's effect key: an effect already committed (or ambiguous) is refused before a
      // request is filed, so nobody is asked about what already happened.
      if (options.lease !== undefined) ask.lease = options.lease;
      if (options.reconcile !== undefined) ask.reconcile = options.reconcile;
      if (options.preconditions !== undefined) ask.preconditions = options.preconditions;
      if (call.task !== undefined) ask.task = call.task;
      await control.execute(action, askOnly, ask);
    } catch (err) {
      if (err instanceof ApprovalRequired) return true;
      // The decision changed since the evaluation (allow: askOnly refused to run; deny), or the
      // effect already happened: not asked; the call itself then says why it is refused.
      if (err instanceof NotExecuted || err instanceof ActionDenied || err instanceof DuplicateEffect || err instanceof AmbiguousEffect) return false;
      throw err;
    }
    return false;
  };
  return Object.assign(protectedFn, { action: async (args: A, call: CallOptions = {}) => (await build(args, call)).action, needsApproval });
}
