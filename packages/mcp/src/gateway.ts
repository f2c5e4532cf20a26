/**
 * The MCP gateway's core (docs/spec/04-surfaces.md §5): an MCP server in front of one upstream MCP client. Every
 * `tools/call` becomes the action `mcp.<alias>.<tool>` and goes through {@link Control}; the
 * upstream receives the action's canonical arguments (exactly what was hashed) and its answer is
 * classified into the kernel's outcome. Every other request and notification is relayed.
 *
 * Runtime-neutral: transports (HTTP, stdio, a subprocess) are the caller's.
 *
 * @module
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  ErrorCode,
  McpError,
  ProgressNotificationSchema,
  ResultSchema,
  type JSONRPCRequest,
  type Notification,
  type Result,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import {
  ActionDenied,
  AmbiguousEffect,
  ApprovalMismatch,
  ApprovalRequired,
  ApprovalTimeout,
  AuthorityDenied,
  canonicalJson,
  editedToolResult,
  DuplicateEffect,
  EffectKeyError,
  IdentityError,
  intake,
  InvalidArgument,
  DEFAULT_MAX_PENDING_APPROVALS,
  LocalApprovalProvider,
  PendingApprovalLimit,
  NotExecuted,
  Suspended,
  unusedEditFor,
  viewTime,
  type Action,
  type ApprovalProvider,
  callbackSink,
  type Control,
  type EventSink,
  type ExecuteOptions,
  type Intake,
  type SurfaceCall,
  showInvisible,
  resolveCommands,
  quotedForMessage,
  type JsonObject,
  toolSchemaDigest,
  type UpstreamObservation,
} from '@ctrlrun/kernel';
import { classifyError, classifyResult, UpstreamNotConnected, type Outcome } from './classify.js';
import { bareMessage, gatewayError, GatewayRefusal, refusalResult, rpcError } from './errors.js';
import { floatArgumentPointer, MAX_DEPTH, spelledArguments, unrepresentablePointer, type FloatArgumentHandler } from './floats.js';

/** An alias: the middle segment of `mcp.<alias>.<tool>`. */
export const ALIAS_PATTERN = /^[a-z0-9][a-z0-9_-]*$/;
/** A tool name the gateway will turn into an action name: MCP's tool-name characters, 1–128 of them. */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * Of an upstream's tool names, those whose action (`mcp.<alias>.<tool>`) has no entry in
 * `policy`, in the order given, each once: every call to them is denied `unknown_action`. A name
 * the gateway refuses anyway (not 1 to 128 of A-Z a-z 0-9 _ . -) is left out.
 */
export function toolsWithoutEntry(policy: { action(name: string): unknown }, alias: string, tools: readonly string[]): string[] {
  const out = new Set<string>();
  for (const tool of tools) if (typeof tool === 'string' && TOOL_NAME_PATTERN.test(tool) && policy.action(`mcp.${alias}.${tool}`) === null) out.add(tool);
  return [...out];
}
/** The `_meta` key the gateway adds to a relayed tools/call result. */
export const RECEIPT_META_KEY = 'com.ctrlrun/receipt';

/** Options of {@link Gateway}. */
export interface GatewayOptions {
  /** The control path every tools/call goes through. */
  control: Control;
  /**
   * A connected client to the upstream MCP server. The gateway takes over its progress and
   * fallback notification handlers: one Gateway per Client.
   */
  upstream: Client;
  /** The upstream's alias (`^[a-z0-9][a-z0-9_-]*$`): actions are named `mcp.<alias>.<tool>`. */
  alias: string;
  /** The acting principal (`--principal NAME`); with an identity provider on the Control, a hint. */
  principal?: { agent: string; user?: string | null } | null;
  /**
   * On approval required, wait for the human's answer (a {@link LocalApprovalProvider} over the
   * Control's store unless `provider` is given) and run the same action presenting it.
   */
  wait?: boolean | { timeoutMs?: number; provider?: ApprovalProvider };
  /** How long one upstream request may take, in ms (30 s); a timeout is an unknown outcome. */
  upstreamTimeoutMs?: number;
  /** How a human answers a request, for the approval-required message (`ctrlrun approve <id>`). */
  howToAnswer?: (requestId: string) => string;
  /** Receipt ids from the Control's sinks (see {@link ReceiptIds}), for failed and ambiguous calls. */
  receiptIds?: ReceiptIds;
  /**
   * How many approval requests one principal may have waiting (pending, unexpired) before a call
   * that would file another is refused (a tool error, code `-41001`) with `reason: too_many_pending_approvals`
   * ({@link DEFAULT_MAX_PENDING_APPROVALS}); `null`: no limit. A call whose exact action already
   * has an open request is never refused by it.
   */
  maxPendingApprovals?: number | null;
  /**
   * For actions whose policy entry pins the upstream (policy v8 `upstream`): what the transport
   * sees of the server, immediately before a pinned call is forwarded — the TLS certificate's
   * digest (null without TLS) and the pinned certificate files' digests. The gateway adds the
   * tool's schema digest from the upstream's own `tools/list`. Absent: only a schema pin can be
   * observed, and a certificate pin is refused `upstream_unverified`.
   */
  observeTransport?: () => Promise<Pick<UpstreamObservation, 'tlsCertSha256' | 'certificateFiles'>>;
}

/** The default of {@link GatewayOptions.maxPendingApprovals}: the kernel's, the worker's too. */
export { DEFAULT_MAX_PENDING_APPROVALS };

/**
 * Receipt ids by action id, as the Control stores them: add {@link ReceiptIds.sink} to the
 * Control's sinks and pass this to the {@link Gateway}, so that a failed or ambiguous call's
 * `_meta["com.ctrlrun/receipt"]` names its receipt too (a committed one always does).
 */
