/**
 * `withContext({ agent, user }, fn)` and `withApproval(id, fn)` (docs/spec/04-surfaces.md §10): who is acting and
 * which approval is presented, carried through every `await` inside `fn` by Node's
 * `AsyncLocalStorage`, and read by `protect` for calls that pass neither. Explicit per-call
 * options always win (`approvalId: null` presents none). Node only; in a browser pass
 * `{ principal, approvalId }` per call.
 *
 * @module
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createPrincipal, InvalidArgument, setAmbientCallContext, type AmbientCall } from '@ctrlrun/kernel';

const storage = new AsyncLocalStorage<AmbientCall>();
const read = (): AmbientCall | undefined => storage.getStore();

/**
 * Installed at each use rather than at import, so that importing has no side effect and a
 * provider removed meanwhile (`setAmbientCallContext(null)`) comes back with the next scope.
 */
function install(): void {
  setAmbientCallContext(read);
}

/**
 * Runs `fn` with `principal` as the acting principal of every protected call inside it (across
 * awaits, timers and nested calls) that brings none of its own; an approval set by an enclosing
 * {@link withApproval} stays. Returns what `fn` returns. A malformed principal is refused before
 * `fn` runs.
 */
export function withContext<T>(principal: { agent: string; user?: string | null }, fn: () => T): T {
  if (typeof fn !== 'function') throw new InvalidArgument('withContext needs a function to run');
  const checked = createPrincipal(principal);
  install();
  return storage.run({ ...storage.getStore(), principal: checked }, fn);
}

/**
 * Runs `fn` presenting approval `approvalId` to every protected call inside it that passes no
 * `approvalId`; the principal of an enclosing {@link withContext} stays. Wrap only the call the
 * approval is for: the control path binds it to one action's hash and consumes it once.
 */
export function withApproval<T>(approvalId: string, fn: () => T): T {
  if (typeof approvalId !== 'string' || approvalId === '') throw new InvalidArgument('withApproval needs an approval id (a non-empty string)');
  if (typeof fn !== 'function') throw new InvalidArgument('withApproval needs a function to run');
  install();
  return storage.run({ ...storage.getStore(), approvalId }, fn);
}

/** The ambient principal and approval here, if any. */
export function currentContext(): AmbientCall | undefined {
  return storage.getStore();
}
