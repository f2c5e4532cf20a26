/**
 * The verify engine: runs each declared guarantee of the catalogue against the operator's policy,
 * each in its own scratch store, with fake executors and no network, composing `Control` exactly
 * as an application does. Runtime-agnostic: the caller injects how scratch stores are made and,
 * where the runtime has them, how separate processes are launched (G4).
 *
 * @module
 */
import type { Action } from '../action.js';
import type { Authority } from '../authority/authority.js';
import { compareCodePoints, orderedJson, parseJson, type JsonObject } from '../canonical.js';
import { verifyChain } from '../chain.js';
import { ActionDenied, AmbiguousEffect, ApprovalMismatch, ApprovalRequired, DuplicateEffect, NotExecuted, PolicyError } from '../errors.js';
import { sha256Tagged } from '../hash.js';
import type { ReceiptRow } from '../model.js';
import { loadPolicy, type Decision, type Policy } from '../policy/policy.js';
import { resolveEffectTemplate } from '../policy/template.js';
import { protect } from '../protect.js';
import type { StateStore } from '../store/state-store.js';
import type { Clock } from '../time.js';
import { CATALOGUE, GUARANTEES, GUARANTEE_IDS, NOT_APPLICABLE, isGuaranteeId, type Guarantee, type GuaranteeId } from './catalogue.js';
import { summarize, VERIFY_SCHEMA, type Counterexample, type GuaranteeResult, type VerifyReport } from './report.js';
import { describeOutcome, Rig, VERIFY_AGENT, type Outcome, type VerifyPrincipal } from './rig.js';
import { SynthesisDefect, templateOnlyPlaceholders, vectorFor, type ActionView, type Vector } from './synthesize.js';

/** A scratch store handed to one scenario; `dispose` removes it (called even on error). */
export interface ScratchStore {
  readonly store: StateStore;
  /**
   * How another process opens the same database (a file path, a URL), or null when it cannot
   * (an in-memory store): then G4 is not applicable.
   */
  readonly locator: string | null;
  dispose(): Promise<void>;
}

/** What a scratch store is made for. */
export interface ScratchRequest {
  readonly guarantee: GuaranteeId;
  /** `scenario`, `control`, … distinct within one guarantee. */
  readonly purpose: string;
  /** The clock the store must use. */
  readonly clock: Clock;
}

/** Makes a fresh, empty, migrated store. */
export type ScratchStoreFactory = (request: ScratchRequest) => Promise<ScratchStore>;

/** What G4 asks a launcher to run: one OS process per entry of `runs`, started together. */
export interface ProcessRequest {
  /** The scratch store's locator. */
  readonly locator: string;
  readonly policyText: string;
  readonly policySource: string;
  readonly action: string;
  readonly principal: VerifyPrincipal;
  readonly environment: string;
  /** One per process: the arguments it acts with. */
  readonly runs: readonly JsonObject[];
}

/** What one process did. `outcome` is `committed` or the refusal as `describeOutcome` words it. */
export interface ProcessOutcome {
  readonly pid: number;
  readonly outcome: string;
}

/** What a launcher observed. */
export interface ProcessReport {
  readonly parentPid: number;
  readonly processes: readonly ProcessOutcome[];
  /** Executor runs, counted outside the store (by exclusive file creation). */
  readonly executorRuns: number;
}

/** Runs processes for G4 (the CLI: `child_process`; absent in a tab or a worker). */
export type ProcessLauncher = (request: ProcessRequest) => Promise<ProcessReport>;

/** Options of {@link runVerify}. */
export interface VerifyOptions {
  /** The policy document's text. */
  readonly policyText: string;
  /** Where it came from, as the report names it. */
  readonly policyPath: string;
  /** Run only these guarantees (`--only`); the rest are `skipped`. */
  readonly only?: readonly GuaranteeId[] | null;
  readonly scratchStore: ScratchStoreFactory;
  readonly launchProcesses?: ProcessLauncher | null;
  /** The scratch backend as the report names it (`sqlite`, `postgresql`, `sql.js (in memory)`). */
  readonly backend: string;
  /** The running ctrlrun's version. */
  readonly version: string;
  /** The wall clock, for `started_at`/`finished_at` and G4 (default: the system clock). */
  readonly now?: Clock;
}

/** Verify refused to run (exit 2): observe mode, a policy that does not load, a bad selection. */
export class VerifyRefusal extends Error {
  override name = 'VerifyRefusal';
}

/** Verify itself went wrong (exit 3): a vector in an unintended rule, an impossible raise, a store that will not open. */
export class VerifyInternalError extends Error {
  override name = 'VerifyInternalError';
}

/** How many processes G4 races. */
export const G4_PROCESSES = 8;

