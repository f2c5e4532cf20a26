/**
 * What the page and the `<ctrlrun-try-it>` element do with the module, once: read the form and
 * run a refund, answer the Approve button, resolve an AMBIGUOUS effect as the operator, and read
 * the receipt chain. DOM-free; each returns the {@link LogItem} the output shows. The approve
 * request is built here and nowhere else, and only the Approve forms call {@link approveRequest}.
 *
 * @module
 */
import { verifyChain, type ChainReport, type ReceiptRow, type StateStore } from '@ctrlrun/kernel';
import { GENESIS_HASH } from '@ctrlrun/kernel/store';
import type { ResolveRequest, TryIt } from '@ctrlrun/kernel/try-it';
import { parseRefund, type FormText } from './input.js';
import type { LogItem } from './kept.js';
import { errorOf } from './render.js';

/** Reads the form and runs the refund; input that cannot be a request (or a made-up approval id) is refused before anything is written. */
export async function runRefundForm(tryIt: TryIt, store: Pick<StateStore, 'getApproval'>, form: FormText): Promise<LogItem> {
  const parsed = parseRefund(form);
  const asked = `refund ${form.payment_id.trim() || '(no payment id)'} ${form.amount.trim() || '(no amount)'}`;
  if (!parsed.ok) return { kind: 'refused', asked, error: { name: 'InvalidArgument', message: parsed.message } };
  const request = parsed.request;
  // An approval id the store has never seen is a typo, not an attempt: refuse it before anything is written.
  if (request.approval_id && !(await store.getApproval(request.approval_id))) {
    return {
      kind: 'refused',
      asked,
      error: {
        name: 'InvalidArgument',
        message: `there is no approval ${request.approval_id} in this tab: run a refund that needs one, press Approve, then present the id it prints`,
      },
    };
  }
  try {
    return { kind: 'refund', request, result: await tryIt.step(request) };
  } catch (err) {
    return { kind: 'refused', asked, error: errorOf(err) };
  }
}

/** The Approve button: the only grant. `requestId` is what the reader submitted. */
export async function approveRequest(tryIt: TryIt, requestId: string): Promise<LogItem> {
  const request = { op: 'approve', request_id: requestId.trim() } as const;
  const asked = `approve ${request.request_id || '(no request id)'}`;
  if (request.request_id === '') {
    return {
      kind: 'refused',
      asked,
      error: { name: 'InvalidArgument', message: 'there is no request awaiting a human: run a refund that needs approval first (step 2)' },
    };
  }
  try {
    return { kind: 'approve', request, result: await tryIt.step(request) };
  } catch (err) {
    return { kind: 'refused', asked, error: errorOf(err) };
  }
}

/** The operator's Resolve control: the AMBIGUOUS effect `effectKey` did (`committed`) or did not (`failed`) happen. */
export async function resolveAs(tryIt: TryIt, effectKey: string, state: ResolveRequest['state']): Promise<LogItem> {
  const request: ResolveRequest = { op: 'resolve', effect_key: effectKey, state };
  try {
    return { kind: 'resolve', request, result: await tryIt.step(request) };
  } catch (err) {
    return { kind: 'refused', asked: `resolve ${effectKey} as ${state}`, error: errorOf(err) };
  }
}

/** One receipt as the chain view shows it. */
export interface ChainRow {
  readonly seq: number | null;
  readonly receiptId: string;
  readonly prevHash: string | null;
  readonly hash: string | null;
  /** The parsed stored document (`{}` if it does not parse: verifyChain names the break). */
  readonly document: Record<string, unknown>;
  /** This row's `prev_hash`, as stored and as its document says, is the previous row's `hash` (the genesis hash for the first). */
  readonly linked: boolean;
}

/** The store's receipts in chain order, each with whether it links to the one before, and verifyChain's report. */
export async function chainView(store: Pick<StateStore, 'receipts' | 'chainHead'>): Promise<{ rows: ChainRow[]; report: ChainReport }> {
  const stored: ReceiptRow[] = await store.receipts();
  const report = verifyChain(stored, await store.chainHead());
  let previous = GENESIS_HASH;
  const rows = stored.map((row) => {
    let document: Record<string, unknown> = {};
    try {
      if (row.json !== null) document = JSON.parse(row.json) as Record<string, unknown>;
    } catch {
      // Shown empty; verifyChain names the break.
    }
    const linked = row.prev_hash === previous && document['prev_hash'] === previous;
    if (row.hash !== null) previous = row.hash;
    return { seq: row.seq, receiptId: row.receipt_id, prevHash: row.prev_hash, hash: row.hash, document, linked };
  });
  return { rows, report };
}
