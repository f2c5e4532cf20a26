/**
 * The policy document: loading (closed key sets, schema gating, field rules), the policy hash,
 * and evaluation of an action name plus canonical arguments to allow / approve / deny.
 *
 * @module
 */
import { canonicalJson, compareCodePoints, isPlainObject } from '../canonical.js';
import { DEFAULT_ENVIRONMENT } from '../action.js';
import { InvalidArgument, PolicyError } from '../errors.js';
import { sha256TaggedText } from '../hash.js';
import { compileCondition, DERIVED_SUBJECTS, splitConditionKey, type Condition, type Matcher } from './conditions.js';
import { parseTemplate } from './template.js';
import { checkPolicy } from './check.js';
import type { ActionEntry, CanonicalAuthority, Decision, PolicyRule, UpstreamPin } from './types.js';
import { POLICY_SCHEMAS, schemaAtLeast, type PolicySchema } from './schemas.js';
import { parseAuthoritySection, type Authority } from '../authority/authority.js';
import { child, fromJs, isBlank, parseOperand, plain, quote, Refusal, rejectNestedMode, rejectUnknownKeys, toInt } from './tree.js';
import { describeKey, readYaml, refusalToPolicyError, typeName, YamlRefusal, YMap, YSeq, type YValue } from './yaml.js';

export { POLICY_SCHEMAS, type PolicySchema };
export type { ActionEntry, CanonicalAuthority, CanonicalEnvelope, CanonicalGrant, Decision, PolicyRule, UpstreamPin } from './types.js';

/** The three decisions, from least to most strict. */
export const DECISIONS: readonly Decision[] = Object.freeze(['allow', 'approve', 'deny'] as const);

/** The reasons an evaluation can give. */
export const UNKNOWN_ACTION = 'unknown_action';
export const NO_MATCHING_RULE = 'no_matching_rule';
export const BARE_DECISION = 'decision';

/** The outcome of {@link Policy.evaluate}. */
export interface Evaluation {
  decision: Decision;
  /** `unknown_action`, `decision`, `rule[N]` (0-based) or `no_matching_rule`. */
  reason: string;
  /** Control ids cited by the entry and the matched rule, in registry order. Attribution only. */
  controls: string[];
  /** Conditions that were false because their argument was absent or of the wrong type. */
  warnings: string[];
}

/** One entry of the `controls:` registry (v4). */
export interface PolicyControl {
  readonly id: string;
  readonly title: string;
  readonly source: string | null;
  /**
   * `approver_role` (v6): the role an approver must hold to answer an approval this control is
   * cited on, or null: this control gates nobody. Pinned on the request; checked when the approval
   * is presented by a Control with an approver identity (`approvers`), as the original does.
   */
  readonly approverRole: string | null;
}

/**
 * The action name the original reserves for its policy-change flow (spec 05 §3.2). A document
 * may declare it (from `ctrlrun.policy/v6`); no other entry's template may name it, and this
 * build, which has no policy-change flow, refuses to execute it.
 */
export const POLICY_CHANGE_ACTION = 'ctrlrun.policy.change';
/** The effect-key prefix the original records a policy approval under: never an ordinary action's key. */
export const POLICY_EFFECT_PREFIX = 'policy:';

/** Options of {@link loadPolicy}. */
export interface LoadPolicyOptions {
  /** Names the document in error messages (a path, a URL); default `<string>`. */
  source?: string;
  /**
   * Receives each of the loaded policy's {@link Policy.warnings}, once, at load. Default: none
   * (the kernel writes nowhere on its own; the list is on the policy either way).
   */
  logger?: { warn(message: string): void } | null;
}

/** Options of {@link Policy.hashFor}. */
export interface HashForOptions {
  /** The Control's effective environment; default: the document's, else `production`. */
  environment?: string | null;
  /**
   * The authority the Control enforces: a {@link CanonicalAuthority}, an object with a
   * `canonical()` method returning one, or null (the default: none was passed, even if the
   * document has an inline section).
   */
  authority?: unknown;
}

type Mode = 'enforce' | 'observe';