/** T0 when no grant expires: every scenario runs at this instant. */
export const DEFAULT_T0 = new Date('2026-01-01T00:00:00.000Z');

/**
 * Parses `--only` (`G1,G3`): ids separated by commas. Empty, or naming an id the catalogue does
 * not have → {@link VerifyRefusal} naming it and the registry.
 */
export function parseOnly(text: string): GuaranteeId[] {
  const parts = text.split(',').map((s) => s.trim());
  if (text.trim() === '' || parts.some((p) => p === '')) {
    throw new VerifyRefusal(`--only needs a comma-separated list of guarantee ids; the catalogue ${CATALOGUE} has ${GUARANTEE_IDS.join(', ')}`);
  }
  const ids: GuaranteeId[] = [];
  for (const p of parts) {
    const id = p.toUpperCase();
    if (!isGuaranteeId(id)) throw new VerifyRefusal(`--only names ${JSON.stringify(p)}, which is not a guarantee of ${CATALOGUE}: ${GUARANTEE_IDS.join(', ')}`);
    if (!ids.includes(id)) ids.push(id);
  }
  return ids;
}

/** Everything a guarantee's scenario needs. */
interface Context {
  readonly policy: Policy;
  readonly policyText: string;
  readonly policySource: string;
  readonly views: readonly ActionView[];
  readonly environment: string;
  readonly principal: VerifyPrincipal;
  /** A standalone authority, or undefined: the document's inline section, if any. */
  readonly authority: Authority | undefined;
  readonly clock: Clock;
  readonly wallClock: Clock;
  readonly scratch: ScratchStoreFactory;
  readonly launcher: ProcessLauncher | null;
}

/** The actions of the document, sorted by code point, as verify reads them. */
function actionViews(policy: Policy): ActionView[] {
  return policy.actionNames
    .slice()
    .sort(compareCodePoints)
    .map((name) => {
      const entry = policy.action(name)!;
      return { name, effect: entry.effect, resource: entry.resource, rules: policy.rules(name) ?? [] };
    });
}

/** The first vector over `views` (in order) reaching one of `decisions` (tried in that order). */
function firstVector(ctx: Context, decisions: readonly Decision[], filter: (v: ActionView) => boolean = () => true): Vector | null {
  for (const decision of decisions) {
    for (const view of ctx.views) {
      if (!filter(view)) continue;
      const v = vectorFor(ctx.policy, view, decision);
      if (v) return v;
    }
  }
  return null;
}

const hasEffect = (v: ActionView) => v.effect !== null;

/** A result under construction. */
class Builder {
  constructor(readonly g: Guarantee) {}

  base(vector: Vector | null, effectKey: string | null = null) {
    return {
      id: this.g.id,
      title: this.g.title,
      action: vector?.action.name ?? null,
      arguments: vector?.arguments ?? null,
      effect_key: effectKey,
      grant_id: null,
      descends_from: this.g.descendsFrom,
    };
  }

  notApplicable(reason: string, note: string | null = null): GuaranteeResult {
    return { ...this.base(null), status: 'not_applicable', reason, detail: note === null ? {} : { note }, counterexample: null };
  }

  skipped(): GuaranteeResult {
    return { ...this.base(null), status: 'skipped', reason: NOT_APPLICABLE.notSelected, detail: {}, counterexample: null };
  }

  pass(vector: Vector | null, effectKey: string | null, summary: string, detail: JsonObject = {}): GuaranteeResult {
    return { ...this.base(vector, effectKey), status: 'pass', reason: null, detail: { summary, ...detail }, counterexample: null };
  }

  async fail(vector: Vector | null, effectKey: string | null, reason: string, expected: string, observed: string, rig: Rig | null): Promise<GuaranteeResult> {
    const evidence = rig ? await rig.evidence() : { receipts: [], events: [], effects: [] };
    const counterexample: Counterexample = { expected, observed, ...evidence };
    return { ...this.base(vector, effectKey), status: 'fail', reason, detail: {}, counterexample };
  }
}

/** Collects a scenario's unmet expectations; the first one names the failure. */
class Expectations {
  readonly expected: string[] = [];
  readonly observed: string[] = [];
  check(ok: boolean, expected: string, observed: string): void {
    if (!ok) {
      this.expected.push(expected);
      this.observed.push(observed);
    }
  }
  get ok(): boolean {
    return this.expected.length === 0;
  }
}

