/**
 * The gateway's refusals and JSON-RPC errors. A refusal of a `tools/call` (denied, approval
 * required, duplicate, ambiguous, …) reaches the agent as a tool error (issue 12): a result with
 * `isError: true` whose text starts by saying that ctrlrun refused and the tool was not called (or
 * that its outcome is unknown), with the stable code and `error` token in `structuredContent` and
 * `_meta["com.ctrlrun/refusal"]`. Protocol problems (malformed requests, bad tool names, unknown
 * methods) and the mcp-operator's own errors stay JSON-RPC errors.
 *
 * @module
 */
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** Code and token of each gateway refusal. */
export const GATEWAY_ERRORS = {
  denied: { code: -41001, token: 'ctrlrun.denied' },
  approvalRequired: { code: -41002, token: 'ctrlrun.approval_required' },
  approvalDenied: { code: -41003, token: 'ctrlrun.approval_denied' },
  duplicateEffect: { code: -41004, token: 'ctrlrun.duplicate_effect' },
  ambiguousEffect: { code: -41005, token: 'ctrlrun.ambiguous_effect' },
  blocked: { code: -41006, token: 'ctrlrun.blocked' },
  noPrincipal: { code: -41007, token: 'ctrlrun.no_principal' },
  unrepresentableArgument: { code: -41008, token: 'ctrlrun.unrepresentable_argument' },
  unknownContinuation: { code: -41009, token: 'ctrlrun.unknown_continuation' },
  upstreamAmbiguous: { code: -41010, token: 'ctrlrun.upstream_ambiguous' },
  upstreamNotExecuted: { code: -41011, token: 'ctrlrun.upstream_not_executed' },
  unauthorized: { code: -41012, token: 'ctrlrun.unauthorized' },
  notAHuman: { code: -41013, token: 'ctrlrun.not_a_human' },
  principalExpired: { code: -41014, token: 'ctrlrun.principal_expired' },
} as const;

/** One of {@link GATEWAY_ERRORS}' names. */
export type GatewayErrorName = keyof typeof GATEWAY_ERRORS;

/**
 * A JSON-RPC error to send: its `message` is exactly `message` (the SDK's constructor prefixes
 * `MCP error <code>: `, and the receiving client prefixes it again).
 */
export function rpcError(code: number, message: string, data?: unknown): McpError {
  const err = new McpError(code, message, data);
  err.message = message;
  return err;
}

/** The `_meta` key of a refusal's fields on a tool-error result. */
export const REFUSAL_META_KEY = 'com.ctrlrun/refusal';

/**
 * A ctrlrun refusal, thrown inside the gateway and the operator: `data` is `{ error: token, ...fields }`.
 * The gateway answers it as a tool error ({@link refusalResult}); the operator as a JSON-RPC error.
 */
export class GatewayRefusal extends McpError {
  override name = 'GatewayRefusal';
  readonly refusal: GatewayErrorName;
  constructor(name: GatewayErrorName, message: string, data: Record<string, unknown>) {
    super(GATEWAY_ERRORS[name].code, message, data);
    this.message = message;
    this.refusal = name;
  }
}

/** A refusal carrying `data.error` = the refusal's token and `data`'s other fields. */
export function gatewayError(name: GatewayErrorName, message: string, data: Record<string, unknown> = {}): GatewayRefusal {
  return new GatewayRefusal(name, message, { error: GATEWAY_ERRORS[name].token, ...data });
}

/** The first words of a refusal's text: what the agent must know before anything else. */
function lead(name: GatewayErrorName): string {
  if (name === 'upstreamAmbiguous')
    return "ctrlrun: the tool's outcome is unknown. The call was sent to the tool, which failed before answering; it may or may not have run, and this text is ctrlrun's, not the tool's.";
  if (name === 'upstreamNotExecuted') return "ctrlrun: the tool did not run. The upstream server was not reached; this text is ctrlrun's, not the tool's.";
  if (name === 'approvalRequired') return "ctrlrun held this call for a human's approval. The tool was not called; this text is ctrlrun's, not the tool's.";
  return "ctrlrun refused this call. The tool was not called; this text is ctrlrun's, not the tool's.";
}

/**
 * A refusal as a `tools/call` result: `isError: true`, one text block (the lead, then the
 * message naming the request id and how to answer it), the code, token and fields under
 * `_meta["com.ctrlrun/refusal"]` and, unless the tool declares an `outputSchema` (an SDK client
 * validates `structuredContent` against it even on an error), in `structuredContent`. A `_meta`
 * among the fields (the receipt of an upstream failure) becomes the result's `_meta`.
 */
export function refusalResult(err: GatewayRefusal, options: { structured: boolean }): CallToolResult {
  const { _meta: extraMeta, ...fields } = (err.data ?? {}) as Record<string, unknown>;
  const content = { code: err.code, ...fields };
  content.code = err.code; // the refusal's own code, whatever the fields say
  const meta = typeof extraMeta === 'object' && extraMeta !== null && !Array.isArray(extraMeta) ? (extraMeta as Record<string, unknown>) : {};
  return {
    isError: true,
    content: [{ type: 'text', text: `${lead(err.refusal)} ${err.message}` }],
    ...(options.structured ? { structuredContent: content } : {}),
    _meta: { ...meta, [REFUSAL_META_KEY]: content },
  };
}

/** The message an `McpError` was built with, without the `MCP error <code>: ` prefix the SDK adds. */
export function bareMessage(err: McpError): string {
  const prefix = `MCP error ${err.code}: `;
  return err.message.startsWith(prefix) ? err.message.slice(prefix.length) : err.message;
}
