/**
 * One operation of a fault run, the same in the in-process model test, the worker processes and
 * the worker threads: build the action, record its invocation, run it through `Control.execute`
 * with an executor that calls the fake remote (the upstream's ledger) as told, and record how it
 * ended. Only the kernel's public API is used.
 */
import { Control, NotExecuted, createAction, loadPolicy, type Clock, type StateStore } from '@ctrlrun/kernel';
import type { Behaviour, HistoryEntry, OpKind, Outcome, Upstream } from './history.js';

/** allow, approve and deny, each keyed `pay:<ref>`, so a ref names one effect key for every kind. */
export const FAULT_POLICY_YAML = `schema: ctrlrun.policy/v2
actions:
  pay.small:
    effect: "pay:{ref}"
    decision: allow
  pay.large:
    effect: "pay:{ref}"
    decision: approve
  pay.forbidden:
    effect: "pay:{ref}"
    decision: deny
`;

export const FAULT_PRINCIPAL = { agent: 'fault-agent', user: 'ops@example.com' } as const;

const NAME: Record<OpKind, string> = { allow: 'pay.small', approve: 'pay.large', deny: 'pay.forbidden' };

/** A Control on `store` with the fault policy (its clock may be a jumping one). */
export function faultControl(store: StateStore, options: { clock?: Clock; lease?: number } = {}): Control {
  return new Control({
    policy: loadPolicy(FAULT_POLICY_YAML),
    store,
    principal: FAULT_PRINCIPAL,
    logger: { warn() {} },
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.lease ? { lease: options.lease } : {}),
  });
}

/** What one operation is. */
export interface OpSpec {
  readonly op: string;
  readonly worker: string;
  readonly kind: OpKind;
  readonly ref: string;
  readonly approvalId: string | null;
  readonly behaviour: Behaviour;
}

/** Where the nemesis may strike inside the executor (a worker kills itself there). */
export type ExecutorPoint = 'before-remote' | 'after-remote';

export interface OpContext {
  readonly control: Control;
  readonly upstream: Upstream;
  /** Appends one history entry (durably enough to survive the client's SIGKILL). */
  readonly record: (entry: HistoryEntry) => void;
  /** Called at each executor point; a fault run kills the process there. */
  readonly atExecutor?: (point: ExecutorPoint) => void | Promise<void>;
  /**
   * Awaited right after the invocation is recorded, before the kernel is called: a client whose
   * `record` is not durable at once (the Durable Object's, sent to the harness) makes it so here.
   */
  readonly flush?: () => Promise<void>;
}

/** How it ended, and the request id `ApprovalRequired` named. */
export interface OpResult {
  readonly outcome: Outcome;
  readonly requestId: string | null;
}

/** The client's view of an error: by `code`, never by class identity (two copies may be loaded). */
export function classify(err: unknown, started: boolean): { outcome: Outcome; error: string; requestId: string | null } {
  const e = (err ?? {}) as { code?: unknown; name?: unknown; state?: unknown; reason?: unknown; requestId?: unknown };
  const name = typeof e.name === 'string' ? e.name : 'Error';
  const detail = typeof e.state === 'string' ? `${name}:${e.state}` : typeof e.reason === 'string' ? `${name}:${e.reason}` : name;
  const requestId = typeof e.requestId === 'string' ? e.requestId : null;
  switch (e.code) {
    case 'ERR_NOT_EXECUTED':
      return { outcome: started ? 'failed' : 'error', error: detail, requestId };
    case 'ERR_DUPLICATE_EFFECT':
      return { outcome: started ? 'ambiguous' : 'duplicate', error: detail, requestId };
    case 'ERR_AMBIGUOUS_EFFECT':
      return { outcome: started ? 'ambiguous' : 'ambiguous-key', error: detail, requestId };
    case 'ERR_ACTION_DENIED':
      return { outcome: 'denied', error: detail, requestId };
    case 'ERR_APPROVAL_REQUIRED':
      return { outcome: 'approval-required', error: detail, requestId };
    case 'ERR_APPROVAL_MISMATCH':
      return { outcome: 'approval-refused', error: detail, requestId };
    default:
      // The executor's own "reply lost" error is the one plain error it throws after starting.
      if (started && err instanceof Error && err.message === LOST_REPLY) return { outcome: 'ambiguous', error: 'lost-reply', requestId };
      return { outcome: 'error', error: detail, requestId };
  }
}

