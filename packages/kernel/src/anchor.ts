/**
 * Anchors (spec 05 §5.2): a chain position and its hash recorded by a provider **outside** the
 * store, so that a store rewritten whole (new hashes, a consistent chain) is found out. The
 * provider is the authority; the store's `anchors` table is only a cache. Verification asks the
 * provider first and names what it finds with one of three names, in a report of its own: the
 * chain report keeps its six names.
 *
 * @module
 */
import { CTRLRunError, InvalidArgument } from './errors.js';
import { parseTime } from './time.js';
import { quotedForMessage } from './visible.js';

/** What an anchor records: the chain head (`interval`) or a prune's checkpoint (`checkpoint`). */
export type AnchorKind = 'interval' | 'checkpoint';

/** One anchor: a chain position, its hash, the provider's token for it, its kind and the provider's time. */
export interface Anchor {
  readonly seq: number;
  readonly hash: string;
  /** The provider's name for this anchor (unique per provider). */
  readonly token: string;
  readonly kind: AnchorKind;
  /** The provider's time, ISO-8601 with an offset. */
  readonly at: string;
}

/**
 * A place outside the store that records anchors (an append-only file on another volume, an
 * HTTP endpoint of the user's, another account's Durable Object). Every method may reject: a
 * provider that cannot answer anchors nothing, and verification is then "unavailable".
 */
export interface AnchorProvider {
  /** Short name for messages (never a secret). */
  readonly name: string;
  /** Records `(seq, hash)` of `kind`; resolves to the provider's token and time for it. */
  make(seq: number, hash: string, kind: AnchorKind): Promise<{ token: string; at: string }>;
  /** Whether the provider recorded exactly `(seq, hash)` under `token`. */
  check(seq: number, hash: string, token: string): Promise<boolean>;
  /** The anchor with the highest `seq` the provider holds, or `null` when it holds none. */
  latest(): Promise<Anchor | null>;
  /** Every anchor the provider holds whose `seq` is at least `seq`, by `seq`. */
  since(seq: number): Promise<Anchor[]>;
}

/** A provider that failed or answered a shape the kernel refuses: nothing was anchored (`anchor_unavailable`). */
export class AnchorUnavailable extends CTRLRunError {
  override name = 'AnchorUnavailable';
  readonly reason = 'anchor_unavailable' as const;
}

/** The three names an anchor finding can have (never a chain break's). */
export type AnchorBreakName = 'anchor_broken' | 'anchor_missing' | 'anchor_repudiated';

/** One anchor finding. */
export interface AnchorBreak {
  readonly name: AnchorBreakName;
  /** The anchored position, or `null` when the finding is about no anchor at all. */
  readonly seq: number | null;
  readonly detail: string;
}

/** What {@link verifyAnchorsWith} found: `ok`, `broken` (with its findings) or `unavailable` (neither ok nor broken). */
export interface AnchorReport {
  readonly status: 'ok' | 'broken' | 'unavailable';
  /** The provider's name. */
  readonly provider: string;
  /** Anchors the provider holds (0 when unavailable). */
  readonly anchors: number;
  readonly breaks: readonly AnchorBreak[];
  /** Why the provider could not be asked (only when `unavailable`). */
  readonly unavailable?: string;
  /**
   * Anchors at or below the store's prune checkpoint that the provider's checkpoint anchor
   * supersedes (spec 05 §5.2: not breaks), with that anchor's provider time. Present only when
   * there are any: a verdict of `ok` then rests on the prune having been made, and whoever can
   * write the store and append a checkpoint anchor could have deleted what they anchored, so the
   * person reading the report sees how much history the checkpoint stands for, and since when.
   */
  readonly superseded?: { readonly through: number; readonly anchors: number; readonly checkpointAt: string };
}

/** The store side verification needs: the cache, the checkpoint and the stored hash at a position. */
export interface AnchoredStore {
  /** Every cached anchor. */
  cachedAnchors(): Promise<Anchor[]>;
  /** The prune checkpoint row, or `null`. */
  pruneCheckpoint?(): Promise<{ seq: number; hash: string } | null>;
  /** The stored hash of the chained receipt at `seq`, or `null` when there is none. */
  hashAt(seq: number): Promise<string | null>;
}

const HASH = /^sha256:[0-9a-f]{64}$/;

/** Provider-controlled text in a message: quoted, escaped, bounded. */
const q = (s: string): string => quotedForMessage(s, 80);

function describe(v: unknown): string {
  return typeof v === 'string' ? q(v) : v === null ? 'null' : typeof v;
}

/** Checks one anchor as a provider answered it; refuses (naming the field) anything else. */
export function checkAnchor(value: unknown, where: string): Anchor {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidArgument(`${where} is ${describe(value)}, not an anchor object`);
  const a = value as Record<string, unknown>;
  if (!Number.isSafeInteger(a['seq']) || (a['seq'] as number) < 0) throw new InvalidArgument(`${where}.seq is not a non-negative integer`);
  if (typeof a['hash'] !== 'string' || !HASH.test(a['hash'])) throw new InvalidArgument(`${where}.hash is not a sha256: hash`);
  if (typeof a['token'] !== 'string' || a['token'] === '' || a['token'].length > 512)
    throw new InvalidArgument(`${where}.token is not a non-empty string (at most 512)`);
  if (a['kind'] !== 'interval' && a['kind'] !== 'checkpoint') throw new InvalidArgument(`${where}.kind is not interval or checkpoint`);
  const at = checkTime(a['at'], `${where}.at`);
  return { seq: a['seq'] as number, hash: a['hash'], token: a['token'], kind: a['kind'], at };
}

