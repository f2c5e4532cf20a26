/**
 * Effect keys a caller supplies (the worker's `effectKey`), as the intake reads them. An action
 * whose policy entry has an `effect:` template gets its key from the policy alone; for one
 * without, the caller's key is a deduplication key *within that action*: it is stored as
 * `caller/<action name, URI-encoded>/<key>` (the key verbatim), so `notify.customer` with
 * `effectKey: "refund:txn_77"` reserves `caller/notify.customer/refund:txn_77`, never the
 * refund's `refund:txn_77`.
 *
 * The encoded name holds no `/`, so two (action, key) pairs never share a stored key. A stored key
 * that some `effect:` template of the policy could also produce is refused, so a caller key never
 * collides with a template-derived one either, whatever the templates look like.
 *
 * @module
 */
import { parseTemplate, type Policy } from './policy/index.js';

/** The prefix of every caller-supplied effect key as stored. */
export const CALLER_KEY_PREFIX = 'caller/';

/** The stored key for `key` supplied by a caller of `action`. */
export function scopedCallerKey(action: string, key: string): string {
  return `${CALLER_KEY_PREFIX}${encodeURIComponent(action)}/${key}`;
}

/** A template as literal text around runs of placeholders: `lits[i]`, then at least `gaps[i]` characters, … */
interface KeyShape {
  readonly action: string;
  readonly template: string;
  readonly lits: readonly string[];
  readonly gaps: readonly number[];
}

function shape(action: string, template: string): KeyShape {
  const lits: string[] = [''];
  const gaps: number[] = [];
  let placeholders = 0;
  for (const part of parseTemplate(template, 'load').parts) {
    if ('name' in part) {
      placeholders++;
      continue;
    }
    if (placeholders > 0) {
      gaps.push(placeholders);
      lits.push('');
      placeholders = 0;
    }
    lits[lits.length - 1] += part.text;
  }
  if (placeholders > 0) {
    gaps.push(placeholders);
    lits.push('');
  }
  return { action, template, lits, gaps };
}

/**
 * Whether the template could render `key`: each placeholder is a non-empty string or integer,
 * so at least one character of any kind. Literal by literal, leftmost first (complete for this
 * shape of pattern, and linear: no regular expression to backtrack on a hostile key).
 */
function couldRender(s: KeyShape, key: string): boolean {
  const first = s.lits[0]!;
  const last = s.lits[s.lits.length - 1]!;
  if (s.gaps.length === 0) return key === first;
  if (!key.startsWith(first) || !key.endsWith(last)) return false;
  const end = key.length - last.length;
  let at = first.length;
  for (let i = 1; i < s.lits.length - 1; i++) {
    at += s.gaps[i - 1]!;
    const found = key.indexOf(s.lits[i]!, at);
    if (found < 0 || found + s.lits[i]!.length > end) return false;
    at = found + s.lits[i]!.length;
  }
  return end - at >= s.gaps[s.gaps.length - 1]!;
}

const shapes = new WeakMap<Policy, readonly KeyShape[]>();

function keyShapes(policy: Policy): readonly KeyShape[] {
  let list = shapes.get(policy);
  if (list === undefined) {
    list = policy.actionNames.flatMap((action) => {
      const template = policy.action(action)?.effect;
      return template ? [shape(action, template)] : [];
    });
    shapes.set(policy, list);
  }
  return list;
}

/** The templated action whose `effect:` template could produce `stored`, or `null`. */
export function templateCollision(policy: Policy, stored: string): { action: string; template: string } | null {
  for (const s of keyShapes(policy)) if (couldRender(s, stored)) return { action: s.action, template: s.template };
  return null;
}
