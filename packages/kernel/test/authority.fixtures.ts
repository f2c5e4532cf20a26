// Shared fixtures of the authority, delegation, identity and observe tests: a real sql.js store,
// a clock that moves only when told, and a Control over one v3 document.
import {
  Control,
  callbackSink,
  createAction,
  loadPolicy,
  sequentialIds,
  type Action,
  type ControlOptions,
  type EventRecord,
  type StoredReceipt,
} from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

export const T0 = new Date('2026-09-03T10:12:01.000Z');
export const V3 = 'schema: ctrlrun.policy/v3\n';

export const ACTIONS = `
actions:
  stripe.refund:
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - when: { amount_lte: 5000000 }
        decision: approve
      - decision: deny
  customer.read:
    decision: allow
`;

export const GRANT = `
authority:
  grants:
    - id: head-of-support
      subject: { agent: "support-agent", user: "alice@example.com" }
      actions: ["stripe.refund"]
      resources: ["payment:EU-*"]
      constraints: { amount_lte: 200000 }
      environments: ["production"]
`;

export const AUTHORITY_EVENTS = ['AUTHORITY_RESOLVED', 'AUTHORITY_DENIED', 'DELEGATION_CREATED', 'DELEGATION_REVOKED', 'DELEGATION_REJECTED'];

/** {@link ACTIONS} with the refund's resource derived, as a grant scoped by `resources:` requires. */
export const DERIVED_ACTIONS = ACTIONS.replace('  stripe.refund:\n', '  stripe.refund:\n    resource: "payment:{payment_id}"\n');

/** A v3 document; a section scoping by `resources:` gets the actions whose resource is derived. */
export function doc(authority = '', actions = authority.includes('resources:') ? DERIVED_ACTIONS : ACTIONS): string {
  return V3 + authority + actions;
}

export function action(overrides: Partial<Parameters<typeof createAction>[0]> = {}): Action {
  return createAction({
    name: 'stripe.refund',
    arguments: { amount: 1000, payment_id: 'EU-42' },
    principal: { agent: 'support-agent', user: 'alice@example.com' },
    resource: 'payment:EU-42',
    environment: 'production',
    ...overrides,
  });
}

/** A Control over `yaml` on a fresh in-memory store, recording every event and receipt. */
export async function rig(yaml: string, extra: Partial<ControlOptions> = {}) {
  let now = T0.getTime();
  const clock = () => new Date(now);
  const store = await createSqlJsStore({ clock });
  const events: EventRecord[] = [];
  const receipts: StoredReceipt[] = [];
  const warnings: string[] = [];
  const control = new Control({
    policy: loadPolicy(yaml),
    store,
    clock,
    ids: sequentialIds(),
    sinks: [callbackSink({ onEvent: (e) => void events.push(e), onReceipt: (r) => void receipts.push(r) })],
    logger: { warn: (m: string) => void warnings.push(m) },
    environment: 'production',
    ...extra,
  });
  let calls = 0;
  return {
    control,
    store,
    events,
    receipts,
    warnings,
    clock,
    set(d: Date | string) {
      now = new Date(d).getTime();
    },
    advance(ms: number) {
      now += ms;
    },
    /** An executor that counts its runs. */
    executor: () => {
      calls++;
      return 'ok';
    },
    get calls() {
      return calls;
    },
    types: (actionId?: string) => events.filter((e) => actionId === undefined || e.actionId === actionId).map((e) => e.type),
    data: (type: string) => events.filter((e) => e.type === type).map((e) => e.data),
    lastReceipt: () => receipts.at(-1)!.document,
  };
}

/** Awaits a rejection and returns it (fails the test if `p` resolves). */
export async function rejection(p: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  const out = await p.then(
    (v) => ({ ok: true as const, v }),
    (e: unknown) => ({ ok: false as const, e }),
  );
  if (out.ok) throw new Error(`expected a rejection, got ${String(out.v)}`);
  return out.e as Error & Record<string, unknown>;
}
