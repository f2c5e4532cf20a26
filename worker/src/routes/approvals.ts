/**
 * Approvals for an operator: `GET /v1/approvals?status=&limit=&after=` (pages; `next` is the
 * cursor), `POST /v1/approvals/:id/grant|deny`. A grant's body may be
 * `{ "edit": { "arguments": {…} } }`: the edited arguments are decided again (a deny is 403 with
 * the rule's sentence, the request stays pending) and granted under a new request id.
 *
 * @module
 */
import { ApprovalMismatch, approvalProgress, viewTime, type Action, type ApprovalRecord, type ApprovalStatus, type JsonObject } from '@ctrlrun/kernel';
import type { OperatorIdentity } from '../auth.js';
import { jsonResponse, readJsonBody } from '../http.js';
import { decodeApprovalCursor, encodeApprovalCursor } from './views.js';
import type { RouteContext } from './context.js';
import { badRequest, DEFAULT_PAGE, hasNoBody, isObject, MAX_PAGE, notFound, queryInteger, readEmptyBody } from './request.js';

const APPROVAL_STATUSES: readonly ApprovalStatus[] = ['pending', 'granted', 'denied', 'expired', 'consumed'];

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

/**
 * The body of a grant: empty, `{}`, or `{ "edit": { "arguments": { … } } }` (edit-then-approve);
 * any other field, or an edit whose `arguments` is not an object, is a 400 naming its path.
 */
async function readGrantBody(request: Request, limit: number): Promise<JsonObject | null> {
  if (hasNoBody(request)) return null;
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

/** An answer to a request the store does not hold is 404; any other error stands. */
function unknownAsNotFound(err: unknown, id: string): unknown {
  return err instanceof ApprovalMismatch && err.reason === 'unknown' ? notFound(`no approval request ${id}`) : err;
}

/** `GET /v1/approvals`: one page, oldest first, and the cursor of the next. */
function mountList(ctx: RouteContext): void {
  const { store } = ctx.control;
  ctx.app.get('/v1/approvals', ctx.gates.operator('list approvals'), async (c) => {
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
}

/** `POST /v1/approvals/:id/grant`: granted (200), counted toward a quorum (202), or edited and granted under a new id (200). */
function mountGrant(ctx: RouteContext): void {
  const { control } = ctx;
  ctx.app.post('/v1/approvals/:id/grant', ctx.gates.operator('grant approvals'), async (c) => {
    const edit = await readGrantBody(c.req.raw, ctx.bodyLimit);
    const id = c.req.param('id');
    const { operator: approver, verified } = c.get('identity') as OperatorIdentity;
    const as = verified === undefined ? {} : { verified };
    let a;
    try {
      a = await control.grantApproval(id, edit === null ? { approver, ...as } : { approver, via: 'worker', edit: { arguments: edit }, ...as });
    } catch (err) {
      // Counted, not yet granted: 202 with the request as it stands ("1 of 2 approvals: ana").
      const record = err instanceof ApprovalMismatch && err.counted ? await control.store.getApproval(id) : null;
      if (record === null) throw unknownAsNotFound(err, id);
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
  });
}

/** `POST /v1/approvals/:id/deny`: the request as denied (200). */
function mountDeny(ctx: RouteContext): void {
  const { control } = ctx;
  ctx.app.post('/v1/approvals/:id/deny', ctx.gates.operator('deny approvals'), async (c) => {
    await readEmptyBody(c.req.raw, ctx.bodyLimit);
    const id = c.req.param('id');
    const { operator: approver, verified } = c.get('identity') as OperatorIdentity;
    const as = verified === undefined ? {} : { verified };
    try {
      return jsonResponse(200, { approval: approvalJson(await control.denyApproval(id, { approver, ...as })) });
    } catch (err) {
      throw unknownAsNotFound(err, id);
    }
  });
}

/** Mounts the approval routes. */
export function mountApprovals(ctx: RouteContext): void {
  mountList(ctx);
  mountGrant(ctx);
  mountDeny(ctx);
}
