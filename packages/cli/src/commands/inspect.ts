/**
 * `ctrlrun inspect ID` (an action, approval request or receipt id): one action's whole story — its events, its receipt, its approvals
 * and its effect — as `ctrlrun.inspection/v2` (`--json`) or for a person. One producer,
 * {@link inspection}, shared with every other surface that shows an action.
 *
 * @module
 */
import { eventLine, parseJson, type ApprovalRecord, type EffectRecord, type JsonObject, type JsonValue, type StateStore } from '@ctrlrun/kernel';
import { STORE_URL, type Command } from '../command.js';
import { storeTarget } from '../discovery.js';
import { CliRefusal } from '../errors.js';
import { isObject, prettyJson, stampOrNull } from '../format.js';
import { openListing } from '../stores.js';

/** The inspection document's schema tag. */
export const INSPECTION_SCHEMA = 'ctrlrun.inspection/v2';

function effectJson(r: EffectRecord): JsonObject {
  return {
    effect_key: r.effectKey,
    state: r.state,
    action_id: r.actionId,
    attempt: r.attempt,
    created_at: stampOrNull(r.createdAt),
    updated_at: stampOrNull(r.updatedAt),
    lease_expires_at: stampOrNull(r.leaseExpiresAt),
    error: r.error,
    resolved_by: r.resolvedBy,
  };
}

/**
 * One approval request in a JSON view. `request_id` is its id's name in every view (the MCP
 * gateway's and operator's, the webhook's, the worker's `requestId`); `approval_id` carries the
 * same value for readers of the original's `ctrlrun.inspection/v2` and of earlier releases, and
 * is deprecated in the other documents.
 */
export function approvalJson(a: ApprovalRecord): JsonObject {
  return {
    request_id: a.request.requestId,
    approval_id: a.request.requestId,
    action_hash: a.request.actionHash,
    status: a.status,
    approver: a.approver,
    created_at: stampOrNull(a.request.createdAt),
    expires_at: stampOrNull(a.request.expiresAt),
    granted_at: stampOrNull(a.grantedAt),
    consumed_at: stampOrNull(a.consumedAt),
  };
}

/** What one inspection found: the document, the approvals, and a stored receipt that could not be read. */
export interface Inspection {
  readonly document: JsonObject;
  readonly approvals: ApprovalRecord[];
  /** The receipt row's id, its seq column and why its stored document is not shown (not JSON, not an object), or null. */
  readonly unreadable: { readonly receiptId: string; readonly seq: number | null; readonly reason: string } | null;
}

/** A receipt row's document, or why it cannot be shown: a tampered row is described, never a crash. */
function receiptDocument(json: unknown): JsonObject | string {
  if (typeof json !== 'string') return `its json column is ${json === null ? 'null' : typeof json}, not a document`;
  try {
    const doc = parseJson(json, { what: 'receipt', floats: 'allow' });
    return isObject(doc) ? (doc as JsonObject) : 'its stored document is not a JSON object';
  } catch (e) {
    return `its stored document is not valid JSON (${e instanceof Error ? e.message : String(e)})`;
  }
}

/**
 * How a request is tied to an edit-then-approve, from its answer's event: `edited_to` (the
 * proposal, answered by an edit) or `edited_from` (the edited request); nothing otherwise.
 */
function editLink(events: readonly { type: string; approvalId: string | null; data: JsonObject }[], a: ApprovalRecord): JsonObject {
  const id = a.request.requestId;
  const answer = (type: string) => events.filter((e) => e.approvalId === id && e.type === type).at(-1)?.data;
  if (a.status === 'denied') {
    const to = answer('APPROVAL_DENIED')?.['edited_to'];
    return typeof to === 'string' ? { edited_to: to } : {};
  }
  const from = answer('APPROVAL_GRANTED')?.['edited_from'];
  return typeof from === 'string' ? { edited_from: from } : {};
}

