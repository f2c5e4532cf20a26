/**
 * Argument synthesis: from a policy entry's rules, an argument vector that reaches one rule and
 * no earlier one. Only integers, strings, booleans and null are built; a condition on anything
 * else (a list, a mapping, the derived `data_scope`) makes its rule unsynthesizable.
 *
 * Values (spec 02 §5.3): `eq v` → v; `in` → the first member no other condition excludes;
 * `gte n` → n, `gt n` → n+1, `lte n` → n, `lt n` → n−1, both ends → the lower; `neq v` → v+1,
 * v + `-x`, or `ctrlrun-verify`. Each earlier rule is failed by negating one of its conditions
 * (`gte n` → n−1, `gt n` → n, `lte n` → n+1, `lt n` → n, `eq` ↔ `neq`, `in` → not in), combined
 * in a fixed order, at most {@link MAX_CANDIDATES} candidates.
 *
 * @module
 */
import { compareCodePoints, type JsonObject, type JsonValue } from '../canonical.js';
import { DERIVED_SUBJECTS, strictEquals, type Condition, type Operator } from '../policy/conditions.js';
import type { Decision, Evaluation, Policy } from '../policy/policy.js';
import { parseTemplate, resolveEffectTemplate, resolveResourceTemplate, RESOURCE_PLACEHOLDER } from '../policy/template.js';

/** At most this many earlier-rule negations are tried per target rule. */
export const MAX_CANDIDATES = 64;

/** One rule as verify reads it. */
export interface RuleView {
  readonly decision: Decision;
  /** `rule[N]`, or `decision` for a bare `decision:` entry. */
  readonly reason: string;
  readonly conditions: readonly Condition[];
}

/** One action entry as verify reads it. */
export interface ActionView {
  readonly name: string;
  readonly effect: string | null;
  readonly resource: string | null;
  /** The rules in order; a bare `decision:` entry is one unconditional rule with reason `decision`. */
  readonly rules: readonly RuleView[];
}

/** A vector that reaches a rule, as re-evaluated by the policy itself. */
export interface Vector {
  readonly action: ActionView;
  readonly arguments: JsonObject;
  readonly evaluation: Evaluation;
}

/** Raised when a vector built for one rule lands in another with the same decision: verify's model is wrong (exit 3). */
export class SynthesisDefect extends Error {
  override name = 'SynthesisDefect';
}

type Op = Operator | 'nin';
interface Constraint {
  readonly op: Op;
  readonly operand: JsonValue;
}

const NEGATED: Record<Operator, Op> = { eq: 'neq', neq: 'eq', in: 'nin', lt: 'gte', lte: 'gt', gt: 'lte', gte: 'lt' };

/** Integers as bigint for arithmetic; everything else as is. */
function asInt(v: JsonValue): bigint | null {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  return null;
}

/** A bigint back to a number when it is safe, so arguments look as an app would pass them. */
function toValue(n: bigint): number | bigint {
  return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
}

function isScalar(v: JsonValue): v is string | number | bigint | boolean | null {
  return v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean';
}

/** Whether `v` satisfies one constraint, with the evaluator's type-strict semantics. */
function holds(v: JsonValue, c: Constraint): boolean {
  switch (c.op) {
    case 'eq':
      return strictEquals(v, c.operand);
    case 'neq':
      return !strictEquals(v, c.operand);
    case 'in':
      return Array.isArray(c.operand) && c.operand.some((m) => strictEquals(v, m));
    case 'nin':
      return Array.isArray(c.operand) && !c.operand.some((m) => strictEquals(v, m));
    default: {
      const x = asInt(v);
      const b = asInt(c.operand);
      if (x === null || b === null) return false;
      return c.op === 'lt' ? x < b : c.op === 'lte' ? x <= b : c.op === 'gt' ? x > b : x >= b;
    }
  }
}

/** The value `neq v` suggests: v+1, v + `-x`, or `ctrlrun-verify`. */
function beside(v: JsonValue): JsonValue {
  const n = asInt(v);
  if (n !== null) return toValue(n + 1n);
  if (typeof v === 'string') return `${v}-x`;
  return 'ctrlrun-verify';
}