const TOP_KEYS = ['schema', 'actions', 'environment', 'authority', 'mode', 'version', 'controls'];
const ENTRY_KEYS = ['decision', 'rules', 'effect', 'resource', 'mcp', 'data', 'controls', 'max_attempts', 'approvals_required', 'upstream'];
const RULE_KEYS = ['when', 'decision', 'controls'];
const MCP_KEYS = ['not_executed_on_error'];
const CONTROL_KEYS = ['title', 'source', 'approver_role'];
const UPSTREAM_KEYS = ['tls_cert_sha256', 'tls_cert_file', 'tool_schema_sha256'];
const SHA256 = /^sha256:[0-9a-f]{64}$/;
/** Action-entry keys of the later schemas, the schema each needs, and what an older reader would do. */
const LATER_ENTRY_KEYS: ReadonlyArray<[string, PolicySchema, string]> = [
  [
    'max_attempts',
    'ctrlrun.policy/v5',
    'an older reader would ignore the ceiling and renew over a failed attempt without bound, which is the behaviour this key exists to stop',
  ],
  [
    'approvals_required',
    'ctrlrun.policy/v6',
    'an older reader would ignore the threshold and consume on the first grant, which is a deployment believing several humans answered when one did',
  ],
  [
    'upstream',
    'ctrlrun.policy/v8',
    'an older reader would ignore the pin and authorise the action against any server at all, which is the whole of what the key restricts',
  ],
];
const DATA_KEYS = ['label'];
/** Top-level keys and the schema they need, with what an older reader would do. */
const V3_TOP: ReadonlyArray<[string, string]> = [
  ['environment', 'an older reader would ignore it and put every action in the wrong deployment'],
  ['authority', 'an older reader would ignore it and run every action with no authority check at all'],
  ['mode', 'an older reader would enforce a configuration that was deployed to observe'],
];
const V4_TOP: ReadonlyArray<[string, string]> = [
  ['controls', 'an older reader would ignore the registry and load a document whose rules cite ids nothing defines'],
  ['version', 'an older reader would refuse the document outright, since its top-level key set is closed'],
];
const V2_ENTRY = ['effect', 'resource', 'mcp'];
const MAX_CONTROL_ID = 200;
const CONTROL_CHAR = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

function schemaRank(schema: PolicySchema): number {
  return POLICY_SCHEMAS.indexOf(schema) + 1;
}

function parseDecision(v: YValue | undefined, where: string, line: number): Decision {
  if (typeof v !== 'string') throw new Refusal(where, `decision must be one of allow, approve, deny, got ${typeName(v)}`, line);
  if (v !== 'allow' && v !== 'approve' && v !== 'deny') throw new Refusal(where, `unknown decision '${v}', expected one of allow, approve, deny`, line);
  return v;
}

function parseCited(v: YValue | undefined, where: string, line: number, registry: ReadonlyMap<string, PolicyControl>): string[] {
  if (v === undefined || v === null) return [];
  if (!(v instanceof YSeq)) throw new Refusal(where, `'controls' must be a list of ids, got ${typeName(v)}`, line);
  const cited: string[] = [];
  v.items.forEach((item, i) => {
    const at = v.lines[i] ?? line;
    if (typeof item !== 'string' || isBlank(item))
      throw new Refusal(where, `control ids must be non-empty strings, got ${typeof item === 'string' ? quote(item) : typeName(item)}`, at);
    if (!registry.has(item)) {
      const listed = [...registry.keys()].sort().join(', ') || 'none';
      throw new Refusal(where, `cites control '${item}', which the registry does not define. Declared controls: ${listed}`, at);
    }
    if (!cited.includes(item)) cited.push(item);
  });
  return cited;
}

function parseTemplateField(entry: YMap, field: 'effect' | 'resource', where: string): string | null {
  const e = entry.entry(field);
  if (!e || e.value === null) return null;
  if (typeof e.value !== 'string') throw new Refusal(where, `'${field}' must be a template string, got ${typeName(e.value)}`, e.line);
  let placeholders: readonly string[];
  try {
    placeholders = parseTemplate(e.value, 'load').placeholders;
  } catch (err) {
    throw new Refusal(where, `'${field}': ${(err as Error).message}`, e.line);
  }
  for (const name of placeholders) {
    if (DERIVED_SUBJECTS.has(name)) {
      throw new Refusal(
        where,
        `'${field}': '${name}' is derived by ctrlrun and may not be a template placeholder; it is resolved at evaluation from the arguments actually supplied, so an argument of the same name would mean two things`,
        e.line,
      );
    }
  }
  return e.value;
}

function parseMcp(entry: YMap, where: string): boolean {
  const e = entry.entry('mcp');
  if (!e || e.value === null) return false;
  if (!(e.value instanceof YMap)) throw new Refusal(where, `'mcp' must be a mapping, got ${typeName(e.value)}`, e.line);
  const at = `${where}.mcp`;
  rejectNestedMode(e.value, at);
  rejectUnknownKeys(e.value, MCP_KEYS, at);
  const claimed = e.value.entry('not_executed_on_error');
  if (!claimed) return false;
  if (typeof claimed.value !== 'boolean') throw new Refusal(at, `'not_executed_on_error' must be true or false, got ${typeName(claimed.value)}`, claimed.line);
  return claimed.value;
}

/** An integer key of at least 1 (`max_attempts`, `approvals_required`), or null when absent. */
function parsePositive(entry: YMap, key: string, where: string, meaning: string): number | bigint | null {
  const e = entry.entry(key);
  if (!e) return null;
  if (typeof e.value !== 'bigint')
    throw new Refusal(where, `'${key}' must be an integer of at least 1, got ${typeName(e.value)} ${describeKey(e.value)}. ${meaning}`, e.line);
  if (e.value < 1n) throw new Refusal(where, `'${key}' must be an integer of at least 1, got ${e.value}. ${meaning}`, e.line);
  return toInt(e.value);
}

