/**
 * The gates an action passes before it runs: identity (the principal and its expiry), the
 * environment, authority, policy, the approval and the reservation. Each refusal writes its
 * evidence and its receipt here.
 *
 * @module
 */
import { checkAction, createPrincipal, type Action, type Principal } from '../action.js';
import { quotedForMessage, shownId } from '../visible.js';
import { authorityEventData, type AuthorityResult } from '../authority/authority.js';
import { ActionDenied, AmbiguousEffect, ApprovalMismatch, AuthorityDenied, DuplicateEffect, IdentityError, InvalidArgument } from '../errors.js';
import { normalizeHeaders } from '../identity.js';
import type { Approval, Reservation } from '../model.js';
import type { Evaluation } from '../policy/index.js';
import { planReservation } from '../effects.js';
import { isWellFormedString } from '../canonical.js';
import { blockingReconcile } from './reconcile.js';
import { note, recordEvent, trailing, afterWrite, recordReceipt } from './evidence.js';
import { type ControlContext, type Pass, started, expiryOf, deny, named, block, reservedData, refusalData, describeError } from './pass.js';
import type { ReconcileHook, ResolveOptions } from './types.js';
import { recheckPresented } from './presented.js';
import { BUDGET_EXHAUSTED, BudgetExhausted, type BudgetCharge } from '../budget.js';

/**
 * The combined decision for `action` — the stricter of authority and policy — with no writes
 * (env mismatch → `InvalidArgument`; an unreadable principal expiry → `IdentityError`
 * `expires_at_invalid`; an expired principal → `deny`/`principal_expired`; an
 * authority denial → `deny` with its reason, policy never consulted). Reads the store to
 * resolve delegations, hence async.
 */
export async function evaluate(ctx: ControlContext, action: Action, task: string | null = null): Promise<Evaluation> {
  checkEnvironment(ctx, action);
  if (principalExpired(ctx, action)) return deny('principal_expired');
  if (ctx.authority !== null) {
    const result = await ctx.authority.evaluate(action, { now: ctx.clock(), store: ctx.store, task: checkTask(task) });
    if (!result.passed) return { ...deny(result.reason), warnings: [...result.warnings] };
  }
  return ctx.policy.evaluate(action.name, action.canonicalArguments);
}

/**
 * The principal for a call of `actionName` (spec 02 §1.3). Without a provider: the per-call
 * or default principal, else `no_principal`. With one: its answer wins; a decline falls back
 * to the per-call or default principal only when no authority section is loaded; a throw is an
 * `IdentityError` and nothing fills in. `no_principal` is an `ActionDenied` that leaves no
 * receipt and no event.
 */
export async function resolvePrincipal(ctx: ControlContext, actionName: string, options: ResolveOptions = {}): Promise<Principal> {
  const hint = options.principal ?? ctx.defaultPrincipal;
  const fromContext = hint ? createPrincipal(hint) : null;
  if (ctx.identity === null) return fromContext ?? refuseNoPrincipal(ctx, actionName);
  const headers = normalizeHeaders(options.headers);
  if (headers === 'repeated') return refuseNoPrincipal(ctx, actionName, 'an identity header was given more than once');
  let resolved: unknown;
  try {
    resolved = await ctx.identity.resolve({
      action: actionName,
      environment: ctx.environment,
      headers: Object.freeze(headers),
      agent: fromContext?.agent ?? null,
      user: fromContext?.user ?? null,
    });
  } catch (err) {
    if (err instanceof IdentityError) throw err;
    ctx.logger.warn(`[ctrlrun] ${actionName}: the identity provider raised ${describeError(err)}`);
    throw new IdentityError(`${actionName}: the identity provider rejected this call`, { reason: 'provider_raised', cause: err });
  }
  if (resolved === null || resolved === undefined) {
    // A decline is never backfilled once authority is loaded: omitting a credential must not
    // reach what forging one would.
    if (fromContext === null || ctx.authority !== null) return refuseNoPrincipal(ctx, actionName);
    return fromContext;
  }
  let principal: Principal;
  try {
    principal = createPrincipal(resolved as Principal);
  } catch (err) {
    throw new IdentityError(`${actionName}: the identity provider returned something that is not a principal`, { reason: 'not_a_principal', cause: err });
  }
  expiryOf(principal, actionName);
  if (fromContext !== null && !ctx.warned.principal && (fromContext.agent !== principal.agent || fromContext.user !== principal.user)) {
    ctx.warned.principal = true;
    ctx.logger.warn(
      `[ctrlrun] ${actionName}: the identity provider resolved ${named(principal)} and the call says ${named(fromContext)}; the provider is in force`,
    );
  }
  return principal;
}

