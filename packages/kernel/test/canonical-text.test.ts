// canonicalizeJsonText, the one-pass fast path for hashing stored documents, against the full path
// (canonicalJson(parseJson(text))): on any spelling of any document, a result from the fast path is
// the full path's text, and every text the full path refuses is one the fast path leaves to it.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, isWellFormedString, jsonEquals, parseJson, type JsonObject, type JsonValue } from '../src/canonical.js';
import { canonicalizeJsonText, hashJsonText } from '../src/canonical-text.js';
import { hashDocument } from '../src/hash.js';

/** A document as a tree, so that a spelling can hold what no JS value can: duplicate keys, floats, -0. */
type Node =
  | { readonly t: 'str'; readonly v: string }
  | { readonly t: 'int'; readonly v: bigint }
  | { readonly t: 'lit'; readonly v: 'true' | 'false' | 'null' }
  | { readonly t: 'arr'; readonly items: readonly Node[] }
  | { readonly t: 'obj'; readonly members: readonly (readonly [string, Node])[] };

const chars = fc.oneof(
  // ASCII-only documents are hashed from the text's own bytes; others through their text.
  { weight: 8, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 8 }) },
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 4 }) },
  // Characters the canonical form escapes or treats specially: controls, quote, backslash, slash,
  // U+2028, U+007F, a surrogate pair, lone surrogates (refused), U+E000 and U+FFFF (code-point order).
  {
    weight: 3,
    arbitrary: fc
      .array(
        fc.constantFrom(
          '\u0000',
          '\u0008',
          '\t',
          '\n',
          '\u000b',
          '\f',
          '\r',
          '\u001f',
          '"',
          '\\',
          '/',
          '\u2028',
          '\u007f',
          'A',
          'é',
          '😀',
          '\ud800',
          '\udfff',
          '\ue000',
          '\uffff',
        ),
        { maxLength: 4 },
      )
      .map((a) => a.join('')),
  },
);
const keys = fc.oneof(chars, fc.constantFrom('__proto__', 'constructor', 'seq', 'prev_hash', 'a', 'b', 'B', ''));

const nodeArb: fc.Arbitrary<Node> = fc.letrec<{ node: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    chars.map((v): Node => ({ t: 'str', v })),
    fc
      .oneof(
        fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }),
        fc.bigInt({ min: -1000n, max: 1000n }),
        fc.constantFrom(0n, 2n ** 53n - 1n, 2n ** 53n, 10n ** 400n - 1n, 10n ** 400n),
      )
      .map((v): Node => ({ t: 'int', v })),
    fc.constantFrom('true', 'false', 'null').map((v): Node => ({ t: 'lit', v })),
    fc.array(tie('node'), { maxLength: 4 }).map((items): Node => ({ t: 'arr', items })),
    // Members may repeat a key: a duplicate the full parse refuses.
    fc.array(fc.tuple(keys, tie('node')), { maxLength: 5 }).map((members): Node => ({ t: 'obj', members })),
  ),
})).node;

/** How a document is spelled: a tape of choices read in turn. */
interface Spelling {
  /** Which kinds of respelling may appear: whitespace and key order (canonical tokens), or also escapes, number forms, damage. */
  readonly tokens: boolean;
  readonly tape: readonly number[];
}

