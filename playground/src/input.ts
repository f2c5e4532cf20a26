/**
 * Reading the form. The kernel's `step()` is the validator of record; the page only turns text
 * into the request's types and refuses what cannot become one, with a message that says how.
 *
 * @module
 */

/** The form as text. */
export interface FormText {
  payment_id: string;
  amount: string;
  lose_reply: boolean;
  approval_id: string;
}

/** A refund request built from the form, or why it could not be. */
export type ParsedRefund =
  { ok: true; request: { op: 'refund'; payment_id: string; amount: number; lose_reply: boolean; approval_id: string | null } } | { ok: false; message: string };

/** An approval or request id: `apr_` and 32 lowercase hex digits. */
export const APPROVAL_ID = /^apr_[0-9a-f]{32}$/;

/**
 * Reads an amount in minor units: an optional sign and digits, nothing else, within the safe
 * integers (the kernel then applies its own range).
 */
export function parseAmount(text: string): { ok: true; amount: number } | { ok: false; message: string } {
  const t = text.trim();
  if (!/^[+-]?[0-9]+$/.test(t)) {
    const shown = t === '' ? 'nothing' : JSON.stringify(t.length > 40 ? `${t.slice(0, 40)}…` : t);
    return { ok: false, message: `amount must be a whole number of cents (minor units), e.g. 50000 for €500.00; got ${shown}` };
  }
  const amount = Number(t);
  if (!Number.isSafeInteger(amount))
    return { ok: false, message: `amount ${t.length > 40 ? `${t.slice(0, 40)}…` : t} is too large to be a whole number of cents` };
  return { ok: true, amount };
}

/** Builds the refund request; `payment_id` goes through as typed (trimmed) for the kernel to judge. */
export function parseRefund(form: FormText): ParsedRefund {
  const amount = parseAmount(form.amount);
  if (!amount.ok) return amount;
  const approval = form.approval_id.trim();
  if (approval !== '' && !APPROVAL_ID.test(approval)) {
    return {
      ok: false,
      message: `the approval to present must look like apr_ and 32 hex digits (the id Approve printed); got ${JSON.stringify(approval.slice(0, 60))}`,
    };
  }
  return {
    ok: true,
    request: {
      op: 'refund',
      payment_id: form.payment_id.trim(),
      amount: amount.amount,
      lose_reply: form.lose_reply,
      approval_id: approval === '' ? null : approval,
    },
  };
}

/** `€2,000.00` from 200000; a negative amount reads `-€5.00`. Display only. */
export function formatMinor(minor: number): string {
  if (!Number.isSafeInteger(minor)) return `${minor} (not a whole number of cents)`;
  const sign = minor < 0 ? '-' : '';
  const abs = Math.abs(minor);
  // Grouped by hand: toLocaleString builds a number formatter on every call, which cost more
  // than the rest of a step's rendering together.
  const euros = String(Math.trunc(abs / 100)).replace(/\B(?=(\d{3})+$)/g, ',');
  return `${sign}€${euros}.${String(abs % 100).padStart(2, '0')}`;
}
