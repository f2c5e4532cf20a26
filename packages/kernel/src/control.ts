/**
 * `Control`: the one control path. normalize → decide → approve → reserve → execute → resolve →
 * record. Every entry point (`protect`, the CLI, the worker, the playground) goes through
 * {@link Control.execute}; the decisions themselves live in the pure planners it calls.
 *
 * @module
 */
import { createPrincipal, type Action, type Principal } from './action.js';
import { checkConsumable } from './approvals.js';
import { authorityEventData, checkResourceScopes, resourceScopeGap, resourceScopeMessage, type Authority, type AuthorityResult, type CreatedVia, type Delegation } from './authority/authority.js';
import type { Grant, GrantInput } from './authority/grant.js';
import { isPlainObject, type JsonObject } from './canonical.js';
import {
  ActionDenied,
  AmbiguousEffect,
  ApprovalMismatch,
  ApprovalRequired,
  AuthorityDenied,
  AuthorityEscalation,
  DuplicateEffect,
  EffectKeyError,
  IdentityError,
  InvalidArgument,
  NotExecuted,
  Suspended,
} from './errors.js';
import { normalizeHeaders, type IdentityProvider } from './identity.js';
import { dispatchToSinks, type EventSink } from './events.js';
import { randomIds, type IdSource } from './ids.js';
import type { Approval, ApprovalRecord, EffectRecord, EventDraft, EventRecord, EventType, Reservation, StoredReceipt } from './model.js';
import type { Decision, Evaluation, Policy } from './policy/index.js';
import { resolveEffectTemplate } from './policy/index.js';
import { buildReceipt, type ReceiptFields, type ReceiptResult } from './receipt.js';
import type { StateStore, TrailingEvents } from './store/state-store.js';
import type { ReceiptDraft } from './model.js';
import { checkDuration, evidenceTime, MINUTE, parseTime, storedTime, systemClock, type Clock } from './time.js';
import { checkActor } from './effects.js';
import { delegationToRecord } from './authority/authority.js';

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
  /**
   * How long a suspended execution's lease is held for its resumption, in ms (5 minutes): an
   * executor throwing `Suspended` extends the lease to now + this; a resumption after that is
   * `AmbiguousEffect`.
   */
  suspendTimeout?: number;
  /** The deployment's environment; else the policy's `environment:`, else `production`. */
  environment?: string;
  /**
   * The authority in force. Omitted: the policy document's inline `authority:` section, if it
   * has one. `null`: none (no authority check, no `AUTHORITY_*` event). A standalone authority
   * document (`loadAuthority`) goes here; a document that also has an inline section is refused.
   */
  authority?: Authority | null;
  /** Where principals come from (spec 02 §1.3); else the per-call or default principal. */
  identity?: IdentityProvider | null;
  logger?: Logger;
}

/** Per-call identity inputs of {@link Control.resolvePrincipal}. */
export interface ResolveOptions {
  /** The per-call principal; else the Control's default. With a provider, only a hint. */
  principal?: { agent: string; user?: string | null } | Principal | null;
  /** Request headers (any case) for a header or JWT provider. */
  headers?: Readonly<Record<string, string>>;
}

/** Options of {@link Control.delegate}. */
export interface DelegateOptions {
  /** The principal creating the delegation; must be the parent grant's subject. */
  by: { agent: string; user?: string | null; expiresAt?: string | null } | Principal;
  /** `api` (default) or `cli` (an assertion made from a shell). */
  via?: CreatedVia;
}

/** The `would_have` of an observed receipt, assembled as the action is evaluated. */
interface Observation {
  decision: Decision;
  reason: string;
  /** The first stopper in enforce order; later ones never overwrite it. */
  blocked: string | null;
}

/** What a suspended attempt was decided and approved with; its resumption's receipt carries it. */
interface Decided {
  evaluation: Evaluation;
  approvalId: string | null;
  approver: string | null;
  /** Observe mode's counterfactual as it stood, or null: the attempt was enforced. */
  observation: Observation | null;
  policyHash: string;
  policyVersion: string | null;
}

/** What {@link Control.executeWithReceipt} resolves to. */
export interface ExecuteResult<T> {
  readonly value: T;
  readonly receipt: StoredReceipt;
}

const RECONCILED: Record<string, 'committed' | 'failed'> = { committed: 'committed', not_executed: 'failed' };

/** EXECUTION_STARTED, as a reservation step that also starts the execution drafts it. */
const STARTED: [EventType, JsonObject] = ['EXECUTION_STARTED', {}];

