/**
 * The guarantee catalogue `ctrlrun.guarantees/v2`: eleven guarantees with permanent ids, their
 * titles, where each descends from, and the exact not-applicable reasons.
 *
 * @module
 */

/** The catalogue's name, as reports print it. */
export const CATALOGUE = 'ctrlrun.guarantees/v2';

/** A guarantee id. Ids are permanent: a retired guarantee keeps its number. */
export type GuaranteeId = 'G1' | 'G2' | 'G3' | 'G4' | 'G5' | 'G6' | 'G7' | 'G8' | 'G9' | 'G10' | 'G11';

/** One catalogue entry. */
export interface Guarantee {
  readonly id: GuaranteeId;
  readonly title: string;
  /** The earlier tests and sections the guarantee descends from. */
  readonly descendsFrom: readonly string[];
}

/** Every guarantee, in catalogue order. */
export const GUARANTEES: readonly Guarantee[] = Object.freeze([
  { id: 'G1', title: 'mutated approval refused', descendsFrom: ['v0.1 §7 T2'] },
  { id: 'G2', title: 'replayed approval refused', descendsFrom: ['T4', 'T12'] },
  { id: 'G3', title: 'duplicate effect refused', descendsFrom: ['v0.1 §5.3 E2', 'v0.2 §10 T14'] },
  { id: 'G4', title: 'one winner under concurrency', descendsFrom: ['T3'] },
  { id: 'G5', title: 'ambiguous blocks a blind retry', descendsFrom: ['T1', 'T8'] },
  { id: 'G6', title: 'unknown action refused', descendsFrom: ['T6'] },
  { id: 'G7', title: 'no principal refused', descendsFrom: ['v0.1 §2.1', 'v0.2 §10 T21', 'v0.3 §10 T62'] },
  { id: 'G8', title: 'expired authority refused', descendsFrom: ['v0.3 §10 T71'] },
  { id: 'G9', title: 'delegation cannot escalate', descendsFrom: ['T76', 'T81', 'T75'] },
  { id: 'G10', title: 'unknown exception is ambiguous', descendsFrom: ['v0.1 §5.5', 'T1', 'T8'] },
  { id: 'G11', title: 'an altered receipt is detected', descendsFrom: ['v0.6 §6.5', 'v0.6 §8 T164'] },
] as const satisfies readonly Guarantee[]);

/** Every id, in catalogue order. */
export const GUARANTEE_IDS: readonly GuaranteeId[] = Object.freeze(GUARANTEES.map((g) => g.id));

/** The not-applicable reasons, word for word: they are about the document, never about the run. */
export const NOT_APPLICABLE = Object.freeze({
  noApproval: 'no action requires approval',
  noEffectTemplate: 'no action declares an `effect:` template',
  noEffectTemplateNote: 'in a `ctrlrun.policy/v1` document the template lives in the @protect decorator, which verify does not read',
  perConnection: 'the configured store backend is per-connection and cannot reserve across processes',
  callerResource: "the effect key names `{resource}` and the policy derives no resource: the caller supplies it, and G4's processes act with the policy alone",
  grantExpiredForProcesses: "the grant covering this action expired before this run, and G4's processes cannot share an injected clock",
  noActions: 'the policy lists no action, so an unknown action is indistinguishable from a known one',
  everyActionDenied: 'every action in the policy is denied',
  noAuthority: 'no authority section',
  noExpiringGrant: 'no grant declares an expires_at',
  noGrantMatches: 'no grant matches any action in the policy',
  notLastAuthority: "no grant's expiry is the last authority for an action it covers; another grant still permits the action after it lapses",
  noDelegableGrant: 'no grant is delegable',
  notSelected: 'not selected',
});

/** The catalogue entry for `id`. */
export function guarantee(id: GuaranteeId): Guarantee {
  const g = GUARANTEES.find((x) => x.id === id);
  if (!g) throw new RangeError(`unknown guarantee ${String(id)}`);
  return g;
}

/** Whether `id` names a guarantee of this catalogue. */
export function isGuaranteeId(id: string): id is GuaranteeId {
  return (GUARANTEE_IDS as readonly string[]).includes(id);
}
