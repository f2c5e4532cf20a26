/**
 * Receipts (`ctrlrun.receipt/v7`, the original 0.12.2's): one per terminal action, chained by hash.
 *
 * @module
 */
import { type Action, principalJson } from './action.js';
import { canonicalJson, compareCodePoints, isPlainObject, orderedJson, parseJson, type JsonObject, type JsonValue } from './canonical.js';
import { InvalidArgument } from './errors.js';
import { sha256TaggedText } from './hash.js';
import type { ReceiptDraft, VerifiedApprover } from './model.js';
import { ALWAYS_PRESENT } from './receipt-readable.js';

/** The schema this build writes (all 34 keys of {@link RECEIPT_KEYS}). */
export const RECEIPT_SCHEMA = 'ctrlrun.receipt/v7';

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
  /**
   * The grant (or `dlg_…` delegation) that let the action through when an authority section
   * decided it; null or absent when there is none, or the action was refused before authority passed.
   */
  authorityGrantId?: string | null;
  /** The task the caller named (`execute(…, { task })`), or null. Never part of the action hash. */
  task?: string | null;
  /** The presented approval's verified approvers (`approvers`); absent or empty when none. */
  approvers?: readonly VerifiedApprover[];
  /** The presented approval's pinned precondition fingerprint, when the pass compared one. */
  preconditionAtRequest?: string | null;
  /** The fingerprint the presenting pass computed, when it compared one. */
  preconditionAtRecheck?: string | null;
  /** The budget charges the store accepted for this action (`budget_charges`); absent or empty when none. */
  budgetCharges?: readonly { readonly grantId: string; readonly metric: string; readonly amount: number | bigint }[];
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
    // v4–v7 (spec 05 §2.1): every key present, null or [] for what did not happen (this build
    // runs no scope provider and runs under no hop).
    precondition_at_request: f.preconditionAtRequest ?? null,
    precondition_at_recheck: f.preconditionAtRecheck ?? null,
    approvers: (f.approvers ?? []).map((a) => ({ agent: a.agent, user: a.user, issuer: a.issuer, entitled: [...a.entitled], granted_at: a.grantedAt })),
    authority_grant_id: f.authorityGrantId ?? null,
    task: f.task ?? null,
    scope_hash: null,
    budget_charges: (f.budgetCharges ?? []).map((c) => ({ grant_id: c.grantId, metric: c.metric, amount: c.amount })),
    hop: null,
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

/**
 * A pending receipt as stored: its document with `seq` and `prev_hash` null, as `json` in the
 * document's own key order, and the hash of that document in `hash` (so that a pending row
 * altered since is told apart). An outcome whose receipt could not be chained with it is written
 * with its receipt as such a row (no `seq` or `prev_hash`: off the chain, so a verify reports it
 * `unchained`, never a pass), so that the receipt is never lost to a crash: the receipt written
 * alone after the outcome chains that row, and after a crash `chainPendingReceipts` does, each with
 * the seal it would have had ({@link sealReceipt} on the document as stored).
 */
export function pendingReceipt(document: JsonObject): { json: string; hash: string } {
  const pending = { ...document, seq: null, prev_hash: null };
  return { json: orderedJson(pending), hash: sha256TaggedText(canonicalJson(pending, 'receipt')) };
}

/**
 * The document of a pending receipt row (see {@link pendingReceipt}), or `null` when the row is
 * not one: it has a `seq` or `prev_hash`, its text and hash are not exactly what this build writes
 * for a pending receipt of its own schema and id, or its action, effect key, result and time
 * columns are not the document's. An older unchained row, or a pending row changed by accident
 * since, is left as it is. The hash is not keyed: like the chain itself, this tells a row that
 * was written pending from one that was not, not from one forged by whoever can write the store.
 */
