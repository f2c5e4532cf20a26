import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonEquals } from '../src/canonical.js';
import { parseJson, resultToJson } from '@ctrlrun/kernel';
import { resultFromJson } from '../src/effects.js';

/** Keys an agent might choose to hide behind: prototype names, a bigint tag, anything else. */
const KEY = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '__bigint__7'),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
);

/** Strings that look like the old bigint tag (and ones that broke its regex), plus any well-formed text. */
const STRING = fc.oneof(
  fc.constantFrom('__bigint__12', '__bigint__-3', '__bigint__', 'x","__bigint__1', '"__bigint__5"', '\\"__bigint__9\\"'),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary-ascii' }),
);

/** Any JSON value a result can hold: integers of any size (to 300 digits), fractions, any strings and keys. */
const RESULT = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    STRING,
    fc.maxSafeInteger(),
    fc.bigInt({ min: -(10n ** 300n), max: 10n ** 300n }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    // Object.fromEntries defines keys as data, so `__proto__` is an own key here.
    fc.uniqueArray(fc.tuple(KEY, tie('value')), { maxLength: 5, selector: ([k]) => k }).map((entries) => Object.fromEntries(entries)),
  ),
})).value;

/** Every object's own keys, in order, at every path: what a view must show. */
function keysAt(v: unknown, path = '$', out: string[] = []): string[] {
  if (Array.isArray(v)) v.forEach((x, i) => keysAt(x, `${path}[${i}]`, out));
  else if (typeof v === 'object' && v !== null) {
    out.push(`${path}: ${JSON.stringify(Object.keys(v))}`);
    for (const k of Object.keys(v)) keysAt((v as Record<string, unknown>)[k], `${path}.${k}`, out);
  }
  return out;
}

describe('stored executor results (result_json)', () => {
  it('a string holding the old bigint tag comes back as that string, never a number', () => {
    for (const s of ['__bigint__12', '__bigint__-3']) {
      const text = resultToJson({ id: s, list: [s] });
      expect(resultFromJson(text)).toEqual({ id: s, list: [s] });
    }
  });

  it('a string that broke the old tag regex still renders valid JSON', () => {
    const tricky = 'x","__bigint__1';
    const text = resultToJson({ note: tricky });
    expect(() => JSON.parse(text)).not.toThrow();
    expect(resultFromJson(text)).toEqual({ note: tricky });
  });

  it('big integers are written as their digits (no tag in storage) and read back exact', () => {
    const big = 2n ** 80n;
    const text = resultToJson({ n: big, small: 5n });
    expect(text).toBe('{"n":1208925819614629174706176,"small":5}');
    expect(resultFromJson(text)).toEqual({ n: big, small: 5 });
  });

  it('__proto__, constructor and prototype keys are kept as data', () => {
    const result = JSON.parse('{"__proto__":{"admin":true},"constructor":1,"prototype":[2],"ok":true}') as unknown;
    const text = resultToJson(result);
    expect(text).toBe('{"__proto__":{"admin":true},"constructor":1,"prototype":[2],"ok":true}');
    const back = resultFromJson(text) as Record<string, unknown>;
    expect(Object.keys(back)).toEqual(['__proto__', 'constructor', 'prototype', 'ok']);
    expect(({} as Record<string, unknown>)['admin']).toBeUndefined();
  });

  it('values JSON cannot hold still render, and a lone surrogate becomes U+FFFD', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic['self'] = cyclic;
    expect(resultFromJson(resultToJson(cyclic))).toEqual({ a: 1, self: '[Circular]' });
    expect(resultToJson({ when: new Date(Date.UTC(2026, 0, 1)), n: Number.NaN, u: undefined, x: [undefined] })).toBe(
      '{"when":"2026-01-01T00:00:00.000Z","n":"NaN","u":null,"x":[null]}',
    );
    expect(resultFromJson(resultToJson({ s: 'a\ud800b' }))).toEqual({ s: 'a\ufffdb' });
    expect(resultToJson(new Map([[1, 2]]))).toBe('"[object Map]"');
    const hostile = {
      toString: () => {
        throw new Error('no');
      },
    };
    expect(resultToJson(Object.create(hostile) as unknown)).toBe('{"repr":"[object Object]"}');
  });

  it('property: any JSON value (bigints, tag-like strings, prototype keys) round-trips exactly', () => {
    fc.assert(
      fc.property(RESULT, (value) => {
        const text = resultToJson(value);
        const back = resultFromJson(text);
        expect(jsonEquals(back, value)).toBe(true);
        expect(keysAt(back)).toEqual(keysAt(value));
        // The stored text is JSON any reader accepts.
        expect(() => JSON.parse(text)).not.toThrow();
        expect(parseJson(text, { floats: 'allow' })).toBeDefined();
      }),
      { numRuns: 400 },
    );
  });

  it('an integer beyond the 400 digits a reader accepts is stored as its digit string, still readable', () => {
    const huge = 10n ** 400n;
    expect(resultFromJson(resultToJson({ n: huge, m: 10n ** 399n }))).toEqual({ n: huge.toString(), m: 10n ** 399n });
  });

  it('a value shared by two keys is data both times; only a cycle is cut', () => {
    const address = { city: 'Lyon' };
    const list = [1, 2];
    expect(resultFromJson(resultToJson({ from: address, to: address, a: list, b: [list, list] }))).toEqual({
      from: address,
      to: address,
      a: list,
      b: [list, list],
    });
  });

  it('no stored result: null', () => {
    expect(resultFromJson(null)).toBeNull();
    expect(resultToJson(undefined)).toBe('null');
  });
});
