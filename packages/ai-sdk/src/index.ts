/**
 * `@ctrlrun/ai-sdk`: ctrlrun for the Vercel AI SDK. `protectTools(tools, { control })` returns
 * the same tool set in which every tool call runs through the control path, and the SDK's own
 * tool-approval flow (`needsApproval`, `tool-approval-request`, `tool-approval-response`) is
 * driven by the policy and bound to the action hash. The adapter decides nothing itself.
 *
 * @module
 */
import { asSchema, type ModelMessage, type Tool, type ToolExecutionOptions, type ToolSet } from 'ai';
import {
  ApprovalMismatch,
  InvalidArgument,
  canonicalJson,
  checkActor,
  editedToolResult,
  protect,
  toolRefusal,
  type CallOptions,
  type PreconditionProvider,
  type Control,
  type Action,
  type EditedToolResult,
  type JsonObject,
  type Policy,
  type ToolRefusal,
  quotedForMessage,
} from '@ctrlrun/kernel';

export type { EditedToolResult, ToolRefusal } from '@ctrlrun/kernel';
export { isEditedToolResult } from '@ctrlrun/kernel';

/** Per-call extras for the control path, from the SDK's `experimental_context`. */
export type CallFor = (experimentalContext: unknown) => CallOptions;

/** Options of {@link protectTools}. */
export interface ProtectToolsOptions<TOOLS extends ToolSet> {
  control: Control;
  /** The action name the policy matches, per tool key; else the key itself. */
  names?: { readonly [K in keyof TOOLS]?: string };
  /**
   * Who answered the SDK's approval request, as recorded on the ctrlrun grant and the receipt
   * (`ai-sdk:tool-approval-response` unless given). The SDK's response names nobody; an app that
   * knows its signed-in user passes a function of `experimental_context`.
   */
  approver?: string | ((experimentalContext: unknown) => string);
  /** The principal or headers of a call (else the Control's default principal or identity provider). */
  call?: CallOptions | CallFor;
  /**
   * Which ctrlrun request each SDK tool call was asked with (see {@link ApprovalBindings}); an
   * in-process map unless given. Give every process that answers approvals the same one.
   */
  bindings?: ApprovalBindings;
  /**
   * A precondition provider (see `protect`'s `preconditions`): the world's state a request is filed
   * against, asked again when the approval is presented; the call is refused if it changed.
   */
  preconditions?: PreconditionProvider;
}

/**
 * Where the adapter remembers which ctrlrun approval request was filed when the SDK asked about
 * a tool call (`toolCallId` → request id). The SDK's approval response comes back inside a
 * message history the client sends, so the arguments and ids in it are claims: an approval is
 * only ever turned into a grant of the request filed for that same tool call, and only when the
 * arguments now in the call hash to that request's action. A tool call with no binding here is
 * refused (`ApprovalMismatch`), nothing granted. The default, {@link memoryBindings}, lives in
 * one process; when approvals come back to another process (serverless, several instances), pass
 * bindings kept where your sessions are.
 */
export interface ApprovalBindings {
  /** Remembers that tool call `toolCallId` was asked with ctrlrun request `requestId`. */
  bind(toolCallId: string, requestId: string): void | Promise<void>;
  /** The request tool call `toolCallId` was asked with, or null. */
  requestFor(toolCallId: string): string | null | undefined | Promise<string | null | undefined>;
}

/** In-process {@link ApprovalBindings}: at most `limit` tool calls (oldest forgotten first; 100 000 unless given). */
export function memoryBindings(limit = 100_000): ApprovalBindings {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new InvalidArgument('memoryBindings: limit must be a positive integer');
  const map = new Map<string, string>();
  return {
    bind(toolCallId, requestId) {
      map.delete(toolCallId);
      map.set(toolCallId, requestId);
      if (map.size > limit) map.delete(map.keys().next().value as string);
    },
    requestFor: (toolCallId) => map.get(toolCallId) ?? null,
  };
}

/** Options of {@link protectTool}. */
export interface ProtectToolOptions extends Omit<ProtectToolsOptions<ToolSet>, 'names'> {
  /** The action name the policy matches. */
  name: string;
}

