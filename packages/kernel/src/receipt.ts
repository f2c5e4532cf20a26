/**
 * Receipts (`ctrlrun.receipt/v3`): one per terminal action, chained by hash.
 *
 * @module
 */
import { type Action, principalJson } from './action.js';
import { canonicalJson, compareCodePoints, isPlainObject, orderedJson, parseJson, type JsonObject, type JsonValue } from './canonical.js';
import { InvalidArgument } from './errors.js';
import { sha256TaggedText } from './hash.js';
import type { ReceiptDraft } from './model.js';

/** The schema this build writes. */
export const RECEIPT_SCHEMA = 'ctrlrun.receipt/v3';

/** A receipt's `result`. */
export type ReceiptResult = 'committed' | 'failed' | 'ambiguous' | 'denied' | 'blocked' | 'observed';

/** Everything a receipt records besides the action itself. */
export interface ReceiptFields {
  receiptId: string;
  decision: string;
  decisionReason: string;
  approvalId: string | null;
  approver: string | null;
  effectKey: string | null;
  attempt: number;
  result: ReceiptResult;
  execution?: 'committed' | 'failed' | 'ambiguous' | null;
  wouldHave?: { decision: string; reason: string; blocked_reason: string | null } | null;
  error: string | null;
  /** Evidence timestamp of the start of `execute`. */
  startedAt: string;
  /** Evidence timestamp of the receipt's build. */
  finishedAt: string;
  policyHash: string | null;
  policyVersion: string | null;
  controls: readonly string[];
  /** The canonical arguments to record, when the caller already holds a copy; else read from the action. */
  arguments?: JsonObject;
  /** Run under an edited grant: what the human changed (see {@link ReceiptEdit}); absent or null otherwise. */
  edit?: JsonObject | null;
}

/** Builds the receipt document in `to_json` key order, `seq`/`prev_hash` still null. */
export function buildReceipt(action: Action, f: ReceiptFields): ReceiptDraft {
  const document: JsonObject = {
    schema: RECEIPT_SCHEMA,
    receipt_id: f.receiptId,
    action_id: action.actionId,
    action: action.name,
    action_hash: action.actionHash,
    principal: principalJson(action.principal),
    resource: action.resource,
    arguments: f.arguments ?? action.canonicalArguments,
    environment: action.environment,
    decision: f.decision,
    decision_reason: f.decisionReason,
    approval_id: f.approvalId,
    approver: f.approver,
    effect_key: f.effectKey,
    attempt: f.attempt,
    result: f.result,
    execution: f.execution ?? null,
    would_have: (f.wouldHave ?? null) as JsonValue,
    error: f.error,
    started_at: f.startedAt,
    finished_at: f.finishedAt,
    seq: null,
    prev_hash: null,
    policy_hash: f.policyHash,
    policy_version: f.policyVersion,
    controls: [...f.controls],
  };
  // Only an edited grant adds the key: every other receipt keeps its bytes.
  if (f.edit !== undefined && f.edit !== null) document['edit'] = f.edit;
  return { receiptId: f.receiptId, actionId: action.actionId, effectKey: f.effectKey, result: f.result, finishedAt: f.finishedAt, document };
}

/**
 * Places a receipt in the chain: sets `seq` and `prev_hash`, renders the stored `json`, and
 * hashes the document exactly as serialised. Stores call this under the head row's lock.
 */
export function sealReceipt(document: JsonObject, seq: number, prevHash: string): { document: JsonObject; json: string; hash: string } {
  const sealed = sealedDocument(document, seq, prevHash);
  const { json, canonical } = receiptTexts(sealed);
  return { document: sealed, json, hash: sha256TaggedText(canonical) };
}

/** The document with `seq` and `prev_hash` set, keys in place (what {@link sealReceipt} renders and hashes). */
export function sealedDocument(document: JsonObject, seq: number, prevHash: string): JsonObject {
  // A spread defines every own key as data, `__proto__` included, in the document's order; the
  // two keys set after it keep their place when the document has them, and are appended when
  // not. One literal is also the shape JSON.stringify writes quickest (not a key-by-key build).
  return { ...document, seq, prev_hash: prevHash };
}

