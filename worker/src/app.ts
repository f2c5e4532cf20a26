/**
 * The HTTP API over the kernel's one control path. Every action goes through
 * `Control.executeWithReceipt`; approvals are answered through `Control.grantApproval` /
 * `denyApproval`, effects resolved through `Control.resolveEffect`. The app decides nothing
 * itself: it authenticates, parses strictly, and maps the kernel's refusals to statuses.
 *
 * @module
 */
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import {
  ApprovalMismatch,
  ApprovalRequired,
  approvalProgress,
  createPrincipal,
  describeError,
  IdentityError,
  intake,
  IntakeRefusal,
  InvalidArgument,
  NotExecuted,
  parseJson,
  PendingApprovalLimit,
  resultToJson,
  verifyAnchors,
  verifyChain,
  viewTime,
  type Action,
  type AnchorProvider,
  type ApprovalRecord,
  type ApprovalStatus,
  type Control,
  type EffectRecord,
  type ExecuteOptions,
  type Executor,
  type JsonObject,
  type ChainReport,
  type JsonValue,
} from '@ctrlrun/kernel';
import { Mutex } from '@ctrlrun/kernel/store';
import type { TryIt } from '@ctrlrun/kernel/try-it';
import type { AgentIdentity, Authenticator, Identity, OperatorIdentity } from './auth.js';
import { checkExecutors, executorFor, type Executors } from './executors.js';
import { DEFAULT_BODY_LIMIT, errorResponse, HttpError, jsonResponse, readJsonBody, responseForError } from './http.js';
import { mountInbox } from './inbox.js';
import { openApiDocument } from './openapi.js';
import { mountRetention } from './retention.js';
import { mountBudgets } from './budgets.js';
import { decodeApprovalCursor, encodeApprovalCursor, receiptView } from './views.js';

/** Cross-origin access; off unless given. */
export interface CorsOptions {
  /** Origins allowed to call the API from a browser (exact matches). */
  origins: readonly string[];
}

/** Options of {@link createApp}. */
export interface AppOptions {
  /** The control path: its policy, store, clock and ids. */
  control: Control;
  /** Who runs each action, by name. An allowed action with none is recorded FAILED (422). */
  executors?: Executors;
  /** Resolves the caller's credential (e.g. {@link staticTokens}). */
  auth: Authenticator;
  /** The playground module: enables `POST /v1/try-it/step` (demo mode). */
  tryIt?: TryIt | null;
  /** Largest accepted request body in bytes (default 64 KiB). */
  bodyLimit?: number;
  /** Cross-origin access (default off: no CORS headers at all). */
  cors?: CorsOptions | null;
  /**
   * How many unanswered, unexpired approval requests one agent credential (its principal's agent
   * and user) may have (default 100); past it, an action that would ask for another is 429 and
   * nothing is written. `null`: no limit.
   */
  maxPendingApprovals?: number | null;
  /** The YAML the policy was loaded from, served by `GET /v1/policy` (omit: `yaml` is null). */
  policyText?: string | null;
  /** Where the policy came from, as `GET /v1/policy` names it (default the policy's `source`). */
  policySource?: string;
  /**
   * The operator inbox at `/inbox` (default on). `sessionSecret` signs its session cookies: give
   * every instance serving one inbox the same one (default: random per app).
   */
  inbox?: boolean | { sessionSecret?: string | null };
  /** Where the chain head and prune checkpoints are anchored outside the store (`POST /v1/anchors`; default none). */
  anchor?: AnchorProvider | null;
}

type Env = { Variables: { identity: Identity } };

/** The app {@link createApp} builds: call `app.fetch(request)`, or `app.request(path, init)` in tests. */
export type App = Hono<Env>;

const APPROVAL_STATUSES: readonly ApprovalStatus[] = ['pending', 'granted', 'denied', 'expired', 'consumed'];
const ACTION_KEYS = new Set(['name', 'arguments', 'resource', 'effectKey', 'approvalId']);
const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

function badRequest(message: string, path: string): HttpError {
  return new HttpError(400, 'ERR_INVALID_ARGUMENT', message, { path });
}