async function withRig<T>(ctx: Context, g: GuaranteeId, purpose: string, fn: (rig: Rig, scratch: ScratchStore) => Promise<T>, clock: Clock = ctx.clock): Promise<T> {
  let scratch: ScratchStore;
  try {
    scratch = await ctx.scratch({ guarantee: g, purpose, clock });
  } catch (err) {
    throw new VerifyInternalError(`${g}: the scratch store would not open: ${err instanceof Error ? err.message : String(err)}`);
  }
  try {
    const rig = new Rig({ policy: ctx.policy, store: scratch.store, clock, environment: ctx.environment, authority: ctx.authority });
    return await fn(rig, scratch);
  } finally {
    await scratch.dispose();
  }
}

function effectKeyOf(action: Action, view: ActionView): string | null {
  return view.effect === null ? null : resolveEffectTemplate(view.effect, action.canonicalArguments, action.resource);
}

/** The same vector with one string argument mutated (`-mutated`), else an extra argument; same rule. */
function mutate(ctx: Context, vector: Vector): { args: JsonObject; what: string } {
  const same = (args: JsonObject) => {
    const e = ctx.policy.evaluate(vector.action.name, args);
    return e.decision === vector.evaluation.decision && e.reason === vector.evaluation.reason;
  };
  for (const k of Object.keys(vector.arguments).sort(compareCodePoints)) {
    const v = vector.arguments[k];
    if (typeof v !== 'string') continue;
    const args = { ...vector.arguments, [k]: `${v}-mutated` };
    if (same(args)) return { args, what: k };
  }
  const args = { ...vector.arguments, ctrlrun_verify_mutation: '1' };
  if (!same(args)) throw new VerifyInternalError(`G1: an extra argument moved ${vector.action.name} out of ${vector.evaluation.reason}`);
  return { args, what: 'ctrlrun_verify_mutation' };
}

/** `n` vectors with distinct effect keys and the same rule, or null. */
function variants(ctx: Context, vector: Vector, n: number): JsonObject[] | null {
  const keys = templateOnlyPlaceholders(vector.action).concat(Object.keys(vector.arguments).sort(compareCodePoints));
  for (const k of keys) {
    const v = vector.arguments[k];
    if (typeof v !== 'string') continue;
    const out: JsonObject[] = [];
    for (let i = 1; i <= n; i++) {
      const args = { ...vector.arguments, [k]: `${v}-${i}` };
      const e = ctx.policy.evaluate(vector.action.name, args);
      if (e.decision !== vector.evaluation.decision || e.reason !== vector.evaluation.reason) break;
      out.push(args);
    }
    if (out.length === n) {
      const effect = vector.action.effect;
      if (effect === null) return out;
      const distinct = new Set(out.map((a) => resolveEffectTemplate(effect, a, null)));
      if (distinct.size === n) return out;
    }
  }
  return null;
}

function isMismatch(o: Outcome, reason: string): boolean {
  return !o.ok && o.error instanceof ApprovalMismatch && o.error.reason === reason;
}

// ---- the guarantees ----

async function g1(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const vector = firstVector(ctx, ['approve']);
  if (!vector) return b.notApplicable(NOT_APPLICABLE.noApproval);
  const name = vector.action.name;
  const control = await withRig(ctx, 'G1', 'control', async (rig) => {
    const got = await rig.approve(rig.action(name, vector.arguments, ctx.principal));
    if (!('requestId' in got)) return { ok: false, observed: `asking for approval: ${describeOutcome(got.outcome)}`, rig: null };
    const o = await rig.attempt(rig.action(name, vector.arguments, ctx.principal), 'commit', got.requestId);
    return { ok: o.ok && rig.totalRuns === 1, observed: `${describeOutcome(o)}, ${rig.totalRuns} executor run(s)`, rig: null };
  });
  if (!control.ok) return b.fail(vector, null, 'control failed', 'the unmutated action, presented with its approval, commits once', control.observed, null);
  const mutation = mutate(ctx, vector);
  return withRig(ctx, 'G1', 'scenario', async (rig) => {
    const original = rig.action(name, vector.arguments, ctx.principal);
    const got = await rig.approve(original);
    if (!('requestId' in got)) return b.fail(vector, null, 'the approval could not be requested', 'ApprovalRequired', describeOutcome(got.outcome), rig);
    const mutated = rig.action(name, mutation.args, ctx.principal);
    const o = await rig.attempt(mutated, 'commit', got.requestId);
    const status = (await rig.store.getApproval(got.requestId))?.status ?? 'missing';
    const invalidated = rig.events.some((e) => e.type === 'APPROVAL_INVALIDATED' && e.data['reason'] === 'mismatch');
    const x = new Expectations();
    x.check(isMismatch(o, 'mismatch'), 'ApprovalMismatch(reason=mismatch)', describeOutcome(o));
    x.check(rig.totalRuns === 0, '0 executor runs', `${rig.totalRuns} executor run(s)`);
    x.check(status === 'granted', 'the approval still granted', `the approval is ${status}`);
    x.check(invalidated, 'an APPROVAL_INVALIDATED event (mismatch)', 'none');
    const key = effectKeyOf(mutated, vector.action);
    if (!x.ok) return b.fail(vector, key, o.ok ? 'the mutated action ran' : 'the mutated action was not refused as a mismatch', x.expected.join('; '), x.observed.join('; '), rig);
    return b.pass(vector, key, `${mutation.what} mutated, refused as mismatch, 0 calls`, { mutated: mutation.what });
  });
}

