/**
 * The chain verdicts of the original 0.12.2 (spec 05 §2.5): a document it cannot read as a receipt
 * is `content_altered` at its seq even when its stored hash matches (and the next row's link then
 * breaks), and a chain it pruned is verified from its prune checkpoint. T510–T514, T540c.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildReceipt, GENESIS_HASH, hashDocument, sealReceipt } from '@ctrlrun/kernel/store';
import { createAction, parseJson, sequentialIds, verifyChain, type ChainHead, type ReceiptRow } from '@ctrlrun/kernel';
import { pythonIsoformat, unreadableReceipt, PREDICATE_FIELDS } from '../src/receipt-readable.js';

function chainOf(n: number): { rows: ReceiptRow[]; head: ChainHead } {
  const ids = sequentialIds();
  const rows: ReceiptRow[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const action = createAction({ name: 'refund', arguments: { amount: seq * 100 }, principal: { agent: 'agent-1', user: 'u-1' } }, { ids });
    const at = new Date(Date.UTC(2026, 0, 1, 12, 0, seq)).toISOString();
    const draft = buildReceipt(action, {
      receiptId: `rcp_${seq}`,
      decision: 'allow',
      decisionReason: 'rule[0]',
      approvalId: null,
      approver: null,
      effectKey: `refund:${seq}`,
      attempt: 1,
      result: 'committed',
      error: null,
      startedAt: at,
      finishedAt: at,
      policyHash: `sha256:${'a'.repeat(64)}`,
      policyVersion: '1',
      controls: ['policy'],
    });
    const sealed = sealReceipt(draft.document, seq, prev);
    rows.push({
      receipt_id: draft.receiptId,
      action_id: draft.actionId,
      effect_key: draft.effectKey,
      result: 'committed',
      json: sealed.json,
      ts: at,
      seq,
      prev_hash: prev,
      hash: sealed.hash,
    });
    prev = sealed.hash;
  }
  return { rows, head: { seq: n, hash: prev } };
}

/**
 * Rewrites row `i`'s document AND its stored hash (as a writer that does not follow the format
 * would), relinking every later row and the head, so the hashes all hold: only readability is left.
 */
function rewritten(rows: ReceiptRow[], i: number, change: (doc: Record<string, unknown>) => void): { rows: ReceiptRow[]; head: ChainHead } {
  const out = [...rows];
  let prev = i === 0 ? GENESIS_HASH : (rows[i - 1]!.hash as string);
  for (let k = i; k < rows.length; k++) {
    const doc = JSON.parse(rows[k]!.json as string) as Record<string, unknown>;
    if (k === i) change(doc);
    doc['prev_hash'] = prev;
    const json = JSON.stringify(doc);
    const hash = hashDocument(parseJson(json), 'receipt');
    out[k] = { ...rows[k]!, json, hash, prev_hash: prev };
    prev = hash;
  }
  return { rows: out, head: { seq: rows.length, hash: prev } };
}

const names = (r: ReturnType<typeof verifyChain>) => r.breaks.map((b) => [b.name, b.seq]);

