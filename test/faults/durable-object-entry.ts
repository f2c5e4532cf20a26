/**
 * The fault harness's client inside workerd: one SQLite-backed Durable Object is the store, and
 * `Control` with the operation's executor runs in it, as in a deployment where the object is the
 * store and the worker acts. The harness (Node, test/faults/durable-object.ts) sends operations,
 * answers and nemesis orders over HTTP; the object sends its history and the upstream's runs back
 * to the harness's collector, awaiting each, so that what it recorded is on the harness's side
 * before the remote runs. A kill is a restart of the object (`ctx.abort()`): at a random point of
 * an operation (in the executor before or after the remote, right after the reservation, while
 * the outcome's transaction is in flight), or on the harness's order.
 */
import type { Clock, StateStore } from '@ctrlrun/kernel';
import { openDurableObjectStore, type DurableObjectSqlStorage } from '@ctrlrun/store-do';
import { snapshot } from './checker.js';
import type { HistoryEntry, UpstreamRow } from './history.js';
import { answer, faultControl, runOp, type KillPoint, type OpContext, type OpSpec } from './workload.js';

interface Env {
  readonly FAULTS: { idFromName(name: string): unknown; get(id: unknown): { fetch(request: Request): Promise<Response> } };
  /** The harness's collector: `/history` takes JSON lines, `/ledger` one upstream run. */
  readonly COLLECTOR: string;
  readonly LEASE_MS: string;
}

interface ObjectState {
  readonly storage: DurableObjectSqlStorage;
  abort(reason?: string): never;
}

/** BigInts (none expected) as numbers, so a snapshot always serialises. */
const json = (value: unknown, status = 200): Response =>
  new Response(
    JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v)),
    { status, headers: { 'content-type': 'application/json' } },
  );

export class FaultStore {
  readonly #state: ObjectState;
  readonly #env: Env;
  readonly #lease: number;
  #offset = 0;
  #armed: KillPoint | null = null;
  #pending: HistoryEntry[] = [];
  #store: Promise<StateStore> | null = null;

  constructor(state: ObjectState, env: Env) {
    this.#state = state;
    this.#env = env;
    this.#lease = Number(env.LEASE_MS);
  }

  readonly #clock: Clock = () => new Date(Date.now() + this.#offset);

  #open(): Promise<StateStore> {
    this.#store ??= openDurableObjectStore(this.#state.storage, { clock: this.#clock }).then((s) => this.#withKillPoints(s));
    return this.#store;
  }

  /** The store, wrapped so the nemesis can strike right after a reservation and during the outcome's transaction. */
  #withKillPoints(store: StateStore): StateStore {
    const afterReserve = new Set(['reserveEffect', 'consumeApprovalAndReserve', 'reserveForExecution']);
    const outcome = new Set(['commitEffect', 'failEffect', 'markAmbiguous']);
    return new Proxy(store, {
      get: (target, prop, receiver) => {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (typeof v !== 'function') return v;
        const fn = (v as (...a: unknown[]) => unknown).bind(target);
        if (typeof prop === 'string' && afterReserve.has(prop)) {
          return async (...args: unknown[]) => {
            const r = await fn(...args);
            if (this.#armed === 'after-reserve') await this.#kill('after-reserve');
            return r;
          };
        }
        if (typeof prop === 'string' && outcome.has(prop)) {
          return (...args: unknown[]) => {
            // The write starts; the restart lands while its transaction is in flight.
            if (this.#armed === 'in-commit') setTimeout(() => void this.#kill('in-commit'), Math.floor(Math.random() * 3));
            return fn(...args);
          };
        }
        return fn;
      },
    });
  }

  async #post(path: string, body: string): Promise<void> {
    const r = await fetch(`${this.#env.COLLECTOR}${path}`, { method: 'POST', body });
    if (!r.ok) throw new Error(`collector ${path}: ${r.status}`);
  }

  /** Sends what was recorded to the harness; resolves once it holds it. */
  async #flush(): Promise<void> {
    if (this.#pending.length === 0) return;
    const lines = this.#pending.map((e) => JSON.stringify(e)).join('\n');
    this.#pending = [];
    await this.#post('/history', lines);
  }

  async #kill(point: KillPoint): Promise<never> {
    this.#pending.push({ t: 'fault', worker: 'durable-object', fault: `restart:${point}` });
    await this.#flush();
    return this.#state.abort(`kill:${point}`);
  }

  #context(control: OpContext['control']): OpContext {
    return {
      control,
      record: (e) => void this.#pending.push(e),
      flush: () => this.#flush(),
      upstream: { run: (row: UpstreamRow) => this.#post('/ledger', JSON.stringify(row)) },
      atExecutor: async (point) => {
        // The executor's start is on the harness's side before the remote runs.
        await this.#flush();
        if (this.#armed === point) await this.#kill(point);
      },
    };
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const store = await this.#open();
    const control = faultControl(store, { clock: this.#clock, lease: this.#lease });
    const body = request.method === 'POST' ? ((await request.json()) as Record<string, unknown>) : {};
    switch (url.pathname) {
      case '/op': {
        this.#armed = (body['kill'] as KillPoint | null) ?? null;
        const result = await runOp(this.#context(control), body['spec'] as OpSpec);
        await this.#flush();
        return json(result);
      }
      case '/jump':
        this.#offset += Number(body['ms']);
        return json({ offset: this.#offset });
      case '/restart':
        return this.#state.abort('restart:external');
      case '/status': {
        const approval = await store.getApproval(String(body['requestId']));
        return json({ status: approval?.status ?? 'missing' });
      }
      case '/pending':
        return json((await store.listApprovals('pending')).map((a) => a.request.requestId));
      case '/answer': {
        await answer(this.#context(control), String(body['op']), String(body['requestId']), body['grant'] === true);
        await this.#flush();
        return json({ ok: true });
      }
      case '/recover': {
        // A key a dead operation left reserved or executing is taken with a clock past its lease;
        // every ambiguous key is resolved by an operator against the upstream's own ledger.
        this.#armed = null;
        this.#offset = 10 * this.#lease + 60 * 60_000;
        const ctx = this.#context(control);
        // Op names unique across tries (the harness tries again when a restart cut this one).
        const pass = crypto.randomUUID().slice(0, 8);
        let n = 0;
        for (const effect of [...(await store.listEffects('reserved')), ...(await store.listEffects('executing'))]) {
          const ref = effect.effectKey.replace(/^pay:/, '');
          await runOp(ctx, { op: `recovery/${pass}.${n++}`, worker: 'recovery', kind: 'allow', ref, approvalId: null, behaviour: 'ok' });
        }
        // A receipt left pending by an operation cut between its outcome and the receipt written alone.
        await store.chainPendingReceipts?.();
        await this.#flush();
        return json({ recovered: n });
      }
      case '/resolve': {
        const ran = new Set(body['ran'] as string[]);
        for (const effect of await store.listEffects('ambiguous')) {
          await control.resolveEffect(effect.effectKey, ran.has(effect.effectKey) ? 'committed' : 'failed', {
            by: 'fault-operator',
            reason: 'checked against the upstream ledger',
          });
        }
        return json({ ok: true });
      }
      case '/snapshot':
        return json(await snapshot(store));
      default:
        return json({ error: `no route ${url.pathname}` }, 404);
    }
  }
}

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    return env.FAULTS.get(env.FAULTS.idFromName('store')).fetch(request);
  },
};
