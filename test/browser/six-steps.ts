import { expect } from 'vitest';

/**
 * Spec 04 §4's six steps as the browser tests click them (the playground page and the
 * `<ctrlrun-try-it>` element): what each guided action must show, keyed by the guide's action ids.
 */

/** What spec 04 §4's table asks of each click, keyed by the guide's action ids. */
export interface Expected {
  /** The form after the guide's button: payment id, amount, lose the reply, an approval presented. */
  form?: { payment_id: string; amount: string; lose_reply: boolean; presents: boolean };
  outcome: string;
  remote?: number;
  decision?: string;
  result?: string;
  reason?: string;
  error?: string;
  receipt?: false;
  /** The text names this. */
  names?: string[];
}

const form = (payment_id: string, amount: number, lose_reply = false, presents = false) => ({ payment_id, amount: String(amount), lose_reply, presents });

export const SPEC: [string, Expected][] = [
  ['1', { form: form('txn_1', 50000), outcome: 'executed', decision: 'allow', result: 'committed', remote: 1 }],
  ['2a', { form: form('txn_2', 200000), outcome: 'approval_required', remote: 0, receipt: false, names: ['ApprovalRequired'] }],
  ['2b', { outcome: 'approved' }],
  [
    '2c',
    {
      form: form('txn_2', 500000, false, true),
      outcome: 'approval_mismatch',
      reason: 'mismatch',
      result: 'blocked',
      remote: 0,
      names: ['ApprovalMismatch', 'mismatch'],
    },
  ],
  ['2d', { form: form('txn_2', 200000, false, true), outcome: 'executed', decision: 'approve', result: 'committed', remote: 1 }],
  ['3', { form: form('txn_2', 200000, false, true), outcome: 'approval_mismatch', reason: 'consumed', remote: 1, names: ['ApprovalMismatch', 'consumed'] }],
  ['4', { form: form('txn_3', 2000000), outcome: 'denied', error: 'ActionDenied', result: 'denied', remote: 0, names: ['ActionDenied'] }],
  ['5a', { form: form('txn_4', 50000, true), outcome: 'reply_lost', result: 'ambiguous', remote: 1, names: ['AMBIGUOUS'] }],
  [
    '5b',
    { form: form('txn_4', 50000), outcome: 'ambiguous_retry', error: 'AmbiguousEffect', result: 'blocked', remote: 1, names: ['AmbiguousEffect', 'AMBIGUOUS'] },
  ],
  ['6', { form: form('txn_1', 50000), outcome: 'duplicate', error: 'DuplicateEffect', remote: 1, names: ['DuplicateEffect'] }],
];

/** The policy rule each guided refund is decided by under the module's policy (the machinery view names it). */
export const RULE: Readonly<Record<string, string>> = {
  '1': 'rule[0]',
  '2a': 'rule[1]',
  '2c': 'rule[1]',
  '2d': 'rule[1]',
  '3': 'rule[1]',
  '4': 'rule[2]',
  '5a': 'rule[0]',
  '5b': 'rule[0]',
  '6': 'rule[0]',
};

/** Spec 04 §4's expectations for one guided action. */
export function expectStep(id: string, want: Expected, shown: { data: Record<string, string | undefined>; text: string }): void {
  const d = shown.data;
  expect(d['outcome'], `step ${id}: ${shown.text}`).toBe(want.outcome);
  if (want.remote !== undefined) expect(Number(d['remoteCalls']), `step ${id}: remote calls`).toBe(want.remote);
  if (want.decision) expect(d['decision'], `step ${id}: decision`).toBe(want.decision);
  if (want.result) expect(d['result'], `step ${id}: receipt result`).toBe(want.result);
  if (want.reason) expect(d['reason'], `step ${id}: reason`).toBe(want.reason);
  if (want.error) expect(d['error'], `step ${id}: error class`).toBe(want.error);
  if (want.receipt === false) expect(d['result'], `step ${id}: no receipt`).toBeUndefined();
  for (const name of want.names ?? []) expect(shown.text, `step ${id} names ${name}`).toContain(name);
}
