/**
 * The HTTP API as an OpenAPI 3.1 document, served at `GET /v1/openapi.json`. Its schemas are
 * JSON Schema 2020-12, and a test validates every response the suite receives against them, so
 * the document describes what the server sends, not what it was meant to send.
 *
 * @module
 */
import { jsonResponse } from '../http.js';
import type { RouteContext } from './context.js';

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const str: Schema = { type: 'string' };
const nullableStr: Schema = { type: ['string', 'null'] };
const int: Schema = { type: 'integer' };
const hash: Schema = { type: 'string', pattern: '^sha256:[0-9a-f]{64}$' };
/** Every time the API shows: UTC, milliseconds, `Z` (the receipts' own form), never a column's `+00:00`. */
const time: Schema = {
  type: 'string',
  pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$',
  description: 'ISO-8601, UTC, milliseconds, Z: 2026-09-07T11:44:30.625Z',
};
const nullableTime: Schema = { ...time, type: ['string', 'null'] };
/** An approval request's id: `requestId` in every body. */
const requestId: Schema = { type: 'string', description: "The approval request's id (apr_…)." };
const anyJson: Schema = {};
const obj = (properties: Record<string, Schema>, required: string[] = Object.keys(properties), extra = false): Schema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: extra,
});

const schemas: Record<string, Schema> = {
  Error: obj({
    error: obj(
      {
        code: { type: 'string', pattern: '^ERR_[A-Z_]+$' },
        message: str,
        path: str,
        actionId: str,
        actionHash: hash,
        effectKey: nullableStr,
        requestId: { ...requestId, description: 'The approval request the refusal is about (an ApprovalMismatch: the one presented).' },
        approvalId: { ...requestId, deprecated: true, description: 'The same id as requestId, under its old name: deprecated, kept for a release.' },
        outcome: { const: 'ambiguous' },
        limit: int,
        pending: int,
        state: str,
        reason: str,
      },
      ['code', 'message'],
      true,
    ),
  }),
  ActionRequest: obj(
    {
      name: { type: 'string', minLength: 1, description: 'The action name the policy matches.' },
      arguments: { type: 'object', description: 'The arguments, hashed in canonical form. Integers only (no floats).' },
      resource: { type: ['string', 'null'], minLength: 1 },
      effectKey: { type: ['string', 'null'], minLength: 1 },
      approvalId: { type: ['string', 'null'], minLength: 1 },
    },
    ['name'],
  ),
  Committed: obj({ status: { const: 'committed' }, actionId: str, actionHash: hash, effectKey: nullableStr, receiptId: str, seq: int, result: anyJson }),
  ApprovalRequired: obj({ status: { const: 'approval_required' }, requestId, actionId: str, actionHash: hash, expiresAt: time, message: str }),
  Action: obj({
    actionId: str,
    name: str,
    arguments: { type: 'object', description: 'Every key as hashed, `__proto__` included.' },
    principal: obj({ agent: str, user: nullableStr }),
    resource: nullableStr,
    environment: str,
    actionHash: hash,
    canonical: { type: 'string', description: 'The exact text that was hashed.' },
  }),
  Approval: obj({
    requestId,
    status: { enum: ['pending', 'granted', 'denied', 'expired', 'consumed'] },
    actionHash: hash,
    action: ref('Action'),
    createdAt: time,
    expiresAt: time,
    policyHash: hash,
    approver: nullableStr,
    grantedAt: nullableTime,
    consumedAt: nullableTime,
    approvalsRequired: { type: 'integer', minimum: 1, description: 'How many distinct verified approvers must say yes (approvals_required).' },
    approvers: {
      type: 'array',
      description: 'The verified approvers who answered so far, in order.',
      items: obj({ agent: str, user: nullableStr, issuer: nullableStr, entitled: { type: 'array', items: str }, grantedAt: time }),
    },
    progress: { type: ['string', 'null'], description: 'For a request needing several approvers: "1 of 2 approvals: ana"; else null.' },
  }),
  Counted: obj({ approval: ref('Approval'), message: str }),
  ApprovalPage: obj({ approvals: { type: 'array', items: ref('Approval') }, next: nullableStr }),
  Grant: {
    type: 'object',
    required: ['approval'],
    properties: {
      approval: {
        type: 'object',
        required: ['requestId', 'approvalId', 'status', 'actionHash', 'approver', 'grantedAt', 'expiresAt'],
        properties: {
          requestId: { ...requestId, description: 'The granted request: the one answered, or with an edit the new request of the edited arguments.' },
          approvalId: { ...requestId, deprecated: true, description: 'The same id as requestId, under its old name: deprecated, kept for a release.' },
          status: { const: 'granted' },
          actionHash: hash,
          approver: str,
          grantedAt: time,
          expiresAt: time,
          editedFrom: requestId,
        },
        additionalProperties: false,
      },
      edit: {
        description: 'Present when the grant approved edited arguments: the proposed request (now denied) and the approved one.',
        type: 'object',
        properties: {
          proposed: str,
          approved: str,
          editor: str,
          proposedHash: hash,
          approvedHash: hash,
          proposedArguments: { type: 'object' },
          approvedArguments: { type: 'object' },
        },
      },
    },
  },
  Denial: obj({ approval: ref('Approval') }),
  Effect: obj({
    effect: obj({
      effectKey: str,
      state: { enum: ['pending', 'committed', 'failed', 'ambiguous'] },
      actionId: str,
      attempt: int,
      leaseExpiresAt: nullableTime,
      result: anyJson,
      error: nullableStr,
      createdAt: nullableTime,
      updatedAt: nullableTime,
      resolvedBy: nullableStr,
    }),
  }),
  Resolve: obj({ state: { enum: ['committed', 'failed'] } }),
  ChainBreak: obj({ name: str, seq: { type: ['integer', 'null'] }, detail: str }, ['name', 'seq'], true),
  Receipt: obj(
    {
      seq: anyJson,
      receiptId: anyJson,
      actionId: anyJson,
      effectKey: anyJson,
      result: anyJson,
      ts: anyJson,
      prevHash: anyJson,
      hash: nullableStr,
      receipt: { type: ['object', 'null'], description: 'The hashed document as stored.' },
      intact: { type: 'boolean' },
      breaks: { type: 'array', items: ref('ChainBreak') },
      unverifiedColumns: obj({ receiptId: nullableStr, seq: nullableStr }),
    },
    ['seq', 'receiptId', 'actionId', 'effectKey', 'result', 'ts', 'prevHash', 'hash', 'receipt', 'intact', 'breaks'],
  ),
  ReceiptPage: obj(
    { receipts: { type: 'array', items: ref('Receipt') }, next: { type: ['integer', 'null'] }, breaks: { type: 'array', items: ref('ChainBreak') } },
    ['receipts', 'next'],
  ),
  ChainReport: obj({
    ok: { type: 'boolean' },
    verified: int,
    chained: int,
    unchained: int,
    head_seq: { type: ['integer', 'null'] },
    head_hash: nullableStr,
    breaks: { type: 'array', items: ref('ChainBreak') },
    column_findings: {
      type: 'array',
      items: ref('ChainBreak'),
      description: "Columns that disagree with their row's hashed document (column_mismatch): shown beside the verdict, never part of ok.",
    },
  }),
  Checkpoint: obj({ seq: int, hash, schema: str, at: time }),
  Anchor: obj({ seq: int, hash, token: str, kind: { enum: ['interval', 'checkpoint'] }, at: time }),
  AnchorReport: obj(
    {
      status: { enum: ['ok', 'broken', 'unavailable'], description: 'unavailable: the provider could not be asked; never ok.' },
      provider: str,
      anchors: int,
      breaks: {
        type: 'array',
        items: obj({ name: { enum: ['anchor_broken', 'anchor_missing', 'anchor_repudiated'] }, seq: { type: ['integer', 'null'] }, detail: str }),
      },
      unavailable: str,
    },
    ['status', 'provider', 'anchors', 'breaks'],
  ),
  PruneRequest: obj({ through: { type: 'integer', minimum: 1 }, olderThanSeconds: { type: 'integer', minimum: 0 } }),
  PruneResult: obj({
    checkpoint: ref('Checkpoint'),
    receiptsDeleted: int,
    ledgerRowsDeleted: int,
    anchor: { oneOf: [ref('Anchor'), { type: 'null' }] },
    receiptSeq: int,
  }),
  HoldRequest: obj(
    { fromSeq: { type: 'integer', minimum: 1 }, toSeq: { type: ['integer', 'null'], minimum: 1 }, reason: { type: 'string', minLength: 1 }, holdId: str },
    ['fromSeq', 'reason'],
  ),
  BudgetSpend: obj({
    grantId: str,
    delegated: { type: 'boolean' },
    metric: str,
    windowSeconds: int,
    limit: { type: 'string', pattern: '^[0-9]+$' },
    spent: { type: 'string', pattern: '^[0-9]+$' },
  }),
  Hold: obj({
    holdId: str,
    fromSeq: int,
    toSeq: { type: ['integer', 'null'] },
    reason: str,
    placedBy: str,
    placedAt: time,
    releasedAt: nullableTime,
    releasedBy: nullableStr,
  }),
  Policy: obj({
    policyHash: hash,
    source: str,
    schema: str,
    version: nullableStr,
    mode: { enum: ['enforce', 'observe'] },
    environment: str,
    actions: { type: 'array', items: obj({ name: str, executor: { type: 'boolean' } }) },
    yaml: nullableStr,
  }),
};

