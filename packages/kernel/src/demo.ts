/**
 * `@ctrlrun/kernel/demo`: five ways an agent action goes wrong, and what stops it. Runs
 * in-process over any store, with a counted fake remote; prints through `write`. A scenario that
 * is not refused makes the run fail instead of printing success.
 *
 * @module
 */
import { type JsonObject } from './canonical.js';
import { Control } from './control.js';
import { AmbiguousEffect, ApprovalMismatch, ApprovalRequired, AuthorityDenied, AuthorityEscalation, DuplicateEffect } from './errors.js';
import type { EventSink } from './events.js';
import type { IdSource } from './ids.js';
import { EXAMPLE_POLICY_YAML, loadPolicy } from './policy/index.js';
import { protect } from './protect.js';
import type { StateStore } from './store/state-store.js';
import type { Clock } from './time.js';

/**
 * The policy of scenarios 1–4: the starter policy `ctrlrun init` writes, byte for byte, so what the
 * demo shows is what a new project starts with (refunds up to €500 run, up to €5,000 wait for a
 * human, above are denied; the refund's effect key comes from its `effect:` template).
 */
export const DEMO_POLICY_YAML: string = EXAMPLE_POLICY_YAML;

/** The starter policy's refund limits, in minor units, as the demo's first lines state them. */
const ALLOW_UP_TO = 50000;
const APPROVE_UP_TO = 500000;

/**
 * The policy of scenario 5: the same policy under `ctrlrun.policy/v3`, plus an authority section
 * with one delegable grant for a human (€100,000), expiring at `expiresAt`.
 */
function demoAuthorityPolicyYaml(expiresAt: string): string {
  return `${DEMO_POLICY_YAML.replace('schema: ctrlrun.policy/v2', 'schema: ctrlrun.policy/v3')}authority:
  max_delegation_depth: 3
  grants:
    - id: head-of-support
      subject: { agent: head-of-support, user: ${DEMO_HUMAN} }
      actions: [stripe.refund]
      constraints: { amount_lte: 10000000 }
      delegable: true
      expires_at: "${expiresAt}"
`;
}

/** The human whose authority scenario 5 delegates. */
const DEMO_HUMAN = 'dana@example.com';

/** The scripted human of the demo; it grants exactly two requests. */
const DEMO_APPROVER = 'human:demo';

/** Options of {@link runDemo}. */
export interface DemoOptions {
  store: StateStore;
  /** Prints one line (no trailing newline). */
  write: (line: string) => void;
  sinks?: readonly EventSink[];
  clock?: Clock;
  ids?: IdSource;
  /**
   * Paths shown in the closing lines (relative, shell-quoted by the caller). With `policy` (where
   * the caller wrote {@link DEMO_POLICY_YAML}), the closing lines also give the commands that
   * answer what the demo left open, each runnable as printed from the caller's folder.
   */
  evidence?: { receipts: string; events: string; state: string; policy?: string };
}

/** What {@link runDemo} found. */
export interface DemoReport {
  /** Every scenario that ran was refused as it should be. */
  readonly ok: boolean;
  /** One line per scenario that was not refused. */
  readonly failures: readonly string[];
  /** Receipts written. */
  readonly receipts: number;
  /** Scenarios skipped, with why (none: all five run). */
  readonly skipped: readonly string[];
}

class ReplyLost extends Error {
  override name = 'TimeoutError';
}

/** `€` + whole euros with thousands commas, from minor units. */
export function euros(minor: number): string {
  return `€${Math.trunc(minor / 100).toLocaleString('en-US')}`;
}

const ARROW = '  →  ';

