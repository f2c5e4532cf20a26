/**
 * The refusal of a call one of whose arguments no action can carry (spec 04 §5: a float anywhere
 * in an MCP `tools/call`, `-41008`). There is a principal, so the refusal belongs in the evidence,
 * recorded as the original records it (and as `effect_key_error` is): `ACTION_PROPOSED`, then
 * `ACTION_DENIED {reason: unrepresentable_argument, pointer}`, no `POLICY_EVALUATED`, no
 * reservation, a `denied` receipt in the chain. Refused in observe mode too, with the same evidence.
 *
 * The action recorded is the surface's stand-in for the call (the MCP gateway writes each such
 * number as a string holding its spelling), so its hash can be computed again from what was sent.
 *
 * @module
 */
import type { Action } from '../action.js';
import { ActionDenied } from '../errors.js';
import { evidenceTime } from '../time.js';
import { flushAfterThrow } from './attempt.js';
import { note, recordReceipt } from './evidence.js';
import { checkEnvironment } from './gates.js';
import { expiryOf, type ControlContext, type Pass } from './pass.js';
import type { StoredReceipt } from '../model.js';

/** The decision reason of the refusal (the original's). */
export const UNREPRESENTABLE_ARGUMENT = 'unrepresentable_argument';

/**
 * `Control.refuseUnrepresentable`: records the refusal of `action` (the surface's stand-in for a
 * call whose argument at JSON pointer `pointer` no action can carry) with `message` as the
 * receipt's `error`; resolves to the receipt and the {@link ActionDenied} to raise.
 */
export async function refuseUnrepresentable(
  ctx: ControlContext,
  action: Action,
  pointer: string,
  message: string,
): Promise<{ receipt: StoredReceipt; error: ActionDenied }> {
  checkEnvironment(ctx, action);
  expiryOf(action.principal, action.name);
  const pass: Pass = {
    action,
    args: action.canonicalArguments,
    startedAt: evidenceTime(ctx.clock()),
    effectKey: null,
    approvalId: null,
    approver: null,
    attempt: 1,
    evaluation: null,
    hookCalls: 0,
    // Still refused in observe mode, as enforce refuses it: a `denied` receipt, no `would_have`.
    observation: null,
    held: false,
    pending: [],
    policyHash: ctx.policyHash,
    policyVersion: ctx.policy.version,
  };
  note(ctx, pass, 'ACTION_PROPOSED', { action_hash: action.actionHash });
  note(ctx, pass, 'ACTION_DENIED', { reason: UNREPRESENTABLE_ARGUMENT, pointer });
  let receipt: StoredReceipt;
  try {
    receipt = await recordReceipt(ctx, pass, { decision: 'deny', reason: UNREPRESENTABLE_ARGUMENT, result: 'denied', error: message });
  } catch (err) {
    await flushAfterThrow(ctx, pass);
    throw err;
  }
  return { receipt, error: new ActionDenied(UNREPRESENTABLE_ARGUMENT, { actionId: action.actionId, message }) };
}
