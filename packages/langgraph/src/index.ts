/**
 * `@ctrlrun/langgraph`: ctrlrun for LangGraph.js. An approval provider built on `interrupt()`:
 * the graph pauses with the ctrlrun request, the human's answer comes back through
 * `Command({ resume })`, and is recorded with the same `grantApproval` / `denyApproval` as the
 * CLI. Resuming re-runs the node from its start; the control path then finds the request that
 * is already pending for the action's hash, so no second request is filed and none is left
 * pending. The adapter decides nothing itself.
 *
 * @module
 */
import { INTERRUPT, getConfig, interrupt, isGraphInterrupt, isInterrupted } from '@langchain/langgraph';
import {
  ActionDenied,
  ApprovalMismatch,
  InvalidArgument,
  answerCommands,
  editedToolResult,
  unusedEditFor,
  LocalApprovalProvider,
  actionToJson,
  checkActor,
  parseJson,
  protect,
  viewTime,
  type Action,
  type Approval,
  type ApprovalProvider,
  type CallOptions,
  type EditedToolResult,
  type ApprovalRecord,
  type ApprovalRequest,
  type Control,
  type JsonObject,
  type ProtectOptions,
  type Protected,
  type WaitingFor,
} from '@ctrlrun/kernel';

/** The value a graph pauses with (`result.__interrupt__[i].value`): what the human is asked. */
export interface ApprovalInterrupt {
  readonly type: 'ctrlrun.approval';
  readonly request_id: string;
  readonly action_hash: string;
  /** The whole action as stored: `name`, `arguments`, `principal`, `resource`, `environment`. */
  readonly action: JsonObject;
  readonly expires_at: string;
  /**
   * Present when the graph pauses again because the human's edit was refused: the sentence
   * saying why (an edit never lifts a deny). The request is still pending; answer again.
   */
  readonly edit_refused?: string;
  /**
   * Present when the graph pauses again because the human's answer was refused: it named another
   * request or another action hash (a stale screen, a second tab), or it was malformed. The
   * sentence says what was wrong; nothing was recorded, the request is still pending; answer again.
   */
  readonly answer_refused?: string;
}

/** What the human resumes with: `new Command({ resume: answer })`. */
export interface ApprovalAnswer {
  readonly decision: 'approve' | 'deny';
  /** Who answered: recorded on the request, its events and the receipt. */
  readonly approver: string;
  /** The request answered (from the interrupt); it must be the one this run waits on. */
  readonly request_id: string;
  /** Optional: the hash the human saw; if given it must be the request's. */
  readonly action_hash?: string;
  /**
   * Optional, with `approve`: the human approves these arguments instead of the proposed ones
   * (edit-then-approve). Decided again by the policy and the authority; the function then runs
   * once with them, and the protected call returns an {@link EditedToolResult}.
   */
  readonly edit?: { readonly arguments: JsonObject };
}

const ANSWER_KEYS = new Set(['decision', 'approver', 'request_id', 'action_hash', 'edit']);

/** A plain object (an object literal or parsed JSON), not an array, a class instance or null. */
function isPlain(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * A value from the answer, for a sentence: JSON (control characters escaped), cut at 80
 * characters. The answer comes from a UI and the sentence goes back to one (`answer_refused`).
 */
function quote(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(typeof value);
  } catch {
    text = `a ${typeof value} that is not JSON`;
  }
  return text.length <= 80 ? text : `${text.slice(0, 80)}… (${text.length - 80} more characters)`;
}

