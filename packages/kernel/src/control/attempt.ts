/**
 * The plan of one action, in order: what `Control.execute` decides, writes and runs, and when
 * (docs/how-it-works.md draws it). For an allowed action with an effect key:
 *
 * 1. Pre-checks (nothing written): the executor, the environment, the options.
 * 2. ACTION_PROPOSED is drafted, not written ({@link note}); so are AUTHORITY_RESOLVED and
 *    POLICY_EVALUATED as the gates pass (`gates.ts`). Reads only: delegations, the policy.
 * 3. Transaction 1, the reservation step ({@link reserveStep} / {@link consumeAndReserve}, the
 *    store's `reserveForExecution`): the drafted events, the approval consumed (if one was
 *    needed), the effect row written `executing`, EFFECT_RESERVED and EXECUTION_STARTED — all or
 *    nothing. A refusal writes none of it; its drafted events then go with its receipt.
 * 4. The executor runs (`outcome.ts`).
 * 5. Transaction 2, the outcome: the compare-and-set to `committed` (or `failed`, `ambiguous`),
 *    its EXECUTION_* event and the chained receipt. If only the receipt part fails, the outcome
 *    is written without it and the receipt alone after it; a failure there raises (T170).
 *
 * Anything that throws before a drafted event is written writes it on the way out
 * ({@link flushAfterThrow}), so the events of an action are always stored, and in order.
 *
 * @module
 */
import type { Action } from '../action.js';
import { shownId } from '../visible.js';
import { authorityEventData } from '../authority/authority.js';
import { ActionDenied, AmbiguousEffect, ApprovalRequired, DuplicateEffect, EffectKeyError, IdentityError, InvalidArgument } from '../errors.js';
import type { EffectRecord } from '../model.js';
import { explainDecision, resolveEffectTemplate } from '../policy/index.js';
import { checkDuration, evidenceTime, parseTime, storedTime } from '../time.js';
import {
  checkEnvironment,
  principalExpired,
  approverOf,
  refuseAuthority,
  consumeAndReserve,
  reserveStep,
  consumeUnneeded,
  refused,
  refuseBeforeAsking,
} from './gates.js';
import { runObserved } from './observe.js';
import { checkCeiling, hasCeiling, refuseAfterPolicy, refuseReserved } from './entry-gates.js';
import { runExecutor } from './outcome.js';
import { note, recordEvent, flush, trailing, afterWrite, recordReceipt } from './evidence.js';
import { openApproval } from './answers.js';
import { checkProvider, refuseUnrecorded, requestPins } from './presented.js';
import { checkObservation } from './upstream.js';
import { checkTask } from './gates.js';
import { editOfGrant, followEdit, unusedEditOf } from './edit.js';
import { type ControlContext, type Pass, type Decided, expiryOf, deny, decidedFromJson, describeError, started } from './pass.js';
import type { Executor, ExecuteOptions, ExecuteResult } from './types.js';

