import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildReceipt, GENESIS_HASH, hashDocument, sealReceipt, type ReceiptResult } from '@ctrlrun/kernel/store';
import {
  createAction,
  parseJson,
  receiptView,
  sequentialIds,
  verifyChain,
  type ChainHead,
  type ChainReport,
  type JsonObject,
  type ReceiptRow,
} from '@ctrlrun/kernel';

/** What varies between the receipts of a generated chain. */
interface Spec {
  amount: number;
  note: string;
  decision: 'allow' | 'approve' | 'deny';
  approver: string | null;
  result: ReceiptResult;
}

const SPEC_ARB: fc.Arbitrary<Spec> = fc.record({
  amount: fc.integer({ min: 0, max: 10_000_000 }),
  note: fc.string({ unit: 'grapheme', maxLength: 12 }),
  decision: fc.constantFrom('allow', 'approve', 'deny'),
  approver: fc.option(fc.constantFrom('alice', 'bob', 'ßøñ'), { nil: null }),
  result: fc.constantFrom('committed', 'failed', 'ambiguous', 'denied', 'blocked', 'observed'),
});

function defaultSpec(i: number): Spec {
  return { amount: i * 100, note: `order ${i}`, decision: i % 3 === 0 ? 'approve' : 'allow', approver: i % 3 === 0 ? 'alice' : null, result: 'committed' };
}

/** Seals one receipt after `prev`, as a store does under the head row's lock. */
function sealRow(spec: Spec, seq: number, prev: string, ids: ReturnType<typeof sequentialIds>): ReceiptRow {
  const action = createAction(
    { name: 'refund', arguments: { amount: spec.amount, currency: 'EUR', note: spec.note }, principal: { agent: 'agent-1', user: 'u-1' }, resource: 'orders' },
    { ids },
  );
  const finishedAt = new Date(Date.UTC(2026, 0, 1, 12, 0, seq)).toISOString();
  const draft = buildReceipt(action, {
    receiptId: `rcp_${seq}`,
    decision: spec.decision,
    decisionReason: 'rule[0]',
    approvalId: spec.approver === null ? null : `apr_${seq}`,
    approver: spec.approver,
    effectKey: `refund:${seq}`,
    attempt: 1,
    result: spec.result,
    error: null,
    startedAt: finishedAt,
    finishedAt,
    policyHash: `sha256:${'a'.repeat(64)}`,
    policyVersion: '1',
    controls: ['policy'],
  });
  const sealed = sealReceipt(draft.document, seq, prev);
  return {
    receipt_id: draft.receiptId,
    action_id: draft.actionId,
    effect_key: draft.effectKey,
    result: draft.result,
    json: sealed.json,
    ts: finishedAt,
    seq,
    prev_hash: prev,
    hash: sealed.hash,
  };
}

/** A chain of real receipts and its head. */
function chain(specs: readonly Spec[]): { rows: ReceiptRow[]; head: ChainHead } {
  const ids = sequentialIds();
  const rows: ReceiptRow[] = [];
  let prev = GENESIS_HASH;
  specs.forEach((s, i) => {
    const row = sealRow(s, i + 1, prev, ids);
    rows.push(row);
    prev = row.hash as string;
  });
  return { rows, head: { seq: rows.length, hash: prev } };
}

function chainOf(n: number): { rows: ReceiptRow[]; head: ChainHead } {
  return chain(Array.from({ length: n }, (_, i) => defaultSpec(i + 1)));
}

/** Rewrites a row's stored document (the hash column is left as it was). */
function edit(row: ReceiptRow, change: (doc: Record<string, unknown>) => void): ReceiptRow {
  const doc = JSON.parse(row.json as string) as Record<string, unknown>;
  change(doc);
  return { ...row, json: JSON.stringify(doc) };
}

function breaks(report: ChainReport): [string, number | null][] {
  return report.breaks.map((b) => [b.name, b.seq]);
}

/** The column findings, beside the verdict. */
function findings(report: ChainReport): [string, number | null][] {
  return report.column_findings.map((b) => [b.name, b.seq]);
}