/** Runs the five scenarios. */
export async function runDemo(options: DemoOptions): Promise<DemoReport> {
  const { store, write } = options;
  const failures: string[] = [];
  /** The request scenario 5 leaves pending, for a human to answer. */
  let pendingRequest: string | null = null;
  const skipped: string[] = [];
  let receipts = 0;
  const counting: EventSink = { name: 'demo-receipt-counter', onReceipt: () => void receipts++ };
  const control = new Control({
    policy: loadPolicy(DEMO_POLICY_YAML, { source: 'demo' }),
    store,
    sinks: [...(options.sinks ?? []), counting],
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.ids ? { ids: options.ids } : {}),
  });

  // The fake remote: records the call first (money moved), runs an optional hook, then either
  // loses the reply or answers.
  const calls = new Map<string, number>();
  let loseReply = false;
  let during: (() => Promise<void>) | null = null;
  const remote = async (args: JsonObject): Promise<JsonObject> => {
    const id = args['payment_id'] as string;
    calls.set(id, (calls.get(id) ?? 0) + 1);
    if (during) await during();
    if (loseReply) throw new ReplyLost('the reply was lost: the connection timed out after the remote accepted the refund');
    return { id: `re_${id}`, amount: args['amount'] as number, status: 'succeeded' };
  };
  const refund = protect<{ payment_id: string; amount: number; currency?: string }, JsonObject>(remote, {
    control,
    name: 'stripe.refund',
    defaults: { currency: 'EUR' },
  });

  const expectRefusal = async <E extends Error>(
    scenario: number,
    run: () => Promise<unknown>,
    cls: abstract new (...a: never[]) => E,
    check: (e: E) => boolean,
  ): Promise<E | null> => {
    try {
      await run();
    } catch (err) {
      if (err instanceof cls && check(err)) return err;
      failures.push(`scenario ${scenario}: expected ${cls.name}, got ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`);
      return null;
    }
    failures.push(`scenario ${scenario}: expected ${cls.name}, but the action ran`);
    return null;
  };
  const requestApproval = async (scenario: number, args: { payment_id: string; amount: number }, principal: { agent: string }): Promise<string | null> => {
    const err = await expectRefusal(
      scenario,
      () => refund(args, { principal }),
      ApprovalRequired,
      () => true,
    );
    if (!err) return null;
    await control.grantApproval(err.requestId, { approver: DEMO_APPROVER });
    return err.requestId;
  };
  const checkCalls = (scenario: number, id: string, want: number): number => {
    const got = calls.get(id) ?? 0;
    if (got !== want) failures.push(`scenario ${scenario}: the remote was called ${got} times for ${id}, expected ${want}`);
    return got;
  };

  write('ctrlrun demo: five ways an agent action goes wrong, and what stops it');
  write(`policy: refunds up to ${euros(ALLOW_UP_TO)} run on their own, up to ${euros(APPROVE_UP_TO)} need a human, above that are denied`);

  // 1. A lost reply leaves the effect ambiguous; the blind retry never reaches the remote.
  const agent = { agent: 'refund-agent' };
  write('');
  write('1. Duplicate effect after a lost response');
  write('');
  loseReply = true;
  let lost = false;
  try {
    await refund({ payment_id: 'txn_1', amount: 50000 }, { principal: agent });
  } catch (err) {
    lost = err instanceof ReplyLost;
  }
  loseReply = false;
  if (!lost) failures.push('scenario 1: the lost reply did not surface to the agent');
  const state1 = (await store.getEffect('refund:txn_1'))?.state;
  write(`   refund ${euros(50000)}${ARROW}remote commits${ARROW}reply lost${ARROW}effect: ${String(state1 ?? 'none').toUpperCase()}`);
  if (state1 !== 'ambiguous') failures.push(`scenario 1: the effect is ${String(state1)}, expected ambiguous`);
  write('   the agent retries');
  if (
    await expectRefusal(
      1,
      () => refund({ payment_id: 'txn_1', amount: 50000 }, { principal: agent }),
      AmbiguousEffect,
      () => true,
    )
  ) {
    write('   ✗ BLOCKED — it may have committed; a blind retry is refused');
  }
  write(`   remote refund calls: ${checkCalls(1, 'txn_1', 1)}`);
  write('   only a human moves it on: ctrlrun resolve refund:txn_1 --committed|--failed');

  // 2. An approval is bound to the exact action: a changed amount is refused.
  write('');
  write('2. Approval mutation');
  write('');
  const apr2 = await requestApproval(2, { payment_id: 'txn_2', amount: 200000 }, agent);
  if (apr2) {
    write(`   agent proposes ${euros(200000)}${ARROW}human approves ${apr2} (bound to the hash)`);
    write(`   agent executes ${euros(500000)} with that approval${ARROW.trimEnd()}`);
    const e = await expectRefusal(
      2,
      () => refund({ payment_id: 'txn_2', amount: 500000 }, { principal: agent, approvalId: apr2 }),
      ApprovalMismatch,
      (x) => x.reason === 'mismatch',
    );
    if (e) write(`   ✗ BLOCKED — what was approved is not what was requested (${e.reason})`);
    checkCalls(2, 'txn_2', 0);
  }

  // 3. Two agents, one effect: the second is refused while the first holds it.
  write('');
  write('3. Concurrent agents, same effect');
  write('');
  let inner: DuplicateEffect | null = null;
  during = async () => {
    during = null;
    write(`   Agent A  reserve refund:txn_123${ARROW}ACQUIRED${ARROW}executes`);
    write(`   Agent B  reserve refund:txn_123${ARROW.trimEnd()}`);
    inner = await expectRefusal(
      3,
      () => refund({ payment_id: 'txn_123', amount: 50000 }, { principal: { agent: 'refund-agent-b' } }),
      DuplicateEffect,
      (x) => x.state === 'in_progress',
    );
  };
  await refund({ payment_id: 'txn_123', amount: 50000 }, { principal: { agent: 'refund-agent-a' } }).catch((err: unknown) => {
    failures.push(`scenario 3: agent A failed: ${String(err)}`);
  });
  during = null;
  if (inner) write(`   ✗ BLOCKED — another agent already reserved this effect (${(inner as DuplicateEffect).state})`);
  checkCalls(3, 'txn_123', 1);

  // 4. An approval is used once.
  write('');
  write('4. Approval replay');
  write('');
  const apr4 = await requestApproval(4, { payment_id: 'txn_4', amount: 200000 }, agent);
  if (apr4) {
    await refund({ payment_id: 'txn_4', amount: 200000 }, { principal: agent, approvalId: apr4 }).catch((err: unknown) => {
      failures.push(`scenario 4: the approved refund failed: ${String(err)}`);
    });
    const used = `   approval ${apr4} used once`;
    write(`${used}${ARROW}consumed`);
    write(`${'   presented again'.padEnd(used.length)}${ARROW.trimEnd()}`);
    const e = await expectRefusal(
      4,
      () => refund({ payment_id: 'txn_4', amount: 200000 }, { principal: agent, approvalId: apr4 }),
      ApprovalMismatch,
      (x) => x.reason === 'consumed',
    );
    if (e) write(`   ✗ BLOCKED — a single-use approval is already ${e.reason}`);
    checkCalls(4, 'txn_4', 1);
  }

  // 5. Authority: a human's delegable grant, delegated twice, each step narrower. The support
  // agent is refused outside its delegation before the policy is consulted; a delegation wider
  // than its parent is never written; inside it, the policy still asks a human.
  write('');
  write('5. Authority escalation');
  write('');
  const clock = options.clock ?? (() => new Date());
  const hoursFromNow = (h: number) => new Date(clock().getTime() + h * 3_600_000).toISOString();
  const control5 = new Control({
    policy: loadPolicy(demoAuthorityPolicyYaml(hoursFromNow(8)), { source: 'demo' }),
    store,
    sinks: [...(options.sinks ?? []), counting],
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.ids ? { ids: options.ids } : {}),
  });
  const refund5 = protect<{ payment_id: string; amount: number; currency?: string }, JsonObject>(remote, {
    control: control5,
    name: 'stripe.refund',
    defaults: { currency: 'EUR' },
  });
  const finance = { agent: 'finance-agent', user: DEMO_HUMAN };
  const support = { agent: 'support-agent', user: DEMO_HUMAN };
  try {
    const financeGrant = await control5.delegate(
      'head-of-support',
      { subject: finance, actions: ['stripe.refund'], constraints: { amount_lte: 2500000 }, delegable: true, expiresAt: hoursFromNow(4) },
      { by: { agent: 'head-of-support', user: DEMO_HUMAN } },
    );
    const supportGrant = await control5.delegate(
      financeGrant.delegationId,
      { subject: support, actions: ['stripe.refund'], constraints: { amount_lte: 200000 }, expiresAt: hoursFromNow(1) },
      { by: finance },
    );
    write(`   human ${euros(10000000)} delegable${ARROW}finance agent ${euros(2500000)}${ARROW}support agent ${euros(200000)}`);
    write(`   support agent's grant: ${supportGrant.delegationId}`);
    write(`   support agent requests ${euros(5000000)}${ARROW.trimEnd()}`);
    const denied = await expectRefusal(
      5,
      () => refund5({ payment_id: 'txn_5', amount: 5000000 }, { principal: support }),
      AuthorityDenied,
      (x) => x.reason === 'authority_constraint',
    );
    if (denied) write(`   ✗ BLOCKED — outside the delegated grant (${denied.reason})`);
    write(`   remote refund calls: ${checkCalls(5, 'txn_5', 0)}`);
    const wider = await expectRefusal(
      5,
      () =>
        control5.delegate(
          financeGrant.delegationId,
          { subject: support, actions: ['stripe.refund'], constraints: { amount_lte: 5000000 }, expiresAt: hoursFromNow(1) },
          { by: finance },
        ),
      AuthorityEscalation,
      (x) => x.reason === 'containment' && x.dimension === 'constraints',
    );
    if (wider) write(`   finance agent delegates ${euros(5000000)} under its ${euros(2500000)}${ARROW}refused (${wider.reason}: ${wider.dimension})`);
    const asked = await expectRefusal(
      5,
      () => refund5({ payment_id: 'txn_6', amount: 150000 }, { principal: support }),
      ApprovalRequired,
      () => true,
    );
    if (asked) write(`   support agent requests ${euros(150000)}${ARROW}authority permits, policy asks a human (${asked.requestId})`);
    pendingRequest = asked?.requestId ?? null;
    checkCalls(5, 'txn_6', 0);
    write('   two axes; the stricter wins');
  } catch (err) {
    failures.push(`scenario 5: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`);
  }

  write('');
  if (options.evidence) {
    write(`Receipts (${receipts}): ${options.evidence.receipts}`);
    write(`Events:       ${options.evidence.events}`);
    write('');
    write(`Read them:    CTRLRUN_STATE=${options.evidence.state} npx ctrlrun receipts`);
    if (options.evidence.policy !== undefined) {
      const cli = `CTRLRUN_CONFIG=${options.evidence.policy} CTRLRUN_STATE=${options.evidence.state} npx ctrlrun`;
      write('Answer them:');
      write(`  ${cli} approvals`);
      write(`  ${cli} resolve refund:txn_1 --committed --as you@example.com   # or --failed, if the refund did not happen`);
      if (pendingRequest !== null) write(`  ${cli} approve ${pendingRequest} --as you@example.com`);
    }
  } else {
    write(`Receipts (${receipts})`);
  }
  for (const f of failures) write(`✗ NOT REFUSED — ${f}`);
  return { ok: failures.length === 0, failures, receipts, skipped };
}