const LOST_REPLY = 'the remote ran it; its reply was lost';

/** Runs one operation and records its invocation, executor start and completion. */
export async function runOp(ctx: OpContext, spec: OpSpec): Promise<OpResult> {
  const name = NAME[spec.kind];
  const action = createAction({ name, arguments: { ref: spec.ref }, principal: FAULT_PRINCIPAL });
  ctx.record({
    t: 'invoke',
    op: spec.op,
    worker: spec.worker,
    kind: spec.kind,
    name,
    ref: spec.ref,
    actionId: action.actionId,
    actionHash: action.actionHash,
    approvalId: spec.approvalId,
    behaviour: spec.behaviour,
  });
  await ctx.flush?.();
  let started = false;
  try {
    await ctx.control.execute(
      action,
      async (_args, context) => {
        started = true;
        ctx.record({ t: 'start', op: spec.op, actionId: action.actionId, effectKey: context.effectKey });
        await ctx.atExecutor?.('before-remote');
        if (spec.behaviour === 'not-sent') throw new NotExecuted('the request never left');
        await ctx.upstream.run({ effectKey: context.effectKey ?? `pay:${spec.ref}`, actionId: action.actionId, op: spec.op });
        await ctx.atExecutor?.('after-remote');
        if (spec.behaviour === 'lost-reply') throw new Error(LOST_REPLY);
        return { ref: spec.ref };
      },
      spec.approvalId === null ? {} : { approvalId: spec.approvalId },
    );
    ctx.record({ t: 'complete', op: spec.op, outcome: 'committed', error: null, requestId: null });
    return { outcome: 'committed', requestId: null };
  } catch (err) {
    const c = classify(err, started);
    ctx.record({ t: 'complete', op: spec.op, outcome: c.outcome, error: c.error, requestId: c.requestId });
    return { outcome: c.outcome, requestId: c.requestId };
  }
}

/** An operator's answer to one request, recorded. */
export async function answer(ctx: Pick<OpContext, 'control' | 'record'>, op: string, requestId: string, grant: boolean): Promise<void> {
  try {
    if (grant) await ctx.control.grantApproval(requestId, { approver: 'operator@example.com' });
    else await ctx.control.denyApproval(requestId, { approver: 'operator@example.com' });
    ctx.record({ t: 'answer', op, requestId, answer: grant ? 'granted' : 'denied', error: null });
  } catch (err) {
    const e = err as { name?: unknown; reason?: unknown };
    ctx.record({ t: 'answer', op, requestId, answer: 'refused', error: `${String(e.name)}:${String(e.reason ?? '')}` });
  }
}

/** Kill points the nemesis picks from (each a place the spec must survive). */
export const KILL_POINTS = ['before-remote', 'after-remote', 'after-reserve', 'in-commit'] as const;
export type KillPoint = (typeof KILL_POINTS)[number];

