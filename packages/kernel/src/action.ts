/**
 * Principals and actions: what an agent wants to do, in canonical form, with its hash.
 *
 * @module
 */
import {
  canonicalJson,
  deepCopy,
  frozenWithText,
  isPlainObject,
  isWellFormedString,
  orderedJson,
  parseJson,
  type JsonObject,
  type JsonValue,
} from './canonical.js';
import { InvalidArgument } from './errors.js';
import { sha256TaggedText } from './hash.js';
import { quotedForMessage } from './visible.js';
import { randomIds, type IdSource } from './ids.js';

/** The schema tag of the hashed action payload. */
export const ACTION_SCHEMA = 'ctrlrun.action/v1';
/** The environment an action is in unless told otherwise. */
export const DEFAULT_ENVIRONMENT = 'production';

/** Who wants to act. Only `agent` and `user` are hashed. */
export interface Principal {
  /** The agent (non-empty). */
  readonly agent: string;
  /** The human on whose behalf it acts, or `null`. */
  readonly user: string | null;
  /**
   * Verified claims (v0.3); never hashed. A value is a string, an integer, a boolean, or (as the
   * original 0.8+ writes roles) a list of non-empty strings.
   */
  readonly claims?: Readonly<Record<string, ClaimValue>> | null;
  /** Who vouched for the identity (v0.3); never hashed. */
  readonly issuer?: string | null;
  /** When the identity stops being valid (v0.3), ISO-8601 with an offset; never hashed. */
  readonly expiresAt?: string | null;
}

/** What a caller gives {@link createAction}. */
export interface ActionInput {
  name: string;
  arguments?: Record<string, unknown>;
  principal: {
    agent: string;
    user?: string | null;
    claims?: Record<string, ClaimValue> | null;
    issuer?: string | null;
    expiresAt?: string | null;
  };
  resource?: string | null;
  environment?: string;
  /** Normally minted; given only when rebuilding a stored action. */
  actionId?: string;
}

/** A canonical action. Identity follows `actionId`; equal content has an equal `actionHash`. */
export interface Action {
  readonly actionId: string;
  readonly name: string;
  /** The validated, deep-frozen arguments. */
  readonly arguments: Readonly<JsonObject>;
  readonly principal: Principal;
  readonly resource: string | null;
  readonly environment: string;
  /** `sha256:` + hex over the canonical payload. */
  readonly actionHash: string;
  /** The canonical payload's exact text. */
  readonly canonical: string;
  /**
   * The arguments re-parsed from the canonical bytes: a fresh mutable copy on every access. A
   * getter the action inherits, not a field of its own: a spread or JSON copy of an action does
   * not carry it, and is refused by `Control` (such a copy is not an action: build one again).
   */
  readonly canonicalArguments: JsonObject;
}

function nonEmpty(v: unknown, what: string): string {
  if (typeof v !== 'string' || v === '') throw new InvalidArgument(`${what} must be a non-empty string`);
  return v;
}

function nullOrNonEmpty(v: unknown, what: string): string | null {
  if (v === undefined || v === null) return null;
  return nonEmpty(v, what);
}

/** Validates and normalises a principal. */
/** One claim's value: a string, an integer, a boolean, or a list of non-empty strings (roles). */
export type ClaimValue = string | number | boolean | readonly string[];

export function createPrincipal(input: ActionInput['principal']): Principal {
  if (!isPlainObject(input)) throw new InvalidArgument('principal must be an object with an agent');
  // Each field read once: what is checked is what is kept, whatever a getter would answer next.
  const { agent: agentIn, user: userIn, claims: claimsIn, issuer, expiresAt } = input;
  const agent = nonEmpty(agentIn, 'principal.agent');
  const user = nullOrNonEmpty(userIn, 'principal.user');
  const p: { -readonly [K in keyof Principal]: Principal[K] } = { agent, user };
  if (claimsIn !== undefined && claimsIn !== null) {
    if (!isPlainObject(claimsIn)) throw new InvalidArgument('principal.claims must be an object');
    // Copied first (each claim read once), then the copy is checked and kept.
    const claims: Record<string, ClaimValue> = { ...claimsIn };
    for (const [k, v] of Object.entries(claims)) {
      if (Array.isArray(v)) {
        // A list (the original's roles claim): non-empty strings only, copied and frozen.
        const list: unknown[] = [...(v as unknown[])];
        if (!list.every((x) => typeof x === 'string' && x !== ''))
          throw new InvalidArgument(`principal.claims.${k} must be a string, an integer, a boolean or a list of non-empty strings`);
        claims[k] = Object.freeze(list as string[]);
      } else if (typeof v !== 'string' && typeof v !== 'boolean' && !(typeof v === 'number' && Number.isSafeInteger(v))) {
        throw new InvalidArgument(`principal.claims.${k} must be a string, an integer, a boolean or a list of non-empty strings`);
      }
    }
    p.claims = Object.freeze(claims);
  }
  if (issuer !== undefined && issuer !== null) p.issuer = nonEmpty(issuer, 'principal.issuer');
  if (expiresAt !== undefined && expiresAt !== null) p.expiresAt = nonEmpty(expiresAt, 'principal.expiresAt');
  return Object.freeze(p);
}

