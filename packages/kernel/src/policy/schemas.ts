/**
 * The policy schemas this build reads. A module of its own so that the authority loader can
 * check a standalone document's schema without importing the policy loader.
 *
 * @module
 */

/** The policy schemas this build reads, oldest first (each a superset of the one before). */
export const POLICY_SCHEMAS = Object.freeze(['ctrlrun.policy/v1', 'ctrlrun.policy/v2', 'ctrlrun.policy/v3', 'ctrlrun.policy/v4'] as const);

/** One of {@link POLICY_SCHEMAS}. */
export type PolicySchema = (typeof POLICY_SCHEMAS)[number];
