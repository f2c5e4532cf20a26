/**
 * `ctrlrun inspect ACTION_ID`: one action's whole story — its events, its receipt, its approvals
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
import { openReader } from '../stores.js';

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

function approvalJson(a: ApprovalRecord): JsonObject {
  return {
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

/** Everything the store knows about one action, or null when it knows nothing. */
export async function inspection(store: StateStore, actionId: string): Promise<{ document: JsonObject; approvals: ApprovalRecord[] } | null> {
  const events = (await store.events()).filter((e) => e.actionId === actionId);
  const row = (await store.receipts()).filter((r) => r.action_id === actionId).at(-1) ?? null;
  let receipt: JsonObject | null = null;
  if (row?.json) {
    const doc = parseJson(row.json, { what: 'receipt', floats: 'allow' });
    if (isObject(doc)) receipt = doc as JsonObject;
  }
  if (events.length === 0 && receipt === null) return null;
  // A suspended action has no receipt: its hash is on the ACTION_PROPOSED event.
  const proposed = events.find((e) => e.type === 'ACTION_PROPOSED');
  const hash = (receipt?.['action_hash'] as string | undefined) ?? (proposed?.data['action_hash'] as string | undefined) ?? null;
  const approvals = hash === null ? [] : await store.approvalsFor(hash);
  const key = (receipt?.['effect_key'] as string | null | undefined) ?? events.find((e) => e.effectKey !== null)?.effectKey ?? null;
  const effect = key === null ? null : await store.getEffect(key);
  const document: JsonObject = {
    schema: INSPECTION_SCHEMA,
    action_id: actionId,
    receipt,
    effect: effect === null ? null : effectJson(effect),
    approvals: approvals.map(approvalJson),
    events: events.map((e) => parseJson(eventLine(e), { floats: 'allow' })),
  };
  return { document, approvals };
}

const label = (name: string) => name.padEnd(12);

function value(v: JsonValue | undefined): string {
  if (v === undefined || v === null) return '-';
  return typeof v === 'string' ? v : prettyJson(v).replace(/\s*\n\s*/g, ' ');
}

function human(document: JsonObject, approvals: ApprovalRecord[], out: (line: string) => void): void {
  const receipt = document['receipt'] as JsonObject | null;
  // Without a receipt (awaiting a human), the action is known from its approval request.
  const requested = approvals[0]?.request.action ?? null;
  const name = (receipt?.['action'] as string | undefined) ?? requested?.name ?? '-';
  out(`${document['action_id']}  ${name}`);
  const p = (receipt?.['principal'] as JsonObject | undefined) ?? (requested ? { agent: requested.principal.agent, user: requested.principal.user, claims: requested.principal.claims ?? null, issuer: requested.principal.issuer ?? null, expires_at: requested.principal.expiresAt ?? null } : null);
  if (p) {
    out(`${label('principal')}${value(p['agent'])}${typeof p['user'] === 'string' ? ` (user: ${p['user']})` : ''}`);
    if (typeof p['issuer'] === 'string') out(`${label('issuer')}${p['issuer']}`);
    if (typeof p['expires_at'] === 'string') out(`${label('expires')}${p['expires_at']}`);
    if (isObject(p['claims'])) out(`${label('claims')}${Object.keys(p['claims']).sort().join(', ')}`);
  }
  out(`${label('resource')}${value(receipt?.['resource'] ?? requested?.resource)}`);
  out(`${label('environment')}${value(receipt?.['environment'] ?? requested?.environment)}`);
  out(`${label('arguments')}${value(receipt?.['arguments'] ?? (requested ? (requested.arguments as JsonObject) : undefined))}`);
  const events = document['events'] as JsonObject[];
  const evaluated = events.find((e) => e['type'] === 'POLICY_EVALUATED')?.['data'] as JsonObject | undefined;
  const decision = receipt?.['decision'] ?? evaluated?.['decision'];
  const reason = receipt?.['decision_reason'] ?? evaluated?.['reason'];
  if (decision !== undefined) out(`${label('decision')}${value(decision)} (${value(reason)})`);
  for (const a of document['approvals'] as JsonObject[]) {
    out(`${label('approval')}${a['approval_id']}  ${a['status']}${typeof a['approver'] === 'string' ? ` by ${a['approver']}` : ''}`);
  }
  const effect = document['effect'] as JsonObject | null;
  if (effect) out(`${label('effect')}${effect['effect_key']}  ${effect['state']}  attempt ${effect['attempt']}${typeof effect['resolved_by'] === 'string' ? `  resolved by ${effect['resolved_by']}` : ''}`);
  out(receipt ? `${label('receipt')}${receipt['receipt_id']}  ${receipt['result']}` : `${label('receipt')}-  (awaiting a human)`);
  for (const e of events) {
    const data = (e['data'] ?? {}) as JsonObject;
    const pairs = Object.keys(data).map((k) => `${k}=${value(data[k])}`);
    out(`  ${String(e['event_id']).padStart(3)}  ${e['ts']}  ${String(e['type']).padEnd(28)}${pairs.join(' ')}`.trimEnd());
  }
}

export const inspect: Command = {
  name: 'inspect',
  summary: "show one action: its events, receipt, approvals and effect",
  positionals: ['ACTION_ID'],
  options: {
    json: { type: 'boolean', help: `the ${INSPECTION_SCHEMA} document` },
    'store-url': STORE_URL,
  },
  async run({ io, values, positionals, out, json }) {
    const id = positionals[0]!;
    const store = await openReader(storeTarget(io, values['store-url'] as string | undefined));
    try {
      const found = await inspection(store, id);
      if (found === null) throw new CliRefusal(`no action ${id}`);
      if (values['json'] === true) json(prettyJson(found.document));
      else human(found.document, found.approvals, out);
      return 0;
    } finally {
      await store.close();
    }
  },
};