/** A string or a list of strings (the original takes either), as a list. */
function stringList(v: YValue, at: string, key: string, line: number, what: string): string[] {
  const items = typeof v === 'string' ? [v] : v instanceof YSeq ? v.items : null;
  if (items === null || !items.every((x) => typeof x === 'string')) throw new Refusal(at, `'${key}' must be ${what}, got ${typeName(v)}`, line);
  return items as string[];
}

/** The `upstream:` pin (v8): null when the entry pins nothing. */
function parseUpstream(entry: YMap, where: string): UpstreamPin | null {
  const e = entry.entry('upstream');
  if (!e || e.value === null) return null;
  if (!(e.value instanceof YMap)) throw new Refusal(where, `'upstream' must be a mapping, got ${typeName(e.value)}`, e.line);
  const at = `${where}.upstream`;
  rejectNestedMode(e.value, at);
  rejectUnknownKeys(e.value, UPSTREAM_KEYS, at);
  const digests = e.value.entry('tls_cert_sha256');
  const tlsCertSha256 = digests
    ? stringList(
        digests.value,
        at,
        'tls_cert_sha256',
        digests.line,
        "a list of 'sha256:…' strings (a list, so that the current and the next certificate can both be pinned across a rotation)",
      )
    : [];
  for (const d of tlsCertSha256) {
    if (!SHA256.test(d))
      throw new Refusal(at, `'tls_cert_sha256' entry ${JSON.stringify(d)} is not 'sha256:' followed by 64 lowercase hex characters`, digests!.line);
  }
  const files = e.value.entry('tls_cert_file');
  const tlsCertFile = files ? stringList(files.value, at, 'tls_cert_file', files.line, 'a path or a list of paths') : [];
  // The original reads each file at load; an empty path names nothing it could read.
  if (tlsCertFile.some((f) => f === '')) throw new Refusal(at, "'tls_cert_file' names an empty path", files!.line);
  const schemaHash = e.value.entry('tool_schema_sha256');
  if (schemaHash && schemaHash.value !== null && (typeof schemaHash.value !== 'string' || !SHA256.test(schemaHash.value)))
    throw new Refusal(at, `'tool_schema_sha256' must be 'sha256:' followed by 64 lowercase hex characters, got ${typeName(schemaHash.value)}`, schemaHash.line);
  const toolSchemaSha256 = schemaHash && typeof schemaHash.value === 'string' ? schemaHash.value : null;
  if (tlsCertSha256.length === 0 && tlsCertFile.length === 0 && toolSchemaSha256 === null) return null;
  return Object.freeze({ tlsCertSha256: Object.freeze(tlsCertSha256), tlsCertFile: Object.freeze(tlsCertFile), toolSchemaSha256 });
}

function parseData(entry: YMap, where: string): Map<string, string> {
  const labels = new Map<string, string>();
  const e = entry.entry('data');
  if (!e || e.value === null) return labels;
  const map = e.value;
  if (!(map instanceof YMap)) throw new Refusal(where, `'data' must be a mapping of argument name to label, got ${typeName(map)}`, e.line);
  for (const d of map.entries) {
    if (typeof d.key === 'string' && DERIVED_SUBJECTS.has(d.key)) {
      throw new Refusal(
        `${where}.data`,
        `'${d.key}' is derived by ctrlrun and may not be an argument name; it is resolved at evaluation from the arguments actually supplied, so an argument of the same name would mean two things in one rule`,
        d.line,
      );
    }
  }
  for (const d of map.entries) {
    if (typeof d.key !== 'string' || isBlank(d.key)) throw new Refusal(`${where}.data`, "argument names in 'data' must be non-empty strings", d.line);
    const at = `${where}.data[${quote(d.key)}]`;
    if (typeof d.value === 'string') {
      if (isBlank(d.value)) throw new Refusal(at, 'a label must be a non-empty string', d.line);
      labels.set(d.key, d.value);
      continue;
    }
    if (!(d.value instanceof YMap)) throw new Refusal(at, `must be a label or a mapping with 'label', got ${typeName(d.value)}`, d.line);
    const redact = d.value.entry('redact');
    if (redact) {
      throw new Refusal(
        at,
        "'redact' is not a data key: redaction is not in this version, and the approval payload carries the real value regardless, so it would hide the value from the auditor and from nobody else",
        redact.line,
      );
    }
    rejectNestedMode(d.value, at);
    rejectUnknownKeys(d.value, DATA_KEYS, at);
    const label = d.value.entry('label');
    if (!label || typeof label.value !== 'string' || isBlank(label.value)) {
      throw new Refusal(at, `'label' must be a non-empty string, got ${typeName(label?.value)}`, label?.line ?? d.line);
    }
    labels.set(d.key, label.value);
  }
  return labels;
}