async function g2(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const vector = firstVector(ctx, ['approve']);
  if (!vector) return b.notApplicable(NOT_APPLICABLE.noApproval);
  const name = vector.action.name;
  return withRig(ctx, 'G2', 'scenario', async (rig) => {
    const got = await rig.approve(rig.action(name, vector.arguments, ctx.principal));
    if (!('requestId' in got)) return b.fail(vector, null, 'the approval could not be requested', 'ApprovalRequired', describeOutcome(got.outcome), rig);
    const first = rig.action(name, vector.arguments, ctx.principal);
    const o1 = await rig.attempt(first, 'commit', got.requestId);
    const key = effectKeyOf(first, vector.action);
    if (!o1.ok || rig.totalRuns !== 1) {
      return b.fail(vector, key, 'control failed', 'the first presentation commits once', `${describeOutcome(o1)}, ${rig.totalRuns} executor run(s)`, rig);
    }
    const o2 = await rig.attempt(rig.action(name, vector.arguments, ctx.principal), 'commit', got.requestId);
    const x = new Expectations();
    x.check(isMismatch(o2, 'consumed'), 'ApprovalMismatch(reason=consumed)', describeOutcome(o2));
    x.check(rig.totalRuns === 1, '1 executor run in total', `${rig.totalRuns}`);
    if (!x.ok) return b.fail(vector, key, o2.ok ? 'the replayed approval ran the action again' : 'the replay was not refused as consumed', x.expected.join('; '), x.observed.join('; '), rig);
    return b.pass(vector, key, 'replay refused as consumed, 1 call');
  });
}

function effectNotApplicable(ctx: Context, b: Builder): GuaranteeResult | null {
  if (ctx.views.some(hasEffect)) return null;
  return b.notApplicable(NOT_APPLICABLE.noEffectTemplate, ctx.policy.schema === 'ctrlrun.policy/v1' ? NOT_APPLICABLE.noEffectTemplateNote : null);
}

const NO_EFFECT_VECTOR = 'every action with an `effect:` template is denied';

async function g3(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const na = effectNotApplicable(ctx, b);
  if (na) return na;
  const vector = firstVector(ctx, ['allow', 'approve'], hasEffect);
  if (!vector) return b.notApplicable(NO_EFFECT_VECTOR);
  const name = vector.action.name;
  return withRig(ctx, 'G3', 'scenario', async (rig) => {
    const first = rig.action(name, vector.arguments, ctx.principal);
    const key = effectKeyOf(first, vector.action);
    const o1 = await rig.complete(first, 'commit');
    if (!o1.ok || rig.totalRuns !== 1) return b.fail(vector, key, 'control failed', 'the first action commits once', `${describeOutcome(o1)}, ${rig.totalRuns} executor run(s)`, rig);
    const o2 = await rig.complete(rig.action(name, vector.arguments, ctx.principal), 'commit');
    const record = key === null ? null : await rig.store.getEffect(key);
    const x = new Expectations();
    x.check(!o2.ok && o2.error instanceof DuplicateEffect && o2.error.state === 'committed', 'DuplicateEffect(state=committed)', describeOutcome(o2));
    x.check(rig.totalRuns === 1, '1 executor run in total', `${rig.totalRuns}`);
    x.check(record?.attempt === 1, 'the record at attempt 1', `attempt ${String(record?.attempt)}`);
    x.check(record?.actionId === first.actionId, `the record held by the first action ${first.actionId}`, String(record?.actionId));
    if (!x.ok) return b.fail(vector, key, o2.ok ? 'the duplicate ran' : 'the duplicate was not refused as committed', x.expected.join('; '), x.observed.join('; '), rig);
    return b.pass(vector, key, 'second run refused as a committed duplicate, 1 call');
  });
}

