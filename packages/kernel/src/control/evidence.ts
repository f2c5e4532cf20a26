/**
 * Evidence: events (pending ones ride with the pass's next write), sinks and receipts.
 *
 * @module
 */
import type { JsonObject } from '../canonical.js';
import { dispatchToSinks } from '../events.js';
import type { EventDraft, EventRecord, EventType, StoredReceipt } from '../model.js';
import { buildReceipt, type ReceiptFields } from '../receipt.js';
import type { TrailingEvents } from '../store/state-store.js';
import type { ReceiptDraft } from '../model.js';
import { evidenceTime } from '../time.js';
import { shownId } from '../visible.js';
import { type ControlContext, type Pass, describeError, isExecution } from './pass.js';
import type { ApprovalEdit } from './edit.js';

// ---- evidence ----
/** Drafts an event of this pass, to be stored with the pass's next write (see {@link Pass.pending}). */
export function note(ctx: ControlContext, pass: Pass, type: EventType, data: JsonObject): void {
  pass.pending.push(draftEvent(ctx, pass, type, data));
}

/** Stores this pass's pending events and one more, in one transaction; resolves to the last. */
export async function recordEvent(ctx: ControlContext, pass: Pass, type: EventType, data: JsonObject): Promise<EventRecord> {
  note(ctx, pass, type, data);
  const stored = await flush(ctx, pass);
  return stored[stored.length - 1]!;
}

/** A draft of this pass's event, stamped now. */
export function draftEvent(ctx: ControlContext, pass: Pass, type: EventType, data: JsonObject): EventDraft {
  return { ts: evidenceTime(ctx.clock()), type, actionId: pass.action.actionId, effectKey: pass.effectKey, approvalId: pass.approvalId, data };
}

/** The pass's pending events, stamped now (they are written now), in order. */
export function takePending(ctx: ControlContext, pass: Pass): EventDraft[] {
  if (pass.pending.length === 0) return [];
  const ts = evidenceTime(ctx.clock());
  return pass.pending.map((d) => ({ ...d, ts }));
}

/** Stores the pass's pending events, if any, on their own. */
export async function flush(ctx: ControlContext, pass: Pass): Promise<EventRecord[]> {
  if (pass.pending.length === 0) return [];
  const stored = await appendAll(ctx, takePending(ctx, pass));
  pass.pending = [];
  return stored;
}

/**
 * Stores `drafts` in order — in one transaction where the store has `appendEvents`, else one
 * by one — and hands each to the sinks once stored, in order.
 */
export async function appendAll(ctx: ControlContext, drafts: EventDraft[]): Promise<EventRecord[]> {
  if (ctx.store.appendEvents === undefined) {
    const stored: EventRecord[] = [];
    for (const draft of drafts) {
      const event = await ctx.store.appendEvent(draft);
      await toSinks(ctx, event);
      stored.push(event);
    }
    return stored;
  }
  const stored = await ctx.store.appendEvents(drafts);
  if (ctx.sinks.length !== 0) for (const event of stored) await toSinks(ctx, event);
  return stored;
}

/** Hands a stored event to the sinks; nothing at all when none is registered. */
export async function toSinks(ctx: ControlContext, event: EventRecord): Promise<void> {
  if (ctx.sinks.length !== 0) await dispatchToSinks(ctx.sinks, 'event', event, ctx.logger);
}

/**
 * The events a write stores in its own transaction: the pass's pending events first, then
 * those `make` drafts from the write's result (after the write succeeded, with this pass's ids
 * as they stand then), and optionally a receipt chained in the same transaction.
 */
export function trailing<R>(ctx: ControlContext, pass: Pass, make: (result: R) => [EventType, JsonObject][], receipt?: ReceiptDraft): TrailingEvents<R> {
  const drafts = (result: R): EventDraft[] => [...takePending(ctx, pass), ...make(result).map(([type, data]) => draftEvent(ctx, pass, type, data))];
  return receipt === undefined ? { drafts } : { drafts, receipt };
}

/**
 * After a state change succeeded: its events (the pending ones included) go to the sinks in
 * order. A store that did not write them with the change (a `StateStore` that ignores the
 * parameter) gets them appended now, one by one, each dispatched once stored.
 */
export async function afterWrite<R>(ctx: ControlContext, pass: Pass, result: R, events: TrailingEvents<R>): Promise<void> {
  const stored = events.stored;
  if (stored === undefined) {
    for (const draft of events.drafts(result)) await toSinks(ctx, await ctx.store.appendEvent(draft));
  } else if (ctx.sinks.length !== 0) {
    for (const event of stored) await toSinks(ctx, event);
  }
  // Whichever way they were stored, the pending events are on record now.
  pass.pending = [];
}

