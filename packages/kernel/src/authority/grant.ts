/**
 * Grants (docs/spec/02-authority-observe-verify.md §2.2): who may propose which actions, on which resources, under which
 * constraints, in which environments, until when. A grant carries no `decision`: how much
 * autonomy an action has lives only in the policy.
 *
 * One parser validates a grant wherever it comes from — the policy document, the `new Grant(…)`
 * constructor, a `--file` grant, a stored `grant_json` — so the constructor refuses exactly what
 * the loader refuses.
 *
 * @module
 */
import type { Action } from '../action.js';
import { canonicalJson, isPlainObject, parseJson, type JsonObject, type JsonValue } from '../canonical.js';
import { InvalidArgument } from '../errors.js';
import { compileCondition, splitConditionKey, type Condition, type Matcher } from '../policy/conditions.js';
import { fromJs, isBlank, parseOperand, Refusal, rejectNestedMode, rejectUnknownKeys } from '../policy/tree.js';
import { typeName, YMap, YSeq, YTimestamp, type YValue } from '../policy/yaml.js';
import { ACTION_SEPARATOR, matchesPattern, patternError, RESOURCE_SEPARATOR, TASK_SEPARATOR, type Separator } from './patterns.js';

/**
 * The closed key set of a grant in a document: note there is no `decision`. `tasks` and `budgets`
 * need `ctrlrun.policy/v7` (the policy and authority loaders gate them).
 */
export const GRANT_KEYS: readonly string[] = Object.freeze([
  'id',
  'subject',
  'actions',
  'resources',
  'constraints',
  'environments',
  'expires_at',
  'delegable',
  'tasks',
  'budgets',
]);
/** The grant keys `ctrlrun.policy/v7` adds, with what an older reader would do with each. */
export const V7_GRANT_KEYS: ReadonlyArray<[string, string]> = Object.freeze([
  ['tasks', 'an older reader would ignore the binding and authorise the grant on every task, which is the whole of what the key restricts'],
  ['budgets', 'an older reader would ignore the limit and let the grant spend without bound, which is the whole of what the key restricts'],
] as [string, string][]);
const BUDGET_KEYS = ['metric', 'limit', 'window'];
/** The widest budget window, in seconds: a hundred years of 365 days, as the original bounds it. */
export const MAX_BUDGET_WINDOW = 100 * 365 * 24 * 60 * 60;
const SUBJECT_KEYS = ['agent', 'user'];
/** `id`: letters, digits, `.`, `_`, `-`, starting with a letter or digit. */
export const GRANT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** The namespace minted for delegations; a document grant may not use it. */
export const DELEGATION_ID_PREFIX = 'dlg_';

/** Who a grant is addressed to: an agent pattern, a user pattern, or both (never neither). */
export interface SubjectPatterns {
  /** Single-segment pattern (`finance-*`, `*`), or null: any agent. */
  readonly agent: string | null;
  /** Single-segment pattern, or null: anyone, including an agent acting alone. */
  readonly user: string | null;
}

/**
 * One budget of a grant (v7): how much of `metric` the grant may spend, summed over a rolling
 * `window`. The kernel knows no metric's meaning. Enforcing it is the authority walk's job.
 */
export interface Budget {
  /** A non-empty name of where the number comes from. */
  readonly metric: string;
  /** What the sum may reach: a non-negative integer (money in minor units). */
  readonly limit: number;
  /** The window, in whole seconds (positive, at most {@link MAX_BUDGET_WINDOW}). */
  readonly window: number;
}

/** What `new Grant(…)` takes for a budget: `window` in whole seconds or as an ISO-8601 duration (`P1D`, `PT4H`). */
export interface BudgetInput {
  metric: string;
  limit: number | bigint;
  window: number | string;
}

