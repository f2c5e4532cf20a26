/**
 * The `authority:` section (docs/spec/02-authority-observe-verify.md §2–§3): opt-in, then fail-closed. Once a document has one,
 * every action needs a grant. Authority decides *may this principal propose the action at all*
 * and sees nothing else; the policy decides how much autonomy the action has.
 *
 * Pure: {@link Authority.evaluate} and {@link Authority.planDelegation} read the store and write
 * nothing; `Control` performs every write and appends every event.
 *
 * @module
 */
import type { Action, Principal } from '../action.js';
import { compareCodePoints, type JsonObject } from '../canonical.js';
import { AuthorityEscalation, IdentityError, InvalidArgument, PolicyError } from '../errors.js';
import type { IdSource } from '../ids.js';
import type { CanonicalAuthority, CanonicalEnvelope, CanonicalGrant } from '../policy/types.js';
import { POLICY_SCHEMAS, schemaAtLeast } from '../policy/schemas.js';
import { quote, Refusal, rejectNestedMode, rejectUnknownKeys, toInt } from '../policy/tree.js';
import { readYaml, refusalToPolicyError, typeName, YamlRefusal, YMap, YSeq, type YValue } from '../policy/yaml.js';
import type { DelegationRecord, StateStore } from '../store/state-store.js';
import { parseTime, storedTime } from '../time.js';
import { containedDimension, type Dimension } from './containment.js';
import {
  DELEGATION_ID_PREFIX,
  Grant,
  grantFromJson,
  grantToJson,
  parseDuration,
  parseGrantTree,
  parseInstant,
  V7_GRANT_KEYS,
  type GrantInput,
} from './grant.js';
import { ACTION_SEPARATOR, matchesPattern, TASK_SEPARATOR } from './patterns.js';

/** A passing result's reason. */
export const AUTHORITY_GRANT = 'authority_grant';
/**
 * The deny reasons, in precedence order: the first present is reported. `authority_task` (a grant
 * bound to tasks, and a call naming none or another) sits between expiry and constraints, as in
 * the original 0.12.2.
 */
export const AUTHORITY_REASONS = Object.freeze([
  'authority_unreadable',
  'authority_escalation',
  'authority_revoked',
  'authority_expired',
  'authority_task',
  'authority_constraint',
  'no_authority',
] as const);
/** One of {@link AUTHORITY_REASONS}. */
export type AuthorityDenyReason = (typeof AUTHORITY_REASONS)[number];

/**
 * Why a delegation was not created (disjoint from the evaluation reasons); `approver_unentitled`
 * only on break-glass: the opener does not hold a role the envelope's controls require.
 */
export type EscalationReason =
  'unknown_parent' | 'parent_not_delegable' | 'parent_not_valid' | 'not_the_subject' | 'max_depth' | 'containment' | 'approver_unentitled';

/** The default bound on a delegation chain's length. */
export const DEFAULT_MAX_DELEGATION_DEPTH = 3;
/**
 * How a delegation was created: `Control.delegate` (`api`), `ctrlrun delegate` (`cli`),
 * `Control.breakGlass` (`break-glass`: opened beneath a break-glass envelope), the three this
 * build writes; or, in a store shared with the original 0.12.2, `hop` (created across an agent
 * boundary), which this build reads.
 */
export type CreatedVia = 'api' | 'cli' | 'break-glass' | 'hop';
/** The values this build writes. */
export type DelegateVia = 'api' | 'cli';
const CREATED_VIA: readonly string[] = ['api', 'cli', 'break-glass', 'hop'];
/** A delegation id: `dlg_` + 32 lowercase hex, checked on the way out of the store too. */
export const DELEGATION_ID = /^dlg_[0-9a-f]{32}$/;

const SECTION_KEYS = ['max_delegation_depth', 'grants', 'break_glass'];
/** An envelope's own keys, beside the grant keys it takes. */
const ENVELOPE_ONLY = ['max_ttl', 'controls'];
/** The grant keys an envelope may not carry, and why. */
const ENVELOPE_REFUSED: ReadonlyArray<[string, string]> = [
  ['delegable', "an envelope exists only to be a parent, so 'delegable' is what it means rather than a key, and what bounds it in time is 'max_ttl'"],
  ['expires_at', "an envelope exists only to be a parent, and what bounds it in time is 'max_ttl', which every grant beneath it obeys"],
];

/**
 * A break-glass envelope (`authority.break_glass`): the widest authority an incident may reach,
 * declared in advance. It never decides an action (it is not among {@link Authority.grants}); it
 * is only ever a parent. A grant is opened beneath one only by {@link Authority.planBreakGlass}
 * (`Control.breakGlass`, `ctrlrun break-glass open`): an expiry within `max_ttl`, the opener
 * checked against the roles of its `controls`, recorded with `created_via: break-glass`. Such a
 * grant authorises while it is contained in the envelope and its expiry stays within `max_ttl` of
 * its creation (both re-checked on every evaluation, so narrowing the envelope cuts a grant
 * already open). `delegate` refuses an envelope as a parent (`unknown_parent`), as the original does.
 */
export interface BreakGlassEnvelope {
  readonly id: string;
  /** The envelope as a grant (`delegable: false`, no expiry). */
  readonly grant: Grant;
  /** `max_ttl`, in seconds: the longest expiry a grant opened beneath it may carry. */
  readonly maxTtl: number;
  /** Control ids whose `approver_role` gates who may open one, as written. */
  readonly controls: readonly string[];
}
const STANDALONE_KEYS = ['schema', 'authority'];
const POLICY_OWNED = ['actions', 'mode', 'environment', 'version', 'controls'];

/** What the authority axis decided, and on which grant. Reasons never hold grant ids. */
export interface AuthorityResult {
  readonly passed: boolean;
  /** `authority_grant`, or one of {@link AUTHORITY_REASONS}. */
  readonly reason: string;
  /** The deciding grant (a delegation's `dlg_…` id when delegated). */
  readonly grantId: string | null;
  /** The delegation, when the deciding grant is one. */
  readonly delegationId: string | null;
  /** The walked depth of the deciding grant (0 for a root grant). */
  readonly depth: number;
  /**
   * The dimension a chain step is no longer contained on; `max_ttl` when a grant opened beneath a
   * break-glass envelope expires later than the envelope's `max_ttl` after its creation.
   */
  readonly dimension?: Dimension | 'max_ttl';
  readonly missingParentId?: string;
  readonly expiredParentId?: string;
  readonly depthExceeded?: number;
  readonly cycleAt?: string;
  /** Constraints that were false because their argument was absent or mistyped. */
  readonly warnings: readonly string[];
}

