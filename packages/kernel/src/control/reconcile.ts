/**
 * Reconcile: the hook is asked what happened to an ambiguous effect, at most once per execute.
 *
 * @module
 */
import { recordEvent } from './evidence.js';
import { type ControlContext, type Pass, RECONCILED, describeError } from './pass.js';
import type { ReconcileHook } from './types.js';
import { shownId } from '../visible.js';

/** Asks the hook (at most once per execute); true if it moved the record. */
export async function blockingReconcile(ctx: ControlContext, pass: Pass, hook: ReconcileHook | undefined): Promise<boolean> {
  if (hook === undefined || pass.hookCalls > 0) return false;
  return reconcile(ctx, pass, hook, 'blocking');
}

export async function reconcile(ctx: ControlContext, pass: Pass, hook: ReconcileHook, trigger: 'blocking' | 'eager'): Promise<boolean> {
  pass.hookCalls++;
  const key = pass.effectKey as string;
  await recordEvent(ctx, pass, 'RECONCILIATION_STARTED', { effect_key: key, trigger });
  let answer: string;
  const extra: Record<string, string> = {};
  try {
    const got: unknown = await hook(key);
    if (got === 'committed' || got === 'not_executed' || got === 'unknown') answer = got;
    else {
      answer = 'unknown';
      extra['reason'] = 'invalid_return';
      ctx.logger.warn(`[ctrlrun] reconcile hook for ${shownId(key)} returned ${String(got)}; treated as unknown`);
    }
  } catch (err) {
    answer = 'unknown';
    extra['reason'] = 'raised';
    extra['error'] = describeError(err);
    ctx.logger.warn(`[ctrlrun] reconcile hook for ${shownId(key)} raised; treated as unknown: ${describeError(err)}`);
  }
  await recordEvent(ctx, pass, 'RECONCILIATION_RESOLVED', { outcome: answer, ...extra });
  const target = RECONCILED[answer];
  if (target === undefined) return false;
  const resolver = `reconcile:${pass.action.name}`;
  try {
    await ctx.store.resolveEffect(key, target, resolver);
  } catch (err) {
    ctx.logger.warn(`[ctrlrun] the store refused the reconcile hook's answer for ${shownId(key)}: ${describeError(err)}`);
    return false;
  }
  await recordEvent(ctx, pass, 'EFFECT_RESOLVED', { state: target, resolver, resolved_by: 'reconcile' });
  return true;
}
