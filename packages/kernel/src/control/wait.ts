/**
 * Waiting for a human's answer on behalf of a caller who may leave. A wait whose caller is gone
 * (a cancelled MCP request, a closed connection, an aborted `AbortSignal`) stops, records
 * `ACTION_DENIED {reason: wait_abandoned}` for this call's action, and never runs it by itself:
 * the request stays open, and a
 * later call that presents it runs the action once if it is granted.
 *
 * @module
 */
import type { Action } from '../action.js';
import { LocalApprovalProvider, untilAborted, type ApprovalProvider } from '../approval-providers.js';
import { ApprovalRequired } from '../errors.js';
import type { Approval } from '../model.js';
import { eventRaw } from './evidence.js';
import type { ControlContext } from './pass.js';

/** The `ACTION_DENIED` reason of a call whose caller gave up while it waited for a human. */
export const WAIT_ABANDONED = 'wait_abandoned';

/** Options of {@link Control.waitForAnswer}. */
export interface WaitForAnswerOptions {
  /** Where the answer comes from; a {@link LocalApprovalProvider} over the Control's store by default. */
  provider?: ApprovalProvider;
  /** Give up after this many ms (`ApprovalTimeout`); by default, when the request expires. */
  timeoutMs?: number;
  /** The caller's signal: when it aborts, the wait is abandoned. */
  signal?: AbortSignal;
}

export async function waitForAnswer(ctx: ControlContext, action: Action, requestId: string, options: WaitForAnswerOptions = {}): Promise<Approval | null> {
  const provider = options.provider ?? new LocalApprovalProvider(ctx.store, { clock: ctx.clock });
  const { signal } = options;
  let answer: Approval | null;
  try {
    answer = await untilAborted(provider.wait(requestId, options.timeoutMs, signal === undefined ? {} : { signal }), signal);
  } catch (err) {
    if (signal?.aborted !== true) throw err;
    throw await abandoned(ctx, action, requestId);
  }
  // An answer that arrives with the caller already gone is not acted on either.
  if (signal?.aborted === true) throw await abandoned(ctx, action, requestId);
  return answer;
}

async function abandoned(ctx: ControlContext, action: Action, requestId: string): Promise<ApprovalRequired> {
  // The caller's reason (an MCP client's free text) is not recorded: it is the agent's to write.
  // One of the event types the original reads (it refuses an unknown type on a shared store):
  // this call's action is over, denied for want of a caller; the request and a later call are not.
  await eventRaw(ctx, 'ACTION_DENIED', action.actionId, null, requestId, { reason: WAIT_ABANDONED, action_hash: action.actionHash });
  return new ApprovalRequired(requestId, {
    actionId: action.actionId,
    message: `${action.name}: stopped waiting for approval request ${requestId}: the caller gave up; nothing ran, and the request stays open (a later call that presents it runs the action once, if a human grants it)`,
  });
}
