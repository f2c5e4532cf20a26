/**
 * Approvals by verified people, and preconditions (spec 05 §4.2–§4.4): what the request pass
 * pins, who counts as a verified approver, and the presenting pass's recheck — the approver gate
 * (verified, entitled, not the requester) and the precondition fingerprint compared — run
 * immediately before the store call that consumes.
 *
 * @module
 */
import type { Action } from '../action.js';
import { shownId } from '../visible.js';
import { checkConsumable } from '../approvals.js';
import { isPlainObject, type JsonObject } from '../canonical.js';
import { ActionDenied, ApprovalMismatch, InvalidArgument } from '../errors.js';
import { hashDocument } from '../hash.js';
import type { ApprovalRecord, ApprovalRequest, RequiredRole, VerifiedAnswer, VerifiedApprover } from '../model.js';
import type { Policy } from '../policy/policy.js';
import { note, recordReceipt } from './evidence.js';
import { block, type ControlContext, type Pass } from './pass.js';

/**
 * How approvers are verified on this deployment (the original's approver identity). With one,
 * a request may need several approvers (`approvals_required`), and a presented approval is used
 * only when every recorded approver was verified, holds each pinned control's role and is not
 * the requester. Without one, nothing of that runs (the original's 0.7 path) and a threshold
 * above one is denied `approvals_unverifiable` before anyone is asked.
 */
export interface ApproverIdentity {
  /**
   * The claim of a verified principal that lists its roles (a string or a list of strings),
   * matched byte for byte against a control's `approver_role`. Absent or null: nobody is entitled.
   */
  readonly rolesClaim?: string | null;
}

/** The Control's `approvers` option, checked: null when absent. */
export function checkApproverIdentity(v: unknown): ApproverIdentity | null {
  if (v === undefined || v === null) return null;
  if (!isPlainObject(v)) throw new InvalidArgument('approvers must be { rolesClaim? }: how approvers are verified here');
  const claim = v['rolesClaim'];
  if (claim !== undefined && claim !== null && (typeof claim !== 'string' || claim === ''))
    throw new InvalidArgument('approvers.rolesClaim must be a non-empty claim name, or null');
  return Object.freeze({ rolesClaim: (claim as string | null | undefined) ?? null });
}

/** A principal a resolving surface verified, as it answers a request. */
export interface VerifiedPrincipal {
  readonly agent: string;
  readonly user?: string | null;
  readonly issuer?: string | null;
  readonly claims?: Readonly<Record<string, unknown>> | null;
}

/**
 * A fingerprint of the world the action acts on, taken when the request is filed and again when
 * the approval is presented: a JSON object (no floats). The approval is used only if both answers
 * fingerprint the same; a provider that throws fails closed (`precondition_unavailable`).
 */
export type PreconditionProvider = (action: Action) => JsonObject | Promise<JsonObject>;

/** The call's `preconditions` option, checked: null when absent. */
export function checkProvider(v: unknown): PreconditionProvider | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'function') throw new InvalidArgument('preconditions must be a function (action) => JSON object: the precondition provider');
  return v as PreconditionProvider;
}

/** What the request pass pins: the precondition fingerprint (when a provider is named), the required roles, the threshold. */
export async function requestPins(
  ctx: ControlContext,
  pass: Pass,
): Promise<Pick<ApprovalRequest, 'approvalsRequired' | 'preconditionFingerprint' | 'requiredRoles'>> {
  const fingerprint = await fingerprintForRequest(ctx, pass);
  const required = ctx.policy.action(pass.action.name)?.approvalsRequired ?? 1;
  return {
    approvalsRequired: Number(required),
    preconditionFingerprint: fingerprint,
    requiredRoles: requiredRolesOf(ctx.policy, pass.evaluation?.controls ?? []),
  };
}

/** The withdrawing approver of a request whose pins the store did not keep (the original's). */
export const NOT_RECORDED_APPROVER = 'ctrlrun:precondition-not-recorded';

/**
 * The request pass reads its request back (spec 05 §4.2): a store that did not keep a pin (the
 * fingerprint, the approver roles or the threshold) would let the approval be used without what
 * it promised. The request is withdrawn (denied by {@link NOT_RECORDED_APPROVER}, or consumed if
 * someone granted it already), `APPROVAL_INVALIDATED {reason, missing, action_hash, withdrawn,
 * precondition_at_request, precondition_at_recheck}` and a denied receipt are recorded, and the
 * action is denied `precondition_missing` when this pass computed a fingerprint, else
 * `approval_unrecorded`.
 */