/** A delegation, parsed from its row. `grant.id` is the `delegationId`. */
export interface Delegation {
  readonly delegationId: string;
  readonly parentId: string;
  /** As recorded; the evaluation walks the chain and never trusts it. */
  readonly depth: number;
  readonly grant: Grant;
  readonly createdBy: { readonly agent: string; readonly user: string | null };
  readonly createdVia: CreatedVia;
  readonly createdAt: string;
  readonly revokedAt: string | null;
  readonly revokedBy: string | null;
}

/** A stored delegation that cannot be read; it denies every action (`authority_unreadable`). */
class Unreadable extends Error {
  constructor(
    readonly delegationId: string,
    detail: string,
  ) {
    super(`delegation ${JSON.stringify(delegationId)} is unreadable: ${detail}`);
  }
}

/** Parses a row, refusing an id outside the namespace, an unknown `created_via`, or a grant that no longer validates. */
export function delegationFromRecord(record: DelegationRecord): Delegation {
  const id = record.delegationId;
  if (typeof id !== 'string' || !DELEGATION_ID.test(id)) throw new Unreadable(String(id), `an id must match ${DELEGATION_ID.source}`);
  if (!CREATED_VIA.includes(record.createdVia)) throw new Unreadable(id, `unknown created_via ${JSON.stringify(record.createdVia)}`);
  if (typeof record.parentId !== 'string' || record.parentId === '') throw new Unreadable(id, 'no parent_id');
  if (typeof record.createdByAgent !== 'string' || record.createdByAgent === '') throw new Unreadable(id, 'no created_by_agent');
  let grant: Grant;
  try {
    grant = grantFromJson(record.grantJson, id);
  } catch (err) {
    throw new Unreadable(id, err instanceof Error ? err.message : String(err));
  }
  for (const [what, v] of [
    ['created_at', record.createdAt],
    ['revoked_at', record.revokedAt],
  ] as const) {
    if (v === null && what === 'revoked_at') continue;
    try {
      parseTime(v as string, what);
    } catch {
      throw new Unreadable(id, `${what} is not a timestamp`);
    }
  }
  return Object.freeze({
    delegationId: id,
    parentId: record.parentId,
    depth: record.depth,
    grant,
    createdBy: Object.freeze({ agent: record.createdByAgent, user: record.createdByUser ?? null }),
    createdVia: record.createdVia as CreatedVia,
    createdAt: record.createdAt,
    revokedAt: record.revokedAt ?? null,
    revokedBy: record.revokedBy ?? null,
  });
}

/** The row `StateStore.putDelegation` writes. */
export function delegationToRecord(d: Delegation): DelegationRecord {
  return {
    delegationId: d.delegationId,
    parentId: d.parentId,
    depth: d.depth,
    grantJson: grantToJson(d.grant),
    createdByAgent: d.createdBy.agent,
    createdByUser: d.createdBy.user,
    createdVia: d.createdVia,
    createdAt: d.createdAt,
    revokedAt: d.revokedAt,
    revokedBy: d.revokedBy,
  };
}

/** What walking a delegation to its root found. Depth is recomputed, never read from the row. */
interface Walk {
  /** Leaf first. */
  readonly nodes: readonly Delegation[];
  readonly root: Grant | null;
  readonly rootId: string | null;
  readonly missingParentId?: string;
  readonly cycleAt?: string;
  readonly depthExceeded?: number;
  /** The root is a break-glass envelope (`rootId`), not a grant. */
  readonly rootIsEnvelope?: boolean;
}

/** Every grant above the leaf, root first, with their ids. */
function ancestors(walk: Walk): { id: string; grant: Grant }[] {
  const above: { id: string; grant: Grant }[] = walk.root === null ? [] : [{ id: walk.rootId!, grant: walk.root }];
  for (const node of walk.nodes.slice(1).reverse()) above.push({ id: node.delegationId, grant: node.grant });
  return above;
}

/**
 * Is an ancestor one that may not be delegated beneath? An envelope root counts as delegable (it
 * exists only to be a parent, and `max_ttl` bounds what it reaches); it is never written onto the
 * envelope's grant, which hashes `delegable: false` as the document wrote it.
 */
function undelegableAncestor(walk: Walk, above: readonly { grant: Grant }[]): boolean {
  return (walk.rootIsEnvelope === true ? above.slice(1) : above).some((a) => !a.grant.delegable);
}

/** Epoch microseconds of `now`. */
function micros(now: Date): bigint {
  return BigInt(now.getTime()) * 1000n;
}

/**
 * Does the grant opened beneath envelope `envelope` (the chain's top node) still fit its
 * `max_ttl`: an expiry, no later than its creation plus `max_ttl`? Re-checked on every
 * evaluation, so an envelope narrowed while an incident runs cuts the grants already open; a
 * widened one gives them no more time (their own expiry still ends them).
 */
function withinMaxTtl(opened: Delegation, envelope: BreakGlassEnvelope): boolean {
  const expires = opened.grant.expiresMicros;
  const created = parseInstant(opened.createdAt);
  if (expires === null || typeof created === 'string') return false;
  return expires <= created.micros + BigInt(envelope.maxTtl) * 1_000_000n;
}

type Lookup = (id: string) => Promise<Delegation | null> | Delegation | null;

/** Options of {@link Authority}. */
export interface AuthorityOptions {
  /** Non-negative; default {@link DEFAULT_MAX_DELEGATION_DEPTH}. `0` disables delegation. */
  maxDelegationDepth?: number;
  /** Names the document in messages. */
  source?: string;
  /** The `break_glass:` envelopes, by id (never consulted by {@link Authority.evaluate}). */
  envelopes?: Iterable<BreakGlassEnvelope>;
}