/** `Control.executeWithReceipt`: runs `action` through the control path; resolves to the executor's value and the receipt. */
export async function attempt<T>(ctx: ControlContext, proposed: Action, executor: Executor<T>, options: ExecuteOptions = {}): Promise<ExecuteResult<T>> {
  // Pre-checks: these write nothing.
  if (typeof executor !== 'function') throw new InvalidArgument('execute needs an executor function');
  checkEnvironment(ctx, proposed);
  // An expiry no clock can compare against is the credential's fault, refused before any evidence.
  expiryOf(proposed.principal, proposed.name);
  const lease = options.lease === undefined ? ctx.lease : checkDuration(options.lease, 'lease');
  if (options.reconcile !== undefined && typeof options.reconcile !== 'function') throw new InvalidArgument('reconcile must be a function');
  if (options.reconcileEagerly && options.reconcile === undefined) throw new InvalidArgument('reconcileEagerly needs a reconcile hook');
  let effectKey: string | null = null;
  if (options.effectKey !== undefined && options.effectKey !== null) {
    if (typeof options.effectKey !== 'string' || options.effectKey === '') throw new InvalidArgument('effectKey must be null or a non-empty string');
    effectKey = options.effectKey;
  }
  const presented = options.approvalId ?? null;
  if (presented !== null && (typeof presented !== 'string' || presented === '')) throw new InvalidArgument('approvalId must be a non-empty string');
  // A request a human answered with an edit runs the edited action, presenting the edited grant.
  const followed = presented === null ? null : await followEdit(ctx, proposed, presented);
  const action = followed?.action ?? proposed;
  const approvalId = followed?.approvalId ?? presented;
  const given = options.effectTemplate ?? ctx.policy.action(action.name)?.effect ?? null;
  let template = options.effectKey === undefined ? given : null;
  if (effectKey !== null && action !== proposed && given !== null && templateKeyOf(given, proposed) === effectKey) {
    // The caller's key is the template's key for the proposed arguments: kept for the edit, it would
    // reserve the proposal's key (which a later run of the proposal would find taken) and leave the
    // edit's own key free. Rendered again for the edited action instead.
    effectKey = null;
    template = given;
  }
  // Parsed once, for the reserved-name check, the decision, the effect key and the receipt.
  const args = action.canonicalArguments;
  refuseReserved(action, effectKey, template, args);

  const pass: Pass = {
    action,
    args,
    startedAt: evidenceTime(ctx.clock()),
    effectKey,
    approvalId,
    approver: null,
    attempt: 1,
    evaluation: null,
    hookCalls: 0,
    observation: ctx.observing ? { decision: 'allow', reason: '', blocked: null } : null,
    held: false,
    pending: [],
    policyHash: ctx.policyHash,
    policyVersion: ctx.policy.version,
    edit: followed?.edit ?? null,
    followsEdit: approvalId !== presented,
    preconditions: checkProvider(options.preconditions),
    upstream: checkObservation(options.upstream),
    task: checkTask(options.task),
  };
  note(ctx, pass, 'ACTION_PROPOSED', { action_hash: action.actionHash });
  try {
    return await decideAndRun(ctx, pass, executor, options, lease, template);
  } catch (err) {
    await flushAfterThrow(ctx, pass);
    throw err;
  }
}

/** The key `template` renders for `action`, or null when it cannot. */
function templateKeyOf(template: string, action: Action): string | null {
  try {
    return resolveEffectTemplate(template, action.canonicalArguments, action.resource);
  } catch (err) {
    if (err instanceof EffectKeyError || err instanceof InvalidArgument) return null;
    throw err;
  }
}

/** Whatever refused or failed before the pass's next write, its pending events go on record. */
export async function flushAfterThrow(ctx: ControlContext, pass: Pass): Promise<void> {
  try {
    await flush(ctx, pass);
  } catch (failure) {
    // The first failure is the one the caller must see.
    ctx.logger.warn(`[ctrlrun] ${pass.action.name}: ${pass.pending.map((d) => d.type).join(', ')} could not be stored: ${describeError(failure)}`);
  }
}