describe('verifyChain: an untampered chain', () => {
  it('test_T165_an_untampered_chain_verifies', () => {
    const { rows, head } = chainOf(6);
    const r = verifyChain(rows, head);
    expect(r).toEqual({ ok: true, verified: 6, chained: 6, unchained: 0, head_seq: 6, head_hash: head.hash, breaks: [], column_findings: [] });
  });

  it('an empty chain at genesis verifies', () => {
    expect(verifyChain([], { seq: 0, hash: GENESIS_HASH })).toEqual({
      ok: true,
      verified: 0,
      chained: 0,
      unchained: 0,
      head_seq: 0,
      head_hash: GENESIS_HASH,
      breaks: [],
      column_findings: [],
    });
  });

  it('takes position from the seq column, not from the order rows are given in', () => {
    const { rows, head } = chainOf(8);
    const shuffled = [rows[5], rows[0], rows[7], rows[2], rows[1], rows[6], rows[4], rows[3]] as ReceiptRow[];
    expect(verifyChain(shuffled, head)).toEqual(verifyChain(rows, head));
    expect(verifyChain(shuffled, head).ok).toBe(true);
  });

  it('hashes the canonical bytes of the parsed stored document (known answer via node:crypto)', () => {
    // Stored text that is already canonical: its SHA-256 is the chain hash.
    const json = `{"a":1,"prev_hash":"${GENESIS_HASH}","schema":"ctrlrun.receipt/v3","seq":1,"z":"é"}`;
    const hash = `sha256:${createHash('sha256').update(Buffer.from(json, 'utf8')).digest('hex')}`;
    const row: ReceiptRow = { receipt_id: 'r1', action_id: null, effect_key: null, result: null, json, ts: null, seq: 1, prev_hash: GENESIS_HASH, hash };
    // Not a receipt the original can read (no decision, no principal…), so a break (and nothing,
    // the head included, links to it); its hash held, or the break would name the stored hash.
    const known = (r: ChainReport) => {
      expect(breaks(r)).toEqual([
        ['content_altered', 1],
        ['head_mismatch', 1],
      ]);
      expect(r.breaks[0]!.detail).toMatch(/^the stored document is not a readable receipt/);
    };
    known(verifyChain([row], { seq: 1, hash }));
    expect(verifyChain([{ ...row, hash: `sha256:${'0'.repeat(64)}` }], { seq: 1, hash }).breaks[0]!.detail).toMatch(/^stored hash/);
    // The same document stored with other key order and whitespace hashes the same.
    const spaced = `{ "z": "\\u00e9", "seq": 1, "schema": "ctrlrun.receipt/v3", "prev_hash": "${GENESIS_HASH}", "a": 1 }`;
    known(verifyChain([{ ...row, json: spaced }], { seq: 1, hash }));
  });
});

