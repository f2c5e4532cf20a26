/**
 * Effects for an operator: `GET /v1/effects/:key` and `POST /v1/effects/:key/resolve` (an
 * AMBIGUOUS effect recorded `committed` or `failed` through `Control.resolveEffect`).
 *
 * @module
 */
import { viewTime, type EffectRecord } from '@ctrlrun/kernel';
import type { OperatorIdentity } from '../auth.js';
import { HttpError, jsonResponse, readJsonBody } from '../http.js';
import type { RouteContext } from './context.js';
import { badRequest, isObject, notFound } from './request.js';
import { storedValue } from './views.js';

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

/** The body of a resolve: `{ "state": "committed" | "failed" }` and nothing else. */
function resolveState(body: unknown): 'committed' | 'failed' {
  if (!isObject(body)) throw badRequest('the request body must be { "state": "committed" | "failed" }', '$');
  const extra = Object.keys(body).find((k) => k !== 'state');
  if (extra !== undefined) throw badRequest(`unknown field ${JSON.stringify(extra)}: send { "state": "committed" | "failed" }`, `$[${JSON.stringify(extra)}]`);
  const state = body['state'];
  if (state !== 'committed' && state !== 'failed') throw badRequest('state must be "committed" or "failed"', '$.state');
  return state;
}

/** Mounts the effect routes. */
export function mountEffects(ctx: RouteContext): void {
  const { control } = ctx;
  const { store } = control;
  ctx.app.get('/v1/effects/:key', ctx.gates.operator('read effects'), async (c) => {
    const key = c.req.param('key');
    const record = await store.getEffect(key);
    if (record === null) throw notFound(`no effect record for ${key}`);
    return jsonResponse(200, { effect: effectJson(record) });
  });

  ctx.app.post('/v1/effects/:key/resolve', ctx.gates.operator('resolve effects'), async (c) => {
    const key = c.req.param('key');
    const state = resolveState(await readJsonBody(c.req.raw, ctx.bodyLimit));
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
}
