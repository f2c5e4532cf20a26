/**
 * Retention and outside proof as operator routes (spec 05 §5.2–§5.4, issue 31), through the
 * kernel as the CLI does them: `POST /v1/retention/prune`, `GET|POST /v1/retention/holds`,
 * `POST /v1/retention/holds/:id/release`, `POST /v1/anchors` and `GET /v1/anchors/verify`. The
 * operator is the credential's; the anchor provider is the deployment's (`AppOptions.anchor`).
 * A refused prune is 409 naming its reason and the hold or effect; a failing provider is 503
 * (nothing anchored); the anchor report is apart from `GET /v1/receipts/verify`.
 *
 * @module
 */
import {
  anchorChain,
  AnchorUnavailable,
  InvalidArgument,
  listHolds,
  placeHold,
  pruneChain,
  PruneRefused,
  releaseHold,
  verifyAnchors,
  viewTime,
  type Anchor,
  type AnchorProvider,
  type Hold,
  type JsonObject,
  type JsonValue,
  type StateStore,
} from '@ctrlrun/kernel';
import type { Identity, OperatorIdentity } from '../auth.js';
import { HttpError, jsonResponse, readJsonBody } from '../http.js';
import type { RouteContext } from './context.js';
import { badRequest } from './request.js';

function objectBody(body: JsonValue, shape: string, keys: readonly string[]): JsonObject {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest(`the request body must be ${shape}`, '$');
  const extra = Object.keys(body).find((k) => !keys.includes(k));
  if (extra !== undefined) throw badRequest(`unknown field ${JSON.stringify(extra)}: send ${shape}`, `$[${JSON.stringify(extra)}]`);
  return body;
}

function integer(body: JsonObject, key: string, min: number, optional = false): number | null {
  const v = body[key];
  if ((v === undefined || v === null) && optional) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw badRequest(`${key} must be an integer ≥ ${min}`, `$.${key}`);
  return v;
}

function holdJson(h: Hold): Record<string, unknown> {
  return {
    holdId: h.holdId,
    fromSeq: h.fromSeq,
    toSeq: h.toSeq,
    reason: h.reason,
    placedBy: h.placedBy,
    placedAt: viewTime(h.placedAt),
    releasedAt: viewTime(h.releasedAt),
    releasedBy: h.releasedBy,
  };
}

function anchorJson(a: Anchor): Record<string, unknown> {
  return { seq: a.seq, hash: a.hash, token: a.token, kind: a.kind, at: viewTime(a.at) };
}

function noRetention(store: StateStore): void {
  if (typeof store.retention !== 'function') throw new HttpError(501, 'ERR_NOT_CONFIGURED', `the store ${store.name} cannot be pruned, held or anchored`);
}