/** One value for one subject under its constraints, or `undefined` when none can be built. */
function solve(constraints: readonly Constraint[]): JsonValue | undefined {
  const ok = (v: JsonValue | undefined): v is JsonValue => v !== undefined && isScalar(v) && constraints.every((c) => holds(v, c));
  const eq = constraints.find((c) => c.op === 'eq');
  if (eq) return ok(eq.operand) ? eq.operand : undefined;
  const inList = constraints.find((c) => c.op === 'in');
  if (inList) {
    for (const m of inList.operand as JsonValue[]) if (ok(m)) return m;
    return undefined;
  }
  const lower: bigint[] = [];
  const upper: bigint[] = [];
  for (const c of constraints) {
    const b = asInt(c.operand);
    if (b === null) continue;
    if (c.op === 'gte') lower.push(b);
    else if (c.op === 'gt') lower.push(b + 1n);
    else if (c.op === 'lte') upper.push(b);
    else if (c.op === 'lt') upper.push(b - 1n);
  }
  const exclusions = constraints.filter((c) => c.op === 'neq' || c.op === 'nin').length;
  if (lower.length > 0 || upper.length > 0) {
    // Both ends → the lower; step past excluded values (at most one step per exclusion, plus one).
    const up = lower.length > 0;
    let v = up ? lower.reduce((a, b) => (b > a ? b : a)) : upper.reduce((a, b) => (b < a ? b : a));
    for (let i = 0; i <= exclusions + countMembers(constraints); i++) {
      if (ok(toValue(v))) return toValue(v);
      v = up ? v + 1n : v - 1n;
    }
    return undefined;
  }
  const neq = constraints.find((c) => c.op === 'neq' || c.op === 'nin');
  if (!neq) return undefined;
  let v: JsonValue = neq.op === 'neq' ? beside(neq.operand) : beside(((neq.operand as JsonValue[])[0] ?? 'ctrlrun-verify') as JsonValue);
  for (let i = 0; i <= exclusions + countMembers(constraints); i++) {
    if (ok(v)) return v;
    v = beside(v);
  }
  return undefined;
}

function countMembers(constraints: readonly Constraint[]): number {
  let n = 0;
  for (const c of constraints) if (c.op === 'nin' && Array.isArray(c.operand)) n += c.operand.length;
  return n;
}

/** Arguments meeting every constraint, or null. */
function assign(constraints: ReadonlyMap<string, Constraint[]>): JsonObject | null {
  const out: [string, JsonValue][] = [];
  for (const subject of [...constraints.keys()].sort(compareCodePoints)) {
    const v = solve(constraints.get(subject)!);
    if (v === undefined) return null;
    out.push([subject, v]);
  }
  // Entries, not `out[subject] = v`: an argument named `__proto__` stays an argument.
  return Object.fromEntries(out);
}

/**
 * Placeholders of the entry's templates that no condition sets. `{resource}` of an effect is the
 * action's resource, never an argument (an argument of that name would make the key ambiguous).
 */
export function templateOnlyPlaceholders(action: ActionView): string[] {
  const names = new Set<string>();
  if (action.resource !== null) for (const p of parseTemplate(action.resource, 'load').placeholders) names.add(p);
  if (action.effect !== null) {
    for (const p of parseTemplate(action.effect, 'load').placeholders) if (p !== RESOURCE_PLACEHOLDER) names.add(p);
  }
  return [...names].sort(compareCodePoints);
}

/** The resource verify gives an action whose effect key names `{resource}` while the policy derives none (a caller's claim). */
export const VERIFY_RESOURCE = 'ctrlrun-verify-resource';

/** Whether the entry's effect key names `{resource}` and its policy derives no resource, so the caller must give one. */
export function needsCallerResource(action: Pick<ActionView, 'effect' | 'resource'>): boolean {
  return action.resource === null && action.effect !== null && parseTemplate(action.effect, 'load').placeholders.includes(RESOURCE_PLACEHOLDER);
}

/** The resource an application's action would carry for these arguments: derived, the caller's, or none. */
export function resourceFor(action: Pick<ActionView, 'effect' | 'resource'>, args: JsonObject): string | null {
  if (action.resource !== null) return resolveResourceTemplate(action.resource, args);
  return needsCallerResource(action) ? VERIFY_RESOURCE : null;
}

