/**
 * The kernel's errors. Every class keeps the reference implementation's name and carries a stable
 * string `code`, so callers branch on `err.code` even when two copies of the package are loaded or
 * the error crossed a process or HTTP boundary; `instanceof` is a convenience only.
 *
 * @module
 */

/** Every code an error of this package can carry. */
export type ErrorCode =
  | 'ERR_CTRLRUN'
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_POLICY'
  | 'ERR_EFFECT_KEY'
  | 'ERR_ACTION_DENIED'
  | 'ERR_AUTHORITY_DENIED'
  | 'ERR_AUTHORITY_ESCALATION'
  | 'ERR_APPROVAL_REQUIRED'
  | 'ERR_APPROVAL_TIMEOUT'
  | 'ERR_APPROVAL_MISMATCH'
  | 'ERR_DUPLICATE_EFFECT'
  | 'ERR_AMBIGUOUS_EFFECT'
  | 'ERR_NOT_EXECUTED'
  | 'ERR_SUSPENDED'
  | 'ERR_IDENTITY'
  | 'ERR_SCHEMA_MISMATCH'
  | 'ERR_MISSING_DEPENDENCY'
  | 'ERR_AMBIGUOUS_WRITE'
  | 'ERR_STORE'
  | 'ERR_STORE_CLOSED';

/** Base class of every error the kernel raises on purpose (the reference's `CTRLRunError`). */
export class CTRLRunError extends Error {
  override name = 'CTRLRunError';
  /** Stable machine-readable code; branch on this rather than on `instanceof`. */
  readonly code: ErrorCode = 'ERR_CTRLRUN';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    (Error as { captureStackTrace?: (t: object, c: unknown) => void }).captureStackTrace?.(this, new.target);
  }
}

/** Alias under the house-style name. */
export { CTRLRunError as KernelError };

/** Bad values, wiring bugs, impossible store transitions. */
export class InvalidArgument extends CTRLRunError {
  override name = 'InvalidArgument';
  override readonly code = 'ERR_INVALID_ARGUMENT' as const;
}

/** The policy is missing, unreadable or malformed (raised at load time). */
export class PolicyError extends CTRLRunError {
  override name = 'PolicyError';
  override readonly code = 'ERR_POLICY' as const;
}

/** An effect template could not be resolved; deliberately not an {@link ActionDenied}. */
export class EffectKeyError extends CTRLRunError {
  override name = 'EffectKeyError';
  override readonly code = 'ERR_EFFECT_KEY' as const;
}

/** The action was refused: policy deny, `unknown_action`, `no_principal`, `approval_denied`, … */
export class ActionDenied extends CTRLRunError {
  override name = 'ActionDenied';
  override readonly code: ErrorCode = 'ERR_ACTION_DENIED';
  /** Why, as the reference's reason string (`unknown_action`, `rule[2]`, `no_principal`, …). */
  readonly reason: string;
  /** The refused action, when one existed. */
  readonly actionId: string | null;
  constructor(reason: string, options: { actionId?: string | null; message?: string; cause?: unknown } = {}) {
    super(options.message ?? reason, { cause: options.cause });
    this.reason = reason;
    this.actionId = options.actionId ?? null;
  }
}

/** An authority denial (v0.3): no grant, or outside every grant. */
export class AuthorityDenied extends ActionDenied {
  override name = 'AuthorityDenied';
  override readonly code = 'ERR_AUTHORITY_DENIED' as const;
  readonly grantId: string | null;
  readonly delegationId: string | null;
  constructor(reason: string, options: { actionId?: string | null; grantId?: string | null; delegationId?: string | null; message?: string } = {}) {
    super(reason, options);
    this.grantId = options.grantId ?? null;
    this.delegationId = options.delegationId ?? null;
  }
}