const DEFAULT_APPROVER = 'ai-sdk:tool-approval-response';

/** Whether a tool's output is a {@link ToolRefusal}. */
export function isToolRefusal(output: unknown): output is ToolRefusal {
  return (
    typeof output === 'object' &&
    output !== null &&
    (output as { refused?: unknown }).refused === true &&
    typeof (output as { code?: unknown }).code === 'string'
  );
}

/** The answer to a tool call's approval request in a history, as the SDK reads it. */
interface ApprovalAnswer {
  readonly approvalId: string;
  /** The response the SDK acts on: `null` when there is none. */
  readonly approved: boolean | null;
  readonly reason: string | null;
  /**
   * The call already has a result before the last message (executed, refused, or denied by the
   * SDK): a response to it now is a late one, from a stale screen or a second tab.
   */
  readonly answered: boolean;
}

/**
 * The SDK's approval request for `toolCallId` in `messages`, and the response to it, if any. The
 * response that counts is the one the SDK acts on: the first one in the last message (a `tool`
 * message), as `generateText`/`streamText` collect them; an earlier response, one the SDK already
 * handled (a denial it answered itself) or one a failed call left behind, is never read in its
 * place. With none there (`execute` called outside the SDK), the newest response in the history.
 */
function approvalFor(toolCallId: string, messages: readonly ModelMessage[]): ApprovalAnswer | null {
  let approvalId: string | null = null;
  for (const m of messages) {
    if (m.role !== 'assistant' || typeof m.content === 'string') continue;
    for (const part of m.content) if (part.type === 'tool-approval-request' && part.toolCallId === toolCallId) approvalId = part.approvalId;
  }
  if (approvalId === null) return null;
  let answer: { approved: boolean; reason: string | null } | null = null;
  let answered = false;
  const lastIndex = messages.length - 1;
  for (const [i, m] of messages.entries()) {
    if (m.role !== 'tool') continue;
    let first: { approved: boolean; reason: string | null } | null = null;
    for (const part of m.content) {
      if (i < lastIndex && part.type === 'tool-result' && part.toolCallId === toolCallId) answered = true;
      if (first === null && part.type === 'tool-approval-response' && part.approvalId === approvalId)
        first = { approved: part.approved === true, reason: part.reason ?? null };
    }
    if (first !== null) answer = first;
  }
  return { approvalId, approved: answer?.approved ?? null, reason: answer?.reason ?? null, answered };
}

/** The policy and action a refusal is explained by, when these arguments make an action. */
async function refusalContext(control: Control, action: () => Promise<Action>): Promise<{ policy: Policy; action: Action } | undefined> {
  try {
    return { policy: control.policy, action: await action() };
  } catch {
    return undefined;
  }
}

function pick<T>(option: T | ((ctx: unknown) => T) | undefined, ctx: unknown, fallback: T): T {
  if (option === undefined) return fallback;
  return typeof option === 'function' ? (option as (ctx: unknown) => T)(ctx) : option;
}

/**
 * One tool, protected: its `execute` runs as action `name` through the control path, and its
 * `needsApproval` is the policy's decision for the exact arguments. See {@link protectTools}.
 */