describe('a document the original cannot read is content_altered, whatever its hash (T510–T514)', () => {
  const unreadable: [string, (d: Record<string, unknown>) => void][] = [
    ['decision "maybe"', (d) => (d['decision'] = 'maybe')],
    ['result "done"', (d) => (d['result'] = 'done')],
    ['execution "later"', (d) => (d['execution'] = 'later')],
    ['would_have without a reason', (d) => (d['would_have'] = { decision: 'allow' })],
    ['no approver key', (d) => delete d['approver']],
    ['no effect_key key', (d) => delete d['effect_key']],
    ['no principal.user key', (d) => delete (d['principal'] as Record<string, unknown>)['user']],
    ['principal.agent ""', (d) => ((d['principal'] as Record<string, unknown>)['agent'] = '')],
    ['principal.user ""', (d) => ((d['principal'] as Record<string, unknown>)['user'] = '')],
    ['principal.issuer ""', (d) => ((d['principal'] as Record<string, unknown>)['issuer'] = '')],
    ['finished_at not a time', (d) => (d['finished_at'] = 'yesterday')],
    ['started_at with a month 13', (d) => (d['started_at'] = '2026-13-01T00:00:00Z')],
    ['principal.expires_at without an offset', (d) => ((d['principal'] as Record<string, unknown>)['expires_at'] = '2026-01-01T12:00:00')],
    ['controls holding a number', (d) => (d['controls'] = ['policy', 3])],
    ['controls a string', (d) => (d['controls'] = 'policy')],
  ];
  for (const [what, change] of unreadable) {
    it(`test_T512_${what}: content_altered at its seq and the next link broken; its hash holds`, () => {
      const { rows, head } = chainOf(4);
      const changed = rewritten(rows, 1, change);
      const r = verifyChain(changed.rows, changed.head);
      expect(r.ok).toBe(false);
      expect(names(r)).toEqual([
        ['content_altered', 2],
        ['link_broken', 3],
      ]);
      expect(r.breaks[0]!.detail).toMatch(/not a readable receipt/);
      expect(verifyChain(rows, head).ok).toBe(true);
    });
  }

  const tolerated: [string, (d: Record<string, unknown>) => void][] = [
    ['an unknown schema label', (d) => (d['schema'] = 'ctrlrun.receipt/v99')],
    ['extra keys', (d) => (d['hop'] = null)],
    ['no controls key', (d) => delete d['controls']],
    ['controls null', (d) => (d['controls'] = null)],
    ['times in the column form', (d) => ((d['finished_at'] = '2026-01-01T12:00:02.123456+00:00'), (d['started_at'] = '2026-01-01T12:00:02+00:00'))],
    ['principal.expires_at with +02:00', (d) => ((d['principal'] as Record<string, unknown>)['expires_at'] = '2026-01-01T12:00:00+02:00')],
    ['claims malformed', (d) => ((d['principal'] as Record<string, unknown>)['claims'] = 'x')],
  ];
  for (const [what, change] of tolerated) {
    it(`test_T511_${what}: read, and the chain verifies`, () => {
      const { rows } = chainOf(3);
      const changed = rewritten(rows, 1, change);
      expect(verifyChain(changed.rows, changed.head)).toMatchObject({ ok: true, verified: 3, breaks: [] });
    });
  }

  it('test_T514b_a_row_that_is_not_a_receipt_at_all_is_refused_the_same_way (an array, a number)', () => {
    for (const json of ['[1,2]', '7', '"x"']) {
      const { rows } = chainOf(3);
      const hash = hashDocument(parseJson(json), 'receipt');
      rows[2] = { ...rows[2]!, json, hash };
      const r = verifyChain(rows, { seq: 3, hash });
      expect(names(r)).toEqual([
        ['content_altered', 3],
        ['head_mismatch', 3],
      ]);
      expect(r.breaks[0]!.detail).toMatch(/not a JSON object/);
    }
  });

  it('the predicate is total over any root fields, and this build’s own receipts always pass it', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.constant(undefined), fc.jsonValue()), { minLength: PREDICATE_FIELDS.length, maxLength: PREDICATE_FIELDS.length }),
        (values) => {
          const why = unreadableReceipt(values as never);
          expect(why === null || typeof why === 'string').toBe(true);
        },
      ),
    );
    const { rows, head } = chainOf(20);
    expect(verifyChain(rows, head)).toMatchObject({ ok: true, verified: 20 });
  });
});

describe("Python's datetime.fromisoformat, as far as the read predicate needs it", () => {
  it('reads what either writer writes, and the forms it documents', () => {
    for (const s of [
      '2026-01-01T12:00:00.000Z',
      '2026-01-01T12:00:00+00:00',
      '2026-01-01T12:00:00.123456+00:00',
      '2026-01-01 12:00:00',
      '2026-01-01',
      '20260101T120000',
      '2026-01-01T12',
      '2026-01-01T12:00',
      '2026-02-28T23:59:59-05:30',
    ])
      expect(pythonIsoformat(s), s).not.toBeNull();
    expect(pythonIsoformat('2026-01-01T12:00:00Z')).toEqual({ offset: true });
    expect(pythonIsoformat('2026-01-01T12:00:00')).toEqual({ offset: false });
  });

  it('refuses what it refuses', () => {
    for (const s of [
      '',
      'yesterday',
      '2026-02-30T00:00:00Z',
      '2026-13-01',
      '2026-01-01T24:00:00',
      '2026-01-01T12:60',
      '2026-0101',
      '2026-01-01T12:00:00+25:00',
      '2026-01-01T12:00:00 Z',
    ])
      expect(pythonIsoformat(s), s).toBeNull();
  });

  it('property: every instant, in the evidence form and the column form, is read with an offset', () => {
    fc.assert(
      fc.property(fc.date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }), (d) => {
        const iso = d.toISOString();
        expect(pythonIsoformat(iso)).toEqual({ offset: true });
        expect(pythonIsoformat(iso.replace('Z', '000+00:00'))).toEqual({ offset: true });
      }),
    );
  });
});

describe('a chain the original pruned verifies from its checkpoint (T540c)', () => {
  it('test_T540c_the_checkpoint_supplies_three_values_and_not_one: start seq, previous hash, and the head to compare when nothing is left', () => {
    const { rows, head } = chainOf(6);
    const kept = rows.slice(3); // receipts 1–3 pruned
    const checkpoint = { seq: 3, hash: rows[2]!.hash as string };
    expect(verifyChain(kept, head, { checkpoint })).toMatchObject({ ok: true, verified: 3, breaks: [] });
    // Without it, the original's walk (and ours) says the start is missing.
    expect(names(verifyChain(kept, head))).toEqual([
      ['missing', 1],
      ['link_broken', 4],
    ]);
    // A checkpoint with another hash: the first kept row's link is broken.
    expect(names(verifyChain(kept, head, { checkpoint: { seq: 3, hash: GENESIS_HASH } }))).toEqual([['link_broken', 4]]);
    // Everything pruned but the head: compared against the checkpoint.
    expect(verifyChain([], { seq: 3, hash: checkpoint.hash }, { checkpoint })).toMatchObject({ ok: true, verified: 0 });
    expect(names(verifyChain([], head, { checkpoint }))).toEqual([['head_mismatch', 6]]);
  });
});
