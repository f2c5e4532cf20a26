import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildReceipt, dispatchToSinks, GENESIS_HASH, sealReceipt } from '@ctrlrun/kernel/store';
import {
  callbackSink,
  createAction,
  eventLine,
  jsonlSink,
  parseJson,
  sequentialIds,
  type EventRecord,
  type EventSink,
  type JsonlFile,
  type StoredReceipt,
} from '@ctrlrun/kernel';

function storedReceipt(): StoredReceipt {
  const action = createAction(
    { name: 'refund', arguments: { amount: 200000, memo: 'café ☕' }, principal: { agent: 'agent-1', user: 'alice' } },
    { ids: sequentialIds() },
  );
  const draft = buildReceipt(action, {
    receiptId: 'rcp_1',
    decision: 'allow',
    decisionReason: 'rule[0]',
    approvalId: null,
    approver: null,
    effectKey: 'refund:o-1',
    attempt: 1,
    result: 'committed',
    error: null,
    startedAt: '2026-01-01T12:00:00.000Z',
    finishedAt: '2026-01-01T12:00:01.000Z',
    policyHash: null,
    policyVersion: '3',
    controls: ['policy', 'effect_key'],
  });
  const sealed = sealReceipt(draft.document, 1, GENESIS_HASH);
  return { seq: 1, prevHash: GENESIS_HASH, hash: sealed.hash, json: sealed.json, document: sealed.document };
}

function event(eventId: number, data: EventRecord['data'] = { approver: 'alice', action_hash: `sha256:${'b'.repeat(64)}` }): EventRecord {
  return { eventId, ts: '2026-01-01T12:00:00.000Z', type: 'APPROVAL_GRANTED', actionId: 'act_1', effectKey: null, approvalId: 'apr_1', data };
}

/** Records warnings instead of printing them. */
function recordingLogger(): { warn(msg: string, ...rest: unknown[]): void; warnings: { msg: string; rest: unknown[] }[] } {
  const warnings: { msg: string; rest: unknown[] }[] = [];
  return { warnings, warn: (msg, ...rest) => void warnings.push({ msg, rest }) };
}

describe('dispatchToSinks (T17)', () => {
  it('test_T17_a_throwing_sink_is_logged_by_name_and_the_next_sink_still_receives_the_record', async () => {
    const seen: string[] = [];
    const logger = recordingLogger();
    const sinks: EventSink[] = [
      callbackSink({ name: 'first', onEvent: (e) => void seen.push(`first:${e.eventId}`) }),
      {
        name: 'thrower',
        onEvent: () => {
          throw new Error('disk full');
        },
      },
      { name: 'rejecter', onEvent: async () => Promise.reject(new Error('network down')) },
      callbackSink({ name: 'last', onEvent: (e) => void seen.push(`last:${e.eventId}`) }),
    ];
    await expect(dispatchToSinks(sinks, 'event', event(7), logger)).resolves.toBeUndefined();
    expect(seen).toEqual(['first:7', 'last:7']);
    expect(logger.warnings).toHaveLength(2);
    expect(logger.warnings[0]?.msg).toContain('thrower');
    expect(logger.warnings[0]?.msg).toContain('disk full');
    expect(logger.warnings[0]?.rest[0]).toBeInstanceOf(Error);
    expect(logger.warnings[1]?.msg).toContain('rejecter');
    expect(logger.warnings[1]?.msg).toContain('network down');
  });

  it('test_T17_a_throwing_receipt_sink_is_skipped_and_the_others_still_run', async () => {
    const receipt = storedReceipt();
    const got: StoredReceipt[] = [];
    const logger = recordingLogger();
    const sinks: EventSink[] = [
      {
        name: 'broken',
        onReceipt: () => {
          throw new TypeError('bad');
        },
      },
      callbackSink({ onReceipt: (r) => void got.push(r) }),
    ];
    await dispatchToSinks(sinks, 'receipt', receipt, logger);
    expect(got).toHaveLength(1);
    expect(got[0]?.json).toBe(receipt.json);
    expect(got[0]?.hash).toBe(receipt.hash);
    expect(logger.warnings.map((w) => w.msg)).toEqual([expect.stringContaining('broken')]);
  });

  it('calls sinks in registration order, awaiting each before the next', async () => {
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow: EventSink = {
      name: 'slow',
      onEvent: async () => {
        order.push('slow:start');
        await gate;
        order.push('slow:end');
      },
    };
    const fast = callbackSink({ onEvent: () => void order.push('fast') });
    const done = dispatchToSinks([slow, fast], 'event', event(1), recordingLogger());
    await Promise.resolve();
    expect(order).toEqual(['slow:start']);
    release();
    await done;
    expect(order).toEqual(['slow:start', 'slow:end', 'fast']);
  });

  it('only calls the method for the record kind, and skips sinks without it', async () => {
    const seen: string[] = [];
    const sink = callbackSink({ onEvent: () => void seen.push('event'), onReceipt: () => void seen.push('receipt') });
    const logger = recordingLogger();
    await dispatchToSinks([sink, {}, callbackSink({})], 'receipt', storedReceipt(), logger);
    await dispatchToSinks([sink, {}], 'event', event(1), logger);
    expect(seen).toEqual(['receipt', 'event']);
    expect(logger.warnings).toEqual([]);
  });

  it('names an unnamed failing sink by its position', async () => {
    const logger = recordingLogger();
    await dispatchToSinks(
      [
        callbackSink({}),
        {
          onEvent: () => {
            throw 'plain string';
          },
        },
      ],
      'event',
      event(1),
      logger,
    );
    expect(logger.warnings[0]?.msg).toContain('sink[1]');
    expect(logger.warnings[0]?.msg).toContain('plain string');
  });

  it('a sink cannot change what later sinks or the caller see', async () => {
    const record = event(3, { approver: 'alice', nested: { n: 1 } });
    const seen: unknown[] = [];
    const logger = recordingLogger();
    const vandal: EventSink = {
      name: 'vandal',
      onEvent: (e) => {
        (e.data as Record<string, unknown>)['approver'] = 'mallory';
      },
    };
    await dispatchToSinks([vandal, callbackSink({ onEvent: (e) => void seen.push(JSON.parse(JSON.stringify(e.data))) })], 'event', record, logger);
    expect(logger.warnings.map((w) => w.msg)).toEqual([expect.stringContaining('vandal')]);
    expect(seen).toEqual([{ approver: 'alice', nested: { n: 1 } }]);
    expect(record.data['approver']).toBe('alice');
  });

  it('a logger that throws does not make dispatch fail', async () => {
    const after: number[] = [];
    const logger = {
      warn: () => {
        throw new Error('logger broken');
      },
    };
    await expect(
      dispatchToSinks(
        [
          {
            name: 'x',
            onEvent: () => {
              throw new Error('x');
            },
          },
          callbackSink({ onEvent: (e) => void after.push(e.eventId) }),
        ],
        'event',
        event(9),
        logger,
      ),
    ).resolves.toBeUndefined();
    expect(after).toEqual([9]);
  });

  it('defaults to console.warn', async () => {
    const original = console.warn;
    const calls: unknown[][] = [];
    console.warn = (...args: unknown[]) => void calls.push(args);
    try {
      await dispatchToSinks(
        [
          {
            name: 'noisy',
            onEvent: () => {
              throw new Error('boom');
            },
          },
        ],
        'event',
        event(1),
      );
    } finally {
      console.warn = original;
    }
    expect(calls).toHaveLength(1);
    expect(String(calls[0]?.[0])).toContain('noisy');
  });
});

