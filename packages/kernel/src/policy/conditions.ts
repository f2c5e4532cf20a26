/**
 * Conditions `<subject>_<op>: operand`: parsing (at load) and their compiled matchers (at
 * evaluation). One parser and one evaluator, so that policy rules and, later, authority
 * constraints cannot disagree about whether `true` equals `1`.
 *
 * @module
 */
import type { JsonValue } from '../canonical.js';
import { InvalidArgument } from '../errors.js';
import { namesForMessage } from '../quoted.js';

/** The seven operators. */
export type Operator = 'eq' | 'neq' | 'in' | 'lt' | 'lte' | 'gt' | 'gte';

/** The operators, longest suffix first, so `amount_neq` splits as (`amount`, `neq`). */
const BY_LENGTH: readonly Operator[] = ['neq', 'lte', 'gte', 'eq', 'in', 'lt', 'gt'];

/** The numeric operators: integer operand, integer argument. */
export const NUMERIC_OPERATORS: ReadonlySet<Operator> = new Set<Operator>(['lt', 'lte', 'gt', 'gte']);

/**
 * Names a condition may not address, in every schema version: the action's own fields and the
 * principal's (a policy cannot read who is acting). `data_scope` is the one exception, and only
 * in policy rules: it is derived from the supplied arguments.
 */
export const RESERVED_ARGUMENTS: ReadonlySet<string> = new Set([
  'action_id',
  'agent',
  'claims',
  'data_scope',
  'environment',
  'expires_at',
  'issuer',
  'principal',
  'resource',
  'user',
]);

/** Subjects resolved from something other than the arguments: the set of data labels supplied. */
export const DERIVED_SUBJECTS: ReadonlySet<string> = new Set(['data_scope']);

/**
 * Refuses a call whose arguments name a derived subject (`data_scope`): the policy derives it
 * from which `data:`-labelled arguments are present, so a caller may not supply one. Every
 * surface refuses it in these words: `protect`, the worker, the MCP gateway.
 */
export function refuseDerivedArguments(args: object): void {
  for (const subject of DERIVED_SUBJECTS) {
    if (Object.prototype.hasOwnProperty.call(args, subject)) throw new InvalidArgument(`an argument may not be named ${subject}: it is derived by the policy`);
  }
}

/** A parsed condition. `operand` is validated JSON data (integers beyond 2^53 − 1 as `bigint`). */
export interface Condition {
  /** The key as written (`amount_lte`). */
  readonly key: string;
  /** The argument (or derived subject) it tests. */
  readonly subject: string;
  readonly op: Operator;
  readonly operand: JsonValue;
}

/** Why a key does not split, for the caller to wrap with its location. */
export type SplitResult = { subject: string; op: Operator } | { error: string };

/**
 * Splits `key` on the longest `_op` suffix that leaves a non-empty subject; refuses reserved
 * subjects (a derived one only when `allowDerived` is false).
 */
export function splitConditionKey(key: string, allowDerived: boolean): SplitResult {
  for (const op of BY_LENGTH) {
    const suffix = `_${op}`;
    if (key.length > suffix.length && key.endsWith(suffix)) {
      const subject = key.slice(0, -suffix.length);
      if (DERIVED_SUBJECTS.has(subject)) {
        if (allowDerived) return { subject, op };
        return { error: `condition '${key}' addresses '${subject}', which a policy rule may see and a grant may not` };
      }
      if (RESERVED_ARGUMENTS.has(subject)) {
        return {
          error:
            `condition '${key}' names the Action field '${subject}', not an argument; a condition can only address ` +
            `the action's arguments, so this rule would never match. If the function really takes an argument called '${subject}', rename it`,
        };
      }
      return { subject, op };
    }
  }
  return { error: `condition '${key}' must be '<argument>_<op>' where op is one of eq, gt, gte, in, lt, lte, neq` };
}

/** A compiled condition: true when it holds; pushes a warning when its subject is absent or mistyped. */
export type Matcher = (args: Readonly<Record<string, unknown>>, derived: readonly string[] | null, warnings: string[]) => boolean;

