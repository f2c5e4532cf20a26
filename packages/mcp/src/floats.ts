/**
 * Floats written as integers. `JSON.parse` reads `2000.0` and `2e3` as the integer 2000, so the
 * gateway would hash (and send upstream) a value the agent did not write as an integer, where
 * the reference refuses it (`-41008`). The HTTP layers look at the message text for that.
 *
 * @module
 */

import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { gatewayError, refusalResult } from './errors.js';

/** Escapes one JSON pointer segment (RFC 6901). */
function segment(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

type Where = 'top' | 'params' | 'elsewhere' | { readonly pointer: string };

/** How deep the scan goes; deeper text is refused (a RangeError), as a message no tool needs. */
export const MAX_DEPTH = 512;
const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * Walks the JSON-RPC message `text` and hands `visit` every value inside `params.arguments` — its
 * JSON pointer relative to the arguments and its spelling in the text (`2000.0`, `true`, `"a"`,
 * `{"k":1}`) — in text order (a container after what is inside it), every `params.arguments` when a key is repeated (`onArguments` is called as each
 * one begins). `visit` returning true stops the walk. `text` must be JSON that `JSON.parse`
 * accepted; nesting deeper than {@link MAX_DEPTH} is a `RangeError`. The one reader of the text
 * behind what `JSON.parse` erases: floats written as integers here, a value's spelling for the
 * mirrored `Mcp-Param-*` headers (protocol.ts).
 */
export function scanArguments(text: string, visit: (pointer: string, spelling: string) => boolean | void, onArguments: () => void = () => {}): void {
  let i = 0;
  let stopped = false;
  const ws = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  };
  const string = (): string => {
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (where: Where, depth: number): void => {
    if (depth > MAX_DEPTH) throw new RangeError(`the message nests deeper than ${MAX_DEPTH} levels`);
    ws();
    const c = text[i];
    const start = i;
    // A container's own spelling, handed on once it is read (after what is inside it).
    const close = (): void => {
      if (typeof where === 'object' && visit(where.pointer, text.slice(start, i)) === true) stopped = true;
    };
    if (c === '{') {
      if (typeof where === 'object' && where.pointer === '') onArguments();
      i++;
      ws();
      if (text[i] === '}') {
        i++;
        return close();
      }
      for (;;) {
        ws();
        const key = string();
        ws();
        i++; // ':'
        const inner: Where =
          typeof where === 'object'
            ? { pointer: `${where.pointer}/${segment(key)}` }
            : where === 'top' && key === 'params'
              ? 'params'
              : where === 'params' && key === 'arguments'
                ? { pointer: '' }
                : 'elsewhere';
        value(inner, depth + 1);
        if (stopped) return;
        ws();
        if (text[i++] === '}') return close();
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return close();
      }
      for (let n = 0; ; n++) {
        value(typeof where === 'object' ? { pointer: `${where.pointer}/${n}` } : 'elsewhere', depth + 1);
        if (stopped) return;
        ws();
        if (text[i++] === ']') return close();
      }
    }
    if (c === '"') {
      string();
    } else {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(text);
      // A number, else true, false or null.
      i += m ? m[0].length : text.startsWith('false', i) ? 5 : 4;
    }
    close();
  };
  value('top', 0);
}

/**
 * The JSON pointer, relative to `params.arguments`, of the first number written with a fraction
 * or an exponent in the arguments of the JSON-RPC message `text` (every `params.arguments` when a
 * key is repeated), or `null`. `text` must be JSON that `JSON.parse` accepted; nesting deeper than
 * {@link MAX_DEPTH} is a `RangeError`.
 */
export function floatArgumentPointer(text: string): string | null {
  let found: string | null = null;
  scanArguments(text, (pointer, spelling) => {
    // A number (not a string, literal or container) with a fraction or an exponent.
    if (!/^-?\d/.test(spelling) || !/[.eE]/.test(spelling)) return false;
    found = pointer;
    return true;
  });
  return found;
}

/**
 * The JSON-RPC response for a `tools/call` request whose arguments hold a float written as an
 * integer: a tool-error result (`-41008 ctrlrun.unrepresentable_argument` with its pointer, see
 * {@link refusalResult}), else `null`. `message` is `JSON.parse(text)`. The web handler does not
 * know the tool's `outputSchema`, so the fields are in `_meta["com.ctrlrun/refusal"]` only unless
 * `structured` says the tool has none.
 */
export function floatRefusal(
  message: unknown,
  text: string,
  options: { structured?: boolean } = {},
): { jsonrpc: '2.0'; id: unknown; result: CallToolResult } | null {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return null;
  const m = message as { method?: unknown; id?: unknown };
  if (m.method !== 'tools/call' || m.id === undefined) return null;
  const pointer = floatArgumentPointer(text);
  if (pointer === null) return null;
  const refusal = gatewayError(
    'unrepresentableArgument',
    `tools/call: the argument at ${pointer || '/'} is written as a float (a fraction or an exponent); use an integer (minor units) or a decimal string`,
    { pointer },
  );
  return { jsonrpc: '2.0', id: m.id, result: refusalResult(refusal, { structured: options.structured ?? false }) };
}