/** What `new Grant(…)` takes. `expiresAt` is ISO-8601 with an offset, or a `Date`. */
export interface GrantInput {
  /** Omit (or leave empty) for a grant passed to `Control.delegate`: its id is minted. */
  id?: string | null;
  subject: { agent?: string | null; user?: string | null };
  actions: readonly string[];
  resources?: readonly string[] | null;
  /** `when:`-style conditions on the arguments, ANDed: `{ amount_lte: 200000 }`. */
  constraints?: Record<string, unknown> | null;
  environments?: readonly string[] | null;
  expiresAt?: string | Date | null;
  delegable?: boolean;
  /** Task patterns (separator `:`), or null: any task, including none. */
  tasks?: readonly string[] | null;
  /** Budgets, in document order, or null: no budget. */
  budgets?: readonly BudgetInput[] | null;
}

/** An expiry instant: the text as written (ISO, original offset) and epoch microseconds. */
export interface Instant {
  /** `YYYY-MM-DDTHH:MM:SS[.ffffff]±HH:MM`, the offset as written (`Z` is `+00:00`). */
  readonly iso: string;
  /** Microseconds since the epoch, so that "+1 µs" is observable. */
  readonly micros: bigint;
}

const INSTANT = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:(Z|z)|([+-])(\d{2}):?(\d{2}))?$/;

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

/**
 * Parses an ISO-8601 instant **with an offset**; a naive or date-only value is refused (an
 * expiry in an unstated timezone cannot be checked). Digits past microseconds are truncated.
 * Returns the refusal's text instead of throwing, for the caller to place.
 */
export function parseInstant(text: string): Instant | string {
  const m = INSTANT.exec(text);
  if (!m) return `${JSON.stringify(text)} is not an ISO-8601 timestamp with an offset (2026-12-31T23:59:59+00:00)`;
  if (m[8] === undefined && m[9] === undefined) return `${JSON.stringify(text)} has no offset; an expiry in an unstated timezone cannot be checked`;
  const [y, mo, d, h, mi] = [m[1], m[2], m[3], m[4], m[5]].map(Number) as [number, number, number, number, number];
  const s = m[6] === undefined ? 0 : Number(m[6]);
  const frac = m[7] === undefined ? 0 : Number(m[7].slice(0, 6).padEnd(6, '0'));
  const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1];
  if (y < 1 || days === undefined || d < 1 || d > days || h > 23 || mi > 59 || s > 59) return `${JSON.stringify(text)} is not a valid date and time`;
  let offset = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return `${JSON.stringify(text)} has an offset of a day or more`;
    offset = (oh * 60 + om) * (m[9] === '-' ? -1 : 1);
  }
  const base = new Date(0);
  base.setUTCFullYear(y, mo - 1, d);
  base.setUTCHours(h, mi, s, 0);
  const micros = BigInt(base.getTime()) * 1000n + BigInt(frac) - BigInt(offset) * 60_000_000n;
  const abs = Math.abs(offset);
  const iso =
    `${pad(y, 4)}-${pad(mo, 2)}-${pad(d, 2)}T${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}${frac ? `.${pad(frac, 6)}` : ''}` +
    `${offset < 0 ? '-' : '+'}${pad(Math.floor(abs / 60), 2)}:${pad(abs % 60, 2)}`;
  return { iso, micros };
}

/** A `Date` in epoch microseconds. */
export function toMicros(d: Date): bigint {
  return BigInt(d.getTime()) * 1000n;
}

/** The validated parts every grant is built from. */
interface GrantParts {
  id: string;
  subject: SubjectPatterns;
  actions: readonly string[];
  resources: readonly string[] | null;
  constraints: Readonly<Record<string, Condition>>;
  environments: readonly string[] | null;
  expires: Instant | null;
  delegable: boolean;
  tasks: readonly string[] | null;
  budgets: readonly Budget[] | null;
}