async function g4(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const na = effectNotApplicable(ctx, b);
  if (na) return na;
  const vector = firstVector(ctx, ['allow', 'approve'], hasEffect);
  if (!vector) return b.notApplicable(NO_EFFECT_VECTOR);
  const launcher = ctx.launcher;
  if (launcher === null) return b.notApplicable(NOT_APPLICABLE.perConnection);
  if (vector.evaluation.decision === 'approve') {
    // Each process would need its own approval, granted on a clock the processes do not share.
    return b.notApplicable('every action with an `effect:` template that verify can reach requires approval, and G4 runs without a human');
  }
  const name = vector.action.name;
  const spread = variants(ctx, vector, G4_PROCESSES);
  const launch = async (scratch: ScratchStore, runs: JsonObject[]) =>
    launcher({ locator: scratch.locator!, policyText: ctx.policyText, policySource: ctx.policySource, action: name, principal: ctx.principal, environment: ctx.environment, runs });
  const distinctPids = (r: ProcessReport) => new Set(r.processes.map((p) => p.pid)).size === r.processes.length && r.processes.every((p) => p.pid !== r.parentPid);

  // The processes use the real clock; so do these stores.
  const control = await withRig(
    ctx,
    'G4',
    'control',
    async (rig, scratch) => {
      if (scratch.locator === null) return { na: true as const };
      if (spread === null) return { na: false as const, ok: false, observed: 'verify could not build 8 arguments vectors with distinct effect keys on the same rule' };
      let report: ProcessReport;
      try {
        report = await launch(scratch, spread);
      } catch (err) {
        return { na: false as const, ok: false, observed: `the processes could not be started: ${err instanceof Error ? err.message : String(err)}` };
      }
      const committed = report.processes.filter((p) => p.outcome === 'committed').length;
      const records = await rig.store.listEffects('committed');
      const ok = committed === G4_PROCESSES && report.executorRuns === G4_PROCESSES && records.length === G4_PROCESSES && distinctPids(report);
      return { na: false as const, ok, observed: `${committed} committed, ${report.executorRuns} executor run(s), ${records.length} committed record(s)` };
    },
    ctx.wallClock,
  );
  if (control.na) return b.notApplicable(NOT_APPLICABLE.perConnection);
  if (!control.ok) return b.fail(vector, null, 'control failed', `${G4_PROCESSES} processes on ${G4_PROCESSES} keys all commit`, control.observed, null);

  return withRig(
    ctx,
    'G4',
    'scenario',
    async (rig, scratch) => {
      const runs = Array.from({ length: G4_PROCESSES }, () => vector.arguments);
      const key = vector.action.effect === null ? null : resolveEffectTemplate(vector.action.effect, vector.arguments, null);
      let report: ProcessReport;
      try {
        report = await launch(scratch, runs);
      } catch (err) {
        return b.fail(vector, key, 'the processes could not be started', `${G4_PROCESSES} processes`, err instanceof Error ? err.message : String(err), rig);
      }
      const committed = report.processes.filter((p) => p.outcome === 'committed').length;
      const refused = report.processes.filter((p) => p.outcome.startsWith('DuplicateEffect(')).length;
      const record = key === null ? null : await rig.store.getEffect(key);
      const x = new Expectations();
      x.check(report.processes.length === G4_PROCESSES, `${G4_PROCESSES} processes`, `${report.processes.length}`);
      x.check(committed === 1, 'exactly 1 process commits', `${committed} committed`);
      x.check(refused === G4_PROCESSES - 1, `${G4_PROCESSES - 1} refused as duplicates`, report.processes.map((p) => p.outcome).join(', '));
      x.check(report.executorRuns === 1, '1 executor run', `${report.executorRuns}`);
      x.check(record?.state === 'committed', 'the key committed', String(record?.state ?? 'no record'));
      x.check(distinctPids(report), 'process ids distinct from each other and from the parent', 'a repeated process id');
      if (!x.ok) return b.fail(vector, key, report.executorRuns > 1 ? 'the effect ran more than once' : 'the race did not have exactly one winner', x.expected.join('; '), x.observed.join('; '), rig);
      return b.pass(vector, key, `${G4_PROCESSES} processes, 1 winner, 1 executor run`, { processes: G4_PROCESSES });
    },
    ctx.wallClock,
  );
}

