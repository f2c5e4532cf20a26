/**
 * The policy document: loader, evaluator, policy hash and effect/resource templates.
 *
 * @module
 */
export {
  BARE_DECISION,
  DECISIONS,
  NO_MATCHING_RULE,
  POLICY_CHANGE_ACTION,
  POLICY_EFFECT_PREFIX,
  POLICY_SCHEMAS,
  Policy,
  UNKNOWN_ACTION,
  loadPolicy,
  loadPolicyDocument,
  type ActionEntry,
  type CanonicalAuthority,
  type CanonicalEnvelope,
  type CanonicalGrant,
  type Decision,
  type Evaluation,
  type HashForOptions,
  type LoadPolicyOptions,
  type PolicyControl,
  type PolicySchema,
  type UpstreamPin,
} from './policy.js';
export { DERIVED_SUBJECTS, RESERVED_ARGUMENTS, refuseDerivedArguments, splitConditionKey, strictEquals, type Condition, type Operator } from './conditions.js';
export { RESOURCE_PLACEHOLDER, parseTemplate, resolveEffectTemplate, resolveResourceTemplate, type Template, type TemplatePart } from './template.js';
export { EXAMPLE_POLICY_YAML } from './example.js';
export { checkPolicy, type Bypass, type CheckPolicyOptions, type PolicyFinding, type PolicyFindingCode } from './check.js';
export { foldForExclusion } from './conditions.js';
export { explainDecision } from './explain.js';