/** A JS value's kind, in the words the warnings use. */
export function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (Array.isArray(v)) return 'list';
  switch (typeof v) {
    case 'number':
      return Number.isInteger(v) ? 'integer' : 'float';
    case 'bigint':
      return 'integer';
    case 'object':
      return 'mapping';
    default:
      return typeof v;
  }
}

function isPlain(v: object): boolean {
  const p = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

/**
 * Type-strict equality of an argument value and a (validated) operand: booleans equal only
 * booleans, `5` equals `5n`, lists by length and items, mappings by key set and values, a
 * container never equals a scalar. Never throws on odd input (it is simply unequal).
 */
export function strictEquals(value: unknown, operand: JsonValue): boolean {
  switch (typeof operand) {
    case 'string':
    case 'boolean':
      return value === operand;
    case 'number':
    case 'bigint':
      // eslint-disable-next-line eqeqeq
      return (typeof value === 'number' || typeof value === 'bigint') && value == operand;
    default:
      break;
  }
  if (operand === null) return value === null;
  if (Array.isArray(operand)) {
    if (!Array.isArray(value) || value.length !== operand.length) return false;
    for (let i = 0; i < operand.length; i++) if (!strictEquals(value[i], operand[i]!)) return false;
    return true;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value) || !isPlain(value)) return false;
  const want = Object.keys(operand);
  const have = Object.keys(value);
  if (want.length !== have.length) return false;
  for (const k of want) {
    if (!Object.prototype.hasOwnProperty.call(value, k)) return false;
    if (!strictEquals((value as Record<string, unknown>)[k], (operand as Record<string, JsonValue>)[k]!)) return false;
  }
  return true;
}

/** A fast equality test against one operand. */
function equalsTo(operand: JsonValue): (v: unknown) => boolean {
  if (typeof operand === 'string' || typeof operand === 'boolean' || operand === null) return (v) => v === operand;
  if (typeof operand === 'number' || typeof operand === 'bigint') {
    // eslint-disable-next-line eqeqeq
    return (v) => (typeof v === 'number' || typeof v === 'bigint') && v == operand;
  }
  return (v) => strictEquals(v, operand);
}

const own = Object.prototype.hasOwnProperty;

function absent(label: string, c: Condition, args: Readonly<Record<string, unknown>>): string {
  const names = Object.keys(args).sort();
  return `${label}condition ${c.key} ignored: the action has no argument '${c.subject}' (it has: ${namesForMessage(names) || 'none'})`;
}

/**
 * A string as a grant's `_neq` compares it: Unicode NFKC (full-width and compatibility forms
 * folded), format characters (zero-width spaces, joiners, direction marks) and every other
 * character that renders as nothing (Default_Ignorable_Code_Point: U+034F, variation selectors,
 * Hangul fillers) removed, runs of
 * white space made one space, trimmed, lower-cased. Two strings that fold alike are, to a reader
 * and to many systems downstream, the same name.
 */
export function foldForExclusion(s: string): string {
  return s
    .normalize('NFKC')
    .replace(/[\p{Cf}\p{Default_Ignorable_Code_Point}]/gu, '')
    .replace(/\s+/gu, ' ')
    .trim()
    .toLowerCase();
}

/** `v` with every string (and mapping key) folded by {@link foldForExclusion}; other values as they are. */
function folded(v: unknown): unknown {
  if (typeof v === 'string') return foldForExclusion(v);
  if (Array.isArray(v)) return v.map(folded);
  if (typeof v === 'object' && v !== null && isPlain(v)) {
    const out = Object.create(null) as Record<string, unknown>;
    for (const k of Object.keys(v)) out[foldForExclusion(k)] = folded((v as Record<string, unknown>)[k]);
    return out;
  }
  return v;
}

/** How {@link compileCondition} compares; the default is the policy's `when:` semantics. */
export interface CompileOptions {
  /**
   * A grant constraint's `_neq` fails closed: it holds only for a value of the operand's kind
   * (a string for a string, an integer for an integer, a list for a list, …; any non-null value
   * for `null`) that still differs from the operand once both are folded by
   * {@link foldForExclusion}. A policy rule keeps the reference's exact, type-strict negation.
   */
  readonly failClosedNeq?: boolean;
}

