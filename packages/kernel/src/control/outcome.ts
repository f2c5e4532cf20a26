/**
 * The outcome rule: the executor's result becomes `committed`, a `NotExecuted` `failed`, anything
 * else `ambiguous`; a `Suspended` holds the continuation. The outcome, its event and the receipt
 * are written in one transaction.
 *
 * @module
 */
import { AmbiguousEffect, DuplicateEffect, InvalidArgument, NotExecuted, Suspended } from '../errors.js';
import type { EffectRecord } from '../model.js';
import type { TrailingEvents } from '../store/state-store.js';
import { shownId } from '../visible.js';
import { extensionRefusal } from './gates.js';
import { reconcile } from './reconcile.js';
import { note, recordEvent, trailing, afterWrite, receiptDraft, recordReceipt, receiptOf } from './evidence.js';
import { type ControlContext, type Pass, decidedToJson, describeError } from './pass.js';
import type { Executor, ExecuteOptions, ExecuteResult } from './types.js';

export async function runExecutor<T>(ctx: ControlContext, pass: Pass, executor: Executor<T>, options: ExecuteOptions): Promise<ExecuteResult<T>> {
  const { action } = pass;
  // The key this attempt may write an outcome to. Observe mode can run without holding it, and
  // then the record belongs to whoever does: the outcome is never written.
  const key = pass.observation && !pass.held ? null : pass.effectKey;
  let value: T;
  try {
    value = await executor(action.canonicalArguments, { action, effectKey: key, attempt: pass.attempt });
  } catch (thrown) {
    if (thrown instanceof Suspended) return suspended(ctx, pass, key, thrown);
    if (thrown instanceof NotExecuted) {
      const error = thrown.message;
      if (key !== null) {
        // The outcome, its event and the receipt in one transaction.
        const failed = trailing(ctx, pass, () => [['EXECUTION_FAILED', { error }]], receiptDraft(ctx, pass, { result: 'failed', error }));
        let record: EffectRecord;
        try {
          record = await ctx.store.failEffect(key, action.actionId, error, failed);
        } catch (refusal) {
          return outcomeRefused(ctx, pass, refusal);
        }
        await afterWrite(ctx, pass, record, failed);
        await receiptOf(ctx, pass, failed);
      } else {
        note(ctx, pass, 'EXECUTION_FAILED', { error });
        await recordReceipt(ctx, pass, { result: 'failed', error });
      }
      throw thrown;
    }
    const error = describeError(thrown);
    let marked = key === null;
    let written: [EffectRecord, TrailingEvents<EffectRecord>] | null = null;
    if (key !== null) {
      const ambiguous = trailing(ctx, pass, () => [['EXECUTION_AMBIGUOUS', { error }]], receiptDraft(ctx, pass, { result: 'ambiguous', error }));
      try {
        written = [await ctx.store.markAmbiguous(key, action.actionId, error, ambiguous), ambiguous];
        marked = true;
      } catch (refusal) {
        ctx.logger.warn(`[ctrlrun] could not record ${shownId(key)} as ambiguous: ${describeError(refusal)}`);
      }
    }
    // A refused mark still leaves the event: the outcome is unknown either way.
    if (written !== null) {
      await afterWrite(ctx, pass, ...written);
      await receiptOf(ctx, pass, written[1]);
    } else {
      note(ctx, pass, 'EXECUTION_AMBIGUOUS', { error });
      await recordReceipt(ctx, pass, { result: 'ambiguous', error });
    }
    if (key !== null && marked && options.reconcileEagerly && options.reconcile && pass.hookCalls === 0) {
      await reconcile(ctx, pass, options.reconcile, 'eager');
    }
    throw thrown;
  }
  if (key !== null) {
    // The outcome, its event and the chained receipt in one transaction.
    const committed = trailing(ctx, pass, () => [['EXECUTION_COMMITTED', {}]], receiptDraft(ctx, pass, { result: 'committed', error: null }));
    let record: EffectRecord;
    try {
      record = await ctx.store.commitEffect(key, action.actionId, value, committed);
    } catch (refusal) {
      return outcomeRefused(ctx, pass, refusal);
    }
    await afterWrite(ctx, pass, record, committed);
    return { value, receipt: await receiptOf(ctx, pass, committed) };
  }
  note(ctx, pass, 'EXECUTION_COMMITTED', {});
  return { value, receipt: await recordReceipt(ctx, pass, { result: 'committed', error: null }) };
}

/**
 * The executor suspended: the record stays `executing`, its lease extended by the
 * suspend timeout and the continuation held (next round), `EXECUTION_SUSPENDED {held, round}`,
 * no receipt, the `Suspended` rethrown. Without an effect key there is nothing to hold it
 * against; and a hold the store refuses leaves nothing to resume: both are recorded as an
 * unknown outcome (never `failed`: the executor may have acted before it suspended).
 */
export async function suspended(ctx: ControlContext, pass: Pass, key: string | null, thrown: Suspended): Promise<never> {
  const { action } = pass;
  let refusal: Error | null = null;
  if (key === null) {
    refusal = new InvalidArgument(`${action.name} suspended, but it has no effect key: there is nothing to hold the continuation against`);
  } else {
    refusal = await extensionRefusal(ctx, pass);
    if (refusal === null) {
      try {
        const round = await ctx.store.holdContinuation(action, key, thrown.continuation, ctx.suspendTimeout);
        await recordEvent(ctx, pass, 'EXECUTION_SUSPENDED', { held: true, round, decided: decidedToJson(pass) });
        throw thrown;
      } catch (err) {
        if (err === thrown) throw err;
        refusal = err as Error;
      }
    }
  }
  const error = `${describeError(thrown)} (not held: ${describeError(refusal)})`;
  let written: [EffectRecord, TrailingEvents<EffectRecord>] | null = null;
  if (key !== null) {
    const ambiguous = trailing(ctx, pass, () => [['EXECUTION_AMBIGUOUS', { error }]]);
    try {
      written = [await ctx.store.markAmbiguous(key, action.actionId, error, ambiguous), ambiguous];
    } catch (markRefused) {
      ctx.logger.warn(`[ctrlrun] could not record ${shownId(key)} as ambiguous: ${describeError(markRefused)}`);
    }
  }
  if (written !== null) await afterWrite(ctx, pass, ...written);
  else note(ctx, pass, 'EXECUTION_AMBIGUOUS', { error });
  await recordReceipt(ctx, pass, { result: 'ambiguous', error });
  throw refusal;
}

/** The store refused the outcome write: record it ambiguous and raise the store's refusal. */
export async function outcomeRefused(ctx: ControlContext, pass: Pass, refusal: unknown): Promise<never> {
  if (refusal instanceof DuplicateEffect || refusal instanceof AmbiguousEffect) {
    const error = describeError(refusal);
    note(ctx, pass, 'EXECUTION_AMBIGUOUS', { error });
    await recordReceipt(ctx, pass, { result: 'ambiguous', error });
  }
  throw refusal;
}
