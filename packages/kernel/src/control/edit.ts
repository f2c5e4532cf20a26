/**
 * Edit-then-approve: a human answering an approval request may change the action's arguments.
 * The edited action is built and hashed as any action is (`createAction`), decided again by
 * authority and policy (an edit never lifts a deny), and granted in one store write that denies
 * the original; the grant binds to the edited hash. The agent's own call of the original action,
 * presenting the original request, then runs the edited one (see {@link followEdit}).
 *
 * @module
 */
import { createAction, type Action } from '../action.js';
import { intakeAction, IntakeRefusal } from '../intake.js';
import { isPlainObject, type JsonObject } from '../canonical.js';
import { checkActor } from '../effects.js';
import { ActionDenied, EffectKeyError, InvalidArgument } from '../errors.js';
import { quotedForMessage } from '../visible.js';
import type { Approval, EventDraft, EventRecord } from '../model.js';
import { explainDecision, resolveEffectTemplate } from '../policy/index.js';
import type { ApprovalEditResult } from '../store/state-store.js';
import { evidenceTime, parseTime } from '../time.js';
import { checkAnswerable } from '../approvals.js';
import { toSinks } from './evidence.js';
import { evaluate } from './gates.js';
import { verifiedAnswer, type VerifiedPrincipal } from './presented.js';
import type { ControlContext } from './pass.js';
import { grantApproval, optionalText } from './answers.js';

/** What a human changed when approving: found from either request id by {@link approvalEdit}. */
export interface ApprovalEdit {
  /** The request the agent filed (now `denied`, answered by the edit). */
  readonly proposed: string;
  /** The request of the edited action (written `granted`); present this id, or the proposed one. */
  readonly approved: string;
  /** Who edited and approved. */
  readonly editor: string;
  /** The action hash the agent proposed. */
  readonly proposedHash: string;
  /** The action hash the grant is bound to. */
  readonly approvedHash: string;
  /** The proposed canonical arguments. */
  readonly proposedArguments: JsonObject;
  /** The approved (edited) canonical arguments. */
  readonly approvedArguments: JsonObject;
}

/** Options of `Control.grantApproval`. */
export interface GrantOptions {
  /** Who answers (recorded on the request and its events). */
  approver: string;
  /** The surface the answer came through (`cli`, `worker`, `inbox`, …), recorded on the events. */
  via?: string;
  /** Approve edited arguments instead of the proposed ones (see `Control.grantApproval`). */
  edit?: { arguments: JsonObject };
  /**
   * The principal a resolving surface verified as the one answering (operator credentials, a JWT,
   * an inbox session, a configured CLI identity): recorded on the request as a verified approver,
   * with the controls whose `approver_role` it holds. Only a verified answer counts toward
   * `approvals_required` above one. Pass only a principal the surface authenticated.
   */
  verified?: VerifiedPrincipal | null;
}

