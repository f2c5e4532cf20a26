/**
 * What a human reads must be what was hashed. Agent-controlled text can carry characters a view
 * would act on instead of showing: C0/C1 controls, format characters (a bidi override reverses
 * what follows; a zero-width space hides a difference between two keys), line and paragraph
 * separators, lone surrogates. {@link showInvisible} writes each of them as a visible `\uXXXX`
 * escape, one per UTF-16 unit, which is also a valid JSON escape: inside JSON text the result
 * still parses to exactly the same value.
 *
 * @module
 */

const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;
const INVISIBLE_BUT_NEWLINE = /(?!\n)[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;

function escapeUnits(c: string): string {
  let out = '';
  for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
  return out;
}

/**
 * `text` with every control, format, separator and lone-surrogate character written as `\uXXXX`.
 * With `keepNewlines`, a line feed stays one (for pretty-printed JSON, whose only raw newlines are
 * its own indentation: one inside a string is already written `\n`).
 */
export function showInvisible(text: string, options: { keepNewlines?: boolean } = {}): string {
  return text.replace(options.keepNewlines ? INVISIBLE_BUT_NEWLINE : INVISIBLE, escapeUnits);
}

/**
 * `text` quoted for an error message: JSON string syntax, cut after `max` characters (`…`), and
 * every invisible character escaped, so a message about agent-controlled text shows it as it is.
 */
export function quotedForMessage(text: string, max: number): string {
  return showInvisible(JSON.stringify(text.length > max ? `${text.slice(0, max)}…` : text));
}