export async function eventRaw(
  ctx: ControlContext,
  type: EventType,
  actionId: string | null,
  effectKey: string | null,
  approvalId: string | null,
  data: JsonObject,
): Promise<EventRecord> {
  const stored = await ctx.store.appendEvent({ ts: evidenceTime(ctx.clock()), type, actionId, effectKey, approvalId, data });
  await toSinks(ctx, stored);
  return stored;
}

/** The receipt of this pass's terminal outcome, built now (`finished_at`), not yet chained. */
export function receiptDraft(
  ctx: ControlContext,
  pass: Pass,
  r: { result: ReceiptFields['result']; error: string | null; decision?: string; reason?: string },
): ReceiptDraft {
  const ev = pass.evaluation;
  // Observe mode: every terminal outcome of an action that ran is `observed`, with what the
  // executor did and what enforce mode would have done. Still-refused paths stay `denied`.
  const observed = pass.observation !== null && isExecution(r.result);
  return buildReceipt(pass.action, {
    receiptId: ctx.ids('ctr'),
    decision: r.decision ?? ev?.decision ?? 'deny',
    decisionReason: r.reason ?? ev?.reason ?? 'unknown',
    approvalId: pass.approvalId,
    approver: pass.approver,
    effectKey: pass.effectKey,
    attempt: pass.attempt,
    result: observed ? 'observed' : r.result,
    execution: observed ? (r.result as 'committed' | 'failed' | 'ambiguous') : null,
    wouldHave: observed ? { decision: pass.observation!.decision, reason: pass.observation!.reason, blocked_reason: pass.observation!.blocked } : null,
    error: r.error,
    startedAt: pass.startedAt,
    finishedAt: evidenceTime(ctx.clock()),
    policyHash: pass.policyHash,
    policyVersion: pass.policyVersion,
    controls: ev?.controls ?? [],
    arguments: pass.args,
    edit: pass.edit ? receiptEdit(pass.edit) : null,
    authorityGrantId: pass.authorityGrantId ?? null,
    task: pass.task ?? null,
    approvers: pass.approvers ?? [],
    preconditionAtRequest: pass.preconditionAtRequest ?? null,
    preconditionAtRecheck: pass.preconditionAtRecheck ?? null,
    // Only what the store accepted (or observe mode's counterfactual); a refusal charged nothing.
    budgetCharges: r.result === 'denied' || r.result === 'blocked' ? [] : (pass.budgetCharges ?? []),
  });
}

/** Chains the receipt with the pass's pending events (one transaction), then hands both to the sinks. */
export async function recordReceipt(
  ctx: ControlContext,
  pass: Pass,
  r: { result: ReceiptFields['result']; error: string | null; decision?: string; reason?: string },
): Promise<StoredReceipt> {
  return chainReceipt(ctx, pass, receiptDraft(ctx, pass, r));
}

export async function chainReceipt(ctx: ControlContext, pass: Pass, draft: ReceiptDraft): Promise<StoredReceipt> {
  const leading = trailing<StoredReceipt>(ctx, pass, () => []);
  // A failed write leaves the pending events pending: the caller's catch stores them alone.
  const stored = await ctx.store.putReceipt(draft, leading);
  await afterWrite(ctx, pass, stored, leading);
  if (ctx.sinks.length !== 0) await dispatchToSinks(ctx.sinks, 'receipt', stored, ctx.logger);
  return stored;
}

/**
 * The receipt an outcome write carried: chained with it, or — when the store did not (it does
 * not take receipts, or the receipt part failed and the outcome was written without it) —
 * chained now on its own; a failure then raises, with the outcome kept (T170).
 */
export async function receiptOf<R>(ctx: ControlContext, pass: Pass, written: TrailingEvents<R>): Promise<StoredReceipt> {
  const stored = written.storedReceipt;
  if (stored === undefined) {
    try {
      return await chainReceipt(ctx, pass, written.receipt!);
    } catch (err) {
      // The outcome stands (T170): say where its receipt is, beside the store's own error.
      ctx.logger.warn(
        `[ctrlrun] ${pass.action.name}: the outcome of ${shownId(pass.effectKey ?? pass.action.actionId)} is stored, its receipt ${written.receipt!.receiptId} is not chained (${describeError(err)}); if it was kept pending, \`ctrlrun receipts --chain-pending\` (or store.chainPendingReceipts()) chains it`,
      );
      throw err;
    }
  }
  if (ctx.sinks.length !== 0) await dispatchToSinks(ctx.sinks, 'receipt', stored, ctx.logger);
  return stored;
}

/** The receipt's `edit` object for an action run under an edited grant. */
export function receiptEdit(edit: ApprovalEdit): JsonObject {
  return {
    proposed_request_id: edit.proposed,
    proposed_hash: edit.proposedHash,
    approved_hash: edit.approvedHash,
    editor: edit.editor,
    proposed_arguments: edit.proposedArguments,
    approved_arguments: edit.approvedArguments,
  };
}