export function refuseNoPrincipal(ctx: ControlContext, actionName: string, why = 'no principal is available'): never {
  ctx.logger.warn(`[ctrlrun] ${actionName}: denied: ${why}`);
  throw new ActionDenied('no_principal', {
    message: `${actionName} refused: ${why}; pass { principal } per call or to the Control, or install an identity provider that answers`,
  });
}

export function checkEnvironment(ctx: ControlContext, action: Action): void {
  checkAction(action, 'execute');
  if (action.environment !== ctx.environment) {
    throw new InvalidArgument(
      `the action is for environment ${quotedForMessage(action.environment, 200)} but this Control runs in ${JSON.stringify(ctx.environment)}`,
    );
  }
}

export function principalExpired(ctx: ControlContext, action: Action): boolean {
  const exp = expiryOf(action.principal, action.name);
  return exp !== null && ctx.clock().getTime() > exp.getTime();
}

// ---- the path's steps ----
/**
 * The human who approved this action: the presented approval's approver, but only when that
 * approval was requested for this very action (same hash). Another action's approval never
 * names its human on this action's evidence.
 */
export async function approverOf(ctx: ControlContext, { approvalId, action }: { approvalId: string | null; action: Action }): Promise<string | null> {
  if (approvalId === null) return null;
  const record = await ctx.store.getApproval(approvalId);
  return record !== null && record.request.actionHash === action.actionHash ? record.approver : null;
}

/** What a denial adds when a break-glass grant outlives its envelope's `max_ttl`. */
function maxTtlNote(result: AuthorityResult): string {
  if (result.dimension !== 'max_ttl') return '';
  return `: the break-glass grant ${result.grantId ?? ''} expires later than its envelope's max_ttl after it was opened`;
}

export async function refuseAuthority(ctx: ControlContext, pass: Pass, result: AuthorityResult): Promise<never> {
  const { action } = pass;
  pass.approver = await approverOf(ctx, pass);
  note(ctx, pass, 'ACTION_DENIED', { reason: result.reason });
  await recordReceipt(ctx, pass, { result: 'denied', error: null });
  throw new AuthorityDenied(result.reason, {
    actionId: action.actionId,
    grantId: result.grantId,
    delegationId: result.delegationId,
    message: `${action.name} denied by authority (${result.reason})${maxTtlNote(result)}`,
  });
}

export async function consumeAndReserve(ctx: ControlContext, pass: Pass, lease: number, hook: ReconcileHook | undefined, merged: boolean): Promise<void> {
  const { action } = pass;
  const id = pass.approvalId as string;
  // The approver gate and the precondition recheck, immediately before the store consumes (spec 05 §4.4).
  const { precondition, consumed: compared } = await recheckPresented(ctx, pass);
  // With a key, APPROVAL_CONSUMED and EFFECT_RESERVED (and, merged, EXECUTION_STARTED) are written in the write's own transaction.
  const consumed = trailing<[Approval | null, Reservation]>(ctx, pass, ([approval, reservation]) => [
    ['APPROVAL_CONSUMED', { approver: approval!.approver, ...compared }],
    ['EFFECT_RESERVED', reservedData(reservation)],
    ...(merged ? [started(pass)] : []),
  ]);
  const attemptOnce = async (): Promise<[Approval | null, Reservation | null]> =>
    pass.effectKey === null
      ? [await ctx.store.consumeApproval(id, action.actionHash, precondition), null]
      : merged
        ? await ctx.store.reserveForExecution!(
            {
              key: pass.effectKey,
              actionId: action.actionId,
              leaseMs: lease,
              approval: { id, actionHash: action.actionHash, precondition },
              ...chargesOf(pass),
            },
            consumed,
          )
        : await ctx.store.consumeApprovalAndReserve(id, action.actionHash, pass.effectKey, action.actionId, lease, consumed, precondition, ...chargeArg(pass));
  let pair: [Approval | null, Reservation | null];
  try {
    try {
      pair = await attemptOnce();
    } catch (err) {
      if (!(err instanceof AmbiguousEffect) || !(await blockingReconcile(ctx, pass, hook))) throw err;
      pair = await attemptOnce();
    }
  } catch (err) {
    if (err instanceof ApprovalMismatch) {
      pass.approver = await approverOf(ctx, pass);
      if (err.reason === 'expired') note(ctx, pass, 'APPROVAL_EXPIRED', {});
      note(ctx, pass, 'APPROVAL_INVALIDATED', { reason: err.reason, action_hash: action.actionHash });
      await recordReceipt(ctx, pass, { result: 'blocked', error: err.message });
      throw err;
    }
    if (err instanceof ActionDenied && err.reason === 'approval_denied') {
      pass.approver = await approverOf(ctx, pass);
      note(ctx, pass, 'APPROVAL_DENIED', { approver: pass.approver });
      note(ctx, pass, 'ACTION_DENIED', { reason: 'approval_denied' });
      await recordReceipt(ctx, pass, { result: 'denied', error: err.message });
      throw new ActionDenied('approval_denied', { actionId: action.actionId, message: err.message });
    }
    if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect) {
      pass.approver = await approverOf(ctx, pass);
      await refused(ctx, pass, err);
    }
    if (err instanceof BudgetExhausted) await refuseBudget(ctx, pass, err);
    throw err;
  }
  pass.budgetCharges = pass.charges ?? [];
  const [approval, reservation] = pair;
  pass.approver = approval!.approver;
  pass.approvers = approval!.approvers ?? [];
  if (reservation) {
    pass.attempt = reservation.attempt;
    await afterWrite(ctx, pass, [approval, reservation], consumed);
  } else {
    await recordEvent(ctx, pass, 'APPROVAL_CONSUMED', { approver: approval!.approver, ...compared });
  }
}

