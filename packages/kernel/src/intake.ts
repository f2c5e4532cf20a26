/**
 * The one intake: how every surface turns a call into the action the control path runs and the
 * options it runs it with. `protect` (and so every adapter), the worker's `POST /v1/actions`, the
 * MCP gateway's `tools/call` and `verify`'s rig all call {@link intake} (verify, which builds
 * actions it never sends, the synchronous {@link intakeAction}); none builds an action itself.
 *
 * In order: the principal (resolved by the Control's identity provider, or the one the surface
 * authenticated), the arguments (one plain object, `undefined` members dropped, no derived
 * subject such as `data_scope`, the defaults bound under them), the resource (the surface's
 * template, else the policy's; a claimed resource must be what the template derives), the
 * canonical action, then the effect (the surface's template, else the policy's; a caller's key
 * must be the template's, or without a template is scoped to the action) and the approval
 * presented. A refusal is an {@link IntakeRefusal} (an `InvalidArgument`) naming the field.
 *
 * @module
 */
import { createAction, createPrincipal, type Action, type Principal } from './action.js';
import { scopedCallerKey, templateCollision } from './caller-keys.js';
import { isPlainObject } from './canonical.js';
import type { Control, ExecuteOptions } from './control.js';
import { InvalidArgument } from './errors.js';
import { quotedForMessage } from './visible.js';
import type { IdSource } from './ids.js';
import { DERIVED_SUBJECTS, refuseDerivedArguments, resolveEffectTemplate, resolveResourceTemplate, type Policy } from './policy/index.js';

/** Why the intake refused a call (see {@link IntakeRefusal}). */
export type IntakeReason =
  /** The arguments are not one plain object. */
  | 'not_an_object'
  /** An argument is named like a subject the policy derives (`data_scope`). */
  | 'derived_argument'
  /** The resource template cannot be resolved against the arguments. */
  | 'resource_template'
  /** A resource is claimed for an action whose resource nothing derives, by a caller not trusted with one. */
  | 'resource_claim'
  /** The claimed resource is not the one the template derives. */
  | 'resource_mismatch'
  /** The arguments have no canonical form (a float, a cycle, a non-JSON value). */
  | 'arguments'
  /** The caller's effect key is not the one the effect template derives. */
  | 'effect_key_mismatch'
  /** The caller's key, as stored, is a key some effect template of the policy can produce. */
  | 'caller_key_collision';

/**
 * The intake's refusal: an `InvalidArgument` (its name and code) that also says which field of
 * the call was wrong (`arguments`, `arguments.data_scope`, `resource`, `effectKey`) and why.
 * Surfaces map it: `protect` throws it, the worker answers 400 at `$.<field>`, the MCP gateway
 * -32602.
 */
export class IntakeRefusal extends InvalidArgument {
  override name = 'InvalidArgument';
  /** The call's field at fault, as a path below the call (`arguments.data_scope`). */
  declare readonly field: string;
  declare readonly reason: IntakeReason;
  constructor(reason: IntakeReason, field: string, message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    // Not enumerable: the error a surface throws keeps the shape of any InvalidArgument.
    Object.defineProperties(this, { reason: { value: reason }, field: { value: field } });
  }
}

/** What a surface knows about one call. */
export interface SurfaceCall {
  /** The action name the policy matches. */
  readonly name: string;
  /** The call's arguments: one plain object. `undefined` members are absent, at any depth. */
  readonly arguments: unknown;
  /**
   * The acting principal. A hint, resolved by the Control's identity provider (with `headers`),
   * else used as is, else the Control's default; `authenticated`: the surface's own credential
   * check found it, and it is used as is.
   */
  readonly principal?: { agent: string; user?: string | null } | Principal | null;
  /** Request headers for a header or JWT identity provider (any case). */
  readonly headers?: Readonly<Record<string, string>>;
  /** The principal came from the surface's credential check (the worker): not resolved again. */
  readonly authenticated?: boolean;
  /** Argument values bound under the call's own (validated by the surface). */
  readonly defaults?: Readonly<Record<string, unknown>>;
  /** The surface's resource template (`protect`'s `resource`); `undefined`: the policy's `resource:`. */
  readonly resourceTemplate?: string | null;
  /** A resource the caller claims: it must be what the template derives. */
  readonly resource?: string | null;
  /**
   * Who claims `resource` where no template derives one: an `agent` (the default) is refused, so a
   * grant's `resources:` is never checked against the agent's word; the `application` (code in
   * the same process, as `verify`'s rig) is taken at its word.
   */
  readonly claimedBy?: 'agent' | 'application';
  /** The surface's effect template (`protect`'s `effect`); `undefined`: the policy's `effect:`. */
  readonly effectTemplate?: string | null;
  /**
   * The caller's effect key. With an effect template it must be the template's key; without one
   * it deduplicates within this action only (stored `caller/<name>/<key>`, see `caller-keys.ts`).
   */
  readonly effectKey?: string | null;
  /** A granted approval to present (its request id); `null` or absent: none. */
  readonly approvalId?: string | null;
}

/** What {@link intake} makes of a call: the action and the options to execute it with. */
export interface Intake {
  readonly action: Action;
  readonly options: ExecuteOptions;
}

/** Where {@link intakeAction} builds: the policy, the environment and the id source. */
export interface IntakeContext {
  readonly policy: Policy;
  readonly environment: string;
  readonly ids: IdSource;
}