/** Checks a resume value against the request it answers; refuses anything else. */
function readAnswer(value: unknown, record: ApprovalRecord): ApprovalAnswer {
  const id = record.request.requestId;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidArgument(`resume with { decision: 'approve' | 'deny', approver, request_id } to answer approval ${id}`);
  }
  for (const key of Object.keys(value)) {
    if (!ANSWER_KEYS.has(key))
      throw new InvalidArgument(`the answer to approval ${id} has an unknown key ${quote(key)} (expected decision, approver, request_id, action_hash, edit)`);
  }
  const answer = value as Record<string, unknown>;
  if (answer['decision'] !== 'approve' && answer['decision'] !== 'deny') {
    throw new InvalidArgument(`the answer to approval ${id} needs decision 'approve' or 'deny', not ${quote(answer['decision'])}`);
  }
  const approver = checkActor(answer['approver'], 'approver');
  if (answer['request_id'] !== id) {
    throw new ApprovalMismatch('mismatch', {
      approvalId: id,
      message: `approval ${id} refused (mismatch): the answer is for request ${quote(answer['request_id'])}, but this run waits on ${id} (the answered one expired or was already used)`,
    });
  }
  if (answer['action_hash'] !== undefined && answer['action_hash'] !== record.request.actionHash) {
    throw new ApprovalMismatch('mismatch', {
      approvalId: id,
      message: `approval ${id} refused (mismatch): the answer was given for action ${quote(answer['action_hash'])}, not ${record.request.actionHash}`,
    });
  }
  const edit = answer['edit'];
  if (edit === undefined) return { decision: answer['decision'], approver, request_id: id };
  if (answer['decision'] !== 'approve')
    throw new InvalidArgument(`the answer to approval ${id} carries an edit with decision ${quote(answer['decision'])}: only an approval edits`);
  if (!isPlain(edit) || Object.keys(edit).some((k) => k !== 'arguments') || !isPlain(edit['arguments'])) {
    throw new InvalidArgument(`the answer to approval ${id} has an edit that is not { arguments: { … } } (a plain object of the edited arguments)`);
  }
  return { decision: 'approve', approver, request_id: id, edit: { arguments: edit['arguments'] as JsonObject } };
}

/** Why the graph pauses again on the same request: the human's last edit, or last answer, was refused. */
export interface Refusal {
  readonly edit_refused?: string;
  readonly answer_refused?: string;
}

/** Why a replayed answer is refused: it was refused when it was given, and what was true then is not asked again. */
const REPLAYED_REFUSAL =
  'an answer given earlier and refused then (LangGraph hands every earlier answer back when the node re-runs): a refused answer stays refused, even if the policy would take it now; answer again';

/**
 * Whether the answer the next `interrupt()` returns is one an earlier run of this node already
 * received — LangGraph hands them back in order whenever the node re-runs — rather than the one
 * the graph was just resumed with. Read from the task's scratchpad, as `interrupt()` itself reads
 * it: the answers received before are its `resume` list; the new one is the null resume (a
 * `Command({ resume: value })`), or the last of the list when a resume map (by interrupt id)
 * appended it there. A LangGraph whose scratchpad cannot be read is refused: without this, an
 * answer refused once (an edit the policy denied) would be decided again on every re-run, and
 * granted once the policy, an authority grant or a precondition changed, over the human's later
 * answers.
 */
function nextAnswerIsReplayed(): boolean {
  const conf = getConfig()?.configurable as Record<string, unknown> | undefined;
  const pad = conf?.['__pregel_scratchpad'] as { resume?: unknown; interruptCounter?: unknown; nullResume?: unknown } | undefined;
  if (pad === undefined || !Array.isArray(pad.resume) || typeof pad.interruptCounter !== 'number') {
    throw new Error(
      '@ctrlrun/langgraph: this @langchain/langgraph does not say which answers it hands back again (its task scratchpad has no resume list), so a refused answer could be decided again: use @langchain/langgraph 1.7.3 or a later 1.x',
    );
  }
  const next = pad.interruptCounter + 1;
  // A retry of this run (a node retryPolicy after a transient error) keeps the scratchpad and
  // counts from the start again: an answer this run took as new is new again, never a replay.
  let fresh = FRESH_ANSWERS.get(pad);
  if (fresh === undefined) FRESH_ANSWERS.set(pad, (fresh = new Set()));
  if (fresh.has(next)) return false;
  if (next >= pad.resume.length) {
    if (pad.nullResume !== undefined) fresh.add(next);
    return false;
  }
  if (pad.nullResume !== undefined || next < pad.resume.length - 1) return true;
  // The list's last answer: new when a resume map appended it (the same value), else received before.
  const map = conf!['__pregel_resume_map'] as Record<string, unknown> | null | undefined;
  const last = pad.resume[next];
  const appended = map !== null && map !== undefined && typeof last === 'object' && last !== null && Object.values(map).includes(last);
  if (appended) fresh.add(next);
  return !appended;
}
/** The positions of the answers each task run took as new, by its scratchpad (kept across the run's retries). */
const FRESH_ANSWERS = new WeakMap<object, Set<number>>();