/** The playground's schemas: in the document only while its route is on. */
const playgroundSchemas: Record<string, Schema> = {
  TryItStep: {
    type: 'object',
    description: 'A playground step: `{ op: "refund", payment_id, amount, lose_reply?, approval_id? }` or `{ op: "approve", request_id }`.',
  },
  TryItResult: { type: 'object', description: 'What one playground step did: its outcome, and the receipt or refusal it left.' },
};

const json = (schema: Schema, description: string): Schema => ({ description, content: { 'application/json': { schema } } });
const error = (description: string): Schema => json(ref('Error'), description);
const common = { '401': error('No credential, or one that is not valid.'), '403': error('The credential has the wrong role.') };
const operatorOnly = { ...common };
const bearer = [{ bearer: [] }];
const pathParam = (name: string, description: string): Schema => ({ name, in: 'path', required: true, schema: str, description });
const query = (name: string, schema: Schema, description: string): Schema => ({ name, in: 'query', required: false, schema, description });
const body = (schema: Schema, required = true): Schema => ({ required, content: { 'application/json': { schema } } });

/** Which optional routes a worker serves: the document lists only the routes that answer. */
export interface OpenApiRoutes {
  /** `POST /v1/try-it/step`, on in demo mode (`CTRLRUN_DEMO`, the app's `tryIt`). */
  readonly playground: boolean;
}

