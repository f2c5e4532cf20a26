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
 * server answering while it reads. A store without paged reads is read whole, as before. The
 * chain is verified as of the head read first: receipts chained while the walk reads are left to
 * the next walk, not reported as a break.
 */
export async function verifyStoredChain(store: StateStore, options: { pageSize?: number } = {}): Promise<ChainReport> {
  const limit = options.pageSize ?? PAGE;
  const [head, checkpoint] = await Promise.all([store.chainHead(), store.pruneCheckpoint?.() ?? null]);
  if (!store.receiptsInChain || !store.receiptsOffChain) return verifyChain(await store.receipts(), head, { checkpoint });
  const verifier = new ChainVerifier(head, checkpoint === null ? {} : { after: checkpoint });
  // Receipts chained while the walk reads (an agent acting meanwhile) lie past the head read at its
  // start: the walk verifies the chain as of that head and stops there. Only when the head has not
  // moved are rows past it what they look like, a chain that runs on past its head (head_mismatch).
  const headSeq = head !== null && typeof head.seq === 'number' && Number.isSafeInteger(head.seq) ? head.seq : null;
  for await (const page of receiptPages(store, limit)) {
    const beyond = headSeq === null ? -1 : page.findIndex((r) => Number.isSafeInteger(r.seq) && (r.seq as number) > headSeq);
    if (beyond >= 0 && (await headMoved(store, headSeq!))) {
      verifier.push(page.slice(0, beyond));
      break;
    }
    verifier.push(page);
  }
  return verifier.finish();
}

/** Whether the chain head is past `seq` now (another writer chained receipts since it was read). */
async function headMoved(store: StateStore, seq: number): Promise<boolean> {
  const now = await store.chainHead();
  return now !== null && typeof now.seq === 'number' && now.seq > seq;
}

/**
 * Every receipt row of `store`, page by page (`limit` rows): those without an integer `seq` first
 * (unchained, or a tampered seq), then the chain in `seq` order, which is the order
 * `ChainVerifier` takes. A store without paged reads hands over all its rows in one page.
 */
export async function* receiptPages(store: StateStore, limit = PAGE): AsyncGenerator<ReceiptRow[]> {
  if (!store.receiptsInChain || !store.receiptsOffChain) {
    yield await store.receipts();
    return;
  }
  yield* offChainReceiptPages(store, limit);
  for (let after: { seq: number; receiptId: string } | null = null; ;) {
    const page: ReceiptRow[] = await store.receiptsInChain({ after, limit });
    if (page.length > 0) yield page;
    if (page.length < limit) break;
    const end = page[page.length - 1]!;
    after = { seq: end.seq as number, receiptId: end.receipt_id };
  }
}

/** The receipt rows without an integer `seq`, page by page (by receipt id); none from a store without paged reads. */
export async function* offChainReceiptPages(store: StateStore, limit = PAGE): AsyncGenerator<ReceiptRow[]> {
  if (!store.receiptsOffChain) return;
  for (let after: string | null = null; ;) {
    const page: ReceiptRow[] = await store.receiptsOffChain({ after, limit });
    if (page.length > 0) yield page;
    if (page.length < limit) break;
    after = page[page.length - 1]!.receipt_id;
  }
}