/** The rest of {@link executeWithReceipt}, once the proposal is drafted. */
export async function decideAndRun<T>(
  ctx: ControlContext,
  pass: Pass,
  executor: Executor<T>,
  options: ExecuteOptions,
  lease: number,
  template: string | null,
): Promise<ExecuteResult<T>> {
  const { action } = pass;
  const approvalId = pass.approvalId;

  if (template !== null) {
    try {
      pass.effectKey = resolveEffectTemplate(template, pass.args, action.resource);
    } catch (err) {
      if (!(err instanceof EffectKeyError)) throw err;
      note(ctx, pass, 'ACTION_DENIED', { reason: 'effect_key_error', effect: template, error: err.message });
      await recordReceipt(ctx, pass, { decision: 'deny', reason: 'effect_key_error', result: 'denied', error: err.message });
      throw err;
    }
  }

  if (principalExpired(ctx, action)) {
    pass.evaluation = deny('principal_expired');
    // Observe mode records what enforce mode would have reached, and enforce stops here.
    if (pass.observation) return runObserved(ctx, pass, executor, options, lease);
    note(ctx, pass, 'ACTION_DENIED', { reason: 'principal_expired' });
    await recordReceipt(ctx, pass, { result: 'denied', error: null });
    throw new IdentityError(`${action.name}: the principal ${shownId(action.principal.agent)}'s credential expired at ${action.principal.expiresAt}`, {
      reason: 'principal_expired',
    });
  }

  if (ctx.authority !== null) {
    const result = await ctx.authority.evaluate(action, { now: ctx.clock(), store: ctx.store, task: pass.task ?? null });
    for (const w of result.warnings) ctx.logger.warn(`[ctrlrun] ${action.name}: ${w}`);
    if (!result.passed) {
      // Authority denies before policy is consulted: no POLICY_EVALUATED, no approval request.
      pass.evaluation = deny(result.reason);
      note(ctx, pass, 'AUTHORITY_DENIED', authorityEventData(result));
      if (pass.observation) return runObserved(ctx, pass, executor, options, lease);
      await refuseAuthority(ctx, pass, result);
    }
    note(ctx, pass, 'AUTHORITY_RESOLVED', authorityEventData(result));
    // From here on the action is through authority: its receipt names the grant that decided it.
    pass.authorityGrantId = result.grantId;
  }

  const evaluation = ctx.policy.evaluate(action.name, pass.args);
  for (const w of evaluation.warnings) ctx.logger.warn(`[ctrlrun] ${action.name}: ${w}`);
  pass.evaluation = evaluation;
  note(ctx, pass, 'POLICY_EVALUATED', { decision: evaluation.decision, reason: evaluation.reason });
  if (pass.observation) return runObserved(ctx, pass, executor, options, lease);

  if (evaluation.decision === 'deny') {
    pass.approver = await approverOf(ctx, pass);
    note(ctx, pass, 'ACTION_DENIED', { reason: evaluation.reason });
    await recordReceipt(ctx, pass, { result: 'denied', error: null });
    // The sentence every surface passes on (protect, the worker, the MCP gateway, the adapters): the rule that decided, not its index alone.
    throw new ActionDenied(evaluation.reason, { actionId: action.actionId, message: explainDecision(ctx.policy, action.name, pass.args) });
  }

  // The reservation step in one transaction (approval, reservation, start) where the store can;
  // an approval the policy no longer needs keeps its own write, between reservation and start.
  // Run in place of a proposal a human edited: the edited grant is consumed, whatever the decision.
  const consumeGrant = evaluation.decision === 'approve' || pass.followsEdit === true;
  await refuseAfterPolicy(ctx, pass, consumeGrant);
  // An attempt ceiling is checked between the reservation and the start, so they are two writes.
  const merged = pass.effectKey !== null && ctx.store.reserveForExecution !== undefined && !(!consumeGrant && approvalId !== null) && !hasCeiling(ctx, pass);
  if (consumeGrant) {
    if (approvalId === null) {
      // One request per action: asking again while a request for this hash is open (pending,
      // or granted and not yet used) — a retry, a re-run graph node — gets that request, not
      // a second one that nobody answers.
      const open = await openApproval(ctx, action);
      if (open !== null) {
        const requestId = open.request.requestId;
        pass.approvalId = requestId;
        const message =
          open.status === 'granted'
            ? `${action.name}: approval request ${requestId} is already granted for this action; present it to run`
            : `${action.name} needs a human's approval: request ${requestId} (already pending)`;
        throw new ApprovalRequired(requestId, { actionId: action.actionId, message });
      }
      // Its request answered with an edit whose grant is unused: that request (presented, it runs the edit).
      const edited = await unusedEditOf(ctx, action);
      if (edited !== null) {
        pass.approvalId = edited.proposed;
        throw new ApprovalRequired(edited.proposed, {
          actionId: action.actionId,
          message: `${action.name}: approval request ${edited.proposed} was answered with edited arguments (granted as ${edited.approved}); present ${edited.proposed} to run the edited action`,
        });
      }
      // Nobody is asked about an effect that already happened, or that nobody can know happened.
      await refuseBeforeAsking(ctx, pass, lease, options.reconcile);
      // What the request pins (spec 05 §4.2): the world's fingerprint, the approver roles, the threshold.
      const pins = await requestPins(ctx, pass);
      const now = ctx.clock();
      const requestId = ctx.ids('apr');
      const expiresAt = storedTime(new Date(now.getTime() + ctx.approvalTtl));
      await ctx.store.putApprovalRequest({
        requestId,
        actionHash: action.actionHash,
        action,
        createdAt: storedTime(now),
        expiresAt,
        policyHash: ctx.policyHash,
        ...pins,
      });
      pass.approvalId = requestId;
      await refuseUnrecorded(ctx, pass, pins);
      await recordEvent(ctx, pass, 'APPROVAL_REQUESTED', { action_hash: action.actionHash, expires_at: evidenceTime(parseTime(expiresAt)) });
      throw new ApprovalRequired(requestId, { actionId: action.actionId, message: `${action.name} needs a human's approval: request ${requestId}` });
    }
    await consumeAndReserve(ctx, pass, lease, options.reconcile, merged);
  } else {
    if (pass.effectKey !== null) await reserveStep(ctx, pass, lease, options.reconcile, merged);
    if (approvalId !== null) await consumeUnneeded(ctx, pass);
  }
  await checkCeiling(ctx, pass);

  if (merged) {
    pass.held = true;
  } else if (pass.effectKey !== null) {
    // EXECUTION_STARTED is written in the transition's own transaction, and only if it happened.
    const begun = trailing(ctx, pass, () => [started(pass)]);
    let record: EffectRecord;
    try {
      record = await ctx.store.beginExecution(pass.effectKey, action.actionId, begun);
    } catch (err) {
      if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect) {
        await refused(ctx, pass, err);
      }
      throw err;
    }
    pass.held = true;
    await afterWrite(ctx, pass, record, begun);
  } else {
    await recordEvent(ctx, pass, ...started(pass));
  }
  return runExecutor(ctx, pass, executor, options);
}