async function g5(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const na = effectNotApplicable(ctx, b);
  if (na) return na;
  const vector = firstVector(ctx, ['allow', 'approve'], hasEffect);
  if (!vector) return b.notApplicable(NO_EFFECT_VECTOR);
  const name = vector.action.name;
  const control = await withRig(ctx, 'G5', 'control', async (rig) => {
    const a1 = rig.action(name, vector.arguments, ctx.principal);
    const key = effectKeyOf(a1, vector.action)!;
    const o1 = await rig.complete(a1, 'not_executed');
    const state = (await rig.store.getEffect(key))?.state;
    const o2 = await rig.complete(rig.action(name, vector.arguments, ctx.principal), 'commit');
    const ok = !o1.ok && o1.error instanceof NotExecuted && state === 'failed' && o2.ok && rig.totalRuns === 2;
    return { ok, observed: `${describeOutcome(o1)} → ${String(state)}; retry ${describeOutcome(o2)}; ${rig.totalRuns} executor run(s)` };
  });
  if (!control.ok) return b.fail(vector, null, 'control failed', 'NotExecuted → failed, and the retry commits (2 calls)', control.observed, null);
  return withRig(ctx, 'G5', 'scenario', async (rig) => {
    const a1 = rig.action(name, vector.arguments, ctx.principal);
    const key = effectKeyOf(a1, vector.action)!;
    const o1 = await rig.complete(a1, 'timeout');
    const afterLost = (await rig.store.getEffect(key))?.state;
    const lostReceipt = rig.receipts.at(-1)?.document['result'];
    const before = rig.receipts.length;
    const o2 = await rig.complete(rig.action(name, vector.arguments, ctx.principal), 'commit');
    const retryReceipt = rig.receipts.length > before ? rig.receipts.at(-1)?.document['result'] : 'none';
    const afterRetry = (await rig.store.getEffect(key))?.state;
    const x = new Expectations();
    x.check(!o1.ok && afterLost === 'ambiguous', 'a lost reply leaves the effect ambiguous', `${describeOutcome(o1)} → ${String(afterLost)}`);
    x.check(lostReceipt === 'ambiguous', "the lost reply's receipt is ambiguous", String(lostReceipt));
    x.check(!o2.ok && o2.error instanceof AmbiguousEffect, 'the retry refused with AmbiguousEffect', describeOutcome(o2));
    x.check(rig.totalRuns === 1, '1 remote call', `${rig.totalRuns}`);
    x.check(retryReceipt === 'blocked', "the retry's receipt is blocked", String(retryReceipt));
    x.check(afterRetry === 'ambiguous', 'the record still ambiguous', String(afterRetry));
    if (!x.ok) return b.fail(vector, key, o2.ok ? 'the blind retry ran' : 'an ambiguous effect was not held', x.expected.join('; '), x.observed.join('; '), rig);
    return b.pass(vector, key, 'retry refused as ambiguous, 1 call');
  });
}

/** `ctrlrun.verify.absent.<12 hex of sha256(sorted names joined "\n")>`: a name the policy cannot list. */
export function absentActionName(policy: Policy): string {
  const names = policy.actionNames.slice().sort(compareCodePoints).join('\n');
  return `ctrlrun.verify.absent.${sha256Tagged(new TextEncoder().encode(names)).slice('sha256:'.length, 'sha256:'.length + 12)}`;
}

async function g6(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  if (ctx.views.length === 0) return b.notApplicable(NOT_APPLICABLE.noActions);
  const selectable = firstVector(ctx, ['allow', 'approve']);
  if (!selectable) return b.notApplicable(NOT_APPLICABLE.everyActionDenied);
  const absent = absentActionName(ctx.policy);
  return withRig(ctx, 'G6', 'scenario', async (rig) => {
    const known = await rig.control.evaluate(rig.action(selectable.action.name, selectable.arguments, ctx.principal));
    if (known.decision === 'deny') return b.fail(selectable, null, 'control failed', `${selectable.action.name} evaluates non-deny`, `deny (${known.reason})`, rig);
    const unknown = rig.action(absent, {}, ctx.principal);
    const o = await rig.attempt(unknown, 'commit');
    const receipt = rig.receipts.find((r) => r.document['action_id'] === unknown.actionId);
    const x = new Expectations();
    x.check(!o.ok && o.error instanceof ActionDenied && o.error.reason === 'unknown_action', 'ActionDenied(reason=unknown_action)', describeOutcome(o));
    x.check(rig.totalRuns === 0, '0 executor runs', `${rig.totalRuns}`);
    x.check(receipt?.document['result'] === 'denied', 'a denied receipt', String(receipt?.document['result'] ?? 'no receipt'));
    const subject: Vector = { action: { name: absent, effect: null, resource: null, rules: [] }, arguments: {}, evaluation: { decision: 'deny', reason: 'unknown_action', controls: [], warnings: [] } };
    if (!x.ok) return b.fail(subject, null, o.ok ? 'the unknown action ran' : 'the unknown action was not refused as unknown_action', x.expected.join('; '), x.observed.join('; '), rig);
    return b.pass(subject, null, 'refused as unknown_action, 0 calls, denied receipt');
  });
}

