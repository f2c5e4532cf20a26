/**
 * What the output box says, rendered only from what `step()` returned (and the request that was
 * sent). DOM-free, so Node tests render every outcome the module can return. One branch per
 * outcome; each refusal names the kernel's error class.
 *
 * @module
 */
import type { ApproveRequest, ApproveResult, RefundRequest, RefundResult, ResolveRequest, ResolveResult, TryItOutcome } from '@ctrlrun/kernel/try-it';
import { formatMinor } from './input.js';

/** How an entry looks: it went through, it was refused, it waits for a human, nobody knows, or bad input. */
export type Tone = 'ok' | 'refused' | 'waiting' | 'uncertain' | 'error';

/** One entry of the output box. */
export interface Entry {
  readonly tone: Tone;
  /** What was asked, one line. */
  readonly asked: string;
  /** The verdict, one line. */
  readonly title: string;
  /** Why, and the evidence: remote calls, receipt fields. */
  readonly lines: readonly string[];
}

/** The error class the page names for each outcome (`null`: none raised). */
export const OUTCOME_CLASS: Readonly<Record<TryItOutcome, string | null>> = Object.freeze({
  executed: null,
  approval_required: 'ApprovalRequired',
  approval_mismatch: 'ApprovalMismatch',
  denied: 'ActionDenied',
  duplicate: 'DuplicateEffect',
  ambiguous_retry: 'AmbiguousEffect',
  reply_lost: 'AMBIGUOUS',
});

/** `refund txn_1 €500.00 (50000 cents) · lose the reply · presenting apr_…`. */
export function describeRefund(req: RefundRequest): string {
  const parts = [`refund ${req.payment_id} ${formatMinor(req.amount)} (${req.amount} cents)`];
  if (req.lose_reply) parts.push('lose the reply');
  if (req.approval_id) parts.push(`presenting ${req.approval_id}`);
  return parts.join(' · ');
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : v === null || v === undefined ? '-' : JSON.stringify(v);
}

/** `sha256:2a0f30cebd37…` (the full hash is in the JSON under each entry). */
export function shortHash(v: unknown): string {
  const s = str(v);
  return /^sha256:[0-9a-f]{64}$/.test(s) ? `${s.slice(0, 19)}…` : s;
}

/** The receipt's fields, as lines (its `error` is the kernel's message, shown above it). */
export function receiptLines(receipt: Record<string, unknown> | undefined): string[] {
  if (!receipt) return ['no receipt: the action has not run or been refused at its effect yet'];
  return [
    `receipt ${str(receipt['receipt_id'])}  seq ${str(receipt['seq'])}`,
    `  decision ${str(receipt['decision'])} (${str(receipt['decision_reason'])})  result ${str(receipt['result'])}  attempt ${str(receipt['attempt'])}`,
    `  effect ${str(receipt['effect_key'])}  approval ${str(receipt['approval_id'])}${receipt['approver'] ? ` by ${str(receipt['approver'])}` : ''}`,
    `  action ${shortHash(receipt['action_hash'])}  policy ${shortHash(receipt['policy_hash'])}`,
  ];
}

const MISMATCH_WHY: Readonly<Record<string, string>> = {
  mismatch: 'the approval was granted for a different action: this one hashes differently, so it does not cover it',
  consumed: 'a single-use approval that was already used: it cannot authorise a second execution',
  pending: 'nobody has granted this request: only the Approve button grants',
  unknown: 'there is no such approval request',
  expired: 'the approval has expired',
  denied: 'a human denied this request',
};

