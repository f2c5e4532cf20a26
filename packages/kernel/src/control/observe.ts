/**
 * Observe mode (`mode: observe`): everything is evaluated and recorded, nothing is enforced.
 *
 * @module
 */
import { checkConsumable } from '../approvals.js';
import { ActionDenied, AmbiguousEffect, ApprovalMismatch, DuplicateEffect } from '../errors.js';
import { evidenceTime, parseTime } from '../time.js';
import { approverOf } from './gates.js';
import { runExecutor } from './outcome.js';
import { recheckPresented } from './presented.js';
import { observeAfterPolicy, observeCeiling } from './entry-gates.js';
import { recordEvent, flush } from './evidence.js';
import { type ControlContext, type Pass, block, refusalData, blockedBy, started } from './pass.js';
import { BUDGET_EXHAUSTED } from '../budget.js';
import type { Executor, ExecuteOptions, ExecuteResult } from './types.js';

/**
 * Observe mode, once decided: nothing is enforced and the executor runs. A presented approval
 * is checked and never consumed; the reservation is attempted and, if refused, the executor
 * still runs but its outcome is never written to the record. Every stopper enforce mode would
 * have met is noted; the first one is the receipt's `would_have.blocked_reason`.
 */
export async function runObserved<T>(
  ctx: ControlContext,
  pass: Pass,
  executor: Executor<T>,
  options: ExecuteOptions,
  lease: number,
): Promise<ExecuteResult<T>> {
  await flush(ctx, pass);
  const { action } = pass;
  const evaluation = pass.evaluation!;
  const obs = pass.observation!;
  obs.decision = evaluation.decision;
  obs.reason = evaluation.reason;
  if (evaluation.decision === 'deny') block(pass, evaluation.reason);
  pass.approver = await approverOf(ctx, pass);
  await observeAfterPolicy(ctx, pass);
  if (evaluation.decision === 'approve') {
    if (pass.approvalId === null) block(pass, 'approval_required');
    else await checkPresented(ctx, pass);
  }
  if (pass.charges) {
    // The predicate as a read: what the reservation would have refused; the receipt carries the counterfactual charges.
    if ((await ctx.store.budgets?.().overspent(pass.charges)) != null) block(pass, BUDGET_EXHAUSTED);
    pass.budgetCharges = pass.charges;
  }
  if (pass.effectKey !== null) {
    try {
      const reservation = await ctx.store.reserveEffect(pass.effectKey, action.actionId, lease);
      pass.attempt = reservation.attempt;
      pass.held = true;
      observeCeiling(ctx, pass);
      await recordEvent(ctx, pass, 'EFFECT_RESERVED', { attempt: reservation.attempt, lease_expires_at: evidenceTime(parseTime(reservation.leaseExpiresAt)) });
    } catch (err) {
      if (!(err instanceof DuplicateEffect || err instanceof AmbiguousEffect)) throw err;
      await recordEvent(ctx, pass, 'EFFECT_RESERVATION_REFUSED', refusalData(err));
      block(pass, blockedBy(err));
    }
    if (pass.held) {
      try {
        await ctx.store.beginExecution(pass.effectKey, action.actionId);
      } catch (err) {
        if (!(err instanceof DuplicateEffect || err instanceof AmbiguousEffect)) throw err;
        pass.held = false;
        await recordEvent(ctx, pass, 'EFFECT_RESERVATION_REFUSED', refusalData(err));
        block(pass, blockedBy(err));
      }
    }
  }
  await recordEvent(ctx, pass, ...started(pass));
  return runExecutor(ctx, pass, executor, options);
}

/** Checks a presented approval as consumption would, and writes nothing to it. */
export async function checkPresented(ctx: ControlContext, pass: Pass): Promise<void> {
  const id = pass.approvalId as string;
  const record = await ctx.store.getApproval(id);
  try {
    // The verdict only: the precondition is compared by the recheck below, with its own reasons.
    const plan = checkConsumable(record, id, pass.action.actionHash, ctx.clock(), record?.request.preconditionFingerprint ?? null);
    if (plan.kind === 'expire') throw plan.error;
  } catch (err) {
    if (err instanceof ApprovalMismatch) {
      await recordEvent(ctx, pass, 'APPROVAL_INVALIDATED', { reason: err.reason, action_hash: pass.action.actionHash });
      block(pass, 'approval_mismatch');
      return;
    }
    if (err instanceof ActionDenied && err.reason === 'approval_denied') {
      await recordEvent(ctx, pass, 'APPROVAL_DENIED', { approver: record?.approver ?? null });
      block(pass, 'approval_denied');
      return;
    }
    throw err;
  }
  // The approver gate and the precondition recheck, noted with the same reasons; nothing consumed.
  await recheckPresented(ctx, pass);
}
