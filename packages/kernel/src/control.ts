/**
 * `Control`: the one control path. normalize → decide → approve → reserve → execute → resolve →
 * record. Every entry point (`protect`, the CLI, the worker, the playground) goes through
 * {@link Control.execute}; the decisions themselves live in the pure planners it calls.
 *
 * @module
 */
import type { Action } from './action.js';
import type { JsonObject } from './canonical.js';
import {
  ActionDenied,
  AmbiguousEffect,
  ApprovalMismatch,
  ApprovalRequired,
  CTRLRunError,
  DuplicateEffect,
  EffectKeyError,
  IdentityError,
  InvalidArgument,
  NotExecuted,
} from './errors.js';
import { dispatchToSinks, type EventSink } from './events.js';
import { randomIds, type IdSource } from './ids.js';
import type { Approval, ApprovalRecord, EventRecord, EventType, Reservation, StoredReceipt } from './model.js';
import type { Evaluation, Policy } from './policy/index.js';
import { resolveEffectTemplate } from './policy/index.js';
import { buildReceipt, type ReceiptFields } from './receipt.js';
import type { StateStore } from './store/state-store.js';
import { checkDuration, evidenceTime, MINUTE, parseTime, storedTime, systemClock, type Clock } from './time.js';
import { checkActor } from './effects.js';

/** A reconcile hook: asked what happened to an ambiguous effect. */
export type ReconcileHook = (effectKey: string) => 'committed' | 'not_executed' | 'unknown' | Promise<'committed' | 'not_executed' | 'unknown'>;

/** What an executor is told besides the canonical arguments. */
export interface ExecutionContext {
  readonly action: Action;
  readonly effectKey: string | null;
  readonly attempt: number;
}

/** The function that does the real thing; receives the action's canonical arguments. */
export type Executor<T> = (args: JsonObject, context: ExecutionContext) => T | Promise<T>;

/** Per-call options of {@link Control.execute}. */
export interface ExecuteOptions {
  /**
   * The effect key. `undefined`: resolved from `effectTemplate`, else the policy's `effect:`
   * template, else none. `null`: explicitly no key (no reservation).
   */
  effectKey?: string | null;
  /** An effect template resolved against the canonical arguments (beats the policy's). */
  effectTemplate?: string | null;
  /** A granted approval to present (its request id). */
  approvalId?: string | null;
  /** Lease for the reservation, in ms (default: the Control's). */
  lease?: number;
  /** Asked once per execute when the record is ambiguous. */
  reconcile?: ReconcileHook;
  /** Also ask the hook right after this attempt is recorded ambiguous. */
  reconcileEagerly?: boolean;
}

/** Where warnings go. */
export interface Logger {
  warn(message: string, ...rest: unknown[]): void;
}

/** Options of {@link Control}. */
export interface ControlOptions {
  policy: Policy;
  store: StateStore;
  /** The default principal for `protect`ed calls that bring none. */
  principal?: { agent: string; user?: string | null } | null;
  clock?: Clock;
  ids?: IdSource;
  sinks?: readonly EventSink[];
  /** Default reservation lease in ms (5 minutes). */
  lease?: number;
  /** How long an approval request stays answerable, in ms (15 minutes). */
  approvalTtl?: number;
  /** The deployment's environment; else the policy's `environment:`, else `production`. */
  environment?: string;
  /** The authority section in force (v0.3; `null` until authority lands). */
  authority?: unknown;
  logger?: Logger;
}

/** What {@link Control.executeWithReceipt} resolves to. */
export interface ExecuteResult<T> {
  readonly value: T;
  readonly receipt: StoredReceipt;
}

const RECONCILED: Record<string, 'committed' | 'failed'> = { committed: 'committed', not_executed: 'failed' };

interface Pass {
  readonly action: Action;
  readonly startedAt: string;
  effectKey: string | null;
  approvalId: string | null;
  approver: string | null;
  attempt: number;
  evaluation: Evaluation | null;
  hookCalls: number;
}

/** The control path over one policy and one store. */
export class Control {
  readonly policy: Policy;
  readonly store: StateStore;
  readonly environment: string;
  readonly policyHash: string;
  readonly defaultPrincipal: { agent: string; user?: string | null } | null;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly lease: number;
  readonly approvalTtl: number;
  readonly logger: Logger;
  readonly #sinks: readonly EventSink[];

