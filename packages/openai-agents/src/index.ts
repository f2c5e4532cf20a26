/**
 * `@ctrlrun/openai-agents`: ctrlrun for the OpenAI Agents SDK (JS). `protectTools(tools, {
 * control })` returns the same function tools in which `needsApproval` is the policy's decision
 * for the exact arguments (the ctrlrun request is filed then) and `invoke` runs through the
 * control path. A run's interruption is answered with `approveInterruption` /
 * `rejectInterruption`, which record the human's answer in ctrlrun before `state.approve` /
 * `state.reject`. The binding lives in the ctrlrun store, keyed by the action hash, so a run state
 * serialized and resumed elsewhere keeps it. The adapter decides nothing itself.
 *
 * @module
 */
import {
  RunContext,
  tool as sdkTool,
  type FunctionTool,
  type RunState,
  type RunToolApprovalItem,
  type ToolInputParameters,
  type ToolOptions,
  type ToolOutputSchema,
  type UnknownContext,
} from '@openai/agents';
import {
  ApprovalMismatch,
  InvalidArgument,
  canonicalJson,
  checkActor,
  protect,
  editedToolResult,
  resolveEffectTemplate,
  toolRefusal,
  unusedEditFor,
  type Action,
  type ApprovalRecord,
  type CallOptions,
  type PreconditionProvider,
  type Control,
  type Protected,
  type EditedToolResult,
  type JsonObject,
  type ToolRefusal,
  quotedForMessage,
} from '@ctrlrun/kernel';

export { isEditedToolResult } from '@ctrlrun/kernel';
export type { EditedToolResult } from '@ctrlrun/kernel';

export type { ToolRefusal } from '@ctrlrun/kernel';

/** Options of {@link protectTool}. */
export interface ProtectToolOptions {
  control: Control;
  /** The action name the policy matches (else the tool's name). */
  name?: string;
  /** The principal or headers of every call (else the Control's default principal or identity provider). */
  call?: CallOptions;
  /**
   * A precondition provider (see `protect`'s `preconditions`): the world's state a request is filed
   * against, asked again when the approval is presented; the call is refused if it changed.
   */
  preconditions?: PreconditionProvider;
}

/** Options of {@link protectTools}. */
export interface ProtectToolsOptions {
  control: Control;
  /** The action name the policy matches, per tool name; else the tool name itself. */
  names?: Readonly<Record<string, string>>;
  call?: CallOptions;
  /**
   * A precondition provider (see `protect`'s `preconditions`): the world's state a request is filed
   * against, asked again when the approval is presented; the call is refused if it changed.
   */
  preconditions?: PreconditionProvider;
}

/** Options of {@link approveInterruption} and {@link rejectInterruption}. */
export interface AnswerOptions {
  /** Who answered: recorded on the ctrlrun request, its events and the receipt. */
  approver: string;
  /**
   * The ctrlrun request the human was shown ({@link approvalRequestFor}), if the answer comes back
   * with it: the interruption's arguments must still make that request's action, else
   * `ApprovalMismatch` and nothing is answered (a run state changed between showing and answering).
   */
  requestId?: string;
}

/** Options of {@link approveInterruption}. */
export interface ApproveOptions extends AnswerOptions {
  /**
   * Approve these arguments instead of the proposed ones (edit-then-approve). They go through the
   * tool's own parser, then ctrlrun decides them again (policy and authority; an edit never lifts
   * a deny) and grants them; the run then executes them once, and the model gets an
   * {@link EditedToolResult} saying what ran. A denied edit throws the kernel's `ActionDenied`
   * with the rule's sentence: nothing is approved, the request stays pending.
   */
  edit?: { arguments: Record<string, unknown> };
}

const noOpenRequest = (name: string) =>
  `${name}: no approval request is open for these exact arguments (they changed after the approval was asked, or the request was already answered or expired)`;

interface Guarded {
  readonly control: Control;
  readonly name: string;
  readonly call: CallOptions;
  readonly probe: Protected<Record<string, unknown>, unknown>;
  /** The arguments the SDK's own parser makes of a call's JSON text (the values `execute` receives). */
  readonly parse: (text: string) => Promise<Record<string, unknown>>;
}

/** Which tools this package protected, and how. */
const guarded = new WeakMap<object, Guarded>();

/** The key of a probe's box in the call details: present, `execute` only records what the SDK parsed. */
const PROBE = Symbol('ctrlrun.openai-agents.probe');
/** What a probe's `execute` returns instead of running anything; never seen outside this module. */
const PROBED = Object.freeze({ ctrlrun: 'probe: parsed only, nothing run' });