export function protectTool<INPUT, OUTPUT>(
  tool: Tool<INPUT, OUTPUT>,
  options: ProtectToolOptions,
): Tool<INPUT, OUTPUT | ToolRefusal | EditedToolResult<OUTPUT>> {
  if (!options || typeof options !== 'object' || !options.control) throw new InvalidArgument('protectTool needs { control, name }');
  if (typeof options.name !== 'string' || options.name === '') throw new InvalidArgument('protectTool needs a non-empty action name');
  const { control, name } = options;
  if (!tool || typeof tool !== 'object') throw new InvalidArgument(`${name}: protectTool needs an AI SDK tool`);
  const execute = tool.execute;
  if (typeof execute !== 'function') {
    throw new InvalidArgument(`${name}: the tool has no execute function (a client-side tool runs outside this process and cannot be protected here)`);
  }
  if (tool.needsApproval !== undefined) {
    throw new InvalidArgument(`${name}: the tool already has needsApproval; the policy decides when a human must approve (decision: approve), so remove it`);
  }
  if (options.approver !== undefined && typeof options.approver !== 'string' && typeof options.approver !== 'function') {
    throw new InvalidArgument(`${name}: approver must be a string or a function of experimental_context`);
  }
  if (options.call !== undefined && (options.call === null || (typeof options.call !== 'object' && typeof options.call !== 'function'))) {
    throw new InvalidArgument(`${name}: call must be call options or a function of experimental_context`);
  }

  if (options.bindings !== undefined && (typeof options.bindings?.bind !== 'function' || typeof options.bindings?.requestFor !== 'function')) {
    throw new InvalidArgument(`${name}: bindings must have bind(toolCallId, requestId) and requestFor(toolCallId)`);
  }
  const bindings = options.bindings ?? memoryBindings();
  if (typeof options.approver === 'string') checkActor(options.approver, 'approver');
  // protect hands its function only the canonical arguments; the SDK's execution options of the
  // call in progress reach the tool through a runner made for that call.
  const runner = (run: (args: Record<string, unknown>) => unknown) =>
    protect<Record<string, unknown>, unknown>((args) => run(args), {
      control,
      name,
      ...(options.preconditions === undefined ? {} : { preconditions: options.preconditions }),
    });
  const asker = runner(() => undefined);
  const callOf = (ctx: unknown): CallOptions => pick(options.call, ctx, {});
  const approverOf = (ctx: unknown): string => {
    const approver = pick(options.approver, ctx, DEFAULT_APPROVER);
    try {
      return checkActor(approver, 'approver');
    } catch (err) {
      // A wiring bug, not a refusal the model should read: a plain error, thrown as such.
      throw new TypeError(`${name}: the approver option gave ${JSON.stringify(approver)}: ${(err as Error).message}`);
    }
  };

  const needsApproval = async (input: INPUT, o: { toolCallId: string; messages: ModelMessage[]; experimental_context?: unknown }): Promise<boolean> => {
    const args = input as Record<string, unknown>;
    const call = callOf(o.experimental_context);
    // The SDK asks again when the answer comes back (re-validation): file nothing then, so an
    // answer can only grant a request made before it, for the arguments shown.
    if (approvalFor(o.toolCallId, o.messages) !== null) {
      if (control.observing) return false;
      try {
        return (await control.evaluate(await asker.action(args, call))).decision === 'approve';
      } catch (err) {
        if (toolRefusal(err) !== null) return false; // arguments that make no action: execute says why
        throw err;
      }
    }
    if (!(await asker.needsApproval(args, call))) return false;
    // The request just filed (or re-found) for these arguments is the one this tool call asks with.
    const open = await control.openApproval(await asker.action(args, call));
    if (open === null) return false; // answered in between: execute presents nothing and says why
    await bindings.bind(o.toolCallId, open.request.requestId);
    return true;
  };

  const protectedExecute = async (input: INPUT, o: ToolExecutionOptions): Promise<OUTPUT | ToolRefusal | EditedToolResult<OUTPUT>> => {
    const ctx = o.experimental_context;
    const call = callOf(ctx);
    const args = input as Record<string, unknown>;
    const run = runner((canonical) => execute(canonical as INPUT, o));
    try {
      const answer = approvalFor(o.toolCallId, o.messages);
      if (answer !== null && answer.answered && answer.approved !== null) {
        // The SDK runs a call again when a response to it comes back after its result: a stale
        // screen answering a call already executed, refused or denied. Nothing is recorded, so the
        // request stays open for the call the human is shown now (the model's retry asks again).
        throw new ApprovalMismatch('answered', {
          message: `${name}: tool call ${quotedForMessage(String(o.toolCallId), 200)} was already answered (its result is in the history), so this later answer to it is refused and nothing is recorded; answer the call the model asks now`,
        });
      }
      if (answer === null || answer.approved === null) return (await run(args, call)) as OUTPUT;
      const action = await run.action(args, call);
      const approver = approverOf(ctx);
      // The answer counts only for the request this tool call was asked with, and only if the
      // arguments now in the call are the ones that request was filed for: the history is the
      // client's, and its arguments or ids may have been changed to reach another request.
      const bound = await bindings.requestFor(o.toolCallId);
      if (typeof bound !== 'string') {
        throw new ApprovalMismatch('unknown', {
          message: `${name}: no approval request was asked for tool call ${quotedForMessage(String(o.toolCallId), 200)} here (an approval answers only the request filed when the SDK asked about that call)`,
        });
      }
      const record = await control.store.getApproval(bound);
      if (record === null) throw new ApprovalMismatch('unknown', { approvalId: bound, message: `${name}: approval request ${bound} does not exist` });
      if (record.request.actionHash !== action.actionHash) {
        throw new ApprovalMismatch('mismatch', {
          approvalId: bound,
          message: `${name}: the approval was asked for other arguments than the ones in this tool call now (request ${bound}); nothing was granted`,
        });
      }
      if (answer.approved === false) {
        // The SDK does not execute a denied call; if something does, the request is denied too.
        if (record.status === 'pending') await control.denyApproval(bound, { approver });
        throw new ApprovalMismatch('denied', {
          approvalId: bound,
          message: `${name}: the human denied this call${answer.reason ? ` (${answer.reason})` : ''}`,
        });
      }
      // Answered with an edit (approveWithEdit, or another surface): the edited arguments run,
      // and the model is told so, with them. An edit from a surface that never saw this tool's
      // input schema (CLI, worker, inbox) runs only if the schema admits it unchanged: execute
      // never receives arguments its schema refuses or would have changed.
      const found = record.status === 'denied' ? await control.approvalEdit(bound) : null;
      const edit = found !== null && found.proposed === bound ? found : null;
      if (edit !== null && !schemaMade.has(edit.approvedHash)) await admittedUnchanged({ name, inputSchema: tool.inputSchema }, edit.approvedArguments);
      // Granted already through another surface (CLI, worker): presented as is; answered
      // otherwise or expired: presented, and the control path says why it is refused.
      if (record.status === 'pending') await control.grantApproval(bound, { approver });
      const output = (await run(args, { ...call, approvalId: bound })) as OUTPUT;
      return edit !== null ? editedToolResult(edit, output) : output;
    } catch (err) {
      const refusal = toolRefusal(err, await refusalContext(control, () => run.action(args, call)));
      if (refusal === null) throw err;
      return refusal;
    }
  };

  const out = { ...tool, needsApproval, execute: protectedExecute } as Tool<INPUT, OUTPUT | ToolRefusal | EditedToolResult<OUTPUT>>;
  guards.set(out, { control, name, bindings, inputSchema: tool.inputSchema });
  return out;
}

