/**
 * The history of a fault run, as the checker reads it (Jepsen's shape): every operation's
 * invocation, its executor's start (when the kernel called it) and its completion, written by the
 * client that ran it; and, apart from it, the upstream's own ledger of what really ran. A client
 * killed mid-operation leaves an invocation with no completion: that operation's outcome is
 * indeterminate, and the checker only holds it to what the store and the upstream recorded.
 */

/** What a worker asked for: the policy decides `allow`, `approve` or `deny` for these names. */
export type OpKind = 'allow' | 'approve' | 'deny';

/** How the executor behaves (the fake remote's answer as the client sees it). */
export type Behaviour =
  /** The remote runs the effect and the reply arrives. */
  | 'ok'
  /** The request never left (`NotExecuted`): the remote ran nothing. */
  | 'not-sent'
  /** The remote runs the effect, then the reply is lost (a plain error: the outcome is unknown to the client). */
  | 'lost-reply';

/** An operation's invocation. */
export interface Invoke {
  readonly t: 'invoke';
  /** Unique across the run: `<worker>/<n>`. */
  readonly op: string;
  readonly worker: string;
  readonly kind: OpKind;
  /** The action's name and its `ref` argument (the effect key is `pay:<ref>`). */
  readonly name: string;
  readonly ref: string;
  /** The action id this call carries (fresh per call). */
  readonly actionId: string;
  readonly actionHash: string;
  /** The approval presented with the call, or null. */
  readonly approvalId: string | null;
  readonly behaviour: Behaviour;
}

/** The kernel called the executor for `op` (written before the remote is called). */
export interface Start {
  readonly t: 'start';
  readonly op: string;
  readonly actionId: string;
  readonly effectKey: string | null;
}

/** How an operation ended, as its client saw it. */
export type Outcome =
  /** The executor's value came back: committed. */
  | 'committed'
  /** `NotExecuted` from the executor: failed. */
  | 'failed'
  /** The executor threw something else: ambiguous. */
  | 'ambiguous'
  /** `DuplicateEffect` (the key is committed or in progress). */
  | 'duplicate'
  /** `AmbiguousEffect` at reservation (the key's outcome is unknown). */
  | 'ambiguous-key'
  /** `ActionDenied`. */
  | 'denied'
  /** `ApprovalRequired`: a request was filed (or an open one named). */
  | 'approval-required'
  /** `ApprovalMismatch`: the presented approval was refused. */
  | 'approval-refused'
  /** Anything else (named in `error`). */
  | 'error';

/** An operation's completion. */
export interface Complete {
  readonly t: 'complete';
  readonly op: string;
  readonly outcome: Outcome;
  /** The error's name and, for refusals, its state or reason. */
  readonly error: string | null;
  /** `ApprovalRequired`'s request id. */
  readonly requestId: string | null;
}

/** An operator's answer to a request. */
export interface Answer {
  readonly t: 'answer';
  readonly op: string;
  readonly requestId: string;
  readonly answer: 'granted' | 'denied' | 'refused';
  readonly error: string | null;
}

/** A fault the nemesis injected (written before it strikes; the checker ignores these, the figures count them). */
export interface Fault {
  readonly t: 'fault';
  readonly worker: string;
  /** `kill:<point>`, `kill:external`, `clock-jump:forward|back`. */
  readonly fault: string;
}

export type HistoryEntry = Invoke | Start | Complete | Answer | Fault;

/** One row of the upstream's ledger: the remote really ran this effect. */
export interface UpstreamRow {
  readonly effectKey: string;
  readonly actionId: string;
  readonly op: string;
}

/** Where an executor tells the fake remote to run: an append-only ledger that never refuses. */
export interface Upstream {
  run(row: UpstreamRow): void | Promise<void>;
}

/** Parses JSON lines, skipping a torn last line (a client killed mid-write). */
export function parseLines<T>(text: string): T[] {
  const out: T[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      // A SIGKILL can cut the last line of a file short; anything before it was written whole.
    }
  }
  return out;
}
