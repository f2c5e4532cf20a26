/**
 * The OpenTelemetry sink (docs/spec/04-surfaces.md §6b) on `@opentelemetry/api` (an optional peer dependency;
 * this subpath is the only module that imports it). One span per action, one span event per
 * ctrlrun event, the receipt's facts as attributes; argument values only when named. A sink: it
 * never decides, blocks or throws into the kernel.
 *
 * Parenting: the span opens while `ACTION_PROPOSED` is dispatched, inside the caller's
 * `execute` (or `protect`ed call), so the context active there — with a context manager
 * registered, as the Node SDK does — is the span's parent.
 *
 * @module
 */
import { context, SpanStatusCode, trace, type Attributes, type Span, type Tracer, type TracerProvider } from '@opentelemetry/api';
import type { JsonObject, JsonValue } from './canonical.js';
import { InvalidArgument } from './errors.js';
import type { EventSink } from './events.js';
import type { EventRecord, StoredReceipt } from './model.js';

/** The tracer name. */
export const OTEL_TRACER_NAME = 'ctrlrun';
/** The name a span carries until its receipt renames it to the action's name. */
const ACTION_SPAN_NAME = 'ctrlrun.action';

/** Options of {@link otelSink}. */
export interface OtelSinkOptions {
  /** The tracer to use; else `tracerProvider.getTracer('ctrlrun')`, else the global provider's. */
  tracer?: Tracer;
  tracerProvider?: TracerProvider;
  /**
   * Argument names whose values become `ctrlrun.argument.<name>` (strings, booleans and finite
   * numbers only). None by default: argument values are customer data.
   */
  arguments?: readonly string[];
  /** Open spans kept at most (1024); past that the oldest is dropped, never ended. */
  maxOpenSpans?: number;
}

/** Events that happen outside any action's pass (a human, an operator): each gets a span of its own. */
const STANDALONE = new Set(['DELEGATION_CREATED', 'DELEGATION_REVOKED', 'DELEGATION_REJECTED', 'APPROVAL_GRANTED', 'APPROVAL_DENIED', 'EFFECT_RESOLVED']);

