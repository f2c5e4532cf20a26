/**
 * The scenario every runtime runs, written once: the six steps of the playground ("Try it",
 * spec 04 §4) through `@ctrlrun/kernel/try-it` on the sql.js store, then -500 in a fresh
 * session. Runtime-agnostic: Web-standard globals only, no `node:*`, no `Deno`, no `process`;
 * each host says, through the store's options, how sql.js gets its `.wasm`.
 */
import { createTryIt, type ApproveRequest, type RefundRequest } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore, type CreateSqlJsStoreOptions } from '@ctrlrun/store-sqljs';

/** What a host reports: which runtime ran, and every step's request and raw result (ids not masked). */
export interface ScenarioReport {
  runtime: { name: string; version: string };
  steps: ScenarioStep[];
}

/** One call to `step`: which try-it step it belongs to, what was asked, what came back. */
export interface ScenarioStep {
  step: string;
  request: RefundRequest | ApproveRequest;
  result: unknown;
}

/** Runs the scenario on fresh in-memory sql.js stores opened with `store` options. */
export async function runScenario(store: CreateSqlJsStoreOptions = {}): Promise<ScenarioStep[]> {
  const steps: ScenarioStep[] = [];
  const session = async (
    body: (call: (step: string, request: RefundRequest | ApproveRequest) => Promise<Record<string, unknown>>) => Promise<void>,
  ): Promise<void> => {
    const opened = await createSqlJsStore(store);
    try {
      const tryIt = createTryIt({ store: opened });
      await body(async (step, request) => {
        const result = (await tryIt.step(request)) as unknown as Record<string, unknown>;
        steps.push({ step, request, result });
        return result;
      });
    } finally {
      await opened.close();
    }
  };

  await session(async (call) => {
    await call('1', { op: 'refund', payment_id: 'txn_1', amount: 50000 });
    const asked = await call('2', { op: 'refund', payment_id: 'txn_2', amount: 200000 });
    const requestId = asked['request_id'];
    if (typeof requestId !== 'string') throw new Error(`step 2 returned no request_id: ${JSON.stringify(asked)}`);
    const granted = await call('2', { op: 'approve', request_id: requestId });
    const approvalId = String(granted['approval_id']);
    await call('2', { op: 'refund', payment_id: 'txn_2', amount: 500000, approval_id: approvalId });
    await call('2', { op: 'refund', payment_id: 'txn_2', amount: 200000, approval_id: approvalId });
    await call('3', { op: 'refund', payment_id: 'txn_2', amount: 200000, approval_id: approvalId });
    await call('4', { op: 'refund', payment_id: 'txn_3', amount: 2000000 });
    await call('5', { op: 'refund', payment_id: 'txn_4', amount: 50000, lose_reply: true });
    await call('5', { op: 'refund', payment_id: 'txn_4', amount: 50000 });
    await call('6', { op: 'refund', payment_id: 'txn_1', amount: 50000 });
  });
  await session(async (call) => {
    await call('fresh', { op: 'refund', payment_id: 'txn_1', amount: -500 });
  });
  return steps;
}
