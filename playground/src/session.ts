/**
 * What the page and the `<ctrlrun-try-it>` element do with the module, once: read the form and
 * run a refund, answer the Approve button, resolve an AMBIGUOUS effect as the operator, and read
 * the receipt chain. DOM-free; each returns the {@link LogItem} the output shows. The approve
 * request is built here and nowhere else, and only the Approve forms call {@link approveRequest}.
 *
 * @module
 */
import { ChainVerifier, verifyChain, type ChainReport, type ReceiptRow, type StateStore } from '@ctrlrun/kernel';
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

/** What the last view of a store verified: its rows exactly as read, all chained and intact. */
interface Verified {
  readonly rows: readonly ReceiptRow[];
  readonly end: { seq: number; hash: string };
}

const VERIFIED = new WeakMap<object, Verified>();

/** Every column of a stored receipt row: two rows are the same row only if all of them are. */
function sameRow(a: ReceiptRow, b: ReceiptRow): boolean {
  return (
    a.receipt_id === b.receipt_id &&
    a.action_id === b.action_id &&
    a.effect_key === b.effect_key &&
    a.result === b.result &&
    a.json === b.json &&
    a.ts === b.ts &&
    a.seq === b.seq &&
    a.prev_hash === b.prev_hash &&
    a.hash === b.hash
  );
}

/**
 * verifyChain's report for the stored rows. When the rows a previous view verified intact are
 * still there first, byte for byte, only the rows after them are hashed and linked (from the
 * last verified receipt); anything else — a changed row, an unchained one, a break — is verified
 * whole again, so a report with a break is always verifyChain's own.
 */
function reportFor(store: object, stored: readonly ReceiptRow[], head: Awaited<ReturnType<StateStore['chainHead']>>): ChainReport {
  const before = VERIFIED.get(store);
  let report: ChainReport | null = null;
  if (before && before.rows.length <= stored.length && before.rows.every((row, i) => sameRow(row, stored[i]!))) {
    const rest = stored.slice(before.rows.length);
    const tail = new ChainVerifier(head, { after: before.end }).push(rest).finish();
    if (tail.ok) report = { ...tail, verified: tail.verified + before.rows.length, chained: tail.chained + before.rows.length };
  }
  report ??= verifyChain(stored, head);
  const last = stored.at(-1);
  if (report.ok && typeof last?.seq === 'number' && typeof last.hash === 'string' && stored.every((r) => typeof r.seq === 'number')) {
    VERIFIED.set(store, { rows: stored, end: { seq: last.seq, hash: last.hash } });
  } else VERIFIED.delete(store);
  return report;
}

/** The store's receipts in chain order, each with whether it links to the one before, and verifyChain's report. */
export async function chainView(store: Pick<StateStore, 'receipts' | 'chainHead'>): Promise<{ rows: ChainRow[]; report: ChainReport }> {
  const stored: ReceiptRow[] = await store.receipts();
  const report = reportFor(store, stored, await store.chainHead());
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