function scalar(v: JsonValue | undefined): string | number | boolean | undefined {
  if (typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  return undefined; // objects, arrays, null, bigints: dropped, never stringified
}

function eventAttributes(event: EventRecord): Attributes {
  const attrs: Attributes = {};
  if (event.effectKey !== null) attrs['ctrlrun.effect_key'] = event.effectKey;
  if (event.approvalId !== null) attrs['ctrlrun.approval_id'] = event.approvalId;
  for (const key of Object.keys(event.data)) {
    const v = scalar(event.data[key]);
    if (v !== undefined) attrs[`ctrlrun.${key}`] = v;
  }
  return attrs;
}

function time(ts: unknown): Date | undefined {
  if (typeof ts !== 'string') return undefined;
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

function str(doc: JsonObject, key: string): string | null {
  const v = Object.hasOwn(doc, key) ? doc[key] : undefined;
  return typeof v === 'string' && v !== '' ? v : null;
}

/** The receipt's facts, as the spec names them; absent ones are left out. */
function receiptAttributes(doc: JsonObject, argumentNames: readonly string[]): Attributes {
  const attrs: Attributes = {};
  const set = (name: string, v: string | number | boolean | null | undefined) => {
    if (v !== null && v !== undefined) attrs[name] = v;
  };
  set('ctrlrun.action_id', str(doc, 'action_id'));
  set('ctrlrun.action.name', str(doc, 'action'));
  set('ctrlrun.action_hash', str(doc, 'action_hash'));
  set('ctrlrun.environment', str(doc, 'environment'));
  set('ctrlrun.decision', str(doc, 'decision'));
  set('ctrlrun.decision_reason', str(doc, 'decision_reason'));
  set('ctrlrun.attempt', scalar(doc['attempt']));
  set('ctrlrun.result', str(doc, 'result'));
  set('ctrlrun.receipt_id', str(doc, 'receipt_id'));
  set('ctrlrun.resource', str(doc, 'resource'));
  set('ctrlrun.effect_key', str(doc, 'effect_key'));
  set('ctrlrun.approval_id', str(doc, 'approval_id'));
  set('ctrlrun.approver', str(doc, 'approver'));
  const principal = doc['principal'];
  if (principal && typeof principal === 'object' && !Array.isArray(principal)) {
    set('ctrlrun.principal.agent', str(principal, 'agent'));
    set('ctrlrun.principal.user', str(principal, 'user'));
    set('ctrlrun.principal.issuer', str(principal, 'issuer'));
    const claims = principal['claims'];
    // Claim names only: their values are credentials' contents.
    if (claims && typeof claims === 'object' && !Array.isArray(claims) && Object.keys(claims).length > 0) {
      set('ctrlrun.principal.claims', Object.keys(claims).sort().join(','));
    }
  }
  const args = doc['arguments'];
  if (argumentNames.length > 0 && args && typeof args === 'object' && !Array.isArray(args)) {
    for (const name of argumentNames) {
      if (Object.hasOwn(args, name)) set(`ctrlrun.argument.${name}`, scalar(args[name]));
    }
  }
  return attrs;
}

/**
 * A sink that turns ctrlrun's record into OpenTelemetry traces:
 *
 * - `ACTION_PROPOSED` opens `ctrlrun.action` (attribute `ctrlrun.action_id`) under the active
 *   context; each later event of that action is a span event named by its type, with
 *   `ctrlrun.effect_key`, `ctrlrun.approval_id` and `ctrlrun.<data key>` for scalar data (other
 *   values are dropped, never stringified). Events of actions it never saw open are dropped.
 * - The receipt renames the span to the action's name, sets the `ctrlrun.*` attributes (action,
 *   hash, principal, environment, decision and reason, attempt, result, receipt id, and when
 *   present resource, effect key, approval id, approver, claim names, issuer, user) and the status
 *   — ERROR with the error for failed/ambiguous, OK for committed, UNSET for denied/blocked — and
 *   ends it.
 * - `APPROVAL_REQUESTED` also ends the span (result `approval_required`): no receipt follows an
 *   action that stopped to ask; the run that presents the approval is a new span, correlated by
 *   `ctrlrun.approval_id`. `EXECUTION_RESUMED` of an action not open reopens one.
 * - Events outside any pass (`DELEGATION_*`, a human's `APPROVAL_GRANTED`/`APPROVAL_DENIED`,
 *   `EFFECT_RESOLVED`) are standalone spans named by type.
 * - A retry is a new span; attempts correlate by `ctrlrun.effect_key`.
 */
export function otelSink(options: OtelSinkOptions = {}): EventSink {
  if (options === null || typeof options !== 'object') throw new InvalidArgument('otelSink options must be an object');
  const argumentNames = options.arguments ?? [];
  if (!Array.isArray(argumentNames) || argumentNames.some((a) => typeof a !== 'string' || a === '')) {
    throw new InvalidArgument('otelSink arguments must be a list of argument names');
  }
  const names = [...new Set(argumentNames)];
  const max = options.maxOpenSpans ?? 1024;
  if (!Number.isSafeInteger(max) || max < 1) throw new InvalidArgument('maxOpenSpans must be a positive integer');
  const tracer = options.tracer ?? (options.tracerProvider ?? trace).getTracer(OTEL_TRACER_NAME);
  // Insertion order is age: the first key is the oldest open span.
  const open = new Map<string, Span>();

  const start = (actionId: string, ts: string): Span => {
    const span = tracer.startSpan(ACTION_SPAN_NAME, { attributes: { 'ctrlrun.action_id': actionId }, startTime: time(ts) ?? new Date() }, context.active());
    open.set(actionId, span);
    while (open.size > max) {
      const oldest = open.keys().next().value as string;
      open.delete(oldest);
    }
    return span;
  };

  const onEvent = (event: EventRecord): void => {
    try {
      const at = time(event.ts) ?? new Date();
      const id = event.actionId;
      let span = id === null ? undefined : open.get(id);
      if (span === undefined && id !== null && (event.type === 'ACTION_PROPOSED' || event.type === 'EXECUTION_RESUMED')) span = start(id, event.ts);
      if (span === undefined) {
        if (!STANDALONE.has(event.type)) return;
        const attrs = eventAttributes(event);
        if (id !== null) attrs['ctrlrun.action_id'] = id;
        const alone = tracer.startSpan(event.type, { attributes: attrs, startTime: at }, context.active());
        alone.addEvent(event.type, eventAttributes(event), at);
        alone.end(at);
        return;
      }
      span.addEvent(event.type, eventAttributes(event), at);
      if (event.type === 'APPROVAL_REQUESTED') {
        span.setAttribute('ctrlrun.result', 'approval_required');
        if (event.approvalId !== null) span.setAttribute('ctrlrun.approval_id', event.approvalId);
        span.end(at);
        open.delete(id as string);
      }
    } catch {
      // A sink never throws into the kernel.
    }
  };

  const onReceipt = (receipt: StoredReceipt): void => {
    try {
      const doc = receipt.document;
      const id = str(doc, 'action_id');
      const span = id === null ? undefined : open.get(id);
      if (span === undefined) return;
      open.delete(id as string);
      const name = str(doc, 'action');
      if (name !== null) span.updateName(name);
      span.setAttributes(receiptAttributes(doc, names));
      const result = str(doc, 'result');
      if (result === 'failed' || result === 'ambiguous') {
        const error = str(doc, 'error');
        span.setStatus(error === null ? { code: SpanStatusCode.ERROR } : { code: SpanStatusCode.ERROR, message: error });
        if (error !== null) span.setAttribute('ctrlrun.error', error);
      } else if (result === 'committed') {
        span.setStatus({ code: SpanStatusCode.OK });
      }
      span.end(time(doc['finished_at']) ?? new Date());
    } catch {
      // A sink never throws into the kernel.
    }
  };

  return Object.freeze({ name: 'otel', onEvent, onReceipt });
}
