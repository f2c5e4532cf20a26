/**
 * `checkPolicy`: what a loaded policy lets through that its author probably meant to stop. Pure;
 * reads the policy's public rules and grants and decides nothing.
 *
 * Evaluation keeps the reference's semantics (the interop vectors depend on them): a condition
 * whose argument is missing or of another type is false, so its rule is skipped and evaluation
 * moves on. Written as an allow-list (bounded allow and approve rules first, deny last) a skipped
 * rule falls through to something stricter; written as a deny-list ("deny above X, else allow") a
 * missing or mistyped argument falls through to the allow. Equality is exact, so a rule that
 * denies one value lets any other spelling of it through. These are the findings.
 *
 * @module
 */
import type { JsonValue } from '../canonical.js';
import { resourceScopeGaps, type Authority } from '../authority/authority.js';
import { DERIVED_SUBJECTS, NUMERIC_OPERATORS, type Condition } from './conditions.js';
import { parseTemplate, RESOURCE_PLACEHOLDER } from './template.js';
import { child } from './tree.js';
import type { ActionEntry, Decision, PolicyRule } from './types.js';

/** What {@link checkPolicy} reads of a loaded policy. */
export interface CheckedPolicy {
  readonly actionNames: readonly string[];
  action(name: string): ActionEntry | null;
  rules(name: string): readonly PolicyRule[] | null;
  readonly authority: Authority | null;
}

/** The kinds of finding. */
export type PolicyFindingCode =
  /** A rule is skipped when an argument is missing or mistyped, and a later, less strict rule then matches. */
  | 'rule_skipped'
  /** An allow or approve rule excludes one value by `_neq`: every other spelling of it gets the decision. */
  | 'neq_admits_variants'
  /** A grant constraint excludes one value by `_neq`: a deny-list where an allow-list (`_in`) would hold. */
  | 'grant_neq'
  /** An `effect:` template reads `{resource}`, which the entry does not derive: the caller's claim shapes the key. */
  | 'effect_resource_claimed'
  /** A grant scopes by `resources:` an action whose resource the entry does not derive: the resource checked is the caller's. */
  | 'grant_resource_claimed';

/** How an argument gets a value past a rule that was meant to stop it. */
export type Bypass = 'missing' | 'mistyped' | 'other_value';

/** One thing {@link checkPolicy} found. */
export interface PolicyFinding {
  readonly code: PolicyFindingCode;
  /** The action entry, or null for a grant. */
  readonly action: string | null;
  /** Where in the document: `actions['stripe.refund'].rules[0]`, `authority.grants['g'].constraints.account_neq`. */
  readonly where: string;
  /** The argument concerned. */
  readonly argument: string;
  /** For `rule_skipped`: the ways past the rule, and the decision that then applies. */
  readonly bypasses?: readonly Bypass[];
  readonly from?: Decision;
  readonly to?: Decision;
  /** One line, for people. */
  readonly message: string;
}

/** Options of {@link checkPolicy}. */
export interface CheckPolicyOptions {
  /** The authority whose grants to check as well; default the policy's inline section. */
  readonly authority?: Authority | null;
}

const RANK: Readonly<Record<Decision, number>> = { allow: 0, approve: 1, deny: 2 };

function show(v: JsonValue): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));
}

/** Example spellings that differ from `operand` but are the same name to a reader. */
function variants(operand: JsonValue): string {
  const first = Array.isArray(operand) ? operand[0] : operand;
  if (typeof first === 'string' && first !== '') {
    const upper = first[0]!.toUpperCase() + first.slice(1);
    const shown = upper === first ? first.toLowerCase() : upper;
    return `${show(shown)}, ${show(`${first} `)}, ${show([first])}`;
  }
  if (typeof first === 'number' || typeof first === 'bigint') return `${show(String(first))}, ${show([first])}`;
  return 'a value of another type';
}

function describeBypasses(bypasses: readonly Bypass[], subject: string, conditions: readonly Condition[]): string {
  const parts: string[] = [];
  if (bypasses.includes('missing')) parts.push(`'${subject}' is missing`);
  if (bypasses.includes('mistyped')) parts.push(`'${subject}' is not an integer (e.g. the string "5000000")`);
  if (bypasses.includes('other_value')) {
    const valued = conditions.find((c) => c.op === 'eq' || c.op === 'in');
    parts.push(
      `'${subject}' is any value not exactly ${valued ? `in ${show(valued.operand)}` : 'listed'} (${valued ? variants(valued.operand) : 'another type or spelling'})`,
    );
  }
  return parts.join(', or ');
}

/** Which ways past rule `i`'s conditions on `subject` land on rule `j` (which must not itself stop them). */
function bypassesOnto(conditions: readonly Condition[], later: readonly Condition[]): Bypass[] {
  const out: Bypass[] = [];
  // Missing: the later rule must not test the argument at all (any test of a missing argument is false).
  if (later.length === 0) out.push('missing');
  // Mistyped: skips a numeric test; the later rule must have none (a non-integer fails it too).
  if (conditions.some((c) => NUMERIC_OPERATORS.has(c.op)) && later.every((c) => !NUMERIC_OPERATORS.has(c.op))) out.push('mistyped');
  // Another value or spelling: skips an exact-value test; the later rule may only exclude values.
  if (conditions.some((c) => c.op === 'eq' || c.op === 'in') && later.every((c) => c.op === 'neq')) out.push('other_value');
  return out;
}

