/**
 * Retention's conformance cases (spec 05 §5.2–§5.4), under the original's test names
 * (`tests/test_retention.py`, `tests/test_anchor.py`): the prune under its checkpoint, holds,
 * the unsettled-effect refusal, and the anchors cache. The original's store suite has none; these
 * run on every store this build ships (sql.js, better-sqlite3, PGlite, PostgreSQL, the Durable
 * Object in workerd), each through the store's own `retention()`.
 *
 * @module
 */
import { checkAnchor, type Anchor, type AnchorProvider } from '../anchor.js';
import { createAction } from '../action.js';
import { verifyChain } from '../chain.js';
import { Control } from '../control/control.js';
import { loadPolicy } from '../policy/index.js';
import { placeHold, pruneChain, releaseHold } from '../retention.js';
import { PruneRefused } from '../store/retention.js';
import type { StateStore } from '../store/state-store.js';
import { expect } from './expect.js';
import type { CaseDef, StoreFactory } from './cases.js';
import type { Clock } from '../time.js';

/** A clock from 2026-01-01T12:00Z that moves 1 ms per reading (cases.ts imports this file, so nothing of its is imported here but types). */
function steppingClock(): Clock {
  let t = Date.parse('2026-01-01T12:00:00Z');
  return () => new Date((t += 1));
}

/** The retention cases, by id. */
export const RETENTION_CASE_IDS = ['prune-checkpoint', 'prune-hold', 'prune-unsettled', 'anchor-cache'] as const;

type RetentionCaseId = (typeof RETENTION_CASE_IDS)[number];

const POLICY = loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    decision: allow\n');

async function refunds(control: Control, ids: readonly string[]): Promise<void> {
  for (const id of ids)
    await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 1 }, principal: { agent: 'a' } }), async () => id);
}

async function refusedPrune(p: Promise<unknown>, what: string): Promise<PruneRefused> {
  const out = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(out, `${what}: refused with PruneRefused`).toBeInstanceOf(PruneRefused);
  return out as PruneRefused;
}

async function verifiedFromCheckpoint(store: StateStore) {
  const checkpoint = (await store.pruneCheckpoint?.()) ?? null;
  return verifyChain(await store.receipts(), await store.chainHead(), { checkpoint });
}

function run(id: RetentionCaseId, test: string, body: (store: StateStore, control: Control) => Promise<void>): [RetentionCaseId, CaseDef] {
  return [
    id,
    {
      suite: 'retention',
      test,
      async run(factory: StoreFactory) {
        const clock = steppingClock();
        const store = await factory.open(clock);
        try {
          expect(typeof store.retention, `${store.name} has retention()`).toBe('function');
          await body(store, new Control({ policy: POLICY, store, clock }));
        } finally {
          await store.close();
        }
      },
    },
  ];
}

