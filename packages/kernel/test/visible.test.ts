import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { showInvisible, shownId } from '../src/visible.js';

const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u;
/** Strings rich in what an agent would hide things with. */
const hostile = fc.string({
  unit: fc.oneof(
    fc.constantFrom('\u202e', '\u200b', '\u2028', '\u0000', '\u001b', '\n', '\u0085', '\ud800', '\udfff', '\u{e0041}', 'a', '"', '\\'),
    fc.string({ minLength: 1, maxLength: 1 }),
  ),
});

describe('showInvisible', () => {
  it('leaves no control, format, separator or lone-surrogate character, and nothing else changes', () => {
    fc.assert(
      fc.property(hostile, (s) => {
        const shown = showInvisible(s);
        expect(INVISIBLE.test(shown)).toBe(false);
        // Only the invisible characters were rewritten: removing the escapes of visible text gives the visible text.
        expect(shown.replace(/\\u[0-9a-f]{4}/g, '')).toBe(s.replace(new RegExp(INVISIBLE.source, 'gu'), '').replace(/\\u[0-9a-f]{4}/g, ''));
      }),
      { numRuns: 500 },
    );
  });

  it('inside JSON text the escapes parse back to exactly the same value; keepNewlines keeps the indentation', () => {
    const key = fc.oneof(fc.constantFrom('__proto__', 'constructor', 'amount\u202e', 'a\u200bb'), hostile);
    fc.assert(
      fc.property(fc.dictionary(key, fc.oneof(hostile, fc.integer())), (v) => {
        const pretty = JSON.stringify(v, null, 2);
        const shown = showInvisible(pretty, { keepNewlines: true });
        expect(shown.split('\n')).toHaveLength(pretty.split('\n').length);
        expect(JSON.parse(shown)).toEqual(JSON.parse(pretty));
      }),
      { numRuns: 300 },
    );
  });

  it('writes each UTF-16 unit as \\uXXXX', () => {
    expect(showInvisible('pay\u202eout')).toBe('pay\\u202eout');
    expect(showInvisible('a\nb')).toBe('a\\u000ab');
    expect(showInvisible('a\nb', { keepNewlines: true })).toBe('a\nb');
    expect(showInvisible('tag\u{e0041}')).toBe('tag\\udb40\\udc41');
  });
});

describe('shownId', () => {
  it('shows an id this kernel mints, or an ordinary key, as it is', () => {
    for (const id of ['apr_0123456789abcdef0123456789abcdef', 'refund:txn_1', 'ns/prod:delete']) expect(shownId(id)).toBe(id);
  });

  it('property: whatever the id, the text has no invisible character or line break, reads back to it when not cut, and stays short', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (id) => {
        const shown = shownId(id);
        expect(shown).not.toMatch(/[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u);
        expect(shown.length).toBeLessThanOrEqual(6 * 201 + 2);
        if (shown !== id) {
          const back = JSON.parse(shown) as string;
          expect(id.length > 200 ? id.startsWith(back.slice(0, -1)) && back.endsWith('…') : back === id).toBe(true);
        }
      }),
    );
  });
});