describe('jsonlSink', () => {
  function memoryWriter(): { append(file: JsonlFile, line: string): void; files: Record<JsonlFile, string> } {
    const files: Record<JsonlFile, string> = { 'events.jsonl': '', 'receipts.jsonl': '' };
    return { files, append: (file, line) => void (files[file] += line) };
  }

  it('test_T17_the_jsonl_sink_writes_exactly_the_expected_lines', async () => {
    const w = memoryWriter();
    const sink = jsonlSink(w);
    const receipt = storedReceipt();
    const e1 = event(1);
    const e2: EventRecord = {
      eventId: 2,
      ts: '2026-01-01T12:00:02.000Z',
      type: 'EXECUTION_COMMITTED',
      actionId: 'act_1',
      effectKey: 'refund:o-1',
      approvalId: null,
      data: {},
    };
    await dispatchToSinks([sink], 'event', e1, recordingLogger());
    await dispatchToSinks([sink], 'receipt', receipt, recordingLogger());
    await dispatchToSinks([sink], 'event', e2, recordingLogger());
    expect(w.files['events.jsonl']).toBe(
      `{"event_id":1,"ts":"2026-01-01T12:00:00.000Z","type":"APPROVAL_GRANTED","action_id":"act_1","effect_key":null,"approval_id":"apr_1","data":{"approver":"alice","action_hash":"sha256:${'b'.repeat(64)}"}}\n` +
        '{"event_id":2,"ts":"2026-01-01T12:00:02.000Z","type":"EXECUTION_COMMITTED","action_id":"act_1","effect_key":"refund:o-1","approval_id":null,"data":{}}\n',
    );
    // The receipt line is the stored json text, byte for byte.
    expect(w.files['receipts.jsonl']).toBe(`${receipt.json}\n`);
    expect(receipt.json).toContain('café ☕');
  });

  it('an async writer is awaited; a failing writer is logged as the jsonl sink', async () => {
    const lines: string[] = [];
    const logger = recordingLogger();
    const slowWriter = {
      append: async (_f: JsonlFile, line: string) => {
        await Promise.resolve();
        lines.push(line);
      },
    };
    await dispatchToSinks([jsonlSink(slowWriter)], 'event', event(4), logger);
    expect(lines).toHaveLength(1);
    await dispatchToSinks(
      [
        jsonlSink({
          append: () => {
            throw new Error('EACCES');
          },
        }),
      ],
      'event',
      event(5),
      logger,
    );
    expect(logger.warnings.map((w) => w.msg)).toEqual([expect.stringMatching(/jsonl.*EACCES/)]);
  });

  it('property: every event line is one line of JSON that parses back to the event, in key order', () => {
    const dataArb = fc.dictionary(fc.string({ unit: 'grapheme' }), fc.oneof(fc.string({ unit: 'grapheme' }), fc.integer(), fc.boolean(), fc.constant(null)), {
      maxKeys: 4,
    });
    fc.assert(
      fc.property(fc.nat(), fc.option(fc.string({ unit: 'grapheme' }), { nil: null }), dataArb, (id, effectKey, data) => {
        const e: EventRecord = { ...event(id), effectKey, data };
        const line = eventLine(e);
        expect(line).not.toContain('\n');
        const back = parseJson(line) as Record<string, unknown>;
        expect(Object.keys(back)).toEqual(['event_id', 'ts', 'type', 'action_id', 'effect_key', 'approval_id', 'data']);
        expect(back['event_id']).toBe(id);
        expect(back['effect_key']).toBe(effectKey);
        expect(JSON.stringify(back['data'])).toBe(JSON.stringify(data));
      }),
    );
  });
});