describe('verifyChain: the tamper table (T164, T166, T167)', () => {
  const edits: [string, (doc: Record<string, unknown>) => void][] = [
    ['arguments.amount', (d) => ((d['arguments'] as Record<string, unknown>)['amount'] = 1)],
    ['decision', (d) => (d['decision'] = 'deny')],
    ['approver', (d) => (d['approver'] = 'mallory')],
    ['finished_at', (d) => (d['finished_at'] = '2026-01-02T00:00:00.000Z')],
  ];
  for (const [field, change] of edits) {
    it(`test_T164_an_altered_receipt_is_content_altered_at_its_seq (${field})`, () => {
      const { rows, head } = chainOf(5);
      rows[2] = edit(rows[2] as ReceiptRow, change);
      const r = verifyChain(rows, head);
      expect(r.ok).toBe(false);
      // The walk carries the recomputed hash, so the next row no longer links to it; the ts
      // column still holds the finished_at the document had.
      expect(breaks(r)).toEqual([
        ['content_altered', 3],
        ['link_broken', 4],
      ]);
      expect(findings(r)).toEqual(field === 'finished_at' ? [['column_mismatch', 3]] : []);
      expect(r.verified).toBe(3);
    });
  }

  it('a stored hash with invisible characters is named in the break with each one escaped', () => {
    const { rows, head } = chainOf(3);
    rows[1] = { ...(rows[1] as ReceiptRow), hash: 'sha256:\u202eabc\u0007' };
    const altered = verifyChain(rows, head).breaks.find((b) => b.name === 'content_altered');
    expect(altered?.detail).toContain('"sha256:\\u202eabc\\u0007"');
    expect(altered?.detail).not.toMatch(/[\u202e\u0007]/);
  });

  it('test_T164_an_altered_last_receipt_is_content_altered_and_the_head_mismatches', () => {
    const { rows, head } = chainOf(4);
    rows[3] = edit(rows[3] as ReceiptRow, (d) => (d['decision'] = 'deny'));
    expect(breaks(verifyChain(rows, head))).toEqual([
      ['content_altered', 4],
      ['head_mismatch', 4],
    ]);
  });

  it('an altered document whose hash column was rewritten to match is link_broken at the next seq', () => {
    const { rows, head } = chainOf(5);
    const forged = edit(rows[1] as ReceiptRow, (d) => (d['approver'] = 'mallory'));
    rows[1] = { ...forged, hash: hashDocument(JSON.parse(forged.json as string), 'receipt') };
    expect(breaks(verifyChain(rows, head))).toEqual([['link_broken', 3]]);
  });

  it('test_T164_deleting_a_middle_row_is_missing_then_link_broken', () => {
    const { rows, head } = chainOf(5);
    rows.splice(2, 1);
    const r = verifyChain(rows, head);
    expect(breaks(r)).toEqual([
      ['missing', 3],
      ['link_broken', 4],
    ]);
    expect(r.verified).toBe(3);
  });

  it('test_T166_swapping_two_rows_is_link_broken', () => {
    const { rows, head } = chainOf(6);
    // Exchange the seq columns of rows 2 and 4; the documents are untouched.
    const a = rows[1] as ReceiptRow;
    const b = rows[3] as ReceiptRow;
    rows[1] = { ...a, seq: b.seq };
    rows[3] = { ...b, seq: a.seq };
    const r = verifyChain(rows, head);
    expect(r.ok).toBe(false);
    // The documents are intact, so nothing is content_altered; their seq no longer matches the column.
    expect(new Set(r.breaks.map((x) => x.name))).toEqual(new Set(['link_broken']));
    expect(r.breaks.filter((x) => x.name === 'link_broken').map((x) => x.seq)).toEqual(expect.arrayContaining([2, 4]));
    // Beside the verdict: the seq columns no longer say what their documents say.
    expect(findings(r)).toEqual([
      ['column_mismatch', 2],
      ['column_mismatch', 4],
    ]);
  });

  it('test_T166_swapping_two_rows_and_moving_their_document_seq_is_also_content_altered', () => {
    const { rows, head } = chainOf(6);
    const a = rows[1] as ReceiptRow;
    const b = rows[3] as ReceiptRow;
    rows[1] = edit({ ...a, seq: b.seq }, (d) => (d['seq'] = b.seq));
    rows[3] = edit({ ...b, seq: a.seq }, (d) => (d['seq'] = a.seq));
    const r = verifyChain(rows, head);
    expect(r.breaks.filter((x) => x.name === 'content_altered').map((x) => x.seq)).toEqual([2, 4]);
    expect(r.breaks.filter((x) => x.name === 'link_broken').map((x) => x.seq)).toEqual(expect.arrayContaining([2, 4]));
  });

  it('test_T167_deleting_the_last_row_is_head_mismatch_only', () => {
    const { rows, head } = chainOf(5);
    rows.pop();
    const r = verifyChain(rows, head);
    expect(r.breaks).toEqual([{ name: 'head_mismatch', seq: 5, detail: expect.any(String) }]);
    expect(r.verified).toBe(4);
  });

  it('known limit: deleting a suffix and rewinding the head is not detected', () => {
    const { rows } = chainOf(5);
    const kept = rows.slice(0, 3);
    expect(verifyChain(kept, { seq: 3, hash: kept[2]?.hash as string }).ok).toBe(true);
  });

  it('a head whose hash or seq differs from the last row is head_mismatch at the head seq', () => {
    const { rows, head } = chainOf(3);
    expect(breaks(verifyChain(rows, { seq: 3, hash: GENESIS_HASH }))).toEqual([['head_mismatch', 3]]);
    expect(breaks(verifyChain(rows, { seq: 7, hash: head.hash }))).toEqual([['head_mismatch', 7]]);
  });

  it('no head row is head_mismatch with seq null', () => {
    const { rows, head } = chainOf(3);
    const r = verifyChain(rows, null);
    expect(r.breaks).toEqual([{ name: 'head_mismatch', seq: null, detail: expect.stringContaining('no chain head') }]);
    expect(r).toMatchObject({ ok: false, verified: 3, head_seq: null, head_hash: null });
    expect(head.seq).toBe(3);
  });

  it('a row whose hash column is null is hash_missing, and the walk goes on with the recomputed hash', () => {
    const { rows, head } = chainOf(4);
    rows[1] = { ...(rows[1] as ReceiptRow), hash: null };
    const r = verifyChain(rows, head);
    expect(breaks(r)).toEqual([['hash_missing', 2]]);
    expect(r.verified).toBe(3);
  });

  it('the prev_hash column never decides the link (the document does); a different column is column_mismatch', () => {
    const { rows, head } = chainOf(3);
    rows[1] = { ...(rows[1] as ReceiptRow), prev_hash: GENESIS_HASH };
    // The original does not read the column: the chain is intact, and the column is a finding beside it.
    const column = verifyChain(rows, head);
    expect(column.ok).toBe(true);
    expect(findings(column)).toEqual([['column_mismatch', 2]]);
    rows[1] = edit({ ...(rows[1] as ReceiptRow), prev_hash: (rows[0] as ReceiptRow).hash }, (d) => (d['prev_hash'] = GENESIS_HASH));
    const document = verifyChain(rows, head);
    expect(breaks(document)).toEqual([
      ['content_altered', 2],
      ['link_broken', 2],
      ['link_broken', 3],
    ]);
    expect(findings(document)).toEqual([['column_mismatch', 2]]);
  });

  it('a chain that does not start at seq 1 is missing at 1', () => {
    const { rows, head } = chainOf(3);
    expect(breaks(verifyChain(rows.slice(1), head))).toEqual([
      ['missing', 1],
      ['link_broken', 2],
    ]);
  });

  it('test_T168_an_unchained_receipt_is_never_a_pass', () => {
    const { rows, head } = chainOf(3);
    const preChain: ReceiptRow[] = [1, 2].map((i) => ({
      receipt_id: `old_${i}`,
      action_id: null,
      effect_key: null,
      result: 'committed',
      json: `{"schema":"ctrlrun.receipt/v2","receipt_id":"old_${i}"}`,
      ts: null,
      seq: null,
      prev_hash: null,
      hash: null,
    }));
    const r = verifyChain([rows[0] as ReceiptRow, ...preChain, ...rows.slice(1)], head);
    expect(r.ok).toBe(false);
    expect(r.breaks).toEqual([{ name: 'unchained', seq: null, detail: expect.stringContaining('2 receipts') }]);
    expect(r).toMatchObject({ verified: 3, chained: 3, unchained: 2 });
    // Only pre-chain receipts and a genesis head: a consistent chain of length 0, still not a pass.
    const only = verifyChain(preChain, { seq: 0, hash: GENESIS_HASH });
    expect(only).toMatchObject({ ok: false, verified: 0, chained: 0, unchained: 2 });
    expect(breaks(only)).toEqual([['unchained', null]]);
  });

  it('lists breaks in walk order: unchained, per row, then head', () => {
    const { rows } = chainOf(6);
    rows.splice(1, 1); // missing 2, link_broken 3
    rows[3] = { ...(rows[3] as ReceiptRow), hash: null }; // seq 5: hash_missing
    const unchained: ReceiptRow = { ...(rows[0] as ReceiptRow), receipt_id: 'old', seq: null };
    const r = verifyChain([...rows, unchained], null);
    expect(breaks(r)).toEqual([
      ['unchained', null],
      ['missing', 2],
      ['link_broken', 3],
      ['hash_missing', 5],
      ['head_mismatch', null],
    ]);
  });
});

