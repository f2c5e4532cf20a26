/** Fixtures for the worker's Node-only tests: the app over a real sql.js store, and an HTTP caller. */
import { Control, loadPolicy, NotExecuted, sequentialIds, type StateStore } from '@ctrlrun/kernel';
import { TRY_IT_POLICY_YAML } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { createApp, staticTokens, type ActionExecutor, type App, type AppOptions } from '../../worker/src/index.js';

export const AGENT = 'agent-token-for-app-tests-01';
export const OPERATOR = 'operator-token-for-app-tests';

/** The playground's policy (`stripe.refund`), and a few more actions for the other paths. */
export const POLICY = `${TRY_IT_POLICY_YAML}  flaky.charge:
    effect: "charge:{id}"
    decision: allow
  upstream.call:
    decision: allow
  nothing.registered:
    decision: allow
  free.form:
    decision: allow
  db.drop:
    resource: "table:{table}"
    decision: allow
`;

/**
 * `flaky.charge` does what its `mode` argument says: `ok`, `lost` (the reply is lost after the
 * charge: unknown outcome), `refused` (`NotExecuted`).
 */
export function testExecutors(calls: string[]): Record<string, ActionExecutor> {
  return {
    'stripe.refund': (args) => {
      calls.push(`refund ${String(args['payment_id'])}`);
      return { id: `re_${String(args['payment_id'])}`, amount: args['amount'] ?? null };
    },
    'flaky.charge': (args) => {
      calls.push(`charge ${String(args['id'])} ${String(args['mode'])}`);
      if (args['mode'] === 'lost') throw new Error('socket hang up after the charge was sent');
      if (args['mode'] === 'refused') throw new NotExecuted('the card network refused the charge before acting');
      return { charged: args['id'] ?? null, big: 123456789012345678901234567890n };
    },
    'free.form': (args) => ({ echo: args }),
    'db.drop': (args, context) => ({ dropped: args['table'] ?? null, resource: context.action.resource }),
  };
}

export interface Harness {
  app: App;
  store: StateStore;
  control: Control;
  calls: string[];
  call(
    method: string,
    path: string,
    token: string | null,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; json: Record<string, unknown>; headers: Headers; text: string }>;
  /** How many records the store holds, of each kind. */
  counts(): Promise<{ events: number; receipts: number; effects: number; approvals: number }>;
}

export async function harness(options: Partial<AppOptions> = {}, policy = POLICY): Promise<Harness> {
  const store = await createSqlJsStore();
  const control = new Control({ policy: loadPolicy(policy), store, ids: sequentialIds(), logger: { warn: () => undefined } });
  const calls: string[] = [];
  const auth = staticTokens([
    { role: 'agent', token: AGENT, agent: 'billing-agent', user: 'u-42' },
    { role: 'operator', token: OPERATOR, operator: 'human:ops' },
  ]);
  const app = createApp({ control, executors: testExecutors(calls), auth, ...options });
  return {
    app,
    store,
    control,
    calls,
    async call(method, path, token, body, headers = {}) {
      const h: Record<string, string> = { ...headers };
      if (token !== null) h['authorization'] = `Bearer ${token}`;
      if (body !== undefined && h['content-type'] === undefined) h['content-type'] = 'application/json';
      const init: RequestInit = { method, headers: h };
      if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
      const response = await app.request(path, init);
      const text = await response.text();
      let json: Record<string, unknown>;
      try {
        json = JSON.parse(text) as Record<string, unknown>;
      } catch {
        throw new Error(`${method} ${path} answered ${response.status} with non-JSON: ${text}`);
      }
      return { status: response.status, json, headers: response.headers, text };
    },
    async counts() {
      return {
        events: (await store.events()).length,
        receipts: (await store.receipts()).length,
        effects: (await store.listEffects()).length,
        approvals: (await store.listApprovals()).length,
      };
    },
  };
}
