/**
 * `@ctrlrun/mcp`: ctrlrun in front of any MCP server. {@link Gateway} puts every `tools/call`
 * through the control path; {@link createOperatorServer} is the MCP server a human answers
 * approvals from. Transports are the caller's (the `ctrlrun` CLI mounts both over Streamable
 * HTTP or stdio).
 *
 * @module
 */
export {
  Gateway,
  ReceiptIds,
  type GatewayOptions,
  DEFAULT_MAX_PENDING_APPROVALS,
  ALIAS_PATTERN,
  RECEIPT_META_KEY,
  ELICITATION_ROUNDS,
  toolsWithoutEntry,
} from './gateway.js';
export {
  type Outcome,
  type ErrorClass,
  NOT_EXECUTED_CODES,
  UpstreamNotConnected,
  upstreamFetch,
  classifyResult,
  classifyError,
  neverConnected,
} from './classify.js';
export { GATEWAY_ERRORS, type GatewayErrorName, gatewayError, GatewayRefusal, refusalResult, REFUSAL_META_KEY } from './errors.js';
export { createOperatorServer, type OperatorOptions, type OperatorIdentity, unreadableReceipt } from './operator.js';
export { mcpFetchHandler, type FetchHandlerOptions } from './web.js';
export { floatArgumentPointer, floatRefusal, MAX_DEPTH, spelledArguments, type FloatArgumentHandler } from './floats.js';
export {
  MIRRORED_HEADERS_REQUIRED_FROM,
  type ProtocolRefusal,
  type HeaderPairs,
  protocolVersionOf,
  headerText,
  argumentSpellings,
  checkProtocolHeaders,
} from './protocol.js';