interface Pass {
  readonly action: Action;
  readonly startedAt: string;
  effectKey: string | null;
  approvalId: string | null;
  approver: string | null;
  attempt: number;
  evaluation: Evaluation | null;
  hookCalls: number;
  /** Observe mode's counterfactual, or null in enforce mode. */
  observation: Observation | null;
  /** The policy the decision was made under (a resumption keeps the first attempt's). */
  readonly policyHash: string;
  readonly policyVersion: string | null;
  /** Whether this attempt holds its effect key (observe mode may run without it). */
  held: boolean;
  /**
   * Events drafted (with the pass's ids as they stood) and not yet stored, oldest first —
   * ACTION_PROPOSED, then whatever the decision noted. They are written (and stamped) in the same
   * transaction as the pass's next write, before its own events, or alone when the pass throws
   * first, so nothing of this action reaches the store before them and their order never changes.
   */
  pending: EventDraft[];
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
  /** How long a suspended execution stays resumable, in ms. */
  readonly suspendTimeout: number;
  readonly logger: Logger;
  /** The authority in force, or null: no grant is needed (and no `AUTHORITY_*` event appears). */
  readonly authority: Authority | null;
  /** Where principals come from, or null. */
  readonly identity: IdentityProvider | null;
  /** `mode: observe`: everything is evaluated and recorded, nothing is enforced. */
  readonly observing: boolean;
  readonly #sinks: readonly EventSink[];
  #warnedAboutPrincipal = false;

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
    const inline = options.policy.authority;
    if (options.authority !== undefined && options.authority !== null && inline !== null && options.authority !== inline) {
      throw new InvalidArgument(
        `authority is declared twice: in the policy document ${options.policy.source} and in the Control's authority option; two sources for one section is an ambiguity nobody can resolve later`,
      );
    }
    this.authority = options.authority === undefined ? inline : options.authority;
    if (this.authority !== null && (typeof this.authority !== 'object' || typeof this.authority.evaluate !== 'function')) {
      throw new InvalidArgument('authority must be an Authority (loadAuthority(yamlText), or a policy document with an authority: section) or null');
    }
    // A grant scoped by resource on an action whose resource the policy does not derive would check the caller's claim.
    if (this.authority !== null) checkResourceScopes(this.authority, options.policy);
    if (options.identity !== undefined && options.identity !== null && typeof options.identity.resolve !== 'function') {
      throw new InvalidArgument('identity must be an IdentityProvider (an object with resolve(context))');
    }
    this.identity = options.identity ?? null;
    this.observing = options.policy.mode === 'observe';
    this.policyHash = options.policy.hashFor({ environment: this.environment, authority: this.authority });
    this.defaultPrincipal = options.principal ?? null;
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    this.lease = checkDuration(options.lease ?? 5 * MINUTE, 'lease');
    this.approvalTtl = checkDuration(options.approvalTtl ?? 15 * MINUTE, 'approvalTtl');
    this.suspendTimeout = checkDuration(options.suspendTimeout ?? 5 * MINUTE, 'suspendTimeout');
    this.logger = options.logger ?? console;
    this.#sinks = [...(options.sinks ?? [])];
  }

  /**
   * The combined decision for `action` — the stricter of authority and policy — with no writes
   * (env mismatch → `InvalidArgument`; an unreadable principal expiry → `IdentityError`
   * `expires_at_invalid`; an expired principal → `deny`/`principal_expired`; an
   * authority denial → `deny` with its reason, policy never consulted). Reads the store to
   * resolve delegations, hence async.
   */
  async evaluate(action: Action): Promise<Evaluation> {
    this.#checkEnvironment(action);
    if (this.#principalExpired(action)) return deny('principal_expired');
    if (this.authority !== null) {
      const result = await this.authority.evaluate(action, { now: this.clock(), store: this.store });
      if (!result.passed) return { ...deny(result.reason), warnings: [...result.warnings] };
    }
    return this.policy.evaluate(action.name, action.canonicalArguments);
  }

  /**
   * The principal for a call of `actionName` (spec 02 §1.3). Without a provider: the per-call
   * or default principal, else `no_principal`. With one: its answer wins; a decline falls back
   * to the per-call or default principal only when no authority section is loaded; a throw is an
   * `IdentityError` and nothing fills in. `no_principal` is an `ActionDenied` that leaves no
   * receipt and no event.
   */
  async resolvePrincipal(actionName: string, options: ResolveOptions = {}): Promise<Principal> {
    const hint = options.principal ?? this.defaultPrincipal;
    const fromContext = hint ? createPrincipal(hint) : null;
    if (this.identity === null) return fromContext ?? this.#refuseNoPrincipal(actionName);
    const headers = normalizeHeaders(options.headers);
    if (headers === 'repeated') return this.#refuseNoPrincipal(actionName, 'an identity header was given more than once');
    let resolved: unknown;
    try {
      resolved = await this.identity.resolve({
        action: actionName,
        environment: this.environment,
        headers: Object.freeze(headers),
        agent: fromContext?.agent ?? null,
        user: fromContext?.user ?? null,
      });
    } catch (err) {
      if (err instanceof IdentityError) throw err;
      this.logger.warn(`[ctrlrun] ${actionName}: the identity provider raised ${describeError(err)}`);
      throw new IdentityError(`${actionName}: the identity provider rejected this call`, { reason: 'provider_raised', cause: err });
    }
    if (resolved === null || resolved === undefined) {
      // A decline is never backfilled once authority is loaded: omitting a credential must not
      // reach what forging one would.
      if (fromContext === null || this.authority !== null) return this.#refuseNoPrincipal(actionName);
      return fromContext;
    }
    let principal: Principal;
    try {
      principal = createPrincipal(resolved as Principal);
    } catch (err) {
      throw new IdentityError(`${actionName}: the identity provider returned something that is not a principal`, { reason: 'not_a_principal', cause: err });
    }
    expiryOf(principal, actionName);
    if (fromContext !== null && !this.#warnedAboutPrincipal && (fromContext.agent !== principal.agent || fromContext.user !== principal.user)) {
      this.#warnedAboutPrincipal = true;
      this.logger.warn(`[ctrlrun] ${actionName}: the identity provider resolved ${named(principal)} and the call says ${named(fromContext)}; the provider is in force`);
    }
    return principal;
  }

  #refuseNoPrincipal(actionName: string, why = 'no principal is available'): never {
    this.logger.warn(`[ctrlrun] ${actionName}: denied: ${why}`);
    throw new ActionDenied('no_principal', { message: `${actionName} refused: ${why}; pass { principal } per call or to the Control, or install an identity provider that answers` });
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
    // An expiry no clock can compare against is the credential's fault, refused before any evidence.
    expiryOf(action.principal, action.name);
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

    const pass: Pass = {
      action, startedAt: evidenceTime(this.clock()), effectKey, approvalId, approver: null, attempt: 1, evaluation: null, hookCalls: 0,
      observation: this.observing ? { decision: 'allow', reason: '', blocked: null } : null, held: false, pending: [],
      policyHash: this.policyHash, policyVersion: this.policy.version,
    };
    this.#note(pass, 'ACTION_PROPOSED', { action_hash: action.actionHash });
    try {
      return await this.#decided(pass, executor, options, lease, template);
    } catch (err) {
      await this.#flushAfterThrow(pass);
      throw err;
    }
  }

  /** Whatever refused or failed before the pass's next write, its pending events go on record. */
  async #flushAfterThrow(pass: Pass): Promise<void> {
    try {
      await this.#flush(pass);
    } catch (failure) {
      // The first failure is the one the caller must see.
      this.logger.warn(`[ctrlrun] ${pass.action.name}: ${pass.pending.map((d) => d.type).join(', ')} could not be stored: ${describeError(failure)}`);
    }
  }

  /** The rest of {@link executeWithReceipt}, once the proposal is drafted. */
  async #decided<T>(pass: Pass, executor: Executor<T>, options: ExecuteOptions, lease: number, template: string | null): Promise<ExecuteResult<T>> {
    const { action } = pass;
    const approvalId = pass.approvalId;

    if (template !== null) {
      try {
        pass.effectKey = resolveEffectTemplate(template, action.canonicalArguments, action.resource);
      } catch (err) {
        if (!(err instanceof EffectKeyError)) throw err;
        this.#note(pass, 'ACTION_DENIED', { reason: 'effect_key_error', effect: template, error: err.message });
        await this.#receipt(pass, { decision: 'deny', reason: 'effect_key_error', result: 'denied', error: err.message });
        throw err;
      }
    }

    if (this.#principalExpired(action)) {
      pass.evaluation = deny('principal_expired');
      // Observe mode records what enforce mode would have reached, and enforce stops here.
      if (pass.observation) return this.#observed(pass, executor, options, lease);
      this.#note(pass, 'ACTION_DENIED', { reason: 'principal_expired' });
      await this.#receipt(pass, { result: 'denied', error: null });
      throw new IdentityError(`${action.name}: the principal ${action.principal.agent}'s credential expired at ${action.principal.expiresAt}`, { reason: 'principal_expired' });
    }

    if (this.authority !== null) {
      const result = await this.authority.evaluate(action, { now: this.clock(), store: this.store });
      for (const w of result.warnings) this.logger.warn(`[ctrlrun] ${action.name}: ${w}`);
      if (!result.passed) {
        // Authority denies before policy is consulted: no POLICY_EVALUATED, no approval request.
        pass.evaluation = deny(result.reason);
        this.#note(pass, 'AUTHORITY_DENIED', authorityEventData(result));
        if (pass.observation) return this.#observed(pass, executor, options, lease);
        await this.#refuseAuthority(pass, result);
      }
      this.#note(pass, 'AUTHORITY_RESOLVED', authorityEventData(result));
    }

    const evaluation = this.policy.evaluate(action.name, action.canonicalArguments);
    for (const w of evaluation.warnings) this.logger.warn(`[ctrlrun] ${action.name}: ${w}`);
    pass.evaluation = evaluation;
    this.#note(pass, 'POLICY_EVALUATED', { decision: evaluation.decision, reason: evaluation.reason });
    if (pass.observation) return this.#observed(pass, executor, options, lease);

    if (evaluation.decision === 'deny') {
      pass.approver = await this.#approverOf(pass);
      this.#note(pass, 'ACTION_DENIED', { reason: evaluation.reason });
      await this.#receipt(pass, { result: 'denied', error: null });
      throw new ActionDenied(evaluation.reason, { actionId: action.actionId, message: `${action.name} denied by policy (${evaluation.reason})` });
    }

    // The reservation step in one transaction (approval, reservation, start) where the store can;
    // an approval the policy no longer needs keeps its own write, between reservation and start.
    const merged = pass.effectKey !== null && this.store.reserveForExecution !== undefined && !(evaluation.decision === 'allow' && approvalId !== null);
    if (evaluation.decision === 'approve') {
      if (approvalId === null) {
        // One request per action: asking again while a request for this hash is open (pending,
        // or granted and not yet used) — a retry, a re-run graph node — gets that request, not
        // a second one that nobody answers.
        const open = await this.openApproval(action);
        if (open !== null) {
          const requestId = open.request.requestId;
          pass.approvalId = requestId;
          const message = open.status === 'granted'
            ? `${action.name}: approval request ${requestId} is already granted for this action; present it to run`
            : `${action.name} needs a human's approval: request ${requestId} (already pending)`;
          throw new ApprovalRequired(requestId, { actionId: action.actionId, message });
        }
        const now = this.clock();
        const requestId = this.ids('apr');
        const expiresAt = storedTime(new Date(now.getTime() + this.approvalTtl));
        await this.store.putApprovalRequest({ requestId, actionHash: action.actionHash, action, createdAt: storedTime(now), expiresAt, policyHash: this.policyHash });
        pass.approvalId = requestId;
        await this.#event(pass, 'APPROVAL_REQUESTED', { action_hash: action.actionHash, expires_at: evidenceTime(parseTime(expiresAt)) });
        throw new ApprovalRequired(requestId, { actionId: action.actionId, message: `${action.name} needs a human's approval: request ${requestId}` });
      }
      await this.#consumeAndReserve(pass, lease, options.reconcile, merged);
    } else {
      if (pass.effectKey !== null) await this.#reserve(pass, lease, options.reconcile, merged);
      if (approvalId !== null) await this.#consumeUnneeded(pass);
    }

    if (merged) {
      pass.held = true;
    } else if (pass.effectKey !== null) {
      // EXECUTION_STARTED is written in the transition's own transaction, and only if it happened.
      const started = this.#trailing(pass, () => [['EXECUTION_STARTED', {}]]);
      let record: EffectRecord;
      try {
        record = await this.store.beginExecution(pass.effectKey, action.actionId, started);
      } catch (err) {
        if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect) {
          await this.#refused(pass, err);
        }
        throw err;
      }
      pass.held = true;
      await this.#written(pass, record, started);
    } else {
      await this.#event(pass, 'EXECUTION_STARTED', {});
    }
    return this.#run(pass, executor, options);
  }

  /**
   * Resumes a suspended execution (one whose executor threw `Suspended`): takes `continuation`
   * from the store — once; atomically; a miss or a second take is an `InvalidArgument`, a lapsed
   * lease an `AmbiguousEffect`, a held action of another environment an `InvalidArgument` (not
   * taken), and then the executor is never called — records the authority's answer now
   * (`AUTHORITY_RESOLVED` / `AUTHORITY_DENIED`, when an authority is loaded) without deciding
   * again, records `EXECUTION_RESUMED {round}`, and runs `executor` with the held action's
   * canonical arguments. The outcome follows the same rule as {@link execute} (commit, fail,
   * ambiguous, receipt), or the executor suspends again (the next round, whose lease extension is
   * refused once the credential has expired or the authority denies: spec 02 T61b, T80b). The
   * receipt carries what the first attempt was decided and approved with: its decision, reason,
   * controls, approval and approver, policy hash and version, and in observe mode its
   * `would_have`.
   */
  async resume<T>(continuation: string, executor: Executor<T>, options: Pick<ExecuteOptions, 'reconcile' | 'reconcileEagerly'> = {}): Promise<T> {
    return (await this.resumeWithReceipt(continuation, executor, options)).value;
  }

  /** Like {@link resume}, and also returns the committed action's receipt. */
  async resumeWithReceipt<T>(continuation: string, executor: Executor<T>, options: Pick<ExecuteOptions, 'reconcile' | 'reconcileEagerly'> = {}): Promise<ExecuteResult<T>> {
    if (typeof executor !== 'function') throw new InvalidArgument('resume needs an executor function');
    if (typeof continuation !== 'string' || continuation === '') throw new InvalidArgument('continuation must be a non-empty string');
    if (options.reconcile !== undefined && typeof options.reconcile !== 'function') throw new InvalidArgument('reconcile must be a function');
    if (options.reconcileEagerly && options.reconcile === undefined) throw new InvalidArgument('reconcileEagerly needs a reconcile hook');
    const taken = await this.store.takeContinuation(continuation, { environment: this.environment });
    const { action, effectKey, record, rounds } = taken;
    // A store that ignored the environment: taken, but never run by the wrong deployment.
    this.#checkEnvironment(action);
    // The decision that let the action run stands, as the first attempt recorded it.
    const decided = await this.#decidedBefore(action, effectKey, rounds);
    const pass: Pass = {
      action, startedAt: evidenceTime(this.clock()), effectKey, approvalId: decided.approvalId, approver: decided.approver, attempt: record.attempt,
      evaluation: decided.evaluation, hookCalls: 0, observation: decided.observation, held: true, pending: [],
      policyHash: decided.policyHash, policyVersion: decided.policyVersion,
    };
    if (this.authority !== null) {
      // Recorded, not decided: this round runs either way; the next extension is what a denial refuses.
      const result = await this.authority.evaluate(action, { now: this.clock(), store: this.store });
      for (const w of result.warnings) this.logger.warn(`[ctrlrun] ${action.name}: ${w}`);
      await this.#event(pass, result.passed ? 'AUTHORITY_RESOLVED' : 'AUTHORITY_DENIED', authorityEventData(result));
    }
    await this.#event(pass, 'EXECUTION_RESUMED', { round: rounds });
    try {
      return await this.#run(pass, executor, options);
    } catch (err) {
      await this.#flushAfterThrow(pass);
      throw err;
    }
  }

  /**
   * What the suspended attempt was decided and approved with, read back from its
   * `EXECUTION_SUSPENDED` event (round `rounds`). A suspension recorded without it (an older
   * build) falls back to the policy's answer now and the event's approval, whose approver is
   * named only if the approval was requested for this action.
   */
  async #decidedBefore(action: Action, effectKey: string, rounds: number): Promise<Decided> {
    const event = this.store.lastEvent
      ? await this.store.lastEvent(action.actionId, 'EXECUTION_SUSPENDED')
      : ((await this.store.events()).filter((e) => e.actionId === action.actionId && e.type === 'EXECUTION_SUSPENDED').at(-1) ?? null);
    const held = event !== null && event.effectKey === effectKey && event.data['round'] === rounds ? event : null;
    const snapshot = held === null ? null : decidedFromJson(held.data['decided']);
    if (snapshot !== null) return { ...snapshot, approvalId: held!.approvalId };
    this.logger.warn(`[ctrlrun] ${action.name}: the suspension of ${effectKey} (round ${rounds}) recorded no decision; the receipt names the policy's answer now`);
    const approvalId = held?.approvalId ?? null;
    return {
      evaluation: this.policy.evaluate(action.name, action.canonicalArguments),
      approvalId,
      approver: await this.#approverOf({ approvalId, action }),
      observation: null,
      policyHash: this.policyHash,
      policyVersion: this.policy.version,
    };
  }

  /**
   * The approval request open for `action`'s hash — `pending`, or `granted` and not yet
   * consumed — and not expired (the newest, if several were filed before this rule existed), or
   * `null`. Reads only.
   */
  async openApproval(action: Action): Promise<ApprovalRecord | null> {
    this.#checkEnvironment(action);
    const now = this.clock().getTime();
    const records = await this.store.approvalsFor(action.actionHash);
    for (let i = records.length - 1; i >= 0; i--) {
      const record = records[i]!;
      const open = record.status === 'pending' || record.status === 'granted';
      if (open && now <= parseTime(record.request.expiresAt, 'expires_at').getTime()) return record;
    }
    return null;
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

  /**
   * Creates a delegated grant beneath `parentId` (a root grant or a live delegation), or
   * refuses with an {@link AuthorityEscalation} (`unknown_parent`, `parent_not_delegable`,
   * `parent_not_valid`, `not_the_subject`, `max_depth`, `containment` + `dimension`) and
   * `DELEGATION_REJECTED`; an expired `by` is an `IdentityError`. On success one row is written
   * and `DELEGATION_CREATED` reaches the store and every sink. Not idempotent: two calls make two
   * delegations. A malformed grant is an `InvalidArgument`, with nothing written.
   */
  async delegate(parentId: string, grant: Grant | GrantInput, options: DelegateOptions): Promise<Delegation> {
    const authority = this.#requireAuthority('delegate');
    if (!options || typeof options !== 'object' || !options.by) throw new InvalidArgument('delegate needs { by }: the principal creating the delegation');
    const by = createPrincipal(options.by);
    const via = options.via ?? 'api';
    if (via !== 'api' && via !== 'cli') throw new InvalidArgument(`via must be 'api' or 'cli', got ${JSON.stringify(via)}`);
    let planned: Delegation;
    try {
      planned = await authority.planDelegation(parentId, grant, { by, store: this.store, now: this.clock(), ids: this.ids, via });
    } catch (err) {
      if (err instanceof IdentityError) {
        await this.#eventRaw('DELEGATION_REJECTED', null, null, null, { reason: 'principal_expired', parent_id: parentId });
      } else if (err instanceof AuthorityEscalation) {
        const data: JsonObject = { reason: err.reason, parent_id: parentId };
        if (err.dimension !== null) data['dimension'] = err.dimension;
        await this.#eventRaw('DELEGATION_REJECTED', null, null, null, data);
      }
      throw err;
    }
    const unscoped = resourceScopeGap(planned.grant, this.policy);
    if (unscoped !== null) throw new InvalidArgument(resourceScopeMessage(planned.grant, unscoped));
    await this.store.putDelegation(delegationRecord(planned));
    await this.#eventRaw('DELEGATION_CREATED', null, null, null, {
      delegation_id: planned.delegationId,
      parent_id: planned.parentId,
      depth: planned.depth,
      created_by_agent: planned.createdBy.agent,
      created_by_user: planned.createdBy.user,
      created_via: planned.createdVia,
    });
    return planned;
  }

  /**
   * Revokes one delegation in one write; every descendant is denied from the next evaluation
   * (the chain is walked, no child is visited). Resolves `true` when this call revoked it and
   * `false` when it already was (logged, no event). An unknown id is an `InvalidArgument`.
   */
  async revoke(delegationId: string, options: { by?: string | null } = {}): Promise<boolean> {
    const authority = this.#requireAuthority('revoke');
    const by = options?.by === undefined || options.by === null ? null : checkActor(options.by, 'by');
    const delegation = await authority.planRevocation(delegationId, { store: this.store });
    const revoked = await this.store.revokeDelegation(delegation.delegationId, by, storedTime(this.clock()));
    if (!revoked) {
      const again = await this.store.getDelegation(delegation.delegationId);
      this.logger.warn(`[ctrlrun] delegation ${delegation.delegationId} was already revoked at ${again?.revokedAt ?? delegation.revokedAt ?? 'an earlier time'}`);
      return false;
    }
    await this.#eventRaw('DELEGATION_REVOKED', null, null, null, { delegation_id: delegation.delegationId, revoked_by: by });
    return true;
  }

  #requireAuthority(what: string): Authority {
    if (this.authority === null) {
      throw new InvalidArgument(`this Control has no authority section, so there is nothing to ${what}; load a document with an 'authority:' section`);
    }
    return this.authority;
  }

  // ---- the path's steps ----

  /**
   * The human who approved this action: the presented approval's approver, but only when that
   * approval was requested for this very action (same hash). Another action's approval never
   * names its human on this action's evidence.
   */
  async #approverOf({ approvalId, action }: { approvalId: string | null; action: Action }): Promise<string | null> {
    if (approvalId === null) return null;
    const record = await this.store.getApproval(approvalId);
    return record !== null && record.request.actionHash === action.actionHash ? record.approver : null;
  }

  async #refuseAuthority(pass: Pass, result: AuthorityResult): Promise<never> {
    const { action } = pass;
    pass.approver = await this.#approverOf(pass);
    this.#note(pass, 'ACTION_DENIED', { reason: result.reason });
    await this.#receipt(pass, { result: 'denied', error: null });
    throw new AuthorityDenied(result.reason, {
      actionId: action.actionId,
      grantId: result.grantId,
      delegationId: result.delegationId,
      message: `${action.name} denied by authority (${result.reason})`,
    });
  }

  /**
   * Observe mode, once decided: nothing is enforced and the executor runs. A presented approval
   * is checked and never consumed; the reservation is attempted and, if refused, the executor
   * still runs but its outcome is never written to the record. Every stopper enforce mode would
   * have met is noted; the first one is the receipt's `would_have.blocked_reason`.
   */
  async #observed<T>(pass: Pass, executor: Executor<T>, options: ExecuteOptions, lease: number): Promise<ExecuteResult<T>> {
    await this.#flush(pass);
    const { action } = pass;
    const evaluation = pass.evaluation!;
    const obs = pass.observation!;
    obs.decision = evaluation.decision;
    obs.reason = evaluation.reason;
    if (evaluation.decision === 'deny') block(pass, evaluation.reason);
    pass.approver = await this.#approverOf(pass);
    if (evaluation.decision === 'approve') {
      if (pass.approvalId === null) block(pass, 'approval_required');
      else await this.#checkPresented(pass);
    }
    if (pass.effectKey !== null) {
      try {
        const reservation = await this.store.reserveEffect(pass.effectKey, action.actionId, lease);
        pass.attempt = reservation.attempt;
        pass.held = true;
        await this.#event(pass, 'EFFECT_RESERVED', { attempt: reservation.attempt, lease_expires_at: evidenceTime(parseTime(reservation.leaseExpiresAt)) });
      } catch (err) {
        if (!(err instanceof DuplicateEffect || err instanceof AmbiguousEffect)) throw err;
        await this.#event(pass, 'EFFECT_RESERVATION_REFUSED', refusalData(err));
        block(pass, blockedBy(err));
      }
      if (pass.held) {
        try {
          await this.store.beginExecution(pass.effectKey, action.actionId);
        } catch (err) {
          if (!(err instanceof DuplicateEffect || err instanceof AmbiguousEffect)) throw err;
          pass.held = false;
          await this.#event(pass, 'EFFECT_RESERVATION_REFUSED', refusalData(err));
          block(pass, blockedBy(err));
        }
      }
    }
    await this.#event(pass, 'EXECUTION_STARTED', {});
    return this.#run(pass, executor, options);
  }

  /** Checks a presented approval as consumption would, and writes nothing to it. */
  async #checkPresented(pass: Pass): Promise<void> {
    const id = pass.approvalId as string;
    const record = await this.store.getApproval(id);
    try {
      const plan = checkConsumable(record, id, pass.action.actionHash, this.clock());
      if (plan.kind === 'expire') throw plan.error;
    } catch (err) {
      if (err instanceof ApprovalMismatch) {
        await this.#event(pass, 'APPROVAL_INVALIDATED', { reason: err.reason, action_hash: pass.action.actionHash });
        block(pass, 'approval_mismatch');
        return;
      }
      if (err instanceof ActionDenied && err.reason === 'approval_denied') {
        await this.#event(pass, 'APPROVAL_DENIED', { approver: record?.approver ?? null });
        block(pass, 'approval_denied');
        return;
      }
      throw err;
    }
  }

  async #consumeAndReserve(pass: Pass, lease: number, hook: ReconcileHook | undefined, merged: boolean): Promise<void> {
    const { action } = pass;
    const id = pass.approvalId as string;
    // With a key, APPROVAL_CONSUMED and EFFECT_RESERVED (and, merged, EXECUTION_STARTED) are written in the write's own transaction.
    const consumed = this.#trailing<[Approval | null, Reservation]>(pass, ([approval, reservation]) => [
      ['APPROVAL_CONSUMED', { approver: approval!.approver }],
      ['EFFECT_RESERVED', reservedData(reservation)],
      ...(merged ? [STARTED] : []),
    ]);
    const attemptOnce = async (): Promise<[Approval | null, Reservation | null]> =>
      pass.effectKey === null
        ? [await this.store.consumeApproval(id, action.actionHash), null]
        : merged
          ? await this.store.reserveForExecution!({ key: pass.effectKey, actionId: action.actionId, leaseMs: lease, approval: { id, actionHash: action.actionHash } }, consumed)
          : await this.store.consumeApprovalAndReserve(id, action.actionHash, pass.effectKey, action.actionId, lease, consumed);
    let pair: [Approval | null, Reservation | null];
    try {
      try {
        pair = await attemptOnce();
      } catch (err) {
        if (!(err instanceof AmbiguousEffect) || !(await this.#blockingReconcile(pass, hook))) throw err;
        pair = await attemptOnce();
      }
    } catch (err) {
      if (err instanceof ApprovalMismatch) {
        pass.approver = await this.#approverOf(pass);
        if (err.reason === 'expired') this.#note(pass, 'APPROVAL_EXPIRED', {});
        this.#note(pass, 'APPROVAL_INVALIDATED', { reason: err.reason, action_hash: action.actionHash });
        await this.#receipt(pass, { result: 'blocked', error: err.message });
        throw err;
      }
      if (err instanceof ActionDenied && err.reason === 'approval_denied') {
        pass.approver = await this.#approverOf(pass);
        this.#note(pass, 'APPROVAL_DENIED', { approver: pass.approver });
        this.#note(pass, 'ACTION_DENIED', { reason: 'approval_denied' });
        await this.#receipt(pass, { result: 'denied', error: err.message });
        throw new ActionDenied('approval_denied', { actionId: action.actionId, message: err.message });
      }
      if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect) {
        pass.approver = await this.#approverOf(pass);
        await this.#refused(pass, err);
      }
      throw err;
    }
    const [approval, reservation] = pair;
    pass.approver = approval!.approver;
    if (reservation) {
      pass.attempt = reservation.attempt;
      await this.#written(pass, [approval, reservation], consumed);
    } else {
      await this.#event(pass, 'APPROVAL_CONSUMED', { approver: approval!.approver });
    }
  }

  async #reserve(pass: Pass, lease: number, hook: ReconcileHook | undefined, merged: boolean): Promise<void> {
    const key = pass.effectKey as string;
    const { actionId } = pass.action;
    // EFFECT_RESERVED (and, merged, EXECUTION_STARTED) is written in the reservation's own transaction; a refusal writes none.
    const reserved = this.#trailing<Reservation>(pass, (r) => [['EFFECT_RESERVED', reservedData(r)], ...(merged ? [STARTED] : [])]);
    const attemptOnce = async (): Promise<Reservation> => {
      if (!merged) return this.store.reserveEffect(key, actionId, lease, reserved);
      const both = this.#trailing<[Approval | null, Reservation]>(pass, ([, r]) => [['EFFECT_RESERVED', reservedData(r)], STARTED]);
      const [, r] = await this.store.reserveForExecution!({ key, actionId, leaseMs: lease, approval: null }, both);
      if (both.stored !== undefined) reserved.stored = both.stored;
      return r;
    };
    let reservation: Reservation;
    try {
      try {
        reservation = await attemptOnce();
      } catch (err) {
        if (!(err instanceof AmbiguousEffect) || !(await this.#blockingReconcile(pass, hook))) throw err;
        reservation = await attemptOnce();
      }
    } catch (err) {
      if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect) await this.#refused(pass, err);
      throw err;
    }
    pass.attempt = reservation.attempt;
    await this.#written(pass, reservation, reserved);
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
    this.#note(pass, 'EFFECT_RESERVATION_REFUSED', refusalData(err));
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
    // The key this attempt may write an outcome to. Observe mode can run without holding it, and
    // then the record belongs to whoever does: the outcome is never written.
    const key = pass.observation && !pass.held ? null : pass.effectKey;
    let value: T;
    try {
      value = await executor(action.canonicalArguments, { action, effectKey: key, attempt: pass.attempt });
    } catch (thrown) {
      if (thrown instanceof Suspended) return this.#suspended(pass, key, thrown);
      if (thrown instanceof NotExecuted) {
        const error = thrown.message;
        if (key !== null) {
          // The outcome, its event and the receipt in one transaction.
          const failed = this.#trailing(pass, () => [['EXECUTION_FAILED', { error }]], this.#receiptDraft(pass, { result: 'failed', error }));
          let record: EffectRecord;
          try {
            record = await this.store.failEffect(key, action.actionId, error, failed);
          } catch (refusal) {
            return this.#outcomeRefused(pass, refusal);
          }
          await this.#written(pass, record, failed);
          await this.#receiptOf(pass, failed);
        } else {
          this.#note(pass, 'EXECUTION_FAILED', { error });
          await this.#receipt(pass, { result: 'failed', error });
        }
        throw thrown;
      }
      const error = describeError(thrown);
      let marked = key === null;
      let written: [EffectRecord, TrailingEvents<EffectRecord>] | null = null;
      if (key !== null) {
        const ambiguous = this.#trailing(pass, () => [['EXECUTION_AMBIGUOUS', { error }]], this.#receiptDraft(pass, { result: 'ambiguous', error }));
        try {
          written = [await this.store.markAmbiguous(key, action.actionId, error, ambiguous), ambiguous];
          marked = true;
        } catch (refusal) {
          this.logger.warn(`[ctrlrun] could not record ${key} as ambiguous: ${describeError(refusal)}`);
        }
      }
      // A refused mark still leaves the event: the outcome is unknown either way.
      if (written !== null) {
        await this.#written(pass, ...written);
        await this.#receiptOf(pass, written[1]);
      } else {
        this.#note(pass, 'EXECUTION_AMBIGUOUS', { error });
        await this.#receipt(pass, { result: 'ambiguous', error });
      }
      if (key !== null && marked && options.reconcileEagerly && options.reconcile && pass.hookCalls === 0) {
        await this.#reconcile(pass, options.reconcile, 'eager');
      }
      throw thrown;
    }
    if (key !== null) {
      // The outcome, its event and the chained receipt in one transaction.
      const committed = this.#trailing(pass, () => [['EXECUTION_COMMITTED', {}]], this.#receiptDraft(pass, { result: 'committed', error: null }));
      let record: EffectRecord;
      try {
        record = await this.store.commitEffect(key, action.actionId, value, committed);
      } catch (refusal) {
        return this.#outcomeRefused(pass, refusal);
      }
      await this.#written(pass, record, committed);
      return { value, receipt: await this.#receiptOf(pass, committed) };
    }
    this.#note(pass, 'EXECUTION_COMMITTED', {});
    return { value, receipt: await this.#receipt(pass, { result: 'committed', error: null }) };
  }

  /**
   * The executor suspended: the record stays `executing`, its lease extended by the
   * suspend timeout and the continuation held (next round), `EXECUTION_SUSPENDED {held, round}`,
   * no receipt, the `Suspended` rethrown. Without an effect key there is nothing to hold it
   * against; and a hold the store refuses leaves nothing to resume: both are recorded as an
   * unknown outcome (never `failed`: the executor may have acted before it suspended).
   */
  async #suspended(pass: Pass, key: string | null, thrown: Suspended): Promise<never> {
    const { action } = pass;
    let refusal: Error | null = null;
    if (key === null) {
      refusal = new InvalidArgument(`${action.name} suspended, but it has no effect key: there is nothing to hold the continuation against`);
    } else {
      refusal = await this.#extensionRefusal(pass);
      if (refusal === null) {
        try {
          const round = await this.store.holdContinuation(action, key, thrown.continuation, this.suspendTimeout);
          await this.#event(pass, 'EXECUTION_SUSPENDED', { held: true, round, decided: decidedToJson(pass) });
          throw thrown;
        } catch (err) {
          if (err === thrown) throw err;
          refusal = err as Error;
        }
      }
    }
    const error = `${describeError(thrown)} (not held: ${describeError(refusal)})`;
    let written: [EffectRecord, TrailingEvents<EffectRecord>] | null = null;
    if (key !== null) {
      const ambiguous = this.#trailing(pass, () => [['EXECUTION_AMBIGUOUS', { error }]]);
      try {
        written = [await this.store.markAmbiguous(key, action.actionId, error, ambiguous), ambiguous];
      } catch (markRefused) {
        this.logger.warn(`[ctrlrun] could not record ${key} as ambiguous: ${describeError(markRefused)}`);
      }
    }
    if (written !== null) await this.#written(pass, ...written);
    else this.#note(pass, 'EXECUTION_AMBIGUOUS', { error });
    await this.#receipt(pass, { result: 'ambiguous', error });
    throw refusal;
  }

  /**
   * Whether this suspension's lease may be extended (spec 02 §1.4 T61b, §3.4 T80b): not once the
   * principal's credential has expired (`IdentityError`), nor once the authority denies the action
   * (revoked, expired, narrowed: `AUTHORITY_DENIED`, then `AuthorityDenied` with its reason). The
   * refusal is returned, and the suspension is then recorded as an unknown outcome at once rather
   * than left to lapse. Observe mode enforces neither: the denial is recorded and noted as a stopper.
   */
  async #extensionRefusal(pass: Pass): Promise<Error | null> {
    const { action } = pass;
    if (this.#principalExpired(action)) {
      if (pass.observation) {
        block(pass, 'principal_expired');
        return null;
      }
      return new IdentityError(`${action.name}: the lease is not extended: the principal ${action.principal.agent}'s credential expired at ${action.principal.expiresAt}`, { reason: 'principal_expired' });
    }
    if (this.authority === null) return null;
    const result = await this.authority.evaluate(action, { now: this.clock(), store: this.store });
    for (const w of result.warnings) this.logger.warn(`[ctrlrun] ${action.name}: ${w}`);
    if (result.passed) return null;
    await this.#event(pass, 'AUTHORITY_DENIED', authorityEventData(result));
    if (pass.observation) {
      block(pass, result.reason);
      return null;
    }
    return new AuthorityDenied(result.reason, {
      actionId: action.actionId,
      grantId: result.grantId,
      delegationId: result.delegationId,
      message: `${action.name}: the lease is not extended: denied by authority (${result.reason})`,
    });
  }

  /** The store refused the outcome write: record it ambiguous and raise the store's refusal. */
  async #outcomeRefused(pass: Pass, refusal: unknown): Promise<never> {
    if (refusal instanceof DuplicateEffect || refusal instanceof AmbiguousEffect) {
      const error = describeError(refusal);
      this.#note(pass, 'EXECUTION_AMBIGUOUS', { error });
      await this.#receipt(pass, { result: 'ambiguous', error });
    }
    throw refusal;
  }

  // ---- evidence ----

  /** Drafts an event of this pass, to be stored with the pass's next write (see {@link Pass.pending}). */
  #note(pass: Pass, type: EventType, data: JsonObject): void {
    pass.pending.push(this.#draft(pass, type, data));
  }

  /** Stores this pass's pending events and one more, in one transaction; resolves to the last. */
  async #event(pass: Pass, type: EventType, data: JsonObject): Promise<EventRecord> {
    this.#note(pass, type, data);
    const stored = await this.#flush(pass);
    return stored[stored.length - 1]!;
  }

  /** A draft of this pass's event, stamped now. */
  #draft(pass: Pass, type: EventType, data: JsonObject): EventDraft {
    return { ts: evidenceTime(this.clock()), type, actionId: pass.action.actionId, effectKey: pass.effectKey, approvalId: pass.approvalId, data };
  }

  /** The pass's pending events, stamped now (they are written now), in order. */
  #takePending(pass: Pass): EventDraft[] {
    if (pass.pending.length === 0) return [];
    const ts = evidenceTime(this.clock());
    return pass.pending.map((d) => ({ ...d, ts }));
  }

  /** Stores the pass's pending events, if any, on their own. */
  async #flush(pass: Pass): Promise<EventRecord[]> {
    if (pass.pending.length === 0) return [];
    const stored = await this.#appendAll(this.#takePending(pass));
    pass.pending = [];
    return stored;
  }

  /**
   * Stores `drafts` in order — in one transaction where the store has `appendEvents`, else one
   * by one — and hands each to the sinks once stored, in order.
   */
  async #appendAll(drafts: EventDraft[]): Promise<EventRecord[]> {
    if (this.store.appendEvents === undefined) {
      const stored: EventRecord[] = [];
      for (const draft of drafts) {
        const event = await this.store.appendEvent(draft);
        await this.#sink(event);
        stored.push(event);
      }
      return stored;
    }
    const stored = await this.store.appendEvents(drafts);
    for (const event of stored) await this.#sink(event);
    return stored;
  }

  /** Hands a stored event to the sinks; nothing at all when none is registered. */
  async #sink(event: EventRecord): Promise<void> {
    if (this.#sinks.length !== 0) await dispatchToSinks(this.#sinks, 'event', event, this.logger);
  }

  /**
   * The events a write stores in its own transaction: the pass's pending events first, then
   * those `make` drafts from the write's result (after the write succeeded, with this pass's ids
   * as they stand then), and optionally a receipt chained in the same transaction.
   */
  #trailing<R>(pass: Pass, make: (result: R) => [EventType, JsonObject][], receipt?: ReceiptDraft): TrailingEvents<R> {
    const drafts = (result: R): EventDraft[] => [...this.#takePending(pass), ...make(result).map(([type, data]) => this.#draft(pass, type, data))];
    return receipt === undefined ? { drafts } : { drafts, receipt };
  }

  /**
   * After a state change succeeded: its events (the pending ones included) go to the sinks in
   * order. A store that did not write them with the change (a `StateStore` that ignores the
   * parameter) gets them appended now, one by one, each dispatched once stored.
   */
  async #written<R>(pass: Pass, result: R, events: TrailingEvents<R>): Promise<void> {
    const stored = events.stored;
    if (stored === undefined) {
      for (const draft of events.drafts(result)) await this.#sink(await this.store.appendEvent(draft));
    } else {
      for (const event of stored) await this.#sink(event);
    }
    // Whichever way they were stored, the pending events are on record now.
    pass.pending = [];
  }

  async #eventRaw(type: EventType, actionId: string | null, effectKey: string | null, approvalId: string | null, data: JsonObject): Promise<EventRecord> {
    const stored = await this.store.appendEvent({ ts: evidenceTime(this.clock()), type, actionId, effectKey, approvalId, data });
    await this.#sink(stored);
    return stored;
  }

  /** The receipt of this pass's terminal outcome, built now (`finished_at`), not yet chained. */
  #receiptDraft(pass: Pass, r: { result: ReceiptFields['result']; error: string | null; decision?: string; reason?: string }): ReceiptDraft {
    const ev = pass.evaluation;
    // Observe mode: every terminal outcome of an action that ran is `observed`, with what the
    // executor did and what enforce mode would have done. Still-refused paths stay `denied`.
    const observed = pass.observation !== null && isExecution(r.result);
    return buildReceipt(pass.action, {
      receiptId: this.ids('ctr'),
      decision: r.decision ?? ev?.decision ?? 'deny',
      decisionReason: r.reason ?? ev?.reason ?? 'unknown',
      approvalId: pass.approvalId,
      approver: pass.approver,
      effectKey: pass.effectKey,
      attempt: pass.attempt,
      result: observed ? 'observed' : r.result,
      execution: observed ? (r.result as 'committed' | 'failed' | 'ambiguous') : null,
      wouldHave: observed ? { decision: pass.observation!.decision, reason: pass.observation!.reason, blocked_reason: pass.observation!.blocked } : null,
      error: r.error,
      startedAt: pass.startedAt,
      finishedAt: evidenceTime(this.clock()),
      policyHash: pass.policyHash,
      policyVersion: pass.policyVersion,
      controls: ev?.controls ?? [],
    });
  }

  /** Chains the receipt with the pass's pending events (one transaction), then hands both to the sinks. */
  async #receipt(pass: Pass, r: { result: ReceiptFields['result']; error: string | null; decision?: string; reason?: string }): Promise<StoredReceipt> {
    return this.#chain(pass, this.#receiptDraft(pass, r));
  }

  async #chain(pass: Pass, draft: ReceiptDraft): Promise<StoredReceipt> {
    const leading = this.#trailing<StoredReceipt>(pass, () => []);
    // A failed write leaves the pending events pending: the caller's catch stores them alone.
    const stored = await this.store.putReceipt(draft, leading);
    await this.#written(pass, stored, leading);
    if (this.#sinks.length !== 0) await dispatchToSinks(this.#sinks, 'receipt', stored, this.logger);
    return stored;
  }

  /**
   * The receipt an outcome write carried: chained with it, or — when the store did not (it does
   * not take receipts, or the receipt part failed and the outcome was written without it) —
   * chained now on its own; a failure then raises, with the outcome kept (T170).
   */
  async #receiptOf<R>(pass: Pass, written: TrailingEvents<R>): Promise<StoredReceipt> {
    const stored = written.storedReceipt;
    if (stored === undefined) return this.#chain(pass, written.receipt!);
    if (this.#sinks.length !== 0) await dispatchToSinks(this.#sinks, 'receipt', stored, this.logger);
    return stored;
  }

  #checkEnvironment(action: Action): void {
    if (!action || typeof action !== 'object' || typeof action.actionHash !== 'string') throw new InvalidArgument('execute needs an Action (createAction(...))');
    if (action.environment !== this.environment) {
      throw new InvalidArgument(`the action is for environment ${JSON.stringify(action.environment)} but this Control runs in ${JSON.stringify(this.environment)}`);
    }
  }

  #principalExpired(action: Action): boolean {
    const exp = expiryOf(action.principal, action.name);
    return exp !== null && this.clock().getTime() > exp.getTime();
  }
}

