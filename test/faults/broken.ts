/**
 * Broken stores for the history checker, built as the conformance suite's broken fixtures are
 * (test/stores/broken-stores.test.ts): a real sql.js store with one rule broken by raw SQL. Each
 * names the conformance case it breaks there; here, the checker must catch it from the history.
 */
import { ApprovalMismatch, AmbiguousEffect, DuplicateEffect, type StateStore } from '@ctrlrun/kernel';
import { createSqlJsStore, type SqlJsStore } from '@ctrlrun/store-sqljs';

type Overrides = (real: SqlJsStore) => Partial<Record<keyof StateStore, unknown>>;

const sql = (s: SqlJsStore, text: string, params: (string | number | null)[]) => s.driver.query(text, params);

/** A sql.js store whose listed methods are replaced; everything else is the real store. */
export function brokenStore(overrides: Overrides): () => Promise<StateStore> {
  return async () => {
    const real = await createSqlJsStore();
    // Without the one-transaction step, so the control path goes through the broken methods.
    const o = { reserveForExecution: undefined, ...overrides(real) };
    return new Proxy(real, {
      get(target, prop, receiver) {
        if (typeof prop === 'string' && prop in o) return o[prop as keyof StateStore];
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as StateStore;
  };
}

export const BROKEN: Record<string, { breaks: string; overrides: Overrides }> = {
  /** A reservation that doesn't check its key: a taken key is dropped and reserved again (e1). */
  'reserves-a-taken-key': {
    breaks: 'e1-in-process',
    overrides: (real) => ({
      async reserveEffect(key: string, actionId: string, lease: number, events?: unknown) {
        try {
          return await real.reserveEffect(key, actionId, lease, events as never);
        } catch (err) {
          if (!(err instanceof DuplicateEffect)) throw err;
          await sql(real, 'DELETE FROM effects WHERE effect_key = ?', [key]);
          return real.reserveEffect(key, actionId, lease, events as never);
        }
      },
    }),
  },
  /** A consumed approval is granted again and consumed a second time (single-use). */
  'grants-twice': {
    breaks: 'single-use',
    overrides: (real) => ({
      async consumeApprovalAndReserve(id: string, hash: string, key: string, actionId: string, lease: number, events?: unknown) {
        try {
          return await real.consumeApprovalAndReserve(id, hash, key, actionId, lease, events as never);
        } catch (err) {
          if (!(err instanceof ApprovalMismatch && err.reason === 'consumed')) throw err;
          await sql(real, "UPDATE approvals SET status = 'granted' WHERE approval_id = ?", [id]);
          return real.consumeApprovalAndReserve(id, hash, key, actionId, lease, events as never);
        }
      },
    }),
  },
  /** A refused reservation marks the key failed, so the next call runs it again (no-failed-on-refusal). */
  'guesses-failed': {
    breaks: 'no-failed-on-refusal',
    overrides: (real) => ({
      async reserveEffect(key: string, actionId: string, lease: number, events?: unknown) {
        try {
          return await real.reserveEffect(key, actionId, lease, events as never);
        } catch (err) {
          if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect)
            await sql(real, "UPDATE effects SET state = 'failed' WHERE effect_key = ?", [key]);
          throw err;
        }
      },
    }),
  },
};