function parseControlsRegistry(v: YValue, line: number, schema: PolicySchema): Map<string, PolicyControl> {
  const registry = new Map<string, PolicyControl>();
  if (v === null) return registry;
  if (!(v instanceof YMap)) throw new Refusal('controls', `'controls' must be a mapping of id to entry, got ${typeName(v)}`, line);
  for (const e of v.entries) {
    if (typeof e.key !== 'string' || isBlank(e.key)) {
      throw new Refusal('controls', `control ids must be non-empty strings, got ${describeKey(e.key)}`, e.line);
    }
    const id = e.key;
    const length = [...id].length;
    if (length > MAX_CONTROL_ID) {
      throw new Refusal(
        'controls',
        `control id is ${length} characters; the limit is ${MAX_CONTROL_ID}. An id is printed in a table and carried on every receipt that cites it`,
        e.line,
      );
    }
    if (CONTROL_CHAR.test(id)) {
      throw new Refusal(
        'controls',
        `control id ${JSON.stringify(id)} contains a control character or a line break, which would forge a row in the evidence an operator reads`,
        e.line,
      );
    }
    const where = `controls[${quote(id)}]`;
    if (!(e.value instanceof YMap)) throw new Refusal(where, `must be a mapping with a 'title', got ${typeName(e.value)}`, e.line);
    rejectNestedMode(e.value, where);
    rejectUnknownKeys(e.value, CONTROL_KEYS, where);
    const title = e.value.entry('title');
    if (!title || typeof title.value !== 'string' || isBlank(title.value)) {
      throw new Refusal(where, `'title' must be a non-empty string, got ${typeName(title?.value)}`, title?.line ?? e.line);
    }
    const source = e.value.entry('source');
    if (source && (typeof source.value !== 'string' || isBlank(source.value))) {
      throw new Refusal(where, `'source' must be a non-empty string, got ${typeName(source.value)}`, source.line);
    }
    const role = e.value.entry('approver_role');
    if (role) {
      if (!schemaAtLeast(schema, 'ctrlrun.policy/v6')) {
        throw new Refusal(
          where,
          `'approver_role' needs 'schema: ctrlrun.policy/v6'; this document declares '${schema}', and an older reader would load it, gate nobody, and report a deployment as checking entitlement when it is not`,
          role.line,
        );
      }
      if (typeof role.value !== 'string' || isBlank(role.value))
        throw new Refusal(where, `'approver_role' must be a non-empty string, got ${typeName(role.value)}`, role.line);
      if (isBlank(role.value.slice(0, 1)) || isBlank(role.value.slice(-1))) {
        throw new Refusal(
          where,
          `'approver_role' has leading or trailing whitespace (${JSON.stringify(role.value)}); roles are matched byte for byte against a claim, so this one would match nothing and refuse every approval this control gates`,
          role.line,
        );
      }
    }
    registry.set(
      id,
      Object.freeze({ id, title: title.value, source: source ? (source.value as string) : null, approverRole: role ? (role.value as string) : null }),
    );
  }
  return registry;
}

/**
 * No ordinary entry may expand to the original's policy-approval marker: an `effect:` template
 * beginning `policy:` (the key a policy approval is recorded under), or a template naming the
 * reserved action (matched as a substring, since a placeholder could carry the rest in).
 */
function refuseReservedTemplates(entry: YMap, effect: string | null, resource: string | null, where: string): void {
  for (const [field, template] of [
    ['resource', resource],
    ['effect', effect],
  ] as const) {
    if (template !== null && template.includes(POLICY_CHANGE_ACTION)) {
      throw new Refusal(
        where,
        `names '${POLICY_CHANGE_ACTION}' in its '${field}' template: that name is reserved for the policy-change flow, and an action that could expand to it could mark a policy approved without proposing one`,
        entry.entry(field)!.line,
      );
    }
  }
  if (effect !== null && effect.startsWith(POLICY_EFFECT_PREFIX)) {
    throw new Refusal(
      where,
      `declares an 'effect:' template beginning '${POLICY_EFFECT_PREFIX}', the effect key a policy approval is recorded under; an action reserving that key could mark a policy approved`,
      entry.entry('effect')!.line,
    );
  }
}

/** A rule ready to evaluate. */
interface CompiledRule {
  readonly decision: Decision;
  readonly reason: string;
  readonly matchers: readonly Matcher[];
  /** The parsed conditions the matchers were compiled from (for tools that reason about the document). */
  readonly conditions: readonly Condition[];
  /** Entry ∪ rule citations, in registry order. */
  readonly controls: readonly string[];
}

/** An action entry ready to evaluate. */
interface CompiledEntry {
  readonly decision: Decision | null;
  readonly rules: readonly CompiledRule[];
  /** The entry's own citations, in registry order. */
  readonly controls: readonly string[];
  /** Argument → label, when a rule reads `data_scope`. */
  readonly scopeLabels: ReadonlyMap<string, string> | null;
  readonly info: ActionEntry;
}

function inRegistryOrder(cited: readonly string[], registry: ReadonlyMap<string, PolicyControl>): string[] {
  return [...registry.keys()].filter((id) => cited.includes(id));
}

