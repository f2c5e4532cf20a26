/**
 * The fault harness: many clients (OS processes) and an
 * operator run against one store while a nemesis kills them — each client kills itself at random
 * points (inside the executor, after the reservation, during the outcome's COMMIT) and the parent
 * SIGKILLs a random client now and then — and clocks jump. A killed client is
 * replaced by a new incarnation with the operations it had left. Then a recovery pass takes every
 * key a dead client left held (with a clock past its lease) and an operator resolves every
 * ambiguous key against the upstream's ledger (truthfully), and the checker reads the whole history.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { StateStore } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import Database from 'better-sqlite3';
import { startCommitProxy, type CommitProxy } from '../lost-commit/commit-proxy.js';
import { fillDisk } from './disk.js';
import { stallTimer } from '../support/load.js';
import { answersWithoutEvent, checkHistory, snapshot, tally, type Anomaly } from './checker.js';
import { parseLines, type HistoryEntry, type UpstreamRow } from './history.js';
import type { WorkerPayload } from './worker.js';
import { faultControl, runOp } from './workload.js';

const WORKER = join(import.meta.dirname, 'worker.ts');
const THREAD_BOOT = join(import.meta.dirname, 'thread-boot.mjs');
const NODE_FLAGS = ['--conditions=@ctrlrun/source', '--import', 'tsx'];

export interface CampaignOptions {
  /** A label for the figures (`sqlite-processes`, `postgres`, …). */
  readonly name: string;
  readonly url: string;
  /** A working directory (history files, the upstream's ledger). */
  readonly dir: string;
  /**
   * `separate`: the operator is a process of its own; `embedded`: it runs inside each client
   * (PGlite: one process owns the directory at a time).
   */
  readonly operator: 'separate' | 'embedded';
  readonly clients: number;
  /**
   * How many of the clients run as worker threads of this process (the rest as OS processes):
   * a thread's kill is `terminate()`, at a random point or where it asks for it.
   */
  readonly threads?: number;
  /** Async loops per client (PGlite: one process, several loops). */
  readonly concurrency: number;
  /** Operations per client, in total over its incarnations. */
  readonly opsPerClient: number;
  readonly refs: number;
  readonly killRate: number;
  /** Mean milliseconds between the parent's external kills (0: none). */
  readonly externalKillEveryMs: number;
  readonly jumpRate: number;
  readonly maxJumpMs: number;
  /**
   * PostgreSQL only: the clients and the operator reach the server through a TCP proxy
   * (test/lost-commit/commit-proxy.ts) that loses a COMMIT about this often (mean milliseconds
   * between two; 0: no proxy) — dropped unforwarded, forwarded with its reply withheld, or (with
   * `lateCommits`) held and forwarded 50–200 ms after the client was cut — each
   * time cutting that client, and sometimes refusing the re-read's connection too.
   */
  readonly lostCommitEveryMs?: number;
  /**
   * With the proxy: one lost COMMIT in five lands 50–200 ms late (`lost-commit:landed-late`).
   * On in `npm run soak`, off in the CI slice unless `FAULTS_LATE_COMMITS=1` (the proxy tests cover
   * late COMMITs deterministically; see docs/reliability.md for the receipt-lost they found, fixed).
   */
  readonly lateCommits?: boolean;
  /** With the proxy: every open connection is cut about this often (mean milliseconds; 0: never). */
  readonly cutEveryMs?: number;
  /**
   * SQLite: the store's file is on a small file system of its own (`dir`, see disk.ts) that the
   * nemesis fills to ENOSPC about every `everyMs` (mean), holds full for `forMs`, then frees.
   */
  readonly fullDisk?: { readonly dir: string; readonly everyMs: number; readonly forMs: number };
  /**
   * PostgreSQL on several "hosts" (test/support/netns.ts): client i runs on host i mod n — started
   * with that host's command prefix (its network namespace), reaching the server by that host's
   * URL — while the operator stays beside the server. The nemesis partitions one host, chosen at
   * random, about every `everyMs` (mean) for `forMs`; the others run on.
   */
  readonly hosts?: { readonly list: readonly ClientHost[]; readonly everyMs: number; readonly forMs: number };
  readonly leaseMs: number;
  readonly answerWaitMs: number;
  /** A client that prints nothing and writes no history for this long is stalled: the run fails. */
  readonly stallMs: number;
  readonly seed: number;
  /** Progress, for long runs. */
  readonly log?: (line: string) => void;
}