/**
 * The findings for `policy` (and its grants): each a place where a missing or mistyped argument,
 * or another spelling of a value, turns a stricter decision into a less strict one. An empty list
 * means none was found, not that the policy is right. Pure and cheap; `loadPolicy` runs it and
 * keeps the messages as `Policy.warnings`.
 */
export function checkPolicy(policy: CheckedPolicy, options: CheckPolicyOptions = {}): PolicyFinding[] {
  const findings: PolicyFinding[] = [];
  for (const name of policy.actionNames) {
    const rules = policy.rules(name) ?? [];
    const at = child('actions', name);
    const entry = policy.action(name);
    if (entry?.effect != null && entry.resource === null && parseTemplate(entry.effect, 'load').placeholders.includes(RESOURCE_PLACEHOLDER)) {
      findings.push({
        code: 'effect_resource_claimed',
        action: name,
        where: `${at}.effect`,
        argument: RESOURCE_PLACEHOLDER,
        message:
          `${at}.effect ${JSON.stringify(entry.effect)} reads {resource}, but the entry has no 'resource:' template, so the resource is whatever the caller says ` +
          `(a decorator's template, or an agent's claim over HTTP): two spellings of one resource make two effect keys. Add a 'resource:' template to the entry`,
      });
    }
    rules.forEach((rule, i) => {
      const where = `${at}.rules[${i}]`;
      const subjects = [...new Set(rule.conditions.map((c) => c.subject))].filter((s) => !DERIVED_SUBJECTS.has(s));
      for (const subject of subjects) {
        const mine = rule.conditions.filter((c) => c.subject === subject);
        // Every later, less strict rule a bypass lands on; reported once, naming the first.
        const found = new Set<Bypass>();
        let first = -1;
        for (let j = i + 1; j < rules.length; j++) {
          if (RANK[rules[j]!.decision] >= RANK[rule.decision]) continue;
          const landed = bypassesOnto(
            mine,
            rules[j]!.conditions.filter((c) => c.subject === subject),
          );
          if (landed.length > 0 && first < 0) first = j;
          for (const b of landed) found.add(b);
        }
        if (first >= 0) {
          const j = first;
          const later = rules[j]!;
          const bypasses = (['missing', 'mistyped', 'other_value'] as const).filter((b) => found.has(b));
          findings.push({
            code: 'rule_skipped',
            action: name,
            where,
            argument: subject,
            bypasses,
            from: rule.decision,
            to: later.decision,
            message:
              `${where} (${rule.decision}) is skipped when ${describeBypasses(bypasses, subject, mine)}, and rules[${j}] (${later.decision}) can match instead: ` +
              `such an argument turns ${rule.decision} into ${later.decision}. Order the rules as an allow-list (bounded allow and approve rules first, deny last) so that a skipped rule falls through to something stricter`,
          });
        }
      }
      if (rule.decision !== 'deny') {
        for (const c of rule.conditions) {
          if (c.op !== 'neq' || DERIVED_SUBJECTS.has(c.subject)) continue;
          findings.push({
            code: 'neq_admits_variants',
            action: name,
            where: `${where}.when.${c.key}`,
            argument: c.subject,
            message:
              `${where} (${rule.decision}) excludes only the exact value ${show(c.operand)} of '${c.subject}': ${variants(c.operand)} and every other spelling get ${rule.decision}. ` +
              `List what is allowed instead ('${c.subject}_in: [...]')`,
          });
        }
      }
    });
  }
  const authority = options.authority === undefined ? policy.authority : options.authority;
  for (const [id, grant] of authority?.grants ?? []) {
    for (const name of resourceScopeGaps(grant, policy)) {
      findings.push({
        code: 'grant_resource_claimed',
        action: name,
        where: `authority.grants[${JSON.stringify(id)}].resources`,
        argument: RESOURCE_PLACEHOLDER,
        message:
          `grant ${JSON.stringify(id)} scopes ${child('actions', name)} by 'resources:', but the entry has no 'resource:' template, so the resource checked is the one the caller gives ` +
          `(a decorator's template or a hand-built action in process; the worker refuses an agent's own claim for it, and then the grant does not match). Add a 'resource:' template to derive it`,
      });
    }
    for (const c of Object.values(grant.constraints)) {
      if (c.op !== 'neq') continue;
      findings.push({
        code: 'grant_neq',
        action: null,
        where: `authority.grants[${JSON.stringify(id)}].constraints.${c.key}`,
        argument: c.subject,
        message:
          `grant ${JSON.stringify(id)} excludes ${show(c.operand)} of '${c.subject}' by _neq, a deny-list: another type, case, spacing or invisible characters are refused (fail closed), ` +
          `but any other name for the same thing (an id, an alias) passes. Prefer '${c.subject}_in: [...]'`,
      });
    }
  }
  return findings;
}
