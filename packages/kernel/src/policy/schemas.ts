/**
 * The policy schemas this build reads. A module of its own so that the authority loader can
 * check a standalone document's schema without importing the policy loader.
 *
 * @module
 */

/**
 * The policy schemas this build reads, oldest first (each a superset of the one before): v1–v4
 * as at the original's 0.6, v5 (`max_attempts`), v6 (`approvals_required`, `approver_role`, the
 * reserved `ctrlrun.policy.change`), v7 (grant `tasks` and `budgets`) and v8 (`upstream`), as the
 * original 0.12.2 reads them.
 */
export const POLICY_SCHEMAS = Object.freeze([
  'ctrlrun.policy/v1',
  'ctrlrun.policy/v2',
  'ctrlrun.policy/v3',
  'ctrlrun.policy/v4',
  'ctrlrun.policy/v5',
  'ctrlrun.policy/v6',
  'ctrlrun.policy/v7',
  'ctrlrun.policy/v8',
] as const);

/** One of {@link POLICY_SCHEMAS}. */
export type PolicySchema = (typeof POLICY_SCHEMAS)[number];

/** Whether `schema` is `minimum` or a later version; an unknown name is never (fail closed). */
export function schemaAtLeast(schema: string, minimum: PolicySchema): boolean {
  const at = (POLICY_SCHEMAS as readonly string[]).indexOf(schema);
  return at >= 0 && at >= POLICY_SCHEMAS.indexOf(minimum);
}
