/**
 * One approval request as a person must see it before answering it (`approve`, `deny`) and as
 * `approvals` lists it: the action's name, every canonical argument exactly as it was hashed, the
 * hash, who asked, when it expires, and the rule that asked for a human. The text is escaped by
 * `out`/`err` (`visible`), so an agent-chosen argument can neither add a line nor hide one.
 *
 * @module
 */
import {
  answerCommands,
  approvalProgress,
  canonicalJson,
  explainDecision,
  type ApprovalRecord,
  type JsonObject,
  type Policy,
  type StateStore,
} from '@ctrlrun/kernel';
import { parseTime } from '@ctrlrun/kernel/store';
import { approvalJson } from './commands/inspect.js';
import { CliRefusal } from './errors.js';
import { stamp } from './format.js';

/** What the store says about one request, read once, before anything is answered. */
export interface RequestView {
  readonly record: ApprovalRecord;
  /** The policy reason recorded when the request was made (`POLICY_EVALUATED`), or null. */
  readonly rule: string | null;
}

/** Whether a pending request's answer window has passed (it can no longer be granted). */
export function lapsed(record: ApprovalRecord, now: number = Date.now()): boolean {
  if (record.status !== 'pending') return false;
  try {
    return parseTime(record.request.expiresAt).getTime() <= now;
  } catch {
    return false;
  }
}

/**
 * Whether the stored action still hashes to the hash the request is bound to. The store rebuilds
 * the action from its stored JSON (recomputing its hash); a row edited behind the kernel's back
 * would show one action and grant another.
 */
export function hashMatches(record: ApprovalRecord): boolean {
  return record.request.action.actionHash === record.request.actionHash;
}

/** The policy reason recorded when the action was evaluated, or null. */
export async function ruleOf(store: StateStore, record: ApprovalRecord): Promise<string | null> {
  const actionId = record.request.action.actionId;
  const evaluated = store.lastEvent
    ? await store.lastEvent(actionId, 'POLICY_EVALUATED')
    : ((await store.events()).filter((e) => e.actionId === actionId && e.type === 'POLICY_EVALUATED').at(-1) ?? null);
  const reason = evaluated?.data['reason'];
  return typeof reason === 'string' ? reason : null;
}

/** Reads request `id` and the rule that asked for it; refuses an unknown request or one whose action does not match its hash. */
export async function readRequest(store: StateStore, id: string): Promise<RequestView> {
  const record = await store.getApproval(id);
  if (record === null) throw new CliRefusal(`no approval request ${id}`);
  if (!hashMatches(record)) {
    throw new CliRefusal(
      `approval request ${id}: its stored action hashes to ${record.request.action.actionHash}, not the ${record.request.actionHash} it is bound to; the record was altered, so it is neither shown nor answered`,
    );
  }
  return { record, rule: await ruleOf(store, record) };
}

/** The principal as `agent` or `agent (user: u)`. */
function requester(record: ApprovalRecord): string {
  const p = record.request.action.principal;
  return `${p.agent}${p.user !== null ? ` (user: ${p.user})` : ''}`;
}

/** Each canonical argument as `"key": value`, keys in canonical order, values as canonical JSON. */
function argumentLines(record: ApprovalRecord): string[] {
  const args = record.request.action.canonicalArguments;
  const keys = Object.keys(args);
  if (keys.length === 0) return ['(none)'];
  return keys.map((k) => `${JSON.stringify(k)}: ${canonicalJson(args[k])}`);
}

const label = (name: string) => `  ${name.padEnd(12)}`;

/**
 * The request as lines for a person: nothing cut, every argument shown (a long value is the
 * agent's to choose, and the part cut off could be the part that matters).
 */
export function requestLines(view: RequestView, policy: Policy | null): string[] {
  const { record, rule } = view;
  const a = record.request.action;
  const state = lapsed(record) ? 'pending, expired' : record.status;
  const lines = [`approval request ${record.request.requestId}  (${state})`, `${label('action')}${a.name}`];
  argumentLines(record).forEach((line, i) => lines.push(`${i === 0 ? label('arguments') : label('')}${line}`));
  lines.push(`${label('hash')}${record.request.actionHash}`);
  lines.push(`${label('requester')}${requester(record)}, at ${stamp(record.request.createdAt)}`);
  lines.push(`${label('expires')}${stamp(record.request.expiresAt)}`);
  if (a.resource !== null) lines.push(`${label('resource')}${a.resource}`);
  lines.push(`${label('environment')}${a.environment}`);
  lines.push(`${label('rule')}${rule ?? '(not recorded)'}${rule !== null ? ' (when requested)' : ''}`);
  if (policy !== null) lines.push(`${label('')}now: ${explainDecision(policy, a.name, a.canonicalArguments)}`);
  return lines;
}

/** The request as JSON: the inspection's approval fields, then the whole action and the rule. */
export function requestJson(view: RequestView): JsonObject {
  const { record, rule } = view;
  const a = record.request.action;
  return {
    ...approvalJson(record),
    expired: lapsed(record),
    hash_matches: hashMatches(record),
    action: {
      action_id: a.actionId,
      name: a.name,
      arguments: a.canonicalArguments,
      principal: { agent: a.principal.agent, user: a.principal.user },
      resource: a.resource,
      environment: a.environment,
    },
    rule,
    policy_hash: record.request.policyHash,
    approvals_required: record.request.approvalsRequired ?? 1,
    approvers: (record.approvers ?? []).map((x) => ({ agent: x.agent, user: x.user, issuer: x.issuer, entitled: [...x.entitled], granted_at: x.grantedAt })),
    progress: approvalProgress(record),
  };
}

/** The hint under a list of pending requests, or after a request is filed. */
export function answerHint(requestId: string): string {
  const { approve, deny } = answerCommands(requestId);
  return `answer with: ${approve}   (or: ${deny})`;
}