/** `Control.resumeWithReceipt`: the resumption of a suspended execution (see `Control.resume`). */
export async function resumeAttempt<T>(
  ctx: ControlContext,
  continuation: string,
  executor: Executor<T>,
  options: Pick<ExecuteOptions, 'reconcile' | 'reconcileEagerly'> = {},
): Promise<ExecuteResult<T>> {
  if (typeof executor !== 'function') throw new InvalidArgument('resume needs an executor function');
  if (typeof continuation !== 'string' || continuation === '') throw new InvalidArgument('continuation must be a non-empty string');
  if (options.reconcile !== undefined && typeof options.reconcile !== 'function') throw new InvalidArgument('reconcile must be a function');
  if (options.reconcileEagerly && options.reconcile === undefined) throw new InvalidArgument('reconcileEagerly needs a reconcile hook');
  const taken = await ctx.store.takeContinuation(continuation, { environment: ctx.environment });
  const { action, effectKey, record, rounds } = taken;
  // A store that ignored the environment: taken, but never run by the wrong deployment.
  checkEnvironment(ctx, action);
  // The decision that let the action run stands, as the first attempt recorded it.
  const decided = await decidedBefore(ctx, action, effectKey, rounds);
  const task = await startedTask(ctx, action, effectKey);
  const pass: Pass = {
    action,
    args: action.canonicalArguments,
    startedAt: evidenceTime(ctx.clock()),
    effectKey,
    approvalId: decided.approvalId,
    approver: decided.approver,
    attempt: record.attempt,
    evaluation: decided.evaluation,
    hookCalls: 0,
    observation: decided.observation,
    held: true,
    pending: [],
    policyHash: decided.policyHash,
    policyVersion: decided.policyVersion,
    // Run under an edited grant: the resumed receipt records the edit as the first attempt's would.
    edit: await editOfGrant(ctx, decided.approvalId, action),
    task,
  };
  if (ctx.authority !== null) {
    // Recorded, not decided: this round runs either way; the next extension is what a denial refuses.
    const result = await ctx.authority.evaluate(action, { now: ctx.clock(), store: ctx.store, task });
    for (const w of result.warnings) ctx.logger.warn(`[ctrlrun] ${action.name}: ${w}`);
    await recordEvent(ctx, pass, result.passed ? 'AUTHORITY_RESOLVED' : 'AUTHORITY_DENIED', authorityEventData(result));
    // The resumed leg's receipt names the grant that passes it now (none when it no longer does).
    if (result.passed) pass.authorityGrantId = result.grantId;
  }
  // The resumed leg's receipt carries what this attempt charged, read back from the ledger.
  const ledger = ctx.store.budgets?.();
  if (ledger !== undefined)
    pass.budgetCharges = (await ledger.consumptions({ effectKey }))
      .filter((c) => c.attempt === record.attempt)
      .map((c) => ({
        grantId: c.grantId,
        metric: c.metric,
        amount: c.amount <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(c.amount) : c.amount,
        limit: 0,
        window: 1,
      }));
  await recordEvent(ctx, pass, 'EXECUTION_RESUMED', { round: rounds });
  try {
    return await runExecutor(ctx, pass, executor, options);
  } catch (err) {
    await flushAfterThrow(ctx, pass);
    throw err;
  }
}

