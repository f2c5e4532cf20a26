// The chain walk hashes stored documents through the one-pass reader when it can and through the
// full parse otherwise: whichever path a row takes, the report is the one the full parse gives.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseJson, verifyChain, type ReceiptRow } from '@ctrlrun/kernel';
import { sealedChain } from './receipt.fixtures.js';

/** A chain of `n` real receipts (notes with escapes and non-ASCII among them) and its head. */
const chainOf = (n: number) =>
  sealedChain(n, {
    args: (seq) => ({ amount: seq * 100, currency: 'EUR', note: ['plain', 'a "quoted"\nline', 'ünïcödé 😀', 'A/B'][seq % 4] as string }),
    principal: { agent: 'agent-1', user: 'u-1' },
    controls: ['policy'],
  });

/** Spellings of a stored document that the full parse reads as the same value. */
const SAME_VALUE: Record<string, (json: string) => string> = {
  // Taken by the one-pass reader: whitespace and key order.
  spaced: (json) => {
    // A space around every structural character outside strings.
    let out = '';
    let inString = false;
    for (let i = 0; i < json.length; i++) {
      const c = json[i] as string;
      if (inString) {
        out += c;
        if (c === '\\') out += json[++i] as string;
        else if (c === '"') inString = false;
      } else {
        if (c === '"') inString = true;
        out += '{}[],:'.includes(c) ? ` ${c}\n` : c;
      }
    }
    return out;
  },
  reversed: (json) => {
    const doc = parseJson(json) as Record<string, unknown>;
    return `{${Object.keys(doc)
      .reverse()
      .map((k) => `${JSON.stringify(k)}:${JSON.stringify(doc[k], (_, v: unknown) => (typeof v === 'bigint' ? Number(v) : v))}`)
      .join(',')}}`;
  },
  // Left to the full parse: escapes the canonical form never writes.
  escapedKey: (json) => json.replace('"schema"', '"\\u0073chema"'),
  escapedValue: (json) => json.replace('"refund"', '"\\u0072efund"'),
  slash: (json) => json.replace('"A/B"', '"A\\/B"'),
};

/** Spellings the full parse refuses, each for its own reason. */
const REFUSED: Record<string, (json: string) => string> = {
  float: (json) => json.replace('"attempt":1', '"attempt":1.0'),
  exponent: (json) => json.replace('"attempt":1', '"attempt":1e0'),
  minusZero: (json) => json.replace('"attempt":1', '"attempt":-0'),
  duplicateKey: (json) => json.replace('"attempt":1', '"attempt":1,"attempt":1'),
  loneSurrogate: (json) => json.replace('"refund"', '"\\ud800refund"'),
  tooManyDigits: (json) => json.replace('"attempt":1', `"attempt":${'1'.repeat(401)}`),
  trailing: (json) => `${json} x`,
  truncated: (json) => json.slice(0, -1),
};

describe('the chain walk: the one-pass reader and the full parse give one report', () => {
  it('property: any row respelled so that it reads as the same value, with or without an edited column, gives the report of the rows as written', () => {
    const names = Object.keys(SAME_VALUE);
    const { rows, head } = chainOf(8);
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('asWritten', ...names), { minLength: 8, maxLength: 8 }),
        fc.option(fc.record({ at: fc.nat(7), column: fc.constantFrom('result', 'effect_key', 'prev_hash', 'ts', 'receipt_id', 'action_id') }), { nil: null }),
        (spellings, edit) => {
          const edited = rows.map((r, i) => (edit !== null && edit.at === i ? { ...r, [edit.column]: 'edited' } : r));
          const respelled = edited.map((r, i) => {
            const spell = SAME_VALUE[spellings[i] as string];
            return spell === undefined ? r : { ...r, json: spell(r.json as string) };
          });
          expect(verifyChain(respelled, head)).toEqual(verifyChain(edited, head));
        },
      ),
      { numRuns: 200 },
    );
    // The respellings do respell (the property is not comparing a row with itself).
    for (const [name, spell] of Object.entries(SAME_VALUE))
      expect(
        rows.some((r) => spell(r.json as string) !== r.json),
        name,
      ).toBe(true);
  });

  it.each(Object.keys(REFUSED))("a stored document the full parse refuses (%s) is content_altered with the full parse's reason, then link_broken", (name) => {
    const { rows, head } = chainOf(4);
    const text = (REFUSED[name] as (json: string) => string)(rows[1]?.json as string);
    expect(text).not.toBe(rows[1]?.json);
    let reason = '';
    try {
      parseJson(text, { what: 'receipt json' });
    } catch (e) {
      reason = (e as Error).message;
    }
    expect(reason).not.toBe('');
    rows[1] = { ...(rows[1] as ReceiptRow), json: text };
    const report = verifyChain(rows, head);
    expect(report.breaks.map((b) => [b.name, b.seq])).toEqual([
      ['content_altered', 2],
      ['link_broken', 3],
    ]);
    expect(report.breaks[0]?.detail).toBe(`the stored document cannot be hashed: ${reason}`);
  });
});
