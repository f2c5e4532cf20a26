/**
 * Receipts for an operator: `GET /v1/receipts?after=&limit=`, `GET /v1/receipts/verify` and
 * `GET /v1/receipts/:id`. Each view reads a row's hashed document, never its columns.
 *
 * @module
 */
import { verifyStoredChain, type ChainReport, type StateStore } from '@ctrlrun/kernel';
import { jsonResponse } from '../http.js';
import type { RouteContext } from './context.js';
import { DEFAULT_PAGE, MAX_PAGE, notFound, queryInteger } from './request.js';
import { receiptView } from './views.js';

/**
 * The chain's verification, one at a time: it reads every row (page by page, see
 * `verifyStoredChain`), so concurrent callers (the route and the inbox) share one walk's answer.
 */
export function sharedChainVerification(store: StateStore): () => Promise<ChainReport> {
  let verifying: Promise<ChainReport> | null = null;
  return () =>
    (verifying ??= (async () => {
      try {
        return await verifyStoredChain(store);
      } finally {
        verifying = null;
      }
    })());
}

/** Mounts the receipt routes; `verify` is the app's {@link sharedChainVerification}. */
export function mountReceipts(ctx: RouteContext, verify: () => Promise<ChainReport>): void {
  const { store } = ctx.control;
  // Before `/v1/receipts/:id`, which would take "verify" for an id.
  ctx.app.get('/v1/receipts/verify', ctx.gates.operator('verify receipts'), async () =>
    jsonResponse(200, (await verify()) as unknown as Record<string, unknown>),
  );

  ctx.app.get('/v1/receipts', ctx.gates.operator('read receipts'), async (c) => {
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

  ctx.app.get('/v1/receipts/:id', ctx.gates.operator('read receipts'), async (c) => {
    const id = c.req.param('id');
    const row = await store.getReceipt(id);
    if (row === null) throw notFound(`no receipt ${id}`);
    return jsonResponse(200, receiptView(row));
  });
}