/** An ISO-8601 time with an offset, as a provider answered it. */
export function checkTime(value: unknown, where: string): string {
  if (typeof value !== 'string') throw new InvalidArgument(`${where} is ${describe(value)}, not a time`);
  parseTime(value, where);
  return value;
}

/** Runs a provider call; any failure (a rejection, a refused shape) is {@link AnchorUnavailable} naming the provider and the call. */
export async function askProvider<T>(provider: AnchorProvider, call: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const why = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    throw new AnchorUnavailable(
      `anchor_unavailable: the anchor provider ${q(provider.name)} failed at ${call} (${quotedForMessage(why, 240)}); nothing was anchored`,
      {
        cause: err,
      },
    );
  }
}

/**
 * Verifies the anchors (spec 05 §5.2). The provider is asked first (`since(0)`, `latest()`); if it
 * cannot answer, the report is `unavailable`. Then, per anchor it holds: `anchor_repudiated`
 * when its own `check` says no; `anchor_broken` when the store holds another hash at that `seq`
 * or none (unless the position was pruned and the provider holds a `checkpoint` anchor equal to
 * the store's checkpoint row: superseded); `anchor_missing` when the cache lacks it. Also
 * `anchor_missing`: the provider and the cache hold none; the cache holds one the provider
 * does not; `latest()` names a `seq` `since()` did not return. Anchors cover what they anchor: an
 * append after the last anchor is not detected (T531), and that is the claim.
 */
export async function verifyAnchorsWith(store: AnchoredStore, provider: AnchorProvider): Promise<AnchorReport> {
  let held: Anchor[];
  let latest: Anchor | null;
  try {
    held = (await askProvider(provider, 'since', () => provider.since(0))).map((a, i) => checkAnchor(a, `since(0)[${i}]`));
    const l = await askProvider(provider, 'latest', () => provider.latest());
    latest = l === null ? null : checkAnchor(l, 'latest()');
  } catch (err) {
    return { status: 'unavailable', provider: provider.name, anchors: 0, breaks: [], unavailable: err instanceof Error ? err.message : String(err) };
  }
  const cached = await store.cachedAnchors();
  const checkpoint = (await store.pruneCheckpoint?.()) ?? null;
  const breaks: AnchorBreak[] = [];
  const cachedTokens = new Set(cached.map((a) => a.token));
  const heldTokens = new Set(held.map((a) => a.token));
  const supersedingAnchor =
    checkpoint === null ? undefined : held.find((a) => a.kind === 'checkpoint' && a.seq === checkpoint.seq && a.hash === checkpoint.hash);
  const superseding = supersedingAnchor !== undefined;
  let supersededCount = 0;
  if (held.length === 0 && cached.length === 0)
    breaks.push({ name: 'anchor_missing', seq: null, detail: 'neither the provider nor the store holds any anchor' });
  for (const a of held) {
    let confirmed: boolean;
    try {
      confirmed = (await askProvider(provider, 'check', () => provider.check(a.seq, a.hash, a.token))) === true;
    } catch (err) {
      return {
        status: 'unavailable',
        provider: provider.name,
        anchors: held.length,
        breaks: [],
        unavailable: err instanceof Error ? err.message : String(err),
      };
    }
    if (!confirmed)
      breaks.push({
        name: 'anchor_repudiated',
        seq: a.seq,
        detail: `the provider does not confirm its ${a.kind} anchor ${q(a.token)} of (${a.seq}, ${a.hash})`,
      });
    if (checkpoint !== null && a.seq <= checkpoint.seq) {
      if (superseding && a !== supersedingAnchor) supersededCount++;
      if (!superseding)
        breaks.push({
          name: 'anchor_broken',
          seq: a.seq,
          detail: `seq ${a.seq} was anchored but lies at or below the store's checkpoint (${checkpoint.seq}), and the provider holds no checkpoint anchor equal to it`,
        });
    } else {
      const stored = await store.hashAt(a.seq);
      if (stored === null)
        breaks.push({ name: 'anchor_broken', seq: a.seq, detail: `seq ${a.seq} was anchored with ${a.hash}, and the store holds no receipt there` });
      else if (stored !== a.hash)
        breaks.push({ name: 'anchor_broken', seq: a.seq, detail: `seq ${a.seq} was anchored with ${a.hash}, and the store holds ${stored} there` });
    }
    if (!cachedTokens.has(a.token))
      breaks.push({ name: 'anchor_missing', seq: a.seq, detail: `the provider holds ${a.kind} anchor ${q(a.token)} the store's cache lacks` });
  }
  for (const c of cached)
    if (!heldTokens.has(c.token))
      breaks.push({ name: 'anchor_missing', seq: c.seq, detail: `the store's cache holds anchor ${q(c.token)} the provider does not` });
  if (latest !== null && !held.some((a) => a.seq === latest.seq && a.token === latest.token))
    breaks.push({ name: 'anchor_missing', seq: latest.seq, detail: `the provider's latest anchor (seq ${latest.seq}) was not among those it listed` });
  const report: AnchorReport = { status: breaks.length === 0 ? 'ok' : 'broken', provider: provider.name, anchors: held.length, breaks };
  return supersededCount === 0
    ? report
    : { ...report, superseded: { through: checkpoint!.seq, anchors: supersededCount, checkpointAt: supersedingAnchor!.at } };
}
