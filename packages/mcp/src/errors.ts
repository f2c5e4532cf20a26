/**
 * The gateway's JSON-RPC errors (spec 04 §5): a refusal is an error response with a stable code
 * and a `data.error` token, never a `result` with `isError`, so an agent cannot mistake it for
 * the tool's own answer.
 *
 * @module
 */
import { McpError } from '@modelcontextprotocol/sdk/types.js';

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

/** A JSON-RPC error carrying `data.error` = the refusal's token and `data`'s other fields. */
export function gatewayError(name: GatewayErrorName, message: string, data: Record<string, unknown> = {}): McpError {
  const { code, token } = GATEWAY_ERRORS[name];
  return rpcError(code, message, { error: token, ...data });
}

/** The message an `McpError` was built with, without the `MCP error <code>: ` prefix the SDK adds. */
export function bareMessage(err: McpError): string {
  const prefix = `MCP error ${err.code}: `;
  return err.message.startsWith(prefix) ? err.message.slice(prefix.length) : err.message;
}