function parseRule(
  v: YValue,
  where: string,
  line: number,
  registry: ReadonlyMap<string, PolicyControl>,
): { decision: Decision; conditions: Condition[]; controls: string[] } {
  if (!(v instanceof YMap)) throw new Refusal(where, `a rule must be a mapping, got ${typeName(v)}`, line);
  rejectNestedMode(v, where);
  rejectUnknownKeys(v, RULE_KEYS, where);
  const d = v.entry('decision');
  if (!d) throw new Refusal(where, "a rule must have a 'decision'", line);
  const decision = parseDecision(d.value, where, d.line);
  const c = v.entry('controls');
  const controls = parseCited(c?.value, where, c?.line ?? line, registry);
  const w = v.entry('when');
  if (!w) return { decision, conditions: [], controls };
  if (!(w.value instanceof YMap) || w.value.entries.length === 0) {
    throw new Refusal(
      where,
      `'when' must be a non-empty mapping of conditions, got ${w.value instanceof YMap ? 'an empty mapping' : typeName(w.value)}`,
      w.line,
    );
  }
  const conditions: Condition[] = [];
  for (const e of w.value.entries) {
    const at = `${where}.when`;
    if (typeof e.key !== 'string') throw new Refusal(at, `condition keys must be strings, got ${describeKey(e.key)}`, e.line);
    const split = splitConditionKey(e.key, true);
    if ('error' in split) throw new Refusal(at, split.error, e.line);
    conditions.push(Object.freeze({ key: e.key, subject: split.subject, op: split.op, operand: parseOperand(split.op, e.value, at, e.key, e.line) }));
  }
  return { decision, conditions, controls };
}

function parseEntry(name: string, v: YValue, line: number, schema: PolicySchema, registry: ReadonlyMap<string, PolicyControl>): CompiledEntry {
  const where = child('actions', name);
  if (!(v instanceof YMap)) throw new Refusal(where, `entry must be a mapping with 'decision' or 'rules', got ${typeName(v)}`, line);
  rejectNestedMode(v, where);
  rejectUnknownKeys(v, ENTRY_KEYS, where);
  if (schemaRank(schema) < 2) {
    const used = v.entries.filter((e) => typeof e.key === 'string' && V2_ENTRY.includes(e.key));
    if (used.length > 0) {
      const names = used.map((e) => quote(e.key as string)).sort();
      throw new Refusal(
        where,
        `${names.join(', ')} needs 'schema: ctrlrun.policy/v2'; this document declares '${schema}', and a v1 reader would ignore the template and execute with no duplicate protection`,
        used[0]!.line,
      );
    }
  }
  const hasDecision = v.has('decision');
  if (hasDecision === v.has('rules')) throw new Refusal(where, "entry must have exactly one of 'decision' or 'rules'", line);
  const effect = parseTemplateField(v, 'effect', where);
  const resource = parseTemplateField(v, 'resource', where);
  if (name !== POLICY_CHANGE_ACTION) refuseReservedTemplates(v, effect, resource, where);
  const notExecutedOnError = parseMcp(v, where);
  const c = v.entry('controls');
  const cited = parseCited(c?.value, where, c?.line ?? line, registry);
  const dataEntry = v.entry('data');
  if (dataEntry && schemaRank(schema) < 4) {
    throw new Refusal(
      where,
      `'data' needs 'schema: ctrlrun.policy/v4'; this document declares '${schema}', and an older reader would ignore the labels and evaluate a 'data_scope' condition against nothing`,
      dataEntry.line,
    );
  }
  for (const [key, need, consequence] of LATER_ENTRY_KEYS) {
    const e = v.entry(key);
    if (e && !schemaAtLeast(schema, need))
      throw new Refusal(where, `'${key}' needs 'schema: ${need}'; this document declares '${schema}', and ${consequence}`, e.line);
  }
  const data = parseData(v, where);
  const upstream = parseUpstream(v, where);
  const maxAttempts = parsePositive(
    v,
    'max_attempts',
    where,
    'It counts the attempts that may execute on one effect key, the first included; remove the key for no ceiling',
  );
  const approvalsRequired = parsePositive(
    v,
    'approvals_required',
    where,
    "It counts the distinct verified approvers that must answer: zero approvals is 'decision: allow', and remove the key for one",
  );
  const info: ActionEntry = Object.freeze({
    name,
    effect,
    resource,
    data: Object.freeze(Object.assign(Object.create(null) as Record<string, string>, Object.fromEntries(data))),
    notExecutedOnError,
    maxAttempts,
    approvalsRequired: approvalsRequired ?? 1,
    upstream,
  });
  const controls = inRegistryOrder(cited, registry);
  if (hasDecision) {
    const d = v.entry('decision')!;
    return { decision: parseDecision(d.value, where, d.line), rules: [], controls, scopeLabels: null, info };
  }
  const r = v.entry('rules')!;
  if (!(r.value instanceof YSeq) || r.value.items.length === 0) {
    throw new Refusal(where, `'rules' must be a non-empty list, got ${r.value instanceof YSeq ? 'an empty list' : typeName(r.value)}`, r.line);
  }
  const seq = r.value;
  let readsScope = false;
  const rules = seq.items.map((item, i): CompiledRule => {
    const parsed = parseRule(item, `${where}.rules[${i}]`, seq.lines[i] ?? r.line, registry);
    if (parsed.conditions.some((x) => DERIVED_SUBJECTS.has(x.subject))) readsScope = true;
    return Object.freeze({
      decision: parsed.decision,
      reason: `rule[${i}]`,
      matchers: Object.freeze(parsed.conditions.map((x) => compileCondition(x, `rule[${i}]`))),
      conditions: Object.freeze(parsed.conditions),
      controls: Object.freeze(inRegistryOrder([...cited, ...parsed.controls], registry)),
    });
  });
  return { decision: null, rules, controls, scopeLabels: readsScope ? data : null, info };
}