/**
 * The six-key payload that is hashed, around the arguments' canonical text (written once per
 * action): `arguments` sorts first, so the payload is that text followed by the other five keys.
 */
function payloadText(argsText: string, name: string, principal: Principal, resource: string | null, environment: string): string {
  const { agent, user } = principal;
  // The five other keys in their (fixed) canonical order; a string the canonical form refuses
  // (a lone surrogate) takes the general path, which names it.
  if (
    isWellFormedString(environment) &&
    isWellFormedString(name) &&
    isWellFormedString(agent) &&
    (user === null || isWellFormedString(user)) &&
    (resource === null || isWellFormedString(resource))
  ) {
    return `{"arguments":${argsText},"environment":${JSON.stringify(environment)},"name":${JSON.stringify(name)},"principal":{"agent":${JSON.stringify(agent)},"user":${JSON.stringify(user)}},"resource":${JSON.stringify(resource)},"schema":${SCHEMA_TEXT}}`;
  }
  const rest = canonicalJson({ environment, name, principal: { agent, user }, resource, schema: ACTION_SCHEMA }, 'action');
  return `{"arguments":${argsText},${rest.slice(1)}`;
}

const SCHEMA_TEXT = JSON.stringify(ACTION_SCHEMA);

/** Builds a canonical action: validates every field, deep-freezes the arguments, hashes the payload. */
export function createAction(input: ActionInput, options: { ids?: IdSource } = {}): Action {
  if (!isPlainObject(input) && !CanonicalAction.built(input)) {
    throw new InvalidArgument('createAction takes an object { name, arguments, principal, resource?, environment? }');
  }
  // Each field read once: what is checked is what is hashed and kept, whatever a getter would answer next.
  const { name: nameIn, arguments: argsIn, principal: principalIn, resource: resourceIn, environment: environmentIn, actionId: actionIdIn } = input;
  const name = nonEmpty(nameIn, 'action.name');
  const rawArgs = argsIn ?? {};
  if (!isPlainObject(rawArgs)) throw new InvalidArgument('arguments must be a plain object');
  // One reading of the arguments: the frozen copy, and its canonical text (what is hashed).
  const { value: args, text: argsText } = frozenWithText<JsonObject>(rawArgs, 'arguments');
  const principal = createPrincipal(principalIn);
  const resource = nullOrNonEmpty(resourceIn, 'action.resource');
  const environment = environmentIn === undefined ? DEFAULT_ENVIRONMENT : nonEmpty(environmentIn, 'action.environment');
  const actionId = actionIdIn === undefined ? (options.ids ?? randomIds)('act') : nonEmpty(actionIdIn, 'action.actionId');
  // Stored as its row's holder and written into its receipt: text with no UTF-8 form would be neither.
  if (!isWellFormedString(actionId)) throw new InvalidArgument('action.actionId holds a lone surrogate, which cannot be stored or written into a receipt');
  const canonical = payloadText(argsText, name, principal, resource, environment);
  const fields = { actionId, name, arguments: args, principal, resource, environment, actionHash: sha256TaggedText(canonical), canonical };
  // The fields are the instance's own, as assigned: the action is the class and its fields.
  return Object.freeze(new CanonicalAction(BUILD, fields, argsText) as CanonicalAction & typeof fields);
}

/** What only {@link createAction} holds: an action is never built around fields it did not check and hash. */
const BUILD: unique symbol = Symbol('createAction');

/**
 * An action as {@link createAction} builds it: its fields as frozen data, and the arguments'
 * canonical text kept privately for {@link Action.canonicalArguments}. A class, so that the
 * getter lives on the prototype: a frozen object with an accessor of its own is kept by V8 in
 * dictionary mode, and every one of the many reads of an action's fields would be a hash lookup.
 */
class CanonicalAction {
  readonly #argsText: string;
  // Parsed once, on first read, and never handed out: every read gets a deep copy of it.
  #parsed: JsonObject | null = null;

  constructor(token: typeof BUILD, fields: Omit<Action, 'canonicalArguments'>, argsText: string) {
    // The class can be reached from any action (its prototype's constructor): only createAction builds one.
    if (token !== BUILD) throw new TypeError('actions are built by createAction');
    Object.assign(this, fields);
    this.#argsText = argsText;
  }

  /** Whether `o` was built by createAction in this copy of the module (a proxy of one is not). */
  static built(o: unknown): boolean {
    return typeof o === 'object' && o !== null && #argsText in o;
  }

