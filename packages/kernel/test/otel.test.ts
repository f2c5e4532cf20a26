// The OpenTelemetry sink (spec 04 §6b, T29) with the SDK's in-memory exporter and the Node
// context manager, so that the caller's active span is visible where the action's span opens.
import { context, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ActionDenied, AmbiguousEffect, ApprovalRequired, protect, ScriptedApprovalProvider, type EventRecord, type StoredReceipt } from '@ctrlrun/kernel';
import { otelSink, type OtelSinkOptions } from '@ctrlrun/kernel/otel';
import { setup } from './harness.js';

const manager = new AsyncLocalStorageContextManager();
beforeAll(() => void context.setGlobalContextManager(manager.enable()));
afterAll(() => {
  manager.disable();
  context.disable();
});

async function traced(options: Omit<OtelSinkOptions, 'tracerProvider'> = {}) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const ctx = await setup(undefined, { sinks: [] });
  // The harness's callback sink stays first, so the test sees every event the otel sink sees.
  const sink = otelSink({ tracerProvider: provider, ...options });
  const control = new (ctx.control.constructor as typeof import('@ctrlrun/kernel').Control)({
    policy: ctx.control.policy,
    store: ctx.store,
    clock: ctx.clock,
    ids: ctx.control.ids,
    principal: { agent: 'refund-agent', user: 'ana@example.com' },
    sinks: [{ onEvent: (e: EventRecord) => void ctx.events.push(e), onReceipt: (r: StoredReceipt) => void ctx.receipts.push(r) }, sink],
    logger: { warn: () => {} },
  });
  const tracer = provider.getTracer('the-agent');
  const spans = () => exporter.getFinishedSpans();
  return { ...ctx, control, sink, tracer, spans, exporter };
}

const refundWith = (
  control: Awaited<ReturnType<typeof traced>>['control'],
  fn: (a: Record<string, unknown>) => unknown = (a) => `re_${String(a['payment_id'])}`,
) => protect<Record<string, unknown>, unknown>(fn, { control, name: 'stripe.refund' });

function inside<T>(tracer: Tracer, name: string, fn: () => Promise<T>): Promise<{ value: T; spanId: string; traceId: string }> {
  return tracer.startActiveSpan(name, async (span) => {
    try {
      const value = await fn();
      return { value, spanId: span.spanContext().spanId, traceId: span.spanContext().traceId };
    } finally {
      span.end();
    }
  });
}

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