/** The edited action for request `action`'s proposal: same name, principal and environment, new arguments, a fresh id. */
function editedAction(ctx: ControlContext, original: Action, args: unknown): Action {
  const template = ctx.policy.action(original.name)?.resource ?? null;
  let edited: Action;
  try {
    // Through the one intake, as the proposal came in. Where no template derives it, the
    // proposal's resource was its caller's, kept here only for the proposed arguments (below).
    edited = intakeAction(
      { policy: ctx.policy, environment: original.environment, ids: ctx.ids },
      { name: original.name, arguments: args, resource: template === null ? original.resource : null, claimedBy: 'application' },
      original.principal,
    );
  } catch (err) {
    if (err instanceof IntakeRefusal && err.reason === 'not_an_object')
      throw new InvalidArgument('edit.arguments must be a plain JSON object of the edited arguments');
    if (err instanceof IntakeRefusal && err.reason === 'derived_argument')
      throw new InvalidArgument('edit.arguments may not name data_scope: it is derived by the policy');
    throw err;
  }
  if (template === null && original.resource !== null) {
    // The proposed arguments again: a plain grant (the caller's {@link editApproval} compares hashes).
    if (edited.actionHash === original.actionHash) return edited;
    // The caller derived it (protect's own `resource`, a hand-built action) from the proposed
    // arguments: kept for other arguments it would name another resource in the evidence, and an
    // effect key rendered from `{resource}` would reserve the proposal's key for the edit.
    throw new InvalidArgument(
      `the resource ${quotedForMessage(original.resource ?? '', 200)} of ${original.name} was given by its caller, not derived by a 'resource:' template in the policy, so it cannot be derived for edited arguments; ` +
        `grant or deny the request as proposed, or add a 'resource:' template to the policy's entry for ${original.name}`,
    );
  }
  // Arguments the policy's effect template cannot render could never run (the run is refused
  // with effect_key_error): refused now, before the proposal is answered.
  const effect = ctx.policy.action(original.name)?.effect ?? null;
  if (effect !== null) {
    try {
      resolveEffectTemplate(effect, edited.canonicalArguments, edited.resource);
    } catch (err) {
      if (!(err instanceof EffectKeyError)) throw err;
      throw new InvalidArgument(`the edited arguments cannot make ${original.name}'s effect key (${effect}): ${err.message}; nothing was written`);
    }
  }
  return edited;
}

/**
 * `Control.grantApproval` with `edit`: checks the request as a grant does (unknown, answered,
 * expired), builds the edited action, decides it again (a deny is an `ActionDenied` with the
 * rule's sentence, and nothing is written), then writes the edit in one transaction with its two
 * events. Arguments equal to the proposed ones (same hash) are a plain grant.
 */
export async function editApproval(ctx: ControlContext, requestId: string, options: GrantOptions): Promise<Approval> {
  const approver = checkActor(options?.approver, 'approver');
  const via = optionalText(options?.via, 'via');
  const edit = options.edit;
  if (!isPlainObject(edit)) throw new InvalidArgument('edit must be { arguments: { … } }');
  // Only the arguments are edited: a principal, environment, resource or name given here would be
  // silently ignored, and the caller would believe it had changed who or what was approved.
  const stray = Object.keys(edit).find((k) => k !== 'arguments');
  if (stray !== undefined)
    throw new InvalidArgument(
      `edit takes only arguments, not ${JSON.stringify(stray)}: the name, principal, environment and resource stay the proposal's (the resource is derived again from the policy)`,
    );
  if (typeof requestId !== 'string' || requestId === '') throw new InvalidArgument('approval_id must be a non-empty string');
  const record = await ctx.store.getApproval(requestId);
  const plan = checkAnswerable(record, requestId, ctx.clock());
  // An expired request is refused as a grant refuses it (the store writes `expired` then).
  if (plan.kind === 'expire') return grantApproval(ctx, requestId, options);
  const original = plan.record.request.action;
  const edited = editedAction(ctx, original, (edit as { arguments?: unknown }).arguments);
  if (edited.actionHash === original.actionHash) return grantApproval(ctx, requestId, options);
  const write = ctx.store.editApproval;
  if (write === undefined)
    throw new InvalidArgument(`the ${ctx.store.name} store cannot record an edited approval; grant or deny request ${requestId} as proposed`);

  const evaluation = await evaluate(ctx, edited);
  for (const w of evaluation.warnings) ctx.logger.warn(`[ctrlrun] ${edited.name}: ${w}`);
  if (evaluation.decision === 'deny') {
    const policyDenies = ctx.policy.evaluate(edited.name, edited.canonicalArguments);
    // An expired credential is not a deny an edit could lift: no edit of this request can run.
    const expired = evaluation.reason === 'principal_expired';
    const why = expired
      ? `the proposing principal's credential expired (${original.principal.expiresAt ?? 'its expires_at'}), so no edit of this request can run; deny it`
      : policyDenies.decision === 'deny' && policyDenies.reason === evaluation.reason
        ? explainDecision(ctx.policy, edited.name, edited.canonicalArguments)
        : `denied (${evaluation.reason})`;
    throw new ActionDenied(evaluation.reason, {
      actionId: edited.actionId,
      message: `the edit of approval request ${requestId} is refused: ${why}${expired ? '' : '; an edit never lifts a deny'}, and the request stays pending`,
    });
  }

  const editedRequestId = ctx.ids('apr');
  const proposedArguments = original.canonicalArguments;
  const approvedArguments = edited.canonicalArguments;
  const draft = (type: EventDraft['type'], approvalId: string, data: JsonObject): EventDraft => ({
    ts: evidenceTime(ctx.clock()),
    type,
    actionId: null,
    effectKey: null,
    approvalId,
    data,
  });
  const drafts = (r: ApprovalEditResult): EventDraft[] => [
    draft('APPROVAL_DENIED', requestId, { approver, edited_to: editedRequestId, ...via }),
    draft('APPROVAL_GRANTED', editedRequestId, {
      approver,
      action_hash: r.approved.actionHash,
      edited_from: requestId,
      proposed_hash: original.actionHash,
      proposed_arguments: proposedArguments,
      approved_arguments: approvedArguments,
      ...via,
    }),
  ];
  const events: { drafts: typeof drafts; stored?: EventRecord[] } = { drafts };
  const verified = options.verified === undefined || options.verified === null ? null : verifiedAnswer(ctx.policy, ctx.approverIdentity, options.verified);
  const result = await write.call(ctx.store, { requestId, editedRequestId, action: edited, approver, policyHash: ctx.policyHash, verified }, events);
  if (events.stored === undefined) {
    for (const d of drafts(result)) await toSinks(ctx, await ctx.store.appendEvent(d));
  } else {
    for (const event of events.stored) await toSinks(ctx, event);
  }
  return result.approved;
}