/** Options of {@link Authority.planDelegation}. */
export interface PlanDelegationOptions {
  /** The principal creating it; must be the parent's subject. */
  by: Principal;
  store: StateStore;
  now: Date;
  ids: IdSource;
  via?: DelegateVia;
}

/** Options of {@link Authority.planBreakGlass}. */
export interface PlanBreakGlassOptions {
  /** The verified principal opening it (checked against the envelope's controls by `Control`, not here). */
  opener: { readonly agent: string; readonly user?: string | null; readonly expiresAt?: string | null };
  now: Date;
  ids: IdSource;
  /**
   * How long from `now` the grant lives (its `expires_at` becomes now + ttl): whole seconds, or an
   * ISO-8601 duration as `max_ttl` is written (`PT1H`); only for a grant that carries no
   * `expires_at` of its own.
   */
  ttl?: number | string;
}

/** A loaded authority section: the document's grants and the delegation bound. Immutable. */
export class Authority {
  readonly grants: ReadonlyMap<string, Grant>;
  /** The break-glass envelopes, by id; empty when the section declares none. */
  readonly envelopes: ReadonlyMap<string, BreakGlassEnvelope>;
  readonly maxDelegationDepth: number;
  readonly source: string;

  /** Builds an authority from grants (each with a document id, unique, not `dlg_…`). */
  constructor(grants: Iterable<Grant>, options: AuthorityOptions = {}) {
    const depth = options.maxDelegationDepth ?? DEFAULT_MAX_DELEGATION_DEPTH;
    if (typeof depth !== 'number' || !Number.isSafeInteger(depth) || depth < 0)
      throw new InvalidArgument(`maxDelegationDepth must be a non-negative integer, got ${String(depth)}`);
    const map = new Map<string, Grant>();
    for (const g of grants) {
      if (!(g instanceof Grant)) throw new InvalidArgument('authority grants must be Grant instances (new Grant({...}))');
      if (g.id === '' || g.id.startsWith(DELEGATION_ID_PREFIX))
        throw new InvalidArgument(`a root grant needs an id that does not begin '${DELEGATION_ID_PREFIX}', got ${JSON.stringify(g.id)}`);
      if (map.has(g.id)) throw new InvalidArgument(`duplicate grant id ${JSON.stringify(g.id)}`);
      map.set(g.id, g);
    }
    const envelopes = new Map<string, BreakGlassEnvelope>();
    for (const e of options.envelopes ?? []) {
      if (e === null || typeof e !== 'object' || !(e.grant instanceof Grant) || e.grant.id !== e.id)
        throw new InvalidArgument('a break-glass envelope is { id, grant (a Grant under that id), maxTtl, controls }');
      if (map.has(e.id) || envelopes.has(e.id))
        throw new InvalidArgument(`${JSON.stringify(e.id)} is declared twice (in grants and break_glass, or twice in break_glass)`);
      if (!Number.isSafeInteger(e.maxTtl) || e.maxTtl <= 0)
        throw new InvalidArgument(`break-glass envelope ${JSON.stringify(e.id)}: maxTtl must be positive whole seconds`);
      if (!Array.isArray(e.controls) || !e.controls.every((c) => typeof c === 'string' && c !== ''))
        throw new InvalidArgument(`break-glass envelope ${JSON.stringify(e.id)}: controls must be a list of control ids`);
      envelopes.set(e.id, Object.freeze({ id: e.id, grant: e.grant, maxTtl: e.maxTtl, controls: Object.freeze([...e.controls]) }));
    }
    this.grants = map;
    this.envelopes = envelopes;
    this.maxDelegationDepth = depth;
    this.source = options.source ?? '<authority>';
    Object.freeze(this);
  }

  /**
   * The shape the policy hash is taken over, the original 0.12.2's (spec 05 §3.4):
   * `{max_delegation_depth, grants: {id: grant}, break_glass: {id: grant + {max_ttl, controls}}}`,
   * `break_glass` `{}` when none is declared.
   */
  canonical(): CanonicalAuthority {
    const grants: Record<string, CanonicalGrant> = Object.fromEntries([...this.grants].map(([id, g]) => [id, g.canonical() as unknown as CanonicalGrant]));
    const envelopes: Record<string, CanonicalEnvelope> = Object.fromEntries(
      [...this.envelopes].map(([id, e]) => [id, { ...(e.grant.canonical() as unknown as CanonicalGrant), max_ttl: e.maxTtl, controls: [...e.controls] }]),
    );
    return { max_delegation_depth: this.maxDelegationDepth, grants, break_glass: envelopes };
  }

  /**
   * Does any grant cover `action` at `now`? Candidates are the document's grants and every stored
   * delegation (revoked ones too). Every failure of every matching candidate is collected; any
   * clean candidate passes (naming the lowest id by code point), else the first reason present
   * in {@link AUTHORITY_REASONS} wins (ties: lowest id). One unreadable stored row denies every
   * action. A grant bound to tasks passes only a call whose `task` one of its patterns matches
   * (`authority_task`); a grant opened beneath a break-glass envelope passes only while its expiry
   * stays within the envelope's `max_ttl` of its creation. Reads the store, writes nothing.
   */
  async evaluate(action: Action, options: { now: Date; store: StateStore; task?: string | null }): Promise<AuthorityResult> {
    const { now, store } = options;
    const task = options.task ?? null;
    const byId = new Map<string, Delegation>();
    try {
      for (const row of await store.delegations({ includeRevoked: true })) {
        const d = delegationFromRecord(row);
        byId.set(d.delegationId, d);
      }
    } catch (err) {
      if (err instanceof Unreadable) return deny('authority_unreadable', { delegationId: err.delegationId });
      throw err;
    }
    const args = action.canonicalArguments;
    const warnings: string[] = [];
    const passed: AuthorityResult[] = [];
    const failed = new Map<string, AuthorityResult[]>();
    const candidates: [string, Grant, Delegation | null][] = [...this.grants].map(([id, g]) => [id, g, null]);
    for (const d of byId.values()) candidates.push([d.delegationId, d.grant, d]);
    for (const [id, grant, delegation] of candidates) {
      if (!grant.matchesShape(action)) continue;
      const outcomes: Partial<AuthorityResult>[] = [];
      let depth = 0;
      if (delegation !== null) {
        const chain = await this.#checkChain(delegation, now, (pid) => byId.get(pid) ?? null);
        depth = chain.depth;
        if (chain.failure) outcomes.push(chain.failure);
      }
      if (grant.isExpired(now)) outcomes.push({ reason: 'authority_expired' });
      // A grant bound to tasks holds only for a call naming one it matches (none: refused).
      if (grant.tasks !== null && (task === null || !grant.tasks.some((p) => matchesPattern(p, task, TASK_SEPARATOR))))
        outcomes.push({ reason: 'authority_task' });
      if (!grant.constraintsHold(args, warnings)) outcomes.push({ reason: 'authority_constraint' });
      const named = { grantId: id, delegationId: delegation === null ? null : id, depth };
      if (outcomes.length === 0) {
        passed.push({ passed: true, reason: AUTHORITY_GRANT, ...named, warnings });
        continue;
      }
      for (const o of outcomes) {
        const list = failed.get(o.reason!) ?? [];
        list.push({ ...o, passed: false, reason: o.reason!, ...named, warnings });
        failed.set(o.reason!, list);
      }
    }
    if (passed.length > 0) return lowestId(passed);
    for (const reason of AUTHORITY_REASONS) {
      const list = failed.get(reason);
      if (list) return lowestId(list);
    }
    return deny('no_authority', { warnings });
  }

