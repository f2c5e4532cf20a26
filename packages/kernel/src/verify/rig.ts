/**
 * A rig: one scratch store, one `Control` composed as an application composes it, a fake
 * executor that counts its runs, and one in-memory recorder of events and receipts. Guarantee
 * scenarios drive rigs and read what they observed.
 *
 * @module
 */
import type { Action } from '../action.js';
import { intakeAction } from '../intake.js';
import type { Authority } from '../authority/authority.js';
import { orderedJson, parseJson, type JsonObject, type JsonValue } from '../canonical.js';
import { Control, describeError } from '../control.js';
import { ActionDenied, AmbiguousEffect, ApprovalMismatch, ApprovalRequired, CTRLRunError, DuplicateEffect, NotExecuted } from '../errors.js';
import { callbackSink, eventLine } from '../events.js';
import { sequentialIds } from '../ids.js';
import type { EffectRecord, EventRecord, StoredReceipt } from '../model.js';
import type { Policy } from '../policy/policy.js';
import { needsCallerResource, VERIFY_RESOURCE } from './synthesize.js';
import type { StateStore } from '../store/state-store.js';
import type { Clock } from '../time.js';

/** Who verify acts as, unless a grant says otherwise. */
export const VERIFY_AGENT = 'ctrlrun-verify';

/** What the fake executor does when it runs. */
export type Behaviour = 'commit' | 'timeout' | 'error' | 'not_executed';

/** An error whose name says the reply timed out: what a lost response looks like to a caller. */
class ReplyTimeout extends Error {
  override name = 'TimeoutError';
}

/** The outcome of one attempt. */
export type Outcome = { readonly ok: true; readonly value: JsonValue } | { readonly ok: false; readonly error: unknown };

/** A principal as verify builds it. */
export interface VerifyPrincipal {
  readonly agent: string;
  readonly user: string | null;
}

/** What a rig needs. */
export interface RigOptions {
  readonly policy: Policy;
  readonly store: StateStore;
  readonly clock: Clock;
  readonly environment: string;
  /** A standalone authority (`--authority`), or undefined: the document's inline section, if any. */
  readonly authority: Authority | undefined;
}

/** One scratch store driven through one Control. */
export class Rig {
  readonly control: Control;
  readonly store: StateStore;
  readonly events: EventRecord[] = [];
  readonly receipts: StoredReceipt[] = [];
  /** Executor runs, by effect key (`-` for none). */
  readonly runs = new Map<string, number>();
  readonly #policy: Policy;
  readonly #environment: string;

  constructor(options: RigOptions) {
    this.store = options.store;
    this.#policy = options.policy;
    this.#environment = options.environment;
    const recorder = callbackSink({
      name: 'verify-recorder',
      onEvent: (e) => void this.events.push(e),
      onReceipt: (r) => void this.receipts.push(r),
    });
    this.control = new Control({
      policy: options.policy,
      store: options.store,
      clock: options.clock,
      ids: sequentialIds(),
      sinks: [recorder],
      environment: options.environment,
      logger: { warn: () => {} },
      ...(options.authority !== undefined ? { authority: options.authority } : {}),
    });
  }

  /** Executor runs in total. */
  get totalRuns(): number {
    let n = 0;
    for (const v of this.runs.values()) n += v;
    return n;
  }

