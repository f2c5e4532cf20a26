// Receipts v4–v7 (spec 05 §2): this build writes `ctrlrun.receipt/v7` with all 34 keys, reads
// every label the original wrote (v1–v7) and labels it does not know, and a chain that mixes
// them verifies hash by hash.
import { describe, expect, it } from 'vitest';
import {
  Control,
  createAction,
  InvalidArgument,
  loadPolicy,
  parseReceipt,
  receiptKeysOf,
  sequentialIds,
  verifyChain,
  type JsonObject,
  type ReceiptRow,
} from '@ctrlrun/kernel';
import { RECEIPT_KEYS } from '@ctrlrun/kernel/store';
import { buildReceipt, GENESIS_HASH, sealReceipt } from '@ctrlrun/kernel/store';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { action, doc, GRANT, rig, rejection, V3 } from './authority.fixtures.js';
import { SPEC_RECEIPT_KEYS } from './receipt.fixtures.js';

const V = (n: number): string => `ctrlrun.receipt/v${n}`;

/** A v7 document as this build writes it, `seq`/`prev_hash` still null. */
function v7(receiptId = 'ctr_1', over: Partial<Parameters<typeof buildReceipt>[1]> = {}): JsonObject {
  const a = createAction({
    name: 'stripe.refund',
    arguments: { payment_id: 'txn_1', amount: 5 },
    principal: { agent: 'refund-agent', user: 'ana@example.com' },
    resource: 'payment:txn_1',
  });
  return buildReceipt(a, {
    receiptId,
    decision: 'allow',
    decisionReason: 'rule[0]',
    approvalId: null,
    approver: null,
    effectKey: `refund:${receiptId}`,
    attempt: 1,
    result: 'committed',
    error: null,
    startedAt: '2026-01-01T12:00:00.000Z',
    finishedAt: '2026-01-01T12:00:01.000Z',
    policyHash: `sha256:${'a'.repeat(64)}`,
    policyVersion: '1',
    controls: ['SOC2'],
    ...over,
  }).document;
}

/** The same receipt as a `vN` writer (3 ≤ N ≤ 7) stores it: exactly that label's keys. */
function asVersion(document: JsonObject, n: number): JsonObject {
  return Object.fromEntries(receiptKeysOf(V(n))!.map((k) => [k, k === 'schema' ? V(n) : document[k]!])) as JsonObject;
}

/** A v7 document whose v4–v7 keys all hold values, as the original writes them for a committed action. */
function fullV7(): JsonObject {
  return {
    ...v7(),
    seq: 1,
    prev_hash: GENESIS_HASH,
    precondition_at_request: `sha256:${'b'.repeat(64)}`,
    precondition_at_recheck: `sha256:${'b'.repeat(64)}`,
    approvers: [
      { agent: 'reviewer', user: 'bob@example.com', issuer: 'https://idp.example.com', entitled: ['four-eyes'], granted_at: '2026-09-12T10:00:00+00:00' },
      { agent: 'reviewer', user: 'carol@example.com', issuer: null, entitled: [], granted_at: '2026-09-12T10:00:00.123456+00:00' },
    ],
    authority_grant_id: 'dlg_0123456789abcdef',
    task: 'tsk_42',
    scope_hash: `sha256:${'c'.repeat(64)}`,
    budget_charges: [
      { grant_id: 'head-of-support', metric: 'count', amount: 1 },
      { grant_id: 'head-of-support', metric: 'amount', amount: 5 },
    ],
    hop: 'dlg_fedcba9876543210',
  };
}

/** Seals `docs` one after another from the genesis hash, as a store keeps them. */
function chainOf(docs: JsonObject[]): { rows: ReceiptRow[]; head: { seq: number; hash: string } } {
  let prev = GENESIS_HASH;
  const rows = docs.map((d, i) => {
    const sealed = sealReceipt(d, i + 1, prev);
    const row: ReceiptRow = {
      receipt_id: d['receipt_id'] as string,
      action_id: d['action_id'] as string,
      effect_key: d['effect_key'] as string | null,
      result: d['result'] as string,
      json: sealed.json,
      ts: d['finished_at'] as string,
      seq: i + 1,
      prev_hash: prev,
      hash: sealed.hash,
    };
    prev = sealed.hash;
    return row;
  });
  return { rows, head: { seq: rows.length, hash: prev } };
}

