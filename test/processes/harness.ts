/**
 * Real OS processes for the race and crash tests: spawn `worker.ts` under Node with the source
 * condition and tsx, hand each its JSON payload on stdin, collect its JSON lines from stdout.
 * Every stdin is written and closed before any worker is awaited (spec 03 §7.2), so no worker
 * waits on the parent while the parent waits on another.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadFactor, scaled, stallTimer } from '../support/load.js';

/** The worker script every test spawns. */
export const WORKER = join(import.meta.dirname, 'worker.ts');
/** Node flags that let a worker import the workspace packages' TypeScript sources. */
export const NODE_FLAGS = ['--conditions=@ctrlrun/source', '--import', 'tsx'] as const;
/**
 * The longest a worker may go without printing a line before the parent kills it: spec 03 §7.2's
 * 90 s on a free machine, stretched by the measured load. A watchdog on progress, not a
 * wall-clock limit on the whole run: a worker racing 500 keys prints a progress line every
 * {@link PROGRESS_EVERY} keys, so on a loaded machine it is slow but never killed, while a worker
 * that stalls is still killed, and its last line named.
 */
export const WORKER_STALL_MS = scaled(90_000);
/** A worker running many keys prints `{progress: n}` after every this many. */
export const PROGRESS_EVERY = 25;
/** The barrier's deadline, in seconds: generous, and stretched on a loaded machine (workers start slowly there). */
export const RENDEZVOUS_TIMEOUT_S = Math.ceil(30 * loadFactor());

/** What every payload carries: how to reach the store. */
export interface BasePayload {
  /** The store's address, opened with `openStore` from `opener`. */
  url: string;
  /** Module exporting `openStore(url)`; default `@ctrlrun/store-node`. */
  opener?: string;
}

/** Race on one key at the store level (the conformance case e1-cross-process). */
export interface ReservePayload extends BasePayload {
  kind: 'reserve';
  effect_key: string;
  marker_dir: string;
  rendezvous_dir: string;
  contenders: number;
  rendezvous_timeout: number;
}

/** Race on many shared keys through `Control.execute`; each execution exclusive-creates `marker/<key>`. */
export interface ExecuteManyPayload extends BasePayload {
  kind: 'execute-many';
  keys: string[];
  marker_dir: string;
  rendezvous_dir: string;
  contenders: number;
  rendezvous_timeout: number;
  /** Print `{progress: n}` after every this many keys ({@link PROGRESS_EVERY}). */
  progress_every: number;
}

/** Race to take one held continuation at the store level (the conformance case taken-once-cross-process). */
export interface TakePayload extends BasePayload {
  kind: 'take';
  continuation: string;
  rendezvous_dir: string;
  contenders: number;
  rendezvous_timeout: number;
}

/** Start one execution through `Control.execute`, report it, and hang inside the executor until killed. */
export interface HangPayload extends BasePayload {
  kind: 'hang';
  reference: string;
  lease_ms: number;
}

/**
 * Race refunds against one budget through `Control.execute` (`policy`: a v7 document whose grant
 * budgets action `budget.refund`); a refund with `fail` has its executor raise `NotExecuted`.
 */
export interface RefundBudgetPayload extends BasePayload {
  kind: 'refund-budget';
  policy: string;
  refunds: { payment_id: string; amount: number; fail: boolean }[];
  rendezvous_dir: string;
  contenders: number;
  rendezvous_timeout: number;
  progress_every: number;
}

/** One verified yes on an approval request (`grantApproval`); prints `{granted, reason, error, message}`. */
export interface GrantPayload extends BasePayload {
  kind: 'grant';
  approval_id: string;
  approver: string;
  verified: { agent: string; user: string | null; issuer: string | null; entitled: string[] };
}

export type Payload = ReservePayload | TakePayload | ExecuteManyPayload | HangPayload | RefundBudgetPayload | GrantPayload;

/** A finished worker: exit, its parsed stdout lines, and its stderr for diagnostics. */
export interface Finished {
  pid: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  lines: Record<string, unknown>[];
  stderr: string;
  /** Set when the parent killed it for printing nothing for {@link WORKER_STALL_MS}: what it last said. */
  stalled: string | null;
}

