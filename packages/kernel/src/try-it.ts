/**
 * `@ctrlrun/kernel/try-it`: the playground's module. One protected action, `stripe.refund`, over
 * any store, driven by `step(request)`; every line the page shows is rendered from what `step`
 * returns. The only way to grant is the reader's `approve` request.
 *
 * @module
 */
import { callbackSink } from './events.js';
import { Control } from './control.js';
import { isPlainObject, type JsonObject } from './canonical.js';
import { ActionDenied, AmbiguousEffect, ApprovalMismatch, ApprovalRequired, DuplicateEffect, InvalidArgument } from './errors.js';
import type { IdSource } from './ids.js';
import type { StoredReceipt } from './model.js';
import { loadPolicy } from './policy/index.js';
import { protect } from './protect.js';
import type { StateStore } from './store/state-store.js';
import { viewTime, type Clock } from './time.js';

/** The policy the playground loads; the page shows this exact text. */
export const TRY_IT_POLICY_YAML = `schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_gte: 0, amount_lte: 100000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 1000000 }
        decision: approve
      - decision: deny
`;

/** Who approves from the page. */
const TRY_IT_APPROVER = 'human:playground';
/** Who resolves an AMBIGUOUS effect from the page: the operator, a human. */
export const TRY_IT_OPERATOR = 'human:operator';
/** Who acts in the playground. */
export const TRY_IT_PRINCIPAL = { agent: 'refund-agent', user: null } as const;

/** A refund through the protected action. `amount` is in integer minor units (cents). */
export interface RefundRequest {
  op: 'refund';
  payment_id: string;
  amount: number;
  /** The fake remote commits the refund, then the reply is lost. */
  lose_reply?: boolean;
  /** Present this granted approval. */
  approval_id?: string | null;
}

/** The reader's Approve button: the only way to grant. */
export interface ApproveRequest {
  op: 'approve';
  request_id: string;
}

/**
 * The operator's answer for an AMBIGUOUS effect: they checked with the payment provider and the
 * refund did happen (`committed`) or did not (`failed`). Only an AMBIGUOUS effect can be resolved.
 */
export interface ResolveRequest {
  op: 'resolve';
  effect_key: string;
  state: 'committed' | 'failed';
}

/** Every outcome a refund step can have, in the order spec 04 §4 lists them (the page renders each). */
export const TRY_IT_OUTCOMES = Object.freeze([
  'executed',
  'approval_required',
  'approval_mismatch',
  'denied',
  'duplicate',
  'ambiguous_retry',
  'reply_lost',
] as const);

/** Every outcome a refund step can have. */
export type TryItOutcome = (typeof TRY_IT_OUTCOMES)[number];

/** What a refund step returns. */
export interface RefundResult {
  outcome: TryItOutcome;
  /** The error class the kernel raised, if any. */
  error: string | null;
  /** Its message. */
  message: string | null;
  /** Fake-remote calls for this payment id so far. */
  remote_calls: number;
  /** The receipt written by this step (as stored), if one was. */
  receipt?: JsonObject;
  /** Present on `approval_required`. */
  request_id?: string;
  /** On `approval_mismatch`: `mismatch`, `consumed`, …; on `denied`: the deny reason. */
  reason?: string;
}

/** What an approve step returns. */
export interface ApproveResult {
  outcome: 'approved';
  /** The request granted: the id every view names `request_id`. */
  request_id: string;
  /** The same id, under the spec's name for this result (spec 04 §4). */
  approval_id: string;
  action_hash: string;
  approver: string;
  /** When the grant lapses: UTC, milliseconds, `Z` (the form of every view). */
  expires_at: string;
}

/** What a resolve step returns. */
export interface ResolveResult {
  outcome: 'resolved';
  effect_key: string;
  /** The effect's state now: `committed` or `failed`. */
  state: string;
  /** Who resolved it ({@link TRY_IT_OPERATOR}). */
  resolved_by: string;
}

/** The playground module. */
export interface TryIt {
  /** The exact policy text loaded. */
  readonly policyYaml: string;
  /** The policy's hash. */
  readonly policyHash: string;
  /** Runs one request. Bad input throws `InvalidArgument`; an unknown request id throws `ApprovalMismatch`. */
  step(request: RefundRequest): Promise<RefundResult>;
  step(request: ApproveRequest): Promise<ApproveResult>;
  /** Resolves an AMBIGUOUS effect as the operator; anything not AMBIGUOUS throws the kernel's error. */
  step(request: ResolveRequest): Promise<ResolveResult>;
  step(request: RefundRequest | ApproveRequest | ResolveRequest): Promise<RefundResult | ApproveResult | ResolveResult>;
}