/** A small seeded PRNG (mulberry32): the run is replayable from its seeds. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One client's mix, wherever its operations run (a process, a thread, a Durable Object). */
export interface ClientMix {
  readonly worker: string;
  readonly rand: () => number;
  /** Operations to invoke, over `concurrency` loops. */
  readonly ops: number;
  readonly concurrency: number;
  /** Refs are drawn from `ref-0 … ref-<refs-1>`, shared by every client, so keys collide. */
  readonly refs: number;
  readonly killRate: number;
  readonly jumpRate: number;
  readonly maxJumpMs: number;
  /** How long an approval-band call waits for the operator's answer before giving up. */
  readonly answerWaitMs: number;
  readonly record: (entry: HistoryEntry) => void;
  /** Moves the client's clock by `ms`. */
  jump(ms: number): void | Promise<void>;
  /** Arms the nemesis for the next operation (null: none). */
  arm(point: KillPoint | null): void;
  /** Runs one operation (see {@link runOp}). */
  run(spec: OpSpec): Promise<OpResult>;
  /** A request's status (`pending` while unanswered or unreadable). */
  status(requestId: string): Promise<string>;
}

/**
 * The client's loop: allowed, approval-band and denied calls on colliding refs, with every
 * behaviour of the remote; a retry after a lost reply; an answered request presented (sometimes
 * twice, sometimes by another action).
 */
export async function runClient(m: ClientMix): Promise<void> {
  const { rand } = m;
  let n = 0;
  const pickBehaviour = (): Behaviour => {
    const r = rand();
    return r < 0.8 ? 'ok' : r < 0.9 ? 'not-sent' : 'lost-reply';
  };
  const pickRef = () => `ref-${Math.floor(rand() * m.refs)}`;
  const nextOp = () => `${m.worker}/${n++}`;
  const loop = async () => {
    // A store that refuses at once (a full disk, a connection refused) is called again after a
    // pause that doubles with each refusal in a row (20 ms to 320 ms), as a caller would back off:
    // without it a loop used up its operations while the fault lasted (a loaded CI run made 585 of
    // 600 calls on a full disk). No random draw: a seed's operations stay what they were.
    let pause = 0;
    const run = async (spec: OpSpec): Promise<OpResult> => {
      const r = await m.run(spec);
      pause = r.outcome === 'error' ? Math.min(Math.max(pause * 2, 20), 320) : 0;
      if (pause > 0) await new Promise((res) => setTimeout(res, pause));
      return r;
    };
    while (n < m.ops) {
      if (rand() < m.jumpRate) {
        const jump = Math.round((rand() * 2 - 1) * m.maxJumpMs);
        await m.jump(jump);
        m.record({ t: 'fault', worker: m.worker, fault: jump >= 0 ? 'clock-jump:forward' : 'clock-jump:back' });
      }
      m.arm(rand() < m.killRate ? KILL_POINTS[Math.floor(rand() * KILL_POINTS.length)]! : null);
      const r = rand();
      const kind: OpKind = r < 0.6 ? 'allow' : r < 0.93 ? 'approve' : 'deny';
      const ref = pickRef();
      const first = await run({ op: nextOp(), worker: m.worker, kind, ref, approvalId: null, behaviour: pickBehaviour() });
      if (first.outcome === 'ambiguous' && rand() < 0.5) {
        // The client retries after a lost reply: the key's outcome is unknown, so it is refused.
        await run({ op: nextOp(), worker: m.worker, kind, ref, approvalId: null, behaviour: 'ok' });
      }
      if (first.outcome !== 'approval-required' || first.requestId === null) continue;
      const deadline = Date.now() + m.answerWaitMs;
      let status = 'pending';
      while (status === 'pending' && Date.now() < deadline) {
        await new Promise((res) => setTimeout(res, 10 + rand() * 30));
        status = await m.status(first.requestId);
      }
      if (status === 'pending') continue;
      // Present it (granted: runs once; denied: refused), sometimes twice, sometimes by another action.
      const wrong = rand() < 0.1;
      await run({ op: nextOp(), worker: m.worker, kind: 'approve', ref: wrong ? pickRef() : ref, approvalId: first.requestId, behaviour: pickBehaviour() });
      if (rand() < 0.2) await run({ op: nextOp(), worker: m.worker, kind: 'approve', ref, approvalId: first.requestId, behaviour: 'ok' });
    }
  };
  await Promise.all(Array.from({ length: m.concurrency }, loop));
}