type AnyToolOptions = ToolOptions<any, any, any>;

/**
 * The options of one function tool in a list given to {@link protectTools}: what you would give
 * `tool()`. In a list, `execute`'s input is not inferred from `parameters`; for a typed `execute`
 * protect each tool with {@link protectTool}.
 */
export interface ToolListEntry {
  readonly name?: string;
  readonly description: string;
  readonly parameters?: ToolInputParameters;
  readonly execute: (input: any, runContext?: any, details?: any) => unknown;
  readonly [option: string]: unknown;
}
type Execute = (input: unknown, runContext?: unknown, details?: unknown) => unknown;
type ErrorFunction = (runContext: unknown, error: unknown, details?: unknown) => unknown;

/** Whether `value` is a built function tool rather than the options of one. */
function isBuiltTool(value: unknown): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { type?: unknown }).type === 'function' &&
    typeof (value as { invoke?: unknown }).invoke === 'function'
  );
}

/** Whether `value` is an object of arguments (what a tool's object parameters parse to). */
function isArgs(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * One function tool, built from the options you would give `tool()` and protected: `needsApproval`
 * is the policy's decision and `execute` runs as action `name` (else the tool's name) through the
 * control path. Both see the arguments the SDK's parser makes of the model's JSON (Zod defaults,
 * coercions and transforms applied), so the policy decides, the hash binds, and `execute`
 * receives the same values. See {@link protectTools}.
 */
export function protectTool<
  TParameters extends ToolInputParameters = undefined,
  Context = UnknownContext,
  Result = string,
  TOutputSchema extends ToolOutputSchema | undefined = undefined,