function notFound(message: string): HttpError {
  return new HttpError(404, 'ERR_NOT_FOUND', message);
}

/** The body of `POST /v1/actions`, checked field by field (400 naming the field). */
interface ActionRequest {
  name: string;
  arguments: JsonObject;
  resource: string | null | undefined;
  effectKey: string | undefined;
  approvalId: string | null;
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
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

/** The action as a human must see it before answering: every hashed field, and the hashed text. */
function actionJson(action: Action): Record<string, unknown> {
  return {
    actionId: action.actionId,
    name: action.name,
    arguments: action.canonicalArguments,
    principal: { agent: action.principal.agent, user: action.principal.user },
    resource: action.resource,
    environment: action.environment,
    actionHash: action.actionHash,
    canonical: action.canonical,
  };
}

/**
 * An approval request as the API shows it. Its id is `requestId` in every body (`approvalId`, the
 * same id, survives only where it was documented, deprecated: the grant's answer); every time is
 * in the form of every view (`viewTime`: UTC, milliseconds, `Z`), never the column's `+00:00`.
 */
function approvalJson(record: ApprovalRecord): Record<string, unknown> {
  const { request } = record;
  return {
    requestId: request.requestId,
    status: record.status,
    actionHash: request.actionHash,
    action: actionJson(request.action),
    createdAt: viewTime(request.createdAt),
    expiresAt: viewTime(request.expiresAt),
    policyHash: request.policyHash,
    approver: record.approver,
    grantedAt: viewTime(record.grantedAt),
    consumedAt: viewTime(record.consumedAt),
    approvalsRequired: request.approvalsRequired ?? 1,
    approvers: (record.approvers ?? []).map((a) => ({
      agent: a.agent,
      user: a.user,
      issuer: a.issuer,
      entitled: [...a.entitled],
      grantedAt: viewTime(a.grantedAt),
    })),
    progress: approvalProgress(record),
  };
}

/** Stored JSON text back as a value (floats allowed: results are whatever the executor returned). */
function storedValue(text: string | null): JsonValue {
  if (text === null) return null;
  try {
    return parseJson(text, { floats: 'allow', what: 'stored JSON' });
  } catch {
    return text;
  }
}

function effectJson(record: EffectRecord): Record<string, unknown> {
  return {
    effectKey: record.effectKey,
    state: record.state,
    actionId: record.actionId,
    attempt: record.attempt,
    leaseExpiresAt: viewTime(record.leaseExpiresAt),
    result: storedValue(record.resultJson),
    error: record.error,
    createdAt: viewTime(record.createdAt),
    updatedAt: viewTime(record.updatedAt),
    resolvedBy: record.resolvedBy,
  };
}

function queryInteger(c: Context, name: string, fallback: number, min: number, max: number): number {
  const raw = c.req.query(name);
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d{1,15}$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw badRequest(`${name} must be an integer from ${min} to ${max}`, `query.${name}`);
  }
  return Number(raw);
}

/** Grant and deny take no fields: an empty body, or `{}`. */
async function readEmptyBody(request: Request, limit: number): Promise<void> {
  const length = request.headers.get('content-length');
  const chunked = request.headers.has('transfer-encoding');
  if (!request.headers.has('content-type') && !chunked && (length === null || length.trim() === '0')) return;
  const body = await readJsonBody(request, limit);
  if (!isObject(body)) throw badRequest('the request body must be empty or {}', '$');
  const extra = Object.keys(body)[0];
  if (extra !== undefined) throw badRequest(`unknown field ${JSON.stringify(extra)}: this request takes no fields`, `$[${JSON.stringify(extra)}]`);
}

/**
 * The body of a grant: empty, `{}`, or `{ "edit": { "arguments": { … } } }` (edit-then-approve);
 * any other field, or an edit whose `arguments` is not an object, is a 400 naming its path.
 */