describe('what this build writes: ctrlrun.receipt/v7, 34 keys', () => {
  it('test_T522_the_schemas_a_chain_can_hold_are_the_ones_receipt_py_declares', () => {
    // Each version appends its keys to the previous set, in spec 05 §2.1's order.
    expect([3, 4, 5, 6, 7].map((n) => receiptKeysOf(V(n))!.length)).toEqual([26, 28, 30, 33, 34]);
    for (const n of [4, 5, 6, 7]) expect(receiptKeysOf(V(n))!.slice(0, receiptKeysOf(V(n - 1))!.length)).toEqual(receiptKeysOf(V(n - 1)));
    expect(receiptKeysOf(V(4))!.slice(26)).toEqual(['precondition_at_request', 'precondition_at_recheck']);
    expect(receiptKeysOf(V(5))!.slice(28)).toEqual(['approvers', 'authority_grant_id']);
    expect(receiptKeysOf(V(6))!.slice(30)).toEqual(['task', 'scope_hash', 'budget_charges']);
    expect(receiptKeysOf(V(7))!.slice(33)).toEqual(['hop']);
    expect(RECEIPT_KEYS).toEqual(SPEC_RECEIPT_KEYS);
    expect(receiptKeysOf(V(7))).toEqual(SPEC_RECEIPT_KEYS);
    // v1 and v2 predate the fixed sets; a later label is not this build's to describe.
    for (const label of [V(1), V(2), V(8), 'ctrlrun.receipt/v7 ', 'receipt']) expect(receiptKeysOf(label)).toBeNull();
  });

  it('buildReceipt writes v7: the v3 keys in 01 §8 order, then the v4–v7 keys, null or [] for what this build does not do', () => {
    const d = v7();
    expect(d['schema']).toBe('ctrlrun.receipt/v7');
    expect(Object.keys(d)).toEqual(SPEC_RECEIPT_KEYS);
    expect(d).toMatchObject({
      precondition_at_request: null,
      precondition_at_recheck: null,
      approvers: [],
      authority_grant_id: null,
      task: null,
      scope_hash: null,
      budget_charges: [],
      hop: null,
    });
    // The sealed text keeps that order; the hash is the canonical form's whatever the order.
    const sealed = sealReceipt(d, 1, GENESIS_HASH);
    expect(Object.keys(JSON.parse(sealed.json) as object)).toEqual(SPEC_RECEIPT_KEYS);
    expect(
      sealed.json.endsWith(
        ',"precondition_at_request":null,"precondition_at_recheck":null,"approvers":[],"authority_grant_id":null,"task":null,"scope_hash":null,"budget_charges":[],"hop":null}',
      ),
    ).toBe(true);
    const { rows, head } = chainOf([d]);
    expect(rows[0]!.hash).toBe(sealed.hash);
    expect(verifyChain(rows, head)).toMatchObject({ ok: true, verified: 1, breaks: [] });
  });

  it('a principal with no claims is written with claims {} (never null), as the original writes it', () => {
    expect((v7()['principal'] as JsonObject)['claims']).toEqual({});
    const withClaims = createAction({ name: 'x', arguments: {}, principal: { agent: 'a', claims: { role: 'support' } } });
    const without = createAction({ name: 'x', arguments: {}, principal: { agent: 'a' } });
    expect(withClaims.actionHash).toBe(without.actionHash);
  });
});