/**
 * The interrupt value for a request, with why the human's last answer or edit was refused, if it
 * was (a string is the edit's refusal, as before).
 */
function approvalInterrupt(request: ApprovalRequest, refused?: string | Refusal): ApprovalInterrupt {
  const why: Refusal = typeof refused === 'string' ? { edit_refused: refused } : (refused ?? {});
  return {
    type: 'ctrlrun.approval',
    request_id: request.requestId,
    action_hash: request.actionHash,
    action: parseJson(actionToJson(request.action)) as JsonObject,
    // In the form of every view (UTC, milliseconds, Z), not the column's `+00:00`.
    expires_at: viewTime(request.expiresAt),
    ...(why.edit_refused === undefined ? {} : { edit_refused: why.edit_refused }),
    ...(why.answer_refused === undefined ? {} : { answer_refused: why.answer_refused }),
  };
}

/**
 * The ctrlrun approvals a graph paused for, from what `invoke` returned (`__interrupt__`):
 * empty when it did not pause for one.
 */
export function approvalsAsked(result: unknown): ApprovalInterrupt[] {
  if (!isInterrupted(result)) return [];
  return result[INTERRUPT].map((i) => i.value).filter(
    (v): v is ApprovalInterrupt => typeof v === 'object' && v !== null && (v as { type?: unknown }).type === 'ctrlrun.approval',
  );
}

/**
 * What the Control's log says when a graph pauses for a human, and only then (not when a node
 * re-runs with the answer at hand). The interrupt is how the human is reached, so it says to
 * resume the thread with the answer; `ctrlrun approve` answers too, but only from a process that
 * can open the same store (a file or a database, never a store held in this process's memory, as
 * the example's is), so it is named with that condition, never as the way.
 */
function announcePause(control: Control, request: ApprovalRequest): void {
  const id = request.requestId;
  control.logger.warn(
    `[ctrlrun] ${request.action.name} paused the graph for a human: approval request ${id}; resume the thread with ` +
      `new Command({ resume: { decision: 'approve' | 'deny', approver, request_id: '${id}' } }) ` +
      `(if the store is a file or database another process can open, ${answerCommands(id).approve} answers it too)`,
  );
}

/** protect's own line before a wait names only the CLI, and would be logged on every re-run: the provider says it instead ({@link announcePause}). */
const SAYS_ITSELF = { onWaiting: (_: WaitingFor) => undefined };

/**
 * An {@link ApprovalProvider} whose human is reached through LangGraph's `interrupt()`. `wait`
 * must run inside a graph node with a checkpointer: the first time it pauses the graph with an
 * {@link ApprovalInterrupt}; when the node re-runs on `Command({ resume })`, `interrupt()` returns
 * the {@link ApprovalAnswer} and it grants or denies the request through the Control.
 */
export class InterruptApprovalProvider implements ApprovalProvider {
  readonly control: Control;
  /** The request the last {@link wait} was for (null before any): where to look for an edit. */
  waitedOn: string | null = null;

  constructor(control: Control) {
    if (!control || typeof control.grantApproval !== 'function') throw new InvalidArgument('InterruptApprovalProvider needs a Control');
    this.control = control;
  }

  /** The open request for `action`'s hash (pending, or granted and unused) if any, else a new one. */
  async request(action: Action, ttlMs: number, options?: { policyHash?: string | null }): Promise<ApprovalRequest> {
    const open = await this.control.openApproval(action);
    if (open !== null) return open.request;
    return new LocalApprovalProvider(this.control.store, { clock: this.control.clock, ids: this.control.ids }).request(action, ttlMs, options);
  }

