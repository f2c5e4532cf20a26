/**
 * Verify's two ways of not producing a report.
 *
 * @module
 */

/** Verify refused to run (exit 2): observe mode, a policy that does not load, a bad selection. */
export class VerifyRefusal extends Error {
  override name = 'VerifyRefusal';
}

/** Verify itself went wrong (exit 3): a vector in an unintended rule, an impossible raise, a store that will not open. */
export class VerifyInternalError extends Error {
  override name = 'VerifyInternalError';
}