function spell(node: Node, spelling: Spelling): string {
  let at = 0;
  const pick = (n: number): number => {
    const v = spelling.tape[at % spelling.tape.length] ?? 0;
    at++;
    return v % n;
  };
  const ws = (): string => (pick(4) === 0 ? ([' ', '\n', '\t', '\r', '  \n '][pick(5)] as string) : '');
  const str = (s: string): string => {
    if (!spelling.tokens || pick(2) !== 0) return JSON.stringify(s);
    // Another spelling of the same string: escapes JSON.stringify would not write.
    let out = '"';
    for (const ch of s) {
      const code = ch.charCodeAt(0);
      const choice = pick(6);
      if (choice === 0) out += [...ch].length === 1 && ch.length === 1 ? `\\u${code.toString(16).padStart(4, '0')}` : JSON.stringify(ch).slice(1, -1);
      else if (choice === 1 && ch.length === 1) out += `\\u${code.toString(16).padStart(4, '0').toUpperCase()}`;
      else if (choice === 2 && ch.length === 2) out += `\\u${ch.charCodeAt(0).toString(16)}\\u${ch.charCodeAt(1).toString(16)}`;
      else if (choice === 3 && ch === '/') out += '\\/';
      else out += JSON.stringify(ch).slice(1, -1);
    }
    return `${out}"`;
  };
  const int = (v: bigint): string => {
    const d = v.toString();
    if (!spelling.tokens) return d;
    switch (pick(12)) {
      case 0:
        return `${d}.0`;
      case 1:
        return `${d}e0`;
      case 2:
        return `${d}E+2`;
      case 3:
        return v === 0n ? '-0' : d;
      case 4:
        return `0${d.replace('-', '')}`;
      case 5:
        return `${d}.5`;
      default:
        return d;
    }
  };
  const walk = (n: Node): string => {
    switch (n.t) {
      case 'str':
        return str(n.v);
      case 'int':
        return int(n.v);
      case 'lit':
        return n.v;
      case 'arr':
        return `[${ws()}${n.items.map((i) => `${walk(i)}${ws()}`).join(`,${ws()}`)}]`;
      case 'obj': {
        const members = n.members.map(([k, v]) => `${str(k)}${ws()}:${ws()}${walk(v)}`);
        // The order: as given, reversed, or sorted as the canonical form sorts.
        const order = pick(3);
        if (order === 1) members.reverse();
        return `{${ws()}${members.join(`${ws()},${ws()}`)}${ws()}}`;
      }
    }
  };
  let text = `${ws()}${walk(node)}${ws()}`;
  if (spelling.tokens && pick(10) === 0) {
    // Damage: cut the text, or add a stray character.
    const cut = pick(text.length + 1);
    text = pick(2) === 0 ? text.slice(0, cut) : `${text.slice(0, cut)}${[',', '}', ']', 'x', '"', '\u0001'][pick(6)]}${text.slice(cut)}`;
  }
  return text;
}

/** Whether the tree holds what the full parse refuses whatever the spelling. */
function refusedAnyway(n: Node): boolean {
  switch (n.t) {
    case 'str':
      return !isWellFormedString(n.v);
    case 'int':
      return n.v.toString().replace('-', '').length > 400;
    case 'lit':
      return false;
    case 'arr':
      return n.items.some(refusedAnyway);
    case 'obj':
      return new Set(n.members.map(([k]) => k)).size !== n.members.length || n.members.some(([k, v]) => !isWellFormedString(k) || refusedAnyway(v));
  }
}

