/**
 * Containment (docs/spec/02-authority-observe-verify.md §3.3): is a child grant inside its parent on every dimension? Checked
 * when a delegation is created and again at every evaluation. Omitting a dimension the parent
 * constrains is rejected, never inherited: a child that silently inherits looks, in the record,
 * like a child authorised for what it says.
 *
 * @module
 */
import type { JsonValue } from '../canonical.js';
import { strictEquals, type Condition } from '../policy/conditions.js';
import type { Budget, Grant, SubjectPatterns } from './grant.js';
import { ACTION_SEPARATOR, matchesPattern, patternContains, RESOURCE_SEPARATOR, TASK_SEPARATOR, type Separator } from './patterns.js';

/**
 * The dimensions, in the order they are checked; the first violated one is reported. `tasks` and
 * `budgets` (v7) come last, as in the original 0.12.2.
 */
export const DIMENSIONS = Object.freeze(['subject', 'actions', 'resources', 'constraints', 'environments', 'expires_at', 'tasks', 'budgets'] as const);

/** One of {@link DIMENSIONS}. */
export type Dimension = (typeof DIMENSIONS)[number];

/**
 * The child's grantee must be one named agent (no `*`, not omitted); under a parent addressed to
 * a user, the child keeps a user the parent's pattern matches; otherwise a child user, if any,
 * carries no wildcard either.
 */
function subjectContained(parent: SubjectPatterns, child: SubjectPatterns): boolean {
  if (child.agent === null || child.agent.includes('*')) return false;
  if (parent.user !== null) {
    if (child.user === null || child.user.includes('*')) return false;
    return matchesPattern(parent.user, child.user, null);
  }
  return child.user === null || !child.user.includes('*');
}

function patternsContained(parent: readonly string[], child: readonly string[], separator: Separator): boolean {
  return child.every((inner) => parent.some((outer) => patternContains(outer, inner, separator)));
}

function atLeastAsStrict(parent: Condition, child: Condition): boolean {
  const p = parent.operand;
  const c = child.operand;
  switch (parent.op) {
    case 'lt':
    case 'lte':
      return isInt(c) && isInt(p) && c <= p;
    case 'gt':
    case 'gte':
      return isInt(c) && isInt(p) && c >= p;
    case 'in':
      return Array.isArray(c) && Array.isArray(p) && c.every((item) => p.some((allowed) => strictEquals(item, allowed)));
    default:
      // `eq` / `neq`: equal, type-strictly. There is no deny-list operator, so "the parent's
      // exclusions plus more" cannot be written, and equality is the only rule there is.
      return strictEquals(c, p);
  }
}

function isInt(v: JsonValue): v is number | bigint {
  return typeof v === 'bigint' || (typeof v === 'number' && Number.isInteger(v));
}

/** Every `argument_op` the parent declares is present in the child and at least as strict. */
function constraintsContained(parent: Grant['constraints'], child: Grant['constraints']): boolean {
  for (const [key, outer] of Object.entries(parent)) {
    const inner = child[key];
    if (inner === undefined || !atLeastAsStrict(outer, inner)) return false;
  }
  return true;
}

/**
 * Every parent budget is discharged by some child budget on the same metric with a limit no
 * higher and a window no shorter (over one limit, a shorter window is a higher rate). One child
 * budget may discharge several; a child may add budgets of its own; a parent with none
 * constrains nothing here.
 */
function budgetsContained(parent: readonly Budget[] | null, child: readonly Budget[] | null): boolean {
  if (parent === null) return true;
  return parent.every((outer) => (child ?? []).some((inner) => inner.metric === outer.metric && inner.limit <= outer.limit && inner.window >= outer.window));
}

/** The first dimension on which `child` is not inside `parent`, or `null` when it is inside on all. */
export function containedDimension(parent: Grant, child: Grant): Dimension | null {
  if (!subjectContained(parent.subject, child.subject)) return 'subject';
  if (!patternsContained(parent.actions, child.actions, ACTION_SEPARATOR)) return 'actions';
  if (parent.resources !== null && (child.resources === null || !patternsContained(parent.resources, child.resources, RESOURCE_SEPARATOR))) return 'resources';
  if (!constraintsContained(parent.constraints, child.constraints)) return 'constraints';
  if (parent.environments !== null && (child.environments === null || !child.environments.every((e) => parent.environments!.includes(e))))
    return 'environments';
  const pe = parent.expiresMicros;
  const ce = child.expiresMicros;
  if (pe !== null && (ce === null || ce > pe)) return 'expires_at';
  if (parent.tasks !== null && (child.tasks === null || !patternsContained(parent.tasks, child.tasks, TASK_SEPARATOR))) return 'tasks';
  if (!budgetsContained(parent.budgets, child.budgets)) return 'budgets';
  return null;
}