describe('what this build reads: every label v1–v7, and labels it does not know', () => {
  it('a v7 document with every key holding a value reads back unchanged', () => {
    const json = JSON.stringify(fullV7());
    const parsed = parseReceipt(json);
    expect(parsed).toEqual(JSON.parse(json));
    expect(Object.keys(parsed)).toHaveLength(34);
    expect(parsed.approvers?.[0]?.entitled).toEqual(['four-eyes']);
    expect(parsed.budget_charges?.[1]).toEqual({ grant_id: 'head-of-support', metric: 'amount', amount: 5 });
    expect(parsed.hop).toBe('dlg_fedcba9876543210');
  });

  it('v3, v4, v5 and v6 documents read back with exactly their own keys', () => {
    const full = fullV7();
    for (const n of [3, 4, 5, 6]) {
      const d = asVersion(full, n);
      const parsed = parseReceipt(JSON.stringify(d));
      expect(parsed.schema).toBe(V(n));
      expect(Object.keys(parsed)).toEqual(receiptKeysOf(V(n)));
      expect(parsed).toEqual(d);
    }
    expect(parseReceipt(JSON.stringify(asVersion(full, 4))).precondition_at_recheck).toBe(full['precondition_at_recheck']);
    expect(parseReceipt(JSON.stringify(asVersion(full, 5))).authority_grant_id).toBe('dlg_0123456789abcdef');
    expect(parseReceipt(JSON.stringify(asVersion(full, 6))).task).toBe('tsk_42');
  });

  it('a labelled version missing one of its keys, or holding a later version’s, is refused naming the key', () => {
    const full = fullV7();
    for (const n of [4, 5, 6, 7]) {
      const d = asVersion(full, n);
      const last = receiptKeysOf(V(n))!.at(-1)!;
      const { [last]: _gone, ...rest } = d;
      expect(() => parseReceipt(JSON.stringify(rest))).toThrow(new RegExp(`missing: ${last}$`));
    }
    expect(() => parseReceipt(JSON.stringify({ ...asVersion(full, 4), hop: null }))).toThrow(/unknown field for "ctrlrun\.receipt\/v4": "hop"/);
    expect(() => parseReceipt(JSON.stringify({ ...asVersion(full, 3), approvers: [] }))).toThrow(/unknown field for "ctrlrun\.receipt\/v3": "approvers"/);
  });

  it('v1 and v2 documents (fewer keys, a two-key principal in v1) read back', () => {
    const full = asVersion(fullV7(), 3);
    const keep = (keys: string[]): JsonObject => Object.fromEntries(keys.map((k) => [k, full[k]!]));
    const v1: JsonObject = {
      ...keep(['receipt_id', 'action_id', 'action', 'action_hash', 'principal', 'resource', 'arguments', 'environment', 'decision', 'decision_reason']),
      ...keep(['approval_id', 'approver', 'effect_key', 'attempt', 'result', 'error', 'started_at', 'finished_at']),
      schema: V(1),
      principal: { agent: 'refund-agent', user: null },
    };
    const v2: JsonObject = {
      ...v1,
      schema: V(2),
      principal: { agent: 'a', user: 'u', claims: null, issuer: null, expires_at: null },
      policy_hash: null,
      policy_version: null,
    };
    expect(parseReceipt(JSON.stringify(v1))).toEqual(v1);
    expect(parseReceipt(JSON.stringify(v2))).toEqual(v2);
    expect(() => parseReceipt(JSON.stringify({ ...v1, principal: v2['principal'] }))).toThrow(/principal must have exactly agent, user; got/);
    expect(() => parseReceipt(JSON.stringify({ ...v2, hop: null }))).toThrow(/unknown field for "ctrlrun\.receipt\/v2": "hop"/);
    const { action: _gone, ...noAction } = v1;
    expect(() => parseReceipt(JSON.stringify(noAction))).toThrow(/missing: action$/);
  });

  it('a label this build does not know is read: the keys every receipt has, its other keys as they are', () => {
    const later: JsonObject = {
      ...fullV7(),
      schema: 'ctrlrun.receipt/v8',
      approval_witness: { any: ['thing'] },
      principal: { agent: 'a', user: null, roles: ['x'] },
    };
    expect(parseReceipt(JSON.stringify(later))).toEqual(later);
    const { decision: _gone, ...noDecision } = later;
    expect(() => parseReceipt(JSON.stringify(noDecision))).toThrow(/missing: decision$/);
    // A key this build knows is still checked for its type, whatever the label.
    expect(() => parseReceipt(JSON.stringify({ ...later, hop: 7 }))).toThrow(/receipt field hop must be a string or null, got number/);
    expect(() => parseReceipt(JSON.stringify({ ...later, schema: 7 }))).toThrow(/receipt field schema must be a string/);
    const { schema: _none, ...unlabelled } = later;
    expect(() => parseReceipt(JSON.stringify(unlabelled))).toThrow(/missing: schema/);
  });

  it('a v4–v7 field of the wrong shape is an InvalidArgument naming it', () => {
    const full = fullV7();
    const approver = (full['approvers'] as JsonObject[])[0]!;
    const refused: [JsonObject, RegExp][] = [
      [{ precondition_at_request: 1 }, /precondition_at_request must be a string or null/],
      [{ precondition_at_recheck: {} }, /precondition_at_recheck must be a string or null/],
      [{ approvers: null }, /approvers must be an array, got null/],
      [{ approvers: ['bob'] }, /approvers\[0\] must be an object/],
      [{ approvers: [{ ...approver, role: 'x' }] }, /approvers\[0\] must have exactly agent, user, issuer, entitled, granted_at/],
      [{ approvers: [{ ...approver, entitled: 'four-eyes' }] }, /approvers\[0\]\.entitled must be an array of strings/],
      [{ approvers: [approver, { ...approver, user: 3 }] }, /approvers\[1\]\.user must be a string or null/],
      [{ approvers: [{ ...approver, granted_at: null }] }, /approvers\[0\]\.granted_at must be a string/],
      [{ authority_grant_id: ['g'] }, /authority_grant_id must be a string or null, got an array/],
      [{ task: true }, /task must be a string or null/],
      [{ scope_hash: 1 }, /scope_hash must be a string or null/],
      [{ budget_charges: {} }, /budget_charges must be an array/],
      [{ budget_charges: [{ grant_id: 'g', metric: 'count' }] }, /budget_charges\[0\] must have exactly grant_id, metric, amount/],
      [{ budget_charges: [{ grant_id: 'g', metric: 'count', amount: -1 }] }, /budget_charges\[0\]\.amount must be a non-negative integer/],
      [{ budget_charges: [{ grant_id: 'g', metric: 'count', amount: '1' }] }, /budget_charges\[0\]\.amount must be a non-negative integer/],
      [{ budget_charges: [{ grant_id: 1, metric: 'count', amount: 1 }] }, /budget_charges\[0\]\.grant_id must be a string/],
      [{ hop: false }, /hop must be a string or null/],
    ];
    for (const [over, message] of refused) {
      expect(() => parseReceipt(JSON.stringify({ ...full, ...over }))).toThrow(InvalidArgument);
      expect(() => parseReceipt(JSON.stringify({ ...full, ...over }))).toThrow(message);
    }
    // A float amount is not strict JSON for a receipt at all.
    expect(() => parseReceipt(JSON.stringify({ ...full, budget_charges: [{ grant_id: 'g', metric: 'm', amount: 1.5 }] }))).toThrow(InvalidArgument);
  });
});