/** Parses, validates and compiles a policy document; see {@link loadPolicy}. */
function build(doc: YValue, source: string): Policy {
  if (!(doc instanceof YMap)) throw new Refusal('document', `policy must be a mapping with 'schema' and 'actions' keys, got ${typeName(doc)}`, null);
  const schemaEntry = doc.entry('schema');
  const schemaValue = schemaEntry?.value;
  if (typeof schemaValue !== 'string' || !(POLICY_SCHEMAS as readonly string[]).includes(schemaValue)) {
    throw new Refusal(
      'schema',
      `unknown policy schema ${schemaEntry ? (typeof schemaValue === 'string' ? quote(schemaValue) : typeName(schemaValue)) : '(absent)'}, expected one of ${POLICY_SCHEMAS.map(quote).join(', ')}`,
      schemaEntry?.line ?? null,
    );
  }
  const schema = schemaValue as PolicySchema;
  rejectUnknownKeys(doc, TOP_KEYS, 'top level');
  const actionsEntry = doc.entry('actions');
  if (!actionsEntry || !(actionsEntry.value instanceof YMap)) {
    throw new Refusal('actions', `'actions' must be a mapping of action name to entry, got ${typeName(actionsEntry?.value)}`, actionsEntry?.line ?? null);
  }
  const gate = (keys: ReadonlyArray<[string, string]>, need: PolicySchema): void => {
    if (schemaRank(schema) >= schemaRank(need)) return;
    for (const [key, consequence] of keys) {
      const e = doc.entry(key);
      if (e) throw new Refusal(key, `'${key}' needs 'schema: ${need}'; this document declares '${schema}', and ${consequence}`, e.line);
    }
  };
  gate(V3_TOP, 'ctrlrun.policy/v3');
  const envEntry = doc.entry('environment');
  if (envEntry && (typeof envEntry.value !== 'string' || isBlank(envEntry.value))) {
    throw new Refusal(
      'environment',
      `'environment' must be a non-empty string, got ${typeof envEntry.value === 'string' ? 'a blank string' : typeName(envEntry.value)}`,
      envEntry.line,
    );
  }
  const environment = envEntry ? (envEntry.value as string) : null;
  const modeEntry = doc.entry('mode');
  let mode: Mode = 'enforce';
  if (modeEntry) {
    if (modeEntry.value !== 'observe' && modeEntry.value !== 'enforce') {
      const got = typeof modeEntry.value === 'string' ? quote(modeEntry.value) : `${typeName(modeEntry.value)} ${describeKey(modeEntry.value)}`;
      throw new Refusal('mode', `'mode' must be exactly 'observe' or 'enforce', got ${got}. There is one switch and it governs the process`, modeEntry.line);
    }
    mode = modeEntry.value;
  }
  gate(V4_TOP, 'ctrlrun.policy/v4');
  const versionEntry = doc.entry('version');
  if (versionEntry && (typeof versionEntry.value !== 'string' || isBlank(versionEntry.value))) {
    throw new Refusal(
      'version',
      `'version' must be a non-empty string, got ${typeof versionEntry.value === 'string' ? 'a blank string' : typeName(versionEntry.value)}`,
      versionEntry.line,
    );
  }
  const version = versionEntry ? (versionEntry.value as string) : null;
  const controlsEntry = doc.entry('controls');
  const registry = controlsEntry ? parseControlsRegistry(controlsEntry.value, controlsEntry.line, schema) : new Map<string, PolicyControl>();

  const entries = new Map<string, CompiledEntry>();
  for (const e of actionsEntry.value.entries) {
    if (typeof e.key !== 'string' || e.key === '') throw new Refusal('actions', `action names must be non-empty strings, got ${describeKey(e.key)}`, e.line);
    if (e.key === POLICY_CHANGE_ACTION && !schemaAtLeast(schema, 'ctrlrun.policy/v6')) {
      throw new Refusal(
        child('actions', e.key),
        `declaring '${POLICY_CHANGE_ACTION}' needs 'schema: ctrlrun.policy/v6'; this document declares '${schema}', and an older reader would decide a policy change as an ordinary action`,
        e.line,
      );
    }
    entries.set(e.key, parseEntry(e.key, e.value, e.line, schema, registry));
  }

  const authorityEntry = doc.entry('authority');
  const authority = authorityEntry ? parseAuthoritySection(authorityEntry.value, authorityEntry.line, source, schema) : null;

  const actionsJson = canonicalJson(plain(actionsEntry.value, 'actions', actionsEntry.line), 'actions');
  const controlsJson = controlsEntry ? canonicalJson(plain(controlsEntry.value, 'controls', controlsEntry.line), 'controls') : 'null';
  // A grant scoped by `resources:` on an action the policy derives no resource for loads, as the
  // original loads it (its resource is the caller's: a decorator's template, a hand-built action);
  // `checkPolicy` names it, and the worker refuses an agent's own resource claim for such an action.
  return new Policy({ source, schema, version, mode, environment, registry, entries, actionsJson, controlsJson, authority });
}

