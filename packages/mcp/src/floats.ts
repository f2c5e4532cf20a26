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
    if (!unrepresentableSpelling(spelling)) return false;
    found = pointer;
    return true;
  });
  return found;
}

/**
 * Whether `spelling` (a value as written in JSON text) is a number no action can carry: one with a
 * fraction or an exponent (`2000.0`, `2e3`), an integer beyond ±(2^53−1) (which `JSON.parse`
 * rounds), or `-0`. Strings, literals and containers are not.
 */
export function unrepresentableSpelling(spelling: string): boolean {
  if (!/^-?\d/.test(spelling)) return false;
  return /[.eE]/.test(spelling) || spelling === '-0' || !Number.isSafeInteger(Number(spelling));
}

/** Whether the parsed `value` is a number no action can carry (a float, an unsafe integer, -0, a bigint). */
function unrepresentableValue(value: unknown): value is number | bigint {
  return typeof value === 'bigint' || (typeof value === 'number' && (!Number.isSafeInteger(value) || Object.is(value, -0)));
}

/**
 * The JSON pointer of the first number in `args` (a parsed arguments object) that no action can
 * carry, or `null`; for the calls no message text came with (a float such as 1.5 survives
 * `JSON.parse`, `2000.0` does not: the transports look at the text for that).
 */
export function unrepresentablePointer(value: unknown, pointer = ''): string | null {
  if (unrepresentableValue(value)) return pointer;
  if (typeof value !== 'object' || value === null) return null;
  for (const [k, v] of Array.isArray(value) ? value.entries() : Object.entries(value)) {
    const p = unrepresentablePointer(v, `${pointer}/${typeof k === 'number' ? k : segment(k)}`);
    if (p !== null) return p;
  }
  return null;
}

/**
 * The stand-in recorded for arguments no action can carry (the receipt of a `-41008` refusal):
 * `args` with every number no action can carry replaced by a string holding its spelling — as
 * the agent wrote it in `text` (the JSON-RPC message `args` was parsed from) where that is known,
 * else as JavaScript writes the parsed number. Everything else is kept, so the recorded action's
 * hash can be computed again from the message: `{"amount":2000.0,"id":"t"}` is recorded as
 * `{"amount":"2000.0","id":"t"}`.
 */
export function spelledArguments(args: Record<string, unknown>, text: string | null = null): Record<string, unknown> {
  // The spelling of each unrepresentable number by pointer (the last arguments object and the
  // last of a repeated key win, as in JSON.parse).
  const spellings = new Map<string, string>();
  if (text !== null) {
    scanArguments(
      text,
      (pointer, spelling) => {
        if (unrepresentableSpelling(spelling)) spellings.set(pointer, spelling);
        else spellings.delete(pointer);
      },
      () => spellings.clear(),
    );
  }
  const copy = (value: unknown, pointer: string): unknown => {
    if (typeof value === 'number' || typeof value === 'bigint') {
      const spelling = spellings.get(pointer);
      if (spelling !== undefined) return spelling;
      return unrepresentableValue(value) ? (Object.is(value, -0) ? '-0' : String(value)) : value;
    }
    if (Array.isArray(value)) return value.map((v, i) => copy(v, `${pointer}/${i}`));
    if (typeof value !== 'object' || value === null) return value;
    // fromEntries: a key named __proto__ stays an own key.
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, copy(v, `${pointer}/${segment(k)}`)]));
  };
  return copy(args, '') as Record<string, unknown>;
}

/**
 * How a transport hands the gateway a `tools/call` whose arguments hold a number no action can
 * carry, written as JSON.parse erases it (`2000.0`): `message` is `JSON.parse(text)`, `headers`
 * the request's (none over stdio). Resolves to the JSON-RPC response to send, or `null` when
 * `message` is no such call (it goes on to the server). The gateway's `Gateway.refuseFloats`
 * records the refusal's denied receipt.
 */
export type FloatArgumentHandler = (
  message: unknown,
  text: string,
  headers?: Readonly<Record<string, string | string[] | undefined>>,
) => Promise<Record<string, unknown> | null>;

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
