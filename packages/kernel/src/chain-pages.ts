/**
 * A store's whole receipt chain verified page by page: what `ctrlrun receipts --verify-chain`,
 * the worker's `GET /v1/receipts/verify` and its inbox run.
 *
 * @module
 */
import { ChainVerifier, verifyChain, type ChainReport } from './chain.js';
import type { ReceiptRow } from './model.js';
import type { StateStore } from './store/state-store.js';

/** Rows read at a time by {@link verifyStoredChain} unless told otherwise. */
const PAGE = 500;

/**
 * The chain of `store` verified as {@link verifyChain} verifies it — from the prune checkpoint
 * when the store has one — reading the rows in pages of `pageSize` (the receipts off the chain
 * first, then the chain in `seq` order), so that memory holds one page, not the store, and the
 * caller's event loop runs between pages. However many receipts an agent has had written (each
 * refusal leaves one, with its arguments), verifying them neither exhausts the heap nor stops a
 * server answering while it reads. A store without paged reads is read whole, as before.
 */
export async function verifyStoredChain(store: StateStore, options: { pageSize?: number } = {}): Promise<ChainReport> {
  const limit = options.pageSize ?? PAGE;
  const [head, checkpoint] = await Promise.all([store.chainHead(), store.pruneCheckpoint?.() ?? null]);
  if (!store.receiptsInChain || !store.receiptsOffChain) return verifyChain(await store.receipts(), head, { checkpoint });
  const verifier = new ChainVerifier(head, checkpoint === null ? {} : { after: checkpoint });
  for (let after: string | null = null; ;) {
    const page: ReceiptRow[] = await store.receiptsOffChain({ after, limit });
    if (page.length > 0) verifier.push(page);
    if (page.length < limit) break;
    after = page[page.length - 1]!.receipt_id;
  }
  for (let after: { seq: number; receiptId: string } | null = null; ;) {
    const page: ReceiptRow[] = await store.receiptsInChain({ after, limit });
    if (page.length > 0) verifier.push(page);
    if (page.length < limit) break;
    const end = page[page.length - 1]!;
    after = { seq: end.seq as number, receiptId: end.receipt_id };
  }
  return verifier.finish();
}