/** The newest event of `type` on request `approvalId` (the store's read, else a filter of every event). */
async function approvalEvent(ctx: ControlContext, approvalId: string, type: 'APPROVAL_GRANTED' | 'APPROVAL_DENIED'): Promise<EventRecord | null> {
  if (ctx.store.lastApprovalEvent !== undefined) return ctx.store.lastApprovalEvent(approvalId, type);
  return (await ctx.store.events()).filter((e) => e.approvalId === approvalId && e.type === type).at(-1) ?? null;
}

/** The edit an `APPROVAL_GRANTED` event of an edited request records, or null. */
function editFromEvent(event: EventRecord | null): ApprovalEdit | null {
  if (event === null || event.approvalId === null) return null;
  const d = event.data;
  const text = (k: string): string | null => (Object.prototype.hasOwnProperty.call(d, k) && typeof d[k] === 'string' ? (d[k] as string) : null);
  const [proposed, editor, approvedHash, proposedHash] = [text('edited_from'), text('approver'), text('action_hash'), text('proposed_hash')];
  const proposedArguments = d['proposed_arguments'];
  const approvedArguments = d['approved_arguments'];
  if (proposed === null || editor === null || approvedHash === null || proposedHash === null) return null;
  if (!isPlainObject(proposedArguments) || !isPlainObject(approvedArguments)) return null;
  return {
    proposed,
    approved: event.approvalId,
    editor,
    proposedHash,
    approvedHash,
    proposedArguments: proposedArguments as JsonObject,
    approvedArguments: approvedArguments as JsonObject,
  };
}

/**
 * The edit that answered request `requestId` — whether it names the proposed request (answered
 * `denied` by the edit) or the edited one (`granted`) — or null when it was not edited. Reads only.
 */