export async function refuseUnrecorded(
  ctx: ControlContext,
  pass: Pass,
  pins: Pick<ApprovalRequest, 'approvalsRequired' | 'preconditionFingerprint' | 'requiredRoles'>,
): Promise<void> {
  const id = pass.approvalId as string;
  const row = await ctx.store.getApproval(id);
  const kept = row?.request;
  const missing: string[] = [];
  if ((kept?.preconditionFingerprint ?? null) !== (pins.preconditionFingerprint ?? null)) missing.push('precondition_fingerprint');
  if (JSON.stringify(kept?.requiredRoles ?? []) !== JSON.stringify(pins.requiredRoles ?? [])) missing.push('required_roles');
  if ((kept?.approvalsRequired ?? 1) !== (pins.approvalsRequired ?? 1)) missing.push('approvals_required');
  if (missing.length === 0) return;
  let withdrawn = false;
  try {
    if (row?.status === 'granted') await ctx.store.consumeApproval(id, pass.action.actionHash, kept?.preconditionFingerprint ?? null);
    else await ctx.store.denyApproval(id, NOT_RECORDED_APPROVER);
    withdrawn = true;
  } catch (err) {
    ctx.logger.warn(
      `[ctrlrun] ${pass.action.name}: approval request ${shownId(id)} could not be withdrawn: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const computed = pins.preconditionFingerprint ?? null;
  const reason = computed !== null ? 'precondition_missing' : 'approval_unrecorded';
  note(ctx, pass, 'APPROVAL_INVALIDATED', {
    reason,
    missing,
    action_hash: pass.action.actionHash,
    withdrawn,
    precondition_at_request: kept?.preconditionFingerprint ?? null,
    precondition_at_recheck: computed,
  });
  const message = `${pass.action.name}: the store did not record what approval request ${id} pins (${missing.join(', ')}), so it was ${withdrawn ? 'withdrawn' : 'not usable'}: an approval is never used without what it promised`;
  pass.evaluation = { ...pass.evaluation!, decision: 'deny', reason };
  note(ctx, pass, 'ACTION_DENIED', { reason });
  await recordReceipt(ctx, pass, { result: 'denied', error: message });
  throw new ActionDenied(reason, { actionId: pass.action.actionId, message });
}

/** `"sha256:" + hex(SHA-256(canonical({schema: "ctrlrun.precondition/v1", state})))` (spec 05 §2.2). */
export function preconditionFingerprint(state: JsonObject): string {
  if (!isPlainObject(state)) throw new InvalidArgument('a precondition provider must answer a JSON object');
  return hashDocument({ schema: 'ctrlrun.precondition/v1', state }, 'precondition');
}

/** The roles a verified principal holds under `claim` (a string or a list of strings); none without a claim. */
export function rolesOf(p: VerifiedPrincipal, claim: string | null): string[] {
  if (claim === null) return [];
  const v = p.claims?.[claim];
  if (typeof v === 'string') return [v];
  if (Array.isArray(v)) return v.filter((r): r is string => typeof r === 'string');
  return [];
}

/** What a store records for `p`: who, and the controls whose `approver_role` it holds (registry order). */
export function verifiedAnswer(policy: Policy, identity: ApproverIdentity | null, p: VerifiedPrincipal): VerifiedAnswer {
  if (!isPlainObject(p) || typeof p.agent !== 'string' || p.agent === '')
    throw new InvalidArgument('verified must be the principal a resolving surface verified: { agent, user?, issuer?, claims? }');
  const roles = rolesOf(p, identity?.rolesClaim ?? null);
  const entitled = [...policy.controls.values()].filter((c) => c.approverRole !== null && roles.includes(c.approverRole)).map((c) => c.id);
  return { agent: p.agent, user: p.user ?? null, issuer: p.issuer ?? null, entitled };
}

/** The `{control, role}` pins of a request: the evaluation's cited controls that declare `approver_role`. */
export function requiredRolesOf(policy: Policy, cited: readonly string[]): RequiredRole[] {
  const out: RequiredRole[] = [];
  for (const id of cited) {
    const role = policy.controls.get(id)?.approverRole ?? null;
    if (role !== null) out.push({ control: id, role });
  }
  return out;
}

/** A provider's name for evidence: the exception type, never its (agent-influenced) message. */
function errorType(err: unknown): string {
  return err instanceof Error ? err.name : typeof err;
}

/**
 * The request pass: the fingerprint to pin, or null without a provider. A provider that fails, or
 * answers what cannot be fingerprinted, denies the action `precondition_unavailable` before any
 * request is filed (ACTION_DENIED and a denied receipt).
 */
export async function fingerprintForRequest(ctx: ControlContext, pass: Pass): Promise<string | null> {
  const provider = pass.preconditions ?? null;
  if (provider === null) return null;
  try {
    return preconditionFingerprint(await provider(pass.action));
  } catch (err) {
    const reason = 'precondition_unavailable';
    const message = `${pass.action.name}: the precondition provider failed (${errorType(err)}), so no request was filed: nothing is approved against a world nobody could fingerprint`;
    pass.evaluation = { ...pass.evaluation!, decision: 'deny', reason };
    note(ctx, pass, 'ACTION_DENIED', { reason, error: errorType(err) });
    await recordReceipt(ctx, pass, { result: 'denied', error: message });
    throw new ActionDenied(reason, { actionId: pass.action.actionId, message });
  }
}

function refusal(reason: ApprovalMismatch['reason'], id: string, detail: string): ApprovalMismatch {
  return new ApprovalMismatch(reason, { approvalId: id, message: `approval ${shownId(id)} refused (${reason}): ${detail}` });
}

function named(a: { agent: string; user: string | null }): string {
  return JSON.stringify(a.user ?? a.agent);
}

/** Step 1, the approver gate (spec 05 §4.4): a refusal and its event data, or null. */
function approverGate(record: ApprovalRecord, action: Action): [ApprovalMismatch, JsonObject] | null {
  const id = record.request.requestId;
  const approvers: readonly VerifiedApprover[] = record.approvers ?? [];
  if (approvers.length === 0)
    return [
      refusal('approver_unverified', id, 'approvers are verified here, and it was granted with no verified approver; answer it where approvers are verified'),
      {},
    ];
  for (const a of approvers)
    for (const { control, role } of record.request.requiredRoles ?? [])
      if (!a.entitled.includes(control))
        return [
          refusal(
            'approver_unentitled',
            id,
            `approver ${named(a)} does not hold the role ${JSON.stringify(role)} that control ${JSON.stringify(control)} requires`,
          ),
          { control, role },
        ];
  const requester = action.principal;
  const own = approvers.find((a) => a.agent === requester.agent && a.user === requester.user);
  if (own !== undefined)
    return [
      refusal('approver_is_requester', id, `approver ${named(own)} is the principal that requested the action, and nobody approves their own action`),
      {},
    ];
  return null;
}

/** What the presenting pass hands the store's consume: the recheck's fingerprint (undefined: none ran). */
export interface Presented {
  readonly precondition: string | null | undefined;
  /** `APPROVAL_CONSUMED` additions (the two fingerprints, when compared). */
  readonly consumed: JsonObject;
}

/**
 * Steps 1 and 2 of the presenting pass, before the store consumes (spec 05 §4.4). A record the
 * store would refuse anyway (unknown, another action's, not granted, expired) is left to the store,
 * whose refusal comes first. A refusal here records `APPROVAL_INVALIDATED` (with the role, or both
 * fingerprints) and a blocked receipt, leaves the approval granted, and throws; in observe mode it
 * is noted as `would_have.blocked_reason` and nothing is refused.
 */
export async function recheckPresented(ctx: ControlContext, pass: Pass): Promise<Presented> {
  const id = pass.approvalId as string;
  const { action } = pass;
  const record = await ctx.store.getApproval(id);
  const pinned = record?.request.preconditionFingerprint ?? null;
  try {
    checkConsumable(record, id, action.actionHash, ctx.clock(), pinned);
  } catch (err) {
    if (err instanceof ApprovalMismatch || err instanceof ActionDenied) return { precondition: undefined, consumed: {} };
    throw err;
  }
  pass.approvers = record!.approvers ?? [];
  let refused: [ApprovalMismatch, JsonObject] | null = ctx.approverIdentity === null ? null : approverGate(record!, action);
  const provider = pass.preconditions ?? null;
  let now: string | null = null;
  let compared = false;
  if (refused === null && (provider !== null || pinned !== null)) {
    compared = true;
    pass.preconditionAtRequest = pinned;
    try {
      now = provider === null ? null : preconditionFingerprint(await provider(action));
      pass.preconditionAtRecheck = now;
      if (pinned === null || now === null)
        refused = [
          refusal(
            'precondition_missing',
            id,
            pinned === null
              ? 'it was requested with no precondition fingerprint, and this pass names a provider: one side only is never a match'
              : 'it was requested against a precondition fingerprint, and this pass names no provider to recheck it',
          ),
          {},
        ];
      else if (pinned !== now) refused = [refusal('precondition_changed', id, `the world changed since it was requested: ${pinned} then, ${now} now`), {}];
    } catch (err) {
      refused = [
        refusal('precondition_unavailable', id, `the precondition provider failed (${errorType(err)}): never used without the recheck`),
        { error: errorType(err) },
      ];
    }
  }
  const fingerprints: JsonObject = compared ? { precondition_at_request: pinned, precondition_at_recheck: now } : {};
  if (refused !== null) {
    const [err, extra] = refused;
    note(ctx, pass, 'APPROVAL_INVALIDATED', { reason: err.reason, action_hash: action.actionHash, ...extra, ...fingerprints });
    if (pass.observation !== null) {
      block(pass, err.reason);
      return { precondition: now, consumed: fingerprints };
    }
    pass.approver = record!.approver;
    await recordReceipt(ctx, pass, { result: 'blocked', error: err.message });
    throw err;
  }
  return { precondition: compared ? now : undefined, consumed: fingerprints };
}
