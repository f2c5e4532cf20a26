/**
 * The gates the later policy keys add to the control path (spec 05 §3.2–§3.3), in the original
 * 0.12.2's order after the policy's decision: the attempt ceiling's fast path (`max_attempts`,
 * v5), the upstream pin (`upstream`, v8), the approval threshold (`approvals_required`, v6),
 * and, after the reservation, the ceiling's guarantee on the attempt number the store assigned.
 * Also the reserved names: the policy-change action and `policy:` effect keys, refused before
 * anything is written.
 *
 * What this build cannot verify fails closed, as the original fails without the same means: a
 * threshold above one with no approver identity (`approvals_unverifiable`), a pin with no
 * gateway that observed the upstream (`upstream_unverified`).
 *
 * @module
 */
import type { Action } from '../action.js';
import type { JsonObject } from '../canonical.js';
import { delegationFromRecord } from '../authority/authority.js';
import type { Grant } from '../authority/grant.js';
import { ActionDenied, EffectKeyError, InvalidArgument } from '../errors.js';
import { quotedForMessage, shownId } from '../visible.js';
import { BUDGET_UNKEYED, BUDGET_UNMEASURABLE, checkCharges, type BudgetCharge } from '../budget.js';
import { POLICY_CHANGE_ACTION, POLICY_EFFECT_PREFIX, resolveEffectTemplate } from '../policy/index.js';
import { approverOf } from './gates.js';
import { note, recordReceipt } from './evidence.js';
import { type ControlContext, type Pass, block } from './pass.js';
import { upstreamRefusal } from './upstream.js';

/** A budgeted chain on a store with no budget ledger: this build's own reason (the original always has its ledger). */
export const BUDGET_UNSUPPORTED = 'budget_unsupported';

/** The refusal reasons these gates give (the original's strings). */
export const ATTEMPT_CEILING = 'attempt_ceiling';
export const APPROVALS_UNVERIFIABLE = 'approvals_unverifiable';

/**
 * Refuses, before anything is written, what no ordinary action may do: execute the action the
 * original reserves for its policy-change flow (which this build does not have), or reserve an
 * effect key beginning `policy:`, the key a policy approval is recorded under (a commit of one
 * would mint the original's "policy approved" marker). `key` is the caller's explicit key, else
 * the one `template` renders for `action` (a template that cannot render is refused later, as
 * it always was). `args`: the action's canonical arguments when the caller already holds a copy
 * (each read of `action.canonicalArguments` parses the canonical text again).
 */
export function refuseReserved(action: Action, key: string | null, template: string | null, args: JsonObject = action.canonicalArguments): void {
  if (action.name === POLICY_CHANGE_ACTION) {
    throw new InvalidArgument(
      `${POLICY_CHANGE_ACTION} is reserved for the original's policy-change flow, which this build does not implement: it is never executed here`,
    );
  }
  let resolved = key;
  if (resolved === null && template !== null) {
    try {
      resolved = resolveEffectTemplate(template, args, action.resource);
    } catch (err) {
      if (!(err instanceof EffectKeyError || err instanceof InvalidArgument)) throw err;
    }
  }
  if (resolved !== null && resolved.startsWith(POLICY_EFFECT_PREFIX)) {
    throw new InvalidArgument(
      `${action.name}: effect key ${quotedForMessage(resolved, 80)} begins '${POLICY_EFFECT_PREFIX}', which is reserved for the policy-change flow: an ordinary action may not reserve it`,
    );
  }
}

/** Actions whose ceiling counted nothing (no effect key), warned once per Control. */
const warnedNoKey = new WeakMap<ControlContext, Set<string>>();

/** The pass's attempt ceiling, or null: none declared, or no effect key to count on (warned once). */
function ceilingOf(ctx: ControlContext, pass: Pass): number | bigint | null {
  const n = ctx.policy.action(pass.action.name)?.maxAttempts ?? null;
  if (n === null || pass.effectKey !== null) return n;
  const warned = warnedNoKey.get(ctx) ?? new Set<string>();
  warnedNoKey.set(ctx, warned);
  if (!warned.has(pass.action.name)) {
    warned.add(pass.action.name);
    ctx.logger.warn(`[ctrlrun] ${pass.action.name}: max_attempts counts attempts on an effect key, and this call has none: the ceiling counts nothing`);
  }
  return null;
}

/** Whether the pass carries a ceiling its reservation must be checked against (the reservation and the start are then two writes). */
export function hasCeiling(ctx: ControlContext, pass: Pass): boolean {
  return pass.effectKey !== null && (ctx.policy.action(pass.action.name)?.maxAttempts ?? null) !== null;
}

