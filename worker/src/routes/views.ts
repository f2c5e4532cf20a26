/**
 * What the operator's list routes show: receipt rows read from their hashed documents (never
 * from the columns beside them), the opaque cursor of the approvals listing, and stored JSON
 * text (a result) back as a value.
 *
 * @module
 */
import { parseJson, verifyChain, type ChainBreak, type ColumnFinding, type JsonObject, type JsonValue, type ReceiptRow } from '@ctrlrun/kernel';

/** Break names that judge a row's place in the chain, not the row: only the whole chain can say. */
const CHAIN_POSITION = new Set(['missing', 'link_broken', 'head_mismatch']);

/** Anything as short text, for a column whose value cannot be trusted or typed. */
function asText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  return typeof v === 'string' ? v : String(v);
}

/**
 * One receipt row as a view shows it. Every field is read from the stored document, which is
 * what the chain hashes: an edited `result` or `effect_key` column is never shown as the
 * receipt's. The row is checked on its own with the kernel's `verifyChain` (its hash, its seq
 * column, and whatever else the kernel compares per row); `breaks` names what is wrong and
 * `intact` is true only without one. Its links to its neighbours are `GET /v1/receipts/verify`'s
 * to check. A row whose document cannot be read is still listed, with `receipt: null` and the
 * columns that locate it under `unverifiedColumns`.
 */
export function receiptView(row: ReceiptRow): Record<string, unknown> {
  const checked = verifyChain([row], null);
  // The row's own breaks, and its columns that disagree with its document (beside the chain's verdict, but this row's view is not intact).
  const breaks: { name: ChainBreak['name'] | ColumnFinding['name']; seq: number | null; detail: string }[] = [
    ...checked.breaks.filter((b) => !CHAIN_POSITION.has(b.name)),
    ...checked.column_findings,
  ].map((b) => ({ name: b.name, seq: b.seq, detail: b.detail }));
  let document: JsonObject | null = null;
  try {
    const parsed = typeof row.json === 'string' ? parseJson(row.json, { floats: 'allow', what: 'receipt json' }) : null;
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) document = parsed as JsonObject;
  } catch {
    document = null;
  }
  if (document === null && !breaks.some((b) => b.name === 'content_altered')) {
    breaks.push({ name: 'content_altered', seq: null, detail: 'the stored document is not a JSON object' });
  }
  const field = (name: string): JsonValue => (document !== null && Object.prototype.hasOwnProperty.call(document, name) ? document[name]! : null);
  const view: Record<string, unknown> = {
    seq: field('seq'),
    receiptId: field('receipt_id'),
    actionId: field('action_id'),
    effectKey: field('effect_key'),
    result: field('result'),
    ts: field('finished_at'),
    prevHash: field('prev_hash'),
    // Not in the document: the document is hashed to it, and `breaks` says when they differ.
    hash: asText(row.hash),
    receipt: document,
    intact: breaks.length === 0,
    breaks,
  };
  if (document === null) view['unverifiedColumns'] = { receiptId: asText(row.receipt_id), seq: asText(row.seq) };
  return view;
}

/** The position a listing resumes after: the last record's `createdAt` and request id. */
export interface ApprovalCursor {
  createdAt: string;
  requestId: string;
}

const MAX_CURSOR = 2048;

/** An opaque, URL-safe cursor (base64url of `[createdAt, requestId]`). */
export function encodeApprovalCursor(at: ApprovalCursor): string {
  const bytes = new TextEncoder().encode(JSON.stringify([at.createdAt, at.requestId]));
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** Reads a cursor {@link encodeApprovalCursor} made; `null` for anything else. */
export function decodeApprovalCursor(text: string): ApprovalCursor | null {
  if (text.length > MAX_CURSOR || !/^[A-Za-z0-9_-]+$/.test(text)) return null;
  try {
    const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
    const json = new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(binary, (ch) => ch.charCodeAt(0)));
    const value = parseJson(json, { what: 'cursor' });
    if (!Array.isArray(value) || value.length !== 2 || typeof value[0] !== 'string' || typeof value[1] !== 'string') return null;
    return { createdAt: value[0], requestId: value[1] };
  } catch {
    return null;
  }
}

/** Stored JSON text back as a value (floats allowed: results are whatever the executor returned). */
export function storedValue(text: string | null): JsonValue {
  if (text === null) return null;
  try {
    return parseJson(text, { floats: 'allow', what: 'stored JSON' });
  } catch {
    return text;
  }
}