/** What {@link Policy}'s constructor receives from the loader. */
interface PolicyParts {
  source: string;
  schema: PolicySchema;
  version: string | null;
  mode: Mode;
  environment: string | null;
  registry: Map<string, PolicyControl>;
  entries: Map<string, CompiledEntry>;
  actionsJson: string;
  controlsJson: string;
  authority: Authority | null;
}

/** Accepts a canonical authority, an object that renders one, or null. */
function canonicalAuthorityJson(authority: unknown): string {
  if (authority === null || authority === undefined) return 'null';
  let value: unknown = authority;
  if (typeof (authority as { canonical?: unknown }).canonical === 'function') value = (authority as { canonical: () => unknown }).canonical();
  if (!isPlainObject(value))
    throw new InvalidArgument('authority must be a canonical authority ({max_delegation_depth, grants, break_glass}), an object with canonical(), or null');
  const keys = Object.keys(value).sort();
  if (keys.join(',') !== 'break_glass,grants,max_delegation_depth' || !isPlainObject(value.grants) || !isPlainObject(value.break_glass)) {
    throw new InvalidArgument(
      'authority must have exactly the keys max_delegation_depth, grants (a mapping of grant id to grant) and break_glass (a mapping of envelope id to envelope, {} for none)',
    );
  }
  return canonicalJson(value, 'authority');
}

/**
 * A loaded policy. Immutable; {@link Policy.evaluate} is pure. Build one with {@link loadPolicy}.
 */
export class Policy {
  /** The schema tag the document declares. */
  readonly schema: PolicySchema;
  /** The document's `version:` label, or null. A human label: never hashed, never authoritative. */
  readonly version: string | null;
  /** `enforce` (the default) or `observe`. */
  readonly mode: Mode;
  /** The document's `environment:` as written, or null. */
  readonly environment: string | null;
  /** Where the document came from (for messages). */
  readonly source: string;
  /** The document's inline `authority:` section, or null: no section, no authority check. */
  readonly authority: Authority | null;
  /** The `controls:` registry, in declaration order. */
  readonly controls: ReadonlyMap<string, PolicyControl>;
  /** The hash over the decision inputs, with the document's environment (else `production`) and inline authority. */
  readonly policyHash: string;
  /**
   * What {@link checkPolicy} found, one line each: rules that a missing or mistyped argument (or
   * another spelling of a value) skips onto a less strict decision, and deny-list constraints.
   * The policy still loads and decides exactly as written; these say where it may not mean it.
   */
  readonly warnings: readonly string[];
  readonly #entries: ReadonlyMap<string, CompiledEntry>;
  readonly #actionsJson: string;
  readonly #controlsJson: string;

  /** @internal Use {@link loadPolicy}. */
  constructor(parts: PolicyParts) {
    this.schema = parts.schema;
    this.version = parts.version;
    this.mode = parts.mode;
    this.environment = parts.environment;
    this.source = parts.source;
    this.authority = parts.authority;
    this.controls = parts.registry;
    this.#entries = parts.entries;
    this.#actionsJson = parts.actionsJson;
    this.#controlsJson = parts.controlsJson;
    this.policyHash = this.#hash(parts.environment ?? DEFAULT_ENVIRONMENT, canonicalAuthorityJson(parts.authority));
    this.warnings = Object.freeze(checkPolicy(this).map((f) => f.message));
    Object.freeze(this);
  }

  /** The action names the document lists, in document order. */
  get actionNames(): string[] {
    return [...this.#entries.keys()];
  }

  #hash(environment: string, authorityJson: string): string {
    // Keys in code-point order: actions, authority, controls, environment, mode, schema.
    const text =
      `{"actions":${this.#actionsJson},"authority":${authorityJson},"controls":${this.#controlsJson},` +
      `"environment":${canonicalJson(environment, 'environment')},"mode":${JSON.stringify(this.mode)},"schema":${JSON.stringify(this.schema)}}`;
    return sha256TaggedText(text);
  }

  /**
   * The hash a Control records: recomputed with ITS effective environment and ITS authority
   * argument (null when none was passed, even if the document has an inline section).
   */
  hashFor(options: HashForOptions = {}): string {
    const environment = options.environment ?? this.environment ?? DEFAULT_ENVIRONMENT;
    if (typeof environment !== 'string' || isBlank(environment)) throw new InvalidArgument('environment must be a non-empty string');
    return this.#hash(environment, canonicalAuthorityJson(options.authority));
  }