/** A delegation wider than its parent (v0.3). */
export class AuthorityEscalation extends CTRLRunError {
  override name = 'AuthorityEscalation';
  override readonly code = 'ERR_AUTHORITY_ESCALATION' as const;
  readonly reason: string;
  readonly parentId: string | null;
  readonly dimension: string | null;
  constructor(reason: string, options: { parentId?: string | null; dimension?: string | null; message?: string } = {}) {
    super(options.message ?? reason);
    this.reason = reason;
    this.parentId = options.parentId ?? null;
    this.dimension = options.dimension ?? null;
  }
}

/** The policy says a human must approve; present `requestId` once it is granted. */
export class ApprovalRequired extends CTRLRunError {
  override name = 'ApprovalRequired';
  override readonly code = 'ERR_APPROVAL_REQUIRED' as const;
  readonly requestId: string;
  readonly actionId: string | null;
  constructor(requestId: string, options: { actionId?: string | null; message?: string } = {}) {
    super(options.message ?? requestId);
    this.requestId = requestId;
    this.actionId = options.actionId ?? null;
  }
}

/** Waiting for an approval ran out of time. */
export class ApprovalTimeout extends CTRLRunError {
  override name = 'ApprovalTimeout';
  override readonly code = 'ERR_APPROVAL_TIMEOUT' as const;
  readonly requestId: string;
  constructor(requestId: string, options: { message?: string } = {}) {
    super(options.message ?? requestId);
    this.requestId = requestId;
  }
}

/** The reasons a presented approval is refused. */
export type ApprovalMismatchReason =
  | 'unknown'
  | 'mismatch'
  | 'consumed'
  | 'expired'
  | 'pending'
  | 'granted'
  | 'denied'
  | 'answered'
  /** A precondition fingerprint on one side only (the request's or the presenting pass's): never a skip. */
  | 'precondition_missing'
  /** The presenting pass's precondition fingerprint differs from the one the request pinned. */
  | 'precondition_changed'
  /** The precondition provider failed or answered something that cannot be fingerprinted. */
  | 'precondition_unavailable'
  /** Approvers are verified here, and the grant carries no verified approver. */
  | 'approver_unverified'
  /** A verified approver does not hold a pinned control's approver role. */
  | 'approver_unentitled'
  /** A verified approver is the principal that requested the action. */
  | 'approver_is_requester';

/** A presented approval was refused: `mismatch`, `consumed`, `expired`, `pending`, `unknown`, … */
export class ApprovalMismatch extends CTRLRunError {
  override name = 'ApprovalMismatch';
  override readonly code = 'ERR_APPROVAL_MISMATCH' as const;
  readonly reason: ApprovalMismatchReason;
  readonly approvalId: string | null;
  /**
   * `pending` only: this answer was recorded and counted toward the request's
   * `approvals_required` ("1 of 2 approvals: ana"), which it did not reach. False for a refusal.
   */
  readonly counted: boolean;
  constructor(reason: ApprovalMismatchReason, options: { approvalId?: string | null; message?: string; counted?: boolean } = {}) {
    super(options.message ?? reason);
    this.reason = reason;
    this.approvalId = options.approvalId ?? null;
    this.counted = options.counted === true;
  }
}

/** The effect already happened (`committed`) or another worker holds it (`in_progress`). */
export class DuplicateEffect extends CTRLRunError {
  override name = 'DuplicateEffect';
  override readonly code = 'ERR_DUPLICATE_EFFECT' as const;
  readonly state: 'committed' | 'in_progress';
  readonly effectKey: string | null;
  constructor(state: 'committed' | 'in_progress', options: { effectKey?: string | null; message?: string } = {}) {
    super(options.message ?? state);
    this.state = state;
    this.effectKey = options.effectKey ?? null;
  }
}

/** Nobody knows whether the effect happened; a blind retry is refused until it is resolved. */
export class AmbiguousEffect extends CTRLRunError {
  override name = 'AmbiguousEffect';
  override readonly code = 'ERR_AMBIGUOUS_EFFECT' as const;
  readonly effectKey: string;
  /** The action that holds or left the record (not the caller). */
  readonly actionId: string | null;
  constructor(effectKey: string, options: { actionId?: string | null; message?: string } = {}) {
    super(options.message ?? effectKey);
    this.effectKey = effectKey;
    this.actionId = options.actionId ?? null;
  }
}

