/**
 * One OS process of the race and crash tests. Reads one JSON payload (see `harness.ts`) from
 * stdin, opens the store at `payload.url` with `openStore`, and prints JSON lines on stdout.
 *
 * - `reserve` (spec 03 §7.2): barrier, reserve the key; the winner begins, calls the fake remote
 *   (exclusive-create `marker/called`) and commits. Prints `{won, action_id, error, message}`.
 * - `take`: barrier, take the held continuation once. Prints `{won, action_id, error, message}`
 *   (`action_id`: the held action's, for the process that took it).
 * - `execute-many`: barrier, then every key through `Control.execute`; the executor
 *   exclusive-creates `marker/<key>`, so a second execution of a key is an `EEXIST` (counted).
 * - `grant`: one verified yes on an approval request. Prints `{granted, reason, error, message}`.
 * - `hang`: one execution through `Control.execute` whose executor prints `{executing: …}` and
 *   never returns; the parent kills this process with SIGKILL.
 */
import { openSync, closeSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Control, NotExecuted, createAction, loadPolicy, randomIds, type StateStore } from '@ctrlrun/kernel';
import type { ExecuteManyPayload, GrantPayload, HangPayload, Payload, RefundBudgetPayload, ReservePayload, TakePayload } from './harness.js';
import { PROCESS_POLICY_YAML, PROCESS_PRINCIPAL } from './policy.js';

const LEASE_MS = 5 * 60_000;

