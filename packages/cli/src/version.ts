/**
 * The version `ctrlrun --version` prints and reports carry.
 *
 * @module
 */

/** This build's version (kept equal to `packages/cli/package.json`; a test checks it). */
export const VERSION = '0.1.0';