export async function reserveStep(ctx: ControlContext, pass: Pass, lease: number, hook: ReconcileHook | undefined, merged: boolean): Promise<void> {
  const key = pass.effectKey as string;
  const { actionId } = pass.action;
  // EFFECT_RESERVED (and, merged, EXECUTION_STARTED) is written in the reservation's own transaction; a refusal writes none.
  const reserved = trailing<Reservation>(ctx, pass, (r) => [['EFFECT_RESERVED', reservedData(r)], ...(merged ? [started(pass)] : [])]);
  const attemptOnce = async (): Promise<Reservation> => {
    if (!merged) return ctx.store.reserveEffect(key, actionId, lease, reserved, ...chargeArg(pass));
    const both = trailing<[Approval | null, Reservation]>(ctx, pass, ([, r]) => [['EFFECT_RESERVED', reservedData(r)], started(pass)]);
    const [, r] = await ctx.store.reserveForExecution!({ key, actionId, leaseMs: lease, approval: null, ...chargesOf(pass) }, both);
    if (both.stored !== undefined) reserved.stored = both.stored;
    return r;
  };
  let reservation: Reservation;
  try {
    try {
      reservation = await attemptOnce();
    } catch (err) {
      if (!(err instanceof AmbiguousEffect) || !(await blockingReconcile(ctx, pass, hook))) throw err;
      reservation = await attemptOnce();
    }
  } catch (err) {
    if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect) await refused(ctx, pass, err);
    if (err instanceof BudgetExhausted) {
      pass.approver = await approverOf(ctx, pass);
      await refuseBudget(ctx, pass, err);
    }
    throw err;
  }
  pass.budgetCharges = pass.charges ?? [];
  pass.attempt = reservation.attempt;
  await afterWrite(ctx, pass, reservation, reserved);
}

/** The pass's charges as a reservation step's member (none: absent, so a store without budgets is asked nothing new). */
function chargesOf(pass: Pass): { charges?: readonly BudgetCharge[] } {
  return pass.charges ? { charges: pass.charges } : {};
}

/** The pass's charges as the trailing argument of a reservation method, or nothing. */
function chargeArg(pass: Pass): [] | [readonly BudgetCharge[]] {
  return pass.charges ? [pass.charges] : [];
}

/**
 * A reservation the budget predicate refused (spec 05 §5.1): nothing was written. ACTION_DENIED
 * names the grant, the metric and the window, never the balance, and it and the `denied` receipt
 * carry no effect key (nothing was reserved under it); the approval, if one was presented, stays
 * granted and no approval event is written.
 */
async function refuseBudget(ctx: ControlContext, pass: Pass, err: BudgetExhausted): Promise<never> {
  const { action } = pass;
  pass.effectKey = null;
  pass.evaluation = { ...(pass.evaluation ?? deny(BUDGET_EXHAUSTED)), decision: 'deny', reason: BUDGET_EXHAUSTED };
  const refusal = new BudgetExhausted(err, { actionId: action.actionId, actionName: action.name });
  note(ctx, pass, 'ACTION_DENIED', { reason: BUDGET_EXHAUSTED, grant_id: err.grantId, metric: err.metric, window: err.window });
  await recordReceipt(ctx, pass, { result: 'denied', error: refusal.message });
  throw refusal;
}

