/**
 * Grant patterns (docs/spec/02-authority-observe-verify.md §2.3) and pattern containment (§3.3). The grammar is small on purpose
 * so that containment is decided by comparison, never approximated: a segment is a literal or a
 * literal followed by one `*` (a bare `*` included), and the last segment may be `**` when every
 * earlier one is a literal. Everything is spelled `**`, never a glob.
 *
 * @module
 */

/** An action name is dotted. */
export const ACTION_SEPARATOR = '.';
/** A resource is `type:id`. */
export const RESOURCE_SEPARATOR = ':';
/** A task is segmented like a resource (v7 grant `tasks`). */
export const TASK_SEPARATOR = ':';
/** The one spelling of "one or more segments". */
export const DEEP_WILDCARD = '**';

/** `.` for actions, `:` for resources, `null` for a subject (one segment, no `**`). */
export type Separator = '.' | ':' | null;

function segments(pattern: string, separator: Separator): string[] {
  return separator === null ? [pattern] : pattern.split(separator);
}

/**
 * Why `pattern` is outside the grammar, or `null` when it is a pattern. The message names the
 * pattern; the caller prefixes where it was found.
 */
export function patternError(pattern: unknown, separator: Separator): string | null {
  if (typeof pattern !== 'string' || pattern === '') return `a pattern must be a non-empty string, got ${JSON.stringify(pattern) ?? String(pattern)}`;
  const shown = JSON.stringify(pattern);
  const parts = segments(pattern, separator);
  const last = parts.length - 1;
  for (let i = 0; i < parts.length; i++) {
    const seg = parts[i]!;
    if (seg === '') return `${shown} has an empty segment; a pattern is non-empty segments joined by '${separator}'`;
    if (/[?[\]]/.test(seg))
      return `${shown} is not a pattern: there is no '?' and no character class; a segment is a literal, a literal with one trailing '*', or a final '**'`;
    if (seg === DEEP_WILDCARD) {
      if (separator === null) return `${shown} may not use '**': a subject is one segment, so write '*'`;
      if (i !== last) return `${shown} may use '**' only as its last segment`;
      if (parts.slice(0, i).some((p) => p.includes('*'))) {
        return `${shown} puts a wildcard before '**'; every segment before a final '**' must be a literal`;
      }
      continue;
    }
    const stars = seg.split('*').length - 1;
    if (stars > 1 || (stars === 1 && !seg.endsWith('*'))) {
      return `${shown} has the segment ${JSON.stringify(seg)}, which is neither a literal nor a literal with one trailing '*' (no leading or infix '*', and '**' is never part of a larger segment)`;
    }
  }
  return null;
}

function segmentMatches(pattern: string, value: string): boolean {
  return pattern.endsWith('*') ? value.startsWith(pattern.slice(0, -1)) : pattern === value;
}

/**
 * Whether `value` matches `pattern`: segment-wise, case-sensitive, no normalisation; equal
 * segment counts unless the pattern ends in `**`, which needs at least one more segment.
 */
export function matchesPattern(pattern: string, value: string, separator: Separator): boolean {
  const want = segments(pattern, separator);
  const have = segments(value, separator);
  if (want[want.length - 1] === DEEP_WILDCARD) {
    const prefix = want.slice(0, -1);
    return have.length > prefix.length && prefix.every((p, i) => p === have[i]);
  }
  return want.length === have.length && want.every((p, i) => segmentMatches(p, have[i]!));
}

function segmentContains(parent: string, child: string): boolean {
  if (!parent.endsWith('*')) return !child.endsWith('*') && parent === child;
  const childLiteral = child.endsWith('*') ? child.slice(0, -1) : child;
  return childLiteral.startsWith(parent.slice(0, -1));
}

/**
 * Whether every value `child` matches is also matched by `parent` (docs/spec/02-authority-observe-verify.md §3.3). Not
 * `matchesPattern`: `stripe.**` contains `stripe.**` and `stripe.refund`, but not `stripe`, and
 * `B*` is never inside a literal. `**` counts as one segment, so every pattern contains itself.
 */
export function patternContains(parent: string, child: string, separator: Separator): boolean {
  const outer = segments(parent, separator);
  const inner = segments(child, separator);
  if (outer.length === 1 && outer[0] === DEEP_WILDCARD) return true;
  if (outer[outer.length - 1] === DEEP_WILDCARD) {
    const prefix = outer.slice(0, -1);
    return inner.length > prefix.length && prefix.every((p, i) => p === inner[i]);
  }
  if (inner[inner.length - 1] === DEEP_WILDCARD || inner.length !== outer.length) return false;
  return outer.every((p, i) => segmentContains(p, inner[i]!));
}
