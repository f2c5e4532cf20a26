/**
 * `@ctrlrun/kernel/verify`: proves, against the operator's own policy, that the declared
 * guarantees hold: each scenario in a scratch store, with fake executors and no network. Runs in
 * Node, a browser tab and a worker alike; the caller injects scratch stores and, where it can,
 * a process launcher for G4. The kernel itself never imports this module.
 *
 * @module
 */
export { CATALOGUE, GUARANTEE_IDS, NOT_APPLICABLE, guarantee, type Guarantee, type GuaranteeId } from './catalogue.js';
export { VerifyInternalError, VerifyRefusal } from './errors.js';

export {
  parseOnly,
  runVerify,
  type ProcessLauncher,
  type ProcessOutcome,
  type ProcessReport,
  type ProcessRequest,
  type ScratchRequest,
  type ScratchStore,
  type ScratchStoreFactory,
  type VerifyOptions,
} from './engine.js';
export {
  badgeText,
  renderVerifyJson,
  renderVerifyJunit,
  renderVerifyText,
  summaryLine,
  verifyBadge,
  verifyExitCode,
  type Counterexample,
  type GuaranteeResult,
  type GuaranteeStatus,
  type VerifyBadge,
  type VerifyReport,
} from './report.js';
export { describeOutcome } from './rig.js';
export { vectorFor, type ActionView, type RuleView, type Vector } from './synthesize.js';
