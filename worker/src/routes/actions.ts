/**
 * `POST /v1/actions` (agent): one call through the kernel's intake and `Control.executeWithReceipt`.
 * 200 committed, 202 approval required, 403 denied, 409 mismatch/duplicate/ambiguous, 422 not
 * executed, 429 too many approval requests waiting (`maxPendingApprovals`), 502 outcome unknown
 * (recorded AMBIGUOUS). A caller's `effectKey` on an action without an `effect:` template is
 * scoped to the action (`caller-keys.ts`); a `resource` on an action without a `resource:`
 * template is refused.
 *
 * @module
 */
import {
  ApprovalRequired,
  describeError,
  intake,
  IntakeRefusal,
  NotExecuted,
  PendingApprovalLimit,
  resultToJson,
  viewTime,
  type Action,
  type ExecuteOptions,
  type Executor,
  type JsonObject,
  type JsonValue,
} from '@ctrlrun/kernel';
import type { AgentIdentity } from '../auth.js';
import { executorFor, type Executors } from '../executors.js';
import { errorResponse, jsonResponse, readJsonBody, responseForError } from '../http.js';
import { storedValue } from './views.js';
import type { RouteContext } from './context.js';
import { badRequest, isObject } from './request.js';

const ACTION_KEYS = new Set(['name', 'arguments', 'resource', 'effectKey', 'approvalId']);

/** The body of `POST /v1/actions`, checked field by field (400 naming the field). */
interface ActionRequest {
  name: string;
  arguments: JsonObject;
  resource: string | null | undefined;
  effectKey: string | undefined;
  approvalId: string | null;
}

function optionalString(body: JsonObject, key: string): string | null | undefined {
  const v = body[key];
  if (v === undefined || v === null) return v;
  if (typeof v !== 'string' || v === '') throw badRequest(`${key} must be a non-empty string`, `$.${key}`);
  return v;
}

function parseActionRequest(body: JsonValue): ActionRequest {
  if (!isObject(body)) throw badRequest('the request body must be a JSON object { name, arguments, resource?, effectKey?, approvalId? }', '$');
  for (const key of Object.keys(body)) {
    if (key === 'principal') throw badRequest('the principal comes from the credential, never from the body', '$.principal');
    if (!ACTION_KEYS.has(key))
      throw badRequest(`unknown field ${JSON.stringify(key)}: send { name, arguments, resource?, effectKey?, approvalId? }`, `$[${JSON.stringify(key)}]`);
  }
  const name = body['name'];
  if (typeof name !== 'string' || name === '') throw badRequest('name must be a non-empty string (the action name the policy matches)', '$.name');
  const args = body['arguments'] ?? {};
  if (!isObject(args)) throw badRequest('arguments must be a JSON object', '$.arguments');
  const effectKey = optionalString(body, 'effectKey');
  return {
    name,
    arguments: args,
    resource: optionalString(body, 'resource'),
    effectKey: effectKey ?? undefined,
    approvalId: optionalString(body, 'approvalId') ?? null,
  };
}

/** A result as stored, so the reply shows exactly what the record holds. */
function recorded(value: unknown): JsonValue {
  return storedValue(resultToJson(value));
}

/** The 429 of an agent credential past its limit of waiting approval requests. */
function tooManyPending(action: Action, refused: number, limit: number): Response {
  const who = `${action.principal.agent}${action.principal.user === null ? '' : ` (user ${action.principal.user})`}`;
  return errorResponse(
    429,
    'ERR_TOO_MANY_PENDING_APPROVALS',
    `${who} already has ${refused} approval request${refused === 1 ? '' : 's'} waiting or under way, the most this server takes (maxPendingApprovals ${limit}): wait until an operator answers them or they expire`,
    { limit, pending: refused },
  );
}

/** Mounts `POST /v1/actions`: `executors` run what is allowed; `maxPendingApprovals` as `AppOptions` has it. */
export function mountActions(ctx: RouteContext, r: { executors: Executors; maxPendingApprovals: number | null | undefined }): void {
  const { control, bodyLimit } = ctx;
  // The same per-principal limit on waiting approval requests as every agent-facing surface.
  const pendingLimit = new PendingApprovalLimit(control, r.maxPendingApprovals);

  /** Runs `action` through the control path and answers with its outcome. */
  const propose = async (action: Action, exec: ExecuteOptions): Promise<Response> => {
    const fn = executorFor(r.executors, action.name);
    // Which side of the executor call an error came from decides 422 / 502 / the kernel's status.
    const call: { phase: 'not_called' | 'threw' | 'returned'; thrown: unknown; effectKey: string | null } = {
      phase: 'not_called',
      thrown: undefined,
      effectKey: null,
    };
    const run: Executor<unknown> = async (args, context) => {
      call.effectKey = context.effectKey;
      try {
        if (fn === undefined) throw new NotExecuted(`no executor is registered for ${action.name}`);
        const value = await fn(args, context);
        call.phase = 'returned';
        return value;
      } catch (err) {
        call.phase = 'threw';
        call.thrown = err;
        throw err;
      }
    };
    const ids = { actionId: action.actionId, actionHash: action.actionHash };
    try {
      const { value, receipt } = await control.executeWithReceipt(action, run, exec);
      return jsonResponse(200, {
        status: 'committed',
        ...ids,
        effectKey: receipt.document['effect_key'],
        receiptId: receipt.document['receipt_id'],
        seq: receipt.seq,
        result: recorded(value),
      });
    } catch (err) {
      if (err instanceof ApprovalRequired) {
        const record = await control.store.getApproval(err.requestId);
        return jsonResponse(202, {
          status: 'approval_required',
          requestId: err.requestId,
          ...ids,
          expiresAt: record === null ? undefined : viewTime(record.request.expiresAt),
          message: err.message,
        });
      }
      const { phase, effectKey } = call;
      const outcomeUnknown =
        (phase === 'threw' && err === call.thrown && !(err instanceof NotExecuted)) ||
        (phase === 'returned' &&
          typeof (err as { code?: unknown }).code === 'string' &&
          ['ERR_DUPLICATE_EFFECT', 'ERR_AMBIGUOUS_EFFECT'].includes((err as { code: string }).code));
      if (outcomeUnknown) {
        return errorResponse(
          502,
          'ERR_AMBIGUOUS_EFFECT',
          `the outcome of ${action.name} is unknown (${describeError(err)}); it is recorded AMBIGUOUS${effectKey === null ? '' : ' and a retry is refused until an operator resolves it'}`,
          {
            ...ids,
            effectKey,
            outcome: 'ambiguous',
          },
        );
      }
      return responseForError(err, phase === 'threw' ? { ...ids, effectKey } : ids);
    }
  };

  ctx.app.post('/v1/actions', ctx.gates.agent, async (c) => {
    const request = parseActionRequest(await readJsonBody(c.req.raw, bodyLimit));
    const identity = c.get('identity') as AgentIdentity;
    let action: Action;
    let exec: ExecuteOptions;
    try {
      ({ action, options: exec } = await intake(control, { ...request, principal: identity.principal, authenticated: true }));
    } catch (err) {
      if (!(err instanceof IntakeRefusal)) throw err;
      const template = err.reason === 'resource_template' ? control.policy.action(request.name)?.resource : undefined;
      throw badRequest(template ? `the policy's resource template ${template}: ${err.message}` : err.message, `$.${err.field}`);
    }

    const slot = await pendingLimit.acquire(action, request.approvalId);
    if ('refused' in slot) return tooManyPending(action, slot.refused, slot.limit);
    try {
      return await propose(action, exec);
    } finally {
      slot.release();
    }
  });
}