describe('verifyChain: documents that cannot be hashed are content_altered, never a throw', () => {
  const cases: [string, (json: string) => string][] = [
    ['a float', (j) => j.replace('"attempt":1', '"attempt":1.5')],
    ['an exponent', (j) => j.replace('"attempt":1', '"attempt":1e0')],
    ['a bad escape', (j) => j.replace('"rule[0]"', '"rule\\x[0]"')],
    ['an escaped lone surrogate', (j) => j.replace('"rule[0]"', '"rule\\ud800"')],
    ['a raw lone surrogate', (j) => j.replace('"rule[0]"', '"rule\ud800"')],
    ['a duplicate key', (j) => j.replace('"attempt":1', '"attempt":1,"attempt":1')],
    ['NaN', (j) => j.replace('"attempt":1', '"attempt":NaN')],
    ['-0', (j) => j.replace('"attempt":1', '"attempt":-0')],
    ['truncated text', (j) => j.slice(0, -1)],
    ['trailing text', (j) => `${j}x`],
    ['empty text', () => ''],
  ];
  for (const [what, tamper] of cases) {
    it(`${what} → content_altered at its seq, then link_broken`, () => {
      const { rows, head } = chainOf(4);
      const json = tamper((rows[1] as ReceiptRow).json as string);
      expect(json).not.toBe((rows[1] as ReceiptRow).json);
      rows[1] = { ...(rows[1] as ReceiptRow), json };
      const r = verifyChain(rows, head);
      expect(breaks(r)).toEqual([
        ['content_altered', 2],
        ['link_broken', 3],
      ]);
      expect(r.breaks[0]?.detail).toContain('cannot be hashed');
    });
  }

  it('an unhashable last row also fails the head check', () => {
    const { rows, head } = chainOf(2);
    rows[1] = { ...(rows[1] as ReceiptRow), json: '{"seq":2,"x":1.5}' };
    expect(breaks(verifyChain(rows, head))).toEqual([
      ['content_altered', 2],
      ['head_mismatch', 2],
    ]);
  });

  it('no document can link to an unhashable row, whatever its prev_hash says', () => {
    const receipt = JSON.parse(chainOf(2).rows[1]!.json as string) as Record<string, unknown>;
    for (const prev of ['"unhashable"', 'null', '""']) {
      // The second row a readable receipt: only its link can be wrong.
      const docs = [`{"seq":1,"prev_hash":"${GENESIS_HASH}","x":1.5}`, JSON.stringify({ ...receipt, seq: 2, prev_hash: JSON.parse(prev) })];
      const hash2 = hashDocument(parseJson(docs[1] as string), 'receipt');
      const rows: ReceiptRow[] = docs.map((json, i) => ({
        receipt_id: `r${i}`,
        action_id: null,
        effect_key: null,
        result: null,
        json,
        ts: null,
        seq: i + 1,
        prev_hash: i === 0 ? GENESIS_HASH : JSON.parse(prev),
        hash: i === 0 ? 'sha256:x' : hash2,
      }));
      expect(breaks(verifyChain(rows, { seq: 2, hash: hash2 }))).toEqual([
        ['content_altered', 1],
        ['link_broken', 2],
      ]);
    }
  });

  it('a document that is not an object is not a receipt: content_altered, and nothing links to it', () => {
    const { rows, head } = chainOf(2);
    const json = '["not","a","receipt"]';
    rows[0] = { ...(rows[0] as ReceiptRow), json, hash: hashDocument(['not', 'a', 'receipt'], 'receipt') };
    expect(breaks(verifyChain(rows, head))).toEqual([
      ['content_altered', 1],
      ['link_broken', 2],
    ]);
  });
});

