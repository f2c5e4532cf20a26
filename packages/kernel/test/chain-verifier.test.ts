// ChainVerifier: the receipt chain verified in pages gives verifyChain's report for the same rows.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GENESIS_HASH } from '@ctrlrun/kernel/store';
import { ChainVerifier, verifyChain, type ChainHead, type ReceiptRow } from '@ctrlrun/kernel';
import { sealedChain } from './receipt.fixtures.js';

/** The order a store's pages give: rows without an integer seq (any order), then by seq (ties kept). */
function pagedOrder(rows: readonly ReceiptRow[]): ReceiptRow[] {
  const pos = (v: unknown): number | null | undefined =>
    v === null || v === undefined ? null : typeof v === 'number' && Number.isSafeInteger(v) ? v : undefined;
  const off = rows.filter((r) => typeof pos(r.seq) !== 'number');
  const on = rows.filter((r) => typeof pos(r.seq) === 'number').sort((a, b) => (a.seq as number) - (b.seq as number));
  return [...off, ...on];
}

function paged(rows: readonly ReceiptRow[], head: ChainHead | null, cuts: readonly number[]): ReturnType<typeof verifyChain> {
  const v = new ChainVerifier(head);
  let at = 0;
  for (const c of cuts) {
    const end = Math.min(rows.length, at + c);
    v.push(rows.slice(at, end));
    at = end;
  }
  v.push(rows.slice(at));
  return v.finish();
}

const BASE = sealedChain(12);

/** One tampering of a sealed chain. */
const tamper = fc.oneof(
  fc.record({ kind: fc.constant('drop' as const), i: fc.nat(11) }),
  fc.record({ kind: fc.constant('duplicate' as const), i: fc.nat(11) }),
  fc.record({ kind: fc.constant('json' as const), i: fc.nat(11), text: fc.oneof(fc.string({ maxLength: 6 }), fc.constant('{"seq":1}')) }),
  fc.record({ kind: fc.constant('hash' as const), i: fc.nat(11), hash: fc.oneof(fc.constant(null), fc.constant(''), fc.string({ maxLength: 4 })) }),
  fc.record({
    kind: fc.constant('seq' as const),
    i: fc.nat(11),
    seq: fc.oneof(fc.constant(null), fc.integer({ min: -1, max: 15 }), fc.constantFrom(Number.NaN, 2.5)),
  }),
  fc.record({ kind: fc.constant('column' as const), i: fc.nat(11), result: fc.constantFrom('failed', 'committed') }),
);
type Tamper = typeof tamper extends fc.Arbitrary<infer T> ? T : never;

/** `rows` with `edits` applied in turn (a `seq` edit only where `seqAllowed` says so). */
function tampered(rows: readonly ReceiptRow[], edits: readonly Tamper[], seqAllowed: (seq: unknown) => boolean): ReceiptRow[] {
  const out = rows.map((r) => ({ ...r }));
  for (const e of edits) {
    const i = Math.min(e.i, out.length - 1);
    if (i < 0) break;
    const r = out[i]!;
    if (e.kind === 'drop') out.splice(i, 1);
    else if (e.kind === 'duplicate') out.splice(i, 0, { ...r });
    else if (e.kind === 'json') out[i] = { ...r, json: e.text };
    else if (e.kind === 'hash') out[i] = { ...r, hash: e.hash };
    else if (e.kind === 'seq') {
      if (seqAllowed(e.seq)) out[i] = { ...r, seq: e.seq };
    } else out[i] = { ...r, result: e.result };
  }
  return out;
}

const headArb = fc.oneof(
  fc.constant<ChainHead | null>(BASE.head),
  fc.constant<ChainHead | null>(null),
  fc.record({ seq: fc.integer({ min: 0, max: 14 }), hash: fc.constantFrom(BASE.head.hash, GENESIS_HASH, 'sha256:x') }),
);