/**
 * The fake remote's call counter, per payment id. It belongs to the remote, not to ctrlrun: the
 * counts are what the "payment provider" saw, kept apart from the store so a reader can compare
 * the two. The page keeps one in IndexedDB so the counts survive a reload.
 */
export interface RemoteCallCounter {
  /** Calls so far for `paymentId` (0 if none). */
  get(paymentId: string): number;
  /** Records one call (the money moved); a returned promise is awaited before the remote answers. */
  record(paymentId: string): void | Promise<void>;
}

/** A counter in memory, optionally starting from earlier counts. */
export function memoryRemoteCalls(initial: Iterable<readonly [string, number]> = []): RemoteCallCounter {
  const calls = new Map<string, number>();
  for (const [id, n] of initial) {
    if (typeof id !== 'string' || !Number.isSafeInteger(n) || n < 0)
      throw new InvalidArgument('remote call counts must be [payment_id, non-negative integer] pairs');
    calls.set(id, n);
  }
  return {
    get: (id) => calls.get(id) ?? 0,
    record: (id) => void calls.set(id, (calls.get(id) ?? 0) + 1),
  };
}

/**
 * A store that saves whole snapshots can hold its saves (the persisted sql.js store does): try-it
 * then asks for a save at the two points that matter — before the fake remote moves money, and
 * when a step is over — instead of one after every transaction.
 */
export interface HeldSaves {
  /** Runs `fn`; what it commits is saved at {@link checkpoint} and when `fn` settles. */
  holdSaves<T>(fn: () => Promise<T>): Promise<T>;
  /** Saves what is committed and not saved yet; resolves once it is durable. */
  checkpoint(): Promise<void>;
}

function heldSaves(store: StateStore): HeldSaves | null {
  const s = store as Partial<HeldSaves>;
  return typeof s.holdSaves === 'function' && typeof s.checkpoint === 'function' ? (s as HeldSaves) : null;
}

/** Options of {@link createTryIt}. */
export interface TryItOptions {
  store: StateStore;
  /** Policy text to load instead of {@link TRY_IT_POLICY_YAML} (the page's editor). */
  policyYaml?: string;
  /** The fake remote's counter; a fresh one in memory by default. */
  remoteCalls?: RemoteCallCounter;
  clock?: Clock;
  ids?: IdSource;
}

/** Thrown by the fake remote when the reader asked to lose the reply. */
class ReplyLost extends Error {
  override name = 'TimeoutError';
}

const MAX_AMOUNT = 1_000_000_000_000;

function checkRefund(r: Record<string, unknown>): RefundRequest {
  const id = r['payment_id'];
  if (typeof id !== 'string' || id.trim() === '') throw new InvalidArgument('payment_id must be a non-empty string');
  if (id.length > 200 || /[\p{Cc}\p{Cf}]/u.test(id)) throw new InvalidArgument('payment_id must be at most 200 printable characters');
  const amount = r['amount'];
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount)) {
    throw new InvalidArgument('amount must be a whole number of minor units (cents), e.g. 50000 for €500.00');
  }
  if (Math.abs(amount) > MAX_AMOUNT) throw new InvalidArgument(`amount must be between -${MAX_AMOUNT} and ${MAX_AMOUNT} minor units`);
  const lose = r['lose_reply'] ?? false;
  if (typeof lose !== 'boolean') throw new InvalidArgument('lose_reply must be true or false');
  const approval = r['approval_id'] ?? null;
  if (approval !== null && (typeof approval !== 'string' || approval === '')) throw new InvalidArgument('approval_id must be a non-empty string');
  return { op: 'refund', payment_id: id, amount, lose_reply: lose, approval_id: approval };
}

