/**
 * How many approval requests one principal may have waiting. Every surface an untrusted agent
 * reaches (the HTTP worker, the MCP gateway) applies the same limit through this one piece, so an
 * agent cannot flood the humans' lists and the operator's views with requests.
 *
 * @module
 */
import type { Action } from './action.js';
import type { Control } from './control.js';
import { InvalidArgument } from './errors.js';
import { Mutex } from './store/mutex.js';

/** The default limit: approval requests one principal may have waiting. */
export const DEFAULT_MAX_PENDING_APPROVALS = 100;

/** A proposal's place under the limit: `release()` once its call has ended (idempotent). */
export interface PendingSlot {
  release(): void;
}

/** The limit was reached: how many requests the principal has waiting or under way. */
export interface PendingRefusal {
  readonly refused: number;
  readonly limit: number;
}

/**
 * The per-principal limit on waiting approval requests. A proposal the policy sends to a human,
 * presenting no approval, for which no request is open yet (a repeat of the same action is
 * answered with its open request, never counted), takes a slot: the check runs one at a time,
 * and a slot counts until its call ends, so parallel proposals cannot all pass before any
 * request is written. The count is the store's (`countPendingApprovals`), so requests filed by
 * other processes count too; slots still under way are this instance's.
 */
export class PendingApprovalLimit {
  readonly limit: number | null;
  readonly #control: Control;
  readonly #check = new Mutex();
  readonly #inFlight = new Map<string, number>();

  /** `limit`: undefined for {@link DEFAULT_MAX_PENDING_APPROVALS}, `null` for none. */
  constructor(control: Control, limit: number | null | undefined) {
    const max = limit === undefined ? DEFAULT_MAX_PENDING_APPROVALS : limit;
    if (max !== null && (!Number.isSafeInteger(max) || max < 1))
      throw new InvalidArgument('maxPendingApprovals must be a positive integer, or null for no limit');
    this.limit = max;
    this.#control = control;
  }

  /** A slot for proposing `action` (presenting `approvalId`), or the refusal. */
  async acquire(action: Action, approvalId: string | null): Promise<PendingSlot | PendingRefusal> {
    const max = this.limit;
    const control = this.#control;
    // Only an action the policy sends to a human can file a request (authority can only deny).
    if (max === null || approvalId !== null || control.observing || control.policy.evaluate(action.name, action.canonicalArguments).decision !== 'approve')
      return FREE;
    const credential = JSON.stringify([action.principal.agent, action.principal.user]);
    const refused = await this.#check.run(async () => {
      if ((await control.openApproval(action)) !== null) return 'open' as const; // answered with its open request: not counted
      const pending = (await control.store.countPendingApprovals(action.principal)) + (this.#inFlight.get(credential) ?? 0);
      // At the limit, ask the control path (no writes) whether this action really needs a human.
      if (pending >= max && (await control.evaluate(action).catch(() => null))?.decision === 'approve') return pending;
      this.#inFlight.set(credential, (this.#inFlight.get(credential) ?? 0) + 1);
      return null;
    });
    if (refused === 'open') return FREE;
    if (refused !== null) return { refused, limit: max };
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        const left = (this.#inFlight.get(credential) ?? 1) - 1;
        if (left <= 0) this.#inFlight.delete(credential);
        else this.#inFlight.set(credential, left);
      },
    };
  }
}

const FREE: PendingSlot = Object.freeze({ release: () => {} });
