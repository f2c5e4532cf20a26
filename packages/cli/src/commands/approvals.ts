/**
 * `ctrlrun approvals`: the approval requests, oldest first — pending ones by default — each with
 * its action, arguments, requester and expiry, and the command that answers it. Read through the
 * store's bounded `approvalsPage`: `--limit N` per page (50), `--after REQUEST_ID` to go on,
 * `--all` for every page. A reader: creates and migrates nothing.
 *
 * @module
 */
import { approvalProgress, argumentsForDisplay, orderedJson, type ApprovalRecord, type ApprovalStatus, type StateStore } from '@ctrlrun/kernel';
import { answerHint, hashMatches, lapsed, requestJson, ruleOf } from '../approval-view.js';
import { STORE_URL, type Command } from '../command.js';
import { storeTarget } from '../discovery.js';
import { CliRefusal, UsageError } from '../errors.js';
import { stamp } from '../format.js';
import { openListing } from '../stores.js';

/** The schema tag of `approvals --json`. */
export const APPROVALS_SCHEMA = 'ctrlrun.approvals/v1';

const STATUSES = ['pending', 'granted', 'denied', 'expired', 'consumed'] as const;
const DEFAULT_LIMIT = 50;
/** The store's page bound (`approvalsPage` reads at most this many rows). */
const MAX_LIMIT = 10_000;
/** The room for the arguments on one list line: long values are cut to fit, never a key; `approve`/`deny` show them whole. */
const LIST_ARGUMENTS = 120;

function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  if (!/^[0-9]+$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_LIMIT)
    throw new UsageError(`--limit must be an integer from 1 to ${MAX_LIMIT}, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

/** One page after `after`, and whether another record follows it. */
async function page(
  store: StateStore,
  status: ApprovalStatus | undefined,
  after: { createdAt: string; requestId: string } | null,
  limit: number,
): Promise<{ records: ApprovalRecord[]; more: boolean }> {
  const records = await store.approvalsPage({ status, after, limit });
  const last = records.at(-1);
  if (records.length < limit || last === undefined) return { records, more: false };
  const next = await store.approvalsPage({ status, after: { createdAt: last.request.createdAt, requestId: last.request.requestId }, limit: 1 });
  return { records, more: next.length > 0 };
}

function line(r: ApprovalRecord): string {
  const a = r.request.action;
  // Every key shows (a cut line could hide `amount` behind many keys); long values say how much was cut.
  const args = argumentsForDisplay(a.canonicalArguments, LIST_ARGUMENTS).text;
  const who = `${a.principal.agent}${a.principal.user !== null ? `/${a.principal.user}` : ''}`;
  let text = `${r.request.requestId}  ${r.status}  ${a.name}  ${args}  by ${who}  requested ${stamp(r.request.createdAt)}  expires ${stamp(r.request.expiresAt)}`;
  if (lapsed(r)) text += '  (expired: can no longer be granted)';
  if (r.approver !== null) text += `  answered by ${r.approver}`;
  // A request needing several verified approvers says how far it got ("1 of 2 approvals: ana").
  const progress = approvalProgress(r);
  if (progress !== null && r.status === 'pending') text += `  ${progress}`;
  if (!hashMatches(r)) text += '  (ALTERED: the stored action does not match its hash)';
  return text;
}

export const approvals: Command = {
  name: 'approvals',
  summary: 'list approval requests (pending by default) with their actions and the command that answers each',
  positionals: [],
  options: {
    status: { type: 'string', value: 'STATUS', help: `only requests in STATUS: ${STATUSES.join('|')}|all (default: pending)` },
    limit: { type: 'string', value: 'N', help: `at most N requests (1–${MAX_LIMIT}; default ${DEFAULT_LIMIT}); the output says how to see the next page` },
    after: { type: 'string', value: 'REQUEST_ID', help: 'start after this request (the last one of the previous page)' },
    all: { type: 'boolean', help: 'every request, page after page (overrides --limit)' },
    json: { type: 'boolean', help: `one ${APPROVALS_SCHEMA} document: the requests with their whole actions, and next_after` },
    'store-url': STORE_URL,
  },
  details:
    'Oldest first. A pending request past its expiry is shown as expired (it can no longer be granted); the listing changes nothing. ' +
    'List lines show every argument key and cut long values, each saying how many characters were cut; approve and deny show every argument, exactly as hashed, before answering.',
  async run({ io, values, out, err, json }) {
    const statusFlag = (values['status'] as string | undefined) ?? 'pending';
    if (statusFlag !== 'all' && !(STATUSES as readonly string[]).includes(statusFlag))
      throw new UsageError(`--status must be one of ${STATUSES.join('|')}|all, got ${JSON.stringify(statusFlag)}`);
    const status = statusFlag === 'all' ? undefined : (statusFlag as ApprovalStatus);
    const all = values['all'] === true;
    const limit = all ? MAX_LIMIT : parseLimit(values['limit'] as string | undefined);
    const store = await openListing(storeTarget(io, values['store-url'] as string | undefined), err);
    try {
      let after: { createdAt: string; requestId: string } | null = null;
      const afterId = values['after'] as string | undefined;
      if (afterId !== undefined) {
        const from = await store.getApproval(afterId);
        if (from === null) throw new CliRefusal(`no approval request ${afterId} (--after names the last request of the previous page)`);
        after = { createdAt: from.request.createdAt, requestId: from.request.requestId };
      }
      const found: ApprovalRecord[] = [];
      let more: boolean;
      do {
        const p = await page(store, status, after, limit);
        found.push(...p.records);
        more = p.more;
        const last = p.records.at(-1);
        if (last !== undefined) after = { createdAt: last.request.createdAt, requestId: last.request.requestId };
      } while (all && more);
      const nextAfter = more ? (found.at(-1)?.request.requestId ?? null) : null;
      if (values['json'] === true) {
        const docs = [];
        for (const r of found) docs.push(requestJson({ record: r, rule: await ruleOf(store, r) }));
        // orderedJson: an agent's arguments may hold integers beyond 2^53 (bigint), which JSON.stringify throws on.
        json(orderedJson({ schema: APPROVALS_SCHEMA, status: statusFlag, approvals: docs, next_after: nextAfter }));
        return 0;
      }
      if (found.length === 0) {
        out(status === undefined ? 'no approval requests' : `no ${status} approval requests${afterId !== undefined ? ` after ${afterId}` : ''}`);
        return 0;
      }
      for (const r of found) out(line(r));
      const answerable = found.find((r) => r.status === 'pending' && !lapsed(r) && hashMatches(r));
      if (answerable !== undefined) out(answerHint(found.length === 1 ? answerable.request.requestId : 'REQUEST_ID'));
      if (nextAfter !== null)
        out(
          `more: ctrlrun approvals --after ${nextAfter}${statusFlag !== 'pending' ? ` --status ${statusFlag}` : ''}${values['limit'] !== undefined ? ` --limit ${limit}` : ''}   (or --all)`,
        );
      return 0;
    } finally {
      await store.close();
    }
  },
};
