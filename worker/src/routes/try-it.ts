/**
 * `POST /v1/try-it/step` (demo mode; `approve` and `resolve` need an operator): the playground's
 * steps on the server, one at a time.
 *
 * @module
 */
import { Mutex } from '@ctrlrun/kernel/store';
import type { TryIt } from '@ctrlrun/kernel/try-it';
import { errorResponse, jsonResponse, readJsonBody } from '../http.js';
import type { RouteContext } from './context.js';
import { badRequest, isObject, notFound } from './request.js';

/** Mounts the playground's step route; with `tryIt` null it answers 404 (not in demo mode). */
export function mountTryIt(ctx: RouteContext, tryIt: TryIt | null): void {
  // The playground module keeps per-step state (the last receipt, whether to lose the reply).
  const steps = new Mutex();
  ctx.app.post('/v1/try-it/step', ctx.gates.as(['agent', 'operator'], 'use the playground'), async (c) => {
    if (tryIt === null) throw notFound('the playground is off: the worker is not in demo mode');
    const body = await readJsonBody(c.req.raw, ctx.bodyLimit);
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
    const result = await steps.run(() => tryIt.step(body as never));
    return jsonResponse(200, result as unknown as Record<string, unknown>);
  });
}
