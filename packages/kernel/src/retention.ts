/**
 * Retention as an operator does it (spec 05 §5.2–§5.4): prune a prefix of the chain under a
 * recorded checkpoint, place and release legal holds, anchor the chain head with a provider
 * outside the store, and verify the anchors. These are operator acts, never on an action's path:
 * `Control` anchors nothing and prunes nothing.
 *
 * @module
 */
import { createAction } from './action.js';
import { verifyAnchorsWith, type Anchor, type AnchorProvider, type AnchorReport } from './anchor.js';
import { InvalidArgument } from './errors.js';
import { randomIds, type IdSource } from './ids.js';
import type { StateStore } from './store/state-store.js';
import type { Hold, PruneResult, RetentionStore } from './store/retention.js';
import { buildReceipt } from './receipt.js';
import { evidenceTime, systemClock, type Clock } from './time.js';

/** The action name of a prune's own receipt. */
export const PRUNE_ACTION = 'ctrlrun.retention.prune';

function retentionOf(store: StateStore): RetentionStore {
  if (typeof store?.retention !== 'function')
    throw new InvalidArgument(`the store ${String(store?.name)} cannot be pruned, held or anchored (it has no retention)`);
  return store.retention();
}

function person(by: unknown, what: string): string {
  if (typeof by !== 'string' || by.trim() === '') throw new InvalidArgument(`${what} must name the person (a non-empty string)`);
  return by;
}

/** Options of {@link pruneChain}. */
export interface PruneChainOptions {
  /** Delete the chained receipts with `seq ≤ through`. */
  readonly through: number;
  /** Refuse while an effect of the prefix has a charge younger than this (ms). */
  readonly olderThanMs: number;
  /** The person pruning, recorded on the prune's receipt. */
  readonly by: string;
  /** Anchors the checkpoint before anything is deleted. */
  readonly anchor?: AnchorProvider | null;
  readonly clock?: Clock;
  readonly ids?: IdSource;
}

/**
 * Prunes the chain (spec 05 §5.3): the prune's own receipt (`ctrlrun.retention.prune`) is chained
 * first, through the ordinary receipt write, then the store validates and deletes under the
 * receipt-write lock, every step in order. A refusal (`PruneRefused`, naming the hold or the
 * effect) deletes nothing; the receipt of the request stays in the chain.
 */
export async function pruneChain(store: StateStore, options: PruneChainOptions): Promise<PruneResult & { receiptSeq: number }> {
  const retention = retentionOf(store);
  const by = person(options?.by, 'by');
  const { through, olderThanMs } = options;
  if (!Number.isSafeInteger(through) || through < 1) throw new InvalidArgument(`through must be an integer ≥ 1, got ${String(through)}`);
  if (!Number.isSafeInteger(olderThanMs) || olderThanMs < 0)
    throw new InvalidArgument(`olderThanMs must be a non-negative integer, got ${String(olderThanMs)}`);
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? randomIds;
  const started = evidenceTime(clock());
  const action = createAction(
    { name: PRUNE_ACTION, arguments: { through, older_than_seconds: Math.floor(olderThanMs / 1000) }, principal: { agent: 'ctrlrun-operator', user: by } },
    { ids },
  );
  const receipt = buildReceipt(action, {
    receiptId: ids('ctr'),
    decision: 'allow',
    decisionReason: `an operator asked to prune the chain through seq ${through}`,
    approvalId: null,
    approver: null,
    effectKey: null,
    attempt: 1,
    result: 'committed',
    error: null,
    startedAt: started,
    finishedAt: evidenceTime(clock()),
    policyHash: null,
    policyVersion: null,
    controls: [],
  });
  const stored = await store.putReceipt(receipt);
  const result = await retention.prune({ through, olderThanMs, anchor: options.anchor ?? null });
  return { ...result, receiptSeq: stored.seq };
}

/** Options of {@link placeHold}. */
export interface PlaceHoldOptions {
  readonly fromSeq: number;
  /** `null` or absent: open-ended. */
  readonly toSeq?: number | null;
  readonly reason: string;
  /** The person placing it. */
  readonly by: string;
  /** Default `hold_` + 32 random hex. */
  readonly holdId?: string;
}

/** Places a legal hold on a receipt range (spec 05 §5.4): nothing in it can be pruned until a person releases it. */
export async function placeHold(store: StateStore, options: PlaceHoldOptions): Promise<Hold> {
  const retention = retentionOf(store);
  return retention.putHold({
    holdId: options.holdId ?? `hold_${randomIds('ctr').slice(4)}`,
    fromSeq: options.fromSeq,
    toSeq: options.toSeq ?? null,
    reason: options.reason,
    placedBy: person(options.by, 'by'),
  });
}

/** Releases a live hold; only a person ends a hold (no expiry). */
export async function releaseHold(store: StateStore, holdId: string, by: string): Promise<Hold> {
  return retentionOf(store).releaseHold(holdId, person(by, 'by'));
}

/** Every hold, live and released. */
export async function listHolds(store: StateStore): Promise<Hold[]> {
  return retentionOf(store).holds();
}

/** Anchors the chain head with `provider` (`kind = interval`); a failing provider anchors nothing (`AnchorUnavailable`). */
export async function anchorChain(store: StateStore, provider: AnchorProvider): Promise<Anchor> {
  return retentionOf(store).anchorHead(provider);
}

/**
 * Verifies the store against `provider` (spec 05 §5.2): `ok`, `broken` with each finding named
 * (`anchor_broken`, `anchor_missing`, `anchor_repudiated`), or `unavailable` when the provider
 * cannot answer — never `ok` then. A report apart from the chain's.
 */
export async function verifyAnchors(store: StateStore, provider: AnchorProvider): Promise<AnchorReport> {
  return verifyAnchorsWith(retentionOf(store), provider);
}
