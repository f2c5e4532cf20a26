/**
 * The control path's public names, for the modules that import them by this path. The code is
 * in `./control/`: the class in `control.ts`, the plan of one action in `attempt.ts`.
 *
 * @module
 */
export { Control } from './control/control.js';
export { describeError } from './control/pass.js';
export type {
  ControlOptions,
  DelegateOptions,
  ExecuteOptions,
  ExecuteResult,
  Executor,
  ExecutionContext,
  Logger,
  ReconcileHook,
  ResolveOptions,
} from './control/types.js';
export type { ApprovalEdit, GrantOptions } from './control/edit.js';
export type { WaitForAnswerOptions } from './control/wait.js';
export type { BreakGlassOptions } from './control/break-glass.js';
export { preconditionFingerprint, type ApproverIdentity, type PreconditionProvider, type VerifiedPrincipal } from './control/presented.js';
export { toolSchemaDigest } from './control/upstream.js';
export type { UpstreamObservation } from './control/types.js';
