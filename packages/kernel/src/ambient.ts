/**
 * The ambient call context: a hook through which a runtime that has async-local storage (the
 * Node entry's `withContext` / `withApproval` in `@ctrlrun/store-node`) tells {@link protect} who
 * is acting and which approval is presented, when a call passes neither. The kernel only asks;
 * it holds no storage of its own, so it stays runtime-neutral (a browser passes options per call).
 *
 * @module
 */
import type { Principal } from './action.js';
import { InvalidArgument } from './errors.js';

/** What the ambient context may supply to a protected call. */
export interface AmbientCall {
  readonly principal?: { agent: string; user?: string | null } | Principal | null;
  readonly approvalId?: string | null;
}

/** Returns the ambient context of the current call, or undefined. */
export type AmbientCallProvider = () => AmbientCall | undefined;

let provider: AmbientCallProvider | null = null;

/**
 * Installs (or, with `null`, removes) the ambient context provider. One per running program: the Node
 * entry installs its own the first time `withContext` or `withApproval` is called.
 */
export function setAmbientCallContext(next: AmbientCallProvider | null): void {
  if (next !== null && typeof next !== 'function') throw new InvalidArgument('the ambient call context provider must be a function or null');
  provider = next;
}

/** The ambient context now, or undefined (none installed, or the provider failed). */
export function ambientCall(): AmbientCall | undefined {
  if (provider === null) return undefined;
  try {
    const got = provider();
    return got !== null && typeof got === 'object' ? got : undefined;
  } catch {
    return undefined;
  }
}
