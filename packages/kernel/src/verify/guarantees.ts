/**
 * The eleven scenarios. Each runs its positive control and its scenario in scratch stores of
 * their own and reports `pass`, `fail` (with a counterexample), or `not_applicable` with a reason
 * about the document. A control that misbehaves is a fail, reason `control failed`.
 *
 * @module
 */
import type { Action } from '../action.js';
import { AuthorityDenied } from '../errors.js';
import type { Grant, GrantInput } from '../authority/grant.js';
import { AUTHORITY_REASONS } from '../authority/authority.js';
import { compareCodePoints, orderedJson, parseJson, type JsonObject, type JsonValue } from '../canonical.js';
import { verifyChain } from '../chain.js';
import {
  ActionDenied,
  AmbiguousEffect,
  ApprovalMismatch,
  ApprovalRequired,
  AuthorityEscalation,
  DuplicateEffect,
  EffectKeyError,
  InvalidArgument,
  NotExecuted,
} from '../errors.js';
import { sha256TaggedText } from '../hash.js';
import type { ReceiptRow } from '../model.js';
import type { Decision, Policy } from '../policy/policy.js';
import { resolveEffectTemplate } from '../policy/template.js';
import { protect } from '../protect.js';
import type { Clock } from '../time.js';
import { NOT_APPLICABLE, type Guarantee, type GuaranteeId } from './catalogue.js';
import type { ProcessReport, ScratchStore } from './contracts.js';
import { VerifyInternalError } from './errors.js';
import type { Counterexample, GuaranteeResult } from './report.js';
import { describeOutcome, Rig, VERIFY_AGENT, type Outcome } from './rig.js';
import {
  documentEnvironment,
  grantNamesAction,
  grantsById,
  isSelection,
  principalFor,
  probeAction,
  select,
  selectUnder,
  type Context,
  type GrantMiss,
  type Selection,
} from './select.js';
import {
  effectKeyFor,
  needsCallerResource,
  shiftInt,
  VERIFY_RESOURCE,
  templateOnlyPlaceholders,
  valueBeside,
  type ActionView,
  type Vector,
} from './synthesize.js';

/** How many processes G4 races. */
export const G4_PROCESSES = 8;

/** What a result is about when it is not a selection's vector (an absent action, a grant). */
interface Subject {
  readonly action: string | null;
  readonly args: JsonObject | null;
  readonly grantId?: string;
}

/** A result under construction. */
export class Builder {
  constructor(readonly g: Guarantee) {}

  /** A result with the report's key order. */
  #result(
    status: GuaranteeResult['status'],
    reason: string | null,
    sel: Selection | null,
    effectKey: string | null,
    detail: JsonObject,
    counterexample: Counterexample | null,
    subject: Subject | null = null,
  ): GuaranteeResult {
    return {
      id: this.g.id,
      title: this.g.title,
      status,
      reason,
      action: subject ? subject.action : (sel?.vector.action.name ?? null),
      arguments: subject ? subject.args : (sel?.vector.arguments ?? null),
      effect_key: effectKey,
      grant_id: subject?.grantId ?? sel?.grant?.id ?? null,
      descends_from: this.g.descendsFrom,
      detail,
      counterexample,
    };
  }

  notApplicable(reason: string, note: string | null = null): GuaranteeResult {
    return this.#result('not_applicable', reason, null, null, note === null ? {} : { note }, null);
  }

  /** Not applicable for a miss: its reason and note. */
  missed(miss: GrantMiss): GuaranteeResult {
    return this.notApplicable(miss.reason, miss.note);
  }

  skipped(): GuaranteeResult {
    return this.#result('skipped', NOT_APPLICABLE.notSelected, null, null, {}, null);
  }

  pass(sel: Selection | null, effectKey: string | null, summary: string, detail: JsonObject = {}, subject: Subject | null = null): GuaranteeResult {
    return this.#result('pass', null, sel, effectKey, { summary, ...detail }, null, subject);
  }

  async fail(
    sel: Selection | null,
    effectKey: string | null,
    reason: string,
    expected: string,
    observed: string,
    rig: Rig | null,
    subject: Subject | null = null,
  ): Promise<GuaranteeResult> {
    const evidence = rig ? await rig.evidence() : { receipts: [], events: [], effects: [] };
    return this.#result('fail', reason, sel, effectKey, {}, { expected, observed, ...evidence }, subject);
  }
}

/** Collects a scenario's unmet expectations. */
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

/** Runs `fn` on a fresh rig over a fresh scratch store, removed afterwards whatever happens. */
async function withRig<T>(
  ctx: Context,
  g: GuaranteeId,
  purpose: string,
  environment: string,
  fn: (rig: Rig, scratch: ScratchStore) => Promise<T>,
  clock: Clock = ctx.clock,
): Promise<T> {
  let scratch: ScratchStore;
  try {
    scratch = await ctx.scratch({ guarantee: g, purpose, clock });
  } catch (err) {
    throw new VerifyInternalError(`${g}: the scratch store would not open: ${err instanceof Error ? err.message : String(err)}`);
  }
  try {
    const rig = new Rig({ policy: ctx.policy, store: scratch.store, clock, environment, authority: ctx.standalone?.authority });
    return await fn(rig, scratch);
  } finally {
    await scratch.dispose();
  }
}

const hasEffect = (v: ActionView) => v.effect !== null;

/** The key a scenario's action reserves, for the report; null when it has none or none can be built (the run says why). */
function effectKeyOf(action: Action, view: ActionView): string | null {
  return orNoKey(() => (view.effect === null ? null : resolveEffectTemplate(view.effect, action.canonicalArguments, action.resource)));
}