/** How a grant source spells things (see {@link parseGrantTree}). */
export interface GrantSource {
  /**
   * `document`: `id` required, `dlg_` refused. `model`: `id` optional (empty = unassigned),
   * `dlg_` allowed. `assigned`: no `id` key at all; the id comes from elsewhere.
   */
  readonly ids: 'document' | 'model' | 'assigned';
  /** Constructor and stored rows: `null` means absent and empty `constraints` means none. */
  readonly lenient: boolean;
  /** The key naming the expiry (`expires_at`, or `expiresAt` for the constructor). */
  readonly expiresKey: 'expires_at' | 'expiresAt';
  /** The id given to an `assigned` grant. */
  readonly assignedId?: string;
  /** What to say when an `assigned` grant carries an `id` key. */
  readonly idRefusal?: string;
  /**
   * How a budget's `window` is written: `duration` (an ISO-8601 duration, as a document writes
   * it), `seconds` (whole seconds, as a stored `grant_json` holds it) or `either` (the constructor).
   */
  readonly windows?: 'duration' | 'seconds' | 'either';
  /** Keys this source does not take at all (an envelope's `delegable` and `expires_at`), with the refusal's reason. */
  readonly refused?: ReadonlyArray<[string, string]>;
}

const TRUSTED: unique symbol = Symbol('validated grant parts');

function patterns(v: YValue | undefined, key: string, separator: Separator, where: string, line: number): string[] {
  if (!(v instanceof YSeq)) throw new Refusal(where, `'${key}' must be a non-empty list of patterns, got ${typeName(v)}`, line);
  if (v.items.length === 0)
    throw new Refusal(where, `'${key}' must be a non-empty list of patterns${key === 'resources' ? '; an absent resources grants any resource' : ''}`, line);
  return v.items.map((item, i) => {
    if (typeof item !== 'string') throw new Refusal(where, `'${key}[${i}]' must be a pattern string, got ${typeName(item)}`, v.lines[i] ?? line);
    const err = patternError(item, separator);
    if (err !== null) throw new Refusal(where, `'${key}[${i}]': ${err}`, v.lines[i] ?? line);
    return item;
  });
}

const DURATION = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/;
/** The longest duration the original can represent (Python's `timedelta`: under 10^9 days). */
const MAX_DURATION = 999_999_999n * 86_400n + 86_399n;

/**
 * An ISO-8601 duration of the form the original reads (`P<n>D`, `PT<n>H`, `PT<n>M`, `PT<n>S`,
 * or a combination, in that order; no months, no years, no fraction), as whole seconds; or the
 * refusal's text. Positive. ASCII digits only (the original's reader also takes other Unicode
 * digits; this one refuses them, the fail-closed side).
 */
export function parseDuration(text: unknown): number | string {
  if (typeof text !== 'string' || text === '') return `must be an ISO-8601 duration string, got ${typeName(text as YValue)}`;
  const m = DURATION.exec(text);
  if (m === null)
    return `${JSON.stringify(text)} is not a duration this reader accepts: write it as 'PT4H', 'PT30M', 'PT90S' or 'P2D' (months and years are not durations a clock can add)`;
  const [d, h, mi, s] = [m[1], m[2], m[3], m[4]].map((x) => BigInt(x ?? '0')) as [bigint, bigint, bigint, bigint];
  const total = d * 86_400n + h * 3_600n + mi * 60n + s;
  if (total <= 0n) return `${JSON.stringify(text)} is not a positive duration`;
  if (total > MAX_DURATION) return `${JSON.stringify(text)} is longer than any duration the original can hold (${MAX_DURATION} seconds)`;
  return Number(total);
}