/** Everything the store knows about one action, or null when it knows nothing. */
export async function inspection(store: StateStore, actionId: string): Promise<Inspection | null> {
  const all = await store.events();
  const events = all.filter((e) => e.actionId === actionId);
  const row = (await store.receipts()).filter((r) => r.action_id === actionId).at(-1) ?? null;
  let receipt: JsonObject | null = null;
  let unreadable: Inspection['unreadable'] = null;
  if (row !== null) {
    const doc = receiptDocument(row.json);
    if (typeof doc === 'string') unreadable = { receiptId: String(row.receipt_id), seq: row.seq, reason: doc };
    else receipt = doc;
  }
  if (events.length === 0 && row === null) return null;
  // A suspended action has no receipt: its hash is on the ACTION_PROPOSED event.
  const proposed = events.find((e) => e.type === 'ACTION_PROPOSED');
  // A tampered document may hold anything in these fields: only strings are looked up.
  const text = (v: JsonValue | undefined): string | undefined => (typeof v === 'string' ? v : undefined);
  const hash = text(receipt?.['action_hash']) ?? text(proposed?.data['action_hash']) ?? null;
  const approvals = hash === null ? [] : await store.approvalsFor(hash);
  const key = text(receipt?.['effect_key']) ?? events.find((e) => e.effectKey !== null)?.effectKey ?? null;
  const effect = key === null ? null : await store.getEffect(key);
  const document: JsonObject = {
    schema: INSPECTION_SCHEMA,
    action_id: actionId,
    receipt,
    effect: effect === null ? null : effectJson(effect),
    approvals: approvals.map((a) => ({ ...approvalJson(a), ...editLink(all, a) })),
    events: events.map((e) => parseJson(eventLine(e), { floats: 'allow' })),
  };
  return { document, approvals, unreadable };
}

/**
 * The action an id names: an action id (`act_…`) as it is; an approval request id (`apr_…`, what
 * `ApprovalRequired` and the agent print) the action that asked for it; a receipt id (`ctr_…`, what
 * `ctrlrun receipts` prints) the action it records. Null when the store knows none of them.
 */
export async function actionIdFor(store: StateStore, id: string): Promise<string | null> {
  const events = await store.events();
  if (events.some((e) => e.actionId === id)) return id;
  const receipts = await store.receipts();
  if (receipts.some((r) => r.action_id === id)) return id;
  const asked = events.find((e) => e.type === 'APPROVAL_REQUESTED' && e.approvalId === id);
  if (asked) return asked.actionId;
  const approval = await store.getApproval(id);
  if (approval !== null) return approval.request.action.actionId;
  const receipt = receipts.find((r) => r.receipt_id === id);
  return receipt !== undefined && typeof receipt.action_id === 'string' ? receipt.action_id : null;
}

const label = (name: string) => name.padEnd(12);

function value(v: JsonValue | undefined): string {
  if (v === undefined || v === null) return '-';
  return typeof v === 'string' ? v : prettyJson(v).replace(/\s*\n\s*/g, ' ');
}