describe('ChainVerifier', () => {
  it("property: any split of the rows into pages gives verifyChain's report", () => {
    fc.assert(
      fc.property(fc.array(tamper, { maxLength: 5 }), headArb, fc.array(fc.nat(6), { maxLength: 8 }), (edits, head, cuts) => {
        const rows = pagedOrder(tampered(BASE.rows, edits, () => true));
        expect(paged(rows, head, cuts)).toEqual(verifyChain(rows, head));
      }),
      { numRuns: 400 },
    );
  });

  it('an intact chain in pages of one row verifies every row', () => {
    const report = paged(
      BASE.rows,
      BASE.head,
      Array.from({ length: 12 }, () => 1),
    );
    expect(report).toMatchObject({ ok: true, verified: 12, chained: 12, unchained: 0, breaks: [] });
  });

  it('a head that names a row takes that row out of the verified count, as verifyChain does', () => {
    const head = { seq: 12, hash: 'sha256:wrong' };
    expect(paged(BASE.rows, head, [5])).toEqual(verifyChain(BASE.rows, head));
    expect(paged(BASE.rows, head, [5]).verified).toBe(11);
  });

  it('a chained row whose seq goes backwards throws: the paging is wrong, not the chain', () => {
    const v = new ChainVerifier(BASE.head);
    v.push(BASE.rows.slice(5, 7));
    expect(() => v.push(BASE.rows.slice(0, 1))).toThrow(RangeError);
  });

  it('finish() once; no rows after it', () => {
    const v = new ChainVerifier(BASE.head).push(BASE.rows);
    v.finish();
    expect(() => v.finish()).toThrow(RangeError);
    expect(() => v.push(BASE.rows)).toThrow(RangeError);
  });

  it('property: a chain continued after an intact start gives the breaks the whole chain gives past that start', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 12 }), fc.array(tamper, { maxLength: 4 }), headArb, (k, edits, head) => {
        // The first k rows intact and verified; the tampering happens after them.
        // A seq moved into the start would not be the start's row any more.
        const tail = pagedOrder(tampered(BASE.rows.slice(k), edits, (seq) => typeof seq === 'number' && Number.isSafeInteger(seq) && seq > k));
        const whole = verifyChain([...BASE.rows.slice(0, k), ...tail], head);
        const after = k === 0 ? { seq: 0, hash: GENESIS_HASH } : { seq: k, hash: BASE.rows[k - 1]!.hash as string };
        const continued = new ChainVerifier(head, { after }).push(tail).finish();
        expect(continued.ok).toBe(whole.ok);
        expect(continued.breaks).toEqual(whole.breaks);
        expect(continued.chained + k).toBe(whole.chained);
        // A head naming a row of the start cannot take back a row this verifier never counted:
        // the counts add up whenever the continuation is intact, or names nothing before its start.
        if (continued.breaks.every((b) => b.seq === null || b.seq > k || b.name !== 'head_mismatch')) expect(continued.verified + k).toBe(whole.verified);
      }),
      { numRuns: 300 },
    );
  });

  it('a continuation refuses a malformed starting point, and with no rows checks the head against it', () => {
    expect(() => new ChainVerifier(BASE.head, { after: { seq: -1, hash: GENESIS_HASH } })).toThrow(TypeError);
    expect(() => new ChainVerifier(BASE.head, { after: { seq: 1.5, hash: GENESIS_HASH } })).toThrow(/options.after/);
    expect(() => new ChainVerifier(BASE.head, { after: { seq: 3 } as never })).toThrow(TypeError);
    expect(new ChainVerifier(BASE.head, { after: BASE.head }).finish()).toMatchObject({ ok: true, verified: 0, chained: 0 });
    expect(new ChainVerifier(BASE.head, { after: { seq: 11, hash: BASE.rows[10]!.hash as string } }).finish()).toMatchObject({
      ok: false,
      breaks: [{ name: 'head_mismatch' }],
    });
  });

  it('a starting point is read once: a getter that answers differently later is not believed, one that throws is a TypeError', () => {
    const end = { seq: 5, hash: BASE.rows[4]!.hash as string };
    let reads = 0;
    const shifty = {
      get seq() {
        return reads++ === 0 ? end.seq : 'x';
      },
      get hash() {
        return end.hash;
      },
    };
    const shiftyReport = new ChainVerifier(BASE.head, { after: shifty as never }).push(BASE.rows.slice(5)).finish();
    expect(shiftyReport).toEqual(new ChainVerifier(BASE.head, { after: end }).push(BASE.rows.slice(5)).finish());
    expect(shiftyReport.ok).toBe(true);
    const throwing = {
      get seq(): number {
        throw new Error('boom');
      },
      hash: end.hash,
    };
    expect(() => new ChainVerifier(BASE.head, { after: throwing })).toThrow(TypeError);
    expect(() => new ChainVerifier(BASE.head, { after: throwing })).toThrow(/options.after/);
  });

  it('a page that is not a list throws a TypeError naming it', () => {
    expect(() => new ChainVerifier(null).push('rows' as never)).toThrow(/must be an array/);
  });
});