  /**
   * Walks `leaf` to its root — a document grant, or a break-glass envelope declared here —
   * bounded at `maxDelegationDepth + 1` and refusing revisits. A parent that is neither, nor a
   * stored delegation (an envelope this document does not declare, say), is a missing parent.
   */
  async #walk(leaf: Delegation, lookup: Lookup): Promise<Walk> {
    const nodes: Delegation[] = [leaf];
    const seen = new Set([leaf.delegationId]);
    for (;;) {
      const parentId = nodes[nodes.length - 1]!.parentId;
      const root = this.grants.get(parentId);
      if (root !== undefined) return { nodes, root, rootId: parentId };
      const envelope = this.envelopes.get(parentId);
      if (envelope !== undefined) return { nodes, root: envelope.grant, rootId: parentId, rootIsEnvelope: true };
      if (seen.has(parentId)) return { nodes, root: null, rootId: null, cycleAt: parentId };
      const parent = await lookup(parentId);
      if (parent === null) return { nodes, root: null, rootId: null, missingParentId: parentId };
      // One more node would pass the bound, which is also what stops an edited store hanging us.
      if (nodes.length >= this.maxDelegationDepth) return { nodes, root: null, rootId: null, depthExceeded: nodes.length + 1 };
      seen.add(parentId);
      nodes.push(parent);
    }
  }

  /**
   * Checks a delegation chain from the leaf up and names the first failure, with the walked depth:
   * a missing parent, a revoked link, an expired ancestor, a child not contained in its parent, a
   * grant opened beneath an envelope that outlives its `max_ttl` (dimension `max_ttl`), a cycle, a
   * chain deeper than `max_delegation_depth`, a non-delegable ancestor (an envelope root counts as
   * delegable) (the chain rules of docs/spec/02-authority-observe-verify.md §3.4; the original 0.12.2's order).
   */
  async #checkChain(leaf: Delegation, now: Date, lookup: Lookup): Promise<{ depth: number; failure: Partial<AuthorityResult> | null }> {
    const walk = await this.#walk(leaf, lookup);
    const depth = walk.depthExceeded ?? walk.nodes.length;
    const fail = (f: Partial<AuthorityResult>) => ({ depth, failure: f });
    if (walk.missingParentId !== undefined) return fail({ reason: 'authority_escalation', missingParentId: walk.missingParentId });
    if (walk.nodes.some((n) => n.revokedAt !== null)) return fail({ reason: 'authority_revoked' });
    const above = ancestors(walk);
    for (const a of above) if (a.grant.isExpired(now)) return fail({ reason: 'authority_escalation', expiredParentId: a.id });
    const chain = [...above.map((a) => a.grant), leaf.grant];
    for (let i = 1; i < chain.length; i++) {
      const dimension = containedDimension(chain[i - 1]!, chain[i]!);
      if (dimension !== null) return fail({ reason: 'authority_escalation', dimension });
    }
    const envelope = walk.rootIsEnvelope === true ? this.envelopes.get(walk.rootId!) : undefined;
    if (envelope !== undefined && !withinMaxTtl(walk.nodes[walk.nodes.length - 1]!, envelope))
      return fail({ reason: 'authority_escalation', dimension: 'max_ttl' });
    if (walk.cycleAt !== undefined) return fail({ reason: 'authority_unreadable', cycleAt: walk.cycleAt });
    // Compared here, not inferred from the walk's bound: a chain that reaches its root in one
    // step is never measured by the walk, and `max_delegation_depth: 0` must still deny it.
    if (depth > this.maxDelegationDepth) return fail({ reason: 'authority_escalation', depthExceeded: depth });
    if (undelegableAncestor(walk, above)) return fail({ reason: 'authority_escalation' });
    return { depth, failure: null };
  }

  /**
   * The delegation `Control.delegate` would write, or a refusal (docs/spec/02-authority-observe-verify.md §3.2), checked in order:
   * 0 `by` unexpired (`IdentityError`); 1 the parent is a root grant or a live delegation (never a
   * break-glass envelope: authority beneath one is opened only by {@link planBreakGlass}); 2 it is
   * delegable; 3 it and the chain above it are still valid; 4 `by` is its subject; 5 the depth
   * fits; 6 the child is contained on every dimension. Refusals are {@link AuthorityEscalation}s.
   * Mints the id; writes nothing.
   */
  async planDelegation(parentId: string, grant: Grant | GrantInput, options: PlanDelegationOptions): Promise<Delegation> {
    const { by, store, now } = options;
    if (typeof parentId !== 'string' || parentId === '') throw new InvalidArgument('parentId must be a non-empty grant or delegation id');
    const child = asChildGrant(grant);
    if (by.expiresAt !== undefined && by.expiresAt !== null && now.getTime() > parseTime(by.expiresAt, 'by.expiresAt').getTime()) {
      throw new IdentityError(`the delegating principal's credential expired at ${by.expiresAt}; an expired credential may not create authority`);
    }
    const refuse = (reason: EscalationReason, message: string, dimension: Dimension | null = null): never => {
      throw new AuthorityEscalation(reason, { parentId, dimension, message: `${message} (${reason}${dimension ? `: ${dimension}` : ''})` });
    };
    if (this.envelopes.has(parentId)) {
      // Authority beneath an envelope is opened only by break-glass (an expiry inside max_ttl, the
      // opener checked against its controls); delegating beneath one would skip both.
      refuse(
        'unknown_parent',
        `${quote(parentId)} is a break-glass envelope, not a grant: authority beneath an envelope is opened with 'ctrlrun break-glass open' (Control.breakGlass), which requires an expiry inside its max_ttl and checks the opener against the controls that gate it`,
      );
    }
    let parent: Grant;
    let parentDepth: number;
    const root = this.grants.get(parentId);
    if (root !== undefined) {
      if (!root.delegable) refuse('parent_not_delegable', `${quote(parentId)} is not delegable`);
      if (root.isExpired(now)) refuse('parent_not_valid', `${quote(parentId)} expired at ${root.expiresAt}`);
      parent = root;
      parentDepth = 0;
    } else {
      const record = await store.getDelegation(parentId);
      if (record === null || record.revokedAt !== null) refuse('unknown_parent', `there is no live grant or delegation ${quote(parentId)}`);
      let node: Delegation;
      try {
        node = delegationFromRecord(record!);
      } catch (err) {
        return refuse('parent_not_valid', err instanceof Error ? err.message : String(err));
      }
      if (!node.grant.delegable) refuse('parent_not_delegable', `${quote(parentId)} is not delegable`);
      if (node.grant.isExpired(now)) refuse('parent_not_valid', `${quote(parentId)} expired at ${node.grant.expiresAt}`);
      let walk: Walk;
      try {
        walk = await this.#walk(node, async (id) => {
          const r = await store.getDelegation(id);
          return r === null ? null : delegationFromRecord(r);
        });
      } catch (err) {
        return refuse('parent_not_valid', err instanceof Error ? err.message : String(err));
      }
      const above = ancestors(walk);
      // An envelope root counts as delegable here too, or nothing could be delegated beneath a
      // break-glass grant (its attenuation would not hold).
      const invalid =
        walk.missingParentId !== undefined ||
        walk.cycleAt !== undefined ||
        walk.nodes.slice(1).some((n) => n.revokedAt !== null) ||
        above.some((a) => a.grant.isExpired(now)) ||
        undelegableAncestor(walk, above);
      if (invalid) refuse('parent_not_valid', `the chain above ${quote(parentId)} is no longer valid`);
      parent = node.grant;
      parentDepth = walk.depthExceeded ?? walk.nodes.length;
    }
    if (!parent.subjectMatches(by))
      refuse(
        'not_the_subject',
        `${quote(by.agent)}${by.user ? ` for ${quote(by.user)}` : ''} is not the subject of ${quote(parentId)}: only authority you hold can be delegated`,
      );
    const depth = parentDepth + 1;
    if (depth > this.maxDelegationDepth)
      refuse('max_depth', `a delegation of ${quote(parentId)} would be at depth ${depth}, beyond max_delegation_depth ${this.maxDelegationDepth}`);
    const dimension = containedDimension(parent, child);
    if (dimension !== null)
      refuse(
        'containment',
        `the child grant is not inside ${quote(parentId)} on ${dimension}; omitting a dimension the parent constrains is not unlimited`,
        dimension,
      );
    const delegationId = options.ids('dlg');
    if (!DELEGATION_ID.test(delegationId)) throw new InvalidArgument(`the id source minted ${JSON.stringify(delegationId)}, not dlg_ + 32 hex`);
    return Object.freeze({
      delegationId,
      parentId,
      depth,
      grant: child.withId(delegationId),
      createdBy: Object.freeze({ agent: by.agent, user: by.user ?? null }),
      createdVia: options.via ?? 'api',
      createdAt: storedTime(now),
      revokedAt: null,
      revokedBy: null,
    });
  }

  /**
   * The grant `Control.breakGlass` would open beneath envelope `envelopeId`, or a refusal, checked
   * in the original 0.12.2's order: the id names an envelope of this document (an ordinary grant
   * id is refused by name: a grant is not an envelope) (`unknown_parent`); the opener's credential
   * is unexpired (`IdentityError`); the grant carries an `expires_at` (or `ttl` gives it one)
   * (`containment`/`expires_at`) no later than now + `max_ttl` (`containment`/`expires_at`); depth
   * 1 fits `max_delegation_depth` (`max_depth`); the grant is contained in the envelope on every
   * dimension (`containment` + the dimension). The opener is not the envelope's subject (that
   * names whom the grant may be for): who may open is gated by the envelope's controls, which
   * `Control` checks. Refusals are {@link AuthorityEscalation}s. Mints the id; writes nothing.
   */
  planBreakGlass(envelopeId: string, grant: Grant | GrantInput, options: PlanBreakGlassOptions): Delegation {
    const { opener, now } = options;
    if (typeof envelopeId !== 'string' || envelopeId === '') throw new InvalidArgument('envelopeId must be a non-empty break-glass envelope id');
    const refuse = (reason: EscalationReason, message: string, dimension: Dimension | null = null): never => {
      throw new AuthorityEscalation(reason, { parentId: envelopeId, dimension, message: `${message} (${reason}${dimension ? `: ${dimension}` : ''})` });
    };
    const envelope = this.envelopes.get(envelopeId);
    if (envelope === undefined) {
      const why = this.grants.has(envelopeId)
        ? "it names a grant, and a grant is not an envelope: opening one beneath it would skip the subject check 'ctrlrun delegate' applies there, and a grant has no 'controls:' to gate the opener instead"
        : 'no envelope of that name is declared';
      return refuse(
        'unknown_parent',
        `no break-glass envelope ${quote(envelopeId)}; ${why}. An envelope is declared under 'authority: break_glass:' and names the controls that gate who may open it`,
      );
    }
    if (opener.expiresAt !== undefined && opener.expiresAt !== null && now.getTime() > parseTime(opener.expiresAt, 'opener.expiresAt').getTime()) {
      throw new IdentityError(`the opening principal's credential expired at ${opener.expiresAt}; an expired credential may not create authority`);
    }
    let input = grant;
    if (options.ttl !== undefined) {
      const parsed = typeof options.ttl === 'string' ? parseDuration(options.ttl) : options.ttl;
      if (typeof parsed === 'string') throw new InvalidArgument(`ttl: ${parsed}`);
      const ttl = parsed;
      if (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl <= 0)
        throw new InvalidArgument(`ttl must be a positive whole number of seconds or an ISO-8601 duration (PT1H), got ${String(ttl)}`);
      const given = grant instanceof Grant ? grant.expiresAt : grant !== null && typeof grant === 'object' ? (grant.expiresAt ?? null) : null;
      if (given !== null)
        throw new InvalidArgument(`give the grant's expires_at or a ttl, not both (the grant expires at ${String(given)}, and a ttl of ${ttl} s was given)`);
      // Set before the grant is built: a delegable grant needs its expiry to be valid at all.
      const expiresAt = storedTime(new Date(now.getTime() + ttl * 1000));
      input = grant instanceof Grant ? new Grant({ ...grant.toInput(), expiresAt }) : { ...grant, expiresAt };
    }
    const child = asChildGrant(input, 'breakGlass');
    const expires = child.expiresMicros;
    if (expires === null)
      refuse(
        'containment',
        `a grant opened beneath ${quote(envelopeId)} must carry 'expires_at' (or a ttl): break-glass authority that outlives the incident is what an envelope exists to prevent`,
        'expires_at',
      );
    const limit = micros(now) + BigInt(envelope.maxTtl) * 1_000_000n;
    if (expires! > limit)
      refuse(
        'containment',
        `a grant opened beneath ${quote(envelopeId)} expires at ${child.expiresAt}, beyond its max_ttl of ${envelope.maxTtl} s from now (${storedTime(new Date(Number(limit / 1000n)))})`,
        'expires_at',
      );
    if (1 > this.maxDelegationDepth)
      refuse('max_depth', `a grant beneath ${quote(envelopeId)} would be at depth 1, beyond max_delegation_depth ${this.maxDelegationDepth}`);
    const dimension = containedDimension(envelope.grant, child);
    if (dimension !== null)
      refuse(
        'containment',
        `the break-glass grant is not inside the envelope ${quote(envelopeId)} on ${dimension}; omitting a dimension the envelope constrains is not unlimited`,
        dimension,
      );
    const delegationId = options.ids('dlg');
    if (!DELEGATION_ID.test(delegationId)) throw new InvalidArgument(`the id source minted ${JSON.stringify(delegationId)}, not dlg_ + 32 hex`);
    return Object.freeze({
      delegationId,
      parentId: envelopeId,
      depth: 1,
      grant: child.withId(delegationId),
      createdBy: Object.freeze({ agent: opener.agent, user: opener.user ?? null }),
      createdVia: 'break-glass',
      createdAt: storedTime(now),
      revokedAt: null,
      revokedBy: null,
    });
  }

  /** The delegation `Control.revoke` would revoke: an unknown or unreadable id is an `InvalidArgument`. */
  async planRevocation(delegationId: string, options: { store: StateStore }): Promise<Delegation> {
    if (typeof delegationId !== 'string' || delegationId === '') throw new InvalidArgument('delegationId must be a non-empty string');
    const record = await options.store.getDelegation(delegationId);
    if (record === null) {
      const root = this.grants.has(delegationId)
        ? `; ${quote(delegationId)} is a root grant, which is not revoked but set 'delegable: false' (and reloaded)`
        : '';
      throw new InvalidArgument(`no delegation ${delegationId}${root}`);
    }
    try {
      return delegationFromRecord(record);
    } catch (err) {
      throw new InvalidArgument(err instanceof Error ? err.message : String(err), { cause: err });
    }
  }
}