function orNoKey(key: () => string | null): string | null {
  try {
    return key();
  } catch (err) {
    if (err instanceof EffectKeyError || err instanceof InvalidArgument) return null;
    throw err;
  }
}

/** Whether the evaluation of `args` stays on the vector's decision and rule. */
function sameRule(policy: Policy, vector: Vector, args: JsonObject): boolean {
  const e = policy.evaluate(vector.action.name, args);
  return e.decision === vector.evaluation.decision && e.reason === vector.evaluation.reason;
}

/** The same vector with one string argument mutated (`-mutated`), else an extra argument; same rule, same grant. */
function mutate(ctx: Context, sel: Selection): { args: JsonObject; what: string } {
  const { vector } = sel;
  const keeps = (args: JsonObject) => sameRule(ctx.policy, vector, args) && (sel.grant === null || sel.grant.constraintsHold(args, []));
  for (const k of Object.keys(vector.arguments).sort(compareCodePoints)) {
    const v = vector.arguments[k];
    if (typeof v !== 'string') continue;
    const args = { ...vector.arguments, [k]: `${v}-mutated` };
    if (keeps(args)) return { args, what: k };
  }
  const args = { ...vector.arguments, ctrlrun_verify_mutation: '1' };
  if (!keeps(args)) throw new VerifyInternalError(`G1: an extra argument moved ${vector.action.name} out of ${vector.evaluation.reason}`);
  return { args, what: 'ctrlrun_verify_mutation' };
}

/** `n` argument vectors with distinct effect keys on the same rule (and grant), or null. */
function variants(ctx: Context, sel: Selection, n: number): JsonObject[] | null {
  const { vector } = sel;
  const effect = vector.action.effect;
  const keys = templateOnlyPlaceholders(vector.action).concat(Object.keys(vector.arguments).sort(compareCodePoints));
  for (const k of keys) {
    const v = vector.arguments[k];
    if (typeof v !== 'string') continue;
    const out: JsonObject[] = [];
    for (let i = 1; i <= n; i++) {
      const args = { ...vector.arguments, [k]: `${v}-${i}` };
      if (!sameRule(ctx.policy, vector, args) || (sel.grant !== null && !sel.grant.constraintsHold(args, []))) break;
      out.push(args);
    }
    if (out.length === n && (effect === null || new Set(out.map((a) => effectKeyFor(vector.action, a))).size === n)) return out;
  }
  return null;
}

const isMismatch = (o: Outcome, reason: string) => !o.ok && o.error instanceof ApprovalMismatch && o.error.reason === reason;

/** The failure of a scenario whose expectations were not met. */
function failed(b: Builder, sel: Selection, key: string | null, reason: string, x: Expectations, rig: Rig): Promise<GuaranteeResult> {
  return b.fail(sel, key, reason, x.expected.join('; '), x.observed.join('; '), rig);
}

// ---- G1, G2: approvals ----

async function mutatedApprovalRefused(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const sel = select(ctx, ['approve']);
  if (sel === null) return b.notApplicable(NOT_APPLICABLE.noApproval);
  if (!isSelection(sel)) return b.missed(sel);
  const name = sel.vector.action.name;
  const args = sel.vector.arguments;
  const control = await withRig(ctx, 'G1', 'control', sel.environment, async (rig) => {
    const got = await rig.approve(rig.action(name, args, sel.principal));
    if (!('requestId' in got)) return { ok: false, observed: `asking for approval: ${describeOutcome(got.outcome)}` };
    const o = await rig.attempt(rig.action(name, args, sel.principal), 'commit', got.requestId);
    return { ok: o.ok && rig.totalRuns === 1, observed: `${describeOutcome(o)}, ${rig.totalRuns} executor run(s)` };
  });
  if (!control.ok) return b.fail(sel, null, 'control failed', 'the unmutated action, presented with its approval, commits once', control.observed, null);
  const mutation = mutate(ctx, sel);
  return withRig(ctx, 'G1', 'scenario', sel.environment, async (rig) => {
    const got = await rig.approve(rig.action(name, args, sel.principal));
    if (!('requestId' in got)) return b.fail(sel, null, 'the approval could not be requested', 'ApprovalRequired', describeOutcome(got.outcome), rig);
    const mutated = rig.action(name, mutation.args, sel.principal);
    const o = await rig.attempt(mutated, 'commit', got.requestId);
    const status = (await rig.store.getApproval(got.requestId))?.status ?? 'missing';
    const x = new Expectations();
    x.check(isMismatch(o, 'mismatch'), 'ApprovalMismatch(reason=mismatch)', describeOutcome(o));
    x.check(rig.totalRuns === 0, '0 executor runs', `${rig.totalRuns} executor run(s)`);
    x.check(status === 'granted', 'the approval still granted', `the approval is ${status}`);
    x.check(
      rig.events.some((e) => e.type === 'APPROVAL_INVALIDATED' && e.data['reason'] === 'mismatch'),
      'an APPROVAL_INVALIDATED event (mismatch)',
      'none',
    );
    const key = effectKeyOf(mutated, sel.vector.action);
    if (!x.ok) return failed(b, sel, key, o.ok ? 'the mutated action ran' : 'the mutated action was not refused as a mismatch', x, rig);
    return b.pass(sel, key, `${mutation.what} mutated, refused as mismatch, 0 calls`, { mutated: mutation.what });
  });
}