/** The ALLOW row: an approval the policy no longer needs is consumed in its own write. */
export async function consumeUnneeded(ctx: ControlContext, pass: Pass): Promise<void> {
  try {
    const approval = await ctx.store.consumeApproval(pass.approvalId as string, pass.action.actionHash);
    pass.approver = approval.approver;
    await recordEvent(ctx, pass, 'APPROVAL_CONSUMED', { approver: approval.approver, required: false });
  } catch (err) {
    ctx.logger.warn(
      `[ctrlrun] ${pass.action.name}: the presented approval ${shownId(pass.approvalId as string)} was not needed and could not be consumed: ${String(err)}`,
    );
  }
}

export async function refused(ctx: ControlContext, pass: Pass, err: DuplicateEffect | AmbiguousEffect): Promise<void> {
  note(ctx, pass, 'EFFECT_RESERVATION_REFUSED', refusalData(err));
  await recordReceipt(ctx, pass, { result: 'blocked', error: err.message });
}

/**
 * Before a human is asked: an effect key already `committed` (it happened) or `ambiguous` (nobody
 * knows) is refused now, recorded as the reservation's refusal is (`EFFECT_RESERVATION_REFUSED`, a
 * `blocked` receipt), so no request is filed that a grant could only lead to the same refusal. An
 * ambiguous record is first put to the reconcile hook, as the reservation would. The decision is
 * {@link planReservation}'s, on a read: an early check only — a key committed after it is refused
 * by the reservation at execution, which stays the guard. A key another worker holds (it may yet
 * fail) or whose lease lapsed (the reservation records that) is still asked about.
 */
export async function refuseBeforeAsking(ctx: ControlContext, pass: Pass, lease: number, hook: ReconcileHook | undefined): Promise<void> {
  if (pass.effectKey === null) return;
  let refusal = await settledRefusal(ctx, pass, lease);
  if (refusal instanceof AmbiguousEffect && (await blockingReconcile(ctx, pass, hook))) refusal = await settledRefusal(ctx, pass, lease);
  if (refusal === null) return;
  await refused(ctx, pass, refusal);
  throw refusal;
}

/** The refusal a reservation of the pass's key would meet whatever happens meanwhile, or null. */
async function settledRefusal(ctx: ControlContext, pass: Pass, lease: number): Promise<DuplicateEffect | AmbiguousEffect | null> {
  const key = pass.effectKey as string;
  const plan = planReservation(await ctx.store.getEffect(key), key, pass.action.actionId, lease, ctx.clock());
  if (plan.kind !== 'refuse') return null;
  return plan.error instanceof DuplicateEffect && plan.error.state !== 'committed' ? null : plan.error;
}

/**
 * Whether this suspension's lease may be extended (spec 02 §1.4 T61b, §3.4 T80b): not once the
 * principal's credential has expired (`IdentityError`), nor once the authority denies the action
 * (revoked, expired, narrowed: `AUTHORITY_DENIED`, then `AuthorityDenied` with its reason). The
 * refusal is returned, and the suspension is then recorded as an unknown outcome at once rather
 * than left to lapse. Observe mode enforces neither: the denial is recorded and noted as a stopper.
 */
export async function extensionRefusal(ctx: ControlContext, pass: Pass): Promise<Error | null> {
  const { action } = pass;
  if (principalExpired(ctx, action)) {
    if (pass.observation) {
      block(pass, 'principal_expired');
      return null;
    }
    return new IdentityError(
      `${action.name}: the lease is not extended: the principal ${shownId(action.principal.agent)}'s credential expired at ${action.principal.expiresAt}`,
      { reason: 'principal_expired' },
    );
  }
  if (ctx.authority === null) return null;
  const result = await ctx.authority.evaluate(action, { now: ctx.clock(), store: ctx.store, task: pass.task ?? null });
  for (const w of result.warnings) ctx.logger.warn(`[ctrlrun] ${action.name}: ${w}`);
  if (result.passed) return null;
  await recordEvent(ctx, pass, 'AUTHORITY_DENIED', authorityEventData(result));
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

/** The longest task id a call may name. */
const MAX_TASK_LENGTH = 256;

/**
 * A call's task, checked: null, or a non-empty string of at most 256 characters with none a view
 * would act on instead of showing (controls, format characters such as a bidi override or a
 * zero-width space, line separators, lone surrogates): a receipt shows it as the caller named it.
 */
export function checkTask(task: unknown): string | null {
  if (task === null || task === undefined) return null;
  if (typeof task !== 'string' || task === '' || task.length > MAX_TASK_LENGTH || /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.test(task) || !isWellFormedString(task)) {
    throw new InvalidArgument(
      `task must be a non-empty string of at most ${MAX_TASK_LENGTH} characters without control, format or separator characters, or null`,
    );
  }
  return task;
}