function lowestId(results: AuthorityResult[]): AuthorityResult {
  // By code point: a property of the set of grants, not of the document's order.
  let best = results[0]!;
  for (const r of results) if (compareCodePoints(r.grantId ?? '', best.grantId ?? '') < 0) best = r;
  return best;
}

function deny(reason: AuthorityDenyReason, extra: { delegationId?: string; warnings?: string[] } = {}): AuthorityResult {
  return { passed: false, reason, grantId: null, delegationId: extra.delegationId ?? null, depth: 0, warnings: extra.warnings ?? [] };
}

function asChildGrant(grant: Grant | GrantInput, what = 'delegate'): Grant {
  if (grant instanceof Grant) {
    if (grant.id !== '')
      throw new InvalidArgument(`the grant passed to ${what}() carries id ${JSON.stringify(grant.id)}; a delegation's id is assigned, not chosen`);
    return grant;
  }
  if (grant !== null && typeof grant === 'object' && grant.id !== undefined && grant.id !== null && grant.id !== '') {
    throw new InvalidArgument(`the grant passed to ${what}() carries id ${JSON.stringify(grant.id)}; a delegation's id is assigned, not chosen`);
  }
  return new Grant(grant);
}

/** `AUTHORITY_RESOLVED` / `AUTHORITY_DENIED` data: ids travel here, never in a reason; absent keys are omitted. */
export function authorityEventData(result: AuthorityResult): JsonObject {
  const data: JsonObject = { reason: result.reason };
  if (result.grantId !== null) data['grant_id'] = result.grantId;
  if (result.delegationId !== null) {
    data['delegation_id'] = result.delegationId;
    data['depth'] = result.depth;
  }
  if (result.dimension !== undefined) data['dimension'] = result.dimension;
  if (result.missingParentId !== undefined) data['missing_parent_id'] = result.missingParentId;
  if (result.expiredParentId !== undefined) data['expired_parent_id'] = result.expiredParentId;
  if (result.cycleAt !== undefined) data['cycle_at'] = result.cycleAt;
  if (result.depthExceeded !== undefined) data['depth_exceeded'] = result.depthExceeded;
  return data;
}