>(
  options: ToolOptions<TParameters, Context, TOutputSchema>,
  protection: ProtectToolOptions,
): FunctionTool<Context, TParameters, Result | ToolRefusal | EditedToolResult<Result>> {
  if (!protection || typeof protection !== 'object' || !protection.control) throw new InvalidArgument('protectTool needs { control }');
  const { control } = protection;
  if (isBuiltTool(options)) {
    throw new InvalidArgument(
      `protectTool needs the options you would give tool() ({ name, parameters, execute, … }), not a built tool (${JSON.stringify((options as { name?: unknown }).name)}): ctrlrun must decide on the arguments the SDK's parser hands execute`,
    );
  }
  if (!options || typeof options !== 'object' || typeof (options as { execute?: unknown }).execute !== 'function') {
    throw new InvalidArgument('protectTool needs the options of a function tool ({ name, parameters, execute, … })');
  }
  const opts = options as AnyToolOptions;
  const name = protection.name ?? opts.name;
  if (typeof name !== 'string' || name === '') throw new InvalidArgument("protectTool needs an action name (name, or the tool's own name)");
  if ((opts as { needsApproval?: unknown }).needsApproval !== undefined) {
    throw new InvalidArgument(`${name}: the tool already has needsApproval; the policy decides when a human must approve (decision: approve), so remove it`);
  }
  const call = protection.call ?? {};
  if (typeof call !== 'object' || call === null) throw new InvalidArgument(`${name}: call must be call options`);
  const userExecute = opts.execute as Execute;
  const userError = opts.errorFunction as ErrorFunction | null | undefined;
  const pinned = protection.preconditions === undefined ? {} : { preconditions: protection.preconditions };
  const probe = protect<Record<string, unknown>, unknown>(() => undefined, { control, name, ...pinned });

  const execute = async (parsed: unknown, runContext?: unknown, details?: unknown): Promise<unknown> => {
    const box = (details as { [PROBE]?: { args?: unknown } } | undefined)?.[PROBE];
    if (box !== undefined) {
      // Returned, not thrown: a throw would reach the SDK's error path (and mark the run's span).
      box.args = parsed;
      return PROBED;
    }
    // The values the SDK parsed are what the policy decides on, what the hash binds and what
    // the function receives (as the canonical arguments, like every protected function).
    const run = protect<Record<string, unknown>, unknown>((canonical) => userExecute(canonical, runContext, details), { control, name, ...pinned });
    try {
      if (!isArgs(parsed)) throw new InvalidArgument(`${name}: the tool's parameters gave no object of arguments`);
      const action = await run.action(parsed, call);
      // An approve decision presents the request open for these exact arguments (the control path
      // refuses it unless a human granted it, through approveInterruption or any other surface);
      // none open means the arguments are not the ones asked about: refused, and nothing is filed.
      const open = (await control.evaluate(action)).decision === 'approve' ? await control.openApproval(action) : undefined;
      if (open === null) {
        // A human who approved with edited arguments answered the request: the edit runs, once,
        // and the model is told what ran.
        const edit = await unusedEditFor(control, action);
        if (edit === null) {
          // Its effect already happened (or nobody knows whether it did): needsApproval asked
          // nobody, and the control path refuses the call before asking (DuplicateEffect /
          // AmbiguousEffect, with its receipt); the model is told that, not that no request is open.
          if (await effectSettled(control, action)) return await run(parsed, { ...call, approvalId: null });
          throw new ApprovalMismatch('unknown', { message: noOpenRequest(name) });
        }
        // An edit approved through a surface that never ran the tool's parser (CLI, worker,
        // inbox) runs only if the parser admits it unchanged: execute never receives values its
        // parameters refuse or would have changed.
        await parsedUnchanged(edit.approvedArguments);
        return editedToolResult(edit, await run(parsed, { ...call, approvalId: edit.proposed }));
      }
      return await run(parsed, { ...call, approvalId: open?.request.requestId ?? null });
    } catch (err) {
      let context: { policy: Control['policy']; action: Action } | undefined;
      try {
        context = isArgs(parsed) ? { policy: control.policy, action: await run.action(parsed, call) } : undefined;
      } catch {
        context = undefined; // arguments that make no action: the refusal says so itself
      }
      const refusal: ToolRefusal | null = toolRefusal(err, context);
      if (refusal === null) throw err;
      return refusal;
    }
  };
  // A probe is nobody's error: with an outputSchema its marker fails the SDK's output check, and
  // the tool's own errorFunction must not see that.
  const errorFunction =
    typeof userError === 'function'
      ? (ctx: unknown, err: unknown, d?: unknown) => ((d as { [PROBE]?: unknown } | undefined)?.[PROBE] !== undefined ? '' : userError(ctx, err, d))
      : userError;
  const built = sdkTool({ ...opts, execute, ...(errorFunction === undefined ? {} : { errorFunction }) } as AnyToolOptions) as FunctionTool<
    Context,
    TParameters,
    Result | ToolRefusal | EditedToolResult<Result>
  >;

  const parse = async (text: string): Promise<Record<string, unknown>> => {
    const box: { args?: unknown } = {};
    // The SDK's own invoke parses the text exactly as it will for the real call, then stops in execute.
    await Promise.resolve(built.invoke(new RunContext() as never, text, { [PROBE]: box } as never)).catch(() => undefined);
    if (!('args' in box)) throw new InvalidArgument(`${name}: the tool's parameters refuse these arguments`);
    if (!isArgs(box.args)) throw new InvalidArgument(`${name}: the tool's parameters gave no object of arguments`);
    return box.args;
  };
  const parsedUnchanged = async (approved: JsonObject): Promise<void> => {
    const text = canonicalJson(approved);
    let same: boolean;
    try {
      same = canonicalJson(await parse(text)) === text;
    } catch (err) {
      if (!(err instanceof InvalidArgument)) throw err;
      throw new InvalidArgument(`${name}: the edited arguments were approved elsewhere, and the tool's parameters refuse them; the tool did not run`);
    }
    if (!same) throw new InvalidArgument(`${name}: the tool's parameters change the edited arguments, which were approved as they are; the tool did not run`);
  };
  const needsApproval = async (_runContext: unknown, input: unknown): Promise<boolean> => {
    let args: Record<string, unknown>;
    try {
      // The SDK hands needsApproval JSON.parse of the call's text; parse it as execute will see it.
      args = await parse(typeof input === 'string' ? input : JSON.stringify(input));
    } catch (err) {
      if (err instanceof InvalidArgument) return false; // the call itself says why
      throw err;
    }
    return probe.needsApproval(args, call);
  };

  const out = Object.assign(built, { needsApproval });
  guarded.set(out, { control, name, call, probe, parse });
  return out;
}

/**
 * Builds the function tools from the options you would give `tool()`, each protected as the
 * action `names[tool.name] ?? tool.name`: `needsApproval` is the policy's decision for the
 * arguments the SDK parsed, and the ctrlrun request is filed then (once per action hash);
 * `execute` runs through the control path with those same arguments, presenting the request a
 * human granted; refusals come back to the model as a {@link ToolRefusal} (the class, its reason,
 * a sentence built from the rule), and the tool never runs on one.
 */
