/**
 * A policy decision as a sentence a model (or a person) can read, built from the rule that
 * decided: `denied: amount 5000000 is above 1000000 for stripe.refund (rule[2])` rather than
 * `rule[2]` alone. Pure; it re-runs `policy.evaluate` and reads `policy.rules`, and never
 * decides anything itself.
 *
 * @module
 */
import { canonicalJson } from '../canonical.js';
import { showInvisible } from '../visible.js';
import { DERIVED_SUBJECTS, type Condition, type Operator } from './conditions.js';
import { BARE_DECISION, NO_MATCHING_RULE, UNKNOWN_ACTION, type Decision, type Policy } from './policy.js';

const HOLDS: Record<Operator, string> = { eq: 'is', neq: 'is not', in: 'is one of', lt: 'is below', lte: 'is at most', gt: 'is above', gte: 'is at least' };
const NEEDS: Record<Operator, string> = { eq: 'to be', neq: 'not to be', in: 'to be one of', lt: 'below', lte: 'at most', gt: 'above', gte: 'at least' };
const VERB: Record<Decision, string> = { deny: 'denied', approve: "needs a human's approval", allow: 'allowed' };

/** Longest rendering of one value: an agent's argument may be huge. */
const MAX_VALUE = 80;

/**
 * A value as JSON text, cut to {@link MAX_VALUE} characters, with every invisible character (a
 * bidi override, a zero-width space, U+2028) escaped: the sentence is an error message every
 * surface shows, and an argument is the agent's to choose.
 */
function show(value: unknown): string {
  let text: string;
  try {
    text = canonicalJson(value);
  } catch {
    text = '(not JSON)';
  }
  return showInvisible(text.length <= MAX_VALUE ? text : `${text.slice(0, MAX_VALUE - 1)}…`);
}

function argument(args: Readonly<Record<string, unknown>>, subject: string): string {
  // A derived subject (data_scope) is computed from which arguments are present, not passed.
  if (DERIVED_SUBJECTS.has(subject)) return subject;
  return Object.prototype.hasOwnProperty.call(args, subject) ? `${subject} ${show(args[subject])}` : `${subject} (absent)`;
}

/** A condition that held: `amount 5000000 is above 1000000`. */
function held(c: Condition, args: Readonly<Record<string, unknown>>): string {
  return `${argument(args, c.subject)} ${HOLDS[c.op]} ${show(c.operand)}`;
}

/** What a rule that did not match asks for: `rule[0] needs amount at most 100000`. */
function needs(reason: string, conditions: readonly Condition[]): string {
  return `${reason} needs ${conditions.map((c) => `${c.subject} ${NEEDS[c.op]} ${show(c.operand)}`).join(' and ')}`;
}

/**
 * Why `policy` decides what it decides for `name` with `args` (the canonical arguments), as one
 * sentence that starts with the decision (`denied`, `needs a human's approval`, `allowed`) and
 * ends with the reason code in parentheses. Argument values are shown as JSON, each cut to 80
 * characters.
 */
export function explainDecision(policy: Policy, name: string, args: Readonly<Record<string, unknown>>): string {
  const evaluation = policy.evaluate(name, args);
  const verb = VERB[evaluation.decision];
  const code = `(${evaluation.reason})`;
  const shownName = show(name);
  if (evaluation.reason === UNKNOWN_ACTION) return `${verb}: ${shownName} is not an action the policy names ${code}`;
  if (evaluation.reason === BARE_DECISION) return `${verb}: the policy decides ${name} the same way for any arguments ${code}`;
  const rules = policy.rules(name) ?? [];
  const index = rules.findIndex((r) => r.reason === evaluation.reason);
  const rule = index < 0 ? undefined : rules[index];
  if (rule !== undefined && rule.conditions.length > 0) {
    return `${verb}: ${rule.conditions.map((c) => held(c, args)).join(' and ')} for ${name} ${code}`;
  }
  // A catch-all rule, or no rule at all: say what the rules before it asked for, and what came.
  const earlier = (rule === undefined ? rules : rules.slice(0, index)).filter((r) => r.conditions.length > 0);
  const subjects = [...new Set(earlier.flatMap((r) => r.conditions.map((c) => c.subject)))];
  const missed =
    earlier.length === 0 ? '' : `: ${earlier.map((r) => needs(r.reason, r.conditions)).join(', ')}; ${subjects.map((s) => argument(args, s)).join(', ')}`;
  const which = evaluation.reason === NO_MATCHING_RULE ? 'no rule' : 'no earlier rule';
  return `${verb}: ${which} of ${name} matched${missed} ${code}`;
}
