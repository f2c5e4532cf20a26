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
import type { FunctionTool, RunState, RunToolApprovalItem } from '@openai/agents';
import {
  ApprovalMismatch,
  InvalidArgument,
  checkActor,
  protect,
  toolRefusal,
  type Action,
  type CallOptions,
  type Control,
  type Protected,
  type ToolRefusal,
} from '@ctrlrun/kernel';

export type { ToolRefusal } from '@ctrlrun/kernel';

/** Options of {@link protectTool}. */
export interface ProtectToolOptions {
  control: Control;
  /** The action name the policy matches. */
  name: string;
  /** The principal or headers of every call (else the Control's default principal or identity provider). */
  call?: CallOptions;
}

/** Options of {@link protectTools}. */
export interface ProtectToolsOptions {
  control: Control;
  /** The action name the policy matches, per tool name; else the tool name itself. */
  names?: Readonly<Record<string, string>>;
  call?: CallOptions;
}

/** Options of {@link approveInterruption} and {@link rejectInterruption}. */
export interface AnswerOptions {
  /** Who answered: recorded on the ctrlrun request, its events and the receipt. */
  approver: string;
}

const noOpenRequest = (name: string) =>
  `${name}: no approval request is open for these exact arguments (they changed after the approval was asked, or the request was already answered or expired)`;

interface Guarded {
  readonly control: Control;
  readonly name: string;
  readonly call: CallOptions;
  readonly probe: Protected<Record<string, unknown>, unknown>;
}

/** Which tools this package protected, and how. */
const guarded = new WeakMap<object, Guarded>();