export class ReceiptIds {
  readonly #ids = new Map<string, string>();
  /** The sink to give the Control. */
  readonly sink: EventSink = callbackSink({
    name: 'ctrlrun-mcp-receipt-ids',
    onReceipt: (receipt) => {
      const actionId = receipt.document['action_id'];
      const receiptId = receipt.document['receipt_id'];
      if (typeof actionId === 'string' && typeof receiptId === 'string') this.#ids.set(actionId, receiptId);
    },
  });
  /** The receipt id recorded for `actionId`, forgotten once taken. */
  take(actionId: string): string | null {
    const id = this.#ids.get(actionId) ?? null;
    this.#ids.delete(actionId);
    return id;
  }
}

/** What an execution observed upstream, kept so the agent gets the upstream's own answer. */
type Observed = { readonly kind: 'result'; readonly result: Result; readonly outcome: Outcome } | { readonly kind: 'error'; readonly error: unknown };

/**
 * A call the upstream answered `input_required` (spec 04 §5): held in the store under the
 * gateway's continuation token, which replaces the upstream's `requestState` in what the agent
 * gets. Kept in memory: a restarted gateway knows none (-41009), and the held reservation lapses
 * into AMBIGUOUS as any unresumed one does.
 */
interface Continuation {
  /** The upstream's own `requestState`, sent back to it on the next leg. */
  readonly upstreamState: string;
  /** The held action's hash: the continuation leg must be the same call. */
  readonly actionHash: string;
  /** Legs answered `input_required` so far. */
  readonly rounds: number;
}

/** How many continuations the gateway remembers at once; past that, the oldest is forgotten (its reservation lapses). */
const MAX_CONTINUATIONS = 10_000;

/** A call whose upstream went past the elicitation bound: its outcome is unknown. */
class ElicitationBound extends Error {
  override name = 'ElicitationBound';
}

/** Thrown by the executor (so the kernel records the outcome), caught again by the gateway. */
class UpstreamOutcome extends Error {
  override name = 'UpstreamOutcome';
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;
/** What a call needs of the agent's request: its signal, progress, and the way back to the agent's client. */
type CallExtra = Pick<Extra, 'signal' | '_meta' | 'sendNotification'> & Partial<Pick<Extra, 'sendRequest'>>;

/** The upstream's own requests the gateway relays to the agent's client (and their answers back). */
export const RELAYED_UPSTREAM_REQUESTS: ReadonlySet<string> = new Set(['sampling/createMessage', 'elicitation/create', 'roots/list']);
/** How long the agent may take to answer one relayed elicitation, in ms (spec 04 §5). */
export const ELICITATION_TIMEOUT_MS = 300_000;
/** How many elicitations one call may relay; the next is refused and the call's outcome is unknown (spec 04 §5). */
export const ELICITATION_ROUNDS = 8;

/**
 * An agent request in flight to the upstream: where the upstream's own requests during it go, and
 * the request's own timeout, which stands still while the agent is answering one.
 */
interface InFlight {
  readonly extra: CallExtra;
  elicitations: number;
  /** The upstream asked for more elicitation rounds than {@link ELICITATION_ROUNDS}. */
  overBound: boolean;
  /** Relayed requests the agent has not answered yet. */
  relaying: number;
  pause(): void;
  resume(): void;
}

const defaultHowToAnswer = (id: string) =>
  `a human answers with 'ctrlrun approve ${id}' (or 'ctrlrun deny ${id}'), or through ctrlrun mcp-operator; then send the same call again`;

/** The gateway: one per upstream; {@link Gateway.createServer} makes one MCP server per agent session. */
export class Gateway {
  readonly control: Control;
  readonly upstream: Client;
  readonly alias: string;
  readonly #principal: { agent: string; user?: string | null } | null;
  readonly #wait: { timeoutMs?: number; provider: ApprovalProvider } | null;
  readonly #timeout: number;
  readonly #howToAnswer: (requestId: string) => string;
  readonly #receiptIds: ReceiptIds | null;
  /** The per-principal limit on waiting approval requests (the kernel's one piece, as the worker's). */
  readonly #pendingLimit: PendingApprovalLimit;
  readonly #servers = new Set<Server>();
  /** Progress relays in flight: the token the gateway gave the upstream → where the agent wants it. */
  readonly #progress = new Map<string, (params: Record<string, unknown>) => void>();
  #nextToken = 0;
  /** Tools the upstream listed with an `outputSchema`: their refusals carry no `structuredContent`. */
  readonly #typedTools = new Set<string>();
  /** Agent requests waiting on the upstream (see {@link InFlight}). */
  readonly #inFlight = new Set<InFlight>();
  /** Calls held at `input_required`, by the continuation token the agent was given. */
  readonly #continuations = new Map<string, Continuation>();
  readonly #observeTransport: NonNullable<GatewayOptions['observeTransport']> | null;