/** Builds the playground over `store`: the real kernel, a fake remote, one protected action. */
export function createTryIt(options: TryItOptions): TryIt {
  if (!options || !options.store) throw new InvalidArgument('createTryIt needs { store }');
  const policyYaml = options.policyYaml ?? TRY_IT_POLICY_YAML;
  const policy = loadPolicy(policyYaml, { source: 'try-it' });
  const calls = options.remoteCalls ?? memoryRemoteCalls();
  if (typeof calls.get !== 'function' || typeof calls.record !== 'function')
    throw new InvalidArgument('remoteCalls must have get(paymentId) and record(paymentId)');
  let lastReceipt: StoredReceipt | null = null;
  const control = new Control({
    policy,
    store: options.store,
    principal: TRY_IT_PRINCIPAL,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.ids ? { ids: options.ids } : {}),
    sinks: [callbackSink({ onReceipt: (r) => void (lastReceipt = r) })],
  });
  let loseNext = false;
  const saves = heldSaves(options.store);
  const refund = protect<{ payment_id: string; amount: number }, JsonObject>(
    async (args) => {
      const id = args['payment_id'] as string;
      // The reservation is durable before the remote is called: a tab closed from here on finds the key taken.
      await saves?.checkpoint();
      await calls.record(id); // money moved
      if (loseNext) throw new ReplyLost('the reply was lost after the remote committed the refund');
      return { id: `re_${id}`, amount: args['amount'] as number, status: 'succeeded' };
    },
    { control, name: 'stripe.refund' },
  );

  async function runRefund(req: RefundRequest): Promise<RefundResult> {
    lastReceipt = null;
    loseNext = req.lose_reply === true;
    const result = (outcome: TryItOutcome, err: Error | null, extra: Partial<RefundResult> = {}): RefundResult => {
      const r: RefundResult = { outcome, error: err ? err.name : null, message: err ? err.message : null, remote_calls: calls.get(req.payment_id), ...extra };
      if (lastReceipt) r.receipt = lastReceipt.document;
      return r;
    };
    try {
      await refund({ payment_id: req.payment_id, amount: req.amount }, { approvalId: req.approval_id ?? null });
      return result('executed', null);
    } catch (err) {
      if (err instanceof ApprovalRequired) return result('approval_required', err, { request_id: err.requestId });
      if (err instanceof ApprovalMismatch) return result('approval_mismatch', err, { reason: err.reason });
      if (err instanceof ActionDenied) return result('denied', err, { reason: err.reason });
      if (err instanceof DuplicateEffect) return result('duplicate', err, { reason: err.state });
      if (err instanceof AmbiguousEffect) return result('ambiguous_retry', err);
      if (err instanceof ReplyLost) return result('reply_lost', err);
      throw err;
    } finally {
      loseNext = false;
    }
  }

  /** One step, its writes saved before it resolves (and, for a refund that runs, before the remote is called too). */
  function step(request: RefundRequest | ApproveRequest | ResolveRequest): Promise<RefundResult | ApproveResult | ResolveResult> {
    return saves ? saves.holdSaves(() => runStep(request)) : runStep(request);
  }

  async function runStep(request: RefundRequest | ApproveRequest | ResolveRequest): Promise<RefundResult | ApproveResult | ResolveResult> {
    if (!isPlainObject(request)) {
      throw new InvalidArgument(
        'a step is { op: "refund", payment_id, amount, lose_reply?, approval_id? }, { op: "approve", request_id } or { op: "resolve", effect_key, state }',
      );
    }
    if (request.op === 'approve') {
      const id = (request as unknown as Record<string, unknown>)['request_id'];
      if (typeof id !== 'string' || id === '') throw new InvalidArgument('request_id must be a non-empty string');
      const approval = await control.grantApproval(id, { approver: TRY_IT_APPROVER });
      return {
        outcome: 'approved',
        request_id: approval.approvalId,
        approval_id: approval.approvalId,
        action_hash: approval.actionHash,
        approver: approval.approver,
        expires_at: viewTime(approval.expiresAt),
      };
    }
    if (request.op === 'resolve') {
      const r = request as unknown as Record<string, unknown>;
      const key = r['effect_key'];
      const state = r['state'];
      if (typeof key !== 'string' || key === '' || key.length > 300)
        throw new InvalidArgument('effect_key must be a non-empty string of at most 300 characters');
      if (state !== 'committed' && state !== 'failed')
        throw new InvalidArgument(`state must be "committed" or "failed", got ${JSON.stringify(state)?.slice(0, 40)}`);
      const record = await control.resolveEffect(key, state, { by: TRY_IT_OPERATOR });
      return { outcome: 'resolved', effect_key: key, state: record.state, resolved_by: TRY_IT_OPERATOR };
    }
    if (request.op === 'refund') return runRefund(checkRefund(request as unknown as Record<string, unknown>));
    throw new InvalidArgument(`unknown op ${JSON.stringify((request as { op?: unknown }).op)}: use "refund", "approve" or "resolve"`);
  }

  return { policyYaml, policyHash: control.policyHash, step: step as TryIt['step'] };
}