function budgets(v: YValue, where: string, line: number, windows: 'duration' | 'seconds' | 'either'): Budget[] {
  if (!(v instanceof YSeq) || v.items.length === 0) {
    throw new Refusal(
      where,
      `'budgets' must be a non-empty list of {metric, limit, window} mappings, or absent (an absent 'budgets' budgets nothing), got ${v instanceof YSeq ? 'an empty list' : typeName(v)}`,
      line,
    );
  }
  return v.items.map((item, i): Budget => {
    const at = `${where}.budgets[${i}]`;
    const itemLine = v.lines[i] ?? line;
    if (!(item instanceof YMap)) throw new Refusal(at, `must be a mapping of metric, limit and window, got ${typeName(item)}`, itemLine);
    rejectUnknownKeys(item, BUDGET_KEYS, at);
    for (const key of BUDGET_KEYS) if (!item.has(key)) throw new Refusal(at, `'${key}' is required`, itemLine);
    const metric = item.entry('metric')!;
    if (typeof metric.value !== 'string' || isBlank(metric.value))
      throw new Refusal(at, `'metric' must be a non-empty string, got ${typeName(metric.value)}`, metric.line);
    const limit = item.entry('limit')!;
    if (typeof limit.value !== 'bigint' || limit.value < 0n) {
      throw new Refusal(
        at,
        `'limit' must be a non-negative integer, got ${typeName(limit.value)}: money is budgeted in integer minor units, never a float, a boolean or a decimal string`,
        limit.line,
      );
    }
    if (limit.value > BigInt(Number.MAX_SAFE_INTEGER)) throw new Refusal(at, `'limit' may be at most ${Number.MAX_SAFE_INTEGER}`, limit.line);
    const w = item.entry('window')!;
    let window: number | string;
    if (typeof w.value === 'bigint' && windows !== 'duration') {
      window =
        w.value > 0n && w.value <= BigInt(MAX_BUDGET_WINDOW) ? Number(w.value) : `must be a positive whole number of seconds, at most ${MAX_BUDGET_WINDOW}`;
    } else if (typeof w.value === 'string' && windows !== 'seconds') {
      window = parseDuration(w.value);
    } else {
      window = windows === 'seconds' ? `must be whole seconds, got ${typeName(w.value)}` : `must be an ISO-8601 duration (P1D, PT4H), got ${typeName(w.value)}`;
    }
    if (typeof window === 'string') throw new Refusal(at, `'window': ${window}`, w.line);
    if (window > MAX_BUDGET_WINDOW) throw new Refusal(at, `'window' may not exceed ${MAX_BUDGET_WINDOW} seconds (a hundred years)`, w.line);
    return Object.freeze({ metric: metric.value, limit: Number(limit.value), window });
  });
}

/**
 * Parses one grant from the loader's tree. Refusals are {@link Refusal}s at `where`; the caller
 * turns them into a `PolicyError` (documents) or an `InvalidArgument` (the constructor).
 */