/**
 * A copy of plain object `value` without its `undefined` members, at any depth through plain
 * objects (own keys kept as own keys, `__proto__` included). Arrays are left as they are: an
 * `undefined` element is refused by the canonical form, naming its path.
 */
function withoutUndefined(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => [k, isPlainObject(v) ? withoutUndefined(v as Record<string, unknown>) : v]),
  );
}

/** Runs `fn`; an `InvalidArgument` it throws becomes an {@link IntakeRefusal} of `reason` at `field`. */
function at<T>(reason: IntakeReason, field: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof InvalidArgument && !(err instanceof IntakeRefusal)) throw new IntakeRefusal(reason, field, err.message, { cause: err });
    throw err;
  }
}

/**
 * The action a call makes, for a principal already resolved: arguments, resource, canonical
 * form. Synchronous and writes nothing (what `verify` builds its probes with); {@link intake}
 * is the whole call.
 */
export function intakeAction(context: IntakeContext, call: SurfaceCall, principal: Principal | { agent: string; user?: string | null }): Action {
  const { name } = call;
  if (!isPlainObject(call.arguments)) throw new IntakeRefusal('not_an_object', 'arguments', `${name} takes one plain-object argument`);
  const given = withoutUndefined(call.arguments);
  const derived = [...DERIVED_SUBJECTS].find((subject) => Object.prototype.hasOwnProperty.call(given, subject));
  if (derived !== undefined) at('derived_argument', `arguments.${derived}`, () => refuseDerivedArguments(given));
  const bound = call.defaults === undefined ? given : { ...call.defaults, ...given };

  const template = call.resourceTemplate !== undefined ? call.resourceTemplate : (context.policy.action(name)?.resource ?? null);
  const claimed = call.resource ?? null;
  let resource: string | null = null;
  if (template === null) {
    if (claimed !== null && call.claimedBy !== 'application') {
      // Nothing in the policy derives this action's resource, so a claimed one would be the
      // agent's word where a grant's `resources:` is checked: refused, never trusted.
      throw new IntakeRefusal(
        'resource_claim',
        'resource',
        `${name} has no resource: template in the policy, so the caller may not claim a resource for it (send none)`,
      );
    }
    resource = claimed;
  } else {
    resource = at('resource_template', 'arguments', () => resolveResourceTemplate(template, bound));
    if (claimed !== null && claimed !== resource) {
      throw new IntakeRefusal(
        'resource_mismatch',
        'resource',
        `resource ${quotedForMessage(claimed, 200)} is not the policy's ${quotedForMessage(resource, 200)} for these arguments`,
      );
    }
  }
  return at('arguments', 'arguments', () =>
    createAction({ name, arguments: bound, principal, resource, environment: context.environment }, { ids: context.ids }),
  );
}

/** The execute options of `action` for `call`: its effect key or template, and the approval presented. */
function executeOptions(policy: Policy, action: Action, call: SurfaceCall): ExecuteOptions {
  const options: ExecuteOptions = { approvalId: call.approvalId ?? null };
  const template = call.effectTemplate !== undefined ? call.effectTemplate : (policy.action(action.name)?.effect ?? null);
  const key = call.effectKey ?? null;
  if (template !== null) {
    if (call.effectTemplate !== undefined) options.effectTemplate = template;
    // The template names the effect: a caller may not choose another key and run twice.
    if (key !== null) {
      let derived: string | null = null;
      try {
        derived = resolveEffectTemplate(template, action.canonicalArguments, action.resource);
      } catch {
        // Unresolvable: the control path refuses and records it (EffectKeyError).
      }
      if (derived !== null && derived !== key) {
        throw new IntakeRefusal(
          'effect_key_mismatch',
          'effectKey',
          `effectKey ${quotedForMessage(key, 200)} is not the policy's ${quotedForMessage(derived, 200)} for these arguments`,
        );
      }
    }
  } else if (key !== null) {
    // The caller's key deduplicates within this action only (see caller-keys.ts).
    const stored = scopedCallerKey(action.name, key);
    const taken = templateCollision(policy, stored);
    if (taken !== null) {
      throw new IntakeRefusal(
        'caller_key_collision',
        'effectKey',
        `effectKey ${quotedForMessage(key, 200)} would be stored as ${quotedForMessage(stored, 200)}, which the effect template ${JSON.stringify(taken.template)} of ${taken.action} can also produce: choose another key`,
      );
    }
    options.effectKey = stored;
  } else {
    options.effectKey = null;
  }
  return options;
}

/**
 * The one intake (see the module): from a surface's call to the action and its execute options,
 * or a refusal. Who is acting comes first: no principal is refused (by the Control, with its
 * evidence) before the arguments are read. Writes nothing else.
 */
export async function intake(control: Control, call: SurfaceCall): Promise<Intake> {
  if (!isPlainObject(call) || typeof call.name !== 'string' || call.name === '') throw new InvalidArgument('intake needs a call { name, arguments }');
  const principal =
    call.authenticated === true && call.principal
      ? createPrincipal(call.principal)
      : await control.resolvePrincipal(call.name, { principal: call.principal ?? null, ...(call.headers ? { headers: call.headers } : {}) });
  const action = intakeAction(control, call, principal);
  return { action, options: executeOptions(control.policy, action, call) };
}
