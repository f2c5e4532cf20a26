/**
 * A control-path refusal as a tool result a model can read: the class, its code and reason, and
 * one sentence — for a policy denial, built from the rule that decided (`explainDecision`).
 * What the agent-framework adapters return instead of running the tool.
 *
 * @module
 */
import type { Action } from './action.js';
import { isKernelError } from './errors.js';
import { explainDecision } from './policy/explain.js';
import type { Policy } from './policy/policy.js';

/** A refused tool call, as the model is told. */
export interface ToolRefusal {
  readonly refused: true;
  /** The refusal class: `ActionDenied`, `AuthorityDenied`, `DuplicateEffect`, `ApprovalMismatch`, … */
  readonly error: string;
  /** Its stable code (`ERR_ACTION_DENIED`, …). */
  readonly code: string;
  /** Its reason where it has one: the policy's (`rule[2]`, `unknown_action`), `approval_denied`, `committed`, … */
  readonly reason: string | null;
  /** One sentence: what was refused and why, and that the tool did not run. */
  readonly message: string;
}

/** The refusals a model is told about; anything else (a store failure, a bug) is thrown. */
const TOLD = new Set([
  'ERR_ACTION_DENIED',
  'ERR_AUTHORITY_DENIED',
  'ERR_APPROVAL_MISMATCH',
  'ERR_DUPLICATE_EFFECT',
  'ERR_AMBIGUOUS_EFFECT',
  'ERR_INVALID_ARGUMENT',
  'ERR_EFFECT_KEY',
  'ERR_IDENTITY',
]);

/**
 * The {@link ToolRefusal} for `err`, or `null` if it is not a refusal to tell the model (an
 * `ApprovalRequired` never is: that goes to a human). With `context`, a policy denial's sentence
 * says which rule decided and on what arguments (`denied: amount 5000000 is above 1000000 for
 * stripe.refund (rule[2])`) instead of the bare reason.
 */
export function toolRefusal(err: unknown, context?: { policy: Policy; action: Action }): ToolRefusal | null {
  if (!isKernelError(err) || !TOLD.has(err.code)) return null;
  const fields = err as { reason?: unknown; state?: unknown };
  const reason =
    typeof fields.reason === 'string'
      ? fields.reason
      : typeof fields.state === 'string'
        ? fields.state
        : err.code === 'ERR_AMBIGUOUS_EFFECT'
          ? 'ambiguous'
          : null;
  let why = `${err.message}${reason !== null && !err.message.includes(reason) ? ` (${reason})` : ''}`;
  if (context !== undefined && err.code === 'ERR_ACTION_DENIED' && reason !== null) {
    const { policy, action } = context;
    // Only the policy's own denial is explained by a rule (not authority, not a human's no).
    if (policy.evaluate(action.name, action.canonicalArguments).reason === reason) why = explainDecision(policy, action.name, action.canonicalArguments);
  }
  return { refused: true, error: err.name, code: err.code, reason, message: `${err.name}: ${why}. The tool did not run.` };
}