/** The OpenAPI 3.1 document of the worker's API as `routes` configure it (a fresh copy each call). */
export function openApiDocument(routes: OpenApiRoutes): Record<string, unknown> {
  const playground: Record<string, Schema> = routes.playground
    ? {
        '/v1/try-it/step': {
          post: {
            operationId: 'tryItStep',
            summary: 'A playground step (demo mode)',
            security: bearer,
            requestBody: body(ref('TryItStep')),
            responses: { '200': json(ref('TryItResult'), 'The step result.'), '400': error('Bad step.'), ...common },
          },
        },
      }
    : {};
  return {
    openapi: '3.1.0',
    info: {
      title: 'ctrlrun worker',
      version: '1',
      description:
        'The last check before an AI agent does something it cannot undo, over HTTP. Agents propose actions; operators answer approvals, resolve AMBIGUOUS effects and read receipts. The principal always comes from the credential. Bodies are strict JSON: a float, a byte order mark or an unknown field is 400 with its path.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An agent or operator token (static, or a JWT for agents).' } },
      schemas: { ...schemas, ...(routes.playground ? playgroundSchemas : {}) },
    },
    paths: {
      '/healthz': { get: { operationId: 'health', summary: 'Liveness', responses: { '200': json(obj({ ok: { const: true } }), 'Up.') } } },
      '/v1/openapi.json': {
        get: {
          operationId: 'openapi',
          summary: 'This document',
          responses: { '200': json({ type: 'object', required: ['openapi', 'paths'] }, 'The OpenAPI document.') },
        },
      },
      '/v1/policy': {
        get: {
          operationId: 'getPolicy',
          summary: 'The policy served, its hash and which actions have an executor',
          security: bearer,
          responses: { '200': json(ref('Policy'), 'The policy.'), '401': common['401'] },
        },
      },
      '/v1/actions': {
        post: {
          operationId: 'proposeAction',
          summary: 'Propose an action (agent)',
          security: bearer,
          requestBody: body(ref('ActionRequest')),
          responses: {
            '200': json(ref('Committed'), 'Allowed (or approved) and run; the receipt is written.'),
            '202': json(ref('ApprovalRequired'), 'A human must approve this exact action; retry with approvalId once granted.'),
            '400': error('Malformed body, a float, an unknown field, a bad effectKey or resource (path names it).'),
            ...common,
            '409': error('ApprovalMismatch, DuplicateEffect or AmbiguousEffect.'),
            '413': error('Body over the limit.'),
            '415': error('Not application/json.'),
            '422': error('NotExecuted: refused before acting, recorded FAILED (or no executor).'),
            '429': error('Too many approval requests waiting for this credential; nothing written.'),
            '502': error('The outcome is unknown; recorded AMBIGUOUS until an operator resolves it.'),
          },
        },
      },
      '/v1/approvals': {
        get: {
          operationId: 'listApprovals',
          summary: 'Approval requests, paged (operator)',
          security: bearer,
          parameters: [
            query('status', { enum: ['pending', 'granted', 'denied', 'expired', 'consumed'] }, 'Only this status.'),
            query('limit', { type: 'integer', minimum: 1, maximum: 1000 }, 'Page size (default 100).'),
            query('after', str, 'The `next` cursor of the previous page.'),
          ],
          responses: { '200': json(ref('ApprovalPage'), 'One page.'), '400': error('Bad query.'), ...operatorOnly },
        },
      },
      '/v1/approvals/{id}/grant': {
        post: {
          operationId: 'grantApproval',
          summary: 'Grant (operator)',
          security: bearer,
          parameters: [pathParam('id', 'The request id.')],
          requestBody: body(
            {
              type: 'object',
              additionalProperties: false,
              properties: {
                edit: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['arguments'],
                  properties: {
                    arguments: {
                      type: 'object',
                      description: 'Approve these arguments instead of the proposed ones: decided again by the policy, granted under a new request id.',
                    },
                  },
                },
              },
            },
            false,
          ),
          responses: {
            '200': json(ref('Grant'), 'Granted: the agent may now run it, once (with an edit, the edited arguments under a new request id).'),
            '202': json(ref('Counted'), 'Counted, still pending: the request needs more verified approvers ("1 of 2 approvals: ana").'),
            '400': error('A body with other fields, or edited arguments that make no action.'),
            ...operatorOnly,
            '403': error('The credential has the wrong role, or the edited arguments are denied (by policy or authority; the request stays pending).'),
            '404': error('No such request.'),
            '409': error(
              'Not pending (answered, expired, consumed), or a yes that cannot count (the same person again, or no verified identity on a request needing several).',
            ),
          },
        },
      },
      '/v1/approvals/{id}/deny': {
        post: {
          operationId: 'denyApproval',
          summary: 'Deny (operator)',
          security: bearer,
          parameters: [pathParam('id', 'The request id.')],
          requestBody: body({ type: 'object', additionalProperties: false }, false),
          responses: {
            '200': json(ref('Denial'), 'Denied.'),
            '400': error('A body with fields.'),
            ...operatorOnly,
            '404': error('No such request.'),
            '409': error('Not pending.'),
          },
        },
      },
      '/v1/effects/{key}': {
        get: {
          operationId: 'getEffect',
          summary: 'One effect record (operator)',
          security: bearer,
          parameters: [pathParam('key', 'The effect key (URL-encoded).')],
          responses: { '200': json(ref('Effect'), 'The record.'), ...operatorOnly, '404': error('No such effect.') },
        },
      },
      '/v1/effects/{key}/resolve': {
        post: {
          operationId: 'resolveEffect',
          summary: 'Resolve an AMBIGUOUS effect (operator)',
          security: bearer,
          parameters: [pathParam('key', 'The effect key (URL-encoded).')],
          requestBody: body(ref('Resolve')),
          responses: {
            '200': json(ref('Effect'), 'Resolved.'),
            '400': error('Bad body.'),
            ...operatorOnly,
            '404': error('No such effect.'),
            '409': error('Not ambiguous.'),
          },
        },
      },
      '/v1/receipts': {
        get: {
          operationId: 'listReceipts',
          summary: 'Receipts after a seq, paged (operator)',
          security: bearer,
          parameters: [
            query('after', { type: 'integer', minimum: 0 }, 'List rows with a larger seq.'),
            query('limit', { type: 'integer', minimum: 1, maximum: 1000 }, 'Page size (default 100).'),
          ],
          responses: { '200': json(ref('ReceiptPage'), 'One page.'), '400': error('Bad query.'), ...operatorOnly },
        },
      },
      '/v1/receipts/verify': {
        get: {
          operationId: 'verifyReceipts',
          summary: 'Verify the whole chain (operator)',
          security: bearer,
          responses: { '200': json(ref('ChainReport'), 'The report.'), ...operatorOnly },
        },
      },
      '/v1/retention/prune': {
        post: {
          operationId: 'prune',
          summary: 'Prune the chain through a seq under a checkpoint (operator)',
          security: bearer,
          requestBody: body(ref('PruneRequest')),
          responses: {
            '200': json(ref('PruneResult'), 'Pruned.'),
            '400': error('Bad body.'),
            ...operatorOnly,
            '409': error('Refused (reason: through_head, not_forward, held, unsettled, charged, new_break, no_chain), naming the hold or effect.'),
            '503': error('The anchor provider failed: nothing was anchored or deleted.'),
          },
        },
      },
      '/v1/budgets': {
        get: {
          operationId: 'listBudgets',
          summary: 'What each budgeted grant spent per metric in its window, beside the limit (operator)',
          security: bearer,
          parameters: [query('grant', str, 'Only this grant or dlg_… delegation.')],
          responses: {
            '200': json(obj({ budgets: { type: 'array', items: ref('BudgetSpend') } }), 'The budgets in force.'),
            '400': error('A malformed grant id.'),
            ...operatorOnly,
          },
        },
      },
      '/v1/retention/holds': {
        get: {
          operationId: 'listHolds',
          summary: 'Every legal hold (operator)',
          security: bearer,
          responses: { '200': json(obj({ holds: { type: 'array', items: ref('Hold') } }), 'The holds.'), ...operatorOnly },
        },
        post: {
          operationId: 'placeHold',
          summary: 'Place a legal hold on a receipt range (operator)',
          security: bearer,
          requestBody: body(ref('HoldRequest')),
          responses: { '201': json(obj({ hold: ref('Hold') }), 'Placed.'), '400': error('Bad body.'), ...operatorOnly, '409': error('The hold id exists.') },
        },
      },
      '/v1/retention/holds/{id}/release': {
        post: {
          operationId: 'releaseHold',
          summary: 'Release a legal hold (operator)',
          security: bearer,
          parameters: [pathParam('id', 'The hold id.')],
          responses: { '200': json(obj({ hold: ref('Hold') }), 'Released.'), ...operatorOnly, '409': error('No live hold with this id.') },
        },
      },
      '/v1/anchors': {
        post: {
          operationId: 'anchor',
          summary: "Anchor the chain head with the deployment's provider (operator)",
          security: bearer,
          responses: {
            '201': json(obj({ anchor: ref('Anchor') }), 'Anchored.'),
            ...operatorOnly,
            '409': error('Refused: not above the last anchor of its kind, or the provider time ran backwards.'),
            '501': error('No anchor provider is configured.'),
            '503': error('The provider failed: nothing was anchored.'),
          },
        },
      },
      '/v1/anchors/verify': {
        get: {
          operationId: 'verifyAnchors',
          summary: 'Verify the store against its anchors, apart from the chain report (operator)',
          security: bearer,
          responses: { '200': json(ref('AnchorReport'), 'The report.'), ...operatorOnly, '501': error('No anchor provider is configured.') },
        },
      },
      '/v1/receipts/{id}': {
        get: {
          operationId: 'getReceipt',
          summary: 'One receipt (operator)',
          security: bearer,
          parameters: [pathParam('id', 'The receipt id.')],
          responses: { '200': json(ref('Receipt'), 'The receipt.'), ...operatorOnly, '404': error('No such receipt.') },
        },
      },
      ...playground,
    },
  };
}

/** Mounts `GET /v1/openapi.json` (no credential needed). */
export function mountOpenApi(ctx: RouteContext, routes: OpenApiRoutes): void {
  ctx.app.get('/v1/openapi.json', () => jsonResponse(200, openApiDocument(routes)));
}
