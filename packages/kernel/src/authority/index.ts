/**
 * Authority: grants, patterns, containment, evaluation and delegation planning (docs/spec/02-authority-observe-verify.md §2–§3).
 * Pure; `Control` performs every write.
 *
 * @module
 */
export {
  AUTHORITY_GRANT,
  AUTHORITY_REASONS,
  Authority,
  DEFAULT_MAX_DELEGATION_DEPTH,
  DELEGATION_ID,
  authorityEventData,
  checkResourceScopes,
  resourceScopeGap,
  resourceScopeGaps,
  resourceScopeMessage,
  delegationFromRecord,
  delegationToRecord,
  loadAuthority,
  loadGrant,
  type AuthorityDenyReason,
  type BreakGlassEnvelope,
  type AuthorityOptions,
  type AuthorityResult,
  type CreatedVia,
  type Delegation,
  type EscalationReason,
  type PlanBreakGlassOptions,
  type PlanDelegationOptions,
  type ResourceDerivation,
} from './authority.js';
export { DIMENSIONS, containedDimension, type Dimension } from './containment.js';
export {
  DELEGATION_ID_PREFIX,
  GRANT_ID,
  GRANT_KEYS,
  Grant,
  MAX_BUDGET_WINDOW,
  grantFromJson,
  grantToJson,
  parseDuration,
  parseInstant,
  type Budget,
  type BudgetInput,
  type GrantInput,
  type Instant,
  type SubjectPatterns,
} from './grant.js';
export {
  ACTION_SEPARATOR,
  DEEP_WILDCARD,
  RESOURCE_SEPARATOR,
  TASK_SEPARATOR,
  matchesPattern,
  patternContains,
  patternError,
  type Separator,
} from './patterns.js';