/**
 * The principal's credential expiry, or null. One that is not a time with an offset (a provider
 * that rendered year 10000, a hand-built principal) is an `IdentityError`, never a bad request.
 */
function expiryOf(principal: Principal, actionName: string): Date | null {
  const exp = principal.expiresAt;
  if (exp === undefined || exp === null) return null;
  try {
    return parseTime(exp, 'principal.expiresAt');
  } catch (err) {
    const shown = JSON.stringify(exp.length > 64 ? `${exp.slice(0, 64)}…` : exp);
    throw new IdentityError(`${actionName}: the principal's credential expiry ${shown} is not a time with an offset`, { reason: 'expires_at_invalid', cause: err });
  }
}

function deny(reason: string): Evaluation {
  return { decision: 'deny', reason, controls: [], warnings: [] };
}

function named(p: Principal): string {
  return p.user === null ? p.agent : `${p.agent}/${p.user}`;
}

function isExecution(result: ReceiptResult): boolean {
  return result === 'committed' || result === 'failed' || result === 'ambiguous';
}

/** Keeps the first stopper: later ones are ones enforce mode would never have reached. */
function block(pass: Pass, reason: string): void {
  if (pass.observation && pass.observation.blocked === null) pass.observation.blocked = reason;
}

/** `EXECUTION_SUSPENDED`'s `decided`: what the receipt of the resumption must carry. */
function decidedToJson(pass: Pass): JsonObject {
  const ev = pass.evaluation;
  const obs = pass.observation;
  return {
    decision: ev?.decision ?? 'deny',
    decision_reason: ev?.reason ?? 'unknown',
    controls: [...(ev?.controls ?? [])],
    approver: pass.approver,
    would_have: obs === null ? null : { decision: obs.decision, reason: obs.reason, blocked_reason: obs.blocked },
    policy_hash: pass.policyHash,
    policy_version: pass.policyVersion,
  };
}

