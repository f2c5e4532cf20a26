/**
 * The public shapes of the control path: options, executors, hooks, results.
 *
 * @module
 */
import { type Action, type Principal } from '../action.js';
import { type Authority, type DelegateVia } from '../authority/authority.js';
import type { JsonObject } from '../canonical.js';
import type { IdentityProvider } from '../identity.js';
import type { ApproverIdentity, PreconditionProvider } from './presented.js';
import type { EventSink } from '../events.js';
import type { IdSource } from '../ids.js';
import type { StoredReceipt } from '../model.js';
import type { Policy } from '../policy/index.js';
import type { StateStore } from '../store/state-store.js';
import type { Clock } from '../time.js';

/** A reconcile hook: asked what happened to an ambiguous effect. */
export type ReconcileHook = (effectKey: string) => 'committed' | 'not_executed' | 'unknown' | Promise<'committed' | 'not_executed' | 'unknown'>;

/** What an executor is told besides the canonical arguments. */
export interface ExecutionContext {
  readonly action: Action;
  readonly effectKey: string | null;
  readonly attempt: number;
}

/** The function that does the real thing; receives the action's canonical arguments. */
export type Executor<T> = (args: JsonObject, context: ExecutionContext) => T | Promise<T>;

/** Per-call options of {@link Control.execute}. */
export interface ExecuteOptions {
  /**
   * The effect key. `undefined`: resolved from `effectTemplate`, else the policy's `effect:`
   * template, else none. `null`: explicitly no key (no reservation).
   */
  effectKey?: string | null;
  /** An effect template resolved against the canonical arguments (beats the policy's). */
  effectTemplate?: string | null;
  /** A granted approval to present (its request id). */
  approvalId?: string | null;
  /** Lease for the reservation, in ms (default: the Control's). */
  lease?: number;
  /** Asked once per execute when the record is ambiguous. */
  reconcile?: ReconcileHook;
  /** Also ask the hook right after this attempt is recorded ambiguous. */
  reconcileEagerly?: boolean;
  /**
   * A precondition provider (spec 05 §4.2): its answer is fingerprinted and pinned on the approval
   * request, and asked again when the approval is presented; the action runs only if both match.
   */
  preconditions?: PreconditionProvider | null;
  /**
   * What a gateway observed of the upstream this call is about to reach (spec 05 §3.2 `upstream`):
   * an action whose policy entry pins its upstream runs only with an observation that matches
   * the pin (`upstream_mismatch` otherwise); without one it is refused `upstream_unverified`.
   */
  upstream?: UpstreamObservation | null;
  /**
   * The task this call works on (policy v7 grant `tasks`): a grant bound to tasks covers the call
   * only if one of its patterns (separator `:`) matches it; recorded as the receipt's `task`, never
   * hashed. A suspended call's resumed legs do not carry it.
   */
  task?: string | null;
}

/** What a gateway saw of an upstream immediately before forwarding a call to it. */
export interface UpstreamObservation {
  /** `sha256:<hex>` of the TLS certificate the upstream presented (its DER bytes), or null: no TLS. */
  readonly tlsCertSha256: string | null;
  /** {@link toolSchemaDigest} of the tool as the upstream lists it now, or null: not listed. */
  readonly toolSchemaSha256: string | null;
  /**
   * The pin's `tls_cert_file` entries read by the observer (the kernel reads no files): each path,
   * as written in the policy, to `sha256:<hex>` of the certificate in it, or null when unreadable.
   */
  readonly certificateFiles?: Readonly<Record<string, string | null>>;
}

/** Where warnings go. */
export interface Logger {
  warn(message: string, ...rest: unknown[]): void;
}

/** Options of {@link Control}. */
export interface ControlOptions {
  policy: Policy;
  store: StateStore;
  /** The default principal for `protect`ed calls that bring none. */
  principal?: { agent: string; user?: string | null } | null;
  clock?: Clock;
  ids?: IdSource;
  sinks?: readonly EventSink[];
  /** Default reservation lease in ms (5 minutes). */
  lease?: number;
  /** How long an approval request stays answerable, in ms (15 minutes). */
  approvalTtl?: number;
  /**
   * How long a suspended execution's lease is held for its resumption, in ms (5 minutes): an
   * executor throwing `Suspended` extends the lease to now + this; a resumption after that is
   * `AmbiguousEffect`.
   */
  suspendTimeout?: number;
  /** The deployment's environment; else the policy's `environment:`, else `production`. */
  environment?: string;
  /**
   * The authority in force. Omitted: the policy document's inline `authority:` section, if it
   * has one. `null`: none (no authority check, no `AUTHORITY_*` event). A standalone authority
   * document (`loadAuthority`) goes here; a document that also has an inline section is refused.
   */
  authority?: Authority | null;
  /** Where principals come from (spec 02 §1.3); else the per-call or default principal. */
  identity?: IdentityProvider | null;
  /**
   * How approvers are verified (see {@link ApproverIdentity}): with it, `approvals_required` above
   * one is filed and counted, and a presented approval passes the approver gate. Absent: none.
   */
  approvers?: ApproverIdentity | null;
  logger?: Logger;
}

/** Per-call identity inputs of {@link Control.resolvePrincipal}. */
export interface ResolveOptions {
  /** The per-call principal; else the Control's default. With a provider, only a hint. */
  principal?: { agent: string; user?: string | null } | Principal | null;
  /** Request headers (any case) for a header or JWT provider. */
  headers?: Readonly<Record<string, string>>;
}

/** Options of {@link Control.delegate}. */
export interface DelegateOptions {
  /** The principal creating the delegation; must be the parent grant's subject. */
  by: { agent: string; user?: string | null; expiresAt?: string | null } | Principal;
  /** `api` (default) or `cli` (an assertion made from a shell). */
  via?: DelegateVia;
}

/** What {@link Control.executeWithReceipt} resolves to. */
export interface ExecuteResult<T> {
  readonly value: T;
  readonly receipt: StoredReceipt;
}