async function replayedApprovalRefused(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const sel = select(ctx, ['approve']);
  if (sel === null) return b.notApplicable(NOT_APPLICABLE.noApproval);
  if (!isSelection(sel)) return b.missed(sel);
  const name = sel.vector.action.name;
  const args = sel.vector.arguments;
  return withRig(ctx, 'G2', 'scenario', sel.environment, async (rig) => {
    const got = await rig.approve(rig.action(name, args, sel.principal));
    if (!('requestId' in got)) return b.fail(sel, null, 'the approval could not be requested', 'ApprovalRequired', describeOutcome(got.outcome), rig);
    const first = rig.action(name, args, sel.principal);
    const key = effectKeyOf(first, sel.vector.action);
    const o1 = await rig.attempt(first, 'commit', got.requestId);
    if (!o1.ok || rig.totalRuns !== 1)
      return b.fail(sel, key, 'control failed', 'the first presentation commits once', `${describeOutcome(o1)}, ${rig.totalRuns} executor run(s)`, rig);
    const o2 = await rig.attempt(rig.action(name, args, sel.principal), 'commit', got.requestId);
    const x = new Expectations();
    x.check(isMismatch(o2, 'consumed'), 'ApprovalMismatch(reason=consumed)', describeOutcome(o2));
    x.check(rig.totalRuns === 1, '1 executor run in total', `${rig.totalRuns}`);
    if (!x.ok) return failed(b, sel, key, o2.ok ? 'the replayed approval ran the action again' : 'the replay was not refused as consumed', x, rig);
    return b.pass(sel, key, 'replay refused as consumed, 1 call');
  });
}

// ---- G3, G4, G5: effects ----

/** G3–G5 need an `effect:` template, and a vector that reaches allow or approve. */
function effectSelection(ctx: Context, b: Builder): Selection | GuaranteeResult {
  if (!ctx.views.some(hasEffect)) {
    return b.notApplicable(NOT_APPLICABLE.noEffectTemplate, ctx.policy.schema === 'ctrlrun.policy/v1' ? NOT_APPLICABLE.noEffectTemplateNote : null);
  }
  const sel = select(ctx, ['allow', 'approve'], hasEffect);
  if (sel === null) return b.notApplicable('every action with an `effect:` template is denied');
  if (!isSelection(sel)) return b.missed(sel);
  return sel;
}

async function duplicateEffectRefused(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const sel = effectSelection(ctx, b);
  if (!('vector' in sel)) return sel;
  const name = sel.vector.action.name;
  const args = sel.vector.arguments;
  return withRig(ctx, 'G3', 'scenario', sel.environment, async (rig) => {
    const first = rig.action(name, args, sel.principal);
    const key = effectKeyOf(first, sel.vector.action);
    const o1 = await rig.complete(first, 'commit');
    if (!o1.ok || rig.totalRuns !== 1)
      return b.fail(sel, key, 'control failed', 'the first action commits once', `${describeOutcome(o1)}, ${rig.totalRuns} executor run(s)`, rig);
    const o2 = await rig.complete(rig.action(name, args, sel.principal), 'commit');
    const record = key === null ? null : await rig.store.getEffect(key);
    const x = new Expectations();
    x.check(!o2.ok && o2.error instanceof DuplicateEffect && o2.error.state === 'committed', 'DuplicateEffect(state=committed)', describeOutcome(o2));
    x.check(rig.totalRuns === 1, '1 executor run in total', `${rig.totalRuns}`);
    x.check(record?.attempt === 1, 'the record at attempt 1', `attempt ${String(record?.attempt)}`);
    x.check(record?.actionId === first.actionId, `the record held by the first action ${first.actionId}`, String(record?.actionId));
    if (!x.ok) return failed(b, sel, key, o2.ok ? 'the duplicate ran' : 'the duplicate was not refused as committed', x, rig);
    return b.pass(sel, key, 'second run refused as a committed duplicate, 1 call');
  });
}