/** What {@link approveWithEdit} needs of a protected tool. */
interface Guard {
  readonly control: Control;
  readonly name: string;
  readonly bindings: ApprovalBindings;
  readonly inputSchema: unknown;
}

/** The tools this package protected. */
const guards = new WeakMap<object, Guard>();

/**
 * The action hashes of edits {@link approveWithEdit} granted in this process: their arguments are
 * the tool's input schema's own output, so execute runs them as they are (a schema whose
 * transforms are not idempotent would refuse its own output). An edit granted anywhere else must
 * be a fixed point of the schema. At most 10 000 remembered, oldest forgotten first.
 */
const schemaMade = (() => {
  const seen = new Set<string>();
  return {
    add(hash: string) {
      seen.delete(hash);
      seen.add(hash);
      if (seen.size > 10_000) seen.delete(seen.values().next().value as string);
    },
    has: (hash: string) => seen.has(hash),
  };
})();

/** Options of {@link approveWithEdit}. */
export interface ApproveWithEditOptions {
  /** The conversation holding the SDK's approval request (as it will be passed back to the SDK). */
  readonly messages: readonly ModelMessage[];
  /** The SDK's approval request being answered (`tool-approval-request`'s `approvalId`). */
  readonly approvalId: string;
  /** The arguments the human approves instead of the proposed ones. */
  readonly arguments: Record<string, unknown>;
  /** Who edited and approved: recorded on the requests, their events and the receipt. */
  readonly approver: string;
}