/** Mounts the retention and anchor routes; `anchor` is the deployment's provider, or null (then the anchor routes are 501). */
export function mountRetention(ctx: RouteContext, anchor: AnchorProvider | null): void {
  const { app, bodyLimit } = ctx;
  const { store } = ctx.control;
  const { operator } = ctx.gates;
  const by = (identity: Identity): string => (identity as OperatorIdentity).operator;
  const provider = (): AnchorProvider => {
    if (anchor === null) throw new HttpError(501, 'ERR_NOT_CONFIGURED', 'no anchor provider is configured for this deployment');
    return anchor;
  };

  app.post('/v1/retention/prune', operator('prune the chain'), async (c) => {
    noRetention(store);
    const body = objectBody(await readJsonBody(c.req.raw, bodyLimit), '{ "through": SEQ, "olderThanSeconds": N }', ['through', 'olderThanSeconds']);
    const through = integer(body, 'through', 1)!;
    const olderThanSeconds = integer(body, 'olderThanSeconds', 0)!;
    if (olderThanSeconds > Number.MAX_SAFE_INTEGER / 1000) throw badRequest('olderThanSeconds is too large', '$.olderThanSeconds');
    try {
      const result = await pruneChain(store, { through, olderThanMs: olderThanSeconds * 1000, by: by(c.get('identity')), anchor });
      return jsonResponse(200, {
        checkpoint: { ...result.checkpoint, at: viewTime(result.checkpoint.at) },
        receiptsDeleted: result.receiptsDeleted,
        ledgerRowsDeleted: result.ledgerRowsDeleted,
        anchor: result.anchor === null ? null : anchorJson(result.anchor),
        receiptSeq: result.receiptSeq,
      });
    } catch (err) {
      if (err instanceof PruneRefused) {
        const details: Record<string, JsonValue> = { reason: err.reason };
        if (err.detail.holdId !== undefined) details['holdId'] = err.detail.holdId;
        if (err.detail.effectKey !== undefined) details['effectKey'] = err.detail.effectKey;
        if (err.detail.state !== undefined) details['state'] = err.detail.state;
        throw new HttpError(err.reason === 'invalid' ? 400 : 409, 'ERR_INVALID_ARGUMENT', err.message, details);
      }
      if (err instanceof AnchorUnavailable) throw new HttpError(503, 'ERR_INVALID_ARGUMENT', err.message, { reason: err.reason });
      throw err;
    }
  });

  app.get('/v1/retention/holds', operator('read holds'), async () => {
    noRetention(store);
    return jsonResponse(200, { holds: (await listHolds(store)).map(holdJson) });
  });

  app.post('/v1/retention/holds', operator('place holds'), async (c) => {
    noRetention(store);
    const body = objectBody(await readJsonBody(c.req.raw, bodyLimit), '{ "fromSeq": SEQ, "toSeq"?: SEQ, "reason": TEXT, "holdId"?: ID }', [
      'fromSeq',
      'toSeq',
      'reason',
      'holdId',
    ]);
    const fromSeq = integer(body, 'fromSeq', 1)!;
    const toSeq = integer(body, 'toSeq', fromSeq, true);
    const reason = body['reason'];
    if (typeof reason !== 'string' || reason.trim() === '') throw badRequest('reason must be a non-empty string', '$.reason');
    const holdId = body['holdId'];
    if (holdId !== undefined && (typeof holdId !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(holdId)))
      throw badRequest('holdId must be 1-128 of A-Z a-z 0-9 _ . : -', '$.holdId');
    try {
      const h = await placeHold(store, { fromSeq, toSeq, reason, by: by(c.get('identity')), ...(holdId === undefined ? {} : { holdId }) });
      return jsonResponse(201, { hold: holdJson(h) });
    } catch (err) {
      if (err instanceof InvalidArgument && /already exists/.test(err.message)) throw new HttpError(409, 'ERR_INVALID_ARGUMENT', err.message);
      throw err;
    }
  });

  app.post('/v1/retention/holds/:id/release', operator('release holds'), async (c) => {
    noRetention(store);
    try {
      return jsonResponse(200, { hold: holdJson(await releaseHold(store, c.req.param('id'), by(c.get('identity')))) });
    } catch (err) {
      if (err instanceof InvalidArgument && /no live hold/.test(err.message)) throw new HttpError(409, 'ERR_INVALID_ARGUMENT', err.message);
      throw err;
    }
  });

  app.post('/v1/anchors', operator('anchor the chain'), async () => {
    noRetention(store);
    try {
      return jsonResponse(201, { anchor: anchorJson(await anchorChain(store, provider())) });
    } catch (err) {
      if (err instanceof AnchorUnavailable) throw new HttpError(503, 'ERR_INVALID_ARGUMENT', err.message, { reason: err.reason });
      if (err instanceof InvalidArgument && /anchor refused/.test(err.message)) throw new HttpError(409, 'ERR_INVALID_ARGUMENT', err.message);
      throw err;
    }
  });

  app.get('/v1/anchors/verify', operator('verify anchors'), async () => {
    noRetention(store);
    const report = await verifyAnchors(store, provider());
    return jsonResponse(200, { ...report, breaks: report.breaks.map((b) => ({ ...b })) });
  });
}