describe('mixed versions in one chain (spec 05 §2.6)', () => {
  const five = (): JsonObject[] => [7, 3, 5, 4, 6].map((n, i) => asVersion({ ...fullV7(), ...pick(v7(`ctr_${i}`)) }, n));
  const pick = (d: JsonObject): JsonObject => ({ receipt_id: d['receipt_id']!, effect_key: d['effect_key']! });

  it('test_T521_a_chain_of_five_receipt_schema_versions_verifies_end_to_end', async () => {
    // In the rows, each hashed over its own key set, in no order of labels (a v3 after a v7).
    const docs = five();
    const { rows, head } = chainOf(docs);
    expect(rows.map((r) => (JSON.parse(r.json!) as JsonObject)['schema'])).toEqual([V(7), V(3), V(5), V(4), V(6)]);
    expect(verifyChain(rows, head)).toMatchObject({ ok: true, verified: 5, breaks: [] });
    for (const r of rows) expect(parseReceipt(r.json!).receipt_id).toBe(r.receipt_id);

    // And in a store: the five stored as their writers stored them, then an action this build runs
    // extends the chain with a v7 receipt; the whole chain verifies, each row read back.
    const store = await createSqlJsStore();
    for (const d of docs) {
      await store.putReceipt({
        receiptId: d['receipt_id'] as string,
        actionId: d['action_id'] as string,
        effectKey: d['effect_key'] as string,
        result: 'committed',
        finishedAt: d['finished_at'] as string,
        document: d,
      });
    }
    const control = new Control({ policy: loadPolicy('schema: ctrlrun.policy/v1\nactions:\n  x: {decision: allow}\n'), store, ids: sequentialIds() });
    const { receipt } = await control.executeWithReceipt(createAction({ name: 'x', arguments: {}, principal: { agent: 'a' } }), () => 1);
    expect(receipt.document['schema']).toBe(V(7));
    expect(receipt.seq).toBe(6);
    const stored = await store.receipts();
    expect(stored.map((r) => parseReceipt(r.json!).schema)).toEqual([V(7), V(3), V(5), V(4), V(6), V(7)]);
    expect(verifyChain(stored, await store.chainHead())).toMatchObject({ ok: true, verified: 6, breaks: [] });
    await store.close();
  });

  it('test_T521b_altering_the_row_of_any_one_version_is_named_at_its_seq', () => {
    for (let i = 0; i < 5; i++) {
      const { rows, head } = chainOf(five());
      const row = rows[i]!;
      const altered = row.json!.replace('"decision_reason":"rule[0]"', '"decision_reason":"rule[1]"');
      expect(altered).not.toBe(row.json);
      rows[i] = { ...row, json: altered };
      const report = verifyChain(rows, head);
      expect(report.ok).toBe(false);
      // Named at its own seq, first; what follows (the next row's link to it) is the verifier's usual account.
      expect(report.breaks[0]).toMatchObject({ name: 'content_altered', seq: i + 1 });
      expect(report.breaks.filter((b) => b.name === 'content_altered').map((b) => b.seq)).toEqual([i + 1]);
    }
  });

  it('test_T523b_a_relabelled_row_is_a_tamper_and_is_reported_as_one', () => {
    const { rows, head } = chainOf(five());
    rows[1] = { ...rows[1]!, json: rows[1]!.json!.replace(`"schema":"${V(3)}"`, `"schema":"${V(7)}"`) };
    const report = verifyChain(rows, head);
    expect(report.ok).toBe(false);
    expect(report.breaks[0]).toMatchObject({ name: 'content_altered', seq: 2 });
  });
});

