/**
 * `ctrlrun.stats/v1` (docs/spec/02-authority-observe-verify.md §4.4): what a rollout in observe mode recorded — how many actions
 * would have been denied, needed a human, or been blocked, and why — counted from the receipts
 * alone (one receipt = one action; an action awaiting a human has none and is not counted).
 * Beside the spec's fields, every document also carries what was really enforced (`enforced_*`,
 * whatever mode the policy is in now) and the approval requests filed in the window
 * (`approvals_requested`, `approvals_pending`): the only trace an action awaiting a human leaves.
 * Local store only; nothing here touches the network.
 *
 * @module
 */
import { compareCodePoints, isPlainObject, parseJson, type JsonObject } from './canonical.js';
import { InvalidArgument } from './errors.js';
import type { StateStore } from './store/state-store.js';
import { evidenceTime, systemClock, type Clock } from './time.js';

/** The schema tag of the stats document. */
export const STATS_SCHEMA = 'ctrlrun.stats/v1';

/** `blocked_reason`s that count as "would have been blocked" (a state, not a decision). */
const BLOCKED_BY_STATE: ReadonlySet<string> = new Set(['approval_mismatch', 'duplicate', 'in_progress', 'ambiguous']);

/** Options of {@link stats}. */
export interface StatsOptions {
  /**
   * Count only receipts finished at or after this (inclusive): a `Date`, an ISO-8601 instant
   * with an offset, or `<n>m`/`<n>h`/`<n>d` back from now (see {@link parseSince}).
   */
  since?: Date | string | null;
  /**
   * Which document to build. Default: the store's mode — the mode the newest counted receipt was
   * written in (`result: "observed"` → `observe`, anything else → `enforce`); `observe` when
   * nothing is counted. The CLI passes the policy's mode (docs/spec/04-surfaces.md §2).
   */
  mode?: 'observe' | 'enforce';
  /** "Now", for a relative `since`. */
  clock?: Clock;
}

/** The `ctrlrun.stats/v1` document. Tallies are ordered by count (desc), then reason (code point). */
export interface StatsDocument {
  schema: typeof STATS_SCHEMA;
  mode: 'observe' | 'enforce';
  since: string | null;
  from: string | null;
  to: string | null;
  actions: number;
  would_have_been_denied?: number;
  denied?: number;
  denied_by_reason: Record<string, number>;
  would_have_needed_approval?: number;
  would_have_been_blocked?: number;
  blocked_by_reason?: Record<string, number>;
  ambiguous_outcomes: number;
  /**
   * Added to `ctrlrun.stats/v1` (both modes, same meaning in each): receipts whose action was
   * really refused (`result: "denied"`) — enforce-mode refusals, and in observe mode the ones it
   * still refuses (`no_principal`, …). In an enforce document it equals `denied`.
   */
  enforced_denied: number;
  /** The {@link enforced_denied} receipts by `decision_reason`. */
  enforced_denied_by_reason: Record<string, number>;
  /**
   * Receipts of actions really stopped by a state (`result: "blocked"`): a mismatched, consumed or
   * expired approval, a duplicate, an effect in progress or ambiguous. Enforce receipts do not
   * record which, so there is no breakdown.
   */
  enforced_blocked: number;
  /**
   * Approval requests filed in the window (by when they were made), whatever became of them: in
   * enforce mode, every action that needed a human. None is filed in observe mode.
   */
  approvals_requested: number;
  /** Of {@link approvals_requested}, those still pending and unexpired: actions awaiting a human. */
  approvals_pending: number;
}

const RELATIVE = /^([0-9]+)([mhd])$/;
const ABSOLUTE = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|z|[+-]\d{2}:\d{2})$/;
const UNIT_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses a `--since` window into its inclusive lower bound: an ISO-8601 instant **with an
 * offset**, or `<n>m`, `<n>h`, `<n>d` (a positive ASCII integer) back from `now`. No months, no
 * weeks, no bare numbers: guessing one would silently report the wrong window.
 */
export function parseSince(text: string, now: Date = new Date()): Date {
  const refuse = (): never => {
    throw new InvalidArgument(
      `--since ${JSON.stringify(text)} is not a window stats accepts: give an ISO-8601 timestamp with an offset (2026-09-01T00:00:00Z), or one of <n>m, <n>h, <n>d (30m, 24h, 7d); no months, no weeks, no bare numbers`,
    );
  };
  if (typeof text !== 'string') return refuse();
  const t = text.trim();
  const rel = RELATIVE.exec(t);
  if (rel) {
    const n = Number(rel[1]);
    if (!Number.isSafeInteger(n) || n <= 0) return refuse();
    return new Date(now.getTime() - n * UNIT_MS[rel[2]!]!);
  }
  if (!ABSOLUTE.test(t)) return refuse();
  const ms = Date.parse(t.replace(' ', 'T').replace(/z$/, 'Z'));
  if (Number.isNaN(ms)) return refuse();
  return new Date(ms);
}

function tally(reasons: readonly string[]): Record<string, number> {
  const counts = new Map<string, number>();
  for (const r of reasons) counts.set(r, (counts.get(r) ?? 0) + 1);
  // Entries, not `out[r] = n`: a reason named `__proto__` stays a key.
  return Object.fromEntries([...counts].sort((a, b) => b[1] - a[1] || compareCodePoints(a[0], b[0])));
}

