/**
 * The operator's MCP server (docs/spec/04-surfaces.md §8): where a human answers approvals from their own
 * assistant. A transport for the answer only — it never executes, resumes, reserves, delegates or
 * revokes, and has no upstream. Reads need no credential; every write names a verified human and
 * goes through {@link Control.grantApproval}, {@link Control.denyApproval} or
 * {@link Control.resolveEffect}, attributed `mcp-operator:<user>`.
 *
 * @module
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import {
  ApprovalMismatch,
  approvalProgress,
  CTRLRunError,
  parseSince,
  receiptView,
  showInvisible,
  stats,
  viewTime,
  type Control,
  type JsonObject,
  type VerifiedPrincipal,
} from '@ctrlrun/kernel';
import { parseTime } from '@ctrlrun/kernel/store';
import { gatewayError, rpcError } from './errors.js';

/**
 * Who is asking, as the identity source sees them: `null` when no credential named anyone. The
 * server is a resolving surface: the principal is recorded on the request as a verified approver
 * (its roles from the Control's `approvers.rolesClaim` among `claims`), which is what counts
 * toward `approvals_required` above one.
 */
export type OperatorIdentity = {
  readonly agent: string;
  readonly user: string | null;
  readonly issuer?: string | null;
  readonly claims?: Readonly<Record<string, unknown>> | null;
} | null;

/** Options of {@link createOperatorServer}. */
export interface OperatorOptions {
  control: Control;
  /**
   * Resolves who sends a write (`tool` is `mcp-operator.<tool>`, `headers` the request's,
   * lower-cased). `null` is refused `-41007`; a principal without a user `-41013`.
   */
  identify: (context: { tool: string; headers: Readonly<Record<string, string>> }) => Promise<OperatorIdentity>;
  /** `inspect_action`'s document (`ctrlrun inspect --json`), or null for an unknown action. */
  inspect?: (actionId: string) => Promise<JsonObject | null>;
}

/** The attribution prefix of every answer given here. */
export const OPERATOR_ACTOR_PREFIX = 'mcp-operator:';

const object = (properties: Record<string, unknown>, required: string[] = []): Tool['inputSchema'] =>
  ({ type: 'object', properties, required, additionalProperties: false }) as Tool['inputSchema'];
const limit = (dflt: number) => ({ type: 'integer', minimum: 1, maximum: 200, default: dflt });

/** The tools, in the order `tools/list` gives them. */
export const OPERATOR_TOOLS: readonly Tool[] = [
  {
    name: 'list_pending_approvals',
    description:
      'Pending, unexpired approval requests, oldest first, each with exactly what was hashed: the canonical action text, its hash and its arguments.',
    inputSchema: object({ limit: limit(50) }),
  },
  {
    name: 'inspect_action',
    description: "One action's events, receipt, approvals and effect (ctrlrun inspect --json).",
    inputSchema: object({ action_id: { type: 'string' } }, ['action_id']),
  },
  {
    name: 'receipts',
    description: 'The newest receipts, oldest first; with control, only those whose controls cite it.',
    inputSchema: object({ limit: limit(20), control: { type: 'string' } }),
  },
  {
    name: 'effects',
    description: 'Effect records, optionally only those in one state.',
    inputSchema: object({ state: { type: 'string', enum: ['reserved', 'executing', 'committed', 'failed', 'ambiguous'] } }),
  },
  { name: 'stats', description: 'What the receipts recorded (ctrlrun.stats/v1).', inputSchema: object({ since: { type: 'string' } }) },
  {
    name: 'approve',
    description: 'Grant a pending request (bound to its action hash, used once). Needs a credential naming a human.',
    inputSchema: object({ request_id: { type: 'string' } }, ['request_id']),
  },
  {
    name: 'deny',
    description: 'Deny a pending request. Needs a credential naming a human.',
    inputSchema: object({ request_id: { type: 'string' } }, ['request_id']),
  },
  {
    name: 'resolve',
    description: 'Say what happened to an AMBIGUOUS effect. Needs a credential naming a human and a reason.',
    inputSchema: object({ effect_key: { type: 'string' }, outcome: { type: 'string', enum: ['committed', 'failed'] }, reason: { type: 'string' } }, [
      'effect_key',
      'outcome',
      'reason',
    ]),
  },
];

const WRITES = new Set(['approve', 'deny', 'resolve']);
/** Rows read from the store at a time by the list tools. */
const PAGE = 200;

function badArg(message: string): McpError {
  return rpcError(ErrorCode.InvalidParams, message);
}