  constructor(options: GatewayOptions) {
    if (!options || typeof options !== 'object') throw new InvalidArgument('Gateway needs { control, upstream, alias }');
    if (!options.control || typeof options.control.execute !== 'function') throw new InvalidArgument('Gateway needs a Control');
    if (!options.upstream || typeof options.upstream.request !== 'function') throw new InvalidArgument('Gateway needs a connected MCP Client for the upstream');
    if (typeof options.alias !== 'string' || !ALIAS_PATTERN.test(options.alias)) {
      throw new InvalidArgument(`alias must match ${ALIAS_PATTERN.source} (it becomes the middle of mcp.<alias>.<tool>), got ${JSON.stringify(options.alias)}`);
    }
    this.control = options.control;
    this.upstream = options.upstream;
    this.alias = options.alias;
    this.#principal = options.principal ?? null;
    const wait = options.wait === undefined || options.wait === false ? null : options.wait === true ? {} : options.wait;
    this.#wait = wait === null ? null : { ...wait, provider: wait.provider ?? new LocalApprovalProvider(this.control.store, { clock: this.control.clock }) };
    this.#timeout = options.upstreamTimeoutMs ?? 30_000;
    if (!Number.isSafeInteger(this.#timeout) || this.#timeout <= 0) throw new InvalidArgument('upstreamTimeoutMs must be a positive integer of milliseconds');
    this.#howToAnswer = options.howToAnswer ?? defaultHowToAnswer;
    this.#receiptIds = options.receiptIds ?? null;
    this.#observeTransport = options.observeTransport ?? null;
    this.#pendingLimit = new PendingApprovalLimit(this.control, options.maxPendingApprovals);
    // The upstream's progress goes to the request that asked for it, under the agent's own token.
    // (Not the SDK's per-request onprogress: it drops a progress notification that arrives in the
    // same read as the response, as a fast tool's do.)
    this.upstream.setNotificationHandler(ProgressNotificationSchema, (notification) => {
      const { progressToken, ...rest } = notification.params;
      this.#progress.get(String(progressToken))?.(rest);
    });
    // The upstream's notifications (list changes, logs, resource updates) reach every agent
    // session when every session is the same principal. With a principal per request (an identity
    // provider), a log line or a resource update cannot be attributed to the session it concerns:
    // only list changes, which say nothing about anyone's calls, are sent to every session.
    const perRequest = this.#principal === null || this.control.identity !== null;
    this.upstream.fallbackNotificationHandler = async (notification: Notification) => {
      if (perRequest && !/^notifications\/(?:tools|resources|prompts)\/list_changed$/.test(notification.method)) return;
      await Promise.all([...this.#servers].map((s) => s.notification(notification as ServerNotification).catch(() => {})));
    };
    // The upstream's own requests (sampling, elicitation, roots) go to the agent whose request it is serving.
    this.upstream.fallbackRequestHandler = (request: JSONRPCRequest) => this.#fromUpstream(request) as Promise<never>;
  }

  /**
   * One of the upstream's own requests, relayed to the agent's client through the agent request
   * it arrived during (the only one waiting on the upstream), and the agent's answer back. With
   * no agent request waiting, or several (which one the upstream serves cannot be told), it is
   * refused to the upstream. An elicitation waits {@link ELICITATION_TIMEOUT_MS} at most, and a
   * call relays {@link ELICITATION_ROUNDS} of them: the next is refused and the call's outcome is
   * recorded unknown (the upstream may act on what it could not ask).
   */
  async #fromUpstream(request: JSONRPCRequest): Promise<Result> {
    const method = request.method;
    if (!RELAYED_UPSTREAM_REQUESTS.has(method)) {
      throw rpcError(
        ErrorCode.MethodNotFound,
        `the gateway relays only ${[...RELAYED_UPSTREAM_REQUESTS].join(', ')} from the upstream, not ${quotedForMessage(method, 100)}`,
      );
    }
    const waiting = [...this.#inFlight];
    if (waiting.length !== 1) {
      throw rpcError(
        ErrorCode.InternalError,
        waiting.length === 0
          ? `${method}: no agent request is waiting on this server, so there is no agent to ask`
          : `${method}: ${waiting.length} agent requests are waiting on this server and the gateway cannot tell which one this is for`,
      );
    }
    const call = waiting[0]!;
    if (call.extra.sendRequest === undefined) throw rpcError(ErrorCode.InternalError, `${method}: the agent's connection cannot carry a request back to it`);
    const elicit = method === 'elicitation/create';
    if (elicit && call.elicitations >= ELICITATION_ROUNDS) {
      call.overBound = true;
      throw rpcError(
        ErrorCode.InternalError,
        `elicitation/create: this call has had its ${ELICITATION_ROUNDS} elicitation rounds; the gateway asks the agent no more`,
      );
    }
    if (elicit) call.elicitations++;
    call.relaying++;
    call.pause();
    try {
      const { method: m, params } = request;
      return await call.extra.sendRequest({ method: m, ...(params !== undefined ? { params } : {}) } as Parameters<Extra['sendRequest']>[0], ResultSchema, {
        signal: call.extra.signal,
        timeout: elicit ? ELICITATION_TIMEOUT_MS : this.#timeout,
      });
    } catch (err) {
      // The agent's client's own error (e.g. -32601: it does not do sampling), relayed as it sent it.
      if (err instanceof McpError) throw rpcError(err.code, bareMessage(err), err.data);
      throw err;
    } finally {
      if (--call.relaying === 0) call.resume();
    }
  }

  /**
   * Sends one agent request on to the upstream, registered as {@link InFlight} while it waits: the
   * upstream's own requests meanwhile are relayed to this agent, and the request's timeout
   * (`upstreamTimeoutMs`) stands still while the agent answers one.
   */
  async #toUpstream(request: Parameters<Client['request']>[0], extra: CallExtra, onEntry: (entry: InFlight) => void = () => {}): Promise<Result> {
    const controller = new AbortController();
    const cancel = () => controller.abort(extra.signal.reason);
    if (extra.signal.aborted) cancel();
    else extra.signal.addEventListener('abort', cancel, { once: true });
    let timer: ReturnType<typeof setTimeout> | undefined;
    let done = false;
    const timeout = this.#timeout;
    const entry: InFlight = {
      extra,
      elicitations: 0,
      overBound: false,
      relaying: 0,
      pause: () => clearTimeout(timer),
      resume: () => {
        clearTimeout(timer);
        // A relayed request answered after the upstream's own answer arms nothing.
        if (done) return;
        timer = setTimeout(() => controller.abort(new McpError(ErrorCode.RequestTimeout, 'Request timed out', { timeout })), timeout);
      },
    };
    entry.resume();
    onEntry(entry);
    this.#inFlight.add(entry);
    try {
      // The timeout is the entry's own; the SDK's is set past it.
      return await this.upstream.request(request, ResultSchema, { signal: controller.signal, timeout: 2_147_483_647 });
    } finally {
      done = true;
      this.#inFlight.delete(entry);
      clearTimeout(timer);
      extra.signal.removeEventListener('abort', cancel);
    }
  }

  /** The action name a tool becomes: `mcp.<alias>.<tool>`. */
  actionName(tool: string): string {
    return `mcp.${this.alias}.${tool}`;
  }

  /**
   * What the gateway sees of the upstream for a pinned call: the transport's certificate (when an
   * observer is configured) and the digest of `tool`'s input schema as the upstream lists it now
   * (null when it does not list the tool). An upstream that cannot be asked observes nothing:
   * the pin then refuses the call (`upstream_unverified`).
   */
  async #observe(tool: string): Promise<UpstreamObservation> {
    let transport: Pick<UpstreamObservation, 'tlsCertSha256' | 'certificateFiles'> = { tlsCertSha256: null };
    if (this.#observeTransport !== null) {
      try {
        transport = await this.#observeTransport();
      } catch {
        transport = { tlsCertSha256: null };
      }
    }
    let toolSchemaSha256: string | null = null;
    try {
      let cursor: string | undefined;
      for (let page = 0; page < 100 && toolSchemaSha256 === null; page++) {
        const listed = await this.upstream.listTools(cursor === undefined ? {} : { cursor }, { timeout: this.#timeout });
        const found = listed.tools.find((t) => t.name === tool);
        if (found !== undefined) toolSchemaSha256 = toolSchemaDigest(found.inputSchema);
        cursor = listed.nextCursor;
        if (cursor === undefined) break;
      }
    } catch {
      toolSchemaSha256 = null;
    }
    return { ...transport, toolSchemaSha256 };
  }

  /**
   * The upstream's tools (as its `tools/list` pages give them, at most 100 pages) that the policy
   * has no entry for: every call to one of them is denied `unknown_action`. For the gateway's
   * startup block, so a policy written for other names is seen before the first call.
   */
  async toolsWithoutEntry(options: { timeoutMs?: number } = {}): Promise<string[]> {
    const names: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 100; page++) {
      const listed = await this.upstream.listTools(
        cursor === undefined ? {} : { cursor },
        options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs },
      );
      for (const t of listed.tools) names.push(t.name);
      cursor = listed.nextCursor;
      if (cursor === undefined) break;
    }
    return toolsWithoutEntry(this.control.policy, this.alias, names);
  }

  /**
   * A new MCP server for one agent session, presenting the upstream's server info, capabilities
   * and instructions. Connect it to a transport; it is forgotten when the transport closes.
   */
  createServer(): Server {
    const info = this.upstream.getServerVersion() ?? { name: `ctrlrun-gateway-${this.alias}`, version: '0.0.0' };
    const instructions = this.upstream.getInstructions();
    const server = new Server(info, { capabilities: this.upstream.getServerCapabilities() ?? {}, ...(instructions !== undefined ? { instructions } : {}) });
    server.fallbackRequestHandler = (request, extra) => this.#handle(request as JSONRPCRequest, extra as Extra);
    // Only real notifications go on: a "notification" named like a request (a tools/call without an
    // id) is dropped, so that a lax upstream can never run a tool the control path did not see.
    server.fallbackNotificationHandler = async (notification) => {
      if (!notification.method.startsWith('notifications/')) return;
      await this.upstream.notification(notification as Parameters<Client['notification']>[0]);
    };
    this.#servers.add(server);
    const onclose = server.onclose;
    server.onclose = () => {
      this.#servers.delete(server);
      onclose?.();
    };
    return server;
  }

  async #handle(request: JSONRPCRequest, extra: Extra): Promise<Result> {
    if (request.method === 'tools/call') return this.callTool(request.params, extra);
    // A lax upstream may route `Tools/Call`, ` tools/call` or `tools\u200b/call` to its tool
    // handler: such a name is never relayed, so no tool runs past the control path.
    if (foldMethod(request.method) === 'tools/call') {
      throw rpcError(ErrorCode.MethodNotFound, `no method ${quotedForMessage(request.method, 100)}: the method is tools/call, exactly`);
    }
    const relay = this.#relayProgress(extra);
    try {
      const params =
        request.params === undefined
          ? undefined
          : relay.token === null
            ? request.params
            : { ...request.params, _meta: { ...(request.params['_meta'] as object), progressToken: relay.token } };
      const result = await this.#toUpstream({ method: request.method, ...(params !== undefined ? { params } : {}) } as Parameters<Client['request']>[0], extra);
      if (request.method === 'tools/list') this.#noteOutputSchemas(result);
      return result;
    } catch (err) {
      // The upstream's own error, relayed with its code, message and data as it sent them.
      if (err instanceof McpError) throw rpcError(err.code, bareMessage(err), err.data);
      throw err;
    } finally {
      relay.done();
    }
  }

  /**
   * When the agent asked for progress (`_meta.progressToken`): a fresh token for the upstream,
   * whose notifications are sent on to the agent under the agent's token until `done()`.
   */
  #relayProgress(extra: Pick<Extra, '_meta' | 'sendNotification'>): { token: string | null; done: () => void } {
    const agentToken = extra._meta?.progressToken;
    if (agentToken === undefined) return { token: null, done: () => {} };
    const token = `ctrlrun-${++this.#nextToken}`;
    this.#progress.set(token, (params) => {
      void extra
        .sendNotification({
          method: 'notifications/progress',
          params: { ...params, progressToken: agentToken } as ServerNotification['params'] & { progress: number },
        } as ServerNotification)
        .catch(() => {});
    });
    return { token, done: () => void this.#progress.delete(token) };
  }