/**
 * Edit-then-approve for the AI SDK, whose `tool-approval-response` has no field for edited
 * arguments: call this where your app receives the human's answer, then append the message it
 * returns (an ordinary `tool-approval-response`, `approved: true`) to the history and call
 * `generateText`/`streamText` again as usual. It finds the ctrlrun request the SDK's tool call was
 * asked with (`bindings`), runs the edited arguments through the tool's `inputSchema` (what
 * `execute` would receive), and grants them through `control.grantApproval(…, { edit })`: decided
 * again by policy and authority (an edit never lifts a deny), the proposed request answered
 * `denied` and a new one granted for the edited hash. When the SDK then executes the call, the
 * edited arguments run, once, and the tool result is an {@link EditedToolResult} naming what
 * changed. Leave the tool call in the history as proposed: an answer only counts for the
 * arguments its request was filed for. A denied edit throws `ActionDenied` with the rule's
 * sentence, and nothing is written.
 */
export async function approveWithEdit(tools: ToolSet, options: ApproveWithEditOptions): Promise<ModelMessage> {
  if (!tools || typeof tools !== 'object') throw new InvalidArgument('approveWithEdit needs the protected tool set');
  if (!options || typeof options !== 'object' || !Array.isArray(options.messages))
    throw new InvalidArgument('approveWithEdit needs { messages, approvalId, arguments, approver }');
  const approver = checkActor(options.approver, 'approver');
  const { approvalId, messages } = options;
  if (typeof approvalId !== 'string' || approvalId === '') throw new InvalidArgument('approvalId must be the SDK approval request id (a non-empty string)');
  let toolCallId: string | null = null;
  let toolName: string | null = null;
  for (const m of messages) {
    if (m.role !== 'assistant' || typeof m.content === 'string') continue;
    for (const part of m.content) if (part.type === 'tool-approval-request' && part.approvalId === approvalId) toolCallId = part.toolCallId;
  }
  if (toolCallId === null) throw new InvalidArgument(`no tool-approval-request ${quotedForMessage(String(approvalId), 200)} in messages`);
  for (const m of messages) {
    if (m.role !== 'assistant' || typeof m.content === 'string') continue;
    for (const part of m.content) if (part.type === 'tool-call' && part.toolCallId === toolCallId) toolName = part.toolName;
  }
  if (toolName === null)
    throw new InvalidArgument(
      `approval ${quotedForMessage(String(approvalId), 200)} is for tool call ${quotedForMessage(String(toolCallId), 200)}, which is not in messages`,
    );
  const tool = Object.hasOwn(tools, toolName) ? (tools as Record<string, unknown>)[toolName] : undefined;
  const guard = tool === undefined || tool === null || typeof tool !== 'object' ? undefined : guards.get(tool);
  if (guard === undefined)
    throw new InvalidArgument(`the tool call is for ${quotedForMessage(String(toolName), 200)}, which is not a tool protected by @ctrlrun/ai-sdk in this set`);
  const edited = await validEdit(guard, options.arguments);
  const requestId = await guard.bindings.requestFor(toolCallId);
  if (typeof requestId !== 'string') {
    throw new ApprovalMismatch('unknown', {
      message: `${guard.name}: no approval request was asked for tool call ${quotedForMessage(String(toolCallId), 200)} here; nothing was granted`,
    });
  }
  // The history is the client's: its tool name is a claim. The edit is checked against the schema
  // of the tool whose action the request was filed for, never another tool's.
  const record = await guard.control.store.getApproval(requestId);
  if (record !== null && record.request.action.name !== guard.name) {
    throw new ApprovalMismatch('mismatch', {
      approvalId: requestId,
      message: `${guard.name}: tool call ${quotedForMessage(String(toolCallId), 200)} was asked as ${record.request.action.name}, not ${guard.name} (the history names another tool); nothing was granted`,
    });
  }
  const granted = await guard.control.grantApproval(requestId, { approver, edit: { arguments: edited } });
  schemaMade.add(granted.actionHash);
  return { role: 'tool', content: [{ type: 'tool-approval-response', approvalId, approved: true, reason: `approved with edited arguments by ${approver}` }] };
}