async function readGrantBody(request: Request, limit: number): Promise<JsonObject | null> {
  const length = request.headers.get('content-length');
  const chunked = request.headers.has('transfer-encoding');
  if (!request.headers.has('content-type') && !chunked && (length === null || length.trim() === '0')) return null;
  const body = await readJsonBody(request, limit);
  if (!isObject(body)) throw badRequest('the request body must be empty, {} or {"edit": {"arguments": {…}}}', '$');
  const extra = Object.keys(body).find((k) => k !== 'edit');
  if (extra !== undefined) throw badRequest(`unknown field ${JSON.stringify(extra)}: a grant takes only "edit"`, `$[${JSON.stringify(extra)}]`);
  if (!Object.prototype.hasOwnProperty.call(body, 'edit')) return null;
  const edit = body['edit'];
  if (!isObject(edit)) throw badRequest('edit must be an object {"arguments": {…}}', '$.edit');
  const stray = Object.keys(edit).find((k) => k !== 'arguments');
  if (stray !== undefined) throw badRequest(`unknown field ${JSON.stringify(stray)}: an edit takes only "arguments"`, `$.edit[${JSON.stringify(stray)}]`);
  const args = Object.prototype.hasOwnProperty.call(edit, 'arguments') ? edit['arguments'] : undefined;
  if (!isObject(args)) throw badRequest('edit.arguments must be a JSON object of the edited arguments', '$.edit.arguments');
  return args as JsonObject;
}

/** A result as stored, so the reply shows exactly what the record holds. */
function recorded(value: unknown): JsonValue {
  return storedValue(resultToJson(value));
}

/**
 * Builds the Hono app.
 *
 * - `POST /v1/actions` (agent): 200 committed, 202 approval required, 403 denied, 409
 *   mismatch/duplicate/ambiguous, 422 not executed, 429 too many approval requests waiting
 *   (`maxPendingApprovals`), 502 outcome unknown (recorded AMBIGUOUS). A caller's `effectKey`
 *   on an action without an `effect:` template is scoped to the action (`caller-keys.ts`); a
 *   `resource` on an action without a `resource:` template is refused.
 * - `GET /v1/approvals?status=&limit=&after=` (pages; `next` is the cursor),
 *   `POST /v1/approvals/:id/grant|deny` (operator). A grant's body may be
 *   `{ "edit": { "arguments": {…} } }`: the edited arguments are decided again (a deny is 403
 *   with the rule's sentence, the request stays pending) and granted under a new request id.
 * - `GET /v1/effects/:key`, `POST /v1/effects/:key/resolve` (operator).
 * - `GET /v1/receipts?after=&limit=`, `GET /v1/receipts/verify`, `GET /v1/receipts/:id` (operator).
 * - `POST /v1/try-it/step` (demo mode; `approve` and `resolve` need an operator).
 * - `GET /v1/policy` (agent or operator): the policy served, its hash as receipts record it, and
 *   which of its actions have an executor.
 * - `GET /v1/openapi.json`: the OpenAPI 3.1 document of all this, the playground route only in demo mode (no credential needed).
 * - `GET /healthz`.
 *
 * No credential is 401; the wrong role is 403; a body over the limit is 413; a body that is
 * not `application/json` is 415; malformed JSON, a leading byte order mark or a float is 400
 * with the JSON path. Receipt views read each row's hashed document, never its columns.
 */