async function g7(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const vector = firstVector(ctx, ['allow', 'approve']);
  if (!vector) return b.notApplicable(NOT_APPLICABLE.everyActionDenied);
  const name = vector.action.name;
  const wrap = (rig: Rig) => protect<JsonObject, unknown>((args) => rig.executor('commit')(args, { effectKey: null }), { control: rig.control, name });
  const control = await withRig(ctx, 'G7', 'control', async (rig) => {
    const fn = wrap(rig);
    let observed = 'ran';
    try {
      await fn(vector.arguments, { principal: ctx.principal });
    } catch (err) {
      if (err instanceof ApprovalRequired) {
        await rig.control.grantApproval(err.requestId, { approver: VERIFY_AGENT });
        try {
          await fn(vector.arguments, { principal: ctx.principal, approvalId: err.requestId });
        } catch (again) {
          observed = describeOutcome({ ok: false, error: again });
        }
      } else observed = describeOutcome({ ok: false, error: err });
    }
    return { ok: rig.totalRuns === 1, observed: `${observed}, ${rig.totalRuns} executor run(s)` };
  });
  if (!control.ok) return b.fail(vector, null, 'control failed', 'the same call with a principal runs', control.observed, null);
  return withRig(ctx, 'G7', 'scenario', async (rig) => {
    let o: Outcome;
    try {
      o = { ok: true, value: (await wrap(rig)(vector.arguments)) as JsonObject };
    } catch (error) {
      o = { ok: false, error };
    }
    const receipts = (await rig.store.receipts()).length;
    const events = (await rig.store.events()).length;
    const x = new Expectations();
    x.check(!o.ok && o.error instanceof ActionDenied && o.error.reason === 'no_principal', 'ActionDenied(reason=no_principal)', describeOutcome(o));
    x.check(rig.totalRuns === 0, '0 executor runs', `${rig.totalRuns}`);
    x.check(receipts === 0 && events === 0, 'no receipt and no event', `${receipts} receipt(s), ${events} event(s)`);
    if (!x.ok) return b.fail(vector, null, o.ok ? 'the call without a principal ran' : 'the call was not refused as no_principal', x.expected.join('; '), x.observed.join('; '), rig);
    return b.pass(vector, null, 'refused as no_principal, 0 calls, no evidence');
  });
}

async function g10(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const vector = firstVector(ctx, ['allow', 'approve'], hasEffect) ?? firstVector(ctx, ['allow', 'approve']);
  if (!vector) return b.notApplicable(NOT_APPLICABLE.everyActionDenied);
  const name = vector.action.name;
  const once = (behaviour: 'timeout' | 'error' | 'not_executed') =>
    withRig(ctx, 'G10', behaviour, async (rig) => {
      const a = rig.action(name, vector.arguments, ctx.principal);
      const key = effectKeyOf(a, vector.action);
      const o = await rig.complete(a, behaviour);
      const receipt = rig.receipts.at(-1)?.document['result'];
      const state = key === null ? null : ((await rig.store.getEffect(key))?.state ?? 'no record');
      return { o, key, receipt: String(receipt ?? 'no receipt'), state, rig };
    });
  const control = await once('not_executed');
  if (control.receipt !== 'failed' || (control.state !== null && control.state !== 'failed')) {
    return b.fail(vector, control.key, 'control failed', 'NotExecuted → a failed receipt (FAILED)', `${control.receipt} receipt, record ${String(control.state)}`, null);
  }
  const x = new Expectations();
  for (const behaviour of ['timeout', 'error'] as const) {
    const r = await once(behaviour);
    x.check(!r.o.ok && r.receipt === 'ambiguous', `${behaviour}: an ambiguous receipt`, `${describeOutcome(r.o)}, ${r.receipt} receipt`);
    if (r.state !== null) x.check(r.state === 'ambiguous', `${behaviour}: the record AMBIGUOUS`, String(r.state).toUpperCase());
  }
  if (!x.ok) return b.fail(vector, control.key, 'an unknown exception was not recorded ambiguous', x.expected.join('; '), x.observed.join('; '), null);
  return b.pass(vector, control.key, 'timeout and a generic error recorded ambiguous');
}