interface Counted {
  finishedAt: Date;
  result: string;
  execution: string | null;
  decisionReason: string;
  wouldHave: { decision: string; reason: string; blocked_reason: string | null } | null;
}

function read(json: string | null): Counted | null {
  if (json === null) return null;
  let doc: unknown;
  try {
    doc = parseJson(json, { what: 'receipt', floats: 'allow' });
  } catch {
    return null;
  }
  if (!isPlainObject(doc)) return null;
  const d = doc as JsonObject;
  const finished = typeof d['finished_at'] === 'string' ? Date.parse(d['finished_at']) : Number.NaN;
  if (Number.isNaN(finished) || typeof d['result'] !== 'string') return null;
  const w = d['would_have'];
  const wouldHave =
    isPlainObject(w) && typeof w['decision'] === 'string' && typeof w['reason'] === 'string'
      ? { decision: w['decision'], reason: w['reason'], blocked_reason: typeof w['blocked_reason'] === 'string' ? w['blocked_reason'] : null }
      : null;
  return {
    finishedAt: new Date(finished),
    result: d['result'],
    execution: typeof d['execution'] === 'string' ? d['execution'] : null,
    decisionReason: typeof d['decision_reason'] === 'string' ? d['decision_reason'] : '',
    wouldHave,
  };
}

/**
 * Counts what the store's receipts recorded, as `ctrlrun.stats/v1`. In observe mode every number
 * comes off `would_have` (a receipt without one was genuinely refused and counts only as an
 * action): `would_have_been_denied`, `denied_by_reason` (`blocked_reason`, else the reason),
 * `would_have_needed_approval`, `would_have_been_blocked` and `blocked_by_reason`, and
 * `ambiguous_outcomes` (what the executor did). In enforce mode: `denied`, `denied_by_reason`
 * (the receipt's reason) and `ambiguous_outcomes`; enforce receipts carry no blocked breakdown.
 * Either way the `enforced_*` and `approvals_*` fields follow (see {@link StatsDocument}), so a
 * refusal is never hidden by the mode the document is built in. Unreadable receipt rows are skipped.
 */
export async function stats(store: StateStore, options: StatsOptions = {}): Promise<StatsDocument> {
  if (options.mode !== undefined && options.mode !== 'observe' && options.mode !== 'enforce') {
    throw new InvalidArgument(`mode must be 'observe' or 'enforce', got ${JSON.stringify(options.mode)}`);
  }
  const clock = options.clock ?? systemClock;
  let since: Date | null = null;
  if (options.since instanceof Date) {
    if (Number.isNaN(options.since.getTime())) throw new InvalidArgument('since is an invalid Date');
    since = options.since;
  } else if (options.since !== undefined && options.since !== null) {
    since = parseSince(options.since, clock());
  }
  const counted: Counted[] = [];
  for (const row of await store.receipts()) {
    const r = read(row.json);
    if (r === null) continue;
    if (since !== null && r.finishedAt.getTime() < since.getTime()) continue;
    counted.push(r);
  }
  const finished = counted.map((r) => r.finishedAt.getTime());
  const newest = counted.reduce<Counted | null>((n, r) => (n === null || r.finishedAt.getTime() >= n.finishedAt.getTime() ? r : n), null);
  const mode = options.mode ?? (newest !== null && newest.result !== 'observed' ? 'enforce' : 'observe');
  const enforcedDenied = counted.filter((r) => r.result === 'denied');
  const now = clock().getTime();
  const requests = (await store.listApprovals()).filter((a) => since === null || Date.parse(a.request.createdAt) >= since.getTime());
  const tail = {
    enforced_denied: enforcedDenied.length,
    enforced_denied_by_reason: tally(enforcedDenied.map((r) => r.decisionReason)),
    enforced_blocked: counted.filter((r) => r.result === 'blocked').length,
    approvals_requested: requests.length,
    approvals_pending: requests.filter((a) => a.status === 'pending' && !(Date.parse(a.request.expiresAt) <= now)).length,
  };
  const head = {
    schema: STATS_SCHEMA,
    mode,
    since: since === null ? null : evidenceTime(since),
    from: finished.length ? evidenceTime(new Date(Math.min(...finished))) : null,
    to: finished.length ? evidenceTime(new Date(Math.max(...finished))) : null,
    actions: counted.length,
  } as const;
  if (mode === 'enforce') {
    const refused = counted.filter((r) => r.result === 'denied');
    return {
      ...head,
      denied: refused.length,
      denied_by_reason: tally(refused.map((r) => r.decisionReason)),
      ambiguous_outcomes: counted.filter((r) => r.result === 'ambiguous').length,
      ...tail,
    };
  }
  const observed = counted.flatMap((r) => (r.wouldHave === null ? [] : [r.wouldHave]));
  const denied = observed.filter((w) => w.decision === 'deny');
  const blocked = observed.filter((w) => w.blocked_reason !== null && BLOCKED_BY_STATE.has(w.blocked_reason));
  return {
    ...head,
    would_have_been_denied: denied.length,
    denied_by_reason: tally(denied.map((w) => w.blocked_reason ?? w.reason)),
    would_have_needed_approval: observed.filter((w) => w.blocked_reason === 'approval_required').length,
    would_have_been_blocked: blocked.length,
    blocked_by_reason: tally(blocked.map((w) => w.blocked_reason!)),
    ambiguous_outcomes: counted.filter((r) => r.execution === 'ambiguous').length,
    ...tail,
  };
}