export function createApp(options: AppOptions): App {
  if (!options || typeof options !== 'object') throw new InvalidArgument('createApp needs { control, auth }');
  const { control, auth } = options;
  if (!control || typeof control.executeWithReceipt !== 'function') throw new InvalidArgument('createApp needs a control (new Control({ policy, store }))');
  if (typeof auth !== 'function') throw new InvalidArgument('createApp needs auth (e.g. staticTokens([...]))');
  const executors = checkExecutors(options.executors);
  const limit = options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  if (!Number.isSafeInteger(limit) || limit <= 0) throw new InvalidArgument('bodyLimit must be a positive integer (bytes)');
  // The same per-principal limit on waiting approval requests as every agent-facing surface.
  const pendingLimit = new PendingApprovalLimit(control, options.maxPendingApprovals);
  const tryIt = options.tryIt ?? null;
  const store = control.store;
  // The playground module keeps per-step state (the last receipt, whether to lose the reply).
  const tryItSteps = new Mutex();
  // One chain verification at a time: it reads every row; concurrent callers share its answer.
  let verifying: Promise<ChainReport> | null = null;

  const app = new Hono<Env>();

  app.use('*', async (c, next) => {
    await next();
    // Evidence and decisions are never to be served from a cache.
    c.res.headers.set('cache-control', 'no-store');
  });
  if (options.cors) {
    const origins = [...options.cors.origins];
    app.use('/v1/*', cors({ origin: origins, allowHeaders: ['authorization', 'content-type'], allowMethods: ['GET', 'POST'], maxAge: 600 }));
  }

  const as =
    (roles: readonly Identity['role'][], what: string): MiddlewareHandler<Env> =>
    async (c, next) => {
      let identity: Identity | null;
      try {
        identity = await auth(c.req.raw);
      } catch (err) {
        if (err instanceof IdentityError) return errorResponse(401, err.code, err.message, {}, { 'www-authenticate': 'Bearer error="invalid_token"' });
        throw err;
      }
      if (identity === null)
        return errorResponse(401, 'ERR_IDENTITY', 'a bearer credential is required (Authorization: Bearer <token>)', {}, { 'www-authenticate': 'Bearer' });
      if (!roles.includes(identity.role)) return errorResponse(403, 'ERR_FORBIDDEN', `an ${identity.role} credential cannot ${what}`);
      if (identity.role === 'agent') {
        // A principal the kernel would refuse is the credential's fault, not the body's.
        try {
          createPrincipal(identity.principal);
        } catch (err) {
          if (!(err instanceof InvalidArgument)) throw err;
          return errorResponse(
            401,
            'ERR_IDENTITY',
            `the credential's principal is not valid: ${err.message}`,
            {},
            { 'www-authenticate': 'Bearer error="invalid_token"' },
          );
        }
      }
      c.set('identity', identity);
      await next();
      return undefined;
    };
  const agent = as(['agent'], 'propose actions');
  const operator = (what: string) => as(['operator'], what);

  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/v1/openapi.json', () => jsonResponse(200, openApiDocument({ playground: tryIt !== null })));

  const policyText = options.policyText ?? null;
  const policySource = options.policySource ?? control.policy.source;
  app.get('/v1/policy', as(['agent', 'operator'], 'read the policy'), () =>
    jsonResponse(200, {
      policyHash: control.policyHash,
      source: policySource,
      schema: control.policy.schema,
      version: control.policy.version,
      mode: control.policy.mode,
      environment: control.environment,
      actions: control.policy.actionNames.map((name) => ({ name, executor: executorFor(executors, name) !== undefined })),
      yaml: policyText,
    }),
  );

  app.post('/v1/actions', agent, async (c) => {
    const request = parseActionRequest(await readJsonBody(c.req.raw, limit));
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
    if ('refused' in slot) {
      const who = `${action.principal.agent}${action.principal.user === null ? '' : ` (user ${action.principal.user})`}`;
      return errorResponse(
        429,
        'ERR_TOO_MANY_PENDING_APPROVALS',
        `${who} already has ${slot.refused} approval request${slot.refused === 1 ? '' : 's'} waiting or under way, the most this server takes (maxPendingApprovals ${slot.limit}): wait until an operator answers them or they expire`,
        {
          limit: slot.limit,
          pending: slot.refused,
        },
      );
    }
    try {
      return await propose(action, exec);
    } finally {
      slot.release();
    }
  });

  /** Runs `action` through the control path and answers with its outcome. */
  const propose = async (action: Action, exec: ExecuteOptions): Promise<Response> => {
    const fn = executorFor(executors, action.name);
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
        const record = await store.getApproval(err.requestId);
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

  app.get('/v1/approvals', operator('list approvals'), async (c) => {
    const status = c.req.query('status');
    if (status !== undefined && !APPROVAL_STATUSES.includes(status as ApprovalStatus)) {
      throw badRequest(`status must be one of ${APPROVAL_STATUSES.join(', ')}`, 'query.status');
    }
    const pageSize = queryInteger(c, 'limit', DEFAULT_PAGE, 1, MAX_PAGE);
    const cursor = c.req.query('after');
    const after = cursor === undefined || cursor === '' ? null : decodeApprovalCursor(cursor);
    if (after === null && cursor !== undefined && cursor !== '') throw badRequest('after must be the next cursor of a previous page', 'query.after');
    const records = await store.approvalsPage({ status: status as ApprovalStatus | undefined, after, limit: pageSize + 1 });
    const page = records.slice(0, pageSize);
    const last = page.at(-1);
    const next =
      records.length > pageSize && last !== undefined ? encodeApprovalCursor({ createdAt: last.request.createdAt, requestId: last.request.requestId }) : null;
    return jsonResponse(200, { approvals: page.map(approvalJson), next });
  });

  const answer = (verb: 'grant' | 'deny') =>
    app.post(`/v1/approvals/:id/${verb}`, operator(`${verb} approvals`), async (c) => {
      const edit = verb === 'grant' ? await readGrantBody(c.req.raw, limit) : (await readEmptyBody(c.req.raw, limit), null);
      const id = c.req.param('id');
      const { operator: approver, verified } = c.get('identity') as OperatorIdentity;
      const as = verified === undefined ? {} : { verified };
      try {
        if (verb === 'grant') {
          let a;
          try {
            a = await control.grantApproval(id, edit === null ? { approver, ...as } : { approver, via: 'worker', edit: { arguments: edit }, ...as });
          } catch (err) {
            // Counted, not yet granted: 202 with the request as it stands ("1 of 2 approvals: ana").
            const record = err instanceof ApprovalMismatch && err.counted ? await control.store.getApproval(id) : null;
            if (record === null) throw err;
            return jsonResponse(202, { approval: approvalJson(record), message: (err as Error).message });
          }
          const approval = {
            requestId: a.approvalId,
            // Deprecated: the same id under its old name, kept for a release (README, "HTTP worker").
            approvalId: a.approvalId,
            status: 'granted',
            actionHash: a.actionHash,
            approver: a.approver,
            grantedAt: viewTime(a.grantedAt),
            expiresAt: viewTime(a.expiresAt),
          };
          if (a.approvalId === id) return jsonResponse(200, { approval });
          // An edit: the grant is a new request, bound to the edited hash; the proposed one is denied.
          return jsonResponse(200, { approval: { ...approval, editedFrom: id }, edit: await control.approvalEdit(a.approvalId) });
        }
        return jsonResponse(200, { approval: approvalJson(await control.denyApproval(id, { approver, ...as })) });
      } catch (err) {
        if (err instanceof ApprovalMismatch && err.reason === 'unknown') throw notFound(`no approval request ${id}`);
        throw err;
      }
    });
  answer('grant');
  answer('deny');

  app.get('/v1/effects/:key', operator('read effects'), async (c) => {
    const key = c.req.param('key');
    const record = await store.getEffect(key);
    if (record === null) throw notFound(`no effect record for ${key}`);
    return jsonResponse(200, { effect: effectJson(record) });
  });

  app.post('/v1/effects/:key/resolve', operator('resolve effects'), async (c) => {
    const key = c.req.param('key');
    const body = await readJsonBody(c.req.raw, limit);
    if (!isObject(body)) throw badRequest('the request body must be { "state": "committed" | "failed" }', '$');
    const extra = Object.keys(body).find((k) => k !== 'state');
    if (extra !== undefined)
      throw badRequest(`unknown field ${JSON.stringify(extra)}: send { "state": "committed" | "failed" }`, `$[${JSON.stringify(extra)}]`);
    const state = body['state'];
    if (state !== 'committed' && state !== 'failed') throw badRequest('state must be "committed" or "failed"', '$.state');
    const before = await store.getEffect(key);
    if (before === null) throw notFound(`no effect record for ${key}`);
    if (before.state !== 'ambiguous') {
      throw new HttpError(409, 'ERR_INVALID_ARGUMENT', `effect ${key} is ${before.state}, not ambiguous: only an ambiguous effect can be resolved`, {
        effectKey: key,
        state: before.state,
      });
    }
    const by = (c.get('identity') as OperatorIdentity).operator;
    return jsonResponse(200, { effect: effectJson(await control.resolveEffect(key, state, { by })) });
  });

  const verifyShared = (): Promise<ChainReport> =>
    (verifying ??= (async () => {
      try {
        const [rows, head, checkpoint] = await Promise.all([store.receipts(), store.chainHead(), store.pruneCheckpoint?.() ?? null]);
        return verifyChain(rows, head, { checkpoint });
      } finally {
        verifying = null;
      }
    })());

  app.get('/v1/receipts/verify', operator('verify receipts'), async () => jsonResponse(200, (await verifyShared()) as unknown as Record<string, unknown>));
  mountRetention(app, { store, operator, bodyLimit: limit, anchor: options.anchor ?? null });
  mountBudgets(app, { control, operator });

  if (options.inbox !== false) {
    const inboxOptions = typeof options.inbox === 'object' && options.inbox !== null ? options.inbox : {};
    mountInbox(app, {
      control,
      auth,
      verify: verifyShared,
      anchors: options.anchor && store.retention ? () => verifyAnchors(store, options.anchor!) : null,
      ...(inboxOptions.sessionSecret ? { sessionSecret: inboxOptions.sessionSecret } : {}),
    });
  }

  app.get('/v1/receipts', operator('read receipts'), async (c) => {
    const after = queryInteger(c, 'after', 0, 0, Number.MAX_SAFE_INTEGER);
    const pageSize = queryInteger(c, 'limit', DEFAULT_PAGE, 1, MAX_PAGE);
    const rows = await store.receiptsAfter(after, pageSize + 1);
    const page = rows.slice(0, pageSize);
    const body: Record<string, unknown> = { receipts: page.map(receiptView), next: null };
    if (rows.length > pageSize) {
      // The cursor is a seq column; a damaged row's seq (not an integer) cannot be one.
      const seqs = page.map((r) => r.seq as unknown).filter((s): s is number => typeof s === 'number' && Number.isSafeInteger(s) && s > after);
      if (seqs.length > 0) body['next'] = Math.max(...seqs);
      else
        body['breaks'] = [
          {
            name: 'content_altered',
            seq: null,
            detail: `the listing cannot go past seq ${after}: the rows after it have no integer seq (GET /v1/receipts/verify names them all)`,
          },
        ];
    }
    return jsonResponse(200, body);
  });

  app.get('/v1/receipts/:id', operator('read receipts'), async (c) => {
    const id = c.req.param('id');
    const row = await store.getReceipt(id);
    if (row === null) throw notFound(`no receipt ${id}`);
    return jsonResponse(200, receiptView(row));
  });

  app.post('/v1/try-it/step', as(['agent', 'operator'], 'use the playground'), async (c) => {
    if (tryIt === null) throw notFound('the playground is off: the worker is not in demo mode');
    const body = await readJsonBody(c.req.raw, limit);
    if (!isObject(body))
      throw badRequest(
        'a step is { op: "refund", payment_id, amount, lose_reply?, approval_id? }, { op: "approve", request_id } or { op: "resolve", effect_key, state }',
        '$',
      );
    // An agent may only refund: approving and resolving an AMBIGUOUS effect are the operator's (an
    // agent that could resolve its own lost reply as failed could run the refund twice).
    if (body['op'] !== 'refund' && c.get('identity').role !== 'operator') {
      return errorResponse(
        403,
        'ERR_FORBIDDEN',
        `an agent credential can only refund: ${body['op'] === 'resolve' ? 'resolving an effect' : 'approving'} is the operator's`,
      );
    }
    const result = await tryItSteps.run(() => tryIt.step(body as never));
    return jsonResponse(200, result as unknown as Record<string, unknown>);
  });

  app.notFound((c) => errorResponse(404, 'ERR_NOT_FOUND', `no route ${c.req.method} ${new URL(c.req.url).pathname}`));
  app.onError((err) => responseForError(err));

  return app;
}