export async function approvalEdit(ctx: ControlContext, requestId: string): Promise<ApprovalEdit | null> {
  if (typeof requestId !== 'string' || requestId === '') throw new InvalidArgument('approval_id must be a non-empty string');
  const granted = editFromEvent(await approvalEvent(ctx, requestId, 'APPROVAL_GRANTED'));
  if (granted !== null) return granted;
  const denied = await approvalEvent(ctx, requestId, 'APPROVAL_DENIED');
  const to = denied?.data['edited_to'];
  if (typeof to !== 'string' || to === requestId) return null;
  const edit = editFromEvent(await approvalEvent(ctx, to, 'APPROVAL_GRANTED'));
  return edit !== null && edit.proposed === requestId ? edit : null;
}

/**
 * What an execution presenting `approvalId` for `action` runs. When the request was answered by
 * an edit and the action is the one proposed, the edited action (the caller's principal, a fresh
 * action id, the edited arguments and resource) presenting the edited request; when the request
 * is the edited one and the action is the approved one, the same action with its edit. Otherwise
 * the action as given, with no edit. Reads only; the grant is consumed by the control path.
 */
export async function followEdit(
  ctx: ControlContext,
  action: Action,
  approvalId: string,
): Promise<{ action: Action; approvalId: string; edit: ApprovalEdit | null }> {
  const unchanged = { action, approvalId, edit: null };
  const record = await ctx.store.getApproval(approvalId);
  if (record === null || record.request.actionHash !== action.actionHash) return unchanged;
  if (record.status === 'granted') {
    // An edited request is written granted at its creation: any other grant is not an edit, and
    // the presented approval costs no read of the events.
    if (record.grantedAt !== record.request.createdAt) return unchanged;
    return { action, approvalId, edit: grantEdit(editFromEvent(await approvalEvent(ctx, approvalId, 'APPROVAL_GRANTED')), approvalId, action.actionHash) };
  }
  if (record.status !== 'denied') return unchanged;
  const edit = await approvalEdit(ctx, approvalId);
  if (edit === null || edit.proposed !== approvalId || edit.proposedHash !== action.actionHash) return unchanged;
  const approved = await ctx.store.getApproval(edit.approved);
  if (approved === null || approved.request.actionHash !== edit.approvedHash) return unchanged;
  const stored = approved.request.action;
  const run = createAction(
    { name: stored.name, arguments: stored.canonicalArguments, principal: action.principal, resource: stored.resource, environment: stored.environment },
    { ids: ctx.ids },
  );
  // The proposal's hash matched, so the principal is the one the edit was decided for.
  if (run.actionHash !== edit.approvedHash) return unchanged;
  return { action: run, approvalId: edit.approved, edit };
}

/**
 * The edit that answered `action`'s newest denied, unexpired request, while the edited grant is
 * still unused (granted, unexpired) — so that asking again for the proposal names that request
 * rather than filing a second one nobody answers — or null. Reads only.
 */
export async function unusedEditOf(ctx: ControlContext, action: Action): Promise<ApprovalEdit | null> {
  const denied = await ctx.store.findDeniedRequest(action.actionHash);
  if (denied === null) return null;
  const edit = await approvalEdit(ctx, denied.request.requestId);
  if (edit === null || edit.proposed !== denied.request.requestId || edit.proposedHash !== action.actionHash) return null;
  const approved = await ctx.store.getApproval(edit.approved);
  if (approved === null || approved.status !== 'granted' || approved.request.actionHash !== edit.approvedHash) return null;
  return ctx.clock().getTime() <= parseTime(approved.request.expiresAt, 'expires_at').getTime() ? edit : null;
}

/** `edit` if it is the edit that granted `approvalId` for `actionHash`, else null. */
function grantEdit(edit: ApprovalEdit | null, approvalId: string, actionHash: string): ApprovalEdit | null {
  return edit !== null && edit.approved === approvalId && edit.approvedHash === actionHash ? edit : null;
}

/** The edit behind grant `approvalId` of `action` (however far it got: granted, consumed), or null. Reads only. */
export async function editOfGrant(ctx: ControlContext, approvalId: string | null, action: Action): Promise<ApprovalEdit | null> {
  if (approvalId === null) return null;
  return grantEdit(await approvalEdit(ctx, approvalId), approvalId, action.actionHash);
}
