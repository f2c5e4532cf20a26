// Shared fixtures for the AI SDK adapter's tests: a real sql.js store, a Control, and the SDK's
// own mock language model answering from a script (no network, no provider).
import { callbackSink, Control, loadPolicy, sequentialIds, type ApprovalRecord, type StoredReceipt } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { simulateReadableStream } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
// The kernel's refund policy: allow up to 100000, a human up to 1000000, deny above.
import { REFUND_POLICY } from '../../kernel/test/harness.js';

export async function setup(policyYaml = REFUND_POLICY) {
  const store = await createSqlJsStore();
  const receipts: StoredReceipt[] = [];
  const control = new Control({
    policy: loadPolicy(policyYaml),
    store,
    ids: sequentialIds(),
    principal: { agent: 'support-agent' },
    sinks: [callbackSink({ onReceipt: (r) => void receipts.push(r) })],
    logger: { warn: () => {} },
  });
  const approvals = (status?: ApprovalRecord['status']) => store.listApprovals(status);
  return { store, control, receipts, approvals };
}

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

/** One model turn that calls a tool. */
export function callsTool(toolCallId: string, toolName: string, input: Record<string, unknown>) {
  return {
    content: [{ type: 'tool-call' as const, toolCallId, toolName, input: JSON.stringify(input) }],
    finishReason: { unified: 'tool-calls' as const, raw: undefined },
    usage,
    warnings: [],
  };
}

/** One model turn that answers in text. */
export function says(text: string) {
  return { content: [{ type: 'text' as const, text }], finishReason: { unified: 'stop' as const, raw: undefined }, usage, warnings: [] };
}

/** The SDK's mock model playing `turns` in order, one per model call, across generateText calls. */
export function scriptedModel(turns: ReturnType<typeof callsTool | typeof says>[]) {
  return new MockLanguageModelV3({ doGenerate: turns });
}

/** Everything the model was shown in its last call, as text (tool results included). */
export function lastPrompt(model: MockLanguageModelV3): string {
  return JSON.stringify(model.doGenerateCalls.at(-1)?.prompt ?? []);
}

/** A part of a model's stream, as the SDK's model interface types it. */
type StreamPart = Awaited<ReturnType<MockLanguageModelV3['doStream']>>['stream'] extends ReadableStream<infer P> ? P : never;

/** The same turns as a streaming model (streamText), one stream per model call. */
export function scriptedStreamingModel(turns: ReturnType<typeof callsTool | typeof says>[]) {
  return new MockLanguageModelV3({
    doStream: turns.map((turn) => {
      const chunks: StreamPart[] = [{ type: 'stream-start', warnings: [] }];
      for (const part of turn.content) {
        if (part.type === 'text')
          chunks.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: part.text }, { type: 'text-end', id: 't' });
        else chunks.push(part);
      }
      chunks.push({ type: 'finish', finishReason: turn.finishReason, usage: turn.usage });
      return { stream: simulateReadableStream({ chunks }) };
    }),
  });
}