  /** Builds the action an application would build for `name` with `args`. */
  action(name: string, args: JsonObject, principal: VerifyPrincipal): Action {
    // Through the one intake; where the effect key names {resource} and the policy derives none,
    // the application's own resource, as an application's code would give one.
    const entry = this.#policy.action(name);
    const claimed = entry !== null && entry !== undefined && needsCallerResource(entry) ? VERIFY_RESOURCE : null;
    return intakeAction(
      { policy: this.#policy, environment: this.#environment, ids: this.control.ids },
      { name, arguments: args, resource: claimed, claimedBy: 'application' },
      principal,
    );
  }

  /** The fake executor: counts the run first (the remote acted), then behaves as told. */
  executor(behaviour: Behaviour): (args: JsonObject, ctx: { effectKey: string | null }) => JsonValue {
    return (_args, ctx) => {
      const key = ctx.effectKey ?? '-';
      this.runs.set(key, (this.runs.get(key) ?? 0) + 1);
      switch (behaviour) {
        case 'commit':
          return { ok: true, by: VERIFY_AGENT };
        case 'timeout':
          throw new ReplyTimeout('ctrlrun-verify: the reply was lost after the remote acted');
        case 'error':
          throw new Error('ctrlrun-verify: an exception nobody anticipated');
        case 'not_executed':
          throw new NotExecuted('ctrlrun-verify: the remote refused before acting');
      }
    };
  }

  /** Runs `action` once; never throws what the control path raised. */
  async attempt(action: Action, behaviour: Behaviour, approvalId: string | null = null): Promise<Outcome> {
    try {
      const value = await this.control.execute(action, this.executor(behaviour), { approvalId });
      return { ok: true, value };
    } catch (error) {
      return { ok: false, error };
    }
  }

  /**
   * Asks for an approval of `action` (which must need one) and grants it as verify. Returns the
   * request id, or the outcome that was not `ApprovalRequired`.
   */
  async approve(action: Action): Promise<{ requestId: string } | { outcome: Outcome }> {
    const o = await this.attempt(action, 'commit');
    if (o.ok || !(o.error instanceof ApprovalRequired)) return { outcome: o };
    await this.control.grantApproval(o.error.requestId, { approver: VERIFY_AGENT });
    return { requestId: o.error.requestId };
  }

  /**
   * Runs `action` as an application would get it done: if the policy asks for a human, verify
   * asks, grants, and presents the approval.
   */
  async complete(action: Action, behaviour: Behaviour): Promise<Outcome> {
    const first = await this.attempt(action, behaviour);
    if (first.ok || !(first.error instanceof ApprovalRequired)) return first;
    await this.control.grantApproval(first.error.requestId, { approver: VERIFY_AGENT });
    return this.attempt(action, behaviour, first.error.requestId);
  }

  /** What the store holds, for a counterexample. */
  async evidence(): Promise<{ receipts: JsonValue[]; events: JsonValue[]; effects: JsonValue[] }> {
    const receipts = (await this.store.receipts()).map((r) => (r.json === null ? null : parseJson(r.json)));
    const events = (await this.store.events()).map((e) => parseJson(eventLine(e)));
    const effects = (await this.store.listEffects()).map(effectJson);
    return { receipts, events, effects };
  }
}

/** An effect record in the inspection shape. */
export function effectJson(r: EffectRecord): JsonObject {
  return {
    effect_key: r.effectKey,
    state: r.state,
    action_id: r.actionId,
    attempt: r.attempt,
    created_at: r.createdAt,
    updated_at: r.updatedAt,
    lease_expires_at: r.leaseExpiresAt,
    error: r.error,
    resolved_by: r.resolvedBy,
  };
}

/** An outcome in a few words: `committed`, `ApprovalMismatch(reason=mismatch)`, `TimeoutError: …`. */
export function describeOutcome(o: Outcome): string {
  if (o.ok) return 'committed';
  const e = o.error;
  if (e instanceof ApprovalMismatch) return `ApprovalMismatch(reason=${e.reason})`;
  if (e instanceof DuplicateEffect) return `DuplicateEffect(state=${e.state})`;
  if (e instanceof AmbiguousEffect) return 'AmbiguousEffect';
  if (e instanceof ActionDenied) return `${e.name}(reason=${e.reason})`;
  if (e instanceof ApprovalRequired) return 'ApprovalRequired';
  return describeError(e);
}

/** Whether `o` failed with one of the kernel's own errors (a refusal, not the executor's). */
export function refusedByKernel(o: Outcome): boolean {
  return !o.ok && o.error instanceof CTRLRunError && !(o.error instanceof NotExecuted);
}

/** Renders a JSON value in key order (for messages). */
export function show(v: unknown): string {
  return orderedJson(v);
}