  /** Remembers which listed tools declare an `outputSchema` (bounded: a tool name is at most 128 characters). */
  #noteOutputSchemas(result: Result): void {
    const tools = (result as { tools?: unknown }).tools;
    if (!Array.isArray(tools)) return;
    for (const t of tools) {
      if (!isPlainObject(t) || typeof t['name'] !== 'string' || !TOOL_NAME_PATTERN.test(t['name'])) continue;
      if (t['outputSchema'] !== undefined) {
        if (this.#typedTools.size < 100_000) this.#typedTools.add(t['name']);
      } else this.#typedTools.delete(t['name']);
    }
  }

  /**
   * One intercepted `tools/call`: the control path, the upstream, the outcome. A ctrlrun refusal
   * is answered as a tool error ({@link refusalResult}); a malformed call is a JSON-RPC error, and
   * the upstream's own answer (a result, `isError` or not, or a JSON-RPC error) is relayed.
   */
  async callTool(params: unknown, extra: CallExtra & Pick<Extra, 'requestInfo'>): Promise<Result> {
    try {
      return await this.#callTool(params, extra);
    } catch (err) {
      if (!(err instanceof GatewayRefusal)) throw err;
      const tool = isPlainObject(params) && typeof params['name'] === 'string' ? params['name'] : '';
      return refusalResult(err, { structured: !this.#typedTools.has(tool) });
    }
  }

  /** A tools/call's tool and arguments, or the JSON-RPC error (-32602) saying what is malformed. */
  #parseCall(params: unknown): { params: Record<string, unknown>; tool: string; args: Record<string, unknown> } {
    if (!isPlainObject(params)) throw rpcError(ErrorCode.InvalidParams, 'tools/call needs params { name, arguments }');
    const tool = params['name'];
    if (typeof tool !== 'string' || !TOOL_NAME_PATTERN.test(tool)) {
      throw rpcError(
        ErrorCode.InvalidParams,
        `tools/call: the tool name must be 1 to 128 of A-Z a-z 0-9 _ . - (it becomes mcp.${this.alias}.<tool>), got ${typeof tool === 'string' ? quotedForMessage(tool, 200) : JSON.stringify(tool)}`,
      );
    }
    const args = params['arguments'] ?? {};
    if (!isPlainObject(args)) throw rpcError(ErrorCode.InvalidParams, 'tools/call: arguments must be an object');
    if (tooDeep(args, MAX_DEPTH)) throw rpcError(ErrorCode.InvalidParams, `tools/call ${tool}: the arguments nest deeper than ${MAX_DEPTH} levels`);
    return { params, tool, args };
  }

  /**
   * A tools/call whose arguments hold a number no action can carry (a float, an integer beyond
   * ±(2^53−1)), at `pointer`: refused `-41008` and, once the principal is known (none: `-41007`,
   * nothing recorded), recorded by the kernel as the original records it — `ACTION_PROPOSED`,
   * `ACTION_DENIED`, a `denied` receipt (`unrepresentable_argument`) whose action holds each such
   * number as a string of its spelling ({@link spelledArguments}; `text`: the message as sent),
   * no resource, no effect key. Never reaches the policy or the upstream.
   */
  async #refuseUnrepresentable(
    tool: string,
    args: Record<string, unknown>,
    pointer: string,
    text: string | null,
    headers: Readonly<Record<string, string | string[] | undefined>> | undefined,
  ): Promise<never> {
    const spelled = spelledArguments(args, text);
    const { action } = await this.#intake(this.actionName(tool), spelled, headers, { resourceTemplate: null, effectTemplate: null });
    const message = `${action.name}: the argument at ${showInvisible(pointer.slice(0, 200))} is a number no action can carry (written with a fraction or an exponent, or an integer beyond 2^53-1); use an integer (minor units) or a decimal string`;
    const { receipt } = await this.control.refuseUnrepresentable(action, pointer, message);
    throw gatewayError('unrepresentableArgument', message, {
      pointer,
      action_id: action.actionId,
      _meta: {
        [RECEIPT_META_KEY]: { action_id: action.actionId, receipt_id: receipt.document['receipt_id'] ?? null, effect_key: null, result: 'denied', attempt: 1 },
      },
    });
  }

