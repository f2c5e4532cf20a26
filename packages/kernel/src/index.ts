/**
 * `@ctrlrun/kernel`: the last check before an AI agent does something it can't undo.
 *
 * This root holds what an application uses: build an action, load a policy, run it through
 * `Control` or `protect`, answer approvals, read and verify receipts. Driver and store authors
 * import `@ctrlrun/kernel/store`; offline verification is `@ctrlrun/kernel/verify`.
 *
 * @module
 */
export * from './errors.js';
export { canonicalBytes, canonicalJson, parseJson, orderedJson, type JsonValue, type JsonObject } from './canonical.js';
export { argumentsForDisplay, quotedForMessage, resolveCommands, showInvisible, type ShownArguments } from './visible.js';
export { maskUrl } from './mask-url.js';
export { NEVER_SENT_CODES, neverSent } from './never-sent.js';
export { DEFAULT_MAX_PENDING_APPROVALS, PendingApprovalLimit, type PendingRefusal, type PendingSlot } from './pending-limit.js';
export { type Clock, viewTime } from './time.js';
export { type IdPrefix, type IdSource, randomIds, sequentialIds } from './ids.js';
export { type Action, type ActionInput, type ClaimValue, type Principal, createAction, createPrincipal, actionHash, actionToJson } from './action.js';
export * from './model.js';
export { checkActor, resultToJson } from './effects.js';
export {
  parseReceipt,
  receiptKeysOf,
  type ReceiptApprover,
  type ReceiptBudgetCharge,
  type ReceiptEdit,
  type ReceiptDocument,
  type ReceiptPrincipal,
  type ReceiptResult,
} from './receipt.js';
export {
  type ChainBreakName,
  type ChainBreak,
  type ChainReport,
  type ColumnFinding,
  type ReceiptView,
  receiptView,
  verifyChain,
  ChainVerifier,
} from './chain.js';
export { verifyStoredChain } from './chain-pages.js';
export {
  type ActionEntry,
  type CanonicalAuthority,
  type CanonicalEnvelope,
  type CanonicalGrant,
  type Condition,
  type Decision,
  type Evaluation,
  type HashForOptions,
  type LoadPolicyOptions,
  type Operator,
  type PolicyControl,
  type PolicySchema,
  type Template,
  type TemplatePart,
  type UpstreamPin,
  EXAMPLE_POLICY_YAML,
  POLICY_CHANGE_ACTION,
  explainDecision,
  Policy,
  loadPolicy,
  parseTemplate,
  resolveEffectTemplate,
} from './policy/index.js';
export { type Bypass, type CheckPolicyOptions, type PolicyFinding, type PolicyFindingCode, checkPolicy } from './policy/index.js';
export { type EventSink, type SinkLogger, type JsonlFile, type JsonlWriter, callbackSink, eventLine, jsonlSink } from './events.js';
export type { StateStore, DelegationRecord, ApprovalEditWrite, ApprovalEditResult } from './store/state-store.js';
export { SCHEMA_LEVEL } from './store/migrations.js';
export {
  Control,
  type ApprovalEdit,
  type GrantOptions,
  type ControlOptions,
  type BreakGlassOptions,
  type DelegateOptions,
  type ExecuteOptions,
  type ExecuteResult,
  type Executor,
  type ExecutionContext,
  type Logger,
  type ReconcileHook,
  type ResolveOptions,
  type WaitForAnswerOptions,
  type ApproverIdentity,
  type PreconditionProvider,
  type VerifiedPrincipal,
  preconditionFingerprint,
  toolSchemaDigest,
  type UpstreamObservation,
  describeError,
} from './control.js';
export { approvalProgress } from './approvals.js';
export { protect, type ProtectOptions, type CallOptions, type Protected } from './protect.js';
export { answerCommands, type WaitingFor } from './protect.js';
export { intake, IntakeRefusal, type Intake, type IntakeReason, type SurfaceCall } from './intake.js';
export { CALLER_KEY_PREFIX, scopedCallerKey, templateCollision } from './caller-keys.js';
export { type AmbientCall, type AmbientCallProvider, ambientCall, setAmbientCallContext } from './ambient.js';
export { toolRefusal, type ToolRefusal } from './tool-refusal.js';
export { editedToolResult, isEditedToolResult, unusedEditFor, type EditedToolResult } from './tool-edit.js';
export {
  type ApprovalProvider,
  type ProviderOptions,
  type ScriptedStep,
  type WaitOptions,
  LocalApprovalProvider,
  ScriptedApprovalProvider,
} from './approval-providers.js';
export {
  Authority,
  loadAuthority,
  loadGrant,
  type AuthorityDenyReason,
  type AuthorityOptions,
  type AuthorityResult,
  type BreakGlassEnvelope,
  type CreatedVia,
  type Delegation,
  type EscalationReason,
  type PlanBreakGlassOptions,
  type PlanDelegationOptions,
  type ResourceDerivation,
} from './authority/index.js';
export { Grant, type Budget, type BudgetInput, type GrantInput, type Instant, type SubjectPatterns } from './authority/index.js';
export {
  type IdentityContext,
  type IdentityProvider,
  type IdentityLogger,
  type StaticIdentityOptions,
  type HeaderIdentityOptions,
  StaticIdentityProvider,
  HeaderIdentityProvider,
} from './identity.js';
export { STATS_SCHEMA, type StatsDocument, type StatsOptions, parseSince, stats } from './stats.js';
export {
  type Anchor,
  type AnchorBreak,
  type AnchorBreakName,
  type AnchorKind,
  type AnchorProvider,
  type AnchorReport,
  type AnchoredStore,
  AnchorUnavailable,
  checkAnchor,
} from './anchor.js';
export { type AnchorEndpointOptions, type HttpAnchorProviderOptions, anchorEndpoint, httpAnchorProvider } from './anchor-http.js';
export { type PlaceHoldOptions, type PruneChainOptions, anchorChain, listHolds, placeHold, pruneChain, releaseHold, verifyAnchors } from './retention.js';
export {
  type Checkpoint,
  type Hold,
  type HoldDraft,
  type PruneOptions,
  type PruneRefusal,
  type PruneResult,
  PruneRefused,
  type RetentionStore,
} from './store/retention.js';
export { BudgetExhausted, type BudgetCharge, type LedgerEntry } from './budget.js';
export { type BudgetSpend, budgetSpend, windowText } from './budget-report.js';