  constructor(options: ControlOptions) {
    if (!options || typeof options !== 'object') throw new InvalidArgument('Control needs { policy, store }');
    if (!options.policy || typeof options.policy.evaluate !== 'function') throw new InvalidArgument('Control needs a policy (loadPolicy(yamlText))');
    if (!options.store || typeof options.store.reserveEffect !== 'function') throw new InvalidArgument('Control needs a store');
    this.policy = options.policy;
    this.store = options.store;
    if (options.environment !== undefined && (typeof options.environment !== 'string' || options.environment.trim() === '')) {
      throw new InvalidArgument('environment must be a non-empty string');
    }
    this.environment = (options.environment ?? options.policy.environment ?? 'production').trim();
    this.policyHash = options.policy.hashFor({ environment: this.environment, authority: options.authority ?? null });
    this.defaultPrincipal = options.principal ?? null;
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    this.lease = checkDuration(options.lease ?? 5 * MINUTE, 'lease');
    this.approvalTtl = checkDuration(options.approvalTtl ?? 15 * MINUTE, 'approvalTtl');
    this.logger = options.logger ?? console;
    this.#sinks = [...(options.sinks ?? [])];
  }

  /** The decision for `action` with no writes (env mismatch → `InvalidArgument`). */
  evaluate(action: Action): Evaluation {
    this.#checkEnvironment(action);
    if (this.#principalExpired(action)) return { decision: 'deny', reason: 'principal_expired', controls: [], warnings: [] };
    return this.policy.evaluate(action.name, action.canonicalArguments);
  }

  /** Runs `action` through the control path; resolves to the executor's value. */
  async execute<T>(action: Action, executor: Executor<T>, options: ExecuteOptions = {}): Promise<T> {
    return (await this.executeWithReceipt(action, executor, options)).value;
  }

  /** Like {@link execute}, and also returns the committed action's receipt. */
  async executeWithReceipt<T>(action: Action, executor: Executor<T>, options: ExecuteOptions = {}): Promise<ExecuteResult<T>> {
    // Pre-checks: these write nothing.
    if (typeof executor !== 'function') throw new InvalidArgument('execute needs an executor function');
    this.#checkEnvironment(action);
    const lease = options.lease === undefined ? this.lease : checkDuration(options.lease, 'lease');
    if (options.reconcile !== undefined && typeof options.reconcile !== 'function') throw new InvalidArgument('reconcile must be a function');
    if (options.reconcileEagerly && options.reconcile === undefined) throw new InvalidArgument('reconcileEagerly needs a reconcile hook');
    let effectKey: string | null = null;
    if (options.effectKey !== undefined && options.effectKey !== null) {
      if (typeof options.effectKey !== 'string' || options.effectKey === '') throw new InvalidArgument('effectKey must be null or a non-empty string');
      effectKey = options.effectKey;
    }
    const approvalId = options.approvalId ?? null;
    if (approvalId !== null && (typeof approvalId !== 'string' || approvalId === '')) throw new InvalidArgument('approvalId must be a non-empty string');
    const template = options.effectKey === undefined ? (options.effectTemplate ?? this.policy.action(action.name)?.effect ?? null) : null;

    const pass: Pass = { action, startedAt: evidenceTime(this.clock()), effectKey, approvalId, approver: null, attempt: 1, evaluation: null, hookCalls: 0 };
    await this.#event(pass, 'ACTION_PROPOSED', { action_hash: action.actionHash });

    if (template !== null) {
      try {
        pass.effectKey = resolveEffectTemplate(template, action.canonicalArguments, action.resource);
      } catch (err) {
        if (!(err instanceof EffectKeyError)) throw err;
        await this.#event(pass, 'ACTION_DENIED', { reason: 'effect_key_error', effect: template, error: err.message });
        await this.#receipt(pass, { decision: 'deny', reason: 'effect_key_error', result: 'denied', error: err.message });
        throw err;
      }
    }

    if (this.#principalExpired(action)) {
      const err = new IdentityError(`the principal ${action.principal.agent} expired at ${action.principal.expiresAt}`);
      await this.#event(pass, 'ACTION_DENIED', { reason: 'principal_expired' });
      await this.#receipt(pass, { decision: 'deny', reason: 'principal_expired', result: 'denied', error: err.message });
      throw err;
    }

    const evaluation = this.policy.evaluate(action.name, action.canonicalArguments);
    for (const w of evaluation.warnings) this.logger.warn(`[ctrlrun] ${action.name}: ${w}`);
    pass.evaluation = evaluation;
    await this.#event(pass, 'POLICY_EVALUATED', { decision: evaluation.decision, reason: evaluation.reason });

    if (evaluation.decision === 'deny') {
      if (approvalId !== null) pass.approver = (await this.store.getApproval(approvalId))?.approver ?? null;
      await this.#event(pass, 'ACTION_DENIED', { reason: evaluation.reason });
      await this.#receipt(pass, { result: 'denied', error: null });
      throw new ActionDenied(evaluation.reason, { actionId: action.actionId, message: `${action.name} denied by policy (${evaluation.reason})` });
    }

    if (evaluation.decision === 'approve') {
      if (approvalId === null) {
        const now = this.clock();
        const requestId = this.ids('apr');
        const expiresAt = storedTime(new Date(now.getTime() + this.approvalTtl));
        await this.store.putApprovalRequest({ requestId, actionHash: action.actionHash, action, createdAt: storedTime(now), expiresAt, policyHash: this.policyHash });
        pass.approvalId = requestId;
        await this.#event(pass, 'APPROVAL_REQUESTED', { action_hash: action.actionHash, expires_at: evidenceTime(parseTime(expiresAt)) });
        throw new ApprovalRequired(requestId, { actionId: action.actionId, message: `${action.name} needs a human's approval: request ${requestId}` });
      }
      await this.#consumeAndReserve(pass, lease, options.reconcile);
    } else {
      if (pass.effectKey !== null) await this.#reserve(pass, lease, options.reconcile);
      if (approvalId !== null) await this.#consumeUnneeded(pass);
    }

    if (pass.effectKey !== null) {
      try {
        await this.store.beginExecution(pass.effectKey, action.actionId);
      } catch (err) {
        if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect) {
          await this.#refused(pass, err);
        }
        throw err;
      }
    }
    await this.#event(pass, 'EXECUTION_STARTED', {});
    return this.#run(pass, executor, options);
  }

