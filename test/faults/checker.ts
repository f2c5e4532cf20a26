/**
 * The history checker. It reads what the clients saw (invocations, executor starts, completions,
 * operator answers), what the upstream really ran (its own ledger) and what the store holds
 * (events, receipts, effects, approvals, the chain), and holds them to the promise: at most once,
 * exactly as approved, and when the outcome is unknown, say so.
 *
 * It keeps a model of the effect ledger per key (what may still run, what is final) and reports
 * every anomaly it finds, each named by kind with the operation, key or approval it concerns; an
 * empty list is a history consistent with the spec. Indeterminate operations (a client killed,
 * a transport error) are held only to what the store and the upstream recorded.
 */
import { verifyChain, type ApprovalRecord, type ChainHead, type EffectRecord, type EventRecord, type ReceiptRow, type StateStore } from '@ctrlrun/kernel';
import type { Answer, Complete, HistoryEntry, Invoke, Outcome, Start, UpstreamRow } from './history.js';

/** What the store holds after the run (read through the public `StateStore` API). */
export interface StoreSnapshot {
  readonly events: readonly EventRecord[];
  readonly receipts: readonly ReceiptRow[];
  readonly head: ChainHead | null;
  readonly effects: readonly EffectRecord[];
  readonly approvals: readonly ApprovalRecord[];
}

/** Reads everything the checker needs through the public store API. */
export async function snapshot(store: StateStore): Promise<StoreSnapshot> {
  return {
    events: await store.events(),
    receipts: await store.receipts(),
    head: await store.chainHead(),
    effects: await store.listEffects(),
    approvals: await store.listApprovals(),
  };
}

export type AnomalyKind =
  /** The upstream ran one effect key more than once. */
  | 'ran-twice'
  /** The upstream ran an approval-band action with no granted approval consumed for it, or a denied one. */
  | 'ran-without-approval'
  /** An approval was consumed by more than one action. */
  | 'approval-used-twice'
  /** An outcome was recorded AMBIGUOUS with no execution started behind it. */
  | 'ambiguous-without-start'
  /** An attempt was recorded FAILED (or resolved failed) though the upstream ran it. */
  | 'failed-but-ran'
  /** A client saw committed, yet the upstream never ran it; or the upstream ran an action its client saw refused. */
  | 'outcome-contradicts-upstream'
  /** A completed operation, or a committed effect, has no receipt saying so. */
  | 'receipt-lost'
  /** The receipt chain does not verify. */
  | 'chain-broken'
  /** A refused operation did not write what the spec says (its event, its receipt, nothing reserved). */
  | 'refusal-record';

export interface Anomaly {
  readonly kind: AnomalyKind;
  /** What it concerns, in plain words (ids and keys are the harness's own, never agent text). */
  readonly detail: string;
}

/** What each client-seen outcome's receipt says (`null`: no receipt is written for it). */
const RECEIPT_FOR: Record<Outcome, readonly string[] | null> = {
  committed: ['committed'],
  failed: ['failed'],
  ambiguous: ['ambiguous'],
  duplicate: ['blocked'],
  'ambiguous-key': ['blocked'],
  denied: ['denied'],
  'approval-refused': ['blocked'],
  'approval-required': null,
  error: null,
};

/** The event every refusal writes for its action (spec 01 §9–§10). */
const REFUSAL_EVENT: Partial<Record<Outcome, string>> = {
  duplicate: 'EFFECT_RESERVATION_REFUSED',
  'ambiguous-key': 'EFFECT_RESERVATION_REFUSED',
  denied: 'ACTION_DENIED',
  'approval-refused': 'APPROVAL_INVALIDATED',
};

