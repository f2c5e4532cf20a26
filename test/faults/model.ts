/**
 * The history checker driven by fast-check's model-based commands, in one process on one store:
 * calls of each kind and behaviour on a small pool of refs (so keys collide), operator answers,
 * approvals presented by the right and the wrong action. After every command the whole history
 * is checked; a failing one is shrunk by fast-check to a minimal command list, which
 * {@link shrinkToArtifact} writes out as a replayable trace.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { StateStore } from '@ctrlrun/kernel';
import fc from 'fast-check';
import { checkHistory, snapshot, type Anomaly } from './checker.js';
import type { Behaviour, HistoryEntry, OpKind, UpstreamRow } from './history.js';
import { answer, faultControl, runOp, type OpContext } from './workload.js';

const REFS = ['a', 'b', 'c'] as const;

/** The system under test of one command sequence. */
interface Real {
  readonly store: StateStore;
  readonly ctx: OpContext;
  readonly history: HistoryEntry[];
  readonly upstream: UpstreamRow[];
  /** Requests filed so far, with the ref they are for. */
  readonly requests: { id: string; ref: string }[];
  n: number;
}

/** fast-check's model: the requests seen (commands only need their count to pick one). */
interface Model {
  requests: number;
}

/** Thrown after a command when the history so far is not consistent: names every anomaly. */
export class HistoryAnomalies extends Error {
  readonly anomalies: Anomaly[];
  constructor(anomalies: Anomaly[]) {
    super(`${anomalies.length} anomal${anomalies.length === 1 ? 'y' : 'ies'}:\n${anomalies.map((a) => `  ${a.kind}: ${a.detail}`).join('\n')}`);
    this.anomalies = anomalies;
  }
}

async function verify(r: Real): Promise<void> {
  const anomalies = checkHistory(r.history, r.upstream, await snapshot(r.store));
  if (anomalies.length) throw new HistoryAnomalies(anomalies);
}

class Call implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly kind: OpKind,
    readonly ref: string,
    readonly behaviour: Behaviour,
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const op = `m/${r.n++}`;
    const res = await runOp(r.ctx, { op, worker: 'm', kind: this.kind, ref: this.ref, approvalId: null, behaviour: this.behaviour });
    if (res.outcome === 'approval-required' && res.requestId !== null && !r.requests.some((q) => q.id === res.requestId)) {
      r.requests.push({ id: res.requestId, ref: this.ref });
      m.requests++;
    }
    await verify(r);
  }
  toString = () => `Call(${this.kind}, ${this.ref}, ${this.behaviour})`;
}

class Answer implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly index: number,
    readonly grant: boolean,
  ) {}
  check = (m: Readonly<Model>) => m.requests > 0;
  async run(_m: Model, r: Real): Promise<void> {
    const q = r.requests[this.index % r.requests.length]!;
    await answer(r.ctx, `m/${r.n++}`, q.id, this.grant);
    await verify(r);
  }
  toString = () => `Answer(request #${this.index}, ${this.grant ? 'grant' : 'deny'})`;
}

class Present implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly index: number,
    readonly ref: string | null,
    readonly behaviour: Behaviour,
  ) {}
  check = (m: Readonly<Model>) => m.requests > 0;
  async run(_m: Model, r: Real): Promise<void> {
    const q = r.requests[this.index % r.requests.length]!;
    // `ref: null` presents the approval for the action it was granted for; a ref, for another.
    const ref = this.ref ?? q.ref;
    await runOp(r.ctx, { op: `m/${r.n++}`, worker: 'm', kind: 'approve', ref, approvalId: q.id, behaviour: this.behaviour });
    await verify(r);
  }
  toString = () => `Present(request #${this.index}, ${this.ref === null ? 'its own action' : `ref ${this.ref}`}, ${this.behaviour})`;
}

const behaviour = fc.constantFrom<Behaviour>('ok', 'ok', 'not-sent', 'lost-reply');
const ref = fc.constantFrom(...REFS);

/** The command arbitrary: every operation kind the fault harness runs, in one process. */
export const commands = fc.commands(
  [
    fc.tuple(fc.constantFrom<OpKind>('allow', 'allow', 'approve', 'deny'), ref, behaviour).map(([k, r, b]) => new Call(k, r, b)),
    fc.tuple(fc.nat(5), fc.boolean()).map(([i, g]) => new Answer(i, g)),
    fc.tuple(fc.nat(5), fc.option(ref, { freq: 4 }), behaviour).map(([i, r, b]) => new Present(i, r, b)),
  ],
  { maxCommands: 40 },
);

/** The property: on a fresh store from `open`, every command sequence leaves a consistent history. */
export function historyProperty(open: () => Promise<StateStore>) {
  return fc.asyncProperty(commands, async (cmds) => {
    const store = await open();
    try {
      const history: HistoryEntry[] = [];
      const upstream: UpstreamRow[] = [];
      const ctx: OpContext = { control: faultControl(store), upstream: { run: (row) => void upstream.push(row) }, record: (e) => void history.push(e) };
      const real: Real = { store, ctx, history, upstream, requests: [], n: 0 };
      await fc.asyncModelRun(() => ({ model: { requests: 0 }, real }), cmds);
    } finally {
      await store.close();
    }
  });
}

/** A shrunk failure: the minimal command list and what the checker found, as written to disk. */
export interface ShrunkTrace {
  readonly store: string;
  readonly seed: number;
  readonly path: string | undefined;
  readonly runs: number;
  readonly shrinks: number;
  readonly commands: string[];
  /** fast-check's replay path of the command list (its `replayPath` option), when it printed one. */
  readonly replayPath: string | null;
  readonly anomalies: Anomaly[];
  /** How to replay it: the same seed and path through `fc.assert`. */
  readonly replay: string;
}

/**
 * Runs the property on `open`'s store; on failure, writes the shrunk trace as JSON to `file` and
 * returns it (null when every run passed).
 */
export async function shrinkToArtifact(
  name: string,
  open: () => Promise<StateStore>,
  file: string,
  options: { seed: number; numRuns: number },
): Promise<ShrunkTrace | null> {
  const details = await fc.check(historyProperty(open), { seed: options.seed, numRuns: options.numRuns });
  if (!details.failed) return null;
  const example = details.counterexample?.[0];
  // The commands fast-check ran in the shrunk example (its toString lists exactly those).
  const printed = example ? String(example) : '';
  const replayPath = /\/\*replayPath="([^"]*)"\*\//.exec(printed)?.[1] ?? null;
  const listed = printed.replace(/\s*\/\*replayPath="[^"]*"\*\//, '');
  const error = details.errorInstance;
  const trace: ShrunkTrace = {
    store: name,
    seed: details.seed,
    path: details.counterexamplePath ?? undefined,
    runs: details.numRuns,
    shrinks: details.numShrinks,
    replayPath,
    commands: listed ? listed.split(/,(?![^()]*\))/).map((s) => s.trim()) : [],
    anomalies: error instanceof HistoryAnomalies ? error.anomalies : [{ kind: 'refusal-record', detail: `not a history anomaly: ${String(error)}` }],
    replay: `fc.assert(historyProperty(open), { seed: ${details.seed}, path: ${JSON.stringify(details.counterexamplePath)}, endOnFailure: true })`,
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(trace, null, 2)}\n`);
  return trace;
}
