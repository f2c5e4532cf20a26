/**
 * `@ctrlrun/kernel/verify`: proves, against the operator's own policy, that the declared
 * guarantees hold: each scenario in a scratch store, with fake executors and no network. Runs in
 * Node, a browser tab and a worker alike; the caller injects scratch stores and, where it can,
 * a process launcher for G4. The kernel itself never imports this module.
 *
 * @module
 */
export { CATALOGUE, GUARANTEES, GUARANTEE_IDS, NOT_APPLICABLE, guarantee, isGuaranteeId, type Guarantee, type GuaranteeId } from './catalogue.js';
export { VerifyInternalError, VerifyRefusal } from './errors.js';
export { G4_PROCESSES, absentActionName } from './guarantees.js';
export { DEFAULT_T0, scenarioInstant } from './select.js';
export {
  loadVerifyPolicy,
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
  VERIFY_SCHEMA,
  badgeText,
  renderVerifyJson,
  renderVerifyJunit,
  renderVerifyText,
  summarize,
  summaryLine,
  verifyBadge,
  verifyExitCode,
  type Counterexample,
  type GuaranteeResult,
  type GuaranteeStatus,
  type VerifyBadge,
  type VerifyReport,
} from './report.js';
export { VERIFY_AGENT, describeOutcome } from './rig.js';
export { MAX_CANDIDATES, vectorFor, vectorForRule, type ActionView, type RuleView, type Vector } from './synthesize.js';