async function oneWinnerUnderConcurrency(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const sel = effectSelection(ctx, b);
  if (!('vector' in sel)) return sel;
  const launcher = ctx.launcher;
  if (launcher === null) return b.notApplicable(NOT_APPLICABLE.perConnection);
  if (sel.grant !== null && sel.grant.isExpired(ctx.wallClock())) return b.notApplicable(NOT_APPLICABLE.grantExpiredForProcesses);
  if (sel.vector.evaluation.decision === 'approve') {
    return b.notApplicable('every action with an `effect:` template that verify can reach requires approval, and G4 races processes without a human');
  }
  if (needsCallerResource(sel.vector.action)) return b.notApplicable(NOT_APPLICABLE.callerResource);
  const name = sel.vector.action.name;
  // Distinct keys for the positive control; a key no argument moves (`deploy:prod`, or every
  // placeholder pinned by the rule) cannot have them, and then one process must commit alone.
  const spread = variants(ctx, sel, G4_PROCESSES) ?? [sel.vector.arguments];
  const expected = spread.length;
  const launch = (scratch: ScratchStore, runs: JsonObject[]) =>
    launcher({
      locator: scratch.locator!,
      policyText: ctx.policyText,
      policySource: ctx.policySource,
      authorityText: ctx.standalone?.text ?? null,
      authoritySource: ctx.standalone?.source ?? null,
      action: name,
      principal: sel.principal,
      environment: sel.environment,
      runs,
    });
  const distinctPids = (r: ProcessReport) =>
    new Set(r.processes.map((p) => p.pid)).size === r.processes.length && r.processes.every((p) => p.pid !== r.parentPid);

  // The processes use the real clock; so do these stores.
  const control = await withRig(
    ctx,
    'G4',
    'control',
    sel.environment,
    async (rig, scratch) => {
      if (scratch.locator === null) return { na: true as const };
      let report: ProcessReport;
      try {
        report = await launch(scratch, spread);
      } catch (err) {
        return { na: false as const, ok: false, observed: `the processes could not be started: ${err instanceof Error ? err.message : String(err)}` };
      }
      const committed = report.processes.filter((p) => p.outcome === 'committed').length;
      const records = await rig.store.listEffects('committed');
      const ok = committed === expected && report.executorRuns === expected && records.length === expected && distinctPids(report);
      return { na: false as const, ok, observed: `${committed} committed, ${report.executorRuns} executor run(s), ${records.length} committed record(s)` };
    },
    ctx.wallClock,
  );
  if (control.na) return b.notApplicable(NOT_APPLICABLE.perConnection);
  if (!control.ok) {
    const want = expected === 1 ? '1 process on the one key the rule allows commits' : `${expected} processes on ${expected} keys all commit`;
    return b.fail(sel, null, 'control failed', want, control.observed, null);
  }

  return withRig(
    ctx,
    'G4',
    'scenario',
    sel.environment,
    async (rig, scratch) => {
      const runs = Array.from({ length: G4_PROCESSES }, () => sel.vector.arguments);
      const key = orNoKey(() => effectKeyFor(sel.vector.action, sel.vector.arguments));
      let report: ProcessReport;
      try {
        report = await launch(scratch, runs);
      } catch (err) {
        return b.fail(sel, key, 'the processes could not be started', `${G4_PROCESSES} processes`, err instanceof Error ? err.message : String(err), rig);
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
      if (!x.ok) return failed(b, sel, key, report.executorRuns > 1 ? 'the effect ran more than once' : 'the race did not have exactly one winner', x, rig);
      return b.pass(sel, key, `${G4_PROCESSES} processes, 1 winner, 1 executor run`, { processes: G4_PROCESSES });
    },
    ctx.wallClock,
  );
}

async function ambiguousBlocksBlindRetry(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const sel = effectSelection(ctx, b);
  if (!('vector' in sel)) return sel;
  const name = sel.vector.action.name;
  const args = sel.vector.arguments;
  const control = await withRig(ctx, 'G5', 'control', sel.environment, async (rig) => {
    const a1 = rig.action(name, args, sel.principal);
    const key = effectKeyOf(a1, sel.vector.action)!;
    const o1 = await rig.complete(a1, 'not_executed');
    const state = (await rig.store.getEffect(key))?.state;
    const o2 = await rig.complete(rig.action(name, args, sel.principal), 'commit');
    const ok = !o1.ok && o1.error instanceof NotExecuted && state === 'failed' && o2.ok && rig.totalRuns === 2;
    return { ok, observed: `${describeOutcome(o1)} → ${String(state)}; retry ${describeOutcome(o2)}; ${rig.totalRuns} executor run(s)` };
  });
  if (!control.ok) return b.fail(sel, null, 'control failed', 'NotExecuted → failed, and the retry commits (2 calls)', control.observed, null);
  return withRig(ctx, 'G5', 'scenario', sel.environment, async (rig) => {
    const a1 = rig.action(name, args, sel.principal);
    const key = effectKeyOf(a1, sel.vector.action)!;
    const o1 = await rig.complete(a1, 'timeout');
    const afterLost = (await rig.store.getEffect(key))?.state;
    const lostReceipt = rig.receipts.at(-1)?.document['result'];
    const before = rig.receipts.length;
    const o2 = await rig.complete(rig.action(name, args, sel.principal), 'commit');
    const retryReceipt = rig.receipts.length > before ? rig.receipts.at(-1)?.document['result'] : 'none';
    const afterRetry = (await rig.store.getEffect(key))?.state;
    const x = new Expectations();
    x.check(!o1.ok && afterLost === 'ambiguous', 'a lost reply leaves the effect ambiguous', `${describeOutcome(o1)} → ${String(afterLost)}`);
    x.check(lostReceipt === 'ambiguous', "the lost reply's receipt is ambiguous", String(lostReceipt));
    x.check(!o2.ok && o2.error instanceof AmbiguousEffect, 'the retry refused with AmbiguousEffect', describeOutcome(o2));
    x.check(rig.totalRuns === 1, '1 remote call', `${rig.totalRuns}`);
    x.check(retryReceipt === 'blocked', "the retry's receipt is blocked", String(retryReceipt));
    x.check(afterRetry === 'ambiguous', 'the record still ambiguous', String(afterRetry));
    if (!x.ok) return failed(b, sel, key, o2.ok ? 'the blind retry ran' : 'an ambiguous effect was not held', x, rig);
    return b.pass(sel, key, 'retry refused as ambiguous, 1 call');
  });
}

// ---- G6, G7: who and what ----

/** `ctrlrun.verify.absent.<12 hex of sha256(sorted names joined "\n")>`: a name the policy cannot list. */
export function absentActionName(policy: Policy): string {
  const names = policy.actionNames.slice().sort(compareCodePoints).join('\n');
  return `ctrlrun.verify.absent.${sha256TaggedText(names).slice('sha256:'.length, 'sha256:'.length + 12)}`;
}

async function unknownActionRefused(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  if (ctx.views.length === 0) return b.notApplicable(NOT_APPLICABLE.noActions);
  const sel = select(ctx, ['allow', 'approve']);
  if (sel === null) return b.notApplicable(NOT_APPLICABLE.everyActionDenied);
  if (!isSelection(sel)) return b.missed(sel);
  const absent = { action: absentActionName(ctx.policy), args: {} };
  return withRig(ctx, 'G6', 'scenario', sel.environment, async (rig) => {
    const known = await rig.control.evaluate(rig.action(sel.vector.action.name, sel.vector.arguments, sel.principal));
    if (known.decision === 'deny') return b.fail(sel, null, 'control failed', `${sel.vector.action.name} evaluates non-deny`, `deny (${known.reason})`, rig);
    const unknown = rig.action(absent.action, {}, sel.principal);
    const o = await rig.attempt(unknown, 'commit');
    const receipt = rig.receipts.find((r) => r.document['action_id'] === unknown.actionId);
    // With an authority section, authority is asked first and refuses with its own reason.
    const refused =
      !o.ok &&
      o.error instanceof ActionDenied &&
      (ctx.authority === null
        ? o.error.reason === 'unknown_action'
        : o.error instanceof AuthorityDenied
          ? (AUTHORITY_REASONS as readonly string[]).includes(o.error.reason)
          : o.error.reason === 'unknown_action');
    const x = new Expectations();
    x.check(
      refused,
      ctx.authority === null ? 'ActionDenied(reason=unknown_action)' : 'ActionDenied(reason=unknown_action) or an authority denial',
      describeOutcome(o),
    );
    x.check(rig.totalRuns === 0, '0 executor runs', `${rig.totalRuns}`);
    x.check(receipt?.document['result'] === 'denied', 'a denied receipt', String(receipt?.document['result'] ?? 'no receipt'));
    if (!x.ok)
      return b.fail(
        sel,
        null,
        o.ok ? 'the unknown action ran' : 'the unknown action was not refused',
        x.expected.join('; '),
        x.observed.join('; '),
        rig,
        absent,
      );
    const reason = !o.ok && o.error instanceof ActionDenied ? o.error.reason : '?';
    return b.pass(sel, null, `refused as ${reason}, 0 calls, denied receipt`, {}, absent);
  });
}

async function noPrincipalRefused(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  const sel = select(ctx, ['allow', 'approve']);
  if (sel === null) return b.notApplicable(NOT_APPLICABLE.everyActionDenied);
  if (!isSelection(sel)) return b.missed(sel);
  const name = sel.vector.action.name;
  const args = sel.vector.arguments;
  // An application whose effect key names `{resource}` that the policy does not derive gives protect() one.
  const resource = needsCallerResource(sel.vector.action) ? { resource: VERIFY_RESOURCE } : {};
  const wrap = (rig: Rig) => protect<JsonObject, unknown>((a) => rig.executor('commit')(a, { effectKey: null }), { control: rig.control, name, ...resource });
  const control = await withRig(ctx, 'G7', 'control', sel.environment, async (rig) => {
    const fn = wrap(rig);
    let observed = 'ran';
    try {
      await fn(args, { principal: sel.principal });
    } catch (err) {
      if (err instanceof ApprovalRequired) {
        await rig.control.grantApproval(err.requestId, { approver: VERIFY_AGENT });
        try {
          await fn(args, { principal: sel.principal, approvalId: err.requestId });
        } catch (again) {
          observed = describeOutcome({ ok: false, error: again });
        }
      } else observed = describeOutcome({ ok: false, error: err });
    }
    return { ok: rig.totalRuns === 1, observed: `${observed}, ${rig.totalRuns} executor run(s)` };
  });
  if (!control.ok) return b.fail(sel, null, 'control failed', 'the same call with a principal runs', control.observed, null);
  return withRig(ctx, 'G7', 'scenario', sel.environment, async (rig) => {
    let o: Outcome;
    try {
      o = { ok: true, value: (await wrap(rig)(args)) as JsonValue };
    } catch (error) {
      o = { ok: false, error };
    }
    const receipts = (await rig.store.receipts()).length;
    const events = (await rig.store.events()).length;
    const x = new Expectations();
    x.check(!o.ok && o.error instanceof ActionDenied && o.error.reason === 'no_principal', 'ActionDenied(reason=no_principal)', describeOutcome(o));
    x.check(rig.totalRuns === 0, '0 executor runs', `${rig.totalRuns}`);
    x.check(receipts === 0 && events === 0, 'no receipt and no event', `${receipts} receipt(s), ${events} event(s)`);
    if (!x.ok) return failed(b, sel, null, o.ok ? 'the call without a principal ran' : 'the call was not refused as no_principal', x, rig);
    return b.pass(sel, null, 'refused as no_principal, 0 calls, no evidence');
  });
}

// ---- G8, G9: authority ----

/** A root grant other than `grant` that would still cover the selection at `at`, or null. */
function otherCover(ctx: Context, sel: Selection, grant: Grant, at: Date): Grant | null {
  const action = probeAction(ctx.policy, sel.vector.action.name, sel.vector.arguments, sel.principal, sel.environment);
  for (const other of grantsById(ctx.authority!)) {
    if (other.id === grant.id || other.isExpired(at)) continue;
    if (other.matchesShape(action) && other.constraintsHold(action.canonicalArguments, [])) return other;
  }
  return null;
}

async function expiredAuthorityRefused(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  if (ctx.authority === null) return b.notApplicable(NOT_APPLICABLE.noAuthority);
  const expiring = grantsById(ctx.authority).filter((g) => g.expiresMicros !== null);
  if (expiring.length === 0) return b.notApplicable(NOT_APPLICABLE.noExpiringGrant);
  let matched = false;
  for (const grant of expiring) {
    // The clock has millisecond resolution: the first instant after the expiry it can express.
    const at = new Date(Number(grant.expiresMicros! / 1000n));
    const after = new Date(at.getTime() + 1);
    let sel: Selection | null = null;
    for (const decision of ['allow', 'approve'] as Decision[]) {
      for (const view of ctx.views) {
        sel ??= selectUnder(ctx, view, decision, grant, at);
      }
    }
    if (sel === null) continue;
    matched = true;
    if (otherCover(ctx, sel, grant, after) !== null) continue;
    const found = sel;
    const name = found.vector.action.name;
    const args = found.vector.arguments;
    const control = await withRig(
      ctx,
      'G8',
      'control',
      found.environment,
      async (rig) => {
        const o = await rig.complete(rig.action(name, args, found.principal), 'commit');
        const resolved = rig.events.some((e) => e.type === 'AUTHORITY_RESOLVED' && e.data['grant_id'] === grant.id);
        return {
          ok: o.ok && resolved,
          observed: `${describeOutcome(o)} at ${at.toISOString()}; AUTHORITY_RESOLVED naming ${grant.id}: ${resolved ? 'yes' : 'no'}`,
        };
      },
      () => new Date(at.getTime()),
    );
    if (!control.ok)
      return b.fail(found, null, 'control failed', `at expires_at the action commits and AUTHORITY_RESOLVED names ${grant.id}`, control.observed, null);
    return withRig(
      ctx,
      'G8',
      'scenario',
      found.environment,
      async (rig) => {
        const a = rig.action(name, args, found.principal);
        const o = await rig.attempt(a, 'commit');
        const receipt = rig.receipts.find((r) => r.document['action_id'] === a.actionId);
        const x = new Expectations();
        x.check(
          !o.ok && o.error instanceof AuthorityDenied && o.error.reason === 'authority_expired',
          'AuthorityDenied(reason=authority_expired)',
          describeOutcome(o),
        );
        x.check(rig.totalRuns === 0, '0 executor runs', `${rig.totalRuns}`);
        x.check(receipt?.document['result'] === 'denied', 'a denied receipt', String(receipt?.document['result'] ?? 'no receipt'));
        if (!x.ok)
          return failed(
            b,
            found,
            null,
            o.ok ? 'the action ran after its authority expired' : 'the expired authority was not refused as authority_expired',
            x,
            rig,
          );
        return b.pass(found, null, `passes at ${grant.expiresAt}, refused as authority_expired 1 ms later`, {
          expires_at: grant.expiresAt,
          refused_at: after.toISOString(),
        });
      },
      () => new Date(after.getTime()),
    );
  }
  return b.notApplicable(matched ? NOT_APPLICABLE.notLastAuthority : NOT_APPLICABLE.noGrantMatches);
}

const DIMENSIONS = ['subject', 'actions', 'resources', 'constraints', 'environments', 'expires_at'] as const;
type Dimension = (typeof DIMENSIONS)[number];

function shiftedExpiry(iso: string | null, deltaMs: number): string | null {
  return iso === null ? null : new Date(Date.parse(iso) + deltaMs).toISOString();
}

/** The parent's constraints as `Control.delegate` takes them, each operand moved by `op`. */
function constraintInput(grant: Grant, change: (op: string, operand: JsonValue) => JsonValue): Record<string, JsonValue> {
  return Object.fromEntries(
    Object.keys(grant.constraints)
      .sort(compareCodePoints)
      .map((key) => [key, change(grant.constraints[key]!.op, grant.constraints[key]!.operand)]),
  );
}

/** Tighter by 1 on every bound (`lt`/`lte` down, `gt`/`gte` up); equality and membership kept. */
const tighten = (op: string, v: JsonValue) => (op === 'lt' || op === 'lte' ? shiftInt(v, -1) : op === 'gt' || op === 'gte' ? shiftInt(v, 1) : v);

/** Looser by 1 (`lt`/`lte` up, `gt`/`gte` down), `in` extended, `eq`/`neq` changed. */
function loosen(op: string, v: JsonValue): JsonValue {
  if (op === 'lt' || op === 'lte') return shiftInt(v, 1);
  if (op === 'gt' || op === 'gte') return shiftInt(v, -1);
  if (op === 'in' && Array.isArray(v)) return [...v, valueBeside(v.at(-1) ?? 'ctrlrun-verify')];
  return valueBeside(v);
}

/** The dimensions a parent constrains, each with a wider child and (where one exists) an omitting one. */
function escalations(parent: Grant, narrowed: GrantInput): { dimension: Dimension; how: string; child: GrantInput }[] {
  const out: { dimension: Dimension; how: string; child: GrantInput }[] = [];
  const s = parent.subject;
  if ((s.agent !== null && s.agent !== '*') || s.user !== null) {
    const wideAgent = s.agent !== null && s.agent !== '*';
    out.push({
      dimension: 'subject',
      how: wideAgent ? "agent '*'" : "user '*'",
      child: { ...narrowed, subject: wideAgent ? { ...narrowed.subject, agent: '*' } : { ...narrowed.subject, user: '*' } },
    });
    if (s.user !== null) out.push({ dimension: 'subject', how: 'user omitted', child: { ...narrowed, subject: { agent: narrowed.subject.agent ?? null } } });
  }
  if (!parent.actions.includes('**')) out.push({ dimension: 'actions', how: "actions ['**']", child: { ...narrowed, actions: ['**'] } });
  if (parent.resources !== null) {
    out.push({ dimension: 'resources', how: "resources ['**']", child: { ...narrowed, resources: ['**'] } });
    out.push({ dimension: 'resources', how: 'resources omitted', child: { ...narrowed, resources: null } });
  }
  const keys = Object.keys(parent.constraints).sort(compareCodePoints);
  if (keys.length > 0) {
    const first = keys[0]!;
    const c = parent.constraints[first]!;
    out.push({
      dimension: 'constraints',
      how: `${first} loosened`,
      child: { ...narrowed, constraints: { ...narrowed.constraints, [first]: loosen(c.op, c.operand) } },
    });
    const omitted = { ...narrowed.constraints };
    delete omitted[first];
    out.push({ dimension: 'constraints', how: `${first} omitted`, child: { ...narrowed, constraints: omitted } });
  }
  if (parent.environments !== null) {
    out.push({
      dimension: 'environments',
      how: "environments + 'ctrlrun-verify-env'",
      child: { ...narrowed, environments: [...parent.environments, 'ctrlrun-verify-env'] },
    });
    out.push({ dimension: 'environments', how: 'environments omitted', child: { ...narrowed, environments: null } });
  }
  if (parent.expiresAt !== null) {
    out.push({ dimension: 'expires_at', how: 'expires_at + 1 h', child: { ...narrowed, expiresAt: shiftedExpiry(parent.expiresAt, 3_600_000) } });
    out.push({ dimension: 'expires_at', how: 'expires_at omitted', child: { ...narrowed, expiresAt: null } });
  }
  return out;
}

async function delegationCannotEscalate(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  if (ctx.authority === null) return b.notApplicable(NOT_APPLICABLE.noAuthority);
  const delegable = grantsById(ctx.authority).filter((g) => g.delegable);
  if (delegable.length === 0) return b.notApplicable(NOT_APPLICABLE.noDelegableGrant);
  const parent = delegable.find((g) => ctx.views.some((v) => grantNamesAction(g, v.name)));
  if (!parent) return b.notApplicable(NOT_APPLICABLE.noGrantMatches);
  if (ctx.authority.maxDelegationDepth === 0) return b.notApplicable('max_delegation_depth is 0: delegation is switched off');
  const by = principalFor(parent);
  const narrowed: GrantInput = {
    subject: { agent: 'ctrlrun-verify-delegate', user: by.user },
    actions: [...parent.actions],
    resources: parent.resources === null ? null : [...parent.resources],
    constraints: constraintInput(parent, tighten),
    environments: parent.environments === null ? null : [...parent.environments],
    expiresAt: shiftedExpiry(parent.expiresAt, -3_600_000),
    delegable: false,
  };
  const subject: Subject = { action: null, args: null, grantId: parent.id };
  const environment = parent.environments?.[0] ?? documentEnvironment(ctx.policy);
  const control = await withRig(ctx, 'G9', 'control', environment, async (rig) => {
    let delegation;
    try {
      delegation = await rig.control.delegate(parent.id, narrowed, { by });
    } catch (err) {
      return {
        ok: false,
        observed: `the narrowed child was refused: ${describeOutcome({ ok: false, error: err })}${err instanceof AuthorityEscalation ? ` (${err.reason}${err.dimension ? `: ${err.dimension}` : ''})` : ''}`,
      };
    }
    const created = rig.events.some((e) => e.type === 'DELEGATION_CREATED' && e.data['delegation_id'] === delegation.delegationId);
    let sel: Selection | null = null;
    for (const decision of ['allow', 'approve'] as Decision[]) for (const view of ctx.views) sel ??= selectUnder(ctx, view, decision, delegation.grant, ctx.t0);
    if (sel === null) return { ok: false, observed: 'no action of the policy falls within the narrowed child, so nothing can act under it' };
    const o = await rig.complete(rig.action(sel.vector.action.name, sel.vector.arguments, sel.principal), 'commit');
    return {
      ok: created && o.ok,
      observed: `DELEGATION_CREATED at the sink: ${created ? 'yes' : 'no'}; ${sel.vector.action.name} under it: ${describeOutcome(o)}`,
    };
  });
  if (!control.ok)
    return b.fail(
      null,
      null,
      'control failed',
      'a narrowed child is accepted, its event reaches the sink, and its action commits',
      control.observed,
      null,
      subject,
    );
  const attempts = escalations(parent, narrowed);
  return withRig(ctx, 'G9', 'scenario', environment, async (rig) => {
    const x = new Expectations();
    for (const { dimension, how, child } of attempts) {
      const before = rig.events.filter((e) => e.type === 'DELEGATION_REJECTED').length;
      let observed = 'accepted';
      try {
        await rig.control.delegate(parent.id, child, { by });
      } catch (err) {
        observed =
          err instanceof AuthorityEscalation ? `${err.reason}${err.dimension ? `: ${err.dimension}` : ''}` : describeOutcome({ ok: false, error: err });
      }
      const rejected = rig.events.filter((e) => e.type === 'DELEGATION_REJECTED').length - before;
      x.check(observed === `containment: ${dimension}`, `${how}: AuthorityEscalation(containment: ${dimension})`, `${how}: ${observed}`);
      x.check(rejected === 1, `${how}: one DELEGATION_REJECTED`, `${how}: ${rejected}`);
    }
    const rows = await rig.store.delegations({ includeRevoked: true });
    x.check(rows.length === 0, 'no delegation row', `${rows.length} row(s)`);
    const tested = new Set(attempts.map((a) => a.dimension)).size;
    if (!x.ok) return b.fail(null, null, 'a delegation escaped its parent', x.expected.join('; '), x.observed.join('; '), rig, subject);
    const dimensions = attempts.map((a) => a.dimension).filter((d, i, all) => all.indexOf(d) === i);
    return b.pass(null, null, `${tested} of ${DIMENSIONS.length} dimensions`, { dimensions }, subject);
  });
}

// ---- G10, G11: outcomes and evidence ----

async function unknownExceptionIsAmbiguous(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  let sel = select(ctx, ['allow', 'approve'], hasEffect);
  if (!isSelection(sel)) sel = select(ctx, ['allow', 'approve']);
  if (sel === null) return b.notApplicable(NOT_APPLICABLE.everyActionDenied);
  if (!isSelection(sel)) return b.missed(sel);
  const found = sel;
  const name = found.vector.action.name;
  const once = (behaviour: 'timeout' | 'error' | 'not_executed') =>
    withRig(ctx, 'G10', behaviour, found.environment, async (rig) => {
      const a = rig.action(name, found.vector.arguments, found.principal);
      const key = effectKeyOf(a, found.vector.action);
      const o = await rig.complete(a, behaviour);
      const receipt = rig.receipts.at(-1)?.document['result'];
      const state = key === null ? null : ((await rig.store.getEffect(key))?.state ?? 'no record');
      return { o, key, receipt: String(receipt ?? 'no receipt'), state };
    });
  const control = await once('not_executed');
  if (control.receipt !== 'failed' || (control.state !== null && control.state !== 'failed')) {
    return b.fail(
      found,
      control.key,
      'control failed',
      'NotExecuted → a failed receipt (FAILED)',
      `${control.receipt} receipt, record ${String(control.state)}`,
      null,
    );
  }
  const x = new Expectations();
  for (const behaviour of ['timeout', 'error'] as const) {
    const r = await once(behaviour);
    x.check(!r.o.ok && r.receipt === 'ambiguous', `${behaviour}: an ambiguous receipt`, `${describeOutcome(r.o)}, ${r.receipt} receipt`);
    if (r.state !== null) x.check(r.state === 'ambiguous', `${behaviour}: the record AMBIGUOUS`, String(r.state).toUpperCase());
  }
  if (!x.ok) return b.fail(found, control.key, 'an unknown exception was not recorded ambiguous', x.expected.join('; '), x.observed.join('; '), null);
  return b.pass(found, control.key, 'timeout and a generic error recorded ambiguous');
}

async function alteredReceiptDetected(ctx: Context, b: Builder): Promise<GuaranteeResult> {
  if (ctx.views.length === 0) return b.notApplicable(NOT_APPLICABLE.noActions);
  const picked = select(ctx, ['allow', 'deny']);
  const sel = isSelection(picked) ? picked : null;
  const name = sel?.vector.action.name ?? absentActionName(ctx.policy);
  const args = sel?.vector.arguments ?? {};
  const principal = sel?.principal ?? { agent: VERIFY_AGENT, user: null };
  const subject = { action: name, args };
  return withRig(ctx, 'G11', 'scenario', sel?.environment ?? documentEnvironment(ctx.policy), async (rig) => {
    for (let i = 0; i < 3; i++) await rig.attempt(rig.action(name, args, principal), 'commit');
    const rows = await rig.store.receipts();
    const head = await rig.store.chainHead();
    const intact = verifyChain(rows, head);
    const returned =
      rig.receipts.length >= 3 && rig.receipts.every((r) => Number.isSafeInteger(r.seq) && typeof r.hash === 'string' && r.hash.startsWith('sha256:'));
    if (!intact.ok || intact.verified < 3 || !returned || rows.some((r) => r.seq === null || r.hash === null)) {
      const observed = orderedJson({ ok: intact.ok, verified: intact.verified, returned: rig.receipts.length, breaks: intact.breaks.map((x) => x.name) });
      return b.fail(
        sel,
        null,
        'control failed',
        'an intact chain of at least 3 receipts verifies, with seq and hash returned by put_receipt',
        observed,
        rig,
        subject,
      );
    }
    // Alter receipt 2 in a read-only view: the store is not touched.
    const altered: ReceiptRow[] = rows.map((r) => {
      if (r.seq !== 2 || r.json === null) return r;
      const doc = parseJson(r.json) as JsonObject;
      doc['decision_reason'] = `${String(doc['decision_reason'])}-altered`;
      return { ...r, json: orderedJson(doc) };
    });
    const report = verifyChain(altered, head);
    if (!report.breaks.some((x) => x.name === 'content_altered' && x.seq === 2)) {
      return b.fail(
        sel,
        null,
        'the altered receipt was not detected',
        'content_altered at seq 2',
        orderedJson(report.breaks.map((x) => ({ name: x.name, seq: x.seq }))),
        rig,
        subject,
      );
    }
    return b.pass(sel, null, `content_altered at seq 2 of ${rows.length}`, {}, subject);
  });
}

/** Each guarantee's scenario. */
export const RUNNERS: Readonly<Record<GuaranteeId, (ctx: Context, b: Builder) => Promise<GuaranteeResult>>> = {
  G1: mutatedApprovalRefused,
  G2: replayedApprovalRefused,
  G3: duplicateEffectRefused,
  G4: oneWinnerUnderConcurrency,
  G5: ambiguousBlocksBlindRetry,
  G6: unknownActionRefused,
  G7: noPrincipalRefused,
  G8: expiredAuthorityRefused,
  G9: delegationCannotEscalate,
  G10: unknownExceptionIsAmbiguous,
  G11: alteredReceiptDetected,
};
