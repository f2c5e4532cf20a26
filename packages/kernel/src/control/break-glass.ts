/**
 * Break-glass: opening a grant beneath a break-glass envelope the policy declares. There is no
 * flag that skips a check. What it creates is a delegation: recorded (`created_via:
 * break-glass`, the opener and the reason on `DELEGATION_CREATED`), bounded by the envelope on
 * every dimension, expiring within the envelope's `max_ttl` (re-checked at every evaluation),
 * revocable, attenuable, and named on the receipt of every action taken under it.
 *
 * @module
 */
import type { Delegation } from '../authority/authority.js';
import type { Grant, GrantInput } from '../authority/grant.js';
import { isPlainObject, type JsonObject } from '../canonical.js';
import { AuthorityEscalation, IdentityError, InvalidArgument } from '../errors.js';
import { rejectedDelegation, requireAuthority, storeDelegation } from './answers.js';
import { eventRaw } from './evidence.js';
import type { ControlContext } from './pass.js';
import { rolesOf, type VerifiedPrincipal } from './presented.js';
import { quotedForMessage } from '../visible.js';

/** The longest `reason` recorded. */
const MAX_REASON = 1024;

/** Options of `Control.breakGlass`. */
export interface BreakGlassOptions {
  /**
   * The human opening it, as a resolving surface verified them (a verified token, never a name
   * typed in): its roles, read from the claim `approvers.rolesClaim` names, must include the
   * `approver_role` of every control the envelope cites. With `expiresAt`, an expired credential
   * opens nothing.
   */
  verified: VerifiedPrincipal & { readonly expiresAt?: string | null };
  /** Why it is opened (an incident id, say): free text, recorded on `DELEGATION_CREATED`, never interpreted. */
  reason: string;
  /**
   * How long the grant lives from now (whole seconds, or an ISO-8601 duration such as `PT1H`), for
   * a grant that carries no `expiresAt`; either way the expiry must be within the envelope's `max_ttl`.
   */
  ttl?: number | string;
}

/** The `{control, role}` pairs an envelope's opener must hold, or an `InvalidArgument` when a cited control gates nobody. */
function requiredRoles(ctx: ControlContext, envelopeId: string, controls: readonly string[]): { control: string; role: string }[] {
  // Elsewhere a control naming no approver_role gates nobody; here the citation is the gate, so an
  // envelope citing nothing, an unknown control or a role-less one would let any verified
  // principal open it. Each is refused instead.
  if (controls.length === 0)
    throw new InvalidArgument(
      `break-glass envelope ${JSON.stringify(envelopeId)} cites no controls, so nothing says who may open it; list the controls whose approver_role gates it under 'controls:'`,
    );
  const unknown = controls.filter((id) => !ctx.policy.controls.has(id));
  const roleless = controls.filter((id) => ctx.policy.controls.has(id) && (ctx.policy.controls.get(id)!.approverRole ?? null) === null);
  if (unknown.length > 0 || roleless.length > 0) {
    const said = [
      ...(unknown.length > 0 ? [`${unknown.map((c) => JSON.stringify(c)).join(', ')}, which name no control in this policy's registry`] : []),
      ...(roleless.length > 0 ? [`${roleless.map((c) => JSON.stringify(c)).join(', ')}, which declare no 'approver_role'`] : []),
    ];
    throw new InvalidArgument(
      `break-glass envelope ${JSON.stringify(envelopeId)} cites ${said.join(', and ')}: an envelope's controls are what gate who may open it, so a citation that resolves to no role would gate nobody`,
    );
  }
  return controls.map((control) => ({ control, role: ctx.policy.controls.get(control)!.approverRole! }));
}

/**
 * Opens a grant beneath break-glass envelope `envelopeId` as the verified human `verified`, or
 * refuses. Needs an approver identity on the Control (`approvers`), else `InvalidArgument`. An
 * envelope whose controls name no role, or a control this policy lacks, is an `InvalidArgument`
 * (nothing written). An opener who lacks a role the envelope's controls require is refused
 * `approver_unentitled` (an {@link AuthorityEscalation}, `DELEGATION_REJECTED` with the control and
 * the role); the other refusals are `Authority.planBreakGlass`'s, each with `DELEGATION_REJECTED`.
 * On success one delegation row is written (`created_via: break-glass`, `created_by` the opener)
 * and `DELEGATION_CREATED` carries `created_via` and `reason`.
 */
export async function breakGlass(ctx: ControlContext, envelopeId: string, grant: Grant | GrantInput, options: BreakGlassOptions): Promise<Delegation> {
  const authority = requireAuthority(ctx, 'break-glass');
  if (ctx.approverIdentity === null) {
    throw new InvalidArgument(
      'opening a break-glass envelope needs an approver identity: the envelope names the controls that gate who may open it, and with no verified principal there is nobody to check them against. Build the Control with approvers: { rolesClaim } and pass the opener a resolving surface verified',
    );
  }
  if (!isPlainObject(options)) throw new InvalidArgument('breakGlass needs { verified, reason }: the human opening it, verified, and why');
  const verified = options.verified;
  if (!isPlainObject(verified) || typeof verified.agent !== 'string' || verified.agent === '') {
    throw new IdentityError(
      'breakGlass needs the opener a resolving surface verified ({ agent, user?, issuer?, claims? }); nobody was verified, so nothing is opened',
    );
  }
  const reason = options.reason;
  if (typeof reason !== 'string' || reason.trim() === '' || reason.length > MAX_REASON)
    throw new InvalidArgument(`breakGlass needs a reason: why it is opened (an incident id, say), non-blank text of at most ${MAX_REASON} characters`);
  const envelope = authority.envelopes.get(envelopeId);
  const rejected = (data: JsonObject) => eventRaw(ctx, 'DELEGATION_REJECTED', null, null, null, { parent_id: envelopeId, ...data });
  // An unknown envelope is left to planBreakGlass, so an ordinary grant id gets its message.
  if (envelope !== undefined) {
    const held = rolesOf(verified, ctx.approverIdentity.rolesClaim ?? null);
    const missing = requiredRoles(ctx, envelopeId, envelope.controls).find((r) => !held.includes(r.role));
    if (missing !== undefined) {
      await rejected({ reason: 'approver_unentitled', control: missing.control, role: missing.role });
      throw new AuthorityEscalation('approver_unentitled', {
        parentId: envelopeId,
        message: `${quotedForMessage(verified.user ?? verified.agent, 200)} does not hold the role ${JSON.stringify(missing.role)} required by control ${JSON.stringify(missing.control)}, which gates who may open the break-glass envelope ${JSON.stringify(envelopeId)} (approver_unentitled)`,
      });
    }
  }
  const opener = { agent: verified.agent, user: verified.user ?? null, expiresAt: verified.expiresAt ?? null };
  let planned: Delegation;
  try {
    planned = authority.planBreakGlass(envelopeId, grant, {
      opener,
      now: ctx.clock(),
      ids: ctx.ids,
      ...(options.ttl === undefined ? {} : { ttl: options.ttl }),
    });
  } catch (err) {
    await rejectedDelegation(ctx, envelopeId, err);
    throw err;
  }
  await storeDelegation(ctx, planned, { reason });
  ctx.logger.warn(
    `[ctrlrun] break-glass ${planned.delegationId} opened beneath ${JSON.stringify(envelopeId)} by ${quotedForMessage(planned.createdBy.user ?? planned.createdBy.agent, 200)} until ${planned.grant.expiresAt}: ${quotedForMessage(reason, MAX_REASON)}`,
  );
  return planned;
}
