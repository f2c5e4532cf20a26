// better-sqlite3 figures, measured in one run: allowed actions/s through Control.execute on a
// SQLite file (WAL, synchronous=NORMAL), and the floor — the statements the store ran for one
// action (recorded), replayed bare through better-sqlite3 with prepared statements in the same
// BEGIN IMMEDIATE … COMMIT transactions, on a file with the same pragmas. Also Control with
// synchronous=FULL, for scale.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Control, createAction, loadPolicy } from '@ctrlrun/kernel';
import { openSqlStateStore, type SqlDriver, type SqlExecutor } from '@ctrlrun/kernel/store';
import { BetterSqlite3Driver, createBetterSqlite3Store, type BetterSqlite3Database } from '@ctrlrun/store-node/better-sqlite3';
import { bareReplay, type RecordedOp } from './_bare-replay.js';
import { ALLOW_REFUND_POLICY as policy, BENCH_PRINCIPAL as principal } from './_allowed-refund.js';

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-bench-bs3-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

async function rate(ms: number, fn: () => Promise<void> | void): Promise<number> {
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < ms) {
    await fn();
    n++;
  }
  return n / ((performance.now() - start) / 1000);
}

function controlOn(store: ConstructorParameters<typeof Control>[0]['store']): () => Promise<void> {
  const control = new Control({ policy, store, logger: { warn() {} } });
  let i = 0;
  return async () => {
    i++;
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: `txn_${i}`, amount: 50000 }, principal });
    await control.execute(action, () => ({ ok: true }));
  };
}

// 1. Record the statements of one allowed action, through the same driver class.
const recorded: RecordedOp[] = [];
let recording = false;
function recorder(inner: SqlDriver): SqlDriver {
  const wrap = (ex: SqlExecutor): SqlExecutor => ({
    query: (sql, params = []) => {
      if (recording) recorded.push({ kind: 'query', sql, params });
      return ex.query(sql, params);
    },
    exec: (sql) => ex.exec(sql),
  });
  return {
    name: inner.name,
    dialect: inner.dialect,
    capabilities: inner.capabilities,
    ...wrap(inner),
    close: () => inner.close(),
    async transaction(fn) {
      if (recording) recorded.push({ kind: 'begin' });
      const out = await inner.transaction((tx) => fn(wrap(tx)));
      if (recording) recorded.push({ kind: 'commit' });
      return out;
    },
  };
}
{
  await (await createBetterSqlite3Store(join(dir, 'record.db'))).close();
  const store = await openSqlStateStore(recorder(new BetterSqlite3Driver(new Database(join(dir, 'record.db')) as unknown as BetterSqlite3Database)));
  const one = controlOn(store);
  await one();
  recording = true;
  await one();
  recording = false;
  await store.close();
}
const txPerAction = recorded.filter((o) => o.kind === 'begin').length;
const statementsPerAction = recorded.filter((o) => o.kind === 'query').length;

