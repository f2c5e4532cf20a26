/**
 * `Control`: the one control path. normalize → decide → approve → reserve → execute → resolve →
 * record. Every entry point (`protect`, the CLI, the worker, the playground) goes through
 * {@link Control.execute}; the plan of one action is in `attempt.ts`, its gates in `gates.ts`,
 * the outcome rule in `outcome.ts`, and the decisions themselves in the pure planners they call.
 *
 * @module
 */
import type { Action, Principal } from '../action.js';
import { type Authority, type Delegation } from '../authority/authority.js';
import type { Grant, GrantInput } from '../authority/grant.js';
import { InvalidArgument, type ActionDenied } from '../errors.js';
import type { IdentityProvider } from '../identity.js';
import { checkApproverIdentity, type ApproverIdentity, type VerifiedPrincipal } from './presented.js';
import { randomIds, type IdSource } from '../ids.js';
import type { Approval, ApprovalRecord, StoredReceipt } from '../model.js';
import type { Evaluation, Policy } from '../policy/index.js';
import type { StateStore } from '../store/state-store.js';
import { checkDuration, MINUTE, systemClock, type Clock } from '../time.js';
import { denyApproval, delegate, grantApproval, openApproval, resolveEffect, revoke } from './answers.js';
import { breakGlass, type BreakGlassOptions } from './break-glass.js';
import { attempt, resumeAttempt } from './attempt.js';
import { approvalEdit, editApproval, unusedEditOf, type ApprovalEdit, type GrantOptions } from './edit.js';
import { evaluate, resolvePrincipal } from './gates.js';
import type { ControlContext } from './pass.js';
import { waitForAnswer, type WaitForAnswerOptions } from './wait.js';
import { refuseUnrepresentable } from './unrepresentable.js';
import type { ControlOptions, DelegateOptions, Executor, ExecuteOptions, ExecuteResult, Logger, ResolveOptions } from './types.js';

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
  /** How approvers are verified here, or null (see {@link ControlOptions.approvers}). */
  readonly approverIdentity: ApproverIdentity | null;
  /** `mode: observe`: everything is evaluated and recorded, nothing is enforced. */
  readonly observing: boolean;
  readonly #ctx: ControlContext;

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
    if (options.identity !== undefined && options.identity !== null && typeof options.identity.resolve !== 'function') {
      throw new InvalidArgument('identity must be an IdentityProvider (an object with resolve(context))');
    }
    this.identity = options.identity ?? null;
    this.approverIdentity = checkApproverIdentity(options.approvers);
    this.observing = options.policy.mode === 'observe';
    this.policyHash = options.policy.hashFor({ environment: this.environment, authority: this.authority });
    this.defaultPrincipal = options.principal ?? null;
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    this.lease = checkDuration(options.lease ?? 5 * MINUTE, 'lease');
    this.approvalTtl = checkDuration(options.approvalTtl ?? 15 * MINUTE, 'approvalTtl');
    this.suspendTimeout = checkDuration(options.suspendTimeout ?? 5 * MINUTE, 'suspendTimeout');
    this.logger = options.logger ?? console;
    this.#ctx = {
      policy: this.policy,
      store: this.store,
      environment: this.environment,
      policyHash: this.policyHash,
      defaultPrincipal: this.defaultPrincipal,
      clock: this.clock,
      ids: this.ids,
      lease: this.lease,
      approvalTtl: this.approvalTtl,
      suspendTimeout: this.suspendTimeout,
      logger: this.logger,
      authority: this.authority,
      identity: this.identity,
      approverIdentity: this.approverIdentity,
      observing: this.observing,
      sinks: [...(options.sinks ?? [])],
      warned: { principal: false },
    };
  }

  /**
   * The combined decision for `action` — the stricter of authority and policy — with no writes
   * (env mismatch → `InvalidArgument`; an unreadable principal expiry → `IdentityError`
   * `expires_at_invalid`; an expired principal → `deny`/`principal_expired`; an
   * authority denial → `deny` with its reason, policy never consulted). Reads the store to
   * resolve delegations, hence async.
   */
  async evaluate(action: Action, options: { task?: string | null } = {}): Promise<Evaluation> {
    return evaluate(this.#ctx, action, options.task ?? null);
  }

  /**
   * The principal for a call of `actionName` (spec 02 §1.3). Without a provider: the per-call
   * or default principal, else `no_principal`. With one: its answer wins; a decline falls back
   * to the per-call or default principal only when no authority section is loaded; a throw is an
   * `IdentityError` and nothing fills in. `no_principal` is an `ActionDenied` that leaves no
   * receipt and no event.
   */
  async resolvePrincipal(actionName: string, options: ResolveOptions = {}): Promise<Principal> {
    return resolvePrincipal(this.#ctx, actionName, options);
  }

  /**
   * Records the refusal of a call one of whose arguments no action can carry (spec 04 §5: a float
   * in an MCP `tools/call`): `action` is the surface's stand-in for the call, `pointer` the JSON
   * pointer of the argument, `message` the receipt's `error`. Writes `ACTION_PROPOSED`,
   * `ACTION_DENIED {reason: unrepresentable_argument, pointer}` and a `denied` receipt (no policy,
   * no reservation; observe mode refuses it too); resolves to the receipt and the `ActionDenied`
   * to raise.
   */
  async refuseUnrepresentable(action: Action, pointer: string, message: string): Promise<{ receipt: StoredReceipt; error: ActionDenied }> {
    return refuseUnrepresentable(this.#ctx, action, pointer, message);
  }

  /** Runs `action` through the control path; resolves to the executor's value. */
  async execute<T>(action: Action, executor: Executor<T>, options: ExecuteOptions = {}): Promise<T> {
    return (await this.executeWithReceipt(action, executor, options)).value;
  }

  /** `Control.executeWithReceipt`: runs `action` through the control path; resolves to the executor's value and the receipt. */
  executeWithReceipt<T>(action: Action, executor: Executor<T>, options: ExecuteOptions = {}): Promise<ExecuteResult<T>> {
    // attempt is async: whatever it refuses is a rejection, never a throw.
    return attempt(this.#ctx, action, executor, options);
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

  /** `Control.resumeWithReceipt`: the resumption of a suspended execution (see `Control.resume`). */
  async resumeWithReceipt<T>(
    continuation: string,
    executor: Executor<T>,
    options: Pick<ExecuteOptions, 'reconcile' | 'reconcileEagerly'> = {},
  ): Promise<ExecuteResult<T>> {
    return resumeAttempt(this.#ctx, continuation, executor, options);
  }

  /**
   * The approval request open for `action`'s hash — `pending`, or `granted` and not yet
   * consumed — and not expired (the newest, if several were filed before this rule existed), or
   * `null`. Reads only.
   */
  async openApproval(action: Action): Promise<ApprovalRecord | null> {
    return openApproval(this.#ctx, action);
  }

  /**
   * Grants approval request `requestId` as `approver`; records `APPROVAL_GRANTED`.
   *
   * With `verified` (the principal a resolving surface authenticated) the answer is recorded on the
   * request as a verified approver, entitled to the controls whose `approver_role` its roles claim
   * holds (the Control's `approvers.rolesClaim`). A request that needs N approvers
   * (`approvals_required`) is granted by the N-th distinct verified one; before that the call
   * records the yes and raises `ApprovalMismatch('pending')` saying "1 of 2 approvals: ana". A
   * second yes by the same person, or an unverified yes on N > 1, is refused and counts nothing.
   *
   * With `edit: { arguments }` the human approves edited arguments instead (edit-then-approve).
   * The request must be pending and unexpired (the same refusals as a grant). The edited action
   * has the same name, principal and environment, the new arguments (checked and canonicalised as
   * `createAction` does), the resource derived again from the policy's `resource:` template (with
   * no template, none; a resource the caller gave, which nothing can derive for other arguments,
   * refuses the edit with `InvalidArgument`; so do arguments the policy's effect template cannot
   * render) and a fresh action id; it is hashed anew and decided again by authority
   * and policy. A deny is an `ActionDenied` whose message is the rule's sentence: nothing is
   * written and the request stays pending (an edit never lifts a deny). Otherwise one store
   * transaction answers the request `denied` (approver: the editor; `APPROVAL_DENIED` with
   * `edited_to`) and inserts a new request for the edited hash, already `granted`, expiring with
   * the original (`APPROVAL_GRANTED` with `edited_from`, both hashes and both argument sets).
   * Resolves to that grant: its `approvalId` is the new request id. Arguments with the proposed
   * hash are a plain grant. A store without `editApproval` refuses an edit (`InvalidArgument`).
   *
   * Running it: `execute(editedAction, fn, { approvalId: newId })` consumes the grant (single
   * use; any other hash presented with the new id is `ApprovalMismatch('mismatch')`). The agent's
   * own path works too: executing the ORIGINAL action presenting the ORIGINAL request id (as
   * `protect` does after waiting for an answer) runs the EDITED action instead — the executor
   * receives the edited canonical arguments and `ExecutionContext.action` is the edited action —
   * and consumes the new grant (even when the policy would allow the edited action without one);
   * a second such call is refused as consumed, so it never runs twice. Asked again without a
   * request id while the edited grant is unused, the proposal's `ApprovalRequired` names the
   * original request (no second request is filed). The receipt of an action
   * run under an edited grant carries an `edit` object. The caller's own `effectKey`, if it gives
   * one, is kept — unless it is the effect template's key for the proposed arguments, which is
   * rendered again for the edited ones (the edit never reserves the proposal's key); a key from a
   * template is resolved against the edited arguments.
   */
  async grantApproval(requestId: string, options: GrantOptions): Promise<Approval> {
    if (options !== null && typeof options === 'object' && options.edit !== undefined) return editApproval(this.#ctx, requestId, options);
    return grantApproval(this.#ctx, requestId, options);
  }

  /**
   * The edit that answered request `requestId` — given the proposed request's id or the edited
   * one's — or `null` when the request was not answered with an edit. Reads only.
   */
  async approvalEdit(requestId: string): Promise<ApprovalEdit | null> {
    return approvalEdit(this.#ctx, requestId);
  }

  /**
   * The edit that answered `action`'s newest denied, unexpired request while its edited grant is
   * still unused, or `null`: what the control path names when `action` is asked for again.
   * Reads only.
   */
  async unusedEdit(action: Action): Promise<ApprovalEdit | null> {
    return unusedEditOf(this.#ctx, action);
  }

  /**
   * Waits for the human's answer to `requestId`, filed for `action`: resolves to the `Approval`
   * when granted, `null` when answered no (denied, consumed, expired); `ApprovalTimeout` when
   * `timeoutMs` or the request's expiry passes unanswered. When `signal` aborts first — the
   * caller gave up — it stops waiting, records `ACTION_DENIED {reason: wait_abandoned, action_hash}` and
   * rejects with `ApprovalRequired` naming the request, which stays open: nothing runs by itself,
   * and a later call that presents the request runs the action once if it is granted. An answer
   * that arrives after the signal aborted is not acted on. Never consumes the approval.
   */
  async waitForAnswer(action: Action, requestId: string, options: WaitForAnswerOptions = {}): Promise<Approval | null> {
    return waitForAnswer(this.#ctx, action, requestId, options);
  }

  /** Denies approval request `requestId` as `approver`; records `APPROVAL_DENIED`. */
  async denyApproval(requestId: string, options: { approver: string; via?: string; verified?: VerifiedPrincipal | null }): Promise<ApprovalRecord> {
    return denyApproval(this.#ctx, requestId, options);
  }

  /** A human says what happened to an ambiguous effect; records `EFFECT_RESOLVED`. */
  async resolveEffect(effectKey: string, state: 'committed' | 'failed', options: { by: string; via?: string; reason?: string }) {
    return resolveEffect(this.#ctx, effectKey, state, options);
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
    return delegate(this.#ctx, parentId, grant, options);
  }

  /**
   * Opens a grant beneath the break-glass envelope `envelopeId` as the verified human
   * `options.verified` (needs `approvers` on this Control: the opener's roles must include the
   * `approver_role` of every control the envelope cites, else `approver_unentitled`), for
   * `options.reason`, expiring at the grant's `expiresAt` or after `options.ttl` seconds, within
   * the envelope's `max_ttl`; refusals as {@link Authority.planBreakGlass}, each with
   * `DELEGATION_REJECTED`. Writes one delegation (`created_via: break-glass`) and
   * `DELEGATION_CREATED` with `created_via` and `reason`. Revoke it as any delegation.
   */
  async breakGlass(envelopeId: string, grant: Grant | GrantInput, options: BreakGlassOptions): Promise<Delegation> {
    return breakGlass(this.#ctx, envelopeId, grant, options);
  }

  /**
   * Revokes one delegation in one write; every descendant is denied from the next evaluation
   * (the chain is walked, no child is visited). Resolves `true` when this call revoked it and
   * `false` when it already was (logged, no event). An unknown id is an `InvalidArgument`.
   */
  async revoke(delegationId: string, options: { by?: string | null } = {}): Promise<boolean> {
    return revoke(this.#ctx, delegationId, options);
  }
}