export function pendingReceiptDocument(row: {
  readonly receipt_id: string;
  readonly action_id: string | null;
  readonly effect_key: string | null;
  readonly result: string | null;
  readonly ts: string | null;
  readonly seq: unknown;
  readonly prev_hash: unknown;
  readonly hash: unknown;
  readonly json: string | null;
}): JsonObject | null {
  if (row.seq !== null || row.prev_hash !== null || typeof row.hash !== 'string' || row.json === null) return null;
  let document: JsonValue;
  try {
    document = parseJson(row.json, { what: `receipts.json of ${row.receipt_id}`, floats: 'allow' });
  } catch {
    return null;
  }
  if (!isPlainObject(document)) return null;
  const doc = document as JsonObject;
  if (doc['schema'] !== RECEIPT_SCHEMA || doc['receipt_id'] !== row.receipt_id || doc['seq'] !== null || doc['prev_hash'] !== null) return null;
  if (doc['action_id'] !== row.action_id || doc['effect_key'] !== row.effect_key || doc['result'] !== row.result || doc['finished_at'] !== row.ts) return null;
  let pending: { json: string; hash: string };
  try {
    pending = pendingReceipt(doc);
  } catch {
    return null;
  }
  return pending.json === row.json && pending.hash === row.hash ? doc : null;
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
 * document with exactly the v7 keys is written in their fixed code point order, so no receipt
 * sorts its 34 keys again, and each value is written once for both texts: a string, number or
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

/** A receipt's principal, as the document holds it (a `v1` receipt's has only `agent` and `user`). */
export interface ReceiptPrincipal {
  readonly agent: string;
  readonly user: string | null;
  /** `{}` when the principal has no claims (this build, and the original since 0.12); older documents may hold null. */
  readonly claims?: JsonObject | null;
  readonly issuer?: string | null;
  readonly expires_at?: string | null;
}

/** One verified approver on a `v5`+ receipt (spec 05 §4.1): `granted_at` in the original's `isoformat()` form. */
export interface ReceiptApprover {
  readonly agent: string;
  readonly user: string | null;
  readonly issuer: string | null;
  readonly entitled: readonly string[];
  readonly granted_at: string;
}

/** One budget charge on a `v6`+ receipt (spec 05 §5.1). */
export interface ReceiptBudgetCharge {
  readonly grant_id: string;
  readonly metric: string;
  readonly amount: number | bigint;
}

/**
 * A receipt document, typed field by field (the names are the document's own). This build writes
 * `ctrlrun.receipt/v7`; a stored document may carry any label the original wrote (`v1`–`v7`) or
 * one this build does not know, and holds the keys of its own label: the fields marked v4–v7 are
 * present exactly when its label declares them (a `v7` document has all 34 keys).
 */
export interface ReceiptDocument {
  readonly schema: string;
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
  readonly execution?: 'committed' | 'failed' | 'ambiguous' | null;
  readonly would_have?: { readonly decision: string; readonly reason: string; readonly blocked_reason: string | null } | null;
  readonly error: string | null;
  readonly started_at: string;
  readonly finished_at: string;
  readonly seq?: number | null;
  readonly prev_hash?: string | null;
  readonly policy_hash?: string | null;
  readonly policy_version?: string | null;
  readonly controls?: readonly string[];
  /** v4+: the approval's precondition fingerprint when it was pinned, and the one the recheck computed. */
  readonly precondition_at_request?: string | null;
  readonly precondition_at_recheck?: string | null;
  /** v5+: the presented approval's verified approvers (`[]` when none). */
  readonly approvers?: readonly ReceiptApprover[];
  /** v5+: the grant or delegation that let the action through when an authority section decided it. */
  readonly authority_grant_id?: string | null;
  /** v6+. */
  readonly task?: string | null;
  readonly scope_hash?: string | null;
  readonly budget_charges?: readonly ReceiptBudgetCharge[];
  /** v7: the delegation hop the action ran under. */
  readonly hop?: string | null;
  /** Present only on an action run under an edited grant (this build's own key). */
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
const PRINCIPAL_KEYS: readonly string[] = ['agent', 'user', 'claims', 'issuer', 'expires_at'];
const APPROVER_KEYS: readonly string[] = ['agent', 'user', 'issuer', 'entitled', 'granted_at'];
const CHARGE_KEYS: readonly string[] = ['grant_id', 'metric', 'amount'];

const has = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);
const sameKeys = (o: object, keys: readonly string[]): boolean => {
  const got = Object.keys(o);
  return got.length === keys.length && keys.every((k) => has(o, k));
};
const listed = (o: object): string =>
  Object.keys(o)
    .map((k) => JSON.stringify(k))
    .join(', ') || 'nothing';

/**
 * Reads a stored receipt (its `json` column, or a `receipts.jsonl` line) back into a typed
 * {@link ReceiptDocument}, unchanged. Every label the original wrote is read: a `v3`–`v7`
 * document must hold exactly its label's keys ({@link receiptKeysOf}; `edit` besides); a `v1` or
 * `v2` document, the keys every receipt has and no key `v3` does not know; a document under a
 * label this build does not know (a later version), the keys every receipt has, its other keys
 * kept as they are. Each key this build knows is checked for its type wherever it appears.
 * Anything else — a missing or unknown key, a wrong type, a `schema` that is not a string, text
 * that is not strict JSON — is an `InvalidArgument` naming the field. It reads the document;
 * whether it is intact and chained is `verifyChain`'s to say.
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
  if (!has(d, 'schema')) throw new InvalidArgument('receipt field missing: schema');
  const schema = d['schema'];
  if (typeof schema !== 'string') return bad('schema', 'a string (ctrlrun.receipt/v1 to /v7, or a later label)', schema);
  const declared = receiptKeysOf(schema);
  const older = schema === 'ctrlrun.receipt/v1' || schema === 'ctrlrun.receipt/v2';
  const required: readonly string[] = declared ?? ['schema', ...ALWAYS_PRESENT];
  const missing = required.filter((k) => !has(d, k));
  if (missing.length > 0) throw new InvalidArgument(`receipt field${missing.length > 1 ? 's' : ''} missing: ${missing.join(', ')}`);
  if (declared !== null || older) {
    const allowed = declared ?? RECEIPT_KEYS_V3;
    const extra = Object.keys(d).filter((k) => !allowed.includes(k) && k !== 'edit');
    if (extra.length > 0)
      throw new InvalidArgument(
        `receipt has unknown field${extra.length > 1 ? 's' : ''} for ${JSON.stringify(schema)}: ${extra.map((k) => JSON.stringify(k)).join(', ')}`,
      );
  }
  // Present keys are checked for their type, whatever the label.
  const present = (k: string): boolean => has(d, k);
  const str = (k: string): void => void (typeof d[k] === 'string' || bad(k, 'a string', d[k]));
  const strOrNull = (k: string): void => void (!present(k) || d[k] === null || typeof d[k] === 'string' || bad(k, 'a string or null', d[k]));
  for (const k of ['receipt_id', 'action_id', 'action', 'action_hash', 'environment', 'decision', 'decision_reason', 'started_at', 'finished_at']) str(k);
  for (const k of ['resource', 'approval_id', 'approver', 'effect_key', 'error', 'prev_hash', 'policy_hash', 'policy_version']) strOrNull(k);
  for (const k of ['precondition_at_request', 'precondition_at_recheck', 'authority_grant_id', 'task', 'scope_hash', 'hop']) strOrNull(k);
  if (!isPlainObject(d['arguments'])) bad('arguments', 'an object', d['arguments']);
  const attempt = d['attempt'];
  if (typeof attempt !== 'number' || !Number.isSafeInteger(attempt) || attempt < 0) bad('attempt', 'a non-negative integer', attempt);
  const seq = d['seq'];
  if (present('seq') && seq !== null && (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1)) bad('seq', 'a positive integer or null', seq);
  if (typeof d['result'] !== 'string' || !RESULTS.includes(d['result'])) bad('result', `one of ${RESULTS.join(', ')}`, d['result']);
  if (present('execution') && !EXECUTIONS.includes(d['execution'] as string | null)) bad('execution', 'committed, failed, ambiguous or null', d['execution']);
  const p = d['principal'];
  if (!isPlainObject(p)) return bad('principal', 'an object', p);
  const principal = p as JsonObject;
  // A v1 principal is {agent, user}; from v2 on it has all five; a later label's at least the two.
  const principalKeys = schema === 'ctrlrun.receipt/v1' ? PRINCIPAL_KEYS.slice(0, 2) : PRINCIPAL_KEYS;
  const principalOk = declared !== null || older ? sameKeys(principal, principalKeys) : has(principal, 'agent') && has(principal, 'user');
  if (!principalOk)
    throw new InvalidArgument(`receipt field principal must have exactly ${principalKeys.join(', ')}; got ${Object.keys(principal).join(', ') || 'nothing'}`);
  if (typeof principal['agent'] !== 'string') bad('principal.agent', 'a string', principal['agent']);
  for (const k of ['user', 'issuer', 'expires_at'])
    if (has(principal, k) && principal[k] !== null && typeof principal[k] !== 'string') bad(`principal.${k}`, 'a string or null', principal[k]);
  if (has(principal, 'claims') && principal['claims'] !== null && !isPlainObject(principal['claims']))
    bad('principal.claims', 'an object or null', principal['claims']);
  const w = d['would_have'];
  if (present('would_have') && w !== null) {
    if (!isPlainObject(w)) return bad('would_have', 'an object or null', w);
    const would = w as JsonObject;
    if (Object.keys(would).sort().join() !== 'blocked_reason,decision,reason')
      throw new InvalidArgument('receipt field would_have must have exactly decision, reason, blocked_reason');
    if (typeof would['decision'] !== 'string') bad('would_have.decision', 'a string', would['decision']);
    if (typeof would['reason'] !== 'string') bad('would_have.reason', 'a string', would['reason']);
    if (would['blocked_reason'] !== null && typeof would['blocked_reason'] !== 'string')
      bad('would_have.blocked_reason', 'a string or null', would['blocked_reason']);
  }
  if (present('edit')) {
    const edit = d['edit'];
    if (!isPlainObject(edit)) return bad('edit', 'an object', edit);
    const ed = edit as JsonObject;
    if (!sameKeys(ed, RECEIPT_EDIT_KEYS)) throw new InvalidArgument(`receipt field edit must have exactly ${RECEIPT_EDIT_KEYS.join(', ')}; got ${listed(ed)}`);
    for (const k of ['proposed_request_id', 'proposed_hash', 'approved_hash', 'editor']) if (typeof ed[k] !== 'string') bad(`edit.${k}`, 'a string', ed[k]);
    for (const k of ['proposed_arguments', 'approved_arguments']) if (!isPlainObject(ed[k])) bad(`edit.${k}`, 'an object', ed[k]);
  }
  const controls = d['controls'];
  if (present('controls') && !(Array.isArray(controls) && controls.every((c) => typeof c === 'string'))) bad('controls', 'an array of strings', controls);
  if (present('approvers')) {
    const approvers = d['approvers'];
    if (!Array.isArray(approvers)) return bad('approvers', 'an array', approvers);
    approvers.forEach((a, i) => {
      const at = `approvers[${i}]`;
      if (!isPlainObject(a)) return bad(at, 'an object', a);
      const o = a as JsonObject;
      if (!sameKeys(o, APPROVER_KEYS)) throw new InvalidArgument(`receipt field ${at} must have exactly ${APPROVER_KEYS.join(', ')}; got ${listed(o)}`);
      if (typeof o['agent'] !== 'string') bad(`${at}.agent`, 'a string', o['agent']);
      for (const k of ['user', 'issuer']) if (o[k] !== null && typeof o[k] !== 'string') bad(`${at}.${k}`, 'a string or null', o[k]);
      const entitled = o['entitled'];
      if (!Array.isArray(entitled) || !entitled.every((c) => typeof c === 'string')) bad(`${at}.entitled`, 'an array of strings', entitled);
      if (typeof o['granted_at'] !== 'string') bad(`${at}.granted_at`, 'a string', o['granted_at']);
      return undefined;
    });
  }
  if (present('budget_charges')) {
    const charges = d['budget_charges'];
    if (!Array.isArray(charges)) return bad('budget_charges', 'an array', charges);
    charges.forEach((c, i) => {
      const at = `budget_charges[${i}]`;
      if (!isPlainObject(c)) return bad(at, 'an object', c);
      const o = c as JsonObject;
      if (!sameKeys(o, CHARGE_KEYS)) throw new InvalidArgument(`receipt field ${at} must have exactly ${CHARGE_KEYS.join(', ')}; got ${listed(o)}`);
      for (const k of ['grant_id', 'metric']) if (typeof o[k] !== 'string') bad(`${at}.${k}`, 'a string', o[k]);
      const amount = o['amount'];
      if (!((typeof amount === 'number' && Number.isSafeInteger(amount) && amount >= 0) || (typeof amount === 'bigint' && amount >= 0n)))
        bad(`${at}.amount`, 'a non-negative integer', amount);
      return undefined;
    });
  }
  return d as unknown as ReceiptDocument;
}

/** The keys of a `ctrlrun.receipt/v3` document (01 §8), in the order they are written. */
const RECEIPT_KEYS_V3: readonly string[] = Object.freeze([
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

/** The keys each later version appends to the previous version's (spec 05 §2.1), in order. */
const ADDED: readonly (readonly [string, readonly string[]])[] = [
  ['ctrlrun.receipt/v4', ['precondition_at_request', 'precondition_at_recheck']],
  ['ctrlrun.receipt/v5', ['approvers', 'authority_grant_id']],
  ['ctrlrun.receipt/v6', ['task', 'scope_hash', 'budget_charges']],
  ['ctrlrun.receipt/v7', ['hop']],
];

const KEYS_BY_SCHEMA: ReadonlyMap<string, readonly string[]> = (() => {
  const byLabel = new Map<string, readonly string[]>([['ctrlrun.receipt/v3', RECEIPT_KEYS_V3]]);
  let keys = RECEIPT_KEYS_V3;
  for (const [label, added] of ADDED) byLabel.set(label, (keys = Object.freeze([...keys, ...added])));
  return byLabel;
})();

/**
 * The keys a `ctrlrun.receipt/v3` to `/v7` document holds, in the order they are written (each
 * version's set is the previous one's with its own appended: 26, 28, 30, 33, 34 keys); null for
 * `v1`, `v2` (written before the key sets were fixed) and any label this build does not know.
 */
export function receiptKeysOf(schema: string): readonly string[] | null {
  return KEYS_BY_SCHEMA.get(schema) ?? null;
}

/** The keys of a `ctrlrun.receipt/v7` document, in the order `buildReceipt` writes them (01 §8's, then spec 05 §2.1's). */
export const RECEIPT_KEYS: readonly string[] = KEYS_BY_SCHEMA.get(RECEIPT_SCHEMA)!;

const SORTED_KEYS: readonly string[] = [...RECEIPT_KEYS].sort(compareCodePoints);
/** Each v7 key's place in {@link SORTED_KEYS}. */
const KEY_INDEX: ReadonlyMap<string, number> = new Map(SORTED_KEYS.map((k, i) => [k, i]));
/** Each sorted key as it is written before its value: `"action":`. */
const QUOTED_KEYS: readonly string[] = SORTED_KEYS.map((k) => `${JSON.stringify(k)}:`);
// The receipt's keys are identifiers, so `receipt.<key>` is the path canonicalJson itself names.
const KEY_PATHS: readonly string[] = SORTED_KEYS.map((k) => `receipt.${k}`);