/** What {@link resourceScopeGap} reads of a policy (a loaded {@link Policy} is one). */
export interface ResourceDerivation {
  readonly actionNames: readonly string[];
  action(name: string): { readonly resource: string | null } | null;
  rules(name: string): readonly { readonly decision: string }[] | null;
}

/**
 * The policy actions that `grant` scopes by `resources:` although the policy does not derive their
 * resource (the entry has no `resource:` template), in document order. For such an action the
 * resource a grant is checked against is whatever the caller gives: a decorator's template or a
 * hand-built action in process (the original's way, which is why such a document loads), and an
 * agent's own claim over HTTP, which the worker refuses for exactly these actions. An action the
 * policy denies on every path is skipped: no resource can make it run.
 */
export function resourceScopeGaps(grant: Grant, policy: ResourceDerivation): string[] {
  if (grant.resources === null) return [];
  return policy.actionNames.filter(
    (name) =>
      grant.actions.some((p) => matchesPattern(p, name, ACTION_SEPARATOR)) &&
      policy.action(name)?.resource == null &&
      !(policy.rules(name) ?? []).every((r) => r.decision === 'deny'),
  );
}

/** The first of {@link resourceScopeGaps}, or null. */
export function resourceScopeGap(grant: Grant, policy: ResourceDerivation): string | null {
  return resourceScopeGaps(grant, policy)[0] ?? null;
}