function print(line: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ pid: process.pid, ...line })}\n`);
}

async function readPayload(): Promise<Payload> {
  let text = '';
  for await (const chunk of process.stdin) text += String(chunk);
  return JSON.parse(text) as Payload;
}

async function open(payload: Payload): Promise<StateStore> {
  const mod = (await import(payload.opener ?? '@ctrlrun/store-node')) as { openStore(url: string): Promise<StateStore> };
  return mod.openStore(payload.url);
}

/** Exclusive-create `arrived-<pid>`, then poll every 2 ms until `contenders` arrived or the deadline. */
async function barrier(dir: string, contenders: number, timeoutS: number): Promise<void> {
  closeSync(openSync(join(dir, `arrived-${process.pid}`), 'wx'));
  const deadline = Date.now() + timeoutS * 1000;
  while (readdirSync(dir).filter((f) => f.startsWith('arrived-')).length < contenders && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** The fake remote: exclusive-create the marker; a second call for the same name throws EEXIST. */
function callRemote(dir: string, name: string): void {
  closeSync(openSync(join(dir, name), 'wx'));
}

function describe(err: unknown): { error: string; message: string } {
  return err instanceof Error ? { error: err.name, message: err.message } : { error: 'Error', message: String(err) };
}

async function reserve(p: ReservePayload): Promise<void> {
  const store = await open(p);
  const actionId = randomIds('act');
  await barrier(p.rendezvous_dir, p.contenders, p.rendezvous_timeout);
  let won = false;
  try {
    await store.reserveEffect(p.effect_key, actionId, LEASE_MS);
    won = true;
    await store.beginExecution(p.effect_key, actionId);
    callRemote(p.marker_dir, 'called');
    await store.commitEffect(p.effect_key, actionId, { called: true });
    print({ won, action_id: actionId, error: null, message: null });
  } catch (err) {
    print({ won, action_id: actionId, ...describe(err) });
  } finally {
    await store.close();
  }
}

async function take(p: TakePayload): Promise<void> {
  const store = await open(p);
  await barrier(p.rendezvous_dir, p.contenders, p.rendezvous_timeout);
  try {
    const taken = await store.takeContinuation(p.continuation);
    print({ won: true, action_id: taken.action.actionId, error: null, message: null });
  } catch (err) {
    print({ won: false, action_id: null, ...describe(err) });
  } finally {
    await store.close();
  }
}

async function executeMany(p: ExecuteManyPayload): Promise<void> {
  const store = await open(p);
  const control = new Control({ policy: loadPolicy(PROCESS_POLICY_YAML), store, principal: PROCESS_PRINCIPAL, logger: { warn() {} } });
  const counts = { executed: 0, duplicate_committed: 0, duplicate_in_progress: 0, ambiguous: 0, doubles: 0, other: {} as Record<string, number> };
  print({ progress: 0, stage: 'opened' });
  await barrier(p.rendezvous_dir, p.contenders, p.rendezvous_timeout);
  print({ progress: 0, stage: 'racing' });
  const started = Date.now();
  let done = 0;
  for (const key of p.keys) {
    // The parent's watchdog kills a worker that goes quiet, not one that is slow.
    if (++done % p.progress_every === 0) print({ progress: done });
    const action = createAction({ name: 'race.run', arguments: { key }, principal: PROCESS_PRINCIPAL });
    try {
      await control.execute(action, () => {
        try {
          callRemote(p.marker_dir, `race:${key}`);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'EEXIST') counts.doubles++;
          throw err;
        }
        return { key };
      });
      counts.executed++;
    } catch (err) {
      const e = err as { name?: string; state?: string };
      if (e.name === 'DuplicateEffect') counts[e.state === 'committed' ? 'duplicate_committed' : 'duplicate_in_progress']++;
      else if (e.name === 'AmbiguousEffect') counts.ambiguous++;
      else {
        const name = e.name ?? 'Error';
        counts.other[name] = (counts.other[name] ?? 0) + 1;
      }
    }
  }
  const elapsedMs = Date.now() - started;
  await store.close();
  print({ ...counts, elapsed_ms: elapsedMs, started_at: started });
}

async function hang(p: HangPayload): Promise<void> {
  const store = await open(p);
  const control = new Control({ policy: loadPolicy(PROCESS_POLICY_YAML), store, principal: PROCESS_PRINCIPAL, lease: p.lease_ms, logger: { warn() {} } });
  const action = createAction({ name: 'crash.refund', arguments: { reference: p.reference, amount: 2500 }, principal: PROCESS_PRINCIPAL });
  await control.execute(action, async (_args, context) => {
    print({ executing: true, action_id: action.actionId, effect_key: context.effectKey });
    // The executor "runs" until the parent kills this process; the interval keeps it alive.
    setInterval(() => undefined, 60_000);
    await new Promise(() => undefined);
  });
}

/** Every refund through `Control.execute` against the policy's budget; prints each outcome (`committed`, `failed`, or the refusal's reason). */
async function refundBudget(p: RefundBudgetPayload): Promise<void> {
  const store = await open(p);
  const control = new Control({ policy: loadPolicy(p.policy), store, principal: PROCESS_PRINCIPAL, logger: { warn() {} } });
  const outcomes: { payment_id: string; amount: number; outcome: string }[] = [];
  print({ progress: 0, stage: 'opened' });
  await barrier(p.rendezvous_dir, p.contenders, p.rendezvous_timeout);
  let done = 0;
  for (const r of p.refunds) {
    if (++done % p.progress_every === 0) print({ progress: done });
    const action = createAction({ name: 'budget.refund', arguments: { payment_id: r.payment_id, amount: r.amount }, principal: PROCESS_PRINCIPAL });
    try {
      await control.execute(action, () => {
        if (r.fail) throw new NotExecuted('card declined');
        return { refunded: r.amount };
      });
      outcomes.push({ ...r, outcome: 'committed' });
    } catch (err) {
      const e = err as { name?: string; reason?: string };
      outcomes.push({ ...r, outcome: e.name === 'NotExecuted' ? 'failed' : `${e.name ?? 'Error'}:${e.reason ?? ''}` });
    }
  }
  await store.close();
  print({ outcomes });
}

async function grant(p: GrantPayload): Promise<void> {
  const store = await open(p);
  print({ stage: 'opened' });
  try {
    const approval = await store.grantApproval(p.approval_id, p.approver, p.verified);
    print({ granted: true, reason: null, approver: approval.approver, error: null, message: null });
  } catch (err) {
    print({ granted: false, reason: (err as { reason?: string }).reason ?? null, ...describe(err) });
  } finally {
    await store.close();
  }
}

const payload = await readPayload();
switch (payload.kind) {
  case 'grant':
    await grant(payload);
    break;
  case 'reserve':
    await reserve(payload);
    break;
  case 'take':
    await take(payload);
    break;
  case 'execute-many':
    await executeMany(payload);
    break;
  case 'hang':
    await hang(payload);
    break;
  case 'refund-budget':
    await refundBudget(payload);
    break;
}