/** The ceiling's fast path: the attempt a `failed` record would renew to, when it is over the ceiling; else null. */
async function overCeilingAlready(ctx: ControlContext, pass: Pass): Promise<{ attempt: number; max: number | bigint } | null> {
  const max = ceilingOf(ctx, pass);
  if (max === null) return null;
  // Only a failed record: any other state goes to the reservation, which refuses or reconciles it.
  const record = await ctx.store.getEffect(pass.effectKey!);
  if (record === null || record.state !== 'failed' || !(record.attempt + 1 > max)) return null;
  return { attempt: record.attempt + 1, max };
}

function ceilingError(attempt: number, max: number | bigint): string {
  // The original's text, so that both implementations' evidence in one store reads alike.
  return `attempt ${attempt} refused: max_attempts is ${max} (SPEC-v0.7 §5)`;
}

async function refuseCeiling(ctx: ControlContext, pass: Pass, attempt: number, max: number | bigint): Promise<string> {
  const error = ceilingError(attempt, max);
  pass.attempt = attempt;
  note(ctx, pass, 'EFFECT_RESERVATION_REFUSED', { reason: ATTEMPT_CEILING, attempt, max_attempts: max });
  // The decision the policy reached stands; what stopped the attempt is the effect's history.
  await recordReceipt(ctx, pass, { result: 'blocked', error });
  return error;
}

function ceilingDenied(pass: Pass, max: number | bigint): ActionDenied {
  return new ActionDenied(ATTEMPT_CEILING, {
    actionId: pass.action.actionId,
    message: `${pass.action.name}: ${shownId(pass.effectKey!)} has had its ${max} attempt${max === 1 || max === 1n ? '' : 's'} (max_attempts): attempt ${pass.attempt} is refused and nothing ran`,
  });
}

async function refuseWith(ctx: ControlContext, pass: Pass, reason: string, message: string, data: JsonObject = {}): Promise<never> {
  const evaluation = pass.evaluation!;
  pass.evaluation = { ...evaluation, decision: 'deny', reason };
  pass.approver = await approverOf(ctx, pass);
  note(ctx, pass, 'ACTION_DENIED', { reason, ...data });
  await recordReceipt(ctx, pass, { result: 'denied', error: message });
  throw new ActionDenied(reason, { actionId: pass.action.actionId, message });
}

/** The grant that let the pass through authority and every grant above it (a delegation's chain, read from the store). */
async function decidingChain(ctx: ControlContext, pass: Pass): Promise<Grant[]> {
  const authority = ctx.authority;
  const chain: Grant[] = [];
  let id = pass.authorityGrantId ?? null;
  // The evaluation walked and checked this chain a moment ago; the bound only stops an edited store.
  for (let hops = 0; authority !== null && id !== null && hops <= authority.maxDelegationDepth + 1; hops++) {
    const root = authority.grants.get(id);
    if (root !== undefined) {
      chain.push(root);
      break;
    }
    const record = await ctx.store.getDelegation(id);
    if (record === null) break;
    const node = delegationFromRecord(record);
    chain.push(node.grant);
    id = node.parentId;
  }
  return chain;
}

/**
 * Grant `budgets` (v7, spec 05 §5.1): the charges the pass makes, one per budget on the deciding
 * grant and every grant above it (a delegation the original wrote included), set on the pass for
 * the reservation to check and write; or the refusal when they cannot be measured: a metric
 * other than `count` whose argument is absent, not an integer, negative or a boolean
 * (`budget_unmeasurable`), or a budgeted chain with no effect key to charge under
 * (`budget_unkeyed`). Grant `tasks` need nothing here: the authority walk refuses a task-bound
 * grant (`authority_task`) and a child escaping its parent's tasks.
 */
async function measureBudgets(ctx: ControlContext, pass: Pass): Promise<[string, string, JsonObject] | null> {
  if (ctx.authority === null || (pass.authorityGrantId ?? null) === null) return null;
  const chain = (await decidingChain(ctx, pass)).filter((g) => g.budgets !== null);
  if (chain.length === 0) return null;
  const charges: BudgetCharge[] = [];
  for (const grant of chain) {
    for (const b of grant.budgets!) {
      const amount = b.metric === 'count' ? 1 : metricValue(pass.args, b.metric);
      if (typeof amount === 'string') {
        const error = `${pass.action.name}: grant ${JSON.stringify(grant.id)} budgets ${JSON.stringify(b.metric)}, and the action's argument ${JSON.stringify(b.metric)} ${amount}`;
        return [BUDGET_UNMEASURABLE, error, { error }];
      }
      charges.push({ grantId: grant.id, metric: b.metric, amount, limit: b.limit, window: b.window });
    }
  }
  if (ctx.store.budgets === undefined) {
    // A store that cannot check and write charges in its reservation never lets a budgeted action through uncharged.
    const error = `${pass.action.name}: grant ${JSON.stringify(chain[0]!.id)} carries a budget (budgets:), and the store ${ctx.store.name} keeps no budget ledger, so it never lets the action through uncharged`;
    return [BUDGET_UNSUPPORTED, error, {}];
  }
  if (pass.effectKey === null) {
    const error = `${pass.action.name}: grant ${JSON.stringify(chain[0]!.id)} carries a budget (budgets:), and a charge is recorded under an effect key: this call has none (set effect: on the action or pass an effectKey)`;
    return [BUDGET_UNKEYED, error, {}];
  }
  pass.charges = checkCharges(charges);
  return null;
}