/**
 * The task the suspended attempt ran for, read back from its `EXECUTION_STARTED` (`{task, hop}`),
 * so a resumed leg is evaluated and receipted for the same task. Null when none was named, and
 * for a start written before tasks existed (`{}`) or not found.
 */
async function startedTask(ctx: ControlContext, action: Action, effectKey: string): Promise<string | null> {
  const event = ctx.store.lastEvent
    ? await ctx.store.lastEvent(action.actionId, 'EXECUTION_STARTED')
    : ((await ctx.store.events()).filter((e) => e.actionId === action.actionId && e.type === 'EXECUTION_STARTED').at(-1) ?? null);
  if (event === null || event.effectKey !== effectKey) return null;
  const task = event.data['task'];
  return typeof task === 'string' ? task : null;
}

/**
 * What the suspended attempt was decided and approved with, read back from its
 * `EXECUTION_SUSPENDED` event (round `rounds`). A suspension recorded without it (an older
 * build) falls back to the policy's answer now and the event's approval, whose approver is
 * named only if the approval was requested for this action.
 */
export async function decidedBefore(ctx: ControlContext, action: Action, effectKey: string, rounds: number): Promise<Decided> {
  const event = ctx.store.lastEvent
    ? await ctx.store.lastEvent(action.actionId, 'EXECUTION_SUSPENDED')
    : ((await ctx.store.events()).filter((e) => e.actionId === action.actionId && e.type === 'EXECUTION_SUSPENDED').at(-1) ?? null);
  const held = event !== null && event.effectKey === effectKey && event.data['round'] === rounds ? event : null;
  const snapshot = held === null ? null : decidedFromJson(held.data['decided']);
  if (snapshot !== null) return { ...snapshot, approvalId: held!.approvalId };
  ctx.logger.warn(
    `[ctrlrun] ${action.name}: the suspension of ${shownId(effectKey)} (round ${rounds}) recorded no decision; the receipt names the policy's answer now`,
  );
  const approvalId = held?.approvalId ?? null;
  return {
    evaluation: ctx.policy.evaluate(action.name, action.canonicalArguments),
    approvalId,
    approver: await approverOf(ctx, { approvalId, action }),
    observation: null,
    policyHash: ctx.policyHash,
    policyVersion: ctx.policy.version,
  };
}