describe('verifyChain: receipts written under older and newer schemas', () => {
  /** Writes a chain of arbitrary documents the way the original does: hash what is stored. */
  function writeDocs(docs: Record<string, unknown>[], render: (d: unknown) => string = (d) => JSON.stringify(d)): { rows: ReceiptRow[]; head: ChainHead } {
    let prev = GENESIS_HASH;
    const rows = docs.map((d, i) => {
      const doc = { ...d, receipt_id: `r${i}`, seq: i + 1, prev_hash: prev };
      const hash = hashDocument(doc, 'receipt');
      // The columns repeat the document's fields, as every store (and the original) writes them.
      const field = (k: string): string | null => (doc as Record<string, unknown>)[k] as string | null;
      const row: ReceiptRow = {
        receipt_id: doc.receipt_id,
        action_id: field('action_id'),
        effect_key: field('effect_key'),
        result: field('result'),
        json: render(doc),
        ts: field('finished_at'),
        seq: i + 1,
        prev_hash: prev,
        hash,
      };
      prev = hash;
      return row;
    });
    return { rows, head: { seq: rows.length, hash: prev } };
  }

  const v1 = {
    schema: 'ctrlrun.receipt/v1',
    receipt_id: 'r1',
    action_id: 'act_1',
    action: 'refund',
    action_hash: `sha256:${'1'.repeat(64)}`,
    principal: { agent: 'a', user: null },
    resource: null,
    arguments: { amount: 5 },
    environment: 'production',
    decision: 'allow',
    decision_reason: 'rule[0]',
    approval_id: null,
    approver: null,
    effect_key: null,
    attempt: 1,
    result: 'committed',
    error: null,
    started_at: '2026-01-01T00:00:00.000Z',
    finished_at: '2026-01-01T00:00:01.000Z',
  };
  const v2 = {
    ...v1,
    schema: 'ctrlrun.receipt/v2',
    principal: { agent: 'a', user: 'u', claims: null, issuer: null, expires_at: null },
    policy_hash: null,
    policy_version: null,
  };
  const later = { ...v2, schema: 'ctrlrun.receipt/v9', precondition_fingerprint: 'fp', approvers: ['alice', 'bob'], big: 2n ** 64n };

  it('a chain of v1 and v2 documents (fewer keys) verifies', () => {
    const { rows, head } = writeDocs([v1, v2, v1, v2]);
    expect(verifyChain(rows, head)).toMatchObject({ ok: true, verified: 4, breaks: [] });
  });

  it('a document with keys this build does not know (and a big integer) verifies', () => {
    const render = (d: unknown): string => JSON.stringify(d, (_k, v: unknown) => (typeof v === 'bigint' ? `__big${v}` : v)).replace(/"__big(\d+)"/g, '$1');
    const { rows, head } = writeDocs([v2, later, v1], render);
    expect((rows[1] as ReceiptRow).json).toContain('"big":18446744073709551616');
    expect(verifyChain(rows, head).ok).toBe(true);
  });

  it('a document stored with Python-style separators verifies (the parsed document is hashed)', () => {
    const python = (d: unknown): string => JSON.stringify(d).replace(/","/g, '", "').replace(/":"/g, '": "');
    const { rows, head } = writeDocs([v1, v2], python);
    expect((rows[0] as ReceiptRow).json).toContain('", "');
    expect(verifyChain(rows, head).ok).toBe(true);
  });

  it('a re-rendering would have flagged the older receipts (why stored text is hashed)', () => {
    const { rows, head } = writeDocs([v1]);
    // A v3 rendering of the same receipt adds keys and so a different hash.
    const rerendered = { ...JSON.parse((rows[0] as ReceiptRow).json as string), policy_hash: null, policy_version: null, controls: [] };
    expect(hashDocument(rerendered, 'receipt')).not.toBe(head.hash);
    expect(verifyChain(rows, head).ok).toBe(true);
  });
});

describe('verifyChain: T164b appending changes no old hash', () => {
  it('test_T164b_appending_changes_no_old_hash', () => {
    const specs = Array.from({ length: 8 }, (_, i) => defaultSpec(i + 1));
    const short = chain(specs.slice(0, 5));
    const long = chain(specs);
    expect(long.rows.slice(0, 5)).toEqual(short.rows);
    expect(verifyChain(short.rows, short.head).ok).toBe(true);
    expect(verifyChain(long.rows, long.head).ok).toBe(true);
    // The old head is exactly the prev_hash the first appended receipt links to.
    expect(JSON.parse((long.rows[5] as ReceiptRow).json as string).prev_hash).toBe(short.head.hash);
  });
});