  /** Grants approval request `requestId` as `approver`; records `APPROVAL_GRANTED`. */
  async grantApproval(requestId: string, options: { approver: string }): Promise<Approval> {
    const approver = checkActor(options?.approver, 'approver');
    const approval = await this.store.grantApproval(requestId, approver);
    await this.#eventRaw('APPROVAL_GRANTED', null, null, requestId, { approver, action_hash: approval.actionHash });
    return approval;
  }

  /** Denies approval request `requestId` as `approver`; records `APPROVAL_DENIED`. */
  async denyApproval(requestId: string, options: { approver: string }): Promise<ApprovalRecord> {
    const approver = checkActor(options?.approver, 'approver');
    const record = await this.store.denyApproval(requestId, approver);
    await this.#eventRaw('APPROVAL_DENIED', null, null, requestId, { approver });
    return record;
  }

  /** A human says what happened to an ambiguous effect; records `EFFECT_RESOLVED`. */
  async resolveEffect(effectKey: string, state: 'committed' | 'failed', options: { by: string }) {
    const by = checkActor(options?.by, 'resolver');
    const record = await this.store.resolveEffect(effectKey, state, by);
    await this.#eventRaw('EFFECT_RESOLVED', record.actionId, effectKey, null, { state, resolver: by, resolved_by: 'human' });
    return record;
  }

  // ---- the path's steps ----

  async #consumeAndReserve(pass: Pass, lease: number, hook: ReconcileHook | undefined): Promise<void> {
    const { action } = pass;
    const id = pass.approvalId as string;
    const attemptOnce = async (): Promise<[Approval, Reservation | null]> =>
      pass.effectKey === null
        ? [await this.store.consumeApproval(id, action.actionHash), null]
        : await this.store.consumeApprovalAndReserve(id, action.actionHash, pass.effectKey, action.actionId, lease);
    let pair: [Approval, Reservation | null];
    try {
      try {
        pair = await attemptOnce();
      } catch (err) {
        if (!(err instanceof AmbiguousEffect) || !(await this.#blockingReconcile(pass, hook))) throw err;
        pair = await attemptOnce();
      }
    } catch (err) {
      if (err instanceof ApprovalMismatch) {
        pass.approver = (await this.store.getApproval(id))?.approver ?? null;
        if (err.reason === 'expired') await this.#event(pass, 'APPROVAL_EXPIRED', {});
        await this.#event(pass, 'APPROVAL_INVALIDATED', { reason: err.reason, action_hash: action.actionHash });
        await this.#receipt(pass, { result: 'blocked', error: err.message });
        throw err;
      }
      if (err instanceof ActionDenied && err.reason === 'approval_denied') {
        pass.approver = (await this.store.getApproval(id))?.approver ?? null;
        await this.#event(pass, 'APPROVAL_DENIED', { approver: pass.approver });
        await this.#event(pass, 'ACTION_DENIED', { reason: 'approval_denied' });
        await this.#receipt(pass, { result: 'denied', error: err.message });
        throw new ActionDenied('approval_denied', { actionId: action.actionId, message: err.message });
      }
      if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect) {
        pass.approver = (await this.store.getApproval(id))?.approver ?? null;
        await this.#refused(pass, err);
      }
      throw err;
    }
    const [approval, reservation] = pair;
    pass.approver = approval.approver;
    await this.#event(pass, 'APPROVAL_CONSUMED', { approver: approval.approver });
    if (reservation) {
      pass.attempt = reservation.attempt;
      await this.#event(pass, 'EFFECT_RESERVED', { attempt: reservation.attempt, lease_expires_at: evidenceTime(parseTime(reservation.leaseExpiresAt)) });
    }
  }

