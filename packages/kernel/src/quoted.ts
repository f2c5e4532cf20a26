/**
 * Agent-controlled text in a message: every control, format, separator and lone-surrogate
 * character written as a visible `\uXXXX` escape ({@link showInvisible}), and text quoted and cut
 * ({@link quotedForMessage}). No imports, so that the lowest modules (canonical text) can name an
 * argument the way every other message does. Re-exported by `visible.ts`.
 *
 * @module
 */
/**
 * What a view would not show as itself: controls (Cc), format characters (Cf: bidi overrides,
 * zero-width spaces), lone surrogates, line and paragraph separators; every other character
 * Unicode says renders as nothing (Default_Ignorable_Code_Point: the combining grapheme joiner
 * U+034F, variation selectors, the Hangul fillers U+115F, U+1160, U+3164); U+2800 (the braille
 * blank, drawn as a space); and every space but U+0020 (no-break, en, em, ideographic …), which a
 * reader cannot tell from it. `txn_1` and `txn_1` + U+034F are two keys, and must look like two.
 */
const INVISIBLE_CLASS = '\\p{Cc}\\p{Cf}\\p{Cs}\\p{Zl}\\p{Zp}\\p{Default_Ignorable_Code_Point}\\u2800\\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000';
/** One character of {@link INVISIBLE_CLASS}, global. */
export const INVISIBLE = new RegExp(`[${INVISIBLE_CLASS}]`, 'gu');
/** One character of {@link INVISIBLE_CLASS}, to test with. */
export const HAS_INVISIBLE = new RegExp(`[${INVISIBLE_CLASS}]`, 'u');
const INVISIBLE_BUT_NEWLINE = new RegExp(`(?!\\n)[${INVISIBLE_CLASS}]`, 'gu');

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

/**
 * Argument names for a message (`amount, payment_id`): a plain name as it is, any other quoted,
 * escaped and cut as {@link quotedForMessage} does; past `most` names, how many more there are.
 * The names are the caller's: one holding a line break or a bidi override, or ten thousand of
 * them, must not shape the message.
 */
export function namesForMessage(names: readonly string[], most = 20): string {
  const shown = names.slice(0, most).map((n) => (PLAIN_NAME.test(n) ? n : quotedForMessage(n, 60)));
  return names.length > most ? `${shown.join(', ')}, and ${names.length - most} more` : shown.join(', ');
}
const PLAIN_NAME = /^[A-Za-z0-9_][\w.-]{0,59}$/;