describe('the receipt of an action this build runs (spec 05 §2.2)', () => {
  it('test_a_receipt_with_no_precondition_carries_two_nulls', async () => {
    const r = await rig(doc());
    const { receipt } = await r.control.executeWithReceipt(action({ resource: null }), r.executor);
    expect(receipt.document['result']).toBe('committed');
    expect(receipt.document['precondition_at_request']).toBeNull();
    expect(receipt.document['precondition_at_recheck']).toBeNull();
    expect(Object.keys(receipt.document)).toEqual(SPEC_RECEIPT_KEYS);
  });

  it('test_T443_a_refused_receipt_records_no_charge', async () => {
    const r = await rig(doc(GRANT));
    await rejection(r.control.execute(action({ arguments: { amount: 300000, payment_id: 'EU-42' } }), r.executor));
    expect(r.lastReceipt()).toMatchObject({ result: 'denied', decision_reason: 'authority_constraint', budget_charges: [], authority_grant_id: null });
    // And a committed one charges none either: this build implements no budget.
    await r.control.execute(action(), r.executor);
    expect(r.lastReceipt()).toMatchObject({ result: 'committed', budget_charges: [] });
  });

  it('authority_grant_id names the grant that let the action through; null with no authority section', async () => {
    const r = await rig(doc(GRANT));
    await r.control.execute(action(), r.executor);
    expect(r.lastReceipt()).toMatchObject({
      result: 'committed',
      authority_grant_id: 'head-of-support',
      approvers: [],
      task: null,
      scope_hash: null,
      hop: null,
    });
    // A refusal before authority passed: none.
    await rejection(r.control.execute(action({ principal: { agent: 'someone-else' } }), r.executor));
    expect(r.lastReceipt()).toMatchObject({ result: 'denied', decision_reason: 'no_authority', authority_grant_id: null });
    // A refusal after authority passed (the policy denies) still names the grant that passed it.
    const denying = await rig(doc(GRANT, '\nactions:\n  stripe.refund:\n    resource: "payment:{payment_id}"\n    decision: deny\n'));
    await rejection(denying.control.execute(action(), denying.executor));
    expect(denying.lastReceipt()).toMatchObject({ result: 'denied', decision: 'deny', authority_grant_id: 'head-of-support' });

    const plain = await rig(doc());
    await plain.control.execute(action({ resource: null }), plain.executor);
    expect(plain.lastReceipt()).toMatchObject({ result: 'committed', authority_grant_id: null });
  });

  it('authority_grant_id is the dlg_ id when a delegation decided; and in observe mode, only when authority passed', async () => {
    const ROOT =
      '\nauthority:\n  grants:\n    - id: root\n      subject: { agent: "support-agent" }\n      actions: ["stripe.refund"]\n      expires_at: 2026-12-31T00:00:00Z\n      delegable: true\n';
    const r = await rig(doc(ROOT));
    const child = await r.control.delegate(
      'root',
      { subject: { agent: 'helper' }, actions: ['stripe.refund'], expiresAt: '2026-12-30T00:00:00Z' },
      { by: { agent: 'support-agent' } },
    );
    expect(child.delegationId).toMatch(/^dlg_/);
    await r.control.execute(action({ resource: null, principal: { agent: 'helper' } }), r.executor);
    expect(r.lastReceipt()).toMatchObject({ result: 'committed', authority_grant_id: child.delegationId });

    const observed = await rig(doc(GRANT).replace(V3, `${V3}mode: observe\n`));
    await observed.control.execute(action(), observed.executor);
    expect(observed.lastReceipt()).toMatchObject({ result: 'observed', authority_grant_id: 'head-of-support' });
    await observed.control.execute(action({ principal: { agent: 'someone-else' } }), observed.executor);
    expect(observed.lastReceipt()).toMatchObject({ result: 'observed', authority_grant_id: null });
  });
});