/** Thrown by an executor that knows the remote did nothing; the only outcome recorded FAILED. */
export class NotExecuted extends CTRLRunError {
  override name = 'NotExecuted';
  override readonly code = 'ERR_NOT_EXECUTED' as const;
}

/** Thrown by an executor that awaits a round trip (held continuation). */
export class Suspended extends CTRLRunError {
  override name = 'Suspended';
  override readonly code = 'ERR_SUSPENDED' as const;
  readonly continuation: string;
  constructor(continuation: string, options: { message?: string } = {}) {
    if (typeof continuation !== 'string' || continuation === '') {
      throw new InvalidArgument('Suspended needs a non-empty continuation');
    }
    super(options.message ?? continuation);
    this.continuation = continuation;
  }
}

/** A credential was rejected, or the principal has expired. */
export class IdentityError extends CTRLRunError {
  override name = 'IdentityError';
  override readonly code = 'ERR_IDENTITY' as const;
  /**
   * Which identity check refused, when known: `principal_expired`, `expires_at_invalid`,
   * `provider_raised`, `not_a_principal`, or a JWT check's reason (`expired`, `bad_signature`, …).
   */
  readonly reason: string | null;
  constructor(message: string, options: { reason?: string | null; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.reason = options.reason ?? null;
  }
}

/** The store's schema is one this build refuses (newer, gapped, divergent, foreign). */
export class SchemaMismatch extends CTRLRunError {
  override name = 'SchemaMismatch';
  override readonly code = 'ERR_SCHEMA_MISMATCH' as const;
  readonly applied: readonly string[];
  readonly known: readonly string[];
  readonly running: string;
  constructor(message: string, options: { applied: readonly string[]; known: readonly string[]; running: string; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.applied = options.applied;
    this.known = options.known;
    this.running = options.running;
  }
}

/** An optional dependency is not installed; the message names the install command. */
export class MissingDependency extends CTRLRunError {
  override name = 'MissingDependency';
  override readonly code = 'ERR_MISSING_DEPENDENCY' as const;
  readonly module: string;
  readonly extra: string;
  constructor(module: string, extra: string, options: { message?: string } = {}) {
    super(options.message ?? `${module} is not installed: npm install ${extra}`);
    this.module = module;
    this.extra = extra;
  }
}

/** A store write whose COMMIT may or may not have landed (Postgres lost COMMIT). */
export class AmbiguousWrite extends CTRLRunError {
  override name = 'AmbiguousWrite';
  override readonly code = 'ERR_AMBIGUOUS_WRITE' as const;
}

/** A driver failure, wrapped with the SQL that failed and the original cause. */
export class StoreError extends CTRLRunError {
  override name = 'StoreError';
  override readonly code: ErrorCode = 'ERR_STORE';
  readonly sql: string | null;
  constructor(message: string, options: { sql?: string | null; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.sql = options.sql ?? null;
  }
}

/** The store was used after `close()`. */
export class StoreClosedError extends StoreError {
  override name = 'StoreClosedError';
  override readonly code = 'ERR_STORE_CLOSED' as const;
}

/** Any error this package raises, discriminated by `code`. */
export type AnyKernelError =
  | InvalidArgument
  | PolicyError
  | EffectKeyError
  | ActionDenied
  | AuthorityDenied
  | AuthorityEscalation
  | ApprovalRequired
  | ApprovalTimeout
  | ApprovalMismatch
  | DuplicateEffect
  | AmbiguousEffect
  | NotExecuted
  | Suspended
  | IdentityError
  | SchemaMismatch
  | MissingDependency
  | AmbiguousWrite
  | StoreError
  | StoreClosedError;

/** Whether `err` is one of this package's errors (by shape, so it works across copies). */
export function isKernelError(err: unknown): err is AnyKernelError {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { code?: unknown }).code === 'string' &&
    (err as { code: string }).code.startsWith('ERR_') &&
    err instanceof Error
  );
}