export const retentionCases: Record<RetentionCaseId, CaseDef> = Object.fromEntries([
  run('prune-checkpoint', 'test_T540_a_prune_leaves_the_chain_verifiable_across_the_gap', async (store, control) => {
    await refunds(control, ['c1', 'c2', 'c3', 'c4']);
    const hash3 = (await store.receipts()).find((r) => r.seq === 3)!.hash;
    const result = await pruneChain(store, { through: 3, olderThanMs: 0, by: 'ana' });
    expect(result.checkpoint, 'the checkpoint').toMatchObject({ seq: 3, hash: hash3, schema: 'ctrlrun.receipt/v7' });
    expect(await store.pruneCheckpoint!(), 'the checkpoint row').toEqual({ seq: 3, hash: hash3 });
    expect(
      (await store.receipts()).map((r) => r.seq),
      'seq 1–3 deleted, the prune receipt kept',
    ).toEqual([4, 5]);
    expect(await verifiedFromCheckpoint(store), 'verified from the checkpoint').toMatchObject({ ok: true, verified: 2 });
    expect((await refusedPrune(pruneChain(store, { through: 3, olderThanMs: 0, by: 'ana' }), 'again')).reason, 'forward only').toBe('not_forward');
    expect((await refusedPrune(pruneChain(store, { through: 99, olderThanMs: 0, by: 'ana' }), 'the head')).reason, 'never the newest').toBe('through_head');
  }),
  run('prune-hold', 'test_T545_a_prune_overlapping_a_held_range_is_refused_with_the_hold_named', async (store, control) => {
    await refunds(control, ['h1', 'h2', 'h3']);
    const hold = await placeHold(store, { fromSeq: 2, reason: 'matter 9', by: 'legal', holdId: 'hold_9' });
    expect(hold, 'the hold').toMatchObject({ holdId: 'hold_9', fromSeq: 2, toSeq: null, releasedAt: null });
    const refused = await refusedPrune(pruneChain(store, { through: 2, olderThanMs: 0, by: 'ana' }), 'held');
    expect(refused.reason, 'the reason').toBe('held');
    expect(refused.detail.holdId, 'the hold named').toBe('hold_9');
    expect(await store.pruneCheckpoint!(), 'nothing pruned').toBeNull();
    expect((await releaseHold(store, 'hold_9', 'legal')).releasedBy, 'released by').toBe('legal');
    await pruneChain(store, { through: 2, olderThanMs: 0, by: 'ana' });
    expect((await verifiedFromCheckpoint(store)).ok, 'verified after').toBe(true);
  }),
  run('prune-unsettled', 'test_T546_a_ledger_row_whose_effect_still_holds_its_charge_is_refused', async (store, control) => {
    await refunds(control, ['u1']);
    await control
      .execute(createAction({ name: 'stripe.refund', arguments: { payment_id: 'lost', amount: 1 }, principal: { agent: 'a' } }), async () => {
        throw new Error('socket hang up');
      })
      .catch(() => undefined);
    await refunds(control, ['u2', 'u3']);
    const refused = await refusedPrune(pruneChain(store, { through: 3, olderThanMs: 0, by: 'ana' }), 'unsettled');
    expect(refused.detail, 'the effect named').toMatchObject({ effectKey: 'refund:lost', state: 'ambiguous' });
    expect(refused.message, 'AMBIGUOUS in the message').toContain('is AMBIGUOUS');
  }),
  run('anchor-cache', 'test_T535_an_interval_anchor_must_be_above_the_last_interval_anchor', async (store, control) => {
    await refunds(control, ['a1', 'a2']);
    const held: Anchor[] = [];
    const provider: AnchorProvider = {
      name: 'memory',
      async make(seq, hash, kind) {
        const a = checkAnchor({ seq, hash, kind, token: `t${held.length + 1}`, at: `2026-01-01T12:00:0${held.length}.000+00:00` }, 'anchor');
        held.push(a);
        return { token: a.token, at: a.at };
      },
      check: async (seq, hash, token) => held.some((a) => a.seq === seq && a.hash === hash && a.token === token),
      latest: async () => held.at(-1) ?? null,
      since: async (seq) => held.filter((a) => a.seq >= seq),
    };
    const retention = store.retention!();
    const a = await retention.anchorHead(provider);
    expect(a, 'the anchor').toMatchObject({ seq: 2, kind: 'interval', token: 't1' });
    const cached = await retention.cachedAnchors();
    expect(
      cached.map((c) => [c.token, c.seq, c.hash, c.kind]),
      'cached as made',
    ).toEqual([['t1', 2, a.hash, 'interval']]);
    expect(Date.parse(cached[0]!.at), 'its time read back').toBe(Date.parse('2026-01-01T12:00:00Z'));
    expect(await retention.hashAt(2), 'the stored hash at the anchored seq').toBe(a.hash);
    const again = await retention.anchorHead(provider).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(/must be above the last interval anchor/.test(again?.message ?? ''), `not above the last: ${again?.message ?? 'accepted'}`).toBe(true);
    const pruned = await pruneChain(store, { through: 2, olderThanMs: 0, by: 'ana', anchor: provider });
    expect(pruned.anchor, 'the checkpoint anchored').toMatchObject({ kind: 'checkpoint', seq: 2 });
    expect((await retention.cachedAnchors()).length, 'both cached').toBe(2);
  }),
]) as Record<RetentionCaseId, CaseDef>;