describe('otel sink', () => {
  it('test_T29_one_action_produces_one_span_named_for_the_action', async () => {
    const t = await traced();
    const call = await inside(t.tracer, 'agent.step', () => refundWith(t.control)({ payment_id: 'p1', amount: 500 }));
    expect(call.value).toBe('re_p1');
    const actions = t.spans().filter((s) => s.name !== 'agent.step');
    expect(actions.map((s) => s.name)).toEqual(['stripe.refund']);
    const span = actions[0]!;
    expect(parentOf(span)).toBe(call.spanId);
    expect(span.spanContext().traceId).toBe(call.traceId);
    expect(span.instrumentationScope.name).toBe('ctrlrun');
    const receipt = t.receipts.at(-1)!.document;
    expect(span.attributes).toEqual({
      'ctrlrun.action_id': receipt['action_id'],
      'ctrlrun.action.name': 'stripe.refund',
      'ctrlrun.action_hash': receipt['action_hash'],
      'ctrlrun.principal.agent': 'refund-agent',
      'ctrlrun.principal.user': 'ana@example.com',
      'ctrlrun.environment': 'production',
      'ctrlrun.decision': 'allow',
      'ctrlrun.decision_reason': receipt['decision_reason'],
      'ctrlrun.attempt': 1,
      'ctrlrun.result': 'committed',
      'ctrlrun.receipt_id': receipt['receipt_id'],
      'ctrlrun.effect_key': 'refund:p1',
    });
    expect(span.status.code).toBe(SpanStatusCode.OK);
  });

  it('test_T29_every_event_becomes_a_span_event_named_by_its_type', async () => {
    const t = await traced();
    await refundWith(t.control)({ payment_id: 'p2', amount: 500 });
    const span = t.spans()[0]!;
    const actionId = span.attributes['ctrlrun.action_id'];
    const mine = t.events.filter((e) => e.actionId === actionId);
    expect(mine.length).toBeGreaterThanOrEqual(5);
    expect(span.events.map((e) => e.name)).toEqual(mine.map((e) => e.type));
    const evaluated = span.events.find((e) => e.name === 'POLICY_EVALUATED')!;
    expect(evaluated.attributes).toEqual({
      'ctrlrun.effect_key': 'refund:p2',
      'ctrlrun.decision': 'allow',
      'ctrlrun.reason': mine.find((e) => e.type === 'POLICY_EVALUATED')!.data['reason'],
    });
    const reserved = span.events.find((e) => e.name === 'EFFECT_RESERVED')!;
    expect(reserved.attributes?.['ctrlrun.effect_key']).toBe('refund:p2');
    expect(reserved.attributes?.['ctrlrun.attempt']).toBe(1);
  });

  it('test_T29_argument_values_are_not_attributes_by_default', async () => {
    const t = await traced();
    await refundWith(t.control)({ payment_id: 'p3', amount: 777, note: 'customer-secret-note' });
    const everything = JSON.stringify(t.spans().map((s) => [s.attributes, s.events.map((e) => e.attributes)]));
    expect(everything).not.toContain('customer-secret-note');
    expect(everything).not.toContain('777');
    expect(everything).not.toContain('ctrlrun.argument.');

    const opted = await traced({ arguments: ['amount', 'note', 'nested', 'absent'] });
    await refundWith(opted.control)({ payment_id: 'p4', amount: 777, note: 'shown', nested: { a: 1 } });
    const attrs = opted.spans()[0]!.attributes;
    expect(
      Object.keys(attrs)
        .filter((k) => k.startsWith('ctrlrun.argument.'))
        .sort(),
    ).toEqual(['ctrlrun.argument.amount', 'ctrlrun.argument.note']);
    expect([attrs['ctrlrun.argument.amount'], attrs['ctrlrun.argument.note']]).toEqual([777, 'shown']);
    // An argument the agent named __proto__ is an argument like any other (an own key, never the prototype).
    const hostile = await traced({ arguments: ['__proto__'] });
    await refundWith(hostile.control)(JSON.parse('{"payment_id":"p5","amount":1,"__proto__":"x"}') as Record<string, unknown>);
    expect(hostile.spans()[0]!.attributes['ctrlrun.argument.__proto__']).toBe('x');
  });

  it('concurrent calls each get their own caller as parent (context flows through the awaits)', async () => {
    const t = await traced();
    const refund = refundWith(t.control, async (a) => {
      await new Promise((r) => setTimeout(r, 5));
      return a['payment_id'];
    });
    const calls = await Promise.all(['c1', 'c2', 'c3'].map((id) => inside(t.tracer, `step-${id}`, () => refund({ payment_id: id, amount: 100 }))));
    const actions = t.spans().filter((s) => s.name === 'stripe.refund');
    expect(actions).toHaveLength(3);
    for (const call of calls) {
      const span = actions.find((s) => s.attributes['ctrlrun.effect_key'] === `refund:${String(call.value)}`)!;
      expect(parentOf(span)).toBe(call.spanId);
    }
    // Outside any span, the action's span is a root.
    const root = await traced();
    await refundWith(root.control)({ payment_id: 'r1', amount: 1 });
    expect(parentOf(root.spans()[0]!)).toBeUndefined();
  });

  it('status: failed and ambiguous are ERROR with the error, denied is UNSET', async () => {
    const t = await traced();
    const failing = refundWith(t.control, () => {
      throw new Error('card network down');
    });
    await expect(failing({ payment_id: 'f1', amount: 10 })).rejects.toThrow();
    const [ambiguous] = t.spans();
    expect(ambiguous!.attributes['ctrlrun.result']).toBe('ambiguous');
    expect(ambiguous!.status).toEqual({ code: SpanStatusCode.ERROR, message: expect.stringContaining('card network down') });
    // A retry of the same effect is refused: a new span, correlated by the effect key.
    await expect(failing({ payment_id: 'f1', amount: 10 })).rejects.toBeInstanceOf(AmbiguousEffect);
    const [, blocked] = t.spans();
    expect(blocked!.attributes['ctrlrun.effect_key']).toBe('refund:f1');
    expect(blocked!.attributes['ctrlrun.result']).toBe('blocked');
    expect(blocked!.status.code).toBe(SpanStatusCode.UNSET);

    const deny = protect(() => 1, { control: t.control, name: 'iam.grant_admin' });
    await expect(deny({ user: 'x' })).rejects.toBeInstanceOf(ActionDenied);
    const denied = t.spans().at(-1)!;
    expect(denied.name).toBe('iam.grant_admin');
    expect([denied.attributes['ctrlrun.result'], denied.status.code]).toEqual(['denied', SpanStatusCode.UNSET]);
  });

  it('an approval: the asking span ends at APPROVAL_REQUESTED, the answer is its own span, the run is a new span', async () => {
    const t = await traced();
    const refund = protect(() => 'ok', {
      control: t.control,
      name: 'stripe.refund',
      wait: { provider: new ScriptedApprovalProvider(t.store, ['grant'], { approver: 'human:ana', clock: t.clock }) },
    });
    expect(await refund({ payment_id: 'a1', amount: 200000 })).toBe('ok');
    const [asked, run] = t.spans();
    expect(asked!.name).toBe('ctrlrun.action');
    expect(asked!.attributes['ctrlrun.result']).toBe('approval_required');
    expect(asked!.events.at(-1)!.name).toBe('APPROVAL_REQUESTED');
    const approvalId = asked!.attributes['ctrlrun.approval_id'];
    expect(run!.name).toBe('stripe.refund');
    expect([run!.attributes['ctrlrun.approval_id'], run!.attributes['ctrlrun.approver'], run!.attributes['ctrlrun.decision']]).toEqual([
      approvalId,
      'human:ana',
      'approve',
    ]);
    // The scripted human answers through the store directly; a Control's answer is a standalone span.
    const ask = await refundWith(t.control)({ payment_id: 'a2', amount: 200000 }).catch((e: unknown) => e);
    await t.control.grantApproval((ask as ApprovalRequired).requestId, { approver: 'human:bo' });
    const granted = t.spans().at(-1)!;
    expect(granted.name).toBe('APPROVAL_GRANTED');
    expect(granted.attributes).toMatchObject({ 'ctrlrun.approval_id': (ask as ApprovalRequired).requestId, 'ctrlrun.approver': 'human:bo' });
  });

  it('never throws into the kernel, drops events of unseen actions, and keeps at most maxOpenSpans open', async () => {
    const broken = await traced({
      tracer: {
        startSpan: () => {
          throw new Error('exporter on fire');
        },
        startActiveSpan: () => {
          throw new Error('no');
        },
      } as unknown as Tracer,
    });
    expect(await refundWith(broken.control)({ payment_id: 'b1', amount: 1 })).toBe('re_b1');

    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const sink = otelSink({ tracerProvider: provider, maxOpenSpans: 1 });
    const ev = (type: string, actionId: string): EventRecord => ({
      eventId: 1,
      ts: '2026-01-01T12:00:00.000Z',
      type: type as EventRecord['type'],
      actionId,
      effectKey: null,
      approvalId: null,
      data: {},
    });
    const receipt = (actionId: string) =>
      ({
        seq: 1,
        prevHash: '',
        hash: '',
        json: '',
        document: { action_id: actionId, action: 'x', result: 'committed', finished_at: '2026-01-01T12:00:01.000Z' },
      }) as StoredReceipt;
    sink.onEvent!(ev('EXECUTION_STARTED', 'never-proposed'));
    sink.onReceipt!(receipt('never-proposed'));
    sink.onEvent!(ev('ACTION_PROPOSED', 'a1'));
    sink.onEvent!(ev('ACTION_PROPOSED', 'a2')); // a1 is dropped, never ended
    sink.onReceipt!(receipt('a1'));
    sink.onReceipt!(receipt('a2'));
    expect(exporter.getFinishedSpans().map((s) => s.attributes['ctrlrun.action_id'])).toEqual(['a2']);
    expect(exporter.getFinishedSpans()[0]!.duration).toEqual([1, 0]);
    expect(() => otelSink({ arguments: 'amount' as never })).toThrow('list of argument names');
    expect(() => otelSink({ maxOpenSpans: 0 })).toThrow('maxOpenSpans');
    // Without a provider it uses the global one (a no-op until one is registered).
    expect(trace.getTracerProvider()).toBeDefined();
  });
});