export function protectTools(tools: readonly ToolListEntry[], options: ProtectToolsOptions): FunctionTool<any, any, any>[] {
  if (!Array.isArray(tools)) throw new InvalidArgument('protectTools needs an array of tool options (what you would give tool())');
  if (!options || typeof options !== 'object' || !options.control) throw new InvalidArgument('protectTools needs { control }');
  const names = options.names ?? {};
  if (typeof names !== 'object' || names === null) throw new InvalidArgument('names must be an object of tool name → action name');
  const toolNames = new Set(tools.map((t) => t?.name));
  for (const key of Object.keys(names)) {
    if (!toolNames.has(key)) throw new InvalidArgument(`names.${key}: there is no tool ${JSON.stringify(key)} in the list`);
  }
  return tools.map((t) => {
    const own = t?.name;
    const name = typeof own === 'string' && Object.hasOwn(names, own) ? names[own]! : own;
    return protectTool(t as unknown as AnyToolOptions, {
      control: options.control,
      ...(name === undefined ? {} : { name }),
      ...(options.call ? { call: options.call } : {}),
      ...(options.preconditions ? { preconditions: options.preconditions } : {}),
    });
  });
}

/** The protected tool an interruption is for, and the action its arguments make. */
async function interrupted(item: RunToolApprovalItem): Promise<{ guard: Guarded; action: Action }> {
  if (!item || item.type !== 'tool_approval_item') throw new InvalidArgument('expected an interruption (a RunToolApprovalItem from result.interruptions)');
  const toolName = item.name;
  const tool = (item.agent?.tools ?? []).find((t) => (t as { name?: string }).name === toolName);
  const guard = tool === undefined ? undefined : guarded.get(tool);
  if (guard === undefined)
    throw new InvalidArgument(
      `the interruption is for ${quotedForMessage(String(toolName), 200)}, which is not a tool protected by @ctrlrun/openai-agents on agent ${item.agent?.name ?? '?'}`,
    );
  if (typeof item.arguments !== 'string') throw new InvalidArgument(`${guard.name}: the interruption carries no JSON arguments`);
  const action = await guard.probe.action(await guard.parse(item.arguments), guard.call);
  return { guard, action };
}

/** The id the SDK keys a call's approval by (a function call's `callId`). */
function callIdOf(item: RunToolApprovalItem): string {
  const raw = item.rawItem as { callId?: unknown; id?: unknown };
  return typeof raw.callId === 'string' ? raw.callId : typeof raw.id === 'string' ? raw.id : '';
}

/** A value from the model or a UI, for a sentence: JSON, cut at 60 characters. */
function quote(value: string): string {
  const text = JSON.stringify(value);
  return text.length <= 60 ? text : `${text.slice(0, 60)}…`;
}

/**
 * Refuses an answer for a call `state` does not wait on: an interruption from another run or an
 * older state (a stale screen, a second tab). The SDK keys an answer by tool name and call id
 * only, so such an answer could decide this run's own call, one the human never saw, and the
 * ctrlrun request of the other call would be answered for a run that will not execute it.
 */
function checkWaitedOn(state: RunState<any, any>, item: RunToolApprovalItem, name: string): void {
  if (!state || typeof state.getInterruptions !== 'function') throw new InvalidArgument(`${name}: expected the run state the interruption came from`);
  const callId = callIdOf(item);
  const waited = state
    .getInterruptions()
    .some(
      (i) =>
        i === item ||
        (i.type === 'tool_approval_item' &&
          i.name === item.name &&
          callIdOf(i) === callId &&
          i.arguments === item.arguments &&
          i.agent?.name === item.agent?.name),
    );
  if (!waited)
    throw new ApprovalMismatch('mismatch', {
      message: `${name}: the answer is for call ${quote(callId)} with arguments ${quote(String(item.arguments))}, which this run state does not wait on (an interruption from another run or an older state); nothing was answered`,
    });
}

/**
 * The ctrlrun request open for an interruption's exact arguments (what to show the human: its
 * `request.requestId`, `request.action`, `request.expiresAt`), or null when none is open.
 */
export async function approvalRequestFor(item: RunToolApprovalItem): Promise<ApprovalRecord | null> {
  const { guard, action } = await interrupted(item);
  return guard.control.openApproval(action);
}

/**
 * Whether the effect key `action` would reserve (its policy entry's `effect:`) is already
 * `committed` or `ambiguous`: a read only, as the control path's own check before asking is. No
 * template, or one these arguments cannot fill: false (the call itself says why).
 */
async function effectSettled(control: Control, action: Action): Promise<boolean> {
  const template = control.policy.action(action.name)?.effect ?? null;
  if (template === null) return false;
  let key: string;
  try {
    key = resolveEffectTemplate(template, action.canonicalArguments, action.resource);
  } catch {
    return false;
  }
  const state = (await control.store.getEffect(key))?.state;
  return state === 'committed' || state === 'ambiguous';
}