function parseArguments(text: unknown, name: string): Record<string, unknown> {
  if (typeof text !== 'string') throw new InvalidArgument(`${name}: the tool call carries no JSON arguments`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new InvalidArgument(`${name}: the tool call's arguments are not JSON`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new InvalidArgument(`${name}: the tool call's arguments are not a JSON object`);
  return parsed as Record<string, unknown>;
}

/**
 * One function tool, protected: `needsApproval` is the policy's decision for the exact arguments
 * and `invoke` runs as action `name` through the control path. See {@link protectTools}.
 */
export function protectTool<T extends FunctionTool<any, any, any>>(tool: T, options: ProtectToolOptions): T {
  if (!options || typeof options !== 'object' || !options.control) throw new InvalidArgument('protectTool needs { control, name }');
  if (typeof options.name !== 'string' || options.name === '') throw new InvalidArgument('protectTool needs a non-empty action name');
  const { control, name } = options;
  if (!tool || typeof tool !== 'object' || tool.type !== 'function' || typeof tool.invoke !== 'function') {
    throw new InvalidArgument(`${name}: protectTool needs a function tool (tool({ … }) from @openai/agents)`);
  }
  if (guarded.has(tool)) throw new InvalidArgument(`${name}: the tool ${tool.name} is already protected`);
  const call = options.call ?? {};
  if (typeof call !== 'object' || call === null) throw new InvalidArgument(`${name}: call must be call options`);
  const original = tool.invoke.bind(tool);
  const probe = protect<Record<string, unknown>, unknown>(() => undefined, { control, name });
  const needsApproval = (_runContext: unknown, input: unknown): Promise<boolean> => probe.needsApproval(input as Record<string, unknown>, call);

  const invoke: FunctionTool['invoke'] = async (runContext, input, details) => {
    // The protected function hands the SDK the call's own input; the control path has hashed
    // exactly what it parses to.
    const run = protect<Record<string, unknown>, unknown>(() => original(runContext, input, details), { control, name });
    try {
      const args = parseArguments(input, name);
      const action = await run.action(args, call);
      // An approve decision presents the request open for these exact arguments (the control path
      // refuses it unless a human granted it, through approveInterruption or any other surface);
      // none open means the arguments are not the ones asked about: refused, and nothing is filed.
      const open = (await control.evaluate(action)).decision === 'approve' ? await control.openApproval(action) : undefined;
      if (open === null) {
        // The SDK approved a call ctrlrun never put to anyone: its arguments are not the ones asked about.
        throw new ApprovalMismatch('unknown', { message: noOpenRequest(name) });
      }
      return await run(args, { ...call, approvalId: open?.request.requestId ?? null });
    } catch (err) {
      let context: { policy: Control['policy']; action: Action } | undefined;
      try {
        context = { policy: control.policy, action: await run.action(parseArguments(input, name), call) };
      } catch {
        context = undefined; // arguments that make no action: the refusal says so itself
      }
      const refusal: ToolRefusal | null = toolRefusal(err, context);
      if (refusal === null) throw err;
      return refusal;
    }
  };

  const out = Object.assign(Object.create(Object.getPrototypeOf(tool) as object) as T, tool, { needsApproval, invoke });
  guarded.set(out, { control, name, call, probe });
  return out;
}

/**
 * Returns the same function tools, each protected as the action `names[tool.name] ??
 * tool.name`: `needsApproval` is the policy's decision for the exact arguments, and the
 * ctrlrun request is filed then (once per action hash); `invoke` runs through the control path,
 * presenting the request a human granted; refusals come back to the model as a
 * {@link ToolRefusal} (the class, its reason, a sentence built from the rule), and the tool
 * never runs on one.
 */
export function protectTools<T extends FunctionTool<any, any, any>>(tools: readonly T[], options: ProtectToolsOptions): T[] {
  if (!Array.isArray(tools)) throw new InvalidArgument('protectTools needs an array of function tools');
  if (!options || typeof options !== 'object' || !options.control) throw new InvalidArgument('protectTools needs { control }');
  const names = options.names ?? {};
  if (typeof names !== 'object' || names === null) throw new InvalidArgument('names must be an object of tool name → action name');
  const toolNames = new Set(tools.map((t) => t?.name));
  for (const key of Object.keys(names)) {
    if (!toolNames.has(key)) throw new InvalidArgument(`names.${key}: there is no tool ${JSON.stringify(key)} in the list`);
  }
  return tools.map((t) => {
    const name = Object.hasOwn(names, t?.name) ? names[t.name]! : t?.name;
    return protectTool(t, { control: options.control, name, ...(options.call ? { call: options.call } : {}) });
  });
}

/** The protected tool an interruption is for, and the action its arguments make. */
async function interrupted(item: RunToolApprovalItem): Promise<{ guard: Guarded; action: Action }> {
  if (!item || item.type !== 'tool_approval_item') throw new InvalidArgument('expected an interruption (a RunToolApprovalItem from result.interruptions)');
  const toolName = item.name;
  const tool = (item.agent?.tools ?? []).find((t) => (t as { name?: string }).name === toolName);
  const guard = tool === undefined ? undefined : guarded.get(tool);
  if (guard === undefined) throw new InvalidArgument(`the interruption is for ${JSON.stringify(toolName)}, which is not a tool protected by @ctrlrun/openai-agents on agent ${item.agent?.name ?? '?'}`);
  const action = await guard.probe.action(parseArguments(item.arguments, guard.name), guard.call);
  return { guard, action };
}

/**
 * The human approves an interruption: the ctrlrun request open for its exact arguments is granted
 * as `approver` (unless already granted elsewhere), then `state.approve(item)`. No request open
 * for these arguments (they changed, or the request was answered or expired): `ApprovalMismatch`,
 * and the state is left unanswered.
 */
export async function approveInterruption(state: RunState<any, any>, item: RunToolApprovalItem, options: AnswerOptions): Promise<void> {
  const approver = checkActor(options?.approver, 'approver');
  const { guard, action } = await interrupted(item);
  const open = await guard.control.openApproval(action);
  if (open === null) {
    throw new ApprovalMismatch('unknown', { message: noOpenRequest(guard.name) });
  }
  if (open.status === 'pending') await guard.control.grantApproval(open.request.requestId, { approver });
  state.approve(item);
}

/**
 * The human rejects an interruption: the ctrlrun request open for its exact arguments is denied
 * as `approver`, then `state.reject(item, { message })`; the model is told `message` (else the
 * SDK's default).
 */
export async function rejectInterruption(state: RunState<any, any>, item: RunToolApprovalItem, options: AnswerOptions & { message?: string }): Promise<void> {
  const approver = checkActor(options?.approver, 'approver');
  const { guard, action } = await interrupted(item);
  const open = await guard.control.openApproval(action);
  if (open?.status === 'pending') await guard.control.denyApproval(open.request.requestId, { approver });
  state.reject(item, options.message === undefined ? {} : { message: options.message });
}
