/**
 * `GET /v1/budgets[?grant=ID]`: what each budgeted grant spent of each budget's metric in its
 * rolling window, beside the limit (spec 05 §5.1) — the authority's grants and the store's live
 * delegations — for an operator only: an agent's credential is 403, and an agent's refusal names
 * only the grant, the metric and the window. Amounts are decimal strings (exact past 2^53).
 *
 * @module
 */
import { budgetSpend } from '@ctrlrun/kernel';
import { HttpError, jsonResponse } from '../http.js';
import type { RouteContext } from './context.js';

/** Mounts `GET /v1/budgets` (operator only: 403 for an agent). */
export function mountBudgets(ctx: RouteContext): void {
  ctx.app.get('/v1/budgets', ctx.gates.operator('read budgets'), async (c) => {
    const grant = c.req.query('grant');
    if (grant !== undefined && !/^[A-Za-z0-9_.:-]{1,128}$/.test(grant))
      throw new HttpError(400, 'ERR_INVALID_ARGUMENT', 'grant must be a grant id or dlg_… delegation id (1-128 of A-Z a-z 0-9 _ . : -)', { path: 'grant' });
    const { store, authority } = ctx.control;
    if (typeof store.budgets !== 'function') throw new HttpError(501, 'ERR_NOT_CONFIGURED', `the store ${store.name} keeps no budget ledger`);
    const rows = await budgetSpend(store, authority, { grantId: grant ?? null });
    return jsonResponse(200, {
      budgets: rows.map((b) => ({
        grantId: b.grantId,
        delegated: b.delegated,
        metric: b.metric,
        windowSeconds: b.window,
        limit: String(b.limit),
        spent: String(b.spent),
      })),
    });
  });
}
