/**
 * One client (or the operator) of a fault run, an OS process (its payload on stdin) or a worker
 * thread (its payload in workerData, started through thread-boot.mjs). A client runs `ops` operations of a random mix on `concurrency`
 * async loops against one store, appending its history to a JSON-lines file and telling the fake
 * remote (a shared SQLite ledger) what ran. The nemesis inside it kills it at a random point: in
 * the executor before or after the remote ran, just after the reservation, or while the outcome's
 * COMMIT is in flight; its clock jumps. The operator grants or denies every pending request.
 */
import { appendFileSync } from 'node:fs';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { Clock, StateStore } from '@ctrlrun/kernel';
import Database from 'better-sqlite3';
import type { HistoryEntry } from './history.js';
import { answer, faultControl, prng, runClient, runOp, type ExecutorPoint, type KillPoint, type OpContext } from './workload.js';

export interface WorkerPayload {
  readonly role: 'client' | 'operator';
  readonly url: string;
  /** The worker's name (unique per incarnation: ops are `<worker>/<n>`). */
  readonly worker: string;
  readonly seed: number;
  /** Operations to invoke (a client); the operator runs until told to stop (stdin/`stop` message). */
  readonly ops: number;
  readonly concurrency: number;
  /** The client answers pending requests itself, on one more loop (PGlite: one process owns the store). */
  readonly embeddedOperator: boolean;
  readonly historyFile: string;
  readonly ledgerFile: string;
  /** Refs are drawn from `ref-0 … ref-<refs-1>`, shared by every client, so keys collide. */
  readonly refs: number;
  /** Chance per operation that this client kills itself at a random point of it. */
  readonly killRate: number;
  /** Chance per operation that this client's clock jumps (up to ±`maxJumpMs`). */
  readonly jumpRate: number;
  readonly maxJumpMs: number;
  /** The lease this client's Control takes (short, so jumped clocks see others' leases expire). */
  readonly leaseMs: number;
  /** How long an approval-band call waits for the operator's answer before giving up. */
  readonly answerWaitMs: number;
}

function die(point: KillPoint, record: (e: HistoryEntry) => void, worker: string): never {
  // Written before the kill (appendFileSync survives it): the run's figures count faults by kind.
  record({ t: 'fault', worker, fault: `${isMainThread ? 'kill' : 'terminate'}:${point}` });
  if (isMainThread) process.kill(process.pid, 'SIGKILL');
  else {
    // A thread can't SIGKILL itself alone: it asks the harness to terminate it and blocks here,
    // running nothing more, until it is (terminate() interrupts Atomics.wait).
    parentPort!.postMessage({ kill: point });
    for (;;) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  }
  throw new Error('unreachable: SIGKILL');
}

/** Store calls in flight (method names), for the report of a client whose work stopped with nothing left to wait on. */
const inFlight = new Map<number, string>();
let callIds = 0;

/** `fn(...args)`, listed in {@link inFlight} until it settles. */
function tracked(name: string, fn: (...a: unknown[]) => Promise<unknown>, args: unknown[]): Promise<unknown> {
  const id = callIds++;
  inFlight.set(id, name);
  const settle = () => void inFlight.delete(id);
  const p = fn(...args);
  void p.then(settle, settle);
  return p;
}

/** The store, wrapped so the nemesis can strike right after a reservation and during the outcome's COMMIT. */
function withKillPoints(store: StateStore, armed: () => KillPoint | null, kill: (p: KillPoint) => never): StateStore {
  const afterReserve = new Set(['reserveEffect', 'consumeApprovalAndReserve', 'reserveForExecution']);
  const outcome = new Set(['commitEffect', 'failEffect', 'markAmbiguous']);
  return new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      const bound = (v as (...a: unknown[]) => Promise<unknown>).bind(target);
      if (typeof prop !== 'string') return bound;
      const fn = (...args: unknown[]) => {
        const r = bound(...args) as unknown;
        return r instanceof Promise ? tracked(prop, () => r, []) : r;
      };
      if (afterReserve.has(prop)) {
        return async (...args: unknown[]) => {
          const r = await fn(...args);
          if (armed() === 'after-reserve') kill('after-reserve');
          return r;
        };
      }
      if (outcome.has(prop)) {
        return (...args: unknown[]) => {
          // The write starts; the kill lands while its transaction (and COMMIT) is in flight.
          if (armed() === 'in-commit') setTimeout(() => kill('in-commit'), Math.floor(Math.random() * 3));
          return fn(...args);
        };
      }
      return fn;
    },
  });
}

/**
 * Opens the store, again after a transport failure (the network nemesis may lose the open's own
 * COMMIT or cut its connection): a restarted client would.
 */