function fullPath(text: string): { canonical: string; value: JsonValue } | { error: string } {
  try {
    const value = parseJson(text);
    return { canonical: canonicalJson(value), value };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

const spellingArb = (tokens: boolean): fc.Arbitrary<Spelling> =>
  fc.record({ tokens: fc.constant(tokens), tape: fc.array(fc.nat(), { minLength: 1, maxLength: 64 }) });

/** The same value, and of the same JS type (a safe integer a number, beyond it a bigint). */
function sameValue(a: unknown, b: unknown): boolean {
  if (typeof a !== typeof b) return false;
  return jsonEquals(a, b);
}

describe('canonicalizeJsonText: the fast path agrees with the full parse and rewrite', () => {
  it('property: on any spelling (whitespace, key order, escapes, number forms, duplicate keys, damage) a result equals the full path, and a refusal is left to it', () => {
    fc.assert(
      fc.property(nodeArb, spellingArb(true), fc.array(keys, { maxLength: 3 }), (node, spelling, wanted) => {
        const text = spell(node, spelling);
        const fast = canonicalizeJsonText(text, { fields: wanted });
        const hashed = hashJsonText(text, { fields: wanted });
        const full = fullPath(text);
        expect(hashed === null).toBe(fast === null);
        if (fast === null) return; // the full path decides, as it always has
        if ('error' in full) throw new Error(`the fast path read ${JSON.stringify(text)} but the full path refuses it: ${full.error}`);
        expect(fast.canonical).toBe(full.canonical);
        expect(hashed?.hash).toBe(hashDocument(full.value));
        expect(hashed?.fields).toEqual(fast.fields);
        if (node.t === 'obj' && typeof full.value === 'object' && full.value !== null && !Array.isArray(full.value)) {
          const doc = full.value as JsonObject;
          expect(fast.fields).toHaveLength(wanted.length);
          wanted.forEach((k, w) => {
            const field = fast.fields?.[w];
            if (Object.prototype.hasOwnProperty.call(doc, k)) expect(sameValue(field, doc[k])).toBe(true);
            else expect(field).toBeUndefined();
          });
        } else expect(fast.fields).toBeNull();
      }),
      { numRuns: 3000 },
    );
  });

  it('property: a document spelled with canonical tokens (any key order, any whitespace) takes the fast path, unless the full path refuses it', () => {
    fc.assert(
      fc.property(nodeArb, spellingArb(false), (node, spelling) => {
        const text = spell(node, spelling);
        const fast = canonicalizeJsonText(text);
        const full = fullPath(text);
        if (refusedAnyway(node)) {
          expect(fast).toBeNull();
          expect(full).toHaveProperty('error');
          return;
        }
        expect(fast).not.toBeNull();
        expect(fast?.canonical).toBe((full as { canonical: string }).canonical);
        expect(hashJsonText(text)?.hash).toBe(hashDocument((full as { value: JsonValue }).value));
      }),
      { numRuns: 2000 },
    );
  });

  it('leaves every spelling the canonical form does not use to the full path, which rewrites or refuses it', () => {
    const cases: [string, string | null][] = [
      // Valid JSON, spelled otherwise: the full path rewrites it.
      ['{"a":"\\u0041"}', '{"a":"A"}'],
      ['{"a":"\\/"}', '{"a":"/"}'],
      ['{"a":"\\u001F"}', '{"a":"\\u001f"}'],
      ['{"a":"\\u000a"}', '{"a":"\\n"}'],
      ['["\\u0008"]', '["\\b"]'],
      ['["\\u0009"]', '["\\t"]'],
      ['["\\u000c"]', '["\\f"]'],
      ['["\\u000d"]', '["\\r"]'],
      ['["\\u0022"]', '["\\""]'],
      ['["\\u005c"]', '["\\\\"]'],
      ['["\\u007f"]', '["\u007f"]'],
      ['["\\ud83d\\ude00"]', '["😀"]'],
      // What the full path refuses.
      ['{"a":1.0}', null],
      ['{"a":1e2}', null],
      ['{"a":-0}', null],
      ['{"a":01}', null],
      ['{"a":1,"a":1}', null],
      ['{"b":1,"a":2,"b":1}', null],
      ['["\\ud800"]', null],
      ['["\ud800"]', null],
      ['["\udc00\ud800"]', null],
      [`[${'9'.repeat(401)}]`, null],
      ['{"a":1', null],
      ['{"a":1}x', null],
      ['{"a":"\u0001"}', null],
    ];
    for (const [text, canonical] of cases) {
      expect(canonicalizeJsonText(text), text).toBeNull();
      const full = fullPath(text);
      if (canonical === null) expect(full, text).toHaveProperty('error');
      else expect(full, text).toEqual({ canonical, value: expect.anything() });
    }
  });

  it('rewrites key order and whitespace itself, and keeps an already canonical text as it is', () => {
    expect(canonicalizeJsonText(' { "b" : [ 1 , {"d":null,"c":true} ] , "a" : "x" } ')?.canonical).toBe('{"a":"x","b":[1,{"c":true,"d":null}]}');
    const canonical = '{"__proto__":{"k":-12},"a":[],"b":"\\"\\\\\\n\\u0001é😀","c":{}}';
    expect(canonicalJson(parseJson(canonical))).toBe(canonical);
    expect(canonicalizeJsonText(canonical)?.canonical).toBe(canonical);
    // Code-point order, not UTF-16 order: a key above U+FFFF sorts after one at U+FFFF.
    expect(canonicalizeJsonText('{"😀":1,"\uffff":2}')?.canonical).toBe('{"\uffff":2,"😀":1}');
    expect(canonicalizeJsonText('{"\uffff":2,"😀":1}')?.canonical).toBe('{"\uffff":2,"😀":1}');
  });

  it('gives the asked-for fields of the root as the full parse reads them (in the order asked; integers beyond 2^53 as bigint)', () => {
    const asked = ['seq', 'n', '__proto__', 's', 'z', 'f', 'absent', 'n', 'w'];
    const r = canonicalizeJsonText('{"z":{"b":1,"a":2},"seq":9007199254740993,"n":7,"__proto__":"p","s":"\\"q\\"","f":false,"w":[ 1 ]}', { fields: asked });
    expect(r).not.toBeNull();
    const [seq, n, proto, s, z, f, absent, again, w] = r?.fields ?? [];
    expect(seq).toBe(9007199254740993n);
    expect(n).toBe(7);
    expect(proto).toBe('p');
    expect(s).toBe('"q"');
    expect(jsonEquals(z, { a: 2, b: 1 })).toBe(true);
    expect(Object.getPrototypeOf(z)).toBeNull();
    expect(f).toBe(false);
    expect(absent).toBeUndefined();
    expect(again).toBe(7);
    expect(w).toEqual([1]);
    expect(canonicalizeJsonText('[1]', { fields: ['seq'] })?.fields).toBeNull();
  });

  it('leaves nesting past the full parse’s limit to it', () => {
    const deep = `${'['.repeat(600)}${']'.repeat(600)}`;
    expect(canonicalizeJsonText(deep)).toBeNull();
    expect(fullPath(deep)).toHaveProperty('error');
    const fine = `${'['.repeat(100)}${']'.repeat(100)}`;
    expect(canonicalizeJsonText(fine)?.canonical).toBe(fine);
  });

  it('reads each document on its own: a document read after one the pass gave up on is read in full', () => {
    expect(canonicalizeJsonText('{"b":"\\u0041","a":1}')).toBeNull();
    expect(canonicalizeJsonText('{"b":"x","a":1}')?.canonical).toBe('{"a":1,"b":"x"}');
    // The same keys in the same order, one time with a duplicate: a remembered order never hides it.
    expect(canonicalizeJsonText('{"c":1,"b":2,"a":3}')?.canonical).toBe('{"a":3,"b":2,"c":1}');
    expect(canonicalizeJsonText('{"c":1,"b":2,"c":3}')).toBeNull();
    expect(canonicalizeJsonText('{"c":4,"b":5,"a":6}')?.canonical).toBe('{"a":6,"b":5,"c":4}');
    // A document larger than what the reader keeps between reads, then small ones again.
    const items = Array.from({ length: 100_000 }, (_, i) => `{"b":${i},"a":"${'x'.repeat(i % 7)}"}`);
    const big = `[ ${items.join(', ')} ]`;
    expect(canonicalizeJsonText(big)?.canonical).toBe(canonicalJson(parseJson(big)));
    expect(hashJsonText(big)?.hash).toBe(hashDocument(parseJson(big)));
    expect(canonicalizeJsonText('{"b":[ 1 ],"a":{"d":0,"c":1}}')?.canonical).toBe('{"a":{"c":1,"d":0},"b":[1]}');
    expect(hashJsonText('{"b":[ 1 ],"a":{"d":0,"c":1}}')?.hash).toBe(hashDocument(parseJson('{"a":{"c":1,"d":0},"b":[1]}')));
  });
});