/** Compiles a parsed condition into a {@link Matcher}; `where` (e.g. `rule[1]`) prefixes its warnings. */
export function compileCondition(c: Condition, where = '', options: CompileOptions = {}): Matcher {
  const { subject, op, operand } = c;
  const label = where ? `${where}: ` : '';
  if (DERIVED_SUBJECTS.has(subject)) return compileDerived(c, label);
  if (op === 'neq' && options.failClosedNeq === true) return compileExclusion(c, label);
  if (NUMERIC_OPERATORS.has(op)) {
    const bound = operand as number | bigint;
    const test: (v: number | bigint) => boolean =
      op === 'lt' ? (v) => v < bound : op === 'lte' ? (v) => v <= bound : op === 'gt' ? (v) => v > bound : (v) => v >= bound;
    return (args, _derived, warnings) => {
      if (!own.call(args, subject)) {
        warnings.push(absent(label, c, args));
        return false;
      }
      const v = args[subject];
      if (typeof v === 'bigint' || (typeof v === 'number' && Number.isInteger(v))) return test(v);
      warnings.push(`${label}condition ${c.key} ignored: argument '${subject}' is ${kindOf(v)}, not an integer`);
      return false;
    };
  }
  if (op === 'in') {
    const tests = (operand as JsonValue[]).map(equalsTo);
    return (args, _derived, warnings) => {
      if (!own.call(args, subject)) {
        warnings.push(absent(label, c, args));
        return false;
      }
      const v = args[subject];
      for (const t of tests) if (t(v)) return true;
      return false;
    };
  }
  const eq = equalsTo(operand);
  const negate = op === 'neq';
  return (args, _derived, warnings) => {
    if (!own.call(args, subject)) {
      warnings.push(absent(label, c, args));
      return false;
    }
    return eq(args[subject]) !== negate;
  };
}

/** A grant's `_neq`: see {@link CompileOptions.failClosedNeq}. */
function compileExclusion(c: Condition, label: string): Matcher {
  const { subject, operand } = c;
  const kind = kindOf(operand);
  const excluded = folded(operand) as JsonValue;
  return (args, _derived, warnings) => {
    if (!own.call(args, subject)) {
      warnings.push(absent(label, c, args));
      return false;
    }
    const v = args[subject];
    if (operand === null) return v !== null;
    if (kindOf(v) !== kind) {
      warnings.push(
        `${label}condition ${c.key} not satisfied: argument '${subject}' is ${kindOf(v)}, and a grant's _neq holds only for a ${kind} (fail closed)`,
      );
      return false;
    }
    if (strictEquals(folded(v), excluded)) {
      if (!strictEquals(v, operand)) {
        warnings.push(
          `${label}condition ${c.key} not satisfied: argument '${subject}' is the excluded value but for case, spacing, width or invisible characters (fail closed)`,
        );
      }
      return false;
    }
    return true;
  };
}

/** `data_scope`: `_in` intersects, `_eq`/`_neq` compare as sets; numeric operators see a list. */
function compileDerived(c: Condition, label: string): Matcher {
  const { op, operand } = c;
  if (NUMERIC_OPERATORS.has(op)) {
    return (_args, _derived, warnings) => {
      warnings.push(`${label}condition ${c.key} ignored: '${c.subject}' is a set of labels, not an integer`);
      return false;
    };
  }
  if (op === 'in') {
    const tests = (operand as JsonValue[]).map(equalsTo);
    return (_args, derived) => {
      for (const label of derived ?? []) for (const t of tests) if (t(label)) return true;
      return false;
    };
  }
  const negate = op === 'neq';
  if (!Array.isArray(operand)) {
    // A scalar operand never equals the set.
    return () => negate;
  }
  // Set equality; the loader has refused list/mapping items, so scalars compare by identity
  // of kind and value.
  const wanted = operand as JsonValue[];
  return (_args, derived) => {
    const have = derived ?? [];
    const same = have.every((x) => wanted.some((w) => strictEquals(x, w))) && wanted.every((w) => have.some((x) => strictEquals(x, w)));
    return same !== negate;
  };
}