/**
 * The two texts of a sealed receipt: the stored `json` (`orderedJson`, the document's own key
 * order) and the canonical text its hash is taken over (`canonicalJson(sealed, 'receipt')`). A
 * document with exactly the v3 keys is written in their fixed code point order, so no receipt
 * sorts its 26 keys again, and each value is written once for both texts: a string, number or
 * null reads the same in either (a well-formed string is quoted alike, an integer is its
 * digits); only an object or array is written again in its own key order. Any other shape takes
 * the general path.
 */
function receiptTexts(sealed: JsonObject): { json: string; canonical: string } {
  const keys = Object.keys(sealed);
  if (keys.length !== SORTED_KEYS.length || !keys.every((k) => KEY_INDEX.has(k))) {
    return { json: orderedJson(sealed), canonical: canonicalJson(sealed, 'receipt') };
  }
  const texts = new Array<string>(SORTED_KEYS.length);
  let canonical = '';
  for (let i = 0; i < SORTED_KEYS.length; i++) {
    const text = canonicalJson(sealed[SORTED_KEYS[i]!], KEY_PATHS[i]);
    texts[i] = text;
    canonical += (i === 0 ? '{' : ',') + QUOTED_KEYS[i]! + text;
  }
  let json = '';
  for (let j = 0; j < keys.length; j++) {
    const i = KEY_INDEX.get(keys[j]!)!;
    const v = sealed[keys[j]!];
    json += (j === 0 ? '{' : ',') + QUOTED_KEYS[i]! + (typeof v === 'object' && v !== null ? orderedJson(v) : texts[i]!);
  }
  return { json: `${json}}`, canonical: `${canonical}}` };
}

/** A receipt's principal, as the document holds it. */
export interface ReceiptPrincipal {
  readonly agent: string;
  readonly user: string | null;
  readonly claims: JsonObject | null;
  readonly issuer: string | null;
  readonly expires_at: string | null;
}

/** A `ctrlrun.receipt/v3` document, typed field by field (the names are the document's own). */
export interface ReceiptDocument {
  readonly schema: typeof RECEIPT_SCHEMA;
  readonly receipt_id: string;
  readonly action_id: string;
  readonly action: string;
  readonly action_hash: string;
  readonly principal: ReceiptPrincipal;
  readonly resource: string | null;
  readonly arguments: JsonObject;
  readonly environment: string;
  readonly decision: string;
  readonly decision_reason: string;
  readonly approval_id: string | null;
  readonly approver: string | null;
  readonly effect_key: string | null;
  readonly attempt: number;
  readonly result: ReceiptResult;
  readonly execution: 'committed' | 'failed' | 'ambiguous' | null;
  readonly would_have: { readonly decision: string; readonly reason: string; readonly blocked_reason: string | null } | null;
  readonly error: string | null;
  readonly started_at: string;
  readonly finished_at: string;
  readonly seq: number | null;
  readonly prev_hash: string | null;
  readonly policy_hash: string | null;
  readonly policy_version: string | null;
  readonly controls: readonly string[];
  /** Present only on an action run under an edited grant. */
  readonly edit?: ReceiptEdit;
}

/**
 * A receipt's `edit`: the action ran under a grant a human gave with edited arguments. The
 * receipt's `action_hash` and `arguments` are the approved ones; these say what was proposed.
 */
export interface ReceiptEdit {
  /** The request the agent filed (answered `denied` by the edit). */
  readonly proposed_request_id: string;
  readonly proposed_hash: string;
  /** The hash the grant was bound to (the receipt's `action_hash`). */
  readonly approved_hash: string;
  /** Who edited and approved. */
  readonly editor: string;
  readonly proposed_arguments: JsonObject;
  readonly approved_arguments: JsonObject;
}