  get canonicalArguments(): JsonObject {
    this.#parsed ??= parseJson(this.#argsText, { what: 'canonical arguments' }) as JsonObject;
    return deepCopy(this.#parsed) as JsonObject;
  }
}
// As the own getter was before: nobody redefines what an action's canonical arguments read.
Object.freeze(CanonicalAction.prototype);

/**
 * Refuses with {@link InvalidArgument} anything `what` cannot take as an action. One that
 * {@link createAction} built here passes at once. Any other object (one built by another copy of
 * this module, or by hand) is built again from its fields, and passes only when that gives its
 * `actionHash` and `canonical` exactly: what the kernel decides on, runs and stores is then what
 * was hashed. A spread or JSON copy of an action has no `canonicalArguments`, and is refused by name.
 */
export function checkAction(action: unknown, what: string): asserts action is Action {
  if (CanonicalAction.built(action)) return;
  if (typeof action !== 'object' || action === null || typeof (action as Action).actionHash !== 'string') {
    throw new InvalidArgument(`${what} needs an Action (createAction(...))`);
  }
  const a = action as Action;
  let args: unknown;
  try {
    args = a.canonicalArguments;
  } catch (err) {
    throw new InvalidArgument(
      `${what} needs an Action built by createAction(...): reading its canonicalArguments failed (${(err as Error)?.message ?? String(err)})`,
    );
  }
  if (typeof args !== 'object' || args === null) {
    throw new InvalidArgument(
      `${what} needs an Action built by createAction(...) or actionFromJson(...): this one has no canonicalArguments (a spread or JSON copy of an action loses them)`,
    );
  }
  let again: Action;
  try {
    again = createAction({
      actionId: a.actionId,
      name: a.name,
      arguments: args as JsonObject,
      principal: a.principal,
      resource: a.resource,
      environment: a.environment,
    });
  } catch (err) {
    throw new InvalidArgument(`${what} needs an Action built by createAction(...): its fields are not an action's (${(err as Error)?.message ?? String(err)})`);
  }
  const differs =
    again.actionHash !== a.actionHash
      ? `its fields hash to ${again.actionHash}, not to the actionHash it carries (${quotedForMessage(String(a.actionHash), 80)})`
      : again.canonical !== a.canonical
        ? 'its canonical text is not the one its fields hash'
        : !sameArguments(a.arguments, again)
          ? 'its arguments are not the canonical arguments its hash covers'
          : null;
  if (differs !== null) {
    throw new InvalidArgument(`${what} needs an Action built by createAction(...): ${differs}; an action is never edited or assembled by hand`);
  }
}

/** Whether `given` (an action's `arguments`) is `action`'s arguments, as written canonically. */
function sameArguments(given: unknown, action: Action): boolean {
  try {
    return canonicalJson(given, 'arguments') === canonicalJson(action.arguments, 'arguments');
  } catch {
    return false;
  }
}

/** The hash of an action (`sha256:…`). */
export function actionHash(action: Action): string {
  return action.actionHash;
}

/**
 * The principal as stored and written on receipts: `{agent, user, claims, issuer, expires_at}`.
 * `claims` is always an object, `{}` when there are none, as the original writes it (spec 05
 * §6.3); claims are never hashed, so this changes no action hash.
 */
export function principalJson(p: Principal): JsonObject {
  return {
    agent: p.agent,
    user: p.user,
    claims: p.claims ? (deepCopy(p.claims) as JsonObject) : {},
    issuer: p.issuer ?? null,
    expires_at: p.expiresAt ?? null,
  };
}

/** The stored `action_json`: `{action_id, name, arguments, principal, resource, environment}`. */
export function actionToJson(action: Action): string {
  // What is stored rebuilds its hash: a copy that lost its arguments, or fields that are not the hash's, are refused.
  checkAction(action, 'actionToJson');
  return orderedJson({
    action_id: action.actionId,
    name: action.name,
    arguments: action.canonicalArguments,
    principal: principalJson(action.principal),
    resource: action.resource,
    environment: action.environment,
  });
}

/** Rebuilds an action from its stored `action_json`; the hash must come out the same. */
export function actionFromJson(text: string): Action {
  const doc = parseJson(text, { what: 'action_json' }) as Record<string, JsonValue>;
  if (!isPlainObject(doc)) throw new InvalidArgument('action_json must be an object');
  const p = doc['principal'] as Record<string, JsonValue> | null;
  if (!isPlainObject(p)) throw new InvalidArgument('action_json.principal must be an object');
  return createAction({
    actionId: doc['action_id'] as string,
    name: doc['name'] as string,
    arguments: doc['arguments'] as JsonObject,
    principal: {
      agent: p['agent'] as string,
      user: (p['user'] ?? null) as string | null,
      // null, or any claims that are not an object (a shape the original drops), read as none.
      claims: isPlainObject(p['claims']) ? (p['claims'] as Record<string, ClaimValue>) : null,
      issuer: (p['issuer'] ?? null) as string | null,
      expiresAt: (p['expires_at'] ?? null) as string | null,
    },
    resource: (doc['resource'] ?? null) as string | null,
    environment: doc['environment'] as string,
  });
}
