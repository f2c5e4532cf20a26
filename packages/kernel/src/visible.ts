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
import { canonicalJson, compareCodePoints, isPlainObject, isWellFormedString, type JsonObject, type JsonValue } from './canonical.js';
import { InvalidArgument } from './errors.js';
import { HAS_INVISIBLE, INVISIBLE, quotedForMessage, showInvisible } from './quoted.js';

export { quotedForMessage, showInvisible };

/**
 * An effect key, an action id or an approval id as a message names it. The caller may have chosen
 * it (a key is rendered from the agent's arguments): one of printable ASCII with no space, up to
 * 200 characters (every id this kernel mints, every ordinary key), is shown as it is; any other is
 * quoted, escaped and cut as {@link quotedForMessage} does, so that a line break in it cannot
 * start a line of its own and a bidi override cannot turn what follows around.
 */
export function shownId(id: string): string {
  return id.length <= ID_SHOWN && PLAIN_ID.test(id) ? id : quotedForMessage(id, ID_SHOWN);
}
const ID_SHOWN = 200;
const PLAIN_ID = /^[\x21-\x7e]+$/;

/**
 * `text` as one word of a command line a person copies into a POSIX shell (bash, zsh), read back
 * as exactly `text`: as it is when it holds only characters no shell treats specially
 * (`refund:txn_1`); else in single quotes (a `'` in it closed, escaped and reopened); and, when it
 * holds a character a terminal would act on instead of showing (a line break, a bidi override),
 * in ANSI-C quotes (`$'…'`), each such character written as an escape. A quote, `;`, `|`, `$` or a
 * backtick in an agent's key then stays part of the one argument, never a second command. Text
 * no argument can hold — a NUL (a shell ends the argument there: `refund:txn_1` + NUL + `x` would
 * name `refund:txn_1`, another effect) or a lone surrogate — is refused (`InvalidArgument`): check
 * with {@link shellWordable} and name it some other way.
 */
export function shellWord(text: string): string {
  if (!shellWordable(text)) throw new InvalidArgument('this text holds a NUL or a lone surrogate, which no command-line argument can carry');
  if (SHELL_PLAIN.test(text)) return text;
  if (!HAS_INVISIBLE.test(text)) return `'${text.replace(/'/g, `'\\''`)}'`;
  return `$'${text.replace(/[\\']/g, (c) => `\\${c}`).replace(INVISIBLE, ansiEscape)}'`;
}
/** One character inside `$'…'`: `\xHH` below 0x80, `\uHHHH` in the Basic Multilingual Plane (a lone surrogate too), `\UHHHHHHHH` beyond. */
function ansiEscape(c: string): string {
  const cp = c.codePointAt(0)!;
  if (cp < 0x80) return `\\x${cp.toString(16).padStart(2, '0')}`;
  return cp > 0xffff ? `\\U${cp.toString(16).padStart(8, '0')}` : `\\u${cp.toString(16).padStart(4, '0')}`;
}
/** Whether {@link shellWord} can write `text`: no NUL, no lone surrogate. */
export function shellWordable(text: string): boolean {
  return !text.includes('\0') && isWellFormedString(text);
}
/**
 * The commands that settle the AMBIGUOUS effect under `effectKey` from a terminal beside the store
 * (`ctrlrun resolve KEY --committed`, `… --failed`), the key as one {@link shellWord} (after `--`
 * when it starts with a dash, so it is not read as an option); `null` for a key no command line
 * can carry (see {@link shellWordable}): name it another way (the MCP operator, the worker's
 * `POST /v1/effects/:key/resolve`).
 */
export function resolveCommands(effectKey: string): { committed: string; failed: string } | null {
  if (!shellWordable(effectKey)) return null;
  const word = shellWord(effectKey);
  const command = (outcome: string) => (effectKey.startsWith('-') ? `ctrlrun resolve ${outcome} -- ${word}` : `ctrlrun resolve ${word} ${outcome}`);
  return { committed: command('--committed'), failed: command('--failed') };
}

// No '=' first: zsh expands `=cmd` to the command's path.
const SHELL_PLAIN = /^[A-Za-z0-9_@%+:,./-][A-Za-z0-9_@%+=:,./-]*$/;

/** Keys are cut only past this length (a longer one still shows, with the count cut). */
const KEY_SHOWN = 200;

/** The arguments as {@link argumentsForDisplay} shows them. */
export interface ShownArguments {
  /** JSON-like text of every key, in canonical order; not escaped for any medium. */
  readonly text: string;
  /** The length past which strings were cut, or `null` when the text is the canonical JSON, whole. */
  readonly cutOver: number | null;
}

/**
 * The canonical arguments for a view with little room, never dropping a key: the canonical JSON
 * when it fits in `max` characters; otherwise every string value (and any key over 200
 * characters) longer than 200, then 60, then 16 characters is cut and marked with how many
 * characters were cut (`"xxxx…(+4800 characters cut)"`), at the first length whose text fits. When
 * none fits, the text at 16 is longer than `max`: the caller spreads it out, never cuts it. Cutting
 * the text itself would let many keys, or one padded argument, push the others (`amount`) out of
 * sight. Escaping for the medium (and {@link showInvisible}) is the caller's.
 */
export function argumentsForDisplay(args: JsonObject, max: number): ShownArguments {
  const whole = canonicalJson(args);
  if (whole.length <= max) return { text: whole, cutOver: null };
  let text = whole;
  for (const cut of [200, 60, 16]) {
    text = shortened(args, cut);
    if (text.length <= max) return { text, cutOver: cut };
  }
  return { text, cutOver: 16 };
}

function cutString(s: string, cut: number): string {
  return s.length > cut ? `${JSON.stringify(s.slice(0, cut) + '…').slice(0, -1)}(+${s.length - cut} characters cut)"` : JSON.stringify(s);
}

function shortened(value: JsonValue, cut: number): string {
  if (typeof value === 'string') return cutString(value, cut);
  if (Array.isArray(value)) return `[${value.map((v) => shortened(v, cut)).join(',')}]`;
  if (isPlainObject(value)) {
    const keys = Object.keys(value).sort(compareCodePoints);
    return `{${keys.map((k) => `${cutString(k, Math.max(cut, KEY_SHOWN))}:${shortened((value as JsonObject)[k] as JsonValue, cut)}`).join(',')}}`;
  }
  return canonicalJson(value);
}