  async #reserve(pass: Pass, lease: number, hook: ReconcileHook | undefined): Promise<void> {
    const key = pass.effectKey as string;
    let reservation: Reservation;
    try {
      try {
        reservation = await this.store.reserveEffect(key, pass.action.actionId, lease);
      } catch (err) {
        if (!(err instanceof AmbiguousEffect) || !(await this.#blockingReconcile(pass, hook))) throw err;
        reservation = await this.store.reserveEffect(key, pass.action.actionId, lease);
      }
    } catch (err) {
      if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect) await this.#refused(pass, err);
      throw err;
    }
    pass.attempt = reservation.attempt;
    await this.#event(pass, 'EFFECT_RESERVED', { attempt: reservation.attempt, lease_expires_at: evidenceTime(parseTime(reservation.leaseExpiresAt)) });
  }

  /** The ALLOW row: an approval the policy no longer needs is consumed in its own write. */
  async #consumeUnneeded(pass: Pass): Promise<void> {
    try {
      const approval = await this.store.consumeApproval(pass.approvalId as string, pass.action.actionHash);
      pass.approver = approval.approver;
      await this.#event(pass, 'APPROVAL_CONSUMED', { approver: approval.approver, required: false });
    } catch (err) {
      this.logger.warn(`[ctrlrun] ${pass.action.name}: the presented approval ${pass.approvalId} was not needed and could not be consumed: ${String(err)}`);
    }
  }

  async #refused(pass: Pass, err: DuplicateEffect | AmbiguousEffect): Promise<void> {
    const data: JsonObject = err instanceof DuplicateEffect ? { reason: 'duplicate', state: err.state } : { reason: 'ambiguous' };
    await this.#event(pass, 'EFFECT_RESERVATION_REFUSED', data);
    await this.#receipt(pass, { result: 'blocked', error: err.message });
  }

  /** Asks the hook (at most once per execute); true if it moved the record. */
  async #blockingReconcile(pass: Pass, hook: ReconcileHook | undefined): Promise<boolean> {
    if (hook === undefined || pass.hookCalls > 0) return false;
    return this.#reconcile(pass, hook, 'blocking');
  }

  async #reconcile(pass: Pass, hook: ReconcileHook, trigger: 'blocking' | 'eager'): Promise<boolean> {
    pass.hookCalls++;
    const key = pass.effectKey as string;
    await this.#event(pass, 'RECONCILIATION_STARTED', { effect_key: key, trigger });
    let answer: string;
    const extra: Record<string, string> = {};
    try {
      const got: unknown = await hook(key);
      if (got === 'committed' || got === 'not_executed' || got === 'unknown') answer = got;
      else {
        answer = 'unknown';
        extra['reason'] = 'invalid_return';
        this.logger.warn(`[ctrlrun] reconcile hook for ${key} returned ${String(got)}; treated as unknown`);
      }
    } catch (err) {
      answer = 'unknown';
      extra['reason'] = 'raised';
      extra['error'] = describeError(err);
      this.logger.warn(`[ctrlrun] reconcile hook for ${key} raised; treated as unknown: ${describeError(err)}`);
    }
    await this.#event(pass, 'RECONCILIATION_RESOLVED', { outcome: answer, ...extra });
    const target = RECONCILED[answer];
    if (target === undefined) return false;
    const resolver = `reconcile:${pass.action.name}`;
    try {
      await this.store.resolveEffect(key, target, resolver);
    } catch (err) {
      this.logger.warn(`[ctrlrun] the store refused the reconcile hook's answer for ${key}: ${describeError(err)}`);
      return false;
    }
    await this.#event(pass, 'EFFECT_RESOLVED', { state: target, resolver, resolved_by: 'reconcile' });
    return true;
  }

  async #run<T>(pass: Pass, executor: Executor<T>, options: ExecuteOptions): Promise<ExecuteResult<T>> {
    const { action } = pass;
    const key = pass.effectKey;
    let value: T;
    try {
      value = await executor(action.canonicalArguments, { action, effectKey: key, attempt: pass.attempt });
    } catch (thrown) {
      if (thrown instanceof NotExecuted) {
        const error = thrown.message;
        if (key !== null) {
          try {
            await this.store.failEffect(key, action.actionId, error);
          } catch (refusal) {
            await this.#outcomeRefused(pass, refusal);
          }
        }
        await this.#event(pass, 'EXECUTION_FAILED', { error });
        await this.#receipt(pass, { result: 'failed', error });
        throw thrown;
      }
      const error = describeError(thrown);
      let marked = key === null;
      if (key !== null) {
        try {
          await this.store.markAmbiguous(key, action.actionId, error);
          marked = true;
        } catch (refusal) {
          this.logger.warn(`[ctrlrun] could not record ${key} as ambiguous: ${describeError(refusal)}`);
        }
      }
      await this.#event(pass, 'EXECUTION_AMBIGUOUS', { error });
      await this.#receipt(pass, { result: 'ambiguous', error });
      if (key !== null && marked && options.reconcileEagerly && options.reconcile && pass.hookCalls === 0) {
        await this.#reconcile(pass, options.reconcile, 'eager');
      }
      throw thrown;
    }
    if (key !== null) {
      try {
        await this.store.commitEffect(key, action.actionId, value);
      } catch (refusal) {
        await this.#outcomeRefused(pass, refusal);
      }
    }
    await this.#event(pass, 'EXECUTION_COMMITTED', {});
    const receipt = await this.#receipt(pass, { result: 'committed', error: null });
    return { value, receipt };
  }

  /** The store refused the outcome write: record it ambiguous and raise the store's refusal. */
  async #outcomeRefused(pass: Pass, refusal: unknown): Promise<never> {
    if (refusal instanceof DuplicateEffect || refusal instanceof AmbiguousEffect) {
      const error = describeError(refusal);
      await this.#event(pass, 'EXECUTION_AMBIGUOUS', { error });
      await this.#receipt(pass, { result: 'ambiguous', error });
    }
    throw refusal;
  }

  // ---- evidence ----

  async #event(pass: Pass, type: EventType, data: JsonObject): Promise<EventRecord> {
    return this.#eventRaw(type, pass.action.actionId, pass.effectKey, pass.approvalId, data);
  }

  async #eventRaw(type: EventType, actionId: string | null, effectKey: string | null, approvalId: string | null, data: JsonObject): Promise<EventRecord> {
    const stored = await this.store.appendEvent({ ts: evidenceTime(this.clock()), type, actionId, effectKey, approvalId, data });
    await dispatchToSinks(this.#sinks, 'event', stored, this.logger);
    return stored;
  }

  async #receipt(
    pass: Pass,
    r: { result: ReceiptFields['result']; error: string | null; decision?: string; reason?: string },
  ): Promise<StoredReceipt> {
    const ev = pass.evaluation;
    const draft = buildReceipt(pass.action, {
      receiptId: this.ids('ctr'),
      decision: r.decision ?? ev?.decision ?? 'deny',
      decisionReason: r.reason ?? ev?.reason ?? 'unknown',
      approvalId: pass.approvalId,
      approver: pass.approver,
      effectKey: pass.effectKey,
      attempt: pass.attempt,
      result: r.result,
      error: r.error,
      startedAt: pass.startedAt,
      finishedAt: evidenceTime(this.clock()),
      policyHash: this.policyHash,
      policyVersion: this.policy.version,
      controls: ev?.controls ?? [],
    });
    const stored = await this.store.putReceipt(draft);
    await dispatchToSinks(this.#sinks, 'receipt', stored, this.logger);
    return stored;
  }

  #checkEnvironment(action: Action): void {
    if (!action || typeof action !== 'object' || typeof action.actionHash !== 'string') throw new InvalidArgument('execute needs an Action (createAction(...))');
    if (action.environment !== this.environment) {
      throw new InvalidArgument(`the action is for environment ${JSON.stringify(action.environment)} but this Control runs in ${JSON.stringify(this.environment)}`);
    }
  }

  #principalExpired(action: Action): boolean {
    const exp = action.principal.expiresAt;
    return exp !== undefined && exp !== null && this.clock().getTime() > parseTime(exp, 'principal.expiresAt').getTime();
  }
}

/** `"<Name>: <message>"`, the form an unknown outcome is recorded in. */
export function describeError(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  try {
    return `Error: ${String(err)}`;
  } catch {
    return 'Error: (unprintable)';
  }
}

/** Whether `err` is a refusal of this package (as opposed to an executor's own error). */
export function isRefusal(err: unknown): err is CTRLRunError {
  return err instanceof CTRLRunError;
}