/** A running worker: its process, and promises of its next stdout line and its end. */
export interface Running {
  child: ChildProcess;
  /** Resolves with the first JSON line for which `match` holds. */
  line(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  finished: Promise<Finished>;
}

/**
 * Spawns one worker and writes its payload (stdin ends at once). The worker is killed once it
 * prints nothing for `stallMs` ({@link WORKER_STALL_MS} unless given).
 */
export function start(payload: Payload, options: { stallMs?: number } = {}): Running {
  const stallMs = options.stallMs ?? WORKER_STALL_MS;
  const child = spawn(process.execPath, [...NODE_FLAGS, WORKER], { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: Record<string, unknown>[] = [];
  const waiters: { match: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }[] = [];
  let out = '';
  let stderr = '';
  let stalled: string | null = null;
  const watchdog = stallTimer(stallMs, () => {
    stalled = `no output for ${stallMs / 1000} s after ${lines.length} line(s); the last: ${JSON.stringify(lines.at(-1) ?? null)}`;
    child.kill('SIGKILL');
  });
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    watchdog.touch();
    out += chunk;
    let nl: number;
    while ((nl = out.indexOf('\n')) >= 0) {
      const text = out.slice(0, nl).trim();
      out = out.slice(nl + 1);
      if (!text.startsWith('{')) continue;
      const line = JSON.parse(text) as Record<string, unknown>;
      lines.push(line);
      for (const w of waiters.filter((w) => w.match(line))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => void (stderr += chunk));
  const finished = new Promise<Finished>((resolve, reject) => {
    child.on('error', (err) => {
      watchdog.stop();
      reject(err);
    });
    child.on('close', (code, signal) => {
      watchdog.stop();
      resolve({ pid: child.pid!, code, signal, lines, stderr, stalled });
    });
  });
  child.stdin!.end(JSON.stringify(payload));
  return {
    child,
    finished,
    line(match) {
      const seen = lines.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ match, resolve });
        void finished.then((f) =>
          reject(
            new Error(
              `worker ${f.pid} ended (${f.code ?? f.signal}${f.stalled ? `, killed: ${f.stalled}` : ''}) without the expected line; stderr:\n${f.stderr}`,
            ),
          ),
        );
      });
    },
  };
}

/** Spawns every worker (all stdins written and closed first), then awaits them all. */
export async function runAll(payloads: Payload[]): Promise<Finished[]> {
  const running = payloads.map((p) => start(p));
  return Promise.all(running.map((r) => r.finished));
}

/** The one JSON line a finished worker must have printed last (progress lines aside), or an error naming its stderr. */
export function lastLine(f: Finished): Record<string, unknown> {
  const line = f.lines.filter((l) => !('progress' in l)).at(-1);
  if (f.code !== 0 || !line) {
    throw new Error(
      `worker ${f.pid} exited ${f.code ?? f.signal}${f.stalled ? ` (killed: ${f.stalled})` : ''} with ${f.lines.length} lines; stderr:\n${f.stderr}`,
    );
  }
  return line;
}

/**
 * A test timeout for `processes` workers each running `callsPerProcess` actions: what that needs
 * on a free machine, generously (process start-up, then {@link MS_PER_CALL} per call with every
 * process sharing the cores), stretched by the measured load. Only a ceiling: the stall watchdog
 * is what catches a worker that stopped.
 */
export function raceTimeout(processes: number, callsPerProcess: number): number {
  return scaled(STARTUP_MS + processes * callsPerProcess * MS_PER_CALL);
}
/** Starting a worker (Node, tsx, the store) on a free machine, generously. */
export const STARTUP_MS = 30_000;
/** One `Control.execute` on a shared store on a free machine, generously (measured: 1–3 ms). */
export const MS_PER_CALL = 15;

/** A fresh temporary directory, removed by the returned function. */
export function tempDir(prefix: string): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `ctrlrun-${prefix}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The files of a directory, sorted. */
export function files(dir: string): string[] {
  return readdirSync(dir).sort();
}
