/**
 * The flags both MCP commands take. Kept apart from `mcp-http.ts` so that registering the
 * commands loads no MCP SDK: `gateway` and `mcp-operator` import the SDK only when they run.
 *
 * @module
 */
import type { OptionSpec } from './command.js';

/** Options both MCP commands take, alike. */
export const MCP_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  path: { type: 'string', value: 'PATH', help: 'the MCP endpoint (default /mcp; not under /ctrlrun/)' },
  environment: { type: 'string', value: 'ENV', help: 'the deployment environment (beats $CTRLRUN_ENVIRONMENT and the policy)' },
  'max-body-bytes': { type: 'string', value: 'N', help: 'largest request body accepted (default 1048576)' },
  'allow-origin': { type: 'string', multiple: true, value: 'ORIGIN', help: 'an Origin header to accept (repeatable; none: any Origin is refused)' },
  authority: {
    type: 'string',
    value: 'FILE',
    help: 'a standalone authority document (grants per principal); refused if the policy has an authority: section too',
  },
};