/** Renders one refund step's result. */
export function renderRefund(req: RefundRequest, res: RefundResult): Entry {
  const asked = describeRefund(req);
  const calls = `remote refund calls for ${req.payment_id}: ${res.remote_calls}`;
  const evidence = [calls, ...receiptLines(res.receipt as Record<string, unknown> | undefined)];
  const effect = str((res.receipt as Record<string, unknown> | undefined)?.['effect_key'] ?? `refund:${req.payment_id}`);
  const kernel = res.message ? [`${res.error}: ${res.message}`] : [];
  const outcome: TryItOutcome = res.outcome;
  switch (outcome) {
    case 'executed':
      return { tone: 'ok', asked, title: `✓ EXECUTED — the remote refunded ${formatMinor(req.amount)} on ${req.payment_id}`, lines: evidence };
    case 'approval_required':
      return {
        tone: 'waiting',
        asked,
        title: `⏸ ApprovalRequired — a human must approve this refund (request ${str(res.request_id)})`,
        lines: ['press Approve to grant it: the grant is bound to this exact action and used once', ...kernel, ...evidence],
      };
    case 'approval_mismatch':
      return {
        tone: 'refused',
        asked,
        title: `✗ BLOCKED — ApprovalMismatch (${str(res.reason)})`,
        lines: [MISMATCH_WHY[res.reason ?? ''] ?? 'the approval presented does not authorise this action', ...kernel, ...evidence],
      };
    case 'denied':
      return {
        tone: 'refused',
        asked,
        title: `✗ DENIED — ActionDenied (${str(res.reason)})`,
        lines: ['the policy denies this refund: no human can approve it, and the remote was not called', ...kernel, ...evidence],
      };
    case 'duplicate':
      return {
        tone: 'refused',
        asked,
        title: `✗ BLOCKED — DuplicateEffect (${str(res.reason)})`,
        lines: [`effect ${effect} is already ${str(res.reason).toUpperCase()}: the same refund is not made twice`, ...kernel, ...evidence],
      };
    case 'ambiguous_retry':
      return {
        tone: 'refused',
        asked,
        title: `✗ BLOCKED — AmbiguousEffect: ${effect} is AMBIGUOUS`,
        lines: [
          'it may have happened, so a blind retry is refused',
          `only a human moves it on: ctrlrun resolve ${effect} --committed|--failed`,
          ...kernel,
          ...evidence,
        ],
      };
    case 'reply_lost':
      return {
        tone: 'uncertain',
        asked,
        title: `? AMBIGUOUS — the remote committed, then the reply was lost (${str(res.error)})`,
        lines: [`effect ${effect} is now AMBIGUOUS: ctrlrun records that it cannot know whether the refund happened`, ...kernel, ...evidence],
      };
    default: {
      const never: never = outcome;
      return { tone: 'error', asked, title: `unknown outcome ${JSON.stringify(never)}`, lines: [JSON.stringify(res)] };
    }
  }
}

/** Renders the Approve button's result: the grant. */
export function renderApprove(req: ApproveRequest, res: ApproveResult): Entry {
  return {
    tone: 'ok',
    asked: `approve ${req.request_id}`,
    title: `✓ GRANTED — approval ${res.approval_id} by ${res.approver}`,
    lines: [`bound to action ${res.action_hash}`, `expires ${res.expires_at}`, 'present it with the refund it was granted for; it works once'],
  };
}

/** Renders the operator's Resolve: what the AMBIGUOUS effect is now, and what a retry will do. */
export function renderResolve(req: ResolveRequest, res: ResolveResult): Entry {
  const next =
    res.state === 'committed'
      ? 'a retry is now refused as a DuplicateEffect (committed): the refund happened, it is not made twice'
      : 'a retry now runs again as attempt 2: the refund did not happen, so it may be made';
  return {
    tone: 'ok',
    asked: `resolve ${req.effect_key} as ${req.state}`,
    title: `✓ RESOLVED — ${res.effect_key} is ${res.state.toUpperCase()}, by ${res.resolved_by}`,
    lines: ['the operator checked with the payment provider; only a human moves an AMBIGUOUS effect on', next],
  };
}

/** `{ name, message }` of anything thrown. */
export function errorOf(err: unknown): { name: string; message: string } {
  if (err instanceof Error) return { name: err.name, message: err.message };
  return { name: 'Error', message: String(err) };
}

/** Renders input the page or the kernel refused before anything ran. */
export function renderRefused(asked: string, error: { name?: string; message: string }): Entry {
  const cls = error.name && error.name !== 'Error' ? `${error.name}: ` : '';
  return { tone: 'error', asked, title: `✗ NOT RUN — ${cls}${error.message}`, lines: ['nothing was written; fix the input and run again'] };
}