async function g11(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  if (ctx.views.length === 0) return b.notApplicable(NOT_APPLICABLE.noActions);
  const vector = firstVector(ctx, ['allow', 'deny']);
  const name = vector?.action.name ?? absentActionName(ctx.policy);
  const args = vector?.arguments ?? {};
  return withRig(ctx, 'G11', 'scenario', async (rig) => {
    for (let i = 0; i < 3; i++) await rig.attempt(rig.action(name, args, ctx.principal), 'commit');
    const rows = await rig.store.receipts();
    const head = await rig.store.chainHead();
    const intact = verifyChain(rows, head);
    const returned = rig.receipts.every((r) => Number.isSafeInteger(r.seq) && typeof r.hash === 'string' && r.hash.startsWith('sha256:'));
    if (!intact.ok || intact.verified < 3 || !returned || rows.some((r) => r.seq === null || r.hash === null)) {
      return b.fail(vector, null, 'control failed', 'an intact chain of at least 3 receipts verifies, with seq and hash', orderedJson({ ok: intact.ok, verified: intact.verified, breaks: intact.breaks.map((x) => x.name) }), rig);
    }
    // Alter receipt 2 in a read-only view: the store is not touched.
    const altered: ReceiptRow[] = rows.map((r) => {
      if (r.seq !== 2 || r.json === null) return r;
      const doc = parseJson(r.json) as JsonObject;
      doc['decision_reason'] = `${String(doc['decision_reason'])}-altered`;
      return { ...r, json: orderedJson(doc) };
    });
    const report = verifyChain(altered, head);
    const found = report.breaks.find((x) => x.name === 'content_altered' && x.seq === 2);
    if (!found) {
      return b.fail(vector, null, 'the altered receipt was not detected', 'content_altered at seq 2', orderedJson(report.breaks.map((x) => ({ name: x.name, seq: x.seq }))), rig);
    }
    return b.pass(vector ?? { action: { name, effect: null, resource: null, rules: [] }, arguments: {}, evaluation: { decision: 'deny', reason: 'unknown_action', controls: [], warnings: [] } }, null, 'content_altered at seq 2 of 3');
  });
}

async function authorityNotApplicable(_ctx: Context, b: Builder): Promise<GuaranteeResult> {
  return b.notApplicable(NOT_APPLICABLE.noAuthority);
}

const RUNNERS: Record<GuaranteeId, (ctx: Context, b: Builder) => Promise<GuaranteeResult>> = {
  G1: g1,
  G2: g2,
  G3: g3,
  G4: g4,
  G5: g5,
  G6: g6,
  G7: g7,
  G8: authorityNotApplicable,
  G9: authorityNotApplicable,
  G10: g10,
  G11: g11,
};

/** Loads the policy for verify: a document that does not load is a refusal; so is observe mode. */
export function loadVerifyPolicy(text: string, source: string): Policy {
  let policy: Policy;
  try {
    policy = loadPolicy(text, { source });
  } catch (err) {
    if (err instanceof PolicyError) throw new VerifyRefusal(err.message);
    throw err;
  }
  if (policy.mode === 'observe') {
    throw new VerifyRefusal(`${source} is in observe mode: nothing is enforced, so no guarantee can hold; verify an enforcing configuration`);
  }
  return policy;
}

function sha256Hex(text: string): string {
  return sha256Tagged(new TextEncoder().encode(text)).slice('sha256:'.length);
}

/**
 * Runs the catalogue against a policy. Refusals throw {@link VerifyRefusal} (exit 2); verify's own
 * failures throw {@link VerifyInternalError} (exit 3); everything else is in the report.
 */
export async function runVerify(options: VerifyOptions): Promise<VerifyReport> {
  const now = options.now ?? (() => new Date());
  const startedAt = now().toISOString();
  const policy = loadVerifyPolicy(options.policyText, options.policyPath);
  const only = options.only ?? null;
  if (only !== null && only.length === 0) throw new VerifyRefusal(`--only selected nothing; the catalogue ${CATALOGUE} has ${GUARANTEE_IDS.join(', ')}`);
  const t0 = DEFAULT_T0;
  const ctx: Context = {
    policy,
    policyText: options.policyText,
    policySource: options.policyPath,
    views: actionViews(policy),
    environment: policy.environment ?? 'production',
    principal: { agent: VERIFY_AGENT, user: null },
    authority: undefined,
    clock: () => new Date(t0.getTime()),
    wallClock: now,
    scratch: options.scratchStore,
    launcher: options.launchProcesses ?? null,
  };
  const results: GuaranteeResult[] = [];
  for (const g of GUARANTEES) {
    const b = new Builder(g);
    if (only !== null && !only.includes(g.id)) {
      results.push(b.skipped());
      continue;
    }
    try {
      results.push(await RUNNERS[g.id](ctx, b));
    } catch (err) {
      if (err instanceof VerifyInternalError) throw err;
      if (err instanceof SynthesisDefect) throw new VerifyInternalError(`${g.id}: ${err.message}`);
      throw new VerifyInternalError(`${g.id}: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`);
    }
  }
  const partial = only !== null;
  return {
    schema: VERIFY_SCHEMA,
    catalogue: CATALOGUE,
    ctrlrun_version: options.version,
    started_at: startedAt,
    finished_at: now().toISOString(),
    policy: { path: options.policyPath, sha256: sha256Hex(options.policyText), schema: policy.schema, mode: policy.mode, actions: policy.actionNames.length },
    authority: null,
    store: { backend: options.backend, scratch: true },
    partial,
    summary: summarize(results, partial),
    guarantees: results,
  };
}