/** The refusal for {@link resourceScopeGap}'s finding, naming the grant and the action. */
export function resourceScopeMessage(grant: Grant, action: string): string {
  const id = grant.id === '' ? 'the grant' : `grant ${JSON.stringify(grant.id)}`;
  return (
    `${id} scopes action ${quote(action)} by 'resources:', but the policy does not derive that action's resource ` +
    `(its entry has no 'resource:' template), so the resource checked would be the caller's own claim. ` +
    `Add a 'resource:' template to actions[${quote(action)}] (e.g. resource: "payment:{payment_id}"), or drop 'resources:' from the grant`
  );
}

/**
 * Refuses an authority whose grants scope by resource an action the policy does not derive a
 * resource for ({@link resourceScopeGap}), with a `PolicyError` naming the grant and the action: a
 * stricter rule than the original's, for a deployment that wants it. Neither the loader nor a
 * `Control` applies it (the original loads such a document); `checkPolicy` reports each gap.
 */
export function checkResourceScopes(authority: Authority, policy: ResourceDerivation & { readonly source: string }): void {
  for (const grant of authority.grants.values()) {
    const action = resourceScopeGap(grant, policy);
    if (action === null) continue;
    const where = authority.source === policy.source ? policy.source : `${authority.source} (with the policy ${policy.source})`;
    throw new PolicyError(`${where}: ${resourceScopeMessage(grant, action)}`);
  }
}

/**
 * Refuses a `ctrlrun.policy/v7` grant key (`tasks`, `budgets`) on a grant or an envelope of a
 * document declaring an older schema, naming the key and the schema.
 */
function gateV7(section: YMap, schema: string): void {
  if (schemaAtLeast(schema, 'ctrlrun.policy/v7')) return;
  const entries: YValue[] = [];
  const grants = section.get('grants');
  if (grants instanceof YSeq) entries.push(...grants.items);
  const envelopes = section.get('break_glass');
  if (envelopes instanceof YMap) entries.push(...envelopes.entries.map((e) => e.value));
  for (const entry of entries) {
    if (!(entry instanceof YMap)) continue;
    for (const [key, consequence] of V7_GRANT_KEYS) {
      const e = entry.entry(key);
      if (e)
        throw new Refusal('authority', `'${key}' on a grant needs 'schema: ctrlrun.policy/v7'; this document declares '${schema}', and ${consequence}`, e.line);
    }
  }
}

function parseEnvelopes(v: YValue, line: number, grants: ReadonlySet<string>): BreakGlassEnvelope[] {
  if (v === null) return [];
  if (!(v instanceof YMap)) throw new Refusal('authority', `'break_glass' must be a mapping of envelope id to envelope, got ${typeName(v)}`, line);
  return v.entries.map((e): BreakGlassEnvelope => {
    if (typeof e.key !== 'string' || e.key === '') throw new Refusal('authority.break_glass', 'an envelope id must be a non-empty string', e.line);
    const id = e.key;
    const at = `authority.break_glass[${quote(id)}]`;
    if (grants.has(id)) {
      throw new Refusal(
        at,
        `${JSON.stringify(id)} is declared in both 'grants' and 'break_glass': which mapping a parent came from decides whether the envelope's controls gate who may open it, so one id cannot be in both`,
        e.line,
      );
    }
    if (!(e.value instanceof YMap)) throw new Refusal(at, `an envelope must be a mapping, got ${typeName(e.value)}`, e.line);
    const named = e.value.entry('id');
    if (named) throw new Refusal(at, "an envelope carries no 'id': its id is its key under 'break_glass'", named.line);
    const ttl = e.value.entry('max_ttl');
    if (!ttl) {
      throw new Refusal(
        at,
        "'max_ttl' is required: it bounds every grant opened beneath this envelope in time, and a break-glass grant that outlives the incident is what an envelope exists to prevent",
        e.line,
      );
    }
    const maxTtl = parseDuration(ttl.value);
    if (typeof maxTtl === 'string') throw new Refusal(at, `'max_ttl': ${maxTtl}`, ttl.line);
    const c = e.value.entry('controls');
    let controls: string[] = [];
    if (c) {
      if (!(c.value instanceof YSeq) || !c.value.items.every((x) => typeof x === 'string' && x !== ''))
        throw new Refusal(
          at,
          `'controls' must be a list of control ids, got ${c.value instanceof YSeq ? 'a list holding something else' : typeName(c.value)}`,
          c.line,
        );
      controls = c.value.items as string[];
    }
    const asGrant = new YMap(
      [{ key: 'id', value: id, line: e.line }, ...e.value.entries.filter((x) => !(typeof x.key === 'string' && ENVELOPE_ONLY.includes(x.key)))],
      e.value.line,
    );
    // The grant keys minus the refused two (named) plus the envelope's own, which are taken above.
    const grant = parseGrantTree(asGrant, at, e.line, { ids: 'document', lenient: false, expiresKey: 'expires_at', refused: ENVELOPE_REFUSED });
    return { id, grant, maxTtl, controls };
  });
}