/** Reads a tool's arguments against the few shapes these tools take; anything else is -32602. */
function argsOf(tool: Tool, raw: unknown): Record<string, unknown> {
  const args = raw ?? {};
  if (typeof args !== 'object' || args === null || Array.isArray(args)) throw badArg(`${tool.name}: arguments must be an object`);
  const schema = tool.inputSchema as { properties: Record<string, { type: string; minimum?: number; maximum?: number; enum?: string[] }>; required: string[] };
  for (const key of Object.keys(args))
    if (!Object.prototype.hasOwnProperty.call(schema.properties, key)) throw badArg(`${tool.name}: unknown argument ${JSON.stringify(key)}`);
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [key, spec] of Object.entries(schema.properties)) {
    const v = (args as Record<string, unknown>)[key];
    if (v === undefined) {
      if (schema.required.includes(key)) throw badArg(`${tool.name}: ${key} is required`);
      continue;
    }
    if (spec.type === 'integer') {
      if (!Number.isSafeInteger(v) || (v as number) < (spec.minimum ?? -Infinity) || (v as number) > (spec.maximum ?? Infinity)) {
        throw badArg(`${tool.name}: ${key} must be a whole number from ${spec.minimum} to ${spec.maximum}`);
      }
    } else if (typeof v !== 'string' || v.trim() === '') {
      throw badArg(`${tool.name}: ${key} must be a non-blank string`);
    } else if (spec.enum && !spec.enum.includes(v)) {
      throw badArg(`${tool.name}: ${key} must be one of ${spec.enum.join(', ')}`);
    }
    out[key] = v;
  }
  return out;
}

/**
 * A tool's answer: the JSON text a human (or their assistant) reads, with every invisible
 * character written as a JSON `\uXXXX` escape, so it shows and still parses to exactly the same
 * value, and an integer beyond 2^53 written as its digits, as it was hashed; and that value as
 * `structuredContent` (where such an integer is a string of its digits: a JSON number there
 * would be rounded by whoever parses it).
 */
function answer(value: unknown): CallToolResult {
  // A marker no agent can predict stands for each bigint, then its quotes go: digits, as hashed.
  const marker = `ctrlrun-integer-${Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) => b.toString(16).padStart(2, '0')).join('')}-`;
  const exact = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? marker + v.toString() : v), 2).replace(
    new RegExp(`"${marker}(-?[0-9]+)"`, 'g'),
    '$1',
  );
  // A raw newline here is the indentation's: one inside a string is already written `\n`.
  const text = showInvisible(exact, { keepNewlines: true });
  const structured = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  return { content: [{ type: 'text', text }], structuredContent: JSON.parse(structured) as Record<string, unknown> };
}

/**
 * A receipt row whose stored `json` is not a JSON object, as the operator's views list it (the
 * `receipts` tool, `inspect_action`'s `receipt_unreadable`): the columns that locate it and the
 * break's name, never the stored text, whatever bytes it holds.
 */
export function unreadableReceipt(row: { readonly seq: unknown; readonly receipt_id: unknown }): JsonObject {
  return {
    unreadable: true,
    seq: typeof row.seq === 'number' && Number.isSafeInteger(row.seq) ? row.seq : null,
    receipt_id: typeof row.receipt_id === 'string' ? row.receipt_id : null,
    break: 'content_altered',
    detail: 'its stored json is unreadable (not a JSON object), so it is not shown; verifying the chain names every break',
  };
}

function headersOf(raw: Readonly<Record<string, string | string[] | undefined>> | undefined): Record<string, string> | 'repeated' {
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [k, v] of Object.entries(raw ?? {})) {
    if (v === undefined) continue;
    if (Array.isArray(v)) return 'repeated';
    out[k.toLowerCase()] = v;
  }
  return out;
}

