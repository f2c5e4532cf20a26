import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalBytes, canonicalJson, createAction, InvalidArgument, parseJson } from '@ctrlrun/kernel';
import { compareCodePoints, deepCopy, frozenWithText, jsonEquals } from '../src/canonical.js';

/** Plain JSON data with safe integers, strings (well-formed), booleans and null. */
const jsonData = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.string({ unit: 'grapheme' }),
    fc.maxSafeInteger().filter((n) => !Object.is(n, -0)),
    fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string({ unit: 'grapheme', maxLength: 6 }), tie('value'), { maxKeys: 4 }),
  ),
})).value;

function shuffleKeys(v: unknown, seed: number): unknown {
  if (Array.isArray(v)) return v.map((x, i) => shuffleKeys(x, seed + i));
  if (v && typeof v === 'object') {
    const keys = Object.keys(v);
    const order = keys.map((k, i) => [k, (i * 7919 + seed * 104729) % (keys.length + 1)] as const).sort((a, b) => a[1] - b[1]);
    const o: Record<string, unknown> = {};
    for (const [k] of order) o[k] = shuffleKeys((v as Record<string, unknown>)[k], seed + 1);
    return o;
  }
  return v;
}

describe('canonical form (T7)', () => {
  it('test_T7_canonical_form_is_exactly_the_specified_serialization', () => {
    const a = createAction({
      name: 'stripe.refund',
      arguments: { payment_id: 'txn_8231', amount: 2000, currency: 'EUR' },
      principal: { agent: 'refund-agent', user: 'ana@example.com' },
      resource: 'payment:txn_8231',
    });
    expect(a.canonical).toBe(
      '{"arguments":{"amount":2000,"currency":"EUR","payment_id":"txn_8231"},"environment":"production","name":"stripe.refund","principal":{"agent":"refund-agent","user":"ana@example.com"},"resource":"payment:txn_8231","schema":"ctrlrun.action/v1"}',
    );
    expect(() => createAction({ name: 'stripe.refund', arguments: { amount: 20.5 }, principal: { agent: 'a' } })).toThrow(
      "float is not an allowed argument type at arguments.amount: use integer minor units (amount=200000) or a decimal string ('2000.00')",
    );
  });

  it('test_T7_nested_dicts_are_sorted_recursively', () => {
    expect(canonicalJson({ b: { z: 1, a: [{ y: 1, x: 2 }] }, a: null })).toBe('{"a":null,"b":{"a":[{"x":2,"y":1}],"z":1}}');
  });

  it('sorts keys by code point, not by UTF-16 code unit', () => {
    // U+1F600 (a surrogate pair in UTF-16) sorts after U+FF5E by code point, before it by code unit.
    const text = canonicalJson({ '\u{1F600}': 1, '\uFF5E': 2 });
    expect(text).toBe('{"\uFF5E":2,"\u{1F600}":1}');
    expect(compareCodePoints('\u{1F600}', '\uFF5E')).toBeGreaterThan(0);
  });

  it('property: keys come out in UTF-8 byte order whatever order they went in, surrogate pairs and U+E000–U+FFFF mixed', () => {
    // A few keys are put in order by insertion on code points; more are sorted natively (UTF-16
    // order) and checked pair by pair: the pairs this alphabet makes are exactly where the two
    // orders differ, and up to 40 keys take both paths.
    const bytes = new TextEncoder();
    const byUtf8 = (a: string, b: string): number => {
      const x = bytes.encode(a);
      const y = bytes.encode(b);
      for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
      return x.length - y.length;
    };
    const key = fc
      .array(fc.constantFrom('a', 'z', '\u00e9', '\ue000', '\uff5e', '\uffff', '\u{10000}', '\u{1f600}', '\u{10ffff}'), { minLength: 0, maxLength: 3 })
      .map((parts) => parts.join(''));
    fc.assert(
      fc.property(fc.uniqueArray(key, { maxLength: 40 }), (keys) => {
        const o: Record<string, number> = {};
        keys.forEach((k, i) => (o[k] = i));
        const written = Object.keys(parseJson(canonicalJson(o)) as object);
        expect(written).toEqual([...keys].sort(byUtf8));
      }),
      { numRuns: 500 },
    );
  });

  it('escapes only quote, backslash and control characters, and writes non-ASCII raw', () => {
    expect(canonicalJson({ s: '"\\\b\f\n\r\t\u0001\u001f é € \u2028 \u007f' })).toBe('{"s":"\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f é € \u2028 \u007f"}');
  });

  it('property: a string or key is written exactly as JSON.stringify writes it, for every well-formed string', () => {
    // Code units near every escape boundary: control characters, quote, backslash, DEL, the line separators, surrogate pairs.
    const unit = fc.oneof(
      fc.integer({ min: 0, max: 0x7f }).map((c) => String.fromCharCode(c)),
      fc.constantFrom('\u2028', '\u2029', '\u00e9', '\u20ac', '\ud83d\ude00', '\ufffd', '\uffff'),
    );
    fc.assert(
      fc.property(
        fc.array(unit, { maxLength: 40 }).map((a) => a.join('')),
        (s) => {
          expect(canonicalJson(s)).toBe(JSON.stringify(s));
          expect(canonicalJson({ [s]: s })).toBe(`{${JSON.stringify(s)}:${JSON.stringify(s)}}`);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('keeps integers exact at any magnitude and refuses unsafe numbers rather than rounding', () => {
    expect(canonicalJson({ n: 2n ** 70n, m: -(2n ** 64n) })).toBe('{"m":-18446744073709551616,"n":1180591620717411303424}');
    expect(() => canonicalJson({ n: 2 ** 60 })).toThrow(InvalidArgument);
    expect(() => canonicalJson({ n: 2 ** 60 })).toThrow('value.n');
    expect(parseJson('{"n":1180591620717411303424}')).toEqual({ n: 1180591620717411303424n });
    expect(jsonEquals(5, 5n)).toBe(true);
    expect(jsonEquals(true, 1)).toBe(false);
  });

  it('refuses everything that is not JSON data, naming the path', () => {
    class Thing {}
    const bad: [unknown, string][] = [
      [{ a: [1, { b: 0.5 }] }, 'arguments.a[1].b'],
      [{ a: Number.NaN }, 'arguments.a'],
      [{ a: Infinity }, 'arguments.a'],
      [{ a: -0 }, 'arguments.a'],
      [{ a: undefined }, 'arguments.a'],
      [{ a: () => 1 }, 'arguments.a'],
      [{ a: Symbol('s') }, 'arguments.a'],
      [{ a: new Date(0) }, 'arguments.a'],
      [{ a: new Map() }, 'arguments.a'],
      [{ a: new Set() }, 'arguments.a'],
      [{ a: new Uint8Array(2) }, 'arguments.a'],
      [{ a: new Thing() }, 'arguments.a'],
      [{ a: 'x\uD800y' }, 'arguments.a'],
      [{ ['k\uDC00']: 1 }, 'arguments'],
      // eslint-disable-next-line no-sparse-arrays
      [{ a: [1, , 3] }, 'arguments.a[1]'],
    ];
    for (const [args, path] of bad) {
      let err: unknown;
      try {
        createAction({ name: 'x', arguments: args as Record<string, unknown>, principal: { agent: 'a' } });
      } catch (e) {
        err = e;
      }
      expect(err, String(path)).toBeInstanceOf(InvalidArgument);
      expect((err as Error).message).toContain(path);
    }
  });

  it('keeps __proto__ as data', () => {
    const parsed = parseJson('{"__proto__":{"polluted":1}}') as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    expect(canonicalJson(parsed)).toBe('{"__proto__":{"polluted":1}}');
  });

  it('property: canonical bytes are stable under key order', () => {
    fc.assert(
      fc.property(jsonData, fc.nat(1000), (v, seed) => {
        expect(canonicalBytes(shuffleKeys(v, seed))).toEqual(canonicalBytes(v));
      }),
    );
  });

  it('property: canonical text parses back to equal data and re-serialises identically', () => {
    fc.assert(
      fc.property(jsonData, (v) => {
        const text = canonicalJson(v);
        const back = parseJson(text);
        expect(jsonEquals(back, v)).toBe(true);
        expect(canonicalJson(back)).toBe(text);
      }),
    );
  });

  it('property: a non-integer number at any depth is refused', () => {
    const frac = fc.double({ noNaN: false }).filter((d) => !Number.isSafeInteger(d) || Object.is(d, -0));
    const withFloat = fc.tuple(jsonData, frac, fc.array(fc.oneof(fc.string({ maxLength: 3 }), fc.nat(3)), { maxLength: 4 })).map(([base, f, path]) => {
      let holder: unknown = f;
      for (const step of path.reverse())
        holder = typeof step === 'number' ? Array.from({ length: step + 1 }, (_, i) => (i === step ? holder : base)) : { [step]: holder, other: base };
      return { x: holder };
    });
    fc.assert(
      fc.property(withFloat, (v) => {
        expect(() => canonicalJson(v)).toThrow(InvalidArgument);
      }),
    );
  });

  it('property: the strict parser never crashes on arbitrary text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }), (s) => {
        try {
          parseJson(s);
        } catch (e) {
          expect(e).toBeInstanceOf(InvalidArgument);
        }
      }),
    );
  });

  it('the strict parser refuses floats, duplicate keys and escaped lone surrogates', () => {
    for (const t of ['{"a":20.0}', '{"a":2e1}', '{"a":1,"a":2}', '"\\ud800"', '{"a":-0}', '[1,]', '01']) {
      expect(() => parseJson(t), t).toThrow(InvalidArgument);
    }
  });

  it('an integer of more than 400 digits is refused by name, path and limit (parser and canonical form)', () => {
    const d400 = '9'.repeat(400);
    const d401 = '9'.repeat(401);
    expect(parseJson(`{"a":[${d400}]}`)).toEqual({ a: [BigInt(d400)] });
    expect(parseJson(`-${d400}`)).toBe(-BigInt(d400));
    for (const [text, path] of [
      [`{"a":[1,${d401}]}`, '$.a[1]'],
      [`{"amount":-${d401}}`, '$.amount'],
      [`{"x y":{"z":${d401}0}}`, '$["x y"].z'],
      [d401, '$'],
    ] as const) {
      expect(() => parseJson(text, { what: 'request body' }), path).toThrow(InvalidArgument);
      expect(() => parseJson(text, { what: 'request body' }), path).toThrow(
        new RegExp(`^request body is not valid: integer at ${path.replace(/[[\]$.]/g, '\\$&')} has \\d+ digits; the limit is 400`),
      );
    }
    expect(() => parseJson(`{"a":${d401}}`)).toThrow('has 401 digits');
    expect(() => parseJson(`{"a":1.${d401}}`, { floats: 'allow' })).toThrow('number at $.a is 403 characters long; the limit is 400');
    expect(canonicalJson({ a: BigInt(d400) })).toBe(`{"a":${d400}}`);
    expect(() => canonicalJson({ a: [BigInt(d401)] }, 'arguments')).toThrow('integer at arguments.a[0] has 401 digits; the limit is 400');
    expect(() => canonicalJson(-BigInt(d401))).toThrow('integer at value has 401 digits');
  });

  it('names the refused value by its full path, built only when something is refused', () => {
    expect(() => canonicalJson({ 'a b': [{ c: 1.5 }] }, 'arguments')).toThrow('float is not an allowed argument type at arguments["a b"][0].c');
    expect(() => canonicalJson({ list: [1, [2, undefined]] }, 'arguments')).toThrow('undefined is not an allowed argument type at arguments.list[1][1]');
    expect(() => canonicalJson([0, , 2], 'xs')).toThrow('an array hole is not an allowed argument value at xs[1]');
  });
});

describe("the frozen copy of an action's arguments", () => {
  const principal = { agent: 'a' };
  const hashOf = (args: Record<string, unknown>) => createAction({ name: 'x.y', arguments: args, principal, actionId: 'act_1' }).actionHash;

  it('reads a getter once: the copy and the hash are of that one answer', () => {
    let reads = 0;
    const self: Record<string, unknown> = {};
    self['self'] = self;
    // A second read would answer with a cycle (before: a stack overflow, not a refusal).
    const args = {
      get amount() {
        reads++;
        return reads === 1 ? 500 : self;
      },
    };
    const action = createAction({ name: 'x.y', arguments: args, principal, actionId: 'act_1' });
    expect(reads).toBe(1);
    expect(action.arguments).toEqual({ amount: 500 });
    expect(action.actionHash).toBe(hashOf({ amount: 500 }));
  });

  it("lists a proxy's keys once: a key that appears on a later listing is neither copied nor hashed", () => {
    let listings = 0;
    const target = { a: 1, b: 2, c: 3 };
    // The first listing is the symbol check; the second is the keys; a third would add `c`.
    const args = new Proxy(target, {
      ownKeys() {
        listings++;
        return listings <= 2 ? ['a', 'b'] : ['a', 'b', 'c'];
      },
    });
    const action = createAction({ name: 'x.y', arguments: args, principal, actionId: 'act_1' });
    expect(listings).toBe(2);
    expect(Object.keys(action.arguments)).toEqual(['a', 'b']);
    expect(action.actionHash).toBe(hashOf({ a: 1, b: 2 }));
  });

  it("keeps the caller's key order, and `__proto__` as a key", () => {
    const args = JSON.parse('{"b": 1, "__proto__": {"z": 1, "y": [2]}, "a": 3}') as Record<string, unknown>;
    const copy = createAction({ name: 'x.y', arguments: args, principal }).arguments;
    expect(Object.keys(copy)).toEqual(['b', '__proto__', 'a']);
    expect(Object.keys(copy['__proto__'] as object)).toEqual(['z', 'y']);
    expect(Object.isFrozen(copy) && Object.isFrozen(copy['__proto__']) && Object.isFrozen((copy['__proto__'] as { y: unknown }).y)).toBe(true);
  });

  it('reads each field of the principal once, and each claim once: what is checked is what is kept', () => {
    let reads = 0;
    const principalIn = {
      agent: 'a',
      get claims() {
        reads++;
        return reads === 1 ? { role: 'viewer' } : { role: { admin: true } };
      },
    };
    let claimReads = 0;
    const claimsIn = {
      get role() {
        claimReads++;
        return claimReads === 1 ? 'viewer' : { admin: true };
      },
    };
    const one = createAction({ name: 'x.y', arguments: {}, principal: principalIn as never });
    const two = createAction({ name: 'x.y', arguments: {}, principal: { agent: 'a', claims: claimsIn as never } });
    expect([reads, claimReads]).toEqual([1, 1]);
    expect(one.principal.claims).toEqual({ role: 'viewer' });
    expect(two.principal.claims).toEqual({ role: 'viewer' });
    expect(Object.isFrozen(two.principal.claims)).toBe(true);
  });

  it('reads each field of the action input once', () => {
    const reads: Record<string, number> = {};
    const once = <T>(field: string, first: T, later: unknown) => ({
      get() {
        reads[field] = (reads[field] ?? 0) + 1;
        return reads[field] === 1 ? first : later;
      },
      enumerable: true,
    });
    const input = Object.defineProperties(
      {},
      {
        name: once('name', 'x.y', ''),
        arguments: once('arguments', { a: 1 }, 5),
        principal: once('principal', { agent: 'a' }, null),
        resource: once('resource', 'r', 7),
        environment: once('environment', 'staging', ''),
        actionId: once('actionId', 'act_1', ''),
      },
    );
    const action = createAction(input as never);
    expect(reads).toEqual({ name: 1, arguments: 1, principal: 1, resource: 1, environment: 1, actionId: 1 });
    expect([action.name, action.resource, action.environment, action.actionId]).toEqual(['x.y', 'r', 'staging', 'act_1']);
    expect(action.actionHash).toBe(
      createAction({ name: 'x.y', arguments: { a: 1 }, principal: { agent: 'a' }, resource: 'r', environment: 'staging', actionId: 'act_1' }).actionHash,
    );
  });

  it('property: the copy is the value copied, frozen throughout, and its text is the canonical text', () => {
    const key = fc.oneof(fc.string({ maxLength: 5 }), fc.constantFrom('__proto__', '10', '9', 'constructor'));
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.string({ maxLength: 6 }),
        fc.maxSafeInteger(),
        fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('value'), { maxLength: 4 }),
        fc.dictionary(key, tie('value'), { maxKeys: 5 }),
      ),
    }));
    // Key for key in the same order, arrays as arrays, objects without a prototype (as deepCopy makes them).
    const sameCopy = (a: unknown, b: unknown): boolean => {
      if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => sameCopy(x, b[i]));
      if (typeof a === 'object' && a !== null) {
        if (typeof b !== 'object' || b === null || Array.isArray(b) || Object.getPrototypeOf(a) !== null || Object.getPrototypeOf(b) !== null) return false;
        const [ka, kb] = [Object.keys(a), Object.keys(b)];
        return ka.join('\u0000') === kb.join('\u0000') && ka.every((k) => sameCopy((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
      }
      return Object.is(a, b);
    };
    const frozenThroughout = (v: unknown): boolean => typeof v !== 'object' || v === null || (Object.isFrozen(v) && Object.values(v).every(frozenThroughout));
    fc.assert(
      fc.property(value, (v) => {
        const { value: copy, text } = frozenWithText(v);
        expect(sameCopy(copy, deepCopy(v, true))).toBe(true);
        expect(frozenThroughout(copy)).toBe(true);
        expect(text).toBe(canonicalJson(v));
        expect(canonicalJson(copy)).toBe(text);
        if (typeof v === 'object' && v !== null) expect(copy).not.toBe(v);
      }),
      { numRuns: 500 },
    );
  });
});