  /**
   * Granted already (through any surface): that approval, no interrupt. Pending: interrupt, then
   * record the human's answer (`Approval` on approve, `null` on deny). Answered otherwise or
   * expired: `null`. Unknown: `ApprovalMismatch('unknown')`.
   */
  async wait(requestId: string): Promise<Approval | null> {
    const record = await this.control.store.getApproval(requestId);
    if (record === null)
      throw new ApprovalMismatch('unknown', { approvalId: requestId, message: `approval ${requestId} refused (unknown): no such approval request` });
    if (record.status === 'granted') {
      return {
        approvalId: requestId,
        actionHash: record.request.actionHash,
        approver: record.approver ?? '',
        grantedAt: record.grantedAt ?? '',
        expiresAt: record.request.expiresAt,
      };
    }
    this.waitedOn = requestId;
    if (record.status !== 'pending') return null;
    // Throws GraphInterrupt on the first run; returns the resume value when the node re-runs. A
    // refused answer (another request or hash, a malformed one) or an edit the policy refuses
    // pauses the graph again with the reason (nothing written, the request still pending): never
    // a throw, because LangGraph hands back every earlier answer in turn when the node re-runs,
    // and a refusal thrown on the first would be thrown again on every later resume.
    let refused: Refusal | undefined;
    for (;;) {
      let value: unknown;
      const replayed = nextAnswerIsReplayed();
      try {
        value = interrupt(approvalInterrupt(record.request, refused));
      } catch (err) {
        if (isGraphInterrupt(err)) announcePause(this.control, record.request);
        throw err;
      }
      let answer: ApprovalAnswer;
      try {
        answer = readAnswer(value, record);
      } catch (err) {
        if (!(err instanceof ApprovalMismatch) && !(err instanceof InvalidArgument)) throw err;
        refused = { answer_refused: err.message };
        continue;
      }
      if (answer.decision === 'deny') {
        await this.control.denyApproval(requestId, { approver: answer.approver });
        return null;
      }
      // Received before with the request still pending: it was refused then (an answer that was
      // taken granted or denied the request). It is not decided again.
      if (replayed) {
        refused = answer.edit === undefined ? { answer_refused: REPLAYED_REFUSAL } : { edit_refused: REPLAYED_REFUSAL };
        continue;
      }
      if (answer.edit === undefined) return this.control.grantApproval(requestId, { approver: answer.approver });
      try {
        return await this.control.grantApproval(requestId, { approver: answer.approver, edit: answer.edit });
      } catch (err) {
        // Denied by the policy, or arguments the action cannot run with (refused before
        // anything is written): the request stays pending for another answer.
        if (!(err instanceof ActionDenied) && !(err instanceof InvalidArgument)) throw err;
        refused = { edit_refused: err.message };
      }
    }
  }
}

/**
 * `protect(fn, options)` for a function called inside a LangGraph node: an action the policy
 * sends to a human pauses the graph (`interrupt()`), and `Command({ resume: { decision,
 * approver, request_id, edit? } })` answers it; the same action then runs once, presenting the
 * request (approve), or is refused as `ActionDenied('approval_denied')` (deny). Approved with
 * `edit: { arguments }`, the edited arguments (decided again) run instead, once, and the call
 * resolves to an {@link EditedToolResult} around the function's result; an edit the policy
 * refuses pauses the graph again with `edit_refused` saying why, and nothing runs.
 */
export function protectInGraph<A extends object = JsonObject, R = unknown>(
  fn: (args: A) => R | Promise<R>,
  options: Omit<ProtectOptions, 'wait'>,
): Protected<A, R | EditedToolResult<R>> {
  if (!options || typeof options !== 'object' || !options.control) throw new InvalidArgument('protectInGraph needs { control, name }');
  if ('wait' in options) throw new InvalidArgument('protectInGraph waits through interrupt(); do not pass wait');
  const { control } = options;
  const shared = protect<A, R>(fn, { ...options, wait: { provider: new InterruptApprovalProvider(control), ...SAYS_ITSELF } });
  const call = async (args: A, callOptions: CallOptions = {}): Promise<R | EditedToolResult<R>> => {
    // A human may have answered this action's request with an edit through another surface
    // (ctrlrun approve --edit, the worker) while the graph waited: run that edit, once.
    const earlier = await shared.action(args, callOptions).then(
      (action) => unusedEditFor(control, action),
      () => null,
    );
    if (earlier !== null) return editedToolResult(earlier, await shared(args, { ...callOptions, approvalId: earlier.proposed }));
    // One provider per call: it says which request this call waited on.
    const provider = new InterruptApprovalProvider(control);
    const result = await protect<A, R>(fn, { ...options, wait: { provider, ...SAYS_ITSELF } })(args, callOptions);
    // A request answered with an edit ran the edited arguments: the result says so, and gives them.
    const edit = provider.waitedOn === null ? null : await control.approvalEdit(provider.waitedOn);
    return edit !== null && edit.proposed === provider.waitedOn ? editedToolResult(edit, result) : result;
  };
  return Object.assign(call, { action: shared.action, needsApproval: shared.needsApproval });
}