function group<T, K>(items: Iterable<T>, key: (t: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

/** The per-key model: what the ledger may still do with a key, from the store's own events in order. */
type KeyState = 'free' | 'held' | 'committed' | 'ambiguous';

/** Checks one history against the upstream's ledger and the store; returns every anomaly found. */
export function checkHistory(history: readonly HistoryEntry[], upstream: readonly UpstreamRow[], store: StoreSnapshot): Anomaly[] {
  const anomalies: Anomaly[] = [];
  const add = (kind: AnomalyKind, detail: string) => anomalies.push({ kind, detail });

  const invokes = new Map<string, Invoke>();
  const starts = new Map<string, Start>();
  const completes = new Map<string, Complete>();
  for (const e of history) {
    if (e.t === 'invoke') invokes.set(e.op, e);
    else if (e.t === 'start') starts.set(e.op, e);
    else if (e.t === 'complete') completes.set(e.op, e);
  }
  const answers = history.filter((e): e is Answer => e.t === 'answer');
  const opByAction = new Map<string, Invoke>([...invokes.values()].map((i) => [i.actionId, i]));
  const eventsByAction = group(
    store.events.filter((e) => e.actionId !== null),
    (e) => e.actionId!,
  );
  const receiptsByAction = group(
    store.receipts.filter((r) => r.action_id !== null),
    (r) => r.action_id!,
  );
  const upstreamByAction = group(upstream, (u) => u.actionId);

  // 1. No effect key ran twice: the upstream's own ledger, and the model of the key's ledger
  //    replayed from the store's events (a second start while the key is held, committed or
  //    ambiguous is a second run, even if the upstream was spared it).
  for (const [key, rows] of group(upstream, (u) => u.effectKey)) {
    if (rows.length > 1) add('ran-twice', `${key} ran ${rows.length} times upstream (ops ${rows.map((r) => r.op).join(', ')})`);
  }
  const model = new Map<string, KeyState>();
  for (const e of store.events) {
    if (e.effectKey === null) continue;
    const state = model.get(e.effectKey) ?? 'free';
    switch (e.type) {
      case 'EXECUTION_STARTED':
        if (state !== 'free' && state !== 'held') add('ran-twice', `${e.effectKey} started again (event ${e.eventId}) while ${state}`);
        model.set(e.effectKey, 'held');
        break;
      case 'EXECUTION_COMMITTED':
        model.set(e.effectKey, 'committed');
        break;
      case 'EXECUTION_FAILED':
        model.set(e.effectKey, 'free');
        break;
      case 'EXECUTION_AMBIGUOUS':
        if (state === 'committed') add('ran-twice', `${e.effectKey} committed, then recorded ambiguous (event ${e.eventId})`);
        else model.set(e.effectKey, 'ambiguous');
        break;
      case 'EFFECT_RESOLVED': {
        const to = (e.data as { state?: unknown }).state;
        model.set(e.effectKey, to === 'committed' ? 'committed' : 'free');
        break;
      }
    }
  }

  // 2. Nothing ran without the approval its decision needed; 3. every approval used at most once.
  // A grant is the approval record's answer (its approver and granted_at); its APPROVAL_GRANTED
  // event is appended after it, in a write of its own (spec 01 §5: "the granting surface appends"),
  // so a connection lost between the two leaves the grant with no event (see answersWithoutEvent).
  const granted = new Set<string | null>(store.events.filter((e) => e.type === 'APPROVAL_GRANTED').map((e) => e.approvalId));
  for (const a of store.approvals) if (a.approver !== null && a.grantedAt !== null) granted.add(a.request.requestId);
  const consumed = store.events.filter((e) => e.type === 'APPROVAL_CONSUMED');
  for (const [approval, uses] of group(consumed, (e) => e.approvalId)) {
    if (uses.length > 1) add('approval-used-twice', `approval ${approval} consumed ${uses.length} times (actions ${uses.map((u) => u.actionId).join(', ')})`);
  }
  const answered = group(
    answers.filter((a) => a.answer !== 'refused'),
    (a) => a.requestId,
  );
  for (const [request, list] of answered) {
    const kinds = new Set(list.map((a) => a.answer));
    if (kinds.size > 1) add('approval-used-twice', `request ${request} was both granted and denied`);
  }
  const consumedByAction = group(consumed, (e) => e.actionId);
  for (const row of upstream) {
    const op = opByAction.get(row.actionId);
    if (!op || op.kind === 'allow') continue;
    if (op.kind === 'deny') {
      add('ran-without-approval', `${row.effectKey} ran for ${op.op}, an action the policy denies`);
      continue;
    }
    const uses = consumedByAction.get(row.actionId) ?? [];
    if (uses.length === 0) add('ran-without-approval', `${row.effectKey} ran for ${op.op} with no approval consumed`);
    for (const use of uses) {
      if (!granted.has(use.approvalId)) add('ran-without-approval', `${row.effectKey} ran for ${op.op} on approval ${use.approvalId}, never granted`);
    }
  }
  const approvalsById = new Map(store.approvals.map((a) => [a.request.requestId, a]));
  for (const [action, rows] of upstreamByAction) {
    const op = opByAction.get(action);
    if (op?.kind !== 'approve') continue;
    for (const use of consumedByAction.get(action) ?? []) {
      const record = use.approvalId === null ? undefined : approvalsById.get(use.approvalId);
      if (record && record.request.actionHash !== op.actionHash) {
        add('ran-without-approval', `${rows[0]!.effectKey} ran for ${op.op} on approval ${use.approvalId}, bound to another action`);
      }
    }
  }

  // 4. Every AMBIGUOUS has an execution start behind it; no FAILED has a completed run behind it.
  for (const e of store.events) {
    if (e.type === 'EXECUTION_AMBIGUOUS' && e.actionId !== null) {
      const started = (eventsByAction.get(e.actionId) ?? []).some((x) => x.type === 'EXECUTION_STARTED' && x.eventId < e.eventId);
      if (!started)
        add('ambiguous-without-start', `action ${e.actionId} on ${e.effectKey} recorded ambiguous (event ${e.eventId}) with no EXECUTION_STARTED before it`);
    }
    if (e.type === 'EXECUTION_FAILED' && e.actionId !== null && upstreamByAction.has(e.actionId)) {
      add('failed-but-ran', `action ${e.actionId} on ${e.effectKey} recorded failed (event ${e.eventId}) though the upstream ran it`);
    }
  }
  for (const effect of store.effects) {
    if (effect.state === 'ambiguous') {
      const started = (eventsByAction.get(effect.actionId) ?? []).some((x) => x.type === 'EXECUTION_STARTED' && x.effectKey === effect.effectKey);
      if (!started) add('ambiguous-without-start', `${effect.effectKey} is ambiguous, and its action ${effect.actionId} never started`);
    }
    if (effect.state === 'failed' && effect.resolvedBy !== null && upstream.some((u) => u.effectKey === effect.effectKey)) {
      add('failed-but-ran', `${effect.effectKey} was resolved failed by ${effect.resolvedBy} though the upstream ran it`);
    }
  }
  for (const [op, done] of completes) {
    const inv = invokes.get(op);
    if (!inv) continue;
    const ran = upstreamByAction.has(inv.actionId);
    if (done.outcome === 'ambiguous' && !starts.has(op)) add('ambiguous-without-start', `${op} saw ambiguous, and its executor never started`);
    if (done.outcome === 'failed' && ran) add('failed-but-ran', `${op} saw failed though the upstream ran it`);
    if (done.outcome === 'committed' && !ran) add('outcome-contradicts-upstream', `${op} saw committed, and the upstream never ran it`);
    if (ran && !(['committed', 'failed', 'ambiguous', 'error'] as Outcome[]).includes(done.outcome)) {
      add('outcome-contradicts-upstream', `${op} saw ${done.outcome}, and the upstream ran it`);
    }
  }

  // 5. No receipt lost: each completed operation has the receipt its outcome writes, and every
  //    committed effect has a committed receipt (the outcome and the receipt are one transaction).
  for (const [op, done] of completes) {
    const inv = invokes.get(op);
    const expected = RECEIPT_FOR[done.outcome];
    if (!inv || expected === null) continue;
    const results = (receiptsByAction.get(inv.actionId) ?? []).map((r) => r.result);
    if (!results.some((r) => r !== null && expected.includes(r))) {
      add('receipt-lost', `${op} saw ${done.outcome}; its receipts say ${results.length ? results.join(', ') : 'nothing'}`);
    }
  }
  for (const effect of store.effects) {
    if (effect.state !== 'committed' || effect.resolvedBy !== null) continue;
    const results = (receiptsByAction.get(effect.actionId) ?? []).map((r) => r.result);
    if (!results.includes('committed')) add('receipt-lost', `${effect.effectKey} is committed by ${effect.actionId}, with no committed receipt`);
  }

  // 6. The chain verifies.
  const report = verifyChain(store.receipts, store.head);
  if (!report.ok) add('chain-broken', `${report.breaks.length} break(s): ${report.breaks.map((b) => `${b.name}@${b.seq}`).join(', ')}`);

  // 7. Every refused operation wrote what the spec says: its event, its receipt (checked above),
  //    and nothing reserved or started for its action; a request for `approval-required`.
  const requested = new Set(store.events.filter((e) => e.type === 'APPROVAL_REQUESTED').map((e) => e.approvalId));
  for (const [op, done] of completes) {
    const inv = invokes.get(op);
    if (!inv) continue;
    const types = (eventsByAction.get(inv.actionId) ?? []).map((e) => e.type);
    const event = REFUSAL_EVENT[done.outcome];
    if (event !== undefined || done.outcome === 'approval-required') {
      if (event !== undefined && !types.includes(event as EventRecord['type']))
        add('refusal-record', `${op} saw ${done.outcome}, and no ${event} was written for it`);
      if (types.includes('EXECUTION_STARTED')) add('refusal-record', `${op} saw ${done.outcome}, yet an execution started for it`);
      if (upstreamByAction.has(inv.actionId)) add('refusal-record', `${op} saw ${done.outcome}, yet the upstream ran it`);
    }
    if (done.outcome === 'approval-required') {
      if (done.requestId === null || !(requested.has(done.requestId) || approvalsById.has(done.requestId))) {
        add('refusal-record', `${op} saw approval-required naming ${done.requestId ?? 'no request'}, which the store does not hold`);
      }
      if ((receiptsByAction.get(inv.actionId) ?? []).length > 0) add('refusal-record', `${op} saw approval-required, yet a receipt was written for it`);
    }
  }
  return anomalies;
}

/**
 * Approvals answered (granted, denied, or granted and consumed since) whose APPROVAL_GRANTED /
 * APPROVAL_DENIED event was never written: the answer landed and the surface lost its store before
 * appending the event (spec 01 §5 writes them apart). Not an anomaly of the promise; counted in the figures.
 */
export function answersWithoutEvent(store: StoreSnapshot): number {
  const answered = new Set(store.events.filter((e) => e.type === 'APPROVAL_GRANTED' || e.type === 'APPROVAL_DENIED').map((e) => e.approvalId));
  return store.approvals.filter((a) => a.approver !== null && ['granted', 'consumed', 'denied'].includes(a.status) && !answered.has(a.request.requestId))
    .length;
}

/** Counts of a history's operations by outcome (`indeterminate`: no completion, the client was killed). */
export function tally(history: readonly HistoryEntry[]): Record<string, number> {
  const done = new Map<string, Outcome>();
  let invoked = 0;
  for (const e of history) {
    if (e.t === 'invoke') invoked++;
    else if (e.t === 'complete') done.set(e.op, e.outcome);
  }
  const out: Record<string, number> = { invoked, indeterminate: invoked - done.size };
  for (const o of done.values()) out[o] = (out[o] ?? 0) + 1;
  return out;
}