describe('verifyChain: wrong types are breaks, never exceptions', () => {
  const base = (): { rows: ReceiptRow[]; head: ChainHead } => chainOf(3);
  const weird: [string, (rows: ReceiptRow[]) => unknown[]][] = [
    ['seq as a string', (r) => [r[0], { ...r[1], seq: '2' }, r[2]]],
    ['seq as a fraction', (r) => [r[0], { ...r[1], seq: 1.5 }, r[2]]],
    ['seq NaN', (r) => [r[0], { ...r[1], seq: Number.NaN }, r[2]]],
    ['seq beyond 2^53 as bigint', (r) => [r[0], { ...r[1], seq: 2n ** 60n }, r[2]]],
    ['a null row', (r) => [r[0], null, r[2]]],
    ['a string row', (r) => [r[0], 'row', r[2]]],
    [
      'a row with a throwing getter',
      (r) => [
        r[0],
        Object.defineProperty({}, 'seq', {
          get: () => {
            throw new Error('boom');
          },
        }),
        r[2],
      ],
    ],
    ['json as a number', (r) => [r[0], { ...r[1], json: 42 }, r[2]]],
    ['json null', (r) => [r[0], { ...r[1], json: null }, r[2]]],
    ['hash as a number', (r) => [r[0], { ...r[1], hash: 7 }, r[2]]],
    ['duplicate seq', (r) => [r[0], r[1], { ...r[1] }, r[2]]],
    ['negative seq', (r) => [{ ...r[0], seq: -1 }, r[1], r[2]]],
  ];
  for (const [what, mangle] of weird) {
    it(what, () => {
      const { rows, head } = base();
      let r: ChainReport | undefined;
      expect(() => (r = verifyChain(mangle(rows) as ReceiptRow[], head))).not.toThrow();
      expect(r?.ok).toBe(false);
      expect(r?.breaks.length).toBeGreaterThan(0);
    });
  }

  it('a row with an unusable seq is content_altered with seq null and has no place in the walk', () => {
    const { rows, head } = base();
    const r = verifyChain([rows[0], { ...rows[1], seq: '2' }, rows[2]] as unknown as ReceiptRow[], head);
    expect(breaks(r)).toEqual([
      ['content_altered', null],
      ['missing', 2],
      ['link_broken', 3],
    ]);
    expect(r).toMatchObject({ chained: 3, unchained: 0, verified: 1 });
  });

  it('a bigint seq that is a safe integer is a position (BIGINT columns)', () => {
    const { rows, head } = base();
    const big = rows.map((x) => ({ ...x, seq: BigInt(x.seq as number) }));
    expect(verifyChain(big as unknown as ReceiptRow[], { seq: BigInt(head.seq), hash: head.hash } as unknown as ChainHead).ok).toBe(true);
  });

  it('rows that are not an array and malformed heads are breaks', () => {
    const { rows, head } = base();
    expect(breaks(verifyChain(null as unknown as ReceiptRow[], { seq: 0, hash: GENESIS_HASH }))).toEqual([['content_altered', null]]);
    expect(breaks(verifyChain(rows, { seq: '3', hash: head.hash } as unknown as ChainHead))).toEqual([['head_mismatch', null]]);
    expect(breaks(verifyChain(rows, { seq: 3, hash: 5 } as unknown as ChainHead))).toEqual([['head_mismatch', null]]);
    expect(breaks(verifyChain(rows, 'head' as unknown as ChainHead))).toEqual([['head_mismatch', null]]);
    expect(breaks(verifyChain(rows, undefined as unknown as ChainHead))).toEqual([['head_mismatch', null]]);
  });

  it('property: any input whatsoever returns a well-formed report', () => {
    const row = fc.record(
      {
        receipt_id: fc.anything(),
        action_id: fc.anything(),
        effect_key: fc.anything(),
        result: fc.anything(),
        ts: fc.oneof(fc.string(), fc.anything()),
        json: fc.oneof(fc.json(), fc.string(), fc.anything()),
        seq: fc.oneof(
          fc.constant(null),
          fc.integer({ min: -2, max: 6 }),
          fc.constantFrom('2', '', 1.5, Number.NaN, Infinity, 2 ** 53, 1e300, 2n ** 64n, -0),
          fc.double(),
          fc.bigInt(),
          fc.anything(),
        ),
        prev_hash: fc.anything(),
        hash: fc.oneof(fc.constant(null), fc.string(), fc.anything()),
      },
      { requiredKeys: [] },
    );
    const names = new Set(['content_altered', 'hash_missing', 'link_broken', 'missing', 'head_mismatch', 'unchained']);
    fc.assert(
      fc.property(fc.oneof(fc.array(fc.oneof(row, fc.anything()), { maxLength: 8 }), fc.anything()), fc.anything(), (rows, head) => {
        const r = verifyChain(rows as ReceiptRow[], head as ChainHead);
        expect(r.ok).toBe(r.breaks.length === 0);
        for (const b of r.breaks) {
          expect(names.has(b.name)).toBe(true);
          expect(b.seq === null || Number.isSafeInteger(b.seq)).toBe(true);
          expect(typeof b.detail).toBe('string');
        }
        expect(r.verified).toBeLessThanOrEqual(r.chained);
      }),
      { numRuns: 300 },
    );
  });
});

