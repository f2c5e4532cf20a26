/**
 * T140: the conformance suite must catch broken stores. Each fixture wraps a real sql.js store
 * and breaks one rule (with raw SQL where the contract would not let it); its named case must
 * fail by an assertion, and the unbroken store must pass the same case.
 */
import {
  AmbiguousEffect,
  ApprovalMismatch,
  DuplicateEffect,
  InvalidArgument,
  NotExecuted,
  type Clock,
  type DelegationRecord,
  type StateStore,
} from '@ctrlrun/kernel';
import { parseTime } from '@ctrlrun/kernel/store';
import { createSqlJsStore, type SqlJsStore } from '@ctrlrun/store-sqljs';
import { describe, expect, it } from 'vitest';
import { storeCases, type CaseId, type StoreFactory } from '../conformance/store.case.js';

type Overrides = (real: SqlJsStore, clock: Clock) => Partial<Record<keyof StateStore, unknown>>;

/** A store whose listed methods are replaced; everything else is the real store. */
function broken(overrides: Overrides): StoreFactory {
  const open = async (clock: Clock = () => new Date()): Promise<StateStore> => {
    const real = await createSqlJsStore({ clock });
    const o = overrides(real, clock);
    return new Proxy(real, {
      get(target, prop, receiver) {
        if (typeof prop === 'string' && prop in o) return o[prop as keyof StateStore];
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as StateStore;
  };
  return { name: 'broken', dialect: 'sqlite', open };
}

const sql = (s: SqlJsStore, text: string, params: (string | number | null)[]) => s.driver.query(text, params);

const FIXTURES: Record<string, { breaks: CaseId; overrides: Overrides }> = {
  'releases-an-expired-lease': {
    breaks: 'lease-expiry',
    overrides: (real, clock) => ({
      async reserveEffect(key: string, actionId: string, lease: number) {
        const r = await real.getEffect(key);
        if (r && (r.state === 'reserved' || r.state === 'executing') && r.leaseExpiresAt && parseTime(r.leaseExpiresAt) < clock()) {
          await sql(real, 'DELETE FROM effects WHERE effect_key = ?', [key]);
        }
        return real.reserveEffect(key, actionId, lease);
      },
    }),
  },
  'refuses-with-the-wrong-error': {
    breaks: 'e1-in-process',
    // Still one winner, but the losers hear AmbiguousEffect instead of DuplicateEffect (state in_progress).
    overrides: (real) => ({
      async reserveEffect(key: string, actionId: string, lease: number) {
        try {
          return await real.reserveEffect(key, actionId, lease);
        } catch (err) {
          if (!(err instanceof DuplicateEffect)) throw err;
          throw new AmbiguousEffect(key, { actionId, message: `effect ${key} is in progress` });
        }
      },
    }),
  },
  'two-winners': {
    breaks: 'e1-in-process',
    overrides: (real) => ({
      async reserveEffect(key: string, actionId: string, lease: number) {
        try {
          return await real.reserveEffect(key, actionId, lease);
        } catch (err) {
          if (!(err instanceof DuplicateEffect)) throw err;
          return { effectKey: key, actionId, attempt: 1, leaseExpiresAt: '2026-01-01T12:05:00+00:00' };
        }
      },
    }),
  },
  'grants-twice': {
    breaks: 'single-use',
    overrides: (real) => ({
      async consumeApproval(id: string, hash: string) {
        try {
          return await real.consumeApproval(id, hash);
        } catch (err) {
          if (!(err instanceof ApprovalMismatch && err.reason === 'consumed')) throw err;
          await sql(real, "UPDATE approvals SET status = 'granted' WHERE approval_id = ?", [id]);
          return real.consumeApproval(id, hash);
        }
      },
    }),
  },
  'consumes-before-reserving': {
    breaks: 'atomic-with-reservation',
    overrides: (real) => ({
      async consumeApprovalAndReserve(id: string, hash: string, key: string, actionId: string, lease: number) {
        const approval = await real.consumeApproval(id, hash);
        return [approval, await real.reserveEffect(key, actionId, lease)];
      },
    }),
  },
  'resolves-anything': {
    breaks: 'only-ambiguous',
    overrides: (real) => ({
      async resolveEffect(key: string, state: string, resolver: string) {
        const r = await real.getEffect(key);
        if (r && r.state !== 'ambiguous') {
          await sql(real, 'UPDATE effects SET state = ?, resolved_by = ? WHERE effect_key = ?', [state, resolver, key]);
          return real.getEffect(key);
        }
        return real.resolveEffect(key, state as 'committed', resolver);
      },
    }),
  },
  'guesses-failed': {
    breaks: 'no-failed-on-refusal',
    overrides: (real) => {
      const guessing =
        (name: 'reserveEffect' | 'beginExecution' | 'commitEffect' | 'failEffect' | 'extendLease') =>
        async (key: string, ...rest: unknown[]) => {
          try {
            return await (real[name] as (...a: unknown[]) => Promise<unknown>).call(real, key, ...rest);
          } catch (err) {
            if (err instanceof DuplicateEffect || err instanceof AmbiguousEffect)
              await sql(real, "UPDATE effects SET state = 'failed' WHERE effect_key = ?", [key]);
            throw err;
          }
        };
      return {
        reserveEffect: guessing('reserveEffect'),
        beginExecution: guessing('beginExecution'),
        commitEffect: guessing('commitEffect'),
        failEffect: guessing('failEffect'),
        extendLease: guessing('extendLease'),
      };
    },
  },
  'raises-not-executed': {
    breaks: 'no-not-executed',
    overrides: (real) => ({
      async failEffect(key: string, actionId: string, error: string) {
        try {
          return await real.failEffect(key, actionId, error);
        } catch (err) {
          throw new NotExecuted(`could not fail ${key}: ${(err as Error).message}`);
        }
      },
    }),
  },
  'coerces-an-argument': {
    breaks: 'action-round-trip',
    overrides: (real) => ({
      async getApproval(id: string) {
        const row = (await sql(real, 'SELECT action_json FROM approvals WHERE approval_id = ?', [id])).rows[0] as { action_json: string } | undefined;
        if (row) await sql(real, 'UPDATE approvals SET action_json = ? WHERE approval_id = ?', [row.action_json.replace(/"flag":true/, '"flag":1'), id]);
        return real.getApproval(id);
      },
    }),
  },
  'renumbers-events': {
    breaks: 'event-ids',
    overrides: (real) => ({
      async events() {
        return (await real.events()).map((e, i) => ({ ...e, eventId: i }));
      },
    }),
  },
  'admits-two-resumptions': {
    breaks: 'one-resumption',
    overrides: (real) => {
      // Remembers what it handed out, and a later take of a spent value puts it back and takes it
      // again: a second caller resumes the same suspension. (The raw write happens outside any
      // store transaction, so it is not rolled back by a concurrent refused take.)
      const handedOut = new Map<string, string>();
      return {
        async takeContinuation(continuation: string) {
          try {
            const taken = await real.takeContinuation(continuation);
            handedOut.set(continuation, taken.effectKey);
            return taken;
          } catch (err) {
            const key = handedOut.get(continuation);
            if (!(err instanceof InvalidArgument) || key === undefined) throw err;
            await sql(real, 'UPDATE continuations SET continuation = ? WHERE effect_key = ?', [continuation, key]);
            return real.takeContinuation(continuation);
          }
        },
      };
    },
  },
  'upserts-a-delegation': {
    breaks: 'insert-not-upsert',
    overrides: (real) => ({
      // INSERT OR REPLACE in effect: a second act under one id silently rewrites the first.
      async putDelegation(record: DelegationRecord) {
        await sql(real, 'DELETE FROM delegations WHERE delegation_id = ?', [record.delegationId]);
        return real.putDelegation(record);
      },
    }),
  },
};

describe('T140 broken-store fixtures fail their named case', () => {
  for (const [name, { breaks, overrides }] of Object.entries(FIXTURES)) {
    it(`test_T140_${name.replace(/-/g, '_')}_fails_${breaks.replace(/-/g, '_')}`, async () => {
      const failure = await storeCases[breaks].run(broken(overrides)).then(
        () => null,
        (err: unknown) => err,
      );
      expect(failure, `${name} must make ${breaks} fail`).not.toBeNull();
      // Failed by an assertion of the case, not by a crash of the fixture.
      expect((failure as Error).name).toBe('AssertionError');
    });
  }

  it('the unbroken wrapper passes every named case (the fixtures, not the wrapping, break them)', async () => {
    for (const { breaks } of Object.values(FIXTURES)) await storeCases[breaks].run(broken(() => ({})));
  });

  it('forgets-the-unknown fails ambiguous-survives', async () => {
    // A store that does not keep ambiguous records across a restart.
    const bytes = new WeakMap<object, { load(): Promise<Uint8Array | null>; save(b: Uint8Array): Promise<void> }>();
    const factory: StoreFactory = {
      name: 'forgets-the-unknown',
      dialect: 'sqlite',
      open: async (clock) => {
        let saved: Uint8Array | null = null;
        const p = { load: async () => saved, save: async (b: Uint8Array) => void (saved = b) };
        const s = await createSqlJsStore({ clock, persistence: p });
        bytes.set(s, p);
        return s;
      },
      reopen: async (old, clock) => {
        const p = bytes.get(old)!;
        const s = await createSqlJsStore({ clock, persistence: p });
        await s.driver.query("DELETE FROM effects WHERE state = 'ambiguous'");
        bytes.set(s, p);
        return s;
      },
    };
    const failure = await storeCases['ambiguous-survives'].run(factory).then(
      () => null,
      (e: unknown) => e,
    );
    expect((failure as Error | null)?.name).toBe('AssertionError');
  });
});