/**
 * Refuses (`InvalidArgument`) edited arguments the tool's input schema refuses or would change
 * (defaults, coercions, stripped keys): the grant is bound to their hash, so they must already be
 * what the schema makes of them.
 */
async function admittedUnchanged(guard: Pick<Guard, 'name' | 'inputSchema'>, args: JsonObject): Promise<void> {
  let parsed: JsonObject;
  try {
    parsed = await validEdit(guard, args);
  } catch (err) {
    if (!(err instanceof InvalidArgument)) throw err;
    throw new InvalidArgument(`${err.message}; the edit was approved elsewhere, and the tool did not run`);
  }
  let same: boolean;
  try {
    same = canonicalJson(parsed) === canonicalJson(args);
  } catch {
    same = false;
  }
  if (!same)
    throw new InvalidArgument(`${guard.name}: the tool's input schema changes the edited arguments, which were approved as they are; the tool did not run`);
}

/** The edited arguments as the tool's input schema makes them; else `InvalidArgument` naming why. */
async function validEdit(guard: Pick<Guard, 'name' | 'inputSchema'>, args: unknown): Promise<JsonObject> {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) throw new InvalidArgument(`${guard.name}: the edited arguments must be a plain object`);
  const schema = guard.inputSchema === undefined ? undefined : asSchema(guard.inputSchema as Parameters<typeof asSchema>[0]);
  if (schema?.validate === undefined) return args as JsonObject;
  const result = await schema.validate(args);
  if (!result.success) throw new InvalidArgument(`${guard.name}: the tool's input schema refuses the edited arguments: ${result.error.message}`);
  if (typeof result.value !== 'object' || result.value === null || Array.isArray(result.value))
    throw new InvalidArgument(`${guard.name}: the tool's input schema gave no object of arguments`);
  return result.value as JsonObject;
}

/** A tool set in which every tool may also return a {@link ToolRefusal}. */
export type ProtectedTools<TOOLS extends ToolSet> = {
  [K in keyof TOOLS]: TOOLS[K] extends Tool<infer I, infer O> ? Tool<I, O | ToolRefusal | EditedToolResult<O>> : TOOLS[K];
};

/**
 * Returns the same tool set in which each tool's `execute` runs through the control path as the
 * action `names[key] ?? key`, and each tool's `needsApproval` is the policy's decision for the
 * exact arguments (the request is filed then, once per action hash). The SDK's approval
 * response grants that request (attributed to `approver`) and the call runs presenting it; if
 * the arguments changed, nothing is granted. Refusals come back as {@link ToolRefusal} results;
 * the protected function never runs on one.
 */
export function protectTools<TOOLS extends ToolSet>(tools: TOOLS, options: ProtectToolsOptions<TOOLS>): ProtectedTools<TOOLS> {
  if (!tools || typeof tools !== 'object' || Array.isArray(tools)) throw new InvalidArgument('protectTools needs a tool set (an object of tools)');
  if (!options || typeof options !== 'object' || !options.control) throw new InvalidArgument('protectTools needs { control }');
  const names = options.names ?? {};
  if (typeof names !== 'object' || names === null) throw new InvalidArgument('names must be an object of tool key → action name');
  for (const key of Object.keys(names)) {
    if (!Object.hasOwn(tools, key)) throw new InvalidArgument(`names.${key}: there is no tool ${JSON.stringify(key)} in the set`);
  }
  const out: Record<string, Tool> = Object.create(null) as Record<string, Tool>;
  const bindings = options.bindings ?? memoryBindings();
  for (const [key, tool] of Object.entries(tools)) {
    const name = Object.hasOwn(names, key) ? (names as Record<string, string>)[key]! : key;
    const one: ProtectToolOptions = { control: options.control, name, bindings };
    if (options.approver !== undefined) one.approver = options.approver;
    if (options.call !== undefined) one.call = options.call;
    if (options.preconditions !== undefined) one.preconditions = options.preconditions;
    Object.defineProperty(out, key, { value: protectTool(tool as Tool, one), enumerable: true, writable: true, configurable: true });
  }
  return { ...out } as ProtectedTools<TOOLS>;
}
