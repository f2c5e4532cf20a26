/**
 * The embedded default every entry point starts with: the `try-it` policy (`stripe.refund`,
 * allow ≤ 100000, approve ≤ 1000000, else deny; effect `refund:{payment_id}`), a fake remote
 * that counts refunds per payment, and the playground on its own in-memory store.
 *
 * @module
 */
import { Control, loadPolicy, NotExecuted, type Clock, type IdSource, type JsonObject, type StateStore } from '@ctrlrun/kernel';
import { createTryIt, TRY_IT_POLICY_YAML } from '@ctrlrun/kernel/try-it';
import { createApp, type App, type CorsOptions } from './app.js';
import type { Authenticator } from './auth.js';
import type { ActionExecutor } from './executors.js';

/** A stand-in for a payment provider: it refunds and counts, per payment id. */
export interface FakeRemote {
  /** Refunds so far for `paymentId`. */
  calls(paymentId: string): number;
  /** The demo tools, by action name. */
  readonly executors: Readonly<Record<string, ActionExecutor>>;
}

/** A fresh fake remote with its one tool, `stripe.refund`. */
export function createFakeRemote(): FakeRemote {
  const counts = new Map<string, number>();
  const refund: ActionExecutor = (args: JsonObject) => {
    const id = args['payment_id'];
    // Refused before anything is refunded: NotExecuted, so the effect is FAILED (a retry with a
    // payment_id string may run), never AMBIGUOUS, which would wait for a human for nothing.
    if (typeof id !== 'string') throw new NotExecuted('stripe.refund needs a payment_id string: nothing was refunded');
    counts.set(id, (counts.get(id) ?? 0) + 1);
    return { id: `re_${id}`, amount: args['amount'] ?? null, status: 'succeeded' };
  };
  return { calls: (id) => counts.get(id) ?? 0, executors: { 'stripe.refund': refund } };
}

/** Options of {@link createDemoApp}. */
export interface DemoAppOptions {
  /** Where actions, approvals, effects and receipts are kept. */
  store: StateStore;
  /** The playground's own store (its refunds must not meet the API's). Omit to turn it off. */
  tryItStore?: StateStore | null;
  auth: Authenticator;
  remote?: FakeRemote;
  clock?: Clock;
  ids?: IdSource;
  cors?: CorsOptions | null;
  bodyLimit?: number;
}

/** The worker as `npm run worker` serves it: the try-it policy, the demo tools, the playground. */
export function createDemoApp(options: DemoAppOptions): { app: App; control: Control; remote: FakeRemote } {
  const remote = options.remote ?? createFakeRemote();
  const extra = { ...(options.clock ? { clock: options.clock } : {}), ...(options.ids ? { ids: options.ids } : {}) };
  const control = new Control({ policy: loadPolicy(TRY_IT_POLICY_YAML, { source: 'try-it' }), store: options.store, ...extra });
  const tryIt = options.tryItStore ? createTryIt({ store: options.tryItStore, ...extra }) : null;
  const app = createApp({
    control,
    executors: remote.executors,
    auth: options.auth,
    tryIt,
    ...(options.cors ? { cors: options.cors } : {}),
    ...(options.bodyLimit ? { bodyLimit: options.bodyLimit } : {}),
  });
  return { app, control, remote };
}