describe('verifyChain: properties over random chains', () => {
  const chainArb = fc.array(SPEC_ARB, { minLength: 1, maxLength: 30 }).map(chain);

  it('every untampered chain of 1–30 receipts verifies, in any row order', () => {
    fc.assert(
      fc.property(chainArb, fc.infiniteStream(fc.nat()), ({ rows, head }, rand) => {
        const shuffled = [...rows];
        const it = rand[Symbol.iterator]();
        for (let i = shuffled.length - 1; i > 0; i--) {
          const j = (it.next().value as number) % (i + 1);
          [shuffled[i], shuffled[j]] = [shuffled[j] as ReceiptRow, shuffled[i] as ReceiptRow];
        }
        const r = verifyChain(shuffled, head);
        expect(r).toMatchObject({ ok: true, verified: rows.length, chained: rows.length, unchained: 0, breaks: [] });
      }),
      { numRuns: 60 },
    );
  });

  /** A JSON value unlike `old`. */
  const replacement = fc.oneof(
    fc.integer(),
    fc.string(),
    fc.boolean(),
    fc.constant(null),
    fc.dictionary(fc.string(), fc.integer(), { maxKeys: 2 }),
    fc.array(fc.string(), { maxLength: 2 }),
  );

  it('every edit of any one field of any stored document is detected', () => {
    fc.assert(
      fc.property(chainArb, fc.nat(), fc.nat(), replacement, ({ rows, head }, at, keyAt, value) => {
        const k = at % rows.length;
        const doc = JSON.parse((rows[k] as ReceiptRow).json as string) as Record<string, unknown>;
        const keys = Object.keys(doc);
        const key = keys[keyAt % keys.length] as string;
        fc.pre(JSON.stringify(doc[key]) !== JSON.stringify(value));
        rows[k] = edit(rows[k] as ReceiptRow, (d) => (d[key] = value));
        const r = verifyChain(rows, head);
        expect(r.ok).toBe(false);
        expect(r.breaks.some((b) => b.name === 'content_altered' && b.seq === k + 1)).toBe(true);
      }),
      { numRuns: 150 },
    );
  });

  it('every edit of one character of any stored JSON text is detected', () => {
    fc.assert(
      fc.property(chainArb, fc.nat(), fc.nat(), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), ({ rows, head }, at, pos, ch) => {
        const k = at % rows.length;
        const json = (rows[k] as ReceiptRow).json as string;
        const p = pos % json.length;
        const tampered = json.slice(0, p) + ch + json.slice(p + 1);
        fc.pre(tampered !== json);
        rows[k] = { ...(rows[k] as ReceiptRow), json: tampered };
        expect(verifyChain(rows, head).ok).toBe(false);
      }),
      { numRuns: 200 },
    );
  });

  it('every deletion of one row is detected (the head is left as it was)', () => {
    fc.assert(
      fc.property(chainArb, fc.nat(), ({ rows, head }, at) => {
        const k = at % rows.length;
        rows.splice(k, 1);
        const r = verifyChain(rows, head);
        expect(r.ok).toBe(false);
        expect(r.breaks.length).toBeGreaterThan(0);
      }),
      { numRuns: 100 },
    );
  });

  it('every swap of two rows is detected (contents exchanged, or seq columns exchanged)', () => {
    fc.assert(
      fc.property(fc.array(SPEC_ARB, { minLength: 2, maxLength: 30 }).map(chain), fc.nat(), fc.nat(), fc.boolean(), ({ rows, head }, x, y, bySeq) => {
        const i = x % rows.length;
        const j = y % rows.length;
        fc.pre(i !== j);
        const a = rows[i] as ReceiptRow;
        const b = rows[j] as ReceiptRow;
        if (bySeq) {
          rows[i] = { ...a, seq: b.seq };
          rows[j] = { ...b, seq: a.seq };
        } else {
          rows[i] = { ...b, seq: a.seq };
          rows[j] = { ...a, seq: b.seq };
        }
        const r = verifyChain(rows, head);
        expect(r.ok).toBe(false);
        expect(r.breaks.some((br) => br.name === 'link_broken')).toBe(true);
      }),
      { numRuns: 150 },
    );
  });
});