  /** What the control path needs about the entry `name` (templates, data labels, mcp hint), or null. */
  action(name: string): ActionEntry | null {
    return this.#entries.get(name)?.info ?? null;
  }

  /**
   * The rules of entry `name` in order, with their parsed conditions, or null for an unlisted
   * name. A bare `decision:` entry is one unconditional rule with reason `decision`. For tools
   * that reason about the document (verify synthesizes arguments from it); never used to decide.
   */
  rules(name: string): readonly PolicyRule[] | null {
    const entry = this.#entries.get(name);
    if (entry === undefined) return null;
    if (entry.decision !== null) return [{ decision: entry.decision, reason: BARE_DECISION, conditions: [] }];
    return entry.rules.map((r) => ({ decision: r.decision, reason: r.reason, conditions: r.conditions }));
  }

  /**
   * Decides `name` with its canonical arguments. Pure. An unlisted name is `deny` /
   * `unknown_action`; a `decision:` entry gives that / `decision`; else the first rule whose
   * conditions all hold gives its decision / `rule[N]`; else `deny` / `no_matching_rule`. An
   * absent or mistyped argument makes its condition false and adds a warning.
   */
  evaluate(name: string, args: Readonly<Record<string, unknown>>): Evaluation {
    const entry = typeof name === 'string' ? this.#entries.get(name) : undefined;
    if (entry === undefined) return { decision: 'deny', reason: UNKNOWN_ACTION, controls: [], warnings: [] };
    if (entry.decision !== null) return { decision: entry.decision, reason: BARE_DECISION, controls: entry.controls.slice(), warnings: [] };
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      throw new InvalidArgument(`arguments of ${name} must be an object, got ${args === null ? 'null' : Array.isArray(args) ? 'a list' : typeof args}`);
    }
    const warnings: string[] = [];
    let scope: string[] | null = null;
    if (entry.scopeLabels !== null) {
      const found = new Set<string>();
      for (const [arg, label] of entry.scopeLabels) if (Object.prototype.hasOwnProperty.call(args, arg)) found.add(label);
      scope = [...found].sort(compareCodePoints);
    }
    for (const rule of entry.rules) {
      let holds = true;
      for (const m of rule.matchers) {
        if (!m(args, scope, warnings)) {
          holds = false;
          break;
        }
      }
      if (holds) return { decision: rule.decision, reason: rule.reason, controls: rule.controls.slice(), warnings };
    }
    return { decision: 'deny', reason: NO_MATCHING_RULE, controls: entry.controls.slice(), warnings };
  }
}

/**
 * Loads a policy from YAML text, read as the reference reads it (YAML 1.1 scalars, duplicate keys
 * refused, unquoted timestamps as dates). Anything malformed → {@link PolicyError} naming the
 * source, the key path and, where known, the line.
 */
export function loadPolicy(yamlText: string, options: LoadPolicyOptions = {}): Policy {
  const source = options.source ?? '<string>';
  if (typeof yamlText !== 'string') throw new PolicyError(`${source}: a policy must be YAML text, got ${yamlText === null ? 'null' : typeof yamlText}`);
  let policy: Policy;
  try {
    policy = build(readYaml(yamlText), source);
  } catch (err) {
    if (err instanceof YamlRefusal) throw refusalToPolicyError(err, source);
    if (err instanceof Refusal)
      throw new PolicyError(`${source}: ${err.where}${err.line !== null ? ` (line ${err.line})` : ''}: ${err.message}`, { cause: err });
    if (err instanceof PolicyError) throw err;
    // Whatever else escaped (a stack overflow on absurd nesting, a canonicaliser refusal) is
    // still this document's fault: the promise is "malformed → PolicyError".
    throw new PolicyError(`${source}: the policy could not be loaded: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  for (const w of policy.warnings) options.logger?.warn(`[ctrlrun] ${source}: ${w}`);
  return policy;
}

/**
 * Loads a policy from an already-parsed document (plain objects, arrays, strings, integers as
 * safe numbers or bigints, booleans, null; a `Date` is a timestamp). Same rules as {@link loadPolicy}.
 */
export function loadPolicyDocument(document: unknown, options: LoadPolicyOptions = {}): Policy {
  const source = options.source ?? '<document>';
  let policy: Policy;
  try {
    policy = build(fromJs(document, 'document', new Set()), source);
  } catch (err) {
    if (err instanceof YamlRefusal) throw refusalToPolicyError(err, source);
    if (err instanceof Refusal) throw new PolicyError(`${source}: ${err.where}: ${err.message}`, { cause: err });
    if (err instanceof PolicyError) throw err;
    throw new PolicyError(`${source}: the policy could not be loaded: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  for (const w of policy.warnings) options.logger?.warn(`[ctrlrun] ${source}: ${w}`);
  return policy;
}