// The minimal floor: a reservation and its outcome at the least — BEGIN IMMEDIATE; INSERT;
// COMMIT; BEGIN IMMEDIATE; UPDATE; COMMIT — on a file with the same pragmas.
function minimalOn(path: string): { one: () => void; close: () => void } {
  const db = new Database(path, { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE effects_min(k TEXT PRIMARY KEY, state TEXT NOT NULL)');
  const [begin, commit] = [db.prepare('BEGIN IMMEDIATE'), db.prepare('COMMIT')];
  const insert = db.prepare('INSERT INTO effects_min(k, state) VALUES (?, ?)');
  const update = db.prepare('UPDATE effects_min SET state = ? WHERE k = ?');
  let i = 0;
  return {
    one() {
      i++;
      begin.run();
      insert.run(`k${i}`, 'executing');
      commit.run();
      begin.run();
      update.run('committed', `k${i}`);
      commit.run();
    },
    close: () => db.close(),
  };
}

// Transactions and statements of an approved action and of a refused duplicate, recorded the same way.
async function recordedCounts(run: (control: Control, store: Awaited<ReturnType<typeof openSqlStateStore>>) => Promise<void>): Promise<string> {
  const path = join(dir, `count-${recorded.length}-${Math.random().toString(16).slice(2)}.db`);
  await (await createBetterSqlite3Store(path)).close();
  const store = await openSqlStateStore(recorder(new BetterSqlite3Driver(new Database(path) as unknown as BetterSqlite3Database)));
  const control = new Control({ policy: loadPolicy(APPROVE_POLICY), store, logger: { warn() {} } });
  const before = recorded.length;
  await run(control, store);
  const ops = recorded.splice(before);
  await store.close();
  return `${ops.filter((o) => o.kind === 'begin').length} transactions / ${ops.filter((o) => o.kind === 'query').length} statements`;
}
const APPROVE_POLICY = `schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: {amount_lte: 100000}
        decision: allow
      - decision: approve
`;
const approvedCounts = await recordedCounts(async (control) => {
  const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_a', amount: 500000 }, principal });
  const id = await control.execute(action, () => 'never').catch((e: { requestId: string }) => e.requestId);
  await control.grantApproval(id, { approver: 'bench' });
  recording = true;
  await control.execute(action, () => ({ ok: true }), { approvalId: id });
  recording = false;
});
const duplicateCounts = await recordedCounts(async (control) => {
  await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_d', amount: 500 }, principal }), () => ({ ok: true }));
  recording = true;
  await control
    .execute(createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_d', amount: 500 }, principal }), () => 'never')
    .catch(() => undefined);
  recording = false;
});

// Interleaved slices, so that a change in the machine's load hits both sides alike.
const SLICES = 10;
const SLICE_MS = 400;
const store = await createBetterSqlite3Store(join(dir, 'control.db'));
const oneControl = controlOn(store);
const bare = join(dir, 'floor.db');
await (await createBetterSqlite3Store(bare)).close();
const floor = bareReplay(bare, recorded);
const minimal = minimalOn(join(dir, 'minimal.db'));
// A long warm-up: the kernel's path needs thousands of calls before V8 has optimised it (the
// floors' few lines need far fewer); every side is warmed the same number of times.
for (let k = 0; k < 3000; k++) {
  await oneControl();
  floor.one();
  minimal.one();
}
// Wall time, and this process's CPU time (user + system), which other processes' load barely moves.
const totals = { control: { n: 0, ms: 0, cpuMs: 0 }, floor: { n: 0, ms: 0, cpuMs: 0 }, minimal: { n: 0, ms: 0, cpuMs: 0 } };
async function slice(side: 'control' | 'floor' | 'minimal', fn: () => Promise<void> | void): Promise<void> {
  const start = performance.now();
  const cpu = process.cpuUsage();
  let n = 0;
  while (performance.now() - start < SLICE_MS) {
    await fn();
    n++;
  }
  const used = process.cpuUsage(cpu);
  totals[side].n += n;
  totals[side].ms += performance.now() - start;
  totals[side].cpuMs += (used.user + used.system) / 1000;
}
for (let i = 0; i < SLICES; i++) {
  await slice('control', oneControl);
  await slice('floor', floor.one);
  await slice('minimal', minimal.one);
}
await store.close();
floor.close();
minimal.close();
const best = {
  control: totals.control.n / (totals.control.ms / 1000),
  floor: totals.floor.n / (totals.floor.ms / 1000),
  minimal: totals.minimal.n / (totals.minimal.ms / 1000),
};
const perCpu = { control: totals.control.n / (totals.control.cpuMs / 1000), floor: totals.floor.n / (totals.floor.cpuMs / 1000) };

const full = await createBetterSqlite3Store(join(dir, 'full.db'), { synchronous: 'FULL' });
const oneFull = controlOn(full);
for (let k = 0; k < 50; k++) await oneFull();
const fullRate = await rate(1500, oneFull);
await full.close();

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
console.log(
  `allowed actions/s (Control)      ${fmt(best.control)}   better-sqlite3 file, WAL, synchronous=NORMAL; ${txPerAction} transactions and ${statementsPerAction} statements per action  (target ≥ 4,000)`,
);
console.log(`floor: same SQL bare, actions/s  ${fmt(best.floor)}   prepared, same BEGIN IMMEDIATE … COMMIT transactions, no kernel`);
console.log(`ratio Control / floor            ${((best.control / best.floor) * 100).toFixed(0)}%   (target ≥ 75%)`);
console.log(`minimal floor, actions/s         ${fmt(best.minimal)}   BEGIN IMMEDIATE; INSERT; COMMIT; BEGIN IMMEDIATE; UPDATE; COMMIT, same pragmas`);
console.log(`ratio Control / minimal floor    ${((best.control / best.minimal) * 100).toFixed(0)}%   (target ≥ 25%)`);
console.log(
  `  same SQL bare / minimal floor   ${((best.floor / best.minimal) * 100).toFixed(0)}%   the most any kernel could reach: the statements themselves, with no kernel at all`,
);
console.log(
  `per action: allowed ${txPerAction} transactions / ${statementsPerAction} statements; approved ${approvedCounts}; refused duplicate ${duplicateCounts}`,
);
console.log(
  `per CPU-second: Control ${fmt(perCpu.control)}, floor ${fmt(perCpu.floor)}, ratio ${((perCpu.control / perCpu.floor) * 100).toFixed(0)}%   (this process's user + system time; other load moves it less)`,
);
console.log(
  `load average at the end          ${(await import('node:os'))
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}   (${(await import('node:os')).cpus().length} CPUs)`,
);
console.log(`allowed actions/s, FULL          ${fmt(fullRate)}   the same with synchronous=FULL (every commit synced)`);