async function open(url: string, clock?: Clock): Promise<StateStore> {
  const { openStore } = await import('@ctrlrun/store-node');
  for (let attempt = 1; ; attempt++) {
    try {
      return await openStore(url, clock ? { clock } : {});
    } catch (err) {
      if (attempt >= 20) throw err;
      await new Promise((res) => setTimeout(res, 50 * attempt));
    }
  }
}

/** `fn`, or `fallback` when a transport failure (a cut connection) refuses it: the caller tries again later. */
async function tolerant<T>(fn: () => Promise<T>, fallback: T): Promise<T> {
  try {
    return await fn();
  } catch {
    return fallback;
  }
}

async function client(p: WorkerPayload): Promise<void> {
  const rand = prng(p.seed);
  let offset = 0;
  const clock: Clock = () => new Date(Date.now() + offset);
  let armed: KillPoint | null = null;
  const record = (e: HistoryEntry) => appendFileSync(p.historyFile, `${JSON.stringify(e)}\n`);
  const kill = (point: KillPoint): never => die(point, record, p.worker);
  const store = withKillPoints(await open(p.url, clock), () => armed, kill);
  const ledger = new Database(p.ledgerFile, { timeout: 60_000 });
  ledger.pragma('journal_mode = WAL');
  const insert = ledger.prepare('INSERT INTO ledger (effect_key, action_id, op) VALUES (?, ?, ?)');
  const control = faultControl(store, { clock, lease: p.leaseMs });
  const ctx: OpContext = {
    control,
    upstream: { run: (row) => void insert.run(row.effectKey, row.actionId, row.op) },
    record,
    atExecutor: (point: ExecutorPoint) => {
      if (armed === point) kill(point);
    },
  };
  const clients = runClient({
    worker: p.worker,
    rand,
    ops: p.ops,
    concurrency: p.concurrency,
    refs: p.refs,
    killRate: p.killRate,
    jumpRate: p.jumpRate,
    maxJumpMs: p.maxJumpMs,
    answerWaitMs: p.answerWaitMs,
    record,
    jump: (ms) => void (offset += ms),
    arm: (point) => void (armed = point),
    run: (spec) => runOp(ctx, spec),
    status: (requestId) => tolerant(async () => (await store.getApproval(requestId))?.status ?? 'missing', 'pending'),
  });
  let clientsDone = false;
  const embedded = p.embeddedOperator ? operate(store, { ...p, worker: `${p.worker}-operator` }, () => clientsDone) : Promise.resolve();
  await clients;
  clientsDone = true;
  await embedded;
  ledger.close();
  await store.close();
}

async function operator(p: WorkerPayload, stopped: () => boolean): Promise<void> {
  const store = await open(p.url);
  await operate(store, p, stopped);
  await store.close();
}

/** Grants (three in four) or denies every pending request until `stopped`. */
async function operate(store: StateStore, p: WorkerPayload, stopped: () => boolean): Promise<void> {
  const rand = prng(p.seed + 1);
  const record = (e: HistoryEntry) => appendFileSync(p.historyFile, `${JSON.stringify(e)}\n`);
  const control = faultControl(store);
  let n = 0;
  while (!stopped()) {
    for (const pending of await tolerant(() => store.listApprovals('pending'), [])) {
      await answer({ control, record }, `${p.worker}/${n++}`, pending.request.requestId, rand() < 0.75);
    }
    await new Promise((res) => setTimeout(res, 15));
  }
}

async function main(): Promise<void> {
  let stop = false;
  let payload: WorkerPayload;
  if (isMainThread) {
    let text = '';
    for await (const chunk of process.stdin) text += String(chunk);
    payload = JSON.parse(text) as WorkerPayload;
    process.on('SIGTERM', () => void (stop = true));
  } else {
    // A worker thread (thread-boot.mjs): no stdin, no signals; the payload is its workerData.
    payload = (workerData as { payload: WorkerPayload }).payload;
    parentPort!.on('message', (m) => void (m === 'stop' && (stop = true)));
    parentPort!.unref();
  }
  let finished = false;
  // Nothing left to wait on, and not done: a promise that will never settle (its connection's
  // handles are gone). Say which store calls were in flight, and fail.
  process.on('beforeExit', () => {
    if (finished || !isMainThread) return;
    process.stderr.write(`${payload.worker}: the event loop emptied before the work ended; store calls in flight: ${JSON.stringify([...inFlight.values()])}\n`);
    process.exit(3);
  });
  if (payload.role === 'operator') await operator(payload, () => stop);
  else await client(payload);
  finished = true;
  if (isMainThread) process.stdout.write(`${JSON.stringify({ done: payload.worker })}\n`);
  else parentPort!.postMessage({ done: payload.worker });
}

await main();