/** Where a client runs: a command prefix that enters its host, the URL it uses there, and its partition. */
export interface ClientHost {
  readonly name: string;
  readonly prefix: readonly string[];
  readonly url: string;
  cut(ms: number): Promise<void>;
}

export interface CampaignResult {
  readonly name: string;
  readonly operations: number;
  readonly outcomes: Record<string, number>;
  readonly faults: Record<string, number>;
  /** Approvals answered whose answer event was never written (see {@link answersWithoutEvent}). */
  readonly answersWithoutEvent: number;
  readonly incarnations: number;
  readonly anomalies: Anomaly[];
  readonly upstreamRuns: number;
  readonly elapsedMs: number;
}

interface Live {
  readonly payload: WorkerPayload;
  readonly thread: boolean;
  kill(): void;
  readonly ended: Promise<'done' | 'killed'>;
}

/** A client in a worker thread: killed by `terminate()` (by the nemesis, or at its own request at a kill point). */
function launchThread(payload: WorkerPayload): Live {
  const worker = new Worker(THREAD_BOOT, {
    workerData: { entry: pathToFileURL(WORKER).href, payload },
    execArgv: ['--conditions=@ctrlrun/source'],
    stdout: true,
    stderr: true,
  });
  let err = '';
  worker.stdout.resume();
  worker.stderr.setEncoding('utf8').on('data', (c: string) => void (err += c));
  let killed = false;
  let done = false;
  const kill = () => {
    killed = true;
    void worker.terminate();
  };
  const ended = new Promise<'done' | 'killed'>((resolve, reject) => {
    let failure: unknown = null;
    worker.on('message', (m: { kill?: string; done?: string }) => {
      if (m.kill) kill();
      if (m.done) done = true;
    });
    worker.on('error', (e) => void (failure = e));
    worker.on('exit', (code) => {
      if (killed) resolve('killed');
      else if (done && code === 0) resolve('done');
      else reject(new Error(`client thread ${payload.worker} exited ${code}: ${String(failure)}; stderr:\n${err.slice(-4000)}`));
    });
  });
  return { payload, thread: true, kill, ended };
}

function launch(payload: WorkerPayload, prefix: readonly string[] = []): Live {
  const command = [...prefix, process.execPath, ...NODE_FLAGS, WORKER];
  const child = spawn(command[0]!, command.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => void (out += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => void (err += c));
  const ended = new Promise<'done' | 'killed'>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0 && out.includes('"done"')) resolve('done');
      else if (signal === 'SIGKILL' || signal === 'SIGTERM') resolve('killed');
      else reject(new Error(`client ${payload.worker} exited ${code ?? signal}; stderr:\n${err.slice(-4000)}`));
    });
  });
  child.stdin.end(JSON.stringify(payload));
  return { payload, thread: false, kill: () => void child.kill('SIGKILL'), ended };
}

function readHistory(dir: string): HistoryEntry[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl'))
    .flatMap((f) => parseLines<HistoryEntry>(readFileSync(join(dir, f), 'utf8')));
}

function readLedger(file: string): UpstreamRow[] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT effect_key AS effectKey, action_id AS actionId, op FROM ledger ORDER BY id').all() as UpstreamRow[];
  } finally {
    db.close();
  }
}