describe('verifyChain: columns that repeat a field of the hashed document (column_mismatch)', () => {
  const columnEdits: [keyof ReceiptRow, unknown][] = [
    ['receipt_id', 'rcp_forged'],
    ['action_id', 'act_forged'],
    ['effect_key', 'refund:someone-else'],
    ['effect_key', null],
    ['result', 'failed'],
    ['result', null],
    ['ts', '2027-01-01T00:00:00.000Z'],
    ['ts', null],
    ['prev_hash', `sha256:${'f'.repeat(64)}`],
  ];
  for (const [column, value] of columnEdits) {
    it(`editing the ${column} column (to ${JSON.stringify(value)}) is a column_mismatch finding at its seq, beside an intact chain`, () => {
      const { rows, head } = chainOf(4);
      rows[1] = { ...(rows[1] as ReceiptRow), [column]: value };
      const r = verifyChain(rows, head);
      // The original's verdict (it hashes the document, never these columns): intact.
      expect(r.ok).toBe(true);
      expect(breaks(r)).toEqual([]);
      expect(findings(r)).toEqual([['column_mismatch', 2]]);
      expect(r.column_findings[0]?.detail).toContain(`column ${column} is`);
      expect(r.verified).toBe(4);
    });
  }

  it('a ts column in the stored timestamp format (+00:00, six fraction digits) is the same instant', () => {
    const { rows, head } = chainOf(3);
    const iso = (rows[1] as ReceiptRow).ts as string;
    // The original writes `ts` in the column format with microseconds; the document keeps milliseconds.
    for (const ts of [iso.replace('.000Z', '+00:00'), iso.replace('Z', '000+00:00'), iso.replace('.000Z', '.000999+00:00')]) {
      rows[1] = { ...(rows[1] as ReceiptRow), ts };
      expect(verifyChain(rows, head).ok, ts).toBe(true);
    }
    rows[1] = { ...(rows[1] as ReceiptRow), ts: iso.replace('.000Z', '.001+00:00') };
    expect(findings(verifyChain(rows, head))).toEqual([['column_mismatch', 2]]);
  });

  it('a seq column as bigint (BIGINT) matches the document seq', () => {
    const { rows, head } = chainOf(2);
    expect(verifyChain(rows.map((x) => ({ ...x, seq: BigInt(x.seq as number) })) as unknown as ReceiptRow[], head).ok).toBe(true);
  });

  it('a column the caller did not pass is not compared; a field the document lacks is not compared', () => {
    const { rows, head } = chainOf(2);
    const bare = rows.map(({ seq, json, hash, receipt_id }) => ({ seq, json, hash, receipt_id }));
    expect(verifyChain(bare as unknown as ReceiptRow[], head).ok).toBe(true);
  });

  it('property: every edit of one duplicated column to another value is column_mismatch at that seq', () => {
    const value = fc.oneof(fc.constant(null), fc.string({ maxLength: 8 }), fc.constantFrom('committed', 'failed', 'refund:1', GENESIS_HASH));
    fc.assert(
      fc.property(
        fc.array(SPEC_ARB, { minLength: 1, maxLength: 12 }).map(chain),
        fc.nat(),
        fc.constantFrom('receipt_id', 'action_id', 'effect_key', 'result', 'ts', 'prev_hash'),
        value,
        ({ rows, head }, at, column, v) => {
          const k = at % rows.length;
          const row = rows[k] as ReceiptRow;
          fc.pre(row[column as keyof ReceiptRow] !== v);
          rows[k] = { ...row, [column]: v };
          const r = verifyChain(rows, head);
          expect(r.ok).toBe(true);
          expect(r.column_findings).toContainEqual({ name: 'column_mismatch', seq: k + 1, detail: expect.stringContaining(`column ${column}`) });
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('receiptView: what a view shows comes from the stored document', () => {
  it('an intact row: the view repeats its columns and lists no mismatch', () => {
    const { rows } = chainOf(2);
    const row = rows[1] as ReceiptRow;
    const v = receiptView(row);
    expect(v).toMatchObject({
      receipt_id: row.receipt_id,
      action_id: row.action_id,
      effect_key: row.effect_key,
      result: row.result,
      ts: row.ts,
      seq: 2,
      prev_hash: row.prev_hash,
      hash: row.hash,
      mismatched: [],
    });
    expect(v.document?.['arguments']).toEqual(JSON.parse(row.json as string).arguments);
  });

  it('edited columns are shown as the document holds them and flagged', () => {
    const { rows } = chainOf(2);
    const row = rows[0] as ReceiptRow;
    const forged = {
      ...row,
      result: 'failed',
      effect_key: 'refund:99',
      action_id: 'act_x',
      receipt_id: 'rcp_x',
      ts: '2030-01-01T00:00:00+00:00',
      seq: 9,
      prev_hash: 'sha256:x',
    };
    const v = receiptView(forged);
    expect(v).toMatchObject({
      result: row.result,
      effect_key: row.effect_key,
      action_id: row.action_id,
      receipt_id: row.receipt_id,
      ts: row.ts,
      seq: 1,
      prev_hash: row.prev_hash,
    });
    expect([...v.mismatched].sort()).toEqual(['action_id', 'effect_key', 'prev_hash', 'receipt_id', 'result', 'seq', 'ts']);
  });

  it('keeps __proto__ in the document as a key', () => {
    const json = '{"receipt_id":"r","arguments":{"__proto__":{"x":1},"amount":5},"result":"committed"}';
    const v = receiptView({ receipt_id: 'r', action_id: null, effect_key: null, result: 'committed', json, ts: null, seq: null, prev_hash: null, hash: null });
    expect(Object.keys(v.document?.['arguments'] as object)).toEqual(['__proto__', 'amount']);
  });

  it('an unreadable document gives nulls and flags json, never a throw', () => {
    for (const json of ['{', null, 42, '[1]']) {
      const v = receiptView({
        receipt_id: 'r',
        action_id: 'a',
        effect_key: 'k',
        result: 'committed',
        json,
        ts: null,
        seq: 1,
        prev_hash: null,
        hash: 'h',
      } as unknown as ReceiptRow);
      expect(v).toEqual({
        receipt_id: null,
        action_id: null,
        effect_key: null,
        result: null,
        ts: null,
        seq: null,
        prev_hash: null,
        hash: 'h',
        document: null,
        mismatched: ['json'],
      });
    }
    expect(() => receiptView(null as unknown as ReceiptRow)).not.toThrow();
  });

  it('property: any row whatsoever gives a view, never a throw, with string-or-null fields', () => {
    const row = fc.record(
      {
        receipt_id: fc.anything(),
        result: fc.anything(),
        effect_key: fc.anything(),
        seq: fc.anything(),
        hash: fc.anything(),
        json: fc.oneof(fc.json(), fc.string(), fc.anything()),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.oneof(row, fc.anything()), (r) => {
        const v = receiptView(r as ReceiptRow);
        for (const k of ['receipt_id', 'action_id', 'effect_key', 'result', 'ts', 'prev_hash', 'hash'] as const)
          expect(v[k] === null || typeof v[k] === 'string').toBe(true);
        expect(v.seq === null || Number.isSafeInteger(v.seq)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('verifyChain and receiptView on hostile column values', () => {
  it('a revoked Proxy or a function with a throwing toString in a column is a break, never a throw', () => {
    const { rows, head } = chainOf(2);
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    const fn = Object.assign(() => 0, {
      toString: () => {
        throw new Error('no');
      },
    });
    for (const value of [proxy, fn]) {
      for (const column of ['result', 'effect_key', 'hash', 'seq'] as const) {
        const mangled = [rows[0], { ...rows[1], [column]: value }] as unknown as ReceiptRow[];
        let r: ChainReport | undefined;
        expect(() => (r = verifyChain(mangled, head)), column).not.toThrow();
        // A hash or seq column is the chain's; a result or effect_key column is a finding beside it.
        if (column === 'hash' || column === 'seq') expect(r?.ok, column).toBe(false);
        else
          expect(
            r?.column_findings.map((f) => f.seq),
            column,
          ).toEqual([2]);
        expect(() => receiptView(mangled[1] as ReceiptRow), column).not.toThrow();
      }
    }
  });
});
