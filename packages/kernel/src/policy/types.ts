/**
 * The policy's shapes that other rooms name (authority, the checker, the control path) without
 * needing the loader that builds them.
 *
 * @module
 */
import type { JsonValue } from '../canonical.js';
import type { Condition } from './conditions.js';

/** What a policy decides. Renders by value everywhere (`"approve"`). */
export type Decision = 'allow' | 'approve' | 'deny';

/** What the control path needs to know about one action entry. */
export interface ActionEntry {
  readonly name: string;
  /** The `effect:` template as written (validated at load), or null: no key, no reservation. */
  readonly effect: string | null;
  /** The `resource:` template as written (validated at load), or null. */
  readonly resource: string | null;
  /** Argument name → data label (`data:`). */
  readonly data: Readonly<Record<string, string>>;
  /** `mcp.not_executed_on_error`: an upstream error means nothing was executed. */
  readonly notExecutedOnError: boolean;
}

/** One grant in the 0.6 canonical shape the policy hash is taken over. */
export interface CanonicalGrant {
  readonly actions: readonly string[];
  readonly constraints: Readonly<Record<string, { readonly argument: string; readonly op: string; readonly operand: JsonValue }>>;
  readonly delegable: boolean;
  readonly environments: readonly string[] | null;
  readonly expires_at: string | null;
  readonly resources: readonly string[] | null;
  readonly subject: { readonly agent: string | null; readonly user: string | null };
}

/** Authority in the canonical form the policy hash is taken over (docs/spec/03-production.md §6). */
export interface CanonicalAuthority {
  readonly max_delegation_depth: number | bigint;
  readonly grants: Readonly<Record<string, CanonicalGrant>>;
}

/** One rule as {@link Policy.rules} shows it. */
export interface PolicyRule {
  readonly decision: Decision;
  /** `rule[N]`, or `decision` for a bare `decision:` entry. */
  readonly reason: string;
  readonly conditions: readonly Condition[];
}