export function parseGrantTree(v: YValue, where: string, line: number, source: GrantSource): Grant {
  if (!(v instanceof YMap)) throw new Refusal(where, `a grant must be a mapping, got ${typeName(v)}`, line);
  rejectNestedMode(v, where);
  const decision = v.entry('decision');
  if (decision) {
    throw new Refusal(
      where,
      "a grant carries no 'decision': a grant says who may propose an action, and how much autonomy the action has is the policy's alone, the same for every principal",
      decision.line,
    );
  }
  for (const [key, why] of source.refused ?? []) {
    const e = v.entry(key);
    if (e) throw new Refusal(where, `may not carry '${key}': ${why}`, e.line);
  }
  const keys = GRANT_KEYS.filter((k) => !(source.ids === 'assigned' && k === 'id')).map((k) => (k === 'expires_at' ? source.expiresKey : k));
  if (source.ids === 'assigned' && v.has('id'))
    throw new Refusal(where, source.idRefusal ?? "a delegated grant may not carry 'id'; the id is assigned, not chosen", v.entry('id')!.line);
  rejectUnknownKeys(v, keys, where);
  const get = (key: string): { value: YValue; line: number } | undefined => {
    const e = v.entry(key);
    if (!e || (source.lenient && e.value === null)) return undefined;
    return { value: e.value, line: e.line };
  };

  let id = source.assignedId ?? '';
  if (source.ids !== 'assigned') {
    const e = get('id');
    if (source.ids === 'document' || (e !== undefined && e.value !== '')) {
      if (e === undefined || typeof e.value !== 'string' || e.value === '')
        throw new Refusal(where, `'id' must be a non-empty string, got ${typeName(e?.value)}`, e?.line ?? line);
      if (!GRANT_ID.test(e.value)) throw new Refusal(where, `grant id ${JSON.stringify(e.value)} must match ${GRANT_ID.source}`, e.line);
      if (source.ids === 'document' && e.value.startsWith(DELEGATION_ID_PREFIX)) {
        throw new Refusal(
          where,
          `a grant id may not begin '${DELEGATION_ID_PREFIX}': that namespace is minted for delegations, and one namespace addresses both kinds`,
          e.line,
        );
      }
      id = e.value;
    }
  }
  const named = id === '' ? where : `${where} (grant ${JSON.stringify(id)})`;

  const d = get('delegable');
  if (d !== undefined && typeof d.value !== 'boolean') throw new Refusal(named, `'delegable' must be true or false, got ${typeName(d.value)}`, d.line);
  const delegable = d?.value === true;

  const s = v.entry('subject');
  if (!s || !(s.value instanceof YMap))
    throw new Refusal(named, `'subject' must be a mapping with 'agent' and/or 'user', got ${typeName(s?.value)}`, s?.line ?? line);
  const subjectWhere = `${named}.subject`;
  rejectUnknownKeys(s.value, SUBJECT_KEYS, subjectWhere);
  const subject: { agent: string | null; user: string | null } = { agent: null, user: null };
  for (const key of SUBJECT_KEYS as ('agent' | 'user')[]) {
    const e = s.value.entry(key);
    if (!e || (source.lenient && e.value === null)) continue;
    if (typeof e.value !== 'string') throw new Refusal(subjectWhere, `'${key}' must be a pattern string, got ${typeName(e.value)}`, e.line);
    const err = patternError(e.value, null);
    if (err !== null) throw new Refusal(subjectWhere, `'${key}': ${err}`, e.line);
    subject[key] = e.value;
  }
  if (subject.agent === null && subject.user === null) {
    throw new Refusal(
      subjectWhere,
      "a subject must name at least one of 'agent' and 'user'; a subject addressed to every principal is one nobody writes on purpose (any agent is spelled agent: \"*\")",
      s.line,
    );
  }

  const a = v.entry('actions');
  const actions = patterns(a?.value, 'actions', ACTION_SEPARATOR, named, a?.line ?? line);
  const r = get('resources');
  const resources = r === undefined ? null : patterns(r.value, 'resources', RESOURCE_SEPARATOR, named, r.line);

  const constraints: Record<string, Condition> = Object.create(null) as Record<string, Condition>;
  const c = get('constraints');
  if (c !== undefined) {
    const map = c.value;
    const at = `${named}.constraints`;
    if (!(map instanceof YMap) || (map.entries.length === 0 && !source.lenient)) {
      throw new Refusal(
        named,
        `'constraints' must be a non-empty mapping of conditions, or absent, got ${map instanceof YMap ? 'an empty mapping' : typeName(map)}`,
        c.line,
      );
    }
    for (const e of map.entries) {
      if (typeof e.key !== 'string') throw new Refusal(at, `condition keys must be strings, got ${typeName(e.key)}`, e.line);
      const split = splitConditionKey(e.key, false);
      if ('error' in split) throw new Refusal(at, split.error, e.line);
      constraints[e.key] = Object.freeze({ key: e.key, subject: split.subject, op: split.op, operand: parseOperand(split.op, e.value, at, e.key, e.line) });
    }
  }

  let environments: string[] | null = null;
  const env = get('environments');
  if (env !== undefined) {
    if (!(env.value instanceof YSeq) || env.value.items.length === 0) {
      throw new Refusal(
        named,
        `'environments' must be a non-empty list of names, or absent, got ${env.value instanceof YSeq ? 'an empty list' : typeName(env.value)}`,
        env.line,
      );
    }
    const seq = env.value;
    environments = seq.items.map((item, i) => {
      if (typeof item !== 'string' || item === '')
        throw new Refusal(named, `'environments[${i}]' must be a non-empty string, got ${typeName(item)}`, seq.lines[i] ?? env.line);
      return item;
    });
  }

  let expires: Instant | null = null;
  const x = get(source.expiresKey);
  if (x !== undefined) {
    const text = x.value instanceof YTimestamp ? x.value.iso : x.value;
    if (typeof text !== 'string')
      throw new Refusal(named, `'${source.expiresKey}' must be an ISO-8601 timestamp with an offset, got ${typeName(x.value)}`, x.line);
    const parsed = parseInstant(text);
    if (typeof parsed === 'string') throw new Refusal(named, `'${source.expiresKey}': ${parsed}`, x.line);
    expires = parsed;
  }
  if (delegable && expires === null) {
    throw new Refusal(
      named,
      `a grant with 'delegable: true' must declare '${source.expiresKey}': nothing else bounds the population a delegable grant can reach, and an expiry bounds every descendant in time`,
      d?.line ?? line,
    );
  }
  const t = get('tasks');
  if (t !== undefined && t.value instanceof YSeq && t.value.items.length === 0)
    throw new Refusal(named, "'tasks' must be a non-empty list of patterns, or absent: an absent 'tasks' is what grants any task", t.line);
  const tasks = t === undefined ? null : patterns(t.value, 'tasks', TASK_SEPARATOR, named, t.line);
  const b = get('budgets');
  const budgeted = b === undefined ? null : budgets(b.value, named, b.line, source.windows ?? 'duration');
  return new Grant({
    [TRUSTED]: { id, subject: Object.freeze(subject), actions, resources, constraints, environments, expires, delegable, tasks, budgets: budgeted },
  });
}