/**
 * Parses an `authority:` section from the loader's tree (policy document or standalone) of a
 * document declaring `schema`. A standalone document may not declare `break_glass` (it has no
 * control registry to gate it).
 */
export function parseAuthoritySection(v: YValue, line: number, source: string, schema: string, options: { standalone?: boolean } = {}): Authority {
  const where = 'authority';
  if (!(v instanceof YMap)) throw new Refusal(where, `must be a mapping with a 'grants' key, got ${typeName(v)}`, line);
  gateV7(v, schema);
  rejectNestedMode(v, where);
  rejectUnknownKeys(v, SECTION_KEYS, where);
  const d = v.entry('max_delegation_depth');
  let depth = DEFAULT_MAX_DELEGATION_DEPTH;
  if (d) {
    if (typeof d.value !== 'bigint' || d.value < 0n || d.value > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new Refusal(where, `'max_delegation_depth' must be a non-negative integer, got ${typeName(d.value)}`, d.line);
    }
    depth = Number(toInt(d.value));
  }
  const g = v.entry('grants');
  if (!g || !(g.value instanceof YSeq)) {
    throw new Refusal(
      where,
      `'grants' must be a list, got ${typeName(g?.value)}. A section that governs every action must state what it permits; write 'grants: []' to permit nothing`,
      g?.line ?? line,
    );
  }
  const seq = g.value;
  const grants: Grant[] = [];
  const seen = new Set<string>();
  seq.items.forEach((item, i) => {
    const at = `authority.grants[${i}]`;
    const grant = parseGrantTree(item, at, seq.lines[i] ?? g.line, { ids: 'document', lenient: false, expiresKey: 'expires_at' });
    if (seen.has(grant.id)) {
      throw new Refusal(
        at,
        `duplicate grant id ${JSON.stringify(grant.id)}: a delegation names its parent by id, and two grants answering to one name is an ambiguity nobody can resolve later`,
        seq.lines[i] ?? g.line,
      );
    }
    seen.add(grant.id);
    grants.push(grant);
  });
  const b = v.entry('break_glass');
  if (b && options.standalone === true) {
    throw new Refusal(
      where,
      "a standalone authority document may not declare 'break_glass': an envelope names the controls whose approver_role gates who may open it, and this document has no control registry to resolve them against; move the section into the policy document",
      b.line,
    );
  }
  const envelopes = b ? parseEnvelopes(b.value, b.line, seen) : [];
  return new Authority(grants, { maxDelegationDepth: depth, source, envelopes });
}

function placed(err: unknown, source: string): never {
  if (err instanceof YamlRefusal) throw refusalToPolicyError(err, source);
  if (err instanceof Refusal) throw new PolicyError(`${source}: ${err.where}${err.line ? ` (line ${err.line})` : ''}: ${err.message}`, { cause: err });
  if (err instanceof PolicyError || err instanceof InvalidArgument) throw err;
  throw new PolicyError(`${source}: could not be loaded: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

/**
 * Loads a standalone authority document (`--authority`): top level exactly `schema` and
 * `authority`, schema `ctrlrun.policy/v3` or later. Anything malformed → `PolicyError`.
 */
export function loadAuthority(yamlText: string, options: { source?: string } = {}): Authority {
  const source = options.source ?? '<authority>';
  if (typeof yamlText !== 'string') throw new PolicyError(`${source}: an authority document must be YAML text`);
  try {
    const doc = readYaml(yamlText);
    if (!(doc instanceof YMap)) throw new Refusal('document', `an authority document must be a mapping, got ${typeName(doc)}`, null);
    const schema = doc.get('schema');
    if (typeof schema !== 'string' || !(POLICY_SCHEMAS as readonly string[]).includes(schema)) {
      throw new Refusal(
        'schema',
        `unknown policy schema ${typeof schema === 'string' ? quote(schema) : typeName(schema)}, expected one of ${POLICY_SCHEMAS.map(quote).join(', ')}`,
        doc.entry('schema')?.line ?? null,
      );
    }
    for (const owned of POLICY_OWNED) {
      const e = doc.entry(owned);
      if (e)
        throw new Refusal(
          'top level',
          `an authority document carries 'schema' and 'authority' and nothing else; '${owned}' belongs in the policy document`,
          e.line,
        );
    }
    rejectUnknownKeys(doc, STANDALONE_KEYS, 'top level');
    const a = doc.entry('authority');
    if (!a) throw new Refusal('authority', "no 'authority:' section; a document loaded as authority must state what it permits", null);
    if (POLICY_SCHEMAS.indexOf(schema as (typeof POLICY_SCHEMAS)[number]) < 2) {
      throw new Refusal(
        'authority',
        `'authority' needs 'schema: ctrlrun.policy/v3'; this document declares '${schema}', and an older reader would ignore it and run every action with no authority check at all`,
        a.line,
      );
    }
    return parseAuthoritySection(a.value, a.line, source, schema, { standalone: true });
  } catch (err) {
    return placed(err, source);
  }
}

/**
 * Loads one grant for `ctrlrun delegate --file`: the grant keys minus `id` (an `id` is a
 * `PolicyError`: a delegation's id is assigned, not chosen). The grant comes back unassigned.
 */
export function loadGrant(yamlText: string, options: { source?: string } = {}): Grant {
  const source = options.source ?? '<grant>';
  if (typeof yamlText !== 'string') throw new PolicyError(`${source}: a grant must be YAML text`);
  try {
    return parseGrantTree(readYaml(yamlText), 'grant', 0, {
      ids: 'assigned',
      assignedId: '',
      lenient: false,
      expiresKey: 'expires_at',
      idRefusal: "a delegated grant may not carry 'id'; the id is assigned, not chosen",
    });
  } catch (err) {
    return placed(err, source);
  }
}
