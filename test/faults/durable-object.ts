/**
 * The fault campaign on the Durable Object store, under miniflare (workerd): the store is one
 * SQLite-backed object persisted to disk, and the operations run inside it (durable-object-entry.ts).
 * Client loops here send the same random mix as the other stores' clients; an operator loop
 * grants or denies every pending request. The nemesis restarts the object: at random points of
 * an operation (inside the executor, right after the reservation, while the outcome's
 * transaction is in flight), on its own every few seconds, and now and then the whole workerd
 * process (a new Miniflare on the same persisted state). Every restart cuts every operation in
 * flight: those stay indeterminate, as a SIGKILLed client's do. Then a recovery pass, and the
 * checker reads the history, the upstream's ledger and the store.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { Miniflare } from 'miniflare';
import { bundleWorkerdModule, COMPATIBILITY_DATE } from '../worker/bundle.js';
import { answersWithoutEvent, checkHistory, tally, type StoreSnapshot } from './checker.js';
import type { HistoryEntry, UpstreamRow } from './history.js';
import type { CampaignResult } from './harness.js';
import { prng, runClient, type KillPoint, type OpResult } from './workload.js';

export interface DurableObjectCampaign {
  /** Where the object's state is persisted (it survives a restart of workerd). */
  readonly dir: string;
  /** Client loops, and operations per loop. */
  readonly clients: number;
  readonly opsPerClient: number;
  readonly refs: number;
  readonly killRate: number;
  readonly jumpRate: number;
  readonly maxJumpMs: number;
  /** Mean milliseconds between the nemesis's own restarts of the object (0: none). */
  readonly restartEveryMs: number;
  /** Mean milliseconds between restarts of the whole workerd process (0: none). */
  readonly workerdRestartEveryMs: number;
  readonly leaseMs: number;
  readonly answerWaitMs: number;
  readonly seed: number;
}

