/**
 * Effect and resource templates: literal text and `{name}` placeholders, nothing else.
 *
 * The grammar is deliberately smaller than a format string (no `{{`, no format spec, no
 * attribute or index access): an effect key is an identity, so a brace that is not part of a
 * `{name}` placeholder is a typo, and a typo must not become part of an identity.
 *
 * @module
 */
import { EffectKeyError, InvalidArgument, PolicyError } from '../errors.js';
import { namesForMessage } from '../quoted.js';

/** A parsed template. */
export interface Template {
  /** The template as written. */
  readonly text: string;
  /** The placeholder names, in order of appearance (repeats kept). */
  readonly placeholders: readonly string[];
  /** Literal text and placeholders, in order. */
  readonly parts: readonly TemplatePart[];
}

/** One piece of a {@link Template}. */
export type TemplatePart = { readonly text: string } | { readonly name: string };

/**
 * One token: a placeholder (a Python identifier as its `re` module reads `[^\W\d]\w*`: a
 * letter, `_`, or a non-decimal number character first, then letters, numbers or `_`),
 * literal text, or a brace that belongs to neither.
 */
const TOKEN = /\{([\p{L}\p{Nl}\p{No}_][\p{L}\p{N}_]*)\}|([^{}]+)|([{}])/uy;

/** In an effect template, `{resource}` names the action's `resource`. */
export const RESOURCE_PLACEHOLDER = 'resource';

function describe(text: string): string {
  return `'${text}'`;
}

/**
 * Parses and validates a template. Malformed (empty, `{{`, `{a:>3}`, `{a.b}`, `{0}`, a stray
 * brace) → {@link PolicyError} when `where` is `'load'` (a policy document),
 * {@link InvalidArgument} when it is `'decoration'` (a `protect()` option).
 */
export function parseTemplate(text: string, where: 'load' | 'decoration'): Template {
  const Err = where === 'load' ? PolicyError : InvalidArgument;
  if (typeof text !== 'string') throw new Err(`a template must be a string, got ${text === null ? 'null' : typeof text}`);
  if (text === '') throw new Err('a template must be a non-empty string');
  const parts: TemplatePart[] = [];
  const placeholders: string[] = [];
  TOKEN.lastIndex = 0;
  let at = 0;
  while (at < text.length) {
    TOKEN.lastIndex = at;
    const m = TOKEN.exec(text);
    // The three alternatives cover every character, so `m` is null only on a lone surrogate
    // adjacent to a brace; treat it like the stray brace it stands next to.
    if (m === null || m[3] !== undefined) {
      const position = [...text.slice(0, at)].length;
      const found = m?.[3] ?? text[at];
      throw new Err(`${describe(text)} is not a valid template: expected literal text and '{name}' placeholders, found '${found}' at position ${position}`);
    }
    if (m[1] !== undefined) {
      parts.push({ name: m[1] });
      placeholders.push(m[1]);
    } else {
      parts.push({ text: m[2]! });
    }
    at = TOKEN.lastIndex;
  }
  return Object.freeze({ text, placeholders: Object.freeze(placeholders), parts: Object.freeze(parts) });
}

/** Templates given as text, parsed once: a policy's few templates are resolved on every action. */
const PARSED = new Map<string, Template>();
const PARSED_KEPT = 256;

function asTemplate(template: string | Template): Template {
  if (typeof template !== 'string') return template;
  let parsed = PARSED.get(template);
  if (parsed === undefined) {
    // Only a valid template is kept; a malformed one is refused again each time.
    parsed = parseTemplate(template, 'decoration');
    if (template.length <= 1024) {
      if (PARSED.size >= PARSED_KEPT) PARSED.clear();
      PARSED.set(template, parsed);
    }
  }
  return parsed;
}

const own = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

function kind(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'list';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'float';
  if (typeof v === 'object') return 'mapping';
  return typeof v;
}

type ErrorClass = typeof InvalidArgument | typeof EffectKeyError;

/** The text an integer renders to in a template: a string of exactly this form would read the same. */
const DECIMAL_INTEGER = /^(?:0|-?[1-9][0-9]*)$/;