/** A new operator server (one per request or session); connect it to a transport. */
export function createOperatorServer(options: OperatorOptions): Server {
  const { control } = options;
  const store = control.store;
  const server = new Server(
    { name: 'ctrlrun-mcp-operator', version: '0.1.0' },
    {
      capabilities: { tools: {} },
      instructions: 'Answer ctrlrun approval requests. Reads need no credential; approve, deny and resolve are recorded as the human your credential names.',
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [...OPERATOR_TOOLS] }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = OPERATOR_TOOLS.find((t) => t.name === request.params.name);
    if (tool === undefined) throw badArg(`no tool ${JSON.stringify(request.params.name)}; the tools are ${OPERATOR_TOOLS.map((t) => t.name).join(', ')}`);
    const args = argsOf(tool, request.params.arguments);
    let actor: string | null = null;
    let verified: VerifiedPrincipal | null = null;
    if (WRITES.has(tool.name)) {
      const headers = headersOf(extra.requestInfo?.headers);
      let who: OperatorIdentity = null;
      if (headers !== 'repeated') {
        try {
          who = await options.identify({ tool: `mcp-operator.${tool.name}`, headers });
        } catch {
          who = null;
        }
      }
      if (who === null) throw gatewayError('noPrincipal', 'no principal');
      if (who.user === null) throw gatewayError('notAHuman', `${tool.name} needs a credential naming a human (a user); ${who.agent} names none`);
      actor = `${OPERATOR_ACTOR_PREFIX}${who.user}`;
      verified = { agent: who.agent, user: who.user, issuer: who.issuer ?? null, claims: who.claims ?? null };
    }
    try {
      switch (tool.name) {
        case 'list_pending_approvals': {
          // Read a page at a time (an agent can file many requests): never every row at once.
          const now = control.clock().getTime();
          const want = (args['limit'] as number | undefined) ?? 50;
          const pending: Awaited<ReturnType<typeof store.approvalsPage>> = [];
          let after: { createdAt: string; requestId: string } | null = null;
          for (;;) {
            const page = await store.approvalsPage({ status: 'pending', after, limit: PAGE });
            for (const a of page) if (pending.length < want && parseTime(a.request.expiresAt).getTime() >= now) pending.push(a);
            if (pending.length >= want || page.length < PAGE) break;
            const last = page[page.length - 1]!;
            after = { createdAt: last.request.createdAt, requestId: last.request.requestId };
          }
          return answer({
            approvals: pending.map((a) => ({
              request_id: a.request.requestId,
              action_hash: a.request.actionHash,
              action: {
                name: a.request.action.name,
                arguments: a.request.action.canonicalArguments,
                principal: { agent: a.request.action.principal.agent, user: a.request.action.principal.user },
                resource: a.request.action.resource,
                environment: a.request.action.environment,
              },
              hashed: a.request.action.canonical,
              created_at: viewTime(a.request.createdAt),
              expires_at: viewTime(a.request.expiresAt),
            })),
          });
        }
        case 'inspect_action': {
          if (options.inspect === undefined) throw badArg('inspect_action is not available on this server');
          const doc = await options.inspect(args['action_id'] as string);
          if (doc === null) throw badArg(`no action ${JSON.stringify(args['action_id'])}`);
          return answer(doc);
        }
        case 'receipts': {
          // The newest `limit` (cited) receipts, read a page at a time and keeping only those:
          // memory stays bounded however long the chain is.
          const control = args['control'] as string | undefined;
          const want = (args['limit'] as number | undefined) ?? 20;
          const kept: unknown[] = [];
          let after = 0;
          for (;;) {
            const page = await store.receiptsAfter(after, PAGE);
            for (const r of page) {
              const d = receiptView(r).document;
              // A row whose json cannot be read is listed as such, filter or not (whether it cites
              // the control cannot be read either): one damaged row never hides the others.
              if (d !== null && control !== undefined && !(Array.isArray(d['controls']) && d['controls'].includes(control))) continue;
              kept.push(d ?? unreadableReceipt(r));
              if (kept.length > want) kept.shift();
            }
            const last = page[page.length - 1]?.seq;
            // A short page is the end; a seq that is no integer cannot be paged past (ctrlrun verify names it).
            if (page.length < PAGE || typeof last !== 'number' || !Number.isSafeInteger(last) || last <= after) break;
            after = last;
          }
          return answer({ receipts: kept });
        }
        case 'effects': {
          const records = await store.listEffects(args['state'] as Parameters<typeof store.listEffects>[0]);
          // Times in the form of every view (UTC, milliseconds, Z), not the columns' `+00:00`.
          return answer({
            effects: records.map((r) => ({
              ...r,
              leaseExpiresAt: viewTime(r.leaseExpiresAt),
              createdAt: viewTime(r.createdAt),
              updatedAt: viewTime(r.updatedAt),
            })),
          });
        }
        case 'stats': {
          let since: Date | null = null;
          if (args['since'] !== undefined) {
            try {
              since = parseSince(args['since'] as string, control.clock());
            } catch (err) {
              throw badArg(`stats: ${err instanceof Error ? err.message : String(err)}`);
            }
          }
          return answer(await stats(store, { since, mode: control.policy.mode, clock: control.clock }));
        }
        case 'approve': {
          const id = args['request_id'] as string;
          let approval;
          try {
            approval = await control.grantApproval(id, { approver: actor!, via: 'mcp-operator', verified });
          } catch (err) {
            // Counted, not yet granted: the request needs more verified approvers ("1 of 2 approvals: ana").
            const record = err instanceof ApprovalMismatch && err.counted ? await store.getApproval(id) : null;
            if (record === null) throw err;
            return answer({
              status: 'pending',
              request_id: id,
              approver: actor,
              progress: approvalProgress(record),
              message: err instanceof Error ? err.message : '',
            });
          }
          return answer({
            status: 'granted',
            request_id: approval.approvalId,
            action_hash: approval.actionHash,
            approver: actor,
            expires_at: viewTime(approval.expiresAt),
          });
        }
        case 'deny': {
          const record = await control.denyApproval(args['request_id'] as string, { approver: actor!, via: 'mcp-operator', verified });
          return answer({ status: 'denied', request_id: record.request.requestId, approver: actor });
        }
        case 'resolve': {
          const outcome = args['outcome'] as 'committed' | 'failed';
          const record = await control.resolveEffect(args['effect_key'] as string, outcome, {
            by: actor!,
            via: 'mcp-operator',
            reason: args['reason'] as string,
          });
          return answer({ status: 'resolved', effect_key: record.effectKey, state: record.state, resolved_by: actor });
        }
      }
      throw badArg(`no tool ${tool.name}`);
    } catch (err) {
      if (err instanceof McpError) throw err;
      if (err instanceof CTRLRunError) throw gatewayError('approvalDenied', err.message, { reason: err.code });
      throw rpcError(ErrorCode.InternalError, `the store failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  });
  return server;
}