/** The keys of a receipt's `edit`, in the order it is written. */
export const RECEIPT_EDIT_KEYS: readonly string[] = Object.freeze([
  'proposed_request_id',
  'proposed_hash',
  'approved_hash',
  'editor',
  'proposed_arguments',
  'approved_arguments',
]);

const RESULTS: readonly string[] = ['committed', 'failed', 'ambiguous', 'denied', 'blocked', 'observed'];
const EXECUTIONS: readonly (string | null)[] = ['committed', 'failed', 'ambiguous', null];

/**
 * Reads a stored receipt (its `json` column, or a `receipts.jsonl` line) back into a typed
 * {@link ReceiptDocument}: exactly the keys `buildReceipt` writes, in any order, each of its type.
 * Anything else — another schema, a missing or extra key, a wrong type, text that is not strict
 * JSON — is an `InvalidArgument` naming the field. It reads the document; whether it is intact
 * and chained is `verifyChain`'s to say.
 */
export function parseReceipt(json: string): ReceiptDocument {
  if (typeof json !== 'string') throw new InvalidArgument('a receipt must be given as JSON text');
  let doc: JsonValue;
  try {
    doc = parseJson(json, { what: 'receipt' });
  } catch (e) {
    throw new InvalidArgument(`the receipt is not strict JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  const bad = (field: string, want: string, got: unknown): never => {
    throw new InvalidArgument(`receipt field ${field} must be ${want}, got ${got === null ? 'null' : Array.isArray(got) ? 'an array' : typeof got}`);
  };
  if (!isPlainObject(doc)) return bad('(document)', 'an object', doc);
  const d = doc as JsonObject;
  const keys = Object.keys(d);
  const expected = RECEIPT_KEYS;
  const missing = expected.filter((k) => !Object.prototype.hasOwnProperty.call(d, k));
  const extra = keys.filter((k) => !expected.includes(k) && k !== 'edit');
  if (missing.length > 0) throw new InvalidArgument(`receipt field${missing.length > 1 ? 's' : ''} missing: ${missing.join(', ')}`);
  if (extra.length > 0) throw new InvalidArgument(`receipt has unknown field${extra.length > 1 ? 's' : ''}: ${extra.map((k) => JSON.stringify(k)).join(', ')}`);
  if (d['schema'] !== RECEIPT_SCHEMA) bad('schema', JSON.stringify(RECEIPT_SCHEMA), d['schema']);
  const str = (k: string): void => void (typeof d[k] === 'string' || bad(k, 'a string', d[k]));
  const strOrNull = (k: string): void => void (d[k] === null || typeof d[k] === 'string' || bad(k, 'a string or null', d[k]));
  for (const k of ['receipt_id', 'action_id', 'action', 'action_hash', 'environment', 'decision', 'decision_reason', 'started_at', 'finished_at']) str(k);
  for (const k of ['resource', 'approval_id', 'approver', 'effect_key', 'error', 'prev_hash', 'policy_hash', 'policy_version']) strOrNull(k);
  if (!isPlainObject(d['arguments'])) bad('arguments', 'an object', d['arguments']);
  const attempt = d['attempt'];
  if (typeof attempt !== 'number' || !Number.isSafeInteger(attempt) || attempt < 0) bad('attempt', 'a non-negative integer', attempt);
  const seq = d['seq'];
  if (seq !== null && (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1)) bad('seq', 'a positive integer or null', seq);
  if (typeof d['result'] !== 'string' || !RESULTS.includes(d['result'])) bad('result', `one of ${RESULTS.join(', ')}`, d['result']);
  if (!EXECUTIONS.includes(d['execution'] as string | null)) bad('execution', 'committed, failed, ambiguous or null', d['execution']);
  const p = d['principal'];
  if (!isPlainObject(p)) return bad('principal', 'an object', p);
  const principal = p as JsonObject;
  const pKeys = Object.keys(principal).sort().join();
  if (pKeys !== 'agent,claims,expires_at,issuer,user')
    throw new InvalidArgument(
      `receipt field principal must have exactly agent, user, claims, issuer, expires_at; got ${Object.keys(principal).join(', ') || 'nothing'}`,
    );
  if (typeof principal['agent'] !== 'string') bad('principal.agent', 'a string', principal['agent']);
  for (const k of ['user', 'issuer', 'expires_at'])
    if (principal[k] !== null && typeof principal[k] !== 'string') bad(`principal.${k}`, 'a string or null', principal[k]);
  if (principal['claims'] !== null && !isPlainObject(principal['claims'])) bad('principal.claims', 'an object or null', principal['claims']);
  const w = d['would_have'];
  if (w !== null) {
    if (!isPlainObject(w)) return bad('would_have', 'an object or null', w);
    const would = w as JsonObject;
    if (Object.keys(would).sort().join() !== 'blocked_reason,decision,reason')
      throw new InvalidArgument('receipt field would_have must have exactly decision, reason, blocked_reason');
    if (typeof would['decision'] !== 'string') bad('would_have.decision', 'a string', would['decision']);
    if (typeof would['reason'] !== 'string') bad('would_have.reason', 'a string', would['reason']);
    if (would['blocked_reason'] !== null && typeof would['blocked_reason'] !== 'string')
      bad('would_have.blocked_reason', 'a string or null', would['blocked_reason']);
  }
  if (Object.prototype.hasOwnProperty.call(d, 'edit')) {
    const edit = d['edit'];
    if (!isPlainObject(edit)) return bad('edit', 'an object', edit);
    const ed = edit as JsonObject;
    const got = Object.keys(ed);
    if (got.length !== RECEIPT_EDIT_KEYS.length || !RECEIPT_EDIT_KEYS.every((k) => Object.prototype.hasOwnProperty.call(ed, k))) {
      throw new InvalidArgument(
        `receipt field edit must have exactly ${RECEIPT_EDIT_KEYS.join(', ')}; got ${got.map((k) => JSON.stringify(k)).join(', ') || 'nothing'}`,
      );
    }
    for (const k of ['proposed_request_id', 'proposed_hash', 'approved_hash', 'editor']) if (typeof ed[k] !== 'string') bad(`edit.${k}`, 'a string', ed[k]);
    for (const k of ['proposed_arguments', 'approved_arguments']) if (!isPlainObject(ed[k])) bad(`edit.${k}`, 'an object', ed[k]);
  }
  const controls = d['controls'];
  if (!Array.isArray(controls) || !controls.every((c) => typeof c === 'string')) bad('controls', 'an array of strings', controls);
  return d as unknown as ReceiptDocument;
}

/** The keys of a `ctrlrun.receipt/v3` document, in the order `buildReceipt` writes them. */
export const RECEIPT_KEYS: readonly string[] = Object.freeze([
  'schema',
  'receipt_id',
  'action_id',
  'action',
  'action_hash',
  'principal',
  'resource',
  'arguments',
  'environment',
  'decision',
  'decision_reason',
  'approval_id',
  'approver',
  'effect_key',
  'attempt',
  'result',
  'execution',
  'would_have',
  'error',
  'started_at',
  'finished_at',
  'seq',
  'prev_hash',
  'policy_hash',
  'policy_version',
  'controls',
]);

const SORTED_KEYS: readonly string[] = [...RECEIPT_KEYS].sort(compareCodePoints);
/** Each v3 key's place in {@link SORTED_KEYS}. */
const KEY_INDEX: ReadonlyMap<string, number> = new Map(SORTED_KEYS.map((k, i) => [k, i]));
/** Each sorted key as it is written before its value: `"action":`. */
const QUOTED_KEYS: readonly string[] = SORTED_KEYS.map((k) => `${JSON.stringify(k)}:`);
// The receipt's keys are identifiers, so `receipt.<key>` is the path canonicalJson itself names.
const KEY_PATHS: readonly string[] = SORTED_KEYS.map((k) => `receipt.${k}`);