/** The effect key of `args` as the action built from them would have it, or null (no template). */
export function effectKeyFor(action: Pick<ActionView, 'effect' | 'resource'>, args: JsonObject): string | null {
  return action.effect === null ? null : resolveEffectTemplate(action.effect, args, resourceFor(action, args));
}

/** Adds `ctrlrun-verify-<name>` for every template placeholder the conditions left unset. */
function withPlaceholders(action: ActionView, args: JsonObject): JsonObject {
  const added = templateOnlyPlaceholders(action).filter((p) => !Object.prototype.hasOwnProperty.call(args, p));
  return Object.fromEntries([...Object.entries(args), ...added.map((p): [string, JsonValue] => [p, `ctrlrun-verify-${p}`])]);
}

/** The fixed-order negation choices: one condition index per earlier rule, first varying fastest last. */
function* negations(earlier: readonly RuleView[]): Generator<number[]> {
  const sizes = earlier.map((r) => r.conditions.length);
  if (sizes.some((n) => n === 0)) return;
  const pick = sizes.map(() => 0);
  for (;;) {
    yield pick.slice();
    let i = pick.length - 1;
    while (i >= 0 && pick[i] === sizes[i]! - 1) {
      pick[i] = 0;
      i--;
    }
    if (i < 0) return;
    pick[i]!++;
  }
}

/**
 * A vector for `action` whose evaluation is `rules[index]`, or null when none can be built.
 * `extra` conditions must hold too (a grant's constraints). Throws {@link SynthesisDefect} when a
 * candidate built for the rule reaches the same decision through another rule.
 */
export function vectorForRule(policy: Policy, action: ActionView, index: number, extra: readonly Condition[] = []): Vector | null {
  const target = action.rules[index];
  if (!target) return null;
  const required = [...target.conditions, ...extra];
  if (required.some((c) => DERIVED_SUBJECTS.has(c.subject))) return null;
  const earlier = action.rules.slice(0, index);
  let tried = 0;
  for (const choice of negations(earlier)) {
    if (tried++ >= MAX_CANDIDATES) break;
    const constraints = new Map<string, Constraint[]>();
    const add = (subject: string, c: Constraint) => {
      const list = constraints.get(subject);
      if (list) list.push(c);
      else constraints.set(subject, [c]);
    };
    for (const c of required) add(c.subject, { op: c.op, operand: c.operand });
    let usable = true;
    choice.forEach((ci, ri) => {
      const c = earlier[ri]!.conditions[ci]!;
      if (DERIVED_SUBJECTS.has(c.subject)) usable = false;
      else add(c.subject, { op: NEGATED[c.op], operand: c.operand });
    });
    if (!usable) continue;
    const assigned = assign(constraints);
    if (assigned === null) continue;
    const args = withPlaceholders(action, assigned);
    const evaluation = policy.evaluate(action.name, args);
    if (evaluation.reason === target.reason && evaluation.decision === target.decision) return { action, arguments: args, evaluation };
    if (evaluation.decision === target.decision) {
      throw new SynthesisDefect(
        `the vector built for ${action.name} ${target.reason} (${JSON.stringify(Object.keys(args))}) reached ${evaluation.decision} through ${evaluation.reason}`,
      );
    }
  }
  return null;
}

/** The first vector of `action` reaching `decision` (rules in order), with `extra` conditions holding too, or null. */
export function vectorFor(policy: Policy, action: ActionView, decision: Decision, extra: readonly Condition[] = []): Vector | null {
  for (let i = 0; i < action.rules.length; i++) {
    if (action.rules[i]!.decision !== decision) continue;
    const v = vectorForRule(policy, action, i, extra);
    if (v) return v;
  }
  return null;
}

/** The value `neq v` suggests, exported for widening a grant's constraint: v+1, v + `-x`, or `ctrlrun-verify`. */
export { beside as valueBeside };

/** An integer operand moved by `delta` (bigint-exact), or the operand unchanged when it is not an integer. */
export function shiftInt(v: JsonValue, delta: number): JsonValue {
  const n = asInt(v);
  return n === null ? v : toValue(n + BigInt(delta));
}
