/**
 * Approval providers: how a request reaches a human and how the answer comes back. They create
 * and read requests; they never consume one (consumption is the control path's, bound to the
 * action hash, in one transaction with the reservation).
 *
 * @module
 */
import type { Action } from './action.js';
import { ApprovalMismatch, ApprovalTimeout, InvalidArgument } from './errors.js';
import { checkActor } from './effects.js';
import { randomIds, type IdSource } from './ids.js';
import type { Approval, ApprovalRecord, ApprovalRequest } from './model.js';
import type { StateStore } from './store/state-store.js';
import { checkDuration, parseTime, storedTime, systemClock, type Clock } from './time.js';

/** Where approval requests go and answers come from. */
export interface ApprovalProvider {
  /** Stores a `pending` request for `action`, answerable for `ttlMs`. */
  request(action: Action, ttlMs: number, options?: { policyHash?: string | null }): Promise<ApprovalRequest>;
  /**
   * Waits for the answer: the `Approval` if granted; `null` if denied, consumed or expired
   * (answered no); `ApprovalTimeout` if still unanswered when `timeoutMs` or the request's own
   * expiry passes; `ApprovalMismatch('unknown')` for an unknown id. Never consumes. When
   * `options.signal` aborts, it stops waiting and rejects with the signal's reason.
   */
  wait(requestId: string, timeoutMs?: number, options?: WaitOptions): Promise<Approval | null>;
}

/** What a wait is told besides its deadline. */
export interface WaitOptions {
  /** The caller gave up (a cancelled request, a closed connection): stop waiting. */
  signal?: AbortSignal;
}

/**
 * `work`, or the signal's reason as soon as `signal` aborts, whichever comes first. The listener
 * is removed when `work` settles, so a long poll does not pile listeners on one signal.
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  if (signal.aborted) {
    work.catch(() => {}); // settled later, read by nobody
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** Options shared by the providers. */
export interface ProviderOptions {
  clock?: Clock;
  ids?: IdSource;
  /** How often {@link LocalApprovalProvider.wait} re-reads the store, in ms (500). */
  pollMs?: number;
  /** How to wait between polls; defaults to `setTimeout`. */
  sleep?: (ms: number) => Promise<void>;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function granted(record: ApprovalRecord): Approval {
  return {
    approvalId: record.request.requestId,
    actionHash: record.request.actionHash,
    approver: record.approver ?? '',
    grantedAt: record.grantedAt ?? '',
    expiresAt: record.request.expiresAt,
  };
}

/** The default provider: requests live in the store; a human answers through any surface. */
export class LocalApprovalProvider implements ApprovalProvider {
  readonly store: StateStore;
  readonly #clock: Clock;
  readonly #ids: IdSource;
  readonly #pollMs: number;
  readonly #sleep: (ms: number) => Promise<void>;

  constructor(store: StateStore, options: ProviderOptions = {}) {
    if (!store || typeof store.putApprovalRequest !== 'function') throw new InvalidArgument('an approval provider needs a store');
    this.store = store;
    this.#clock = options.clock ?? systemClock;
    this.#ids = options.ids ?? randomIds;
    this.#pollMs = checkDuration(options.pollMs ?? 500, 'pollMs');
    this.#sleep = options.sleep ?? defaultSleep;
  }

  async request(action: Action, ttlMs: number, options: { policyHash?: string | null } = {}): Promise<ApprovalRequest> {
    checkDuration(ttlMs, 'approval ttl');
    const now = this.#clock();
    const request: ApprovalRequest = {
      requestId: this.#ids('apr'),
      actionHash: action.actionHash,
      action,
      createdAt: storedTime(now),
      expiresAt: storedTime(new Date(now.getTime() + ttlMs)),
      policyHash: options.policyHash ?? null,
    };
    await this.store.putApprovalRequest(request);
    return request;
  }

  async wait(requestId: string, timeoutMs?: number, options: WaitOptions = {}): Promise<Approval | null> {
    if (typeof requestId !== 'string' || requestId === '') throw new InvalidArgument('request id must be a non-empty string');
    if (timeoutMs !== undefined) checkDuration(timeoutMs, 'timeout');
    const { signal } = options;
    const deadline = timeoutMs === undefined ? Infinity : this.#clock().getTime() + timeoutMs;
    for (;;) {
      signal?.throwIfAborted();
      const record = await this.store.getApproval(requestId);
      if (record === null)
        throw new ApprovalMismatch('unknown', { approvalId: requestId, message: `approval ${requestId} refused (unknown): no such approval request` });
      if (record.status === 'granted') return granted(record);
      if (record.status !== 'pending') return null;
      const now = this.#clock().getTime();
      const expires = parseTime(record.request.expiresAt, 'expires_at').getTime();
      if (now >= deadline || now > expires) {
        throw new ApprovalTimeout(requestId, { message: `approval ${requestId} was not answered in time` });
      }
      await untilAborted(this.#sleep(Math.max(1, Math.min(this.#pollMs, deadline - now, expires - now + 1))), signal);
    }
  }
}

/** One scripted answer. */
export type ScriptedStep = 'pending' | 'grant' | 'deny';

/**
 * A provider whose human is a script (demos and tests): each `wait` takes the next step —
 * `grant` and `deny` answer as `approver` (`cli:scripted`), `pending` leaves it unanswered
 * (`ApprovalTimeout`); an exhausted script, or a step after the request expired, is a timeout.
 */
export class ScriptedApprovalProvider implements ApprovalProvider {
  readonly #local: LocalApprovalProvider;
  readonly #steps: ScriptedStep[];
  readonly #approver: string;
  readonly #clock: Clock;

  constructor(store: StateStore, steps: readonly ScriptedStep[], options: ProviderOptions & { approver?: string } = {}) {
    if (!Array.isArray(steps)) throw new InvalidArgument('steps must be a list of "pending" | "grant" | "deny"');
    for (const s of steps)
      if (s !== 'pending' && s !== 'grant' && s !== 'deny') throw new InvalidArgument(`unknown scripted step ${JSON.stringify(s)}: use pending, grant or deny`);
    this.#local = new LocalApprovalProvider(store, options);
    this.#steps = [...steps];
    this.#approver = checkActor(options.approver ?? 'cli:scripted', 'approver');
    this.#clock = options.clock ?? systemClock;
  }

  request(action: Action, ttlMs: number, options?: { policyHash?: string | null }): Promise<ApprovalRequest> {
    return this.#local.request(action, ttlMs, options);
  }

  async wait(requestId: string, _timeoutMs?: number, options: WaitOptions = {}): Promise<Approval | null> {
    options.signal?.throwIfAborted();
    const record = await this.#local.store.getApproval(requestId);
    if (record === null)
      throw new ApprovalMismatch('unknown', { approvalId: requestId, message: `approval ${requestId} refused (unknown): no such approval request` });
    const step = this.#steps.shift();
    const expired = this.#clock().getTime() > parseTime(record.request.expiresAt, 'expires_at').getTime();
    if (step === undefined || step === 'pending' || expired) {
      throw new ApprovalTimeout(requestId, {
        message: `approval ${requestId} was not answered (${step === undefined ? 'the script is exhausted' : expired ? 'it expired' : 'still pending'})`,
      });
    }
    if (step === 'grant') return this.#local.store.grantApproval(requestId, this.#approver);
    await this.#local.store.denyApproval(requestId, this.#approver);
    return null;
  }
}
