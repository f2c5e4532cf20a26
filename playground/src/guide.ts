/**
 * The six steps of spec 04 §4 as the page tells the reader to click them. Data only: each action
 * fills the form (or points at the Approve button); the reader presses Run or Approve. The
 * end-to-end test clicks through exactly this list.
 *
 * @module
 */

/** What one guided action puts in the form. */
export type Fill =
  | {
      kind: 'refund';
      payment_id: string;
      /** Integer minor units (cents). */
      amount: number;
      lose_reply: boolean;
      /** Put the approval from step 2 in the "approval to present" field. */
      present: boolean;
    }
  | { kind: 'approve' };

/** One button in a step. */
export interface GuideAction {
  /** Stable id: the button is `#fill-<id>`. */
  readonly id: string;
  /** What the button says. */
  readonly label: string;
  readonly fill: Fill;
}

/** One of the six steps. */
export interface GuideStep {
  readonly n: number;
  readonly title: string;
  /** One or two sentences: what the reader is about to do. */
  readonly body: string;
  readonly actions: readonly GuideAction[];
  /** What to look for in the output. */
  readonly watch: string;
}

const refund = (payment_id: string, amount: number, extra: { lose_reply?: boolean; present?: boolean } = {}): Fill => ({
  kind: 'refund',
  payment_id,
  amount,
  lose_reply: extra.lose_reply ?? false,
  present: extra.present ?? false,
});

/** The guided sequence. */
export const GUIDE: readonly GuideStep[] = [
  {
    n: 1,
    title: 'A small refund runs',
    body: 'Refund €500 on txn_1. The policy allows up to €1,000 without a human.',
    actions: [{ id: '1', label: 'Fill in: txn_1, €500', fill: refund('txn_1', 50000) }],
    watch: 'executed; the receipt says allow / committed; the remote was called once.',
  },
  {
    n: 2,
    title: 'An approval covers exactly what was approved',
    body: 'Ask for €2,000 on txn_2: a human must approve. Approve it, then try to use that approval for €5,000, then for the €2,000 it was granted for.',
    actions: [
      { id: '2a', label: 'Fill in: txn_2, €2,000', fill: refund('txn_2', 200000) },
      { id: '2b', label: 'Go to Approve', fill: { kind: 'approve' } },
      { id: '2c', label: 'Fill in: txn_2, €5,000 with the approval', fill: refund('txn_2', 500000, { present: true }) },
      { id: '2d', label: 'Fill in: txn_2, €2,000 with the approval', fill: refund('txn_2', 200000, { present: true }) },
    ],
    watch: 'ApprovalRequired, then the grant, then ApprovalMismatch (mismatch) with no call to the remote, then executed.',
  },
  {
    n: 3,
    title: 'An approval is used once',
    body: 'Present the same approval again for the same €2,000.',
    actions: [{ id: '3', label: 'Fill in: txn_2, €2,000 with the approval again', fill: refund('txn_2', 200000, { present: true }) }],
    watch: 'ApprovalMismatch (consumed); the remote count stays at 1.',
  },
  {
    n: 4,
    title: 'Too much is denied',
    body: 'Refund €20,000 on txn_3: above every band in the policy.',
    actions: [{ id: '4', label: 'Fill in: txn_3, €20,000', fill: refund('txn_3', 2000000) }],
    watch: 'ActionDenied, a denied receipt, no request for approval, no call to the remote.',
  },
  {
    n: 5,
    title: 'A lost reply is not a failure',
    body: 'Refund €500 on txn_4 and lose the reply: the remote commits, the answer never arrives. Then retry it.',
    actions: [
      { id: '5a', label: 'Fill in: txn_4, €500, lose the reply', fill: refund('txn_4', 50000, { lose_reply: true }) },
      { id: '5b', label: 'Fill in: txn_4, €500 again', fill: refund('txn_4', 50000) },
    ],
    watch: 'The effect is AMBIGUOUS; the retry is refused with AmbiguousEffect and the remote count stays at 1.',
  },
  {
    n: 6,
    title: 'The same refund twice is refused',
    body: 'Refund €500 on txn_1 again, the refund of step 1.',
    actions: [{ id: '6', label: 'Fill in: txn_1, €500 again', fill: refund('txn_1', 50000) }],
    watch: 'DuplicateEffect; the remote count for txn_1 stays at 1.',
  },
];