  /**
   * A transport's answer to a `tools/call` whose arguments hold a number no action can carry as
   * the agent wrote it — `2000.0` and `2e3`, which `JSON.parse` makes the integer 2000, found in
   * the message's text ({@link FloatArgumentHandler}): the refusal, recorded (see
   * {@link Gateway.callTool}), as the JSON-RPC response to send; `null` for any other message. A
   * call the gateway refuses anyway (a malformed tool name or arguments) gets that refusal.
   */
  readonly refuseFloats: FloatArgumentHandler = async (message, text, headers) => {
    if (!isPlainObject(message) || message['method'] !== 'tools/call') return null;
    const id = message['id'];
    if (typeof id !== 'string' && typeof id !== 'number') return null;
    const pointer = floatArgumentPointer(text);
    if (pointer === null) return null;
    try {
      const { tool, args } = this.#parseCall(message['params']);
      await this.#refuseUnrepresentable(tool, args, pointer, text, headers);
    } catch (err) {
      if (err instanceof GatewayRefusal) {
        const params = message['params'];
        const tool = isPlainObject(params) && typeof params['name'] === 'string' ? params['name'] : '';
        return { jsonrpc: '2.0', id, result: refusalResult(err, { structured: !this.#typedTools.has(tool) }) };
      }
      if (err instanceof McpError)
        return { jsonrpc: '2.0', id, error: { code: err.code, message: bareMessage(err), ...(err.data === undefined ? {} : { data: err.data }) } };
      throw err;
    }
    return null;
  };

  async #callTool(raw: unknown, extra: CallExtra & Pick<Extra, 'requestInfo'>): Promise<Result> {
    const { params, tool, args } = this.#parseCall(raw);
    const pointer = unrepresentablePointer(args);
    if (pointer !== null) return this.#refuseUnrepresentable(tool, args, pointer, null, extra.requestInfo?.headers);
    const name = this.actionName(tool);
    const taken = await this.#intake(name, args, extra.requestInfo?.headers);
    const { action } = taken;
    // A pinned upstream is looked at now, before anything is decided or forwarded.
    const options = this.control.policy.action(name)?.upstream ? { ...taken.options, upstream: await this.#observe(tool) } : taken.options;
    if (params['requestState'] !== undefined) return this.#continue(action, params, extra);
    const approvalId = await this.#presentable(action);
    const slot = await this.#pendingLimit.acquire(action, approvalId);
    if ('refused' in slot) {
      const who = `${action.principal.agent}${action.principal.user === null ? '' : ` (user ${action.principal.user})`}`;
      throw gatewayError(
        'denied',
        `${action.name}: ${who} already has ${slot.refused} approval request(s) waiting, the most this gateway takes (maxPendingApprovals ${slot.limit}); wait until a human answers them or they expire`,
        {
          reason: 'too_many_pending_approvals',
          action_id: action.actionId,
          limit: slot.limit,
          pending: slot.refused,
        },
      );
    }
    const release = () => slot.release();
    try {
      return await this.#decide(action, options, approvalId, extra, release);
    } finally {
      release();
      this.#receiptIds?.take(action.actionId);
    }
  }

  async #decide(action: Action, options: ExecuteOptions, approvalId: string | null, extra: CallExtra, release: () => void = () => {}): Promise<Result> {
    try {
      return await this.#execute(action, { ...options, approvalId }, extra);
    } catch (err) {
      // The request is written (or the call refused): the store counts it from here on.
      release();
      if (this.#wait === null || !(err instanceof ApprovalRequired)) throw await this.#refusal(err, action, approvalId);
      // An agent that asked for progress hears why the call is held, and again every 10 s, so a
      // client that resets its timeout on progress waits for the human.
      const token = extra._meta?.progressToken;
      let beat = 0;
      const tell = () =>
        void extra
          .sendNotification({
            method: 'notifications/progress',
            params: { progressToken: token!, progress: ++beat, message: `waiting for a human to answer approval request ${err.requestId}` },
          })
          .catch(() => {});
      if (token !== undefined) tell();
      const timer = token === undefined ? null : setInterval(tell, 10_000);
      try {
        // A client that gave up (notifications/cancelled, a closed connection) aborts
        // extra.signal: the wait stops and the call never runs by itself.
        await this.control.waitForAnswer(action, err.requestId, {
          provider: this.#wait.provider,
          ...(this.#wait.timeoutMs !== undefined ? { timeoutMs: this.#wait.timeoutMs } : {}),
          signal: extra.signal,
        });
      } catch (waitErr) {
        throw await this.#refusal(waitErr instanceof ApprovalTimeout ? err : waitErr, action, err.requestId);
      } finally {
        if (timer !== null) clearInterval(timer);
      }
      try {
        return await this.#execute(action, { ...options, approvalId: err.requestId }, extra);
      } catch (again) {
        throw await this.#refusal(again, action, err.requestId);
      }
    }
  }

  /**
   * A continuation leg (`params.requestState`): the held call resumed through the kernel, the
   * agent's `inputResponses` (and any other field it adds) sent on with the held call's canonical
   * arguments and the upstream's own `requestState`. A token the gateway did not give, gave for
   * another call, or already took is `-41009` and nothing runs.
   */
  async #continue(action: Action, params: Record<string, unknown>, extra: CallExtra): Promise<Result> {
    const token = params['requestState'];
    const held = typeof token === 'string' ? this.#continuations.get(token) : undefined;
    if (typeof token !== 'string' || held === undefined || held.actionHash !== action.actionHash) {
      throw gatewayError(
        'unknownContinuation',
        `${action.name}: params.requestState is not a continuation this gateway holds for this call (it gives one with each input_required answer, for the same tool and arguments, once)`,
        {},
      );
    }
    this.#continuations.delete(token);
    const { name: _name, arguments: _arguments, requestState: _state, _meta, ...rest } = params;
    return this.#execute(action, {}, extra, { token, held, fields: rest });
  }

  /** The kernel's one intake: the principal (from the request's headers), the action and its options, or the refusal. */
  async #intake(
    name: string,
    args: Record<string, unknown>,
    rawHeaders: Readonly<Record<string, string | string[] | undefined>> | undefined,
    templates: Pick<SurfaceCall, 'resourceTemplate' | 'effectTemplate'> = {},
  ): Promise<Intake> {
    const headers = Object.create(null) as Record<string, string>; // a header may be named __proto__
    for (const [k, v] of Object.entries(rawHeaders ?? {})) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    try {
      return await intake(this.control, { name, arguments: args, principal: this.#principal, headers, ...templates });
    } catch (err) {
      throw await this.#refusal(err, null, null);
    }
  }

  /**
   * Under `approve` (enforce mode): a granted approval for this exact hash is presented, so the
   * agent only resends the call; a standing denial is refused before a new request is created
   * for a human to answer in vain.
   */
  async #presentable(action: Action): Promise<string | null> {
    if (this.control.observing) return null;
    const evaluation = await this.control.evaluate(action).catch(() => null);
    if (evaluation?.decision !== 'approve') return null;
    const store = this.control.store;
    const granted = await store.findGrantedApproval(action.actionHash);
    if (granted !== null) return granted.approvalId;
    const denied = await store.findDeniedRequest(action.actionHash);
    if (denied !== null) {
      // Answered with an edit whose grant is unused: not a denial. Presenting the proposed request,
      // the control path runs the edited arguments, once.
      const edit = await unusedEditFor(this.control, action);
      if (edit !== null) return edit.proposed;
      throw gatewayError('approvalDenied', `${action.name}: a human denied this exact call (request ${denied.request.requestId})`, {
        request_id: denied.request.requestId,
      });
    }
    // A committed or ambiguous effect is refused by the control path before it files a request
    // (DuplicateEffect / AmbiguousEffect, recorded with a blocked receipt).
    return null;
  }

  /** Runs the action once through Control; relays the upstream's answer with the receipt in `_meta`. */
  async #execute(
    action: Action,
    options: ExecuteOptions,
    extra: CallExtra,
    leg: { token: string; held: Continuation; fields: Record<string, unknown> } | null = null,
  ): Promise<Result> {
    const tool = action.name.slice(`mcp.${this.alias}.`.length);
    // Set when the upstream answers input_required and the call is held: what the agent gets.
    let suspended: { token: string; result: Result } | null = null;
    const notExecutedOnError = this.control.policy.action(action.name)?.notExecutedOnError ?? false;
    let observed: Observed | null = null;
    let attempt = 1;
    let effectKey: string | null = null;
    const marker = new UpstreamOutcome('the upstream did not commit');
    const executor = async (canonical: JsonObject, ctx: { effectKey: string | null; attempt: number }): Promise<Result> => {
      attempt = ctx.attempt;
      effectKey = ctx.effectKey;
      let result: Result;
      let inFlight: InFlight | null = null;
      const relay = this.#relayProgress(extra);
      try {
        // A client whose transport closed sends nothing: that is "never connected", not unknown.
        if (this.upstream.transport === undefined) throw new UpstreamNotConnected('the upstream connection is closed');
        const params = {
          ...(leg === null ? {} : { ...leg.fields, requestState: leg.held.upstreamState }),
          name: tool,
          arguments: canonical,
          ...(relay.token !== null ? { _meta: { progressToken: relay.token } } : {}),
        };
        result = await this.#toUpstream({ method: 'tools/call', params } as Parameters<Client['request']>[0], extra, (entry) => void (inFlight = entry));
      } catch (err) {
        if ((inFlight as InFlight | null)?.overBound === true) {
          observed = { kind: 'error', error: new ElicitationBound(`the upstream asked for more than ${ELICITATION_ROUNDS} elicitation rounds in one call`) };
          throw marker;
        }
        observed = { kind: 'error', error: err };
        const { outcome } = classifyError(err);
        // On a continuation leg, "not executed" speaks for this leg only: an earlier one may have acted.
        if (outcome === 'failed' && leg === null) throw new NotExecuted(`the upstream did not execute ${tool}: ${describe(err)}`, { cause: marker });
        throw marker;
      } finally {
        relay.done();
      }
      // The upstream asked the agent more than the bound allows: whatever it answered, it may have
      // acted on what it could not ask.
      if ((inFlight as InFlight | null)?.overBound === true) {
        observed = { kind: 'error', error: new ElicitationBound(`the upstream asked for more than ${ELICITATION_ROUNDS} elicitation rounds in one call`) };
        throw marker;
      }
      if (result['resultType'] === 'input_required') {
        const rounds = (leg?.held.rounds ?? 0) + 1;
        const upstreamState = result['requestState'];
        if (typeof upstreamState !== 'string' || upstreamState === '' || rounds > ELICITATION_ROUNDS) {
          observed = {
            kind: 'error',
            error: new ElicitationBound(
              typeof upstreamState !== 'string' || upstreamState === ''
                ? 'the upstream answered input_required without a requestState, so the call cannot be continued'
                : `the upstream answered input_required more than ${ELICITATION_ROUNDS} times in one call`,
            ),
          };
          throw marker;
        }
        const token = `ctrlrun_cont_${randomToken()}`;
        if (this.#continuations.size >= MAX_CONTINUATIONS) this.#continuations.delete(this.#continuations.keys().next().value!);
        this.#continuations.set(token, { upstreamState, actionHash: action.actionHash, rounds });
        suspended = { token, result };
        throw new Suspended(token, { message: `${tool} answered input_required (round ${rounds})` });
      }
      const outcome = classifyResult(result, { notExecutedOnError });
      observed = { kind: 'result', result, outcome };
      if (outcome === 'failed' && leg !== null) throw marker;
      if (outcome === 'failed')
        throw new NotExecuted(`the upstream answered ${tool} with isError (the policy says that means not executed)`, { cause: marker });
      if (outcome === 'ambiguous') throw marker;
      return result;
    };
    try {
      const { value, receipt } =
        leg === null ? await this.control.executeWithReceipt(action, executor, options) : await this.control.resumeWithReceipt(leg.token, executor);
      // Run under a grant a human gave with edited arguments: the agent is told what ran.
      const edit = isPlainObject(receipt.document['edit']) ? (receipt.document['edit'] as JsonObject) : null;
      const meta = {
        action_id: receipt.document['action_id'] ?? action.actionId,
        receipt_id: receipt.document['receipt_id'] ?? null,
        effect_key: effectKey,
        result: 'committed',
        attempt,
        ...(edit === null ? {} : { edit }),
      };
      return withReceipt(edit === null ? value : withEditNote(value, edit, receipt.document['approval_id']), meta);
    } catch (err) {
      if (suspended !== null) {
        const { token, result } = suspended as { token: string; result: Result };
        const meta = { action_id: action.actionId, receipt_id: null, effect_key: effectKey, result: 'suspended', attempt };
        // Held: the agent answers the input requests and sends the call again with our requestState.
        if (err instanceof Suspended) return withReceipt({ ...result, requestState: token }, meta);
        // The kernel could not hold it (no effect key, or the store refused): recorded AMBIGUOUS.
        this.#continuations.delete(token);
        throw gatewayError(
          'upstreamAmbiguous',
          `${action.name}: the upstream answered input_required, but the call could not be held for its continuation (${err instanceof Error ? err.message : String(err)}); nobody knows whether it acted`,
          {
            effect_key: effectKey,
            action_id: action.actionId,
            _meta: { [RECEIPT_META_KEY]: { ...meta, result: 'ambiguous', receipt_id: this.#receiptIds?.take(action.actionId) ?? null } },
          },
        );
      }
      // A continuation the store no longer holds (taken, or never held): unknown.
      if (leg !== null && err instanceof InvalidArgument) {
        throw gatewayError('unknownContinuation', `${action.name}: the continuation is no longer held (${err.message})`, {});
      }
      const fromUpstream = err === marker || (err instanceof NotExecuted && err.cause === marker);
      if (!fromUpstream || observed === null) throw err;
      const seen = observed as Observed;
      const meta = {
        action_id: action.actionId,
        receipt_id: this.#receiptIds?.take(action.actionId) ?? null,
        effect_key: effectKey,
        result: err === marker ? 'ambiguous' : 'failed',
        attempt,
      };
      if (seen.kind === 'result') return withReceipt(seen.result, meta);
      const c = classifyError(seen.error);
      if (c.kind === 'rpc') throw rpcError(c.error.code, bareMessage(c.error), c.error.data);
      const data = { effect_key: effectKey, action_id: action.actionId, _meta: { [RECEIPT_META_KEY]: meta } };
      if (c.outcome === 'failed')
        throw gatewayError('upstreamNotExecuted', `${action.name}: the upstream was not reached, nothing ran (${describe(seen.error)})`, data);
      throw gatewayError(
        'upstreamAmbiguous',
        `${action.name}: the upstream failed after the call was sent; nobody knows whether it ran, and a retry is refused until a human resolves it (${describe(seen.error)}); ${effectKey === null ? 'the action has no effect key' : howToResolve(effectKey)}`,
        data,
      );
    }
  }

  /** The kernel's refusal as the gateway's {@link GatewayRefusal} (a tool error to the agent). */
  async #refusal(err: unknown, action: Action | null, approvalId: string | null): Promise<unknown> {
    const actionId = action?.actionId ?? null;
    if (err instanceof McpError) return err;
    if (err instanceof ApprovalRequired) {
      const record = await this.control.store.getApproval(err.requestId);
      // In the form of every view (UTC, milliseconds, Z), not the column's `+00:00`.
      const expiresAt = viewTime(record?.request.expiresAt ?? null);
      return gatewayError(
        'approvalRequired',
        `${action?.name ?? 'this call'} needs a human's approval: request ${err.requestId}; ${this.#howToAnswer(err.requestId)}`,
        {
          request_id: err.requestId,
          action_hash: action?.actionHash ?? record?.request.actionHash ?? null,
          expires_at: expiresAt,
        },
      );
    }
    if (err instanceof AuthorityDenied) return gatewayError('unauthorized', err.message, { reason: err.reason, action_id: err.actionId ?? actionId });
    if (err instanceof ActionDenied) {
      if (err.reason === 'no_principal') return gatewayError('noPrincipal', 'no principal');
      if (err.reason === 'approval_denied') return gatewayError('approvalDenied', err.message, { request_id: approvalId });
      return gatewayError('denied', err.message, { reason: err.reason, action_id: err.actionId ?? actionId });
    }
    if (err instanceof IdentityError) return gatewayError('noPrincipal', 'no principal');
    if (err instanceof DuplicateEffect) return gatewayError('duplicateEffect', err.message, { effect_key: err.effectKey, state: err.state });
    if (err instanceof AmbiguousEffect) return gatewayError('ambiguousEffect', `${err.message}; ${howToResolve(err.effectKey)}`, { effect_key: err.effectKey });
    if (err instanceof ApprovalMismatch) return gatewayError('blocked', err.message, { reason: err.reason });
    if (err instanceof EffectKeyError) return gatewayError('denied', err.message, { reason: 'effect_key_error', action_id: actionId });
    if (err instanceof InvalidArgument) return rpcError(ErrorCode.InvalidParams, err.message);
    return err;
  }
}

/** 128 random bits, hex: a continuation token nobody can guess. */
function randomToken(): string {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * How a human settles an ambiguous effect, for the agent to pass on. The key is the agent's: in
 * the commands it is one shell word ({@link shellWord}), so a quote or `;` in it cannot start a
 * second command, and a line break or bidi override shows as an escape; a key too long to read in
 * a message is named by where it stands whole (the error's `data.effect_key`).
 */
function howToResolve(key: string): string {
  const commands = key.length > RESOLVE_KEY_SHOWN ? null : resolveCommands(key);
  if (commands === null) {
    const why =
      key.length > RESOLVE_KEY_SHOWN
        ? `${key.length} characters`
        : 'it holds a NUL or a lone surrogate, which no command line can carry: use ctrlrun mcp-operator';
    return `a human says what happened with \`ctrlrun resolve KEY --committed\` or \`ctrlrun resolve KEY --failed\`, KEY being this error's data.effect_key (${why}), or with resolve in ctrlrun mcp-operator`;
  }
  return `a human says what happened with \`${commands.committed}\` or \`${commands.failed}\`, or with resolve in ctrlrun mcp-operator`;
}
const RESOLVE_KEY_SHOWN = 200;

/** A method name as a lax router might read it: compatibility-folded, lower case, without spacing, controls or invisible characters. */
function foldMethod(method: string): string {
  return method
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[\s\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/gu, '');
}

/** A JSON object as JSON.parse makes one (or `Object.create(null)`). */
function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Whether `value` nests deeper than `max` arrays and objects (without recursing: any depth is answered). */
function tooDeep(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

/** The result with `_meta["com.ctrlrun/receipt"]` added (a copy; the upstream's `_meta` kept). */
/**
 * `result` with one more text block, ctrlrun's: who edited the arguments before approving, which
 * changed, and the arguments the tool ran with (so the agent reasons about what actually ran).
 */
function withEditNote(result: Result, edit: JsonObject, approvalId: unknown): Result {
  const note = editedToolResult(
    {
      proposed: String(edit['proposed_request_id']),
      approved: String(approvalId),
      editor: String(edit['editor']),
      proposedHash: String(edit['proposed_hash']),
      approvedHash: String(edit['approved_hash']),
      proposedArguments: edit['proposed_arguments'] as JsonObject,
      approvedArguments: edit['approved_arguments'] as JsonObject,
    },
    null,
  );
  const text = `ctrlrun: ${note.message} approved_arguments: ${canonicalJson(note.approved_arguments)}; proposed_arguments: ${canonicalJson(note.proposed_arguments)}.`;
  const content = Array.isArray(result['content']) ? (result['content'] as unknown[]) : [];
  return { ...result, content: [...content, { type: 'text', text }] };
}

function withReceipt(result: Result, receipt: Record<string, unknown>): Result {
  const meta = isPlainObject(result._meta) ? result._meta : {};
  return { ...result, _meta: { ...meta, [RECEIPT_META_KEY]: receipt } };
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    const code = typeof cause === 'object' && cause !== null ? (cause as { code?: unknown }).code : undefined;
    return `${err.name}: ${err.message}${typeof code === 'string' ? ` (${code})` : ''}`;
  }
  return String(err);
}
