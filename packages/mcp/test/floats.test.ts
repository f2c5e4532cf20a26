// floatArgumentPointer: the first float written as an integer in a tools/call's arguments, by its
// JSON pointer, however the message is laid out; never a number inside a string, never outside
// the arguments.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { floatArgumentPointer, floatRefusal, MAX_DEPTH } from '@ctrlrun/mcp';

type Tree = null | boolean | number | string | Tree[] | { [k: string]: Tree };
const leaf = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.string({ unit: fc.constantFrom('a', '1', '.', 'e', '"', '\\', '/', '~', ' ', '\n', 'é') }),
);
const tree: fc.Arbitrary<Tree> = fc.letrec<{ t: Tree }>((tie) => ({
  t: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.array(tie('t'), { maxLength: 4 }),
    fc.dictionary(fc.string({ unit: fc.constantFrom('a', 'b', '/', '~', '.', '1') }), tie('t'), { maxKeys: 4 }),
  ),
})).t;
const seg = (k: string) => k.replace(/~/g, '~0').replace(/\//g, '~1');
const space = fc.constantFrom('', ' ', '\n  ', '\t');

/** Serialises `t` with whitespace; the `target`-th integer leaf (in order) is written as `<n>.0`. Returns the text and that leaf's pointer. */
function write(t: Tree, target: number, ws: string): { text: string; pointer: string | null } {
  let n = 0;
  let pointer: string | null = null;
  const go = (v: Tree, at: string): string => {
    if (typeof v === 'number') return n++ === target ? ((pointer = at), `${v}.0`) : String(v);
    if (Array.isArray(v)) return `[${ws}${v.map((x, i) => go(x, `${at}/${i}`)).join(`,${ws}`)}${ws}]`;
    if (v !== null && typeof v === 'object')
      return `{${ws}${Object.entries(v)
        .map(([k, x]) => `${JSON.stringify(k)}${ws}:${ws}${go(x, `${at}/${seg(k)}`)}`)
        .join(`,${ws}`)}${ws}}`;
    return JSON.stringify(v);
  };
  const text = go(t, '');
  return { text, pointer };
}

const message = (args: string, ws: string, extra = '') =>
  `{${ws}"jsonrpc":"2.0",${ws}"id":1,"method":"tools/call",${extra}"params":${ws}{"_meta":{"n":1.5},"name":"t",${ws}"arguments":${ws}${args}${ws}}}`;

describe('floatArgumentPointer', () => {
  it('finds the float written as an integer by its pointer in any arguments object (property)', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ unit: fc.constantFrom('a', '/', '~', '.') }), tree, { maxKeys: 5 }), fc.nat(20), space, (args, target, ws) => {
        const { text, pointer } = write(args, target, ws);
        const full = message(text, ws, `"x":${ws}2.5,`);
        expect(() => JSON.parse(full)).not.toThrow();
        expect(floatArgumentPointer(full)).toBe(pointer);
      }),
    );
  });

  it('exponents count; floats outside the arguments and digits inside strings do not', () => {
    expect(floatArgumentPointer(message('{"a":[1,2e3]}', ''))).toBe('/a/1');
    expect(floatArgumentPointer(message('{"a":"1.0","b":-0.5}', ''))).toBe('/b');
    expect(floatArgumentPointer(message('{"a":"2.0"}', ' '))).toBeNull();
    expect(floatArgumentPointer('{"params":{"arguments":{"a/b":{"c~d":1E2}}}}')).toBe('/a~1b/c~0d');
    expect(floatArgumentPointer('{"params":{"other":{"arguments":{"a":1.0}}}}')).toBeNull();
    // Both copies of a repeated key are looked at (JSON.parse keeps the last).
    expect(floatArgumentPointer('{"params":{"arguments":{"a":1},"arguments":{"b":1.0}}}')).toBe('/b');
  });

  it('refuses nesting deeper than MAX_DEPTH with a RangeError, not a stack overflow', () => {
    const deep = `{"params":{"arguments":{"a":${'['.repeat(MAX_DEPTH + 10)}${']'.repeat(MAX_DEPTH + 10)}}}}`;
    expect(() => floatArgumentPointer(deep)).toThrow(RangeError);
  });

  it('floatRefusal answers a tools/call request only, echoing its id', () => {
    const text = '{"jsonrpc":"2.0","id":"r-1","method":"tools/call","params":{"name":"t","arguments":{"amount":2000.0}}}';
    const fields = { code: -41008, error: 'ctrlrun.unrepresentable_argument', pointer: '/amount' };
    const content = [{ type: 'text', text: expect.stringMatching(/^ctrlrun refused this call\. The tool was not called.*\/amount/) }];
    expect(floatRefusal(JSON.parse(text), text)).toEqual({
      jsonrpc: '2.0',
      id: 'r-1',
      result: { isError: true, content, _meta: { 'com.ctrlrun/refusal': fields } },
    });
    expect(floatRefusal(JSON.parse(text), text, { structured: true })).toEqual({
      jsonrpc: '2.0',
      id: 'r-1',
      result: { isError: true, content, structuredContent: fields, _meta: { 'com.ctrlrun/refusal': fields } },
    });
    const notification = '{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"amount":2000.0}}}';
    expect(floatRefusal(JSON.parse(notification), notification)).toBeNull();
    const other = '{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"arguments":{"amount":2000.0}}}';
    expect(floatRefusal(JSON.parse(other), other)).toBeNull();
  });
});