function human({ document, approvals, unreadable }: Inspection, out: (line: string) => void): void {
  const receipt = document['receipt'] as JsonObject | null;
  // Without a receipt (awaiting a human), the action is known from its approval request.
  const requested = approvals[0]?.request.action ?? null;
  const name = receipt?.['action'] ?? requested?.name ?? '-';
  out(`${document['action_id']}  ${value(name)}`);
  const stored = receipt?.['principal'];
  const p =
    (isObject(stored) ? (stored as JsonObject) : undefined) ??
    (requested
      ? {
          agent: requested.principal.agent,
          user: requested.principal.user,
          claims: requested.principal.claims ?? null,
          issuer: requested.principal.issuer ?? null,
          expires_at: requested.principal.expiresAt ?? null,
        }
      : null);
  if (p) {
    out(`${label('principal')}${value(p['agent'])}${typeof p['user'] === 'string' ? ` (user: ${p['user']})` : ''}`);
    if (typeof p['issuer'] === 'string') out(`${label('issuer')}${p['issuer']}`);
    if (typeof p['expires_at'] === 'string') out(`${label('expires')}${p['expires_at']}`);
    if (isObject(p['claims']) && Object.keys(p['claims']).length > 0) out(`${label('claims')}${Object.keys(p['claims']).sort().join(', ')}`);
  }
  out(`${label('resource')}${value(receipt?.['resource'] ?? requested?.resource)}`);
  out(`${label('environment')}${value(receipt?.['environment'] ?? requested?.environment)}`);
  out(`${label('arguments')}${value(receipt?.['arguments'] ?? (requested ? (requested.arguments as JsonObject) : undefined))}`);
  // Run under a grant a human gave with edited arguments: the proposal, as the receipt hashed it.
  const edit = isObject(receipt?.['edit']) ? (receipt!['edit'] as JsonObject) : null;
  if (edit !== null) {
    out(`${label('edited by')}${value(edit['editor'])}, from request ${value(edit['proposed_request_id'])}`);
    out(`${label('proposed')}${value(edit['proposed_arguments'])}`);
    out(`${label('')}hash ${value(edit['proposed_hash'])}; approved ${value(edit['approved_hash'])}`);
  }
  const events = document['events'] as JsonObject[];
  const evaluated = events.find((e) => e['type'] === 'POLICY_EVALUATED')?.['data'] as JsonObject | undefined;
  const decision = receipt?.['decision'] ?? evaluated?.['decision'];
  const reason = receipt?.['decision_reason'] ?? evaluated?.['reason'];
  if (decision !== undefined) out(`${label('decision')}${value(decision)} (${value(reason)})`);
  for (const a of document['approvals'] as JsonObject[]) {
    const link =
      typeof a['edited_to'] === 'string'
        ? `  (answered with an edit: ${a['edited_to']})`
        : typeof a['edited_from'] === 'string'
          ? `  (an edit of ${a['edited_from']})`
          : '';
    out(`${label('approval')}${a['approval_id']}  ${a['status']}${typeof a['approver'] === 'string' ? ` by ${a['approver']}` : ''}${link}`);
  }
  const effect = document['effect'] as JsonObject | null;
  if (effect)
    out(
      `${label('effect')}${effect['effect_key']}  ${effect['state']}  attempt ${effect['attempt']}${typeof effect['resolved_by'] === 'string' ? `  resolved by ${effect['resolved_by']}` : ''}`,
    );
  if (receipt) out(`${label('receipt')}${value(receipt['receipt_id'])}  ${value(receipt['result'])}`);
  else if (unreadable) out(`${label('receipt')}${unreadable.receiptId}  (not shown: ${unreadable.reason}; run ctrlrun receipts --verify-chain)`);
  else out(`${label('receipt')}-  (awaiting a human)`);
  for (const e of events) {
    const data = (e['data'] ?? {}) as JsonObject;
    const pairs = Object.keys(data).map((k) => `${k}=${value(data[k])}`);
    out(`  ${String(e['event_id']).padStart(3)}  ${e['ts']}  ${String(e['type']).padEnd(28)}${pairs.join(' ')}`.trimEnd());
  }
}

export const inspect: Command = {
  name: 'inspect',
  summary: 'show one action (by its action id, approval request id or receipt id): its events, receipt, approvals and effect',
  positionals: ['ID'],
  options: {
    json: { type: 'boolean', help: `the ${INSPECTION_SCHEMA} document` },
    'store-url': STORE_URL,
  },
  async run({ io, values, positionals, out, err, json }) {
    const id = positionals[0]!;
    const store = await openListing(storeTarget(io, values['store-url'] as string | undefined), err);
    try {
      const actionId = await actionIdFor(store, id);
      const found = actionId === null ? null : await inspection(store, actionId);
      if (found === null) throw new CliRefusal(`no action ${id}`);
      if (values['json'] === true) json(prettyJson(found.document));
      else human(found, out);
      return 0;
    } finally {
      await store.close();
    }
  },
};
