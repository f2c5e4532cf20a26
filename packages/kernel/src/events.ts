/**
 * Event sinks (docs/spec/01-core.md §9): observers of stored events and chained receipts. A sink is called
 * after the store write succeeded, in registration order; a sink that throws is logged by name
 * and skipped, and nothing else changes. Store tables are not sinks.
 *
 * @module
 */
import { deepCopy, orderedJson } from './canonical.js';
import type { EventRecord, StoredReceipt } from './model.js';

/** Observes stored events and receipts. Both methods are optional; either may be async. */
export interface EventSink {
  /** Names the sink in the warning logged when it fails. */
  readonly name?: string;
  /** Called with each stored event (with its store-assigned `eventId`). */
  onEvent?(event: EventRecord): void | Promise<void>;
  /** Called with each chained, stored receipt. */
  onReceipt?(receipt: StoredReceipt): void | Promise<void>;
}

/** Where a failing sink is reported. */
export interface SinkLogger {
  warn(msg: string, ...rest: unknown[]): void;
}

/** The two files a JSONL sink appends to. */
export type JsonlFile = 'events.jsonl' | 'receipts.jsonl';

/** What {@link jsonlSink} writes through: appends one line (ending in `\n`) to a file. */
export interface JsonlWriter {
  append(file: JsonlFile, line: string): void | Promise<void>;
}

/** A sink made of callbacks, for tests and small integrations. */
export function callbackSink(callbacks: {
  name?: string;
  onEvent?: (event: EventRecord) => void | Promise<void>;
  onReceipt?: (receipt: StoredReceipt) => void | Promise<void>;
}): EventSink {
  const { name, onEvent, onReceipt } = callbacks;
  const sink: { name?: string; onEvent?: EventSink['onEvent']; onReceipt?: EventSink['onReceipt'] } = { name: name ?? 'callback' };
  if (onEvent) sink.onEvent = (event) => onEvent(event);
  if (onReceipt) sink.onReceipt = (receipt) => onReceipt(receipt);
  return Object.freeze(sink);
}

/** The JSONL line of an event: `{event_id, ts, type, action_id, effect_key, approval_id, data}`. */
export function eventLine(event: EventRecord): string {
  return orderedJson({
    event_id: event.eventId,
    ts: event.ts,
    type: event.type,
    action_id: event.actionId,
    effect_key: event.effectKey,
    approval_id: event.approvalId,
    data: event.data,
  });
}

/**
 * A sink that appends one JSON line per record through `writer`: events to `events.jsonl` (see
 * {@link eventLine}), receipts to `receipts.jsonl` as their stored `json` text, byte for byte.
 * Each line passed to `writer.append` ends in `\n`. File I/O lives in the writer, so the kernel
 * stays free of Node APIs (store-node supplies a file-backed writer).
 */
export function jsonlSink(writer: JsonlWriter): EventSink {
  return Object.freeze({
    name: 'jsonl',
    onEvent: (event: EventRecord) => writer.append('events.jsonl', `${eventLine(event)}\n`),
    onReceipt: (receipt: StoredReceipt) => writer.append('receipts.jsonl', `${receipt.json}\n`),
  });
}

function sinkName(sink: EventSink, index: number): string {
  try {
    const n = sink.name;
    if (typeof n === 'string' && n !== '') return n;
  } catch {
    // A name that cannot be read is no name.
  }
  return `sink[${index}]`;
}

/** A frozen copy, so no sink can change what a later sink (or the caller) sees. */
function isolate<T extends EventRecord | StoredReceipt>(kind: 'event' | 'receipt', record: T): T {
  try {
    if (kind === 'event') {
      const e = record as EventRecord;
      return Object.freeze({ ...e, data: deepCopy(e.data, true) }) as T;
    }
    const r = record as StoredReceipt;
    return Object.freeze({ ...r, document: deepCopy(r.document, true) }) as T;
  } catch {
    return record;
  }
}

/**
 * Hands a stored record to every sink in registration order, awaiting each. A sink that throws
 * or rejects is logged through `logger.warn` (naming it) and skipped; the others still run and
 * the returned promise always resolves. Sinks receive a frozen copy of the record.
 */
export async function dispatchToSinks(sinks: readonly EventSink[], kind: 'event', record: EventRecord, logger?: SinkLogger): Promise<void>;
export async function dispatchToSinks(sinks: readonly EventSink[], kind: 'receipt', record: StoredReceipt, logger?: SinkLogger): Promise<void>;
export async function dispatchToSinks(
  sinks: readonly EventSink[],
  kind: 'event' | 'receipt',
  record: EventRecord | StoredReceipt,
  logger: SinkLogger = globalThis.console,
): Promise<void> {
  if (sinks.length === 0) return;
  const copy = isolate(kind, record);
  let index = 0;
  for (const sink of sinks) {
    const i = index++;
    try {
      if (kind === 'event') await sink.onEvent?.(copy as EventRecord);
      else await sink.onReceipt?.(copy as StoredReceipt);
    } catch (e) {
      const name = sinkName(sink, i);
      try {
        logger.warn(
          `[ctrlrun] event sink ${name} failed on ${kind === 'event' ? 'an event' : 'a receipt'}; skipped: ${e instanceof Error ? e.message : String(e)}`,
          e,
        );
      } catch {
        // A failing logger must not turn a sink's failure into the caller's.
      }
    }
  }
}