/** The request open for `action`, which must be `requestId` when given; else `ApprovalMismatch`. */
async function shownRequest(guard: Guarded, action: Action, requestId: string | undefined): Promise<ApprovalRecord> {
  if (requestId !== undefined && typeof requestId !== 'string') throw new InvalidArgument('requestId must be a string (the request id shown to the human)');
  const open = await guard.control.openApproval(action);
  if (open === null)
    throw new ApprovalMismatch('unknown', { ...(requestId === undefined ? {} : { approvalId: requestId }), message: noOpenRequest(guard.name) });
  if (requestId !== undefined && open.request.requestId !== requestId) {
    throw new ApprovalMismatch('mismatch', {
      approvalId: requestId,
      message: `${guard.name}: the human was shown request ${requestId}, but the interruption's arguments now make the action of request ${open.request.requestId}; nothing was answered`,
    });
  }
  return open;
}

/**
 * The human approves an interruption: the ctrlrun request open for its exact arguments is granted
 * as `approver` (unless already granted elsewhere), then `state.approve(item)`. With `edit`, the
 * edited arguments are granted instead (see {@link ApproveOptions.edit}); the run then executes
 * them and the model is told. No request open
 * for these arguments (they changed, or the request was answered or expired): `ApprovalMismatch`,
 * and the state is left unanswered.
 */
export async function approveInterruption(state: RunState<any, any>, item: RunToolApprovalItem, options: ApproveOptions): Promise<void> {
  const approver = checkActor(options?.approver, 'approver');
  const { guard, action } = await interrupted(item);
  checkWaitedOn(state, item, guard.name);
  const edit = options.edit === undefined ? undefined : await editedArguments(guard, options.edit);
  if (edit === undefined && (await guard.control.openApproval(action)) === null) {
    // Answered already with an edit (here earlier, another process, the CLI): the run executes
    // that edit and the model is told; nothing more to record.
    const earlier = await unusedEditFor(guard.control, action);
    if (earlier !== null && (options.requestId === undefined || options.requestId === earlier.proposed)) {
      state.approve(item);
      return;
    }
  }
  const open = await shownRequest(guard, action, options.requestId);
  if (edit !== undefined) await guard.control.grantApproval(open.request.requestId, { approver, edit: { arguments: edit } });
  else if (open.status === 'pending') await guard.control.grantApproval(open.request.requestId, { approver });
  state.approve(item);
}

/** The edited arguments as the tool's parser makes them (what the function will receive); else `InvalidArgument`. */
async function editedArguments(guard: Guarded, edit: unknown): Promise<JsonObject> {
  const given = (edit as { arguments?: unknown } | null)?.arguments;
  if (
    typeof edit !== 'object' ||
    edit === null ||
    Object.keys(edit).some((k) => k !== 'arguments') ||
    typeof given !== 'object' ||
    given === null ||
    Array.isArray(given)
  ) {
    throw new InvalidArgument(`${guard.name}: edit must be { arguments: { … } } (a plain object of the edited arguments)`);
  }
  let text: string;
  try {
    text = JSON.stringify(given);
  } catch (err) {
    throw new InvalidArgument(`${guard.name}: the edited arguments are not JSON (${(err as Error).message})`);
  }
  return (await guard.parse(text)) as JsonObject;
}

/**
 * The human rejects an interruption: the ctrlrun request open for its exact arguments is denied
 * as `approver`, then `state.reject(item, { message })`; the model is told `message` (else the
 * SDK's default).
 */
export async function rejectInterruption(state: RunState<any, any>, item: RunToolApprovalItem, options: AnswerOptions & { message?: string }): Promise<void> {
  const approver = checkActor(options?.approver, 'approver');
  const { guard, action } = await interrupted(item);
  checkWaitedOn(state, item, guard.name);
  // The SDK lets an approval win over a later rejection of the same call: the rejection would be
  // dropped in silence and the call run.
  if (state._context.isToolApproved({ toolName: item.name ?? '', callId: callIdOf(item) }) === true)
    throw new ApprovalMismatch('answered', {
      message: `${guard.name}: this call was already approved in this run state, where an approval wins over a later rejection: the rejection is refused, nothing was answered`,
    });
  const open = options.requestId === undefined ? await guard.control.openApproval(action) : await shownRequest(guard, action, options.requestId);
  if (open?.status === 'pending') await guard.control.denyApproval(open.request.requestId, { approver });
  state.reject(item, options.message === undefined ? {} : { message: options.message });
}