/** Runs one campaign and checks its history. */
export async function runCampaign(o: CampaignOptions): Promise<CampaignResult> {
  const started = Date.now();
  const ledgerFile = join(o.dir, 'upstream-ledger.db');
  const ledger = new Database(ledgerFile);
  ledger.pragma('journal_mode = WAL');
  ledger.exec('CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, effect_key TEXT NOT NULL, action_id TEXT NOT NULL, op TEXT NOT NULL)');
  ledger.close();
  // Migrate once before the clients race to open it.
  await (await openStore(o.url)).close();

  // The network nemesis (PostgreSQL): clients and operator go through the proxy; the migration,
  // the recovery pass and the snapshot talk to the server directly.
  const faultCounts: Record<string, number> = {};
  const count = (fault: string) => void (faultCounts[fault] = (faultCounts[fault] ?? 0) + 1);
  let proxy: CommitProxy | null = null;
  const timers = new Set<ReturnType<typeof setTimeout>>();
  let nemesisOn = false;
  if ((o.lostCommitEveryMs ?? 0) > 0 || (o.cutEveryMs ?? 0) > 0) {
    const target = new URL(o.url);
    proxy = await startCommitProxy({ host: target.hostname, port: Number(target.port || 5432) });
    nemesisOn = true;
  }
  const clientUrl = proxy ? proxy.route(o.url) : o.url;
  const filler = o.fullDisk ? join(o.fullDisk.dir, 'filler') : null;
  if (o.fullDisk || o.hosts) nemesisOn = true;
  /**
   * Runs `fn` about every `meanMs` while the timed nemeses are on: uniformly (1 − spread)× to
   * (1 + spread)× the mean apart (spread 1: anywhere from 0 to twice the mean).
   */
  const every = (meanMs: number, fn: () => Promise<void> | void, spread = 1): void => {
    const next = () => {
      if (!nemesisOn) return;
      const timer = setTimeout(
        () => {
          timers.delete(timer);
          void Promise.resolve(fn()).then(next, (err: unknown) => {
            o.log?.(`[${o.name}] network nemesis: ${String(err)}`);
            next();
          });
        },
        meanMs * (1 - spread + Math.random() * 2 * spread),
      );
      timers.add(timer);
    };
    next();
  };
  if (proxy && (o.lostCommitEveryMs ?? 0) > 0) {
    const p = proxy;
    every(o.lostCommitEveryMs!, async () => {
      const r = Math.random();
      const mode = !o.lateCommits ? (r < 0.5 ? 'drop' : 'land') : r < 0.4 ? 'drop' : r < 0.8 ? 'land' : 'late';
      const refuseAfter = Math.random() < 0.2 ? 1 : 0;
      // `late`: the COMMIT reaches the server 50–200 ms after the client was cut, mostly after its re-read.
      const landAfter = new Promise<void>((res) => setTimeout(res, 50 + Math.random() * 150));
      // Resolves once a COMMIT was lost this way (the next transaction any client commits).
      await p.arm({ mode, refuseAfter, ...(mode === 'late' ? { landAfter } : {}) });
      count(`lost-commit:${mode === 'drop' ? 'never-received' : mode === 'land' ? 'landed' : 'landed-late'}`);
      if (refuseAfter) count('refused-reconnect');
    });
  }
  if (proxy && (o.cutEveryMs ?? 0) > 0) {
    const p = proxy;
    every(o.cutEveryMs!, () => {
      if (p.cutAll() > 0) count('cut-connections');
    });
  }

  if (o.fullDisk && filler) {
    const { everyMs, forMs } = o.fullDisk;
    const full = async (ms: number) => {
      fillDisk(filler);
      count('disk-full');
      await new Promise((res) => setTimeout(res, ms));
      rmSync(filler, { force: true });
    };
    // The first fill comes as soon as the clients begin, and holds until a write was refused (3 s at
    // most): the store's WAL is new then (the migration's connection closed it), so every commit
    // needs new space. Later the WAL reuses its pages, and a full disk may refuse nothing (one
    // loaded CI run filled it four times and no write failed).
    void (async () => {
      const histories = () => readdirSync(o.dir).filter((f) => f.endsWith('.jsonl') && f !== 'recovery.jsonl');
      const began = () => histories().some((f) => statSync(join(o.dir, f)).size > 0);
      const refused = () => histories().some((f) => readFileSync(join(o.dir, f), 'utf8').includes('"outcome":"error"'));
      const wait = async (until: () => boolean, ms: number) => {
        const deadline = Date.now() + ms;
        while (nemesisOn && !until() && Date.now() < deadline) await new Promise((res) => setTimeout(res, 25));
      };
      await wait(began, 120_000);
      if (!nemesisOn) return;
      fillDisk(filler);
      count('disk-full');
      await wait(refused, Math.max(forMs, 3000));
      rmSync(filler, { force: true });
      every(everyMs, () => full(forMs));
    })();
  }

  if (o.hosts) {
    const { list, everyMs, forMs } = o.hosts;
    // In turn, from a random first one: every host is cut off once the run has seen as many
    // partitions as there are hosts (a random pick each time left one host uncut in a short run).
    let turn = Math.floor(Math.random() * list.length);
    every(
      everyMs,
      async () => {
        const host = list[turn++ % list.length]!;
        await host.cut(forMs);
        count(`partition:${host.name}`);
      },
      0.5,
    );
  }

  const base = (worker: string, role: WorkerPayload['role'], ops: number, seed: number, url = clientUrl): WorkerPayload => ({
    role,
    url,
    worker,
    seed,
    ops,
    concurrency: role === 'operator' ? 1 : o.concurrency,
    embeddedOperator: o.operator === 'embedded',
    historyFile: join(o.dir, `${worker}.jsonl`),
    ledgerFile,
    refs: o.refs,
    killRate: o.killRate,
    jumpRate: o.jumpRate,
    maxJumpMs: o.maxJumpMs,
    leaseMs: o.leaseMs,
    answerWaitMs: o.answerWaitMs,
  });
  const invokedBy = (file: string) => (existsSync(file) ? parseLines<HistoryEntry>(readFileSync(file, 'utf8')).filter((e) => e.t === 'invoke').length : 0);

  // The operator runs as a process of its own for the whole run (unless each client embeds one).
  const operator = o.operator === 'separate' ? spawn(process.execPath, [...NODE_FLAGS, WORKER], { stdio: ['pipe', 'ignore', 'inherit'] }) : null;
  operator?.stdin!.end(JSON.stringify(base('operator', 'operator', 0, o.seed)));
  const operatorEnded = new Promise<void>((resolve) => (operator ? operator.on('exit', () => resolve()) : resolve()));

  const live = new Set<Live>();
  let incarnations = 0;
  let externalKills = 0;
  let seed = o.seed;
  let stalled = false;
  const watchdog = stallTimer(o.stallMs, () => {
    stalled = true;
    for (const l of live) l.kill();
  });
  let lastSize = -1;
  const progress = setInterval(() => {
    const size = readdirSync(o.dir)
      .filter((f) => f.endsWith('.jsonl'))
      .reduce((n, f) => n + readFileSync(join(o.dir, f)).length, 0);
    if (size !== lastSize) watchdog.touch();
    lastSize = size;
  }, 1000);
  const nemesis =
    o.externalKillEveryMs > 0
      ? setInterval(
          () => {
            const list = [...live];
            const victim = list[Math.floor(Math.random() * list.length)];
            if (!victim) return;
            if (victim.thread) count('terminate:external');
            else externalKills++;
            victim.kill();
          },
          Math.max(50, o.externalKillEveryMs),
        )
      : null;

  const runClient = async (name: string, ops: number, thread: boolean, host: ClientHost | null): Promise<void> => {
    let gen = 0;
    let left = ops;
    while (left > 0) {
      const worker = `${name}.${gen++}`;
      const payload = base(worker, 'client', left, ++seed, host?.url);
      const l = thread ? launchThread(payload) : launch(payload, host?.prefix);
      incarnations++;
      live.add(l);
      let end: 'done' | 'killed';
      try {
        end = await l.ended;
      } finally {
        live.delete(l);
      }
      if (end === 'done') return;
      if (stalled) throw new Error(`[${o.name}] no client wrote any history for ${Math.round(o.stallMs / 1000)} s: stalled (${worker} was running)`);
      left -= invokedBy(payload.historyFile);
      // An incarnation killed before its first operation still counts one, so the run ends.
      if (invokedBy(payload.historyFile) === 0) left--;
      o.log?.(`[${o.name}] ${thread ? 'thread' : 'process'} ${worker} killed, ${left} operations left for ${name}`);
    }
  };
  try {
    // The last `threads` clients are threads (t<i>), the rest processes (c<i>).
    const threads = o.threads ?? 0;
    await Promise.all(
      Array.from({ length: o.clients }, (_, i) => {
        const thread = i >= o.clients - threads;
        const host = o.hosts && !thread ? o.hosts.list[i % o.hosts.list.length]! : null;
        return runClient(`${thread ? 't' : 'c'}${i}${host ? `@${host.name}` : ''}`, o.opsPerClient, thread, host);
      }),
    );
  } finally {
    if (nemesis) clearInterval(nemesis);
    clearInterval(progress);
    watchdog.stop();
    operator?.kill('SIGTERM');
    await operatorEnded;
    nemesisOn = false;
    for (const t of timers) clearTimeout(t);
    await proxy?.close();
    // The disk is freed before the recovery pass (an operator made room).
    if (filler) rmSync(filler, { force: true });
  }

  // Recovery: a key a dead client left reserved or executing is taken with a clock past its
  // lease; every ambiguous key is resolved by an operator against the upstream's own ledger.
  const later = () => new Date(Date.now() + 10 * o.leaseMs + 60 * 60_000);
  const store: StateStore = await openStore(o.url, { clock: later });
  const recoveryFile = join(o.dir, 'recovery.jsonl');
  const upstreamDb = new Database(ledgerFile);
  const insert = upstreamDb.prepare('INSERT INTO ledger (effect_key, action_id, op) VALUES (?, ?, ?)');
  const ctx = {
    control: faultControl(store, { clock: later, lease: o.leaseMs }),
    upstream: { run: (row: UpstreamRow) => void insert.run(row.effectKey, row.actionId, row.op) },
    record: (e: HistoryEntry) => appendFileSync(recoveryFile, `${JSON.stringify(e)}\n`),
  };
  let n = 0;
  for (const effect of [...(await store.listEffects('reserved')), ...(await store.listEffects('executing'))]) {
    await runOp(ctx, {
      op: `recovery/${n++}`,
      worker: 'recovery',
      kind: 'allow',
      ref: effect.effectKey.replace(/^pay:/, ''),
      approvalId: null,
      behaviour: 'ok',
    });
  }
  const ran = new Set(readLedger(ledgerFile).map((r) => r.effectKey));
  for (const effect of await store.listEffects('ambiguous')) {
    await ctx.control.resolveEffect(effect.effectKey, ran.has(effect.effectKey) ? 'committed' : 'failed', {
      by: 'fault-operator',
      reason: 'checked against the upstream ledger',
    });
  }
  // A receipt left pending by a client killed between its outcome and the receipt written alone.
  await store.chainPendingReceipts?.();
  upstreamDb.close();
  const snap = await snapshot(store);
  await store.close();

  const history = readHistory(o.dir);
  const upstream = readLedger(ledgerFile);
  const anomalies = checkHistory(history, upstream, snap);
  const faults: Record<string, number> = { 'kill:external': externalKills, ...faultCounts };
  for (const e of history) if (e.t === 'fault') faults[e.fault] = (faults[e.fault] ?? 0) + 1;
  const outcomes = tally(history.filter((e) => !('op' in e) || !e.op.startsWith('recovery/')));
  return {
    name: o.name,
    operations: outcomes['invoked'] ?? 0,
    outcomes,
    faults,
    answersWithoutEvent: answersWithoutEvent(snap),
    incarnations,
    anomalies,
    upstreamRuns: upstream.length,
    elapsedMs: Date.now() - started,
  };
}