/**
 * One placeholder's text: a non-empty string verbatim, or an integer (not a boolean) in decimal.
 * With `distinct` (an argument, not the action's own resource), a string that is an integer's
 * decimal form is refused: `777` and `"777"` are two actions, and one key for both would make
 * either one the other's duplicate. The integer keeps the original's rendering; the string has
 * to say more.
 */
function rendered(template: Template, name: string, value: unknown, Err: ErrorClass, distinct: boolean): string {
  if (typeof value === 'string') {
    if (value === '') throw new Err(`${describe(template.text)}: '{${name}}' is empty; an effect key must identify`);
    if (distinct && DECIMAL_INTEGER.test(value)) {
      const shown = value.length > 40 ? `${value.slice(0, 40)}…` : value;
      throw new Err(
        `${describe(template.text)}: '{${name}}' is the string "${shown}", which the template would spell exactly like the integer ${shown}; pass it as an integer, or as an id that is not only digits`,
      );
    }
    return value;
  }
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value === 0 ? 0 : value);
  throw new Err(`${describe(template.text)}: '{${name}}' is ${kind(value)}; a placeholder must resolve to a non-empty string or an integer`);
}

function render(
  template: Template,
  values: Readonly<Record<string, unknown>>,
  extra: { name: string; value: unknown } | null,
  Err: ErrorClass,
  distinct: boolean,
): string {
  let out = '';
  for (const part of template.parts) {
    if ('text' in part) {
      out += part.text;
      continue;
    }
    const name = part.name;
    if (extra !== null && name === extra.name) {
      // The action's resource is always a string, so it cannot be confused with an integer.
      out += rendered(template, name, extra.value, Err, false);
      continue;
    }
    if (!own(values, name)) {
      const have = namesForMessage(Object.keys(values).sort()) || 'nothing';
      throw new Err(`${describe(template.text)}: no value for '{${name}}' (have: ${have})`);
    }
    out += rendered(template, name, values[name], Err, distinct);
  }
  return out;
}

/**
 * Resolves a `resource` template against the bound call arguments, before the action exists
 * (the resource is hashed). Unresolvable → {@link InvalidArgument}, and so is a string argument
 * that is only the decimal digits of an integer (see {@link resolveEffectTemplate}: an effect key
 * may name `{resource}`). `{resource}` is an ordinary argument here.
 */
export function resolveResourceTemplate(template: string | Template, boundArgs: Readonly<Record<string, unknown>>): string {
  const t = asTemplate(template);
  if (typeof boundArgs !== 'object' || boundArgs === null) throw new InvalidArgument('resource template arguments must be an object');
  // Distinct too: an effect key may name `{resource}`, so `777` and `"777"` must not meet here either.
  return render(t, boundArgs, null, InvalidArgument, true);
}

/**
 * Resolves an `effect` template against an action's canonical arguments. `{resource}` is the
 * action's `resource`: an argument also named `resource` (two candidate values for one key) or a
 * null resource → {@link EffectKeyError}; so is any other unresolvable placeholder, and a string
 * argument that is only the decimal digits of an integer (`"777"`, which would share the key of
 * the integer `777`: refused rather than type-tagged, so every key stays the original's spelling).
 */
export function resolveEffectTemplate(template: string | Template, canonicalArgs: Readonly<Record<string, unknown>>, actionResource: string | null): string {
  const t = asTemplate(template);
  if (typeof canonicalArgs !== 'object' || canonicalArgs === null) throw new InvalidArgument('effect template arguments must be an object');
  let extra: { name: string; value: unknown } | null = null;
  if (t.placeholders.includes(RESOURCE_PLACEHOLDER)) {
    if (own(canonicalArgs, RESOURCE_PLACEHOLDER)) {
      throw new EffectKeyError(
        `${describe(t.text)}: '{resource}' is ambiguous: the action has both a resource and an argument named 'resource'; rename the argument`,
      );
    }
    if (actionResource === null || actionResource === undefined) {
      throw new EffectKeyError(`${describe(t.text)}: '{resource}' needs a resource on the action, and it has none`);
    }
    extra = { name: RESOURCE_PLACEHOLDER, value: actionResource };
  }
  return render(t, canonicalArgs, extra, EffectKeyError, true);
}