/** The action's value for budget metric `metric`: a non-negative integer, or why it is not one. */
function metricValue(args: JsonObject, metric: string): number | bigint | string {
  if (!Object.prototype.hasOwnProperty.call(args, metric)) return 'is absent';
  const v = args[metric];
  if (typeof v === 'boolean') return 'is a boolean, not an amount';
  if (typeof v === 'bigint') return v >= 0n ? v : 'is negative';
  if (typeof v !== 'number' || !Number.isInteger(v)) return 'is not an integer';
  return v >= 0 ? v : 'is negative';
}

function thresholdMessage(pass: Pass, n: number | bigint): string {
  return `${pass.action.name} needs ${n} distinct approvers (approvals_required), and this Control has no approver identity (the approvers option), so no count of answers could be trusted: denied before anyone is asked`;
}

/**
 * After the policy allowed or asked for approval, in enforce mode, in the original's order:
 * the ceiling's fast path (a `failed` record already at the ceiling: refused with nothing
 * reserved, no request filed and a presented approval left unspent), the upstream pin, the
 * measurability of a grant's budgets (the charges are set on the pass for the reservation), and,
 * where an approval is needed, a threshold above one. Each refusal writes its evidence and throws.
 */
export async function refuseAfterPolicy(ctx: ControlContext, pass: Pass, needsApproval: boolean): Promise<void> {
  const over = await overCeilingAlready(ctx, pass);
  if (over !== null) {
    pass.approver = await approverOf(ctx, pass);
    await refuseCeiling(ctx, pass, over.attempt, over.max);
    throw ceilingDenied(pass, over.max);
  }
  const entry = ctx.policy.action(pass.action.name);
  const pinned = entry?.upstream ? upstreamRefusal(pass.action.name, entry.upstream, pass.upstream ?? null) : null;
  if (pinned !== null) await refuseWith(ctx, pass, pinned.reason, pinned.message);
  const unmeasured = await measureBudgets(ctx, pass);
  if (unmeasured !== null) await refuseWith(ctx, pass, ...unmeasured);
  if (needsApproval && entry !== null && entry.approvalsRequired > 1 && ctx.approverIdentity === null)
    await refuseWith(ctx, pass, APPROVALS_UNVERIFIABLE, thresholdMessage(pass, entry.approvalsRequired));
}

/**
 * The ceiling's guarantee, after the reservation and before the start: the attempt number the
 * store assigned is over the ceiling. The refusal is recorded first (the event, then a `blocked`
 * receipt), then the record is released as `failed` (started, without EXECUTION_STARTED, since
 * nothing started, then failed with the ceiling's text); a release the store refuses raises the
 * store's error instead of the denial, with the evidence already written.
 */
export async function checkCeiling(ctx: ControlContext, pass: Pass): Promise<void> {
  const max = pass.effectKey === null ? null : ceilingOf(ctx, pass);
  if (max === null || !(pass.attempt > max)) return;
  const error = await refuseCeiling(ctx, pass, pass.attempt, max);
  const key = pass.effectKey!;
  await ctx.store.beginExecution(key, pass.action.actionId);
  await ctx.store.failEffect(key, pass.action.actionId, error);
  throw ceilingDenied(pass, max);
}

/**
 * Observe mode, after the policy: notes each of these gates enforce mode would have met, in the
 * same order, as `would_have.blocked_reason` (the first one stays); nothing is refused.
 */
export async function observeAfterPolicy(ctx: ControlContext, pass: Pass): Promise<void> {
  if ((await overCeilingAlready(ctx, pass)) !== null) block(pass, ATTEMPT_CEILING);
  const entry = ctx.policy.action(pass.action.name);
  const pinned = entry?.upstream ? upstreamRefusal(pass.action.name, entry.upstream, pass.upstream ?? null) : null;
  if (pinned !== null) block(pass, pinned.reason);
  const unmeasured = await measureBudgets(ctx, pass);
  if (unmeasured !== null) block(pass, unmeasured[0]);
  if (pass.evaluation?.decision === 'approve' && entry !== null && entry.approvalsRequired > 1 && ctx.approverIdentity === null)
    block(pass, APPROVALS_UNVERIFIABLE);
}

/** Observe mode, after the reservation: an assigned attempt over the ceiling is noted; the action still runs. */
export function observeCeiling(ctx: ControlContext, pass: Pass): void {
  const max = pass.effectKey === null ? null : ceilingOf(ctx, pass);
  if (max !== null && pass.attempt > max) block(pass, ATTEMPT_CEILING);
}