/** The harness's end of the object's history and of the upstream: both kept in order of arrival. */
async function startCollector(): Promise<{ url: string; history: HistoryEntry[]; ledger: UpstreamRow[]; server: Server }> {
  const history: HistoryEntry[] = [];
  const ledger: UpstreamRow[] = [];
  const read = async (req: IncomingMessage) => {
    let text = '';
    for await (const chunk of req) text += String(chunk);
    return text;
  };
  const server = createServer((req, res) => {
    read(req).then(
      (text) => {
        // Parsed whole before any of it is kept: a request is taken entirely or not at all.
        if (req.url === '/history') history.push(...text.split('\n').map((line) => JSON.parse(line) as HistoryEntry));
        else if (req.url === '/ledger') ledger.push(JSON.parse(text) as UpstreamRow);
        else {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(204).end();
      },
      // A restart cut the request off while it was being sent: nothing of it is kept, and the
      // object, which awaits the answer before going on, went no further.
      () => res.destroy(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, history, ledger, server };
}

/** Runs one campaign on a fresh Durable Object and checks its history. */
export async function runDurableObjectCampaign(o: DurableObjectCampaign): Promise<CampaignResult> {
  const started = Date.now();
  const collector = await startCollector();
  let runtimeErr = '';
  const bundle = await bundleWorkerdModule('test/faults/durable-object-entry.ts', 'faults-durable-object');
  const options = {
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [],
    modules: [{ type: 'ESModule' as const, path: bundle.scriptPath, contents: bundle.script }],
    bindings: { COLLECTOR: collector.url, LEASE_MS: String(o.leaseMs) },
    durableObjects: { FAULTS: { className: 'FaultStore', useSQLite: true } },
    durableObjectsPersist: o.dir,
    // workerd reports every restart as an uncaught `outputGateBroken`: expected here, so kept
    // (the last lines) for a failure's message rather than printed.
    handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
      stdout.resume();
      stderr.setEncoding('utf8').on('data', (c: string) => void (runtimeErr = (runtimeErr + c).slice(-4000)));
    },
  };
  let mf = new Miniflare(options);
  await mf.ready;
  /** Resolves while workerd is being restarted, so callers wait for the new one rather than spin. */
  let restarting: Promise<void> | null = null;
  const faults: Record<string, number> = {};
  const count = (fault: string) => void (faults[fault] = (faults[fault] ?? 0) + 1);

  const call = async (path: string, body?: unknown): Promise<unknown> => {
    while (restarting) await restarting;
    const r = await mf.dispatchFetch(`http://faults.invalid${path}`, body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) });
    const text = await r.text();
    if (!r.ok) throw new Error(`${path}: ${r.status} ${text.slice(0, 300)}; workerd said:\n${runtimeErr.slice(-1500)}`);
    return JSON.parse(text) as unknown;
  };
  /** `call`, or `fallback` when a restart cut it. */
  const tolerant = async <T>(fn: () => Promise<T>, fallback: T): Promise<T> => {
    try {
      return await fn();
    } catch {
      await new Promise((res) => setTimeout(res, 20));
      return fallback;
    }
  };

  let running = true;
  const timers: Promise<void>[] = [];
  const every = (meanMs: number, fn: () => Promise<void>) => {
    if (meanMs <= 0) return;
    timers.push(
      (async () => {
        while (running) {
          await new Promise((res) => setTimeout(res, Math.random() * 2 * meanMs));
          if (running) await fn();
        }
      })(),
    );
  };
  every(o.restartEveryMs, async () => {
    count('restart:external');
    await tolerant(() => call('/restart', {}), null);
  });
  every(o.workerdRestartEveryMs, async () => {
    count('restart:workerd');
    let done!: () => void;
    restarting = new Promise<void>((resolve) => (done = resolve));
    try {
      await mf.dispose();
      mf = new Miniflare(options);
      await mf.ready;
    } finally {
      restarting = null;
      done();
    }
  });

  // The operator: grants three in four pending requests, denies the rest.
  const operatorRand = prng(o.seed + 1);
  let answers = 0;
  const operator = (async () => {
    while (running) {
      for (const requestId of await tolerant(async () => (await call('/pending')) as string[], [])) {
        await tolerant(() => call('/answer', { op: `operator/${answers++}`, requestId, grant: operatorRand() < 0.75 }), null);
      }
      await new Promise((res) => setTimeout(res, 15));
    }
  })();

  try {
    await Promise.all(
      Array.from({ length: o.clients }, (_, i) => {
        const worker = `c${i}`;
        let armed: KillPoint | null = null;
        return runClient({
          worker,
          rand: prng(o.seed + 10 + i),
          ops: o.opsPerClient,
          concurrency: 1,
          refs: o.refs,
          killRate: o.killRate,
          jumpRate: o.jumpRate,
          maxJumpMs: o.maxJumpMs,
          answerWaitMs: o.answerWaitMs,
          record: (e) => void collector.history.push(e),
          jump: (ms) => tolerant(async () => void (await call('/jump', { ms })), undefined),
          arm: (point) => void (armed = point),
          // A restart cut it: no completion, the operation stays indeterminate (a killed client's).
          run: (spec) => tolerant(async () => (await call('/op', { spec, kill: armed })) as OpResult, { outcome: 'error', requestId: null }),
          status: (requestId) => tolerant(async () => ((await call('/status', { requestId })) as { status: string }).status, 'pending'),
        });
      }),
    );
  } finally {
    running = false;
    await operator;
    await Promise.all(timers);
  }

  // The nemesis's last restart may still be tearing the object down: each step is tried again
  // (each is safe to repeat: it acts only on the keys still left to it).
  const settled = async (path: string, body?: unknown): Promise<unknown> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call(path, body);
      } catch (err) {
        if (attempt >= 10) throw err;
        await new Promise((res) => setTimeout(res, 200));
      }
    }
  };
  await settled('/recover', {});
  await settled('/resolve', { ran: [...new Set(collector.ledger.map((r) => r.effectKey))] });
  const snap = (await settled('/snapshot')) as StoreSnapshot;
  await mf.dispose();
  await new Promise<void>((resolve) => collector.server.close(() => resolve()));

  const history = collector.history;
  const anomalies = checkHistory(history, collector.ledger, snap);
  for (const e of history) if (e.t === 'fault') count(e.fault);
  const outcomes = tally(history.filter((e) => !('op' in e) || !e.op.startsWith('recovery/')));
  return {
    name: 'durable-object',
    operations: outcomes['invoked'] ?? 0,
    outcomes,
    faults,
    answersWithoutEvent: answersWithoutEvent(snap),
    incarnations: (faults['restart:external'] ?? 0) + (faults['restart:workerd'] ?? 0),
    anomalies,
    upstreamRuns: collector.ledger.length,
    elapsedMs: Date.now() - started,
  };
}

/** The Durable Object campaign with about `operations` operations in total. */
export function durableObjectCampaign(dir: string, operations: number, seed: number): DurableObjectCampaign {
  const clients = 4;
  return {
    dir,
    clients,
    opsPerClient: Math.max(1, Math.ceil(operations / clients)),
    // Keys collide: about three operations per ref.
    refs: Math.max(10, Math.ceil(operations / 3)),
    killRate: 0.03,
    jumpRate: 0.02,
    maxJumpMs: 90_000,
    // The object restarted about every 3 s, the whole workerd process about every 8 s.
    restartEveryMs: 3000,
    workerdRestartEveryMs: 8000,
    leaseMs: 60_000,
    answerWaitMs: 3000,
    seed,
  };
}
