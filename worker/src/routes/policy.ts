/**
 * `GET /v1/policy` (agent or operator): the policy served, its hash as receipts record it, and
 * which of its actions have an executor.
 *
 * @module
 */
import { executorFor, type Executors } from '../executors.js';
import { jsonResponse } from '../http.js';
import type { RouteContext } from './context.js';

/** Mounts `GET /v1/policy`; `yaml` is the text the policy was loaded from (null: not served). */
export function mountPolicy(ctx: RouteContext, r: { executors: Executors; yaml: string | null; source: string }): void {
  const { control } = ctx;
  ctx.app.get('/v1/policy', ctx.gates.as(['agent', 'operator'], 'read the policy'), () =>
    jsonResponse(200, {
      policyHash: control.policyHash,
      source: r.source,
      schema: control.policy.schema,
      version: control.policy.version,
      mode: control.policy.mode,
      environment: control.environment,
      actions: control.policy.actionNames.map((name) => ({ name, executor: executorFor(r.executors, name) !== undefined })),
      yaml: r.yaml,
    }),
  );
}
