/**
 * What verify acts with: which action, which arguments, as whom, in which environment, at which
 * instant. Actions are tried in code-point order, the first reaching the needed decision with a
 * vector verify can build; with authority, the principal comes from the first grant (ids by code
 * point) whose shape and constraints cover the vector.
 *
 * @module
 */
import type { Action } from '../action.js';
import { intakeAction } from '../intake.js';
import { compareCodePoints, type JsonObject } from '../canonical.js';
import type { Authority } from '../authority/authority.js';
import type { Grant } from '../authority/grant.js';
import { ACTION_SEPARATOR, matchesPattern } from '../authority/patterns.js';
import type { Decision, Policy } from '../policy/policy.js';
import type { Clock } from '../time.js';
import type { ProcessLauncher, ScratchStoreFactory } from './contracts.js';
import { VERIFY_AGENT, type VerifyPrincipal } from './rig.js';
import { vectorFor, type ActionView, type Vector } from './synthesize.js';

/** T0 when no grant expires: every scenario runs at this instant. */
export const DEFAULT_T0 = new Date('2026-01-01T00:00:00.000Z');

const HOUR = 3_600_000;

/** Everything a guarantee's scenario needs. */
export interface Context {
  readonly policy: Policy;
  readonly policyText: string;
  readonly policySource: string;
  /** A standalone authority (`--authority`) and its text, or null. */
  readonly standalone: { readonly authority: Authority; readonly text: string; readonly source: string } | null;
  /** The authority in force (standalone, else the document's inline section), or null. */
  readonly authority: Authority | null;
  readonly views: readonly ActionView[];
  /** The scenarios' instant. */
  readonly t0: Date;
  readonly clock: Clock;
  readonly wallClock: Clock;
  readonly scratch: ScratchStoreFactory;
  readonly launcher: ProcessLauncher | null;
}

/** A vector and who acts it, where. */
export interface Selection {
  readonly vector: Vector;
  readonly principal: VerifyPrincipal;
  readonly environment: string;
  /** The root grant that covers it, or null without authority. */
  readonly grant: Grant | null;
}

/** No grant covered a vector that reached the decision: the reason (and a note) verify reports. */
export interface GrantMiss {
  readonly miss: true;
  readonly reason: string;
  readonly note: string | null;
}

/** The actions of the document, sorted by code point, as verify reads them. */
export function actionViews(policy: Policy): ActionView[] {
  return policy.actionNames
    .slice()
    .sort(compareCodePoints)
    .map((name) => {
      const entry = policy.action(name)!;
      return { name, effect: entry.effect, resource: entry.resource, rules: policy.rules(name) ?? [] };
    });
}

/** T0: the earliest grant expiry − 1 h, else {@link DEFAULT_T0}. */
export function scenarioInstant(authority: Authority | null): Date {
  let earliest: number | null = null;
  for (const g of authority?.grants.values() ?? []) {
    if (g.expiresMicros === null) continue;
    const ms = Number(g.expiresMicros / 1000n);
    if (earliest === null || ms < earliest) earliest = ms;
  }
  return earliest === null ? new Date(DEFAULT_T0.getTime()) : new Date(earliest - HOUR);
}

/** A name matching a subject pattern: the literal verbatim, each `*` as `ctrlrun-verify`. */
export function nameFor(pattern: string | null, fallback: string | null): string | null {
  if (pattern === null) return fallback;
  return pattern.replaceAll('*', VERIFY_AGENT);
}

/** The principal a grant's subject admits. */
export function principalFor(grant: Grant): VerifyPrincipal {
  return { agent: nameFor(grant.subject.agent, VERIFY_AGENT)!, user: nameFor(grant.subject.user, null) };
}

/** The document's environment, else `production`. */
export function documentEnvironment(policy: Policy): string {
  return policy.environment ?? 'production';
}

/** Grants by id in code-point order. */
export function grantsById(authority: Authority): Grant[] {
  return [...authority.grants.values()].sort((a, b) => compareCodePoints(a.id, b.id));
}

/** Whether `grant` names the action. */
export function grantNamesAction(grant: Grant, name: string): boolean {
  return grant.actions.some((p) => matchesPattern(p, name, ACTION_SEPARATOR));
}

/**
 * The vector of `view` reaching `decision` under `grant` (its constraints hold too), acted by the
 * grant's subject in the grant's first environment; null if the grant does not cover it at `at`.
 * `missedResource` receives a resource the grant's `resources:` refused.
 */
export function selectUnder(
  ctx: Context,
  view: ActionView,
  decision: Decision,
  grant: Grant,
  at: Date,
  missedResource?: (r: string) => void,
): Selection | null {
  if (!grantNamesAction(grant, view.name)) return null;
  const vector = vectorFor(ctx.policy, view, decision, Object.values(grant.constraints));
  if (!vector) return null;
  const principal = principalFor(grant);
  const environment = grant.environments?.[0] ?? documentEnvironment(ctx.policy);
  let action: Action;
  try {
    action = probeAction(ctx.policy, view.name, vector.arguments, principal, environment);
  } catch {
    return null;
  }
  if (!grant.matchesShape(action)) {
    if (action.resource !== null && grant.resources !== null) missedResource?.(action.resource);
    return null;
  }
  if (!grant.constraintsHold(action.canonicalArguments, []) || grant.isExpired(at)) return null;
  return { vector, principal, environment, grant };
}

/**
 * The first selection reaching one of `decisions` (tried in that order) over the actions passing
 * `filter`; a {@link GrantMiss} when vectors exist but no grant covers one; null when no vector
 * reaches the decisions at all.
 */
export function select(ctx: Context, decisions: readonly Decision[], filter: (v: ActionView) => boolean = () => true): Selection | GrantMiss | null {
  if (ctx.authority === null) {
    for (const decision of decisions) {
      for (const view of ctx.views) {
        if (!filter(view)) continue;
        const vector = vectorFor(ctx.policy, view, decision);
        if (vector) return { vector, principal: { agent: VERIFY_AGENT, user: null }, environment: documentEnvironment(ctx.policy), grant: null };
      }
    }
    return null;
  }
  const grants = grantsById(ctx.authority);
  let reached = false;
  let missed: string | null = null;
  for (const decision of decisions) {
    for (const view of ctx.views) {
      if (!filter(view)) continue;
      if (vectorFor(ctx.policy, view, decision)) reached = true;
      for (const grant of grants) {
        const sel = selectUnder(ctx, view, decision, grant, ctx.t0, (r) => void (missed ??= r));
        if (sel) return sel;
      }
    }
  }
  if (!reached) return null;
  if (missed !== null) {
    return {
      miss: true,
      reason: `no grant's \`resources:\` matches a resource verify can build ('${missed}')`,
      note: 'give a grant a ctrlrun-verify-* resource scope (resources: ["…:ctrlrun-verify-*"]) so verify can act under it',
    };
  }
  return { miss: true, reason: `no grant covers an action the policy lets verify reach (${decisions.join(' or ')})`, note: null };
}

/** The action an application would build (resource from the policy's template), for pure checks; never executed. */
export function probeAction(policy: Policy, name: string, args: JsonObject, principal: VerifyPrincipal, environment: string): Action {
  return intakeAction({ policy, environment, ids: () => 'act_00000000000000000000000000000000' }, { name, arguments: args }, principal);
}

/** Whether `s` is a selection (not a miss, not null). */
export function isSelection(s: Selection | GrantMiss | null): s is Selection {
  return s !== null && !('miss' in s);
}