const DECISIONS: readonly string[] = ['allow', 'approve', 'deny'];

function stringOrNull(v: unknown): v is string | null {
  return v === null || typeof v === 'string';
}

/** Reads {@link decidedToJson}'s output back; anything malformed is null (no snapshot). */
function decidedFromJson(v: unknown): Omit<Decided, 'approvalId'> | null {
  if (!isPlainObject(v)) return null;
  const { decision, decision_reason: reason, controls, approver, would_have: wh, policy_hash: policyHash, policy_version: policyVersion } = v;
  if (typeof decision !== 'string' || !DECISIONS.includes(decision) || typeof reason !== 'string') return null;
  if (!Array.isArray(controls) || !controls.every((c) => typeof c === 'string')) return null;
  if (!stringOrNull(approver) || typeof policyHash !== 'string' || !stringOrNull(policyVersion)) return null;
  let observation: Observation | null = null;
  if (wh !== null) {
    if (!isPlainObject(wh)) return null;
    const { decision: d, reason: r, blocked_reason: b } = wh;
    if (typeof d !== 'string' || !DECISIONS.includes(d) || typeof r !== 'string' || !stringOrNull(b)) return null;
    observation = { decision: d as Decision, reason: r, blocked: b };
  }
  return {
    evaluation: { decision: decision as Decision, reason, controls: controls as string[], warnings: [] },
    approver,
    observation,
    policyHash,
    policyVersion,
  };
}

/** EFFECT_RESERVED's data: from the stored reservation. */
function reservedData(reservation: Reservation): JsonObject {
  return { attempt: reservation.attempt, lease_expires_at: evidenceTime(parseTime(reservation.leaseExpiresAt)) };
}

function refusalData(err: DuplicateEffect | AmbiguousEffect): JsonObject {
  return err instanceof DuplicateEffect ? { reason: 'duplicate', state: err.state } : { reason: 'ambiguous' };
}

/** `duplicate` (it happened) and `in_progress` (someone holds it now) are kept apart. */
function blockedBy(err: DuplicateEffect | AmbiguousEffect): string {
  if (err instanceof AmbiguousEffect) return 'ambiguous';
  return err.state === 'committed' ? 'duplicate' : 'in_progress';
}

function delegationRecord(d: Delegation) {
  return delegationToRecord(d);
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

