/**
 * Agent-controlled text in a message: every control, format, separator and lone-surrogate
 * character written as a visible `\uXXXX` escape ({@link showInvisible}), and text quoted and cut
 * ({@link quotedForMessage}). No imports, so that the lowest modules (canonical text) can name an
 * argument the way every other message does. Re-exported by `visible.ts`.
 *
 * @module
 */
export const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;
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