/** One grant: a permission, never a decision. Immutable. */
export class Grant {
  /** The grant's id (a delegation's is its `dlg_…` id); `''` until `Control.delegate` mints one. */
  readonly id: string;
  readonly subject: SubjectPatterns;
  /** Action-name patterns (separator `.`). */
  readonly actions: readonly string[];
  /** Resource patterns (separator `:`), or null: any resource, including none. */
  readonly resources: readonly string[] | null;
  /** Conditions on the arguments by key (`amount_lte`), ANDed. */
  readonly constraints: Readonly<Record<string, Condition>>;
  /** Exact environment names, or null: any. */
  readonly environments: readonly string[] | null;
  /** ISO-8601 with the offset it was written with, or null: no expiry. */
  readonly expiresAt: string | null;
  readonly delegable: boolean;
  /** Task patterns (separator `:`, v7), or null: any task, including none. */
  readonly tasks: readonly string[] | null;
  /** Budgets (v7), in document order, or null: no budget. */
  readonly budgets: readonly Budget[] | null;
  readonly #expires: bigint | null;
  readonly #matchers: readonly Matcher[];

  /**
   * Validates `input` exactly as the loader validates a grant (patterns, constraint keys and
   * operands, a naive expiry, `delegable` without an expiry, an empty subject, unknown keys, a
   * `decision`), refusing with an {@link InvalidArgument} naming what was wrong.
   */
  constructor(input: GrantInput | { readonly [TRUSTED]: GrantParts }) {
    const parts = isPlainObject(input) && TRUSTED in input ? (input as { [TRUSTED]: GrantParts })[TRUSTED] : Grant.#partsOf(fromInput(input as GrantInput));
    this.id = parts.id;
    this.subject = parts.subject;
    this.actions = Object.freeze([...parts.actions]);
    this.resources = parts.resources === null ? null : Object.freeze([...parts.resources]);
    this.constraints = Object.freeze(parts.constraints);
    this.environments = parts.environments === null ? null : Object.freeze([...parts.environments]);
    this.expiresAt = parts.expires?.iso ?? null;
    this.delegable = parts.delegable;
    this.tasks = parts.tasks === null ? null : Object.freeze([...parts.tasks]);
    this.budgets = parts.budgets === null ? null : Object.freeze(parts.budgets.map((x) => Object.freeze({ ...x })));
    this.#expires = parts.expires?.micros ?? null;
    this.#matchers = Object.freeze(
      Object.values(parts.constraints).map((c) => compileCondition(c, `grant ${parts.id || '(unassigned)'}`, { failClosedNeq: true })),
    );
    Object.freeze(this);
  }

  static #partsOf(grant: Grant): GrantParts {
    return grant.#parts();
  }

  /** This grant under another id (a delegation's minted id). */
  withId(id: string): Grant {
    return new Grant({ [TRUSTED]: { ...this.#parts(), id } });
  }

  #parts(): GrantParts {
    return {
      id: this.id,
      subject: this.subject,
      actions: this.actions,
      resources: this.resources,
      constraints: this.constraints,
      environments: this.environments,
      expires: this.expiresAt === null ? null : { iso: this.expiresAt, micros: this.#expires! },
      delegable: this.delegable,
      tasks: this.tasks,
      budgets: this.budgets,
    };
  }

  /** The expiry in epoch microseconds, or null. */
  get expiresMicros(): bigint | null {
    return this.#expires;
  }

  /** `now > expires_at`: a grant is valid up to and including its expiry instant. */
  isExpired(now: Date): boolean {
    return this.#expires !== null && toMicros(now) > this.#expires;
  }

  /** Whether `principal` is the subject: agent by pattern; a declared `user` needs a matching user. */
  subjectMatches(principal: { readonly agent: string; readonly user: string | null }): boolean {
    if (this.subject.agent !== null && !matchesPattern(this.subject.agent, principal.agent, null)) return false;
    if (this.subject.user !== null) return principal.user !== null && matchesPattern(this.subject.user, principal.user, null);
    return true;
  }

  /** Subject, action name, resource and environment — all four, or no match. */
  matchesShape(action: Action): boolean {
    if (!this.subjectMatches(action.principal)) return false;
    if (!this.actions.some((p) => matchesPattern(p, action.name, ACTION_SEPARATOR))) return false;
    if (this.resources !== null) {
      // A grant that declares `resources:` never matches an action with no resource.
      if (action.resource === null || !this.resources.some((p) => matchesPattern(p, action.resource!, RESOURCE_SEPARATOR))) return false;
    }
    return this.environments === null || this.environments.includes(action.environment);
  }

  /**
   * All constraints, ANDed; an absent or mistyped argument makes one false and adds a warning.
   * Equality is exact and type-strict (`_eq`, `_in`: an allow-list admits only what it lists); a
   * `_neq` fails closed: only a value of the operand's kind that differs from it even after
   * folding case, spacing, width and invisible characters satisfies it (see `foldForExclusion`).
   */
  constraintsHold(args: Readonly<Record<string, unknown>>, warnings: string[]): boolean {
    for (const m of this.#matchers) if (!m(args, null, warnings)) return false;
    return true;
  }

  /**
   * The shape the policy hash is taken over, as the original 0.12.2 takes it (spec 05 §3.4):
   * every dimension, `tasks` and `budgets` null when absent, a budget's window in seconds.
   */
  canonical(): JsonObject {
    const constraints: JsonObject = Object.fromEntries(
      Object.entries(this.constraints).map(([key, c]) => [key, { argument: c.subject, op: c.op, operand: c.operand }]),
    );
    return {
      actions: [...this.actions],
      budgets: budgetsJson(this.budgets),
      constraints,
      delegable: this.delegable,
      environments: this.environments === null ? null : [...this.environments],
      expires_at: this.expiresAt,
      resources: this.resources === null ? null : [...this.resources],
      subject: { agent: this.subject.agent, user: this.subject.user },
      tasks: this.tasks === null ? null : [...this.tasks],
    };
  }

  /** What `new Grant(…)` would take to build this grant again. */
  toInput(): GrantInput {
    const constraints: Record<string, JsonValue> = Object.fromEntries(Object.entries(this.constraints).map(([key, c]) => [key, c.operand]));
    return {
      id: this.id === '' ? null : this.id,
      subject: { ...this.subject },
      actions: [...this.actions],
      resources: this.resources === null ? null : [...this.resources],
      constraints,
      environments: this.environments === null ? null : [...this.environments],
      expiresAt: this.expiresAt,
      delegable: this.delegable,
      tasks: this.tasks === null ? null : [...this.tasks],
      budgets: this.budgets === null ? null : this.budgets.map((x) => ({ ...x })),
    };
  }
}

function budgetsJson(list: readonly Budget[] | null): JsonValue {
  return list === null ? null : list.map((x) => ({ metric: x.metric, limit: x.limit, window: x.window }));
}

function fromInput(input: GrantInput): Grant {
  if (!isPlainObject(input)) throw new InvalidArgument(`a grant must be an object { subject, actions, … }, got ${input === null ? 'null' : typeof input}`);
  try {
    const tree = fromJs(withoutUndefined(input), 'grant', new Set());
    return parseGrantTree(tree, 'grant', 0, { ids: 'model', lenient: true, expiresKey: 'expiresAt', windows: 'either' });
  } catch (err) {
    if (err instanceof Refusal) throw new InvalidArgument(`${err.where}: ${err.message}`, { cause: err });
    throw err;
  }
}

/** `undefined` is the absence of a key (the JS spelling of an omitted option), at any depth of a plain object. */
function withoutUndefined(v: unknown): unknown {
  if (!isPlainObject(v)) return v;
  // Entries, not `out[k] = …`: a key named `__proto__` stays a key instead of being dropped.
  return Object.fromEntries(Object.entries(v).flatMap(([k, x]) => (x === undefined ? [] : [[k, withoutUndefined(x)]])));
}

/** A delegation's stored `grant_json`: compact, sorted keys, operands by key, expiry offset kept. Never hashed. */
export function grantToJson(grant: Grant): string {
  const constraints: JsonObject = Object.fromEntries(Object.entries(grant.constraints).map(([key, c]) => [key, c.operand]));
  return canonicalJson(
    {
      actions: [...grant.actions],
      constraints,
      delegable: grant.delegable,
      environments: grant.environments === null ? null : [...grant.environments],
      expires_at: grant.expiresAt,
      resources: grant.resources === null ? null : [...grant.resources],
      subject: { agent: grant.subject.agent, user: grant.subject.user },
      // Written as the original 0.12.2 writes them (null when absent), so that a stored child
      // keeps the task binding and the budgets its containment is checked on.
      tasks: grant.tasks === null ? null : [...grant.tasks],
      budgets: budgetsJson(grant.budgets),
    },
    'grant_json',
  );
}

/**
 * Parses a stored `grant_json` under `id`, validating it exactly as a loaded grant: a store is
 * not more trusted than a file. Throws an `Error` describing what is wrong.
 */
export function grantFromJson(text: string, id: string): Grant {
  const doc = parseJson(text, { what: 'grant_json' });
  if (!isPlainObject(doc)) throw new Error(`grant_json is ${Array.isArray(doc) ? 'a list' : typeof doc}, not an object`);
  try {
    return parseGrantTree(fromJs(doc, 'grant_json', new Set()), 'grant_json', 0, {
      ids: 'assigned',
      assignedId: id,
      lenient: true,
      expiresKey: 'expires_at',
      windows: 'seconds',
    });
  } catch (err) {
    if (err instanceof Refusal) throw new Error(`${err.where}: ${err.message}`, { cause: err });
    throw err;
  }
}
