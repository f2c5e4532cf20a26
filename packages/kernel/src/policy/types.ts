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
  /**
   * `max_attempts` (v5): how many attempts may execute on one effect key, the first included, or
   * null: no ceiling. A `bigint` only beyond 2^53 − 1, a ceiling no attempt number reaches.
   */
  readonly maxAttempts: number | bigint | null;
  /**
   * `approvals_required` (v6): how many distinct verified approvers must answer; 1 when absent.
   * This build verifies no approver, so an action that needs more is denied before anyone is asked.
   */
  readonly approvalsRequired: number | bigint;
  /**
   * `upstream` (v8): the server this action authorises itself against, or null when the entry pins
   * nothing. Only a gateway that observes the upstream could admit a pinned action; none here does.
   */
  readonly upstream: UpstreamPin | null;
}

/** An action entry's `upstream:` pin (v8), as written. */
export interface UpstreamPin {
  /** `tls_cert_sha256`: `sha256:` + 64 lowercase hex, each. */
  readonly tlsCertSha256: readonly string[];
  /** `tls_cert_file`: paths to PEM files (not read here: the kernel has no file system). */
  readonly tlsCertFile: readonly string[];
  /** `tool_schema_sha256`, or null. */
  readonly toolSchemaSha256: string | null;
}

/** One grant in the canonical shape the policy hash is taken over (the original 0.12.2's). */
export interface CanonicalGrant {
  readonly actions: readonly string[];
  readonly budgets: readonly { readonly metric: string; readonly limit: number | bigint; readonly window: number }[] | null;
  readonly constraints: Readonly<Record<string, { readonly argument: string; readonly op: string; readonly operand: JsonValue }>>;
  readonly delegable: boolean;
  readonly environments: readonly string[] | null;
  readonly expires_at: string | null;
  readonly resources: readonly string[] | null;
  readonly subject: { readonly agent: string | null; readonly user: string | null };
  readonly tasks: readonly string[] | null;
}

/** A break-glass envelope in the canonical shape: its grant (`delegable: false`) plus `max_ttl` seconds and `controls`. */
export interface CanonicalEnvelope extends CanonicalGrant {
  readonly max_ttl: number;
  readonly controls: readonly string[];
}

/**
 * Authority in the canonical form the policy hash is taken over, as the original 0.12.2 takes it
 * (spec 05 §3.4): `break_glass` is `{}` when the section declares none.
 */
export interface CanonicalAuthority {
  readonly max_delegation_depth: number | bigint;
  readonly grants: Readonly<Record<string, CanonicalGrant>>;
  readonly break_glass: Readonly<Record<string, CanonicalEnvelope>>;
}

/** One rule as {@link Policy.rules} shows it. */
export interface PolicyRule {
  readonly decision: Decision;
  /** `rule[N]`, or `decision` for a bare `decision:` entry. */
  readonly reason: string;
  readonly conditions: readonly Condition[];
}
