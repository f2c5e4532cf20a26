// Kernel figures, measured in one run: policy evaluations/s; allowed actions/s through
// Control.execute on in-memory sql.js; and the floor — the very statements the store ran for one
// action (recorded), replayed bare on sql.js with prepared statements in the same transactions.
import initSqlJs from 'sql.js';
import { Control, loadPolicy, createAction, randomIds } from '@ctrlrun/kernel';
import { openSqlStateStore, type SqlDriver, type SqlExecutor, type SqlValue } from '@ctrlrun/kernel/store';
import { DEMO_POLICY_YAML } from '@ctrlrun/kernel/demo';
import { SqlJsDriver } from '@ctrlrun/store-sqljs';

const SQL = await initSqlJs();

function timeFor(ms: number, fn: (i: number) => void): number {
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < ms) fn(n++);
  return n / ((performance.now() - start) / 1000);
}

async function timeForAsync(ms: number, fn: (i: number) => Promise<void>): Promise<number> {
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < ms) await fn(n++);
  return n / ((performance.now() - start) / 1000);
}

// 1. Policy evaluations per second (demo policy, a mix of outcomes).
const policy = loadPolicy(DEMO_POLICY_YAML);
const mix = [
  ['stripe.refund', { amount: 50000 }],
  ['stripe.refund', { amount: 500000 }],
  ['stripe.refund', { amount: 5000000 }],
  ['customer.read', {}],
  ['unknown.thing', {}],
] as const;
timeFor(300, (i) => void policy.evaluate(mix[i % 5]![0], mix[i % 5]![1]));
const evals = timeFor(1500, (i) => void policy.evaluate(mix[i % 5]![0], mix[i % 5]![1]));

// 2. Allowed actions per second through the kernel, and the statements of one action, recorded.
type Op = { kind: 'begin' | 'commit' | 'rollback' } | { kind: 'query'; sql: string; params: readonly SqlValue[] };
let log: Op[] | null = null;
function recording(inner: SqlDriver): SqlDriver {
  const wrap = (ex: SqlExecutor): SqlExecutor => ({
    query: (sql, params = []) => {
      log?.push({ kind: 'query', sql, params });
      return ex.query(sql, params);
    },
    exec: (sql) => ex.exec(sql),
  });
  const outer = wrap(inner);
  return {
    name: inner.name,
    dialect: inner.dialect,
    capabilities: inner.capabilities,
    query: outer.query,
    exec: outer.exec,
    close: () => inner.close(),
    transaction: async (fn) => {
      log?.push({ kind: 'begin' });
      try {
        const r = await inner.transaction((tx) => fn(wrap(tx)));
        log?.push({ kind: 'commit' });
        return r;
      } catch (e) {
        log?.push({ kind: 'rollback' });
        throw e;
      }
    },
  };
}
const driver = await SqlJsDriver.open(SQL);
// The store's connection settings, read back, so that the floors run the same engine.
const settings = await Promise.all(
  ['journal_mode', 'locking_mode'].map(async (p) => `PRAGMA ${p} = ${String(Object.values((await driver.query(`PRAGMA ${p}`)).rows[0]!)[0])}`),
);
const principal = { agent: 'bench-agent' };
function controlOn(store: Awaited<ReturnType<typeof openSqlStateStore>>): (i: number) => Promise<void> {
  const control = new Control({ policy, store, logger: { warn() {} } });
  return async (i: number) => {
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: `txn_${i}`, amount: 50000 }, principal });
    await control.execute(action, () => ({ ok: true }), { effectKey: `refund:txn_${i}` });
  };
}
// The statements are recorded on a store of their own; the measured one runs unwrapped.
const recordOne = controlOn(await openSqlStateStore(recording(await SqlJsDriver.open(SQL))));
await recordOne(0);
log = [];
await recordOne(1_000_000);
const recorded = log;
log = null;
const one = controlOn(await openSqlStateStore(driver));
// A long warm-up: the kernel's path needs thousands of calls before V8 has optimised it (the
// floors' few lines need far fewer); every side is warmed the same number of times.
const WARM = 3000;
for (let i = 0; i < WARM; i++) await one(i);
let next = 2_000_000;

// 2b. A budgeted allowed action beside the same action under the same grant without budgets:
// what the predicate (the window's sums) and the ledger rows add to the reservation transaction.
const grantPolicy = (budgets: string) =>
  loadPolicy(`schema: ctrlrun.policy/v7
authority:
  grants:
    - id: refund-desk
      subject: { agent: "bench-agent" }
      actions: ["stripe.refund"]
${budgets}actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`);
function grantedOn(store: Awaited<ReturnType<typeof openSqlStateStore>>, budgets: string): (i: number) => Promise<void> {
  const control = new Control({ policy: grantPolicy(budgets), store, logger: { warn() {} } });
  return async (i: number) => {
    await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `txn_${i}`, amount: 50000 }, principal }), () => ({ ok: true }));
  };
}
const BUDGETS = '      budgets: [{metric: amount, limit: 1000000000000000, window: P1D}, {metric: count, limit: 1000000000000, window: PT1H}]\n';
const unbudgeted = grantedOn(await openSqlStateStore(await SqlJsDriver.open(SQL)), '');
const budgeted = grantedOn(await openSqlStateStore(await SqlJsDriver.open(SQL)), BUDGETS);
for (let i = 0; i < WARM; i++) {
  await unbudgeted(i);
  await budgeted(i);
}
let nu = WARM;
let nb = WARM;

// 3. The floor: replay the recorded statements bare, with fresh ids each time.
const schemaDriver = await SqlJsDriver.open(SQL);
await openSqlStateStore(schemaDriver); // a migrated, empty database to replay into
const bareDb = new SQL.Database(await schemaDriver.export());
for (const pragma of settings) bareDb.exec(pragma);
const stmts = new Map<string, ReturnType<typeof bareDb.prepare>>();
const prep = (sql: string) => {
  let s = stmts.get(sql);
  if (!s) stmts.set(sql, (s = bareDb.prepare(sql)));
  return s;
};
const beginS = bareDb.prepare('BEGIN IMMEDIATE');
const commitS = bareDb.prepare('COMMIT');
const origKey = 'refund:txn_1000000';
const origAction = (recorded.find((o) => o.kind === 'query' && o.params.includes(origKey)) as { params: SqlValue[] } | undefined)?.params.find(
  (p) => typeof p === 'string' && p.startsWith('act_'),
) as string;
const replay = (i: number) => {
  const key = `refund:bare_${i}`;
  // Random ids, as the kernel mints them: a receipt id lands at a random place in its index.
  const act = randomIds('act');
  const ctr = randomIds('ctr');
  let seq: SqlValue = null;
  for (const op of recorded) {
    if (op.kind === 'begin') beginS.run();
    else if (op.kind === 'commit') commitS.run();
    else if (op.kind === 'query') {
      const params = op.params.map((p) => {
        if (typeof p !== 'string') return p;
        if (p === origKey) return key;
        if (p === origAction) return act;
        if (p.startsWith('ctr_')) return ctr;
        return p;
      });
      const st = prep(op.sql);
      if (/receipt_chain/.test(op.sql) && /RETURNING/i.test(op.sql)) {
        st.bind(params as never);
        st.step();
        seq = st.get()[0] as SqlValue;
        st.reset();
        continue;
      }
      if (/INSERT INTO receipts/i.test(op.sql)) params[6] = seq;
      st.bind(params as never);
      while (st.step()) st.get();
      st.reset();
    }
  }
};
for (let i = 0; i < WARM; i++) replay(i);
let b = WARM;
// 4. The minimal floor: what a reservation and its outcome cost at the least — BEGIN IMMEDIATE;
// INSERT; COMMIT; BEGIN IMMEDIATE; UPDATE; COMMIT on a one-index table, prepared.
// On the store's settings, and for scale on sql.js's defaults (a journal file in its in-memory file system, shared locking).
function minimalOn(storeSettings: boolean): (i: number) => void {
  const minDb = new SQL.Database();
  if (storeSettings) for (const pragma of settings) minDb.exec(pragma);
  minDb.run('CREATE TABLE effects_min(k TEXT PRIMARY KEY, state TEXT NOT NULL)');
  const [mb, mc] = [minDb.prepare('BEGIN IMMEDIATE'), minDb.prepare('COMMIT')];
  const mi = minDb.prepare('INSERT INTO effects_min(k, state) VALUES (?, ?)');
  const mu = minDb.prepare('UPDATE effects_min SET state = ? WHERE k = ?');
  return (i: number) => {
    mb.run();
    mi.run([`k${i}`, 'executing']);
    mc.run();
    mb.run();
    mu.run(['committed', `k${i}`]);
    mc.run();
  };
}
const minimal = minimalOn(true);
const minimalDefault = minimalOn(false);
for (let i = 0; i < WARM; i++) {
  minimal(i);
  minimalDefault(i);
}
let m = WARM;
// Interleaved slices (10 × 300 ms each), so that a change in the machine's load hits all four alike.
const totals = { actions: [0, 0], floor: [0, 0], minimal: [0, 0], minimalDefault: [0, 0], unbudgeted: [0, 0], budgeted: [0, 0] };
// This process's CPU time (user + system) per side, which other processes' load barely moves.
const cpuMs = { actions: 0, floor: 0, minimal: 0, minimalDefault: 0, unbudgeted: 0, budgeted: 0 };
let md = WARM;
for (let k = 0; k < 10; k++) {
  for (const [side, run] of [
    ['actions', () => timeForAsync(300, () => one(next++))],
    ['floor', async () => timeFor(300, () => replay(b++))],
    ['minimal', async () => timeFor(300, () => minimal(m++))],
    ['minimalDefault', async () => timeFor(300, () => minimalDefault(md++))],
    ['unbudgeted', () => timeForAsync(300, () => unbudgeted(nu++))],
    ['budgeted', () => timeForAsync(300, () => budgeted(nb++))],
  ] as const) {
    const t0 = performance.now();
    const cpu = process.cpuUsage();
    const rate = await run();
    const secs = (performance.now() - t0) / 1000;
    const used = process.cpuUsage(cpu);
    cpuMs[side] += (used.user + used.system) / 1000;
    totals[side][0]! += rate * secs;
    totals[side][1]! += secs;
  }
}
const [actions, floor, minimalFloor, minimalDefaultFloor] = (['actions', 'floor', 'minimal', 'minimalDefault'] as const).map(
  (k) => totals[k][0]! / totals[k][1]!,
) as [number, number, number, number];
const txPerAction = recorded.filter((o) => o.kind === 'begin').length;
const stmtPerAction = recorded.filter((o) => o.kind === 'query').length;

console.log(`store settings                  ${settings.join('; ')}`);
console.log(`policy evaluations/s            ${Math.round(evals).toLocaleString('en-US')}   (target ≥ 500,000)`);
console.log(
  `allowed actions/s (Control)     ${Math.round(actions).toLocaleString('en-US')}   sql.js in memory, ${txPerAction} transactions and ${stmtPerAction} statements per action`,
);
console.log(`floor: same SQL bare, actions/s ${Math.round(floor).toLocaleString('en-US')}   prepared, same transactions, the store's settings, no kernel`);
console.log(`ratio kernel / floor            ${((actions / floor) * 100).toFixed(0)}%   (target ≥ 75%)`);
console.log(
  `minimal floor, actions/s        ${Math.round(minimalFloor).toLocaleString('en-US')}   BEGIN IMMEDIATE; INSERT; COMMIT; BEGIN IMMEDIATE; UPDATE; COMMIT, prepared, the store's settings`,
);
console.log(`ratio kernel / minimal floor    ${((actions / minimalFloor) * 100).toFixed(0)}%   (target ≥ 25%)`);
console.log(
  `  the same SQL bare / minimal floor ${((floor / minimalFloor) * 100).toFixed(0)}%   the most any kernel could reach: the statements themselves, with no kernel at all`,
);
const perCpu = (k: keyof typeof cpuMs) => (totals[k][0]! / cpuMs[k]) * 1000;
console.log(
  `per CPU-second: Control ${Math.round(perCpu('actions')).toLocaleString('en-US')}, floor ${Math.round(perCpu('floor')).toLocaleString('en-US')} (${((perCpu('actions') / perCpu('floor')) * 100).toFixed(0)}%), minimal ${Math.round(perCpu('minimal')).toLocaleString('en-US')} (${((perCpu('actions') / perCpu('minimal')) * 100).toFixed(0)}%)   (this process's user + system time)`,
);
const [withBudget, withoutBudget] = [totals.budgeted[0]! / totals.budgeted[1]!, totals.unbudgeted[0]! / totals.unbudgeted[1]!];
console.log(
  `budgeted allowed actions/s      ${Math.round(withBudget).toLocaleString('en-US')}   beside ${Math.round(withoutBudget).toLocaleString('en-US')} unbudgeted under the same grant (${((withBudget / withoutBudget) * 100).toFixed(0)}%; ${(1000 / withBudget - 1000 / withoutBudget).toFixed(3)} ms more each): two budgets, their window sums and ledger rows in the reservation, ${nb.toLocaleString('en-US')} rows in the window by the end`,
);
console.log(
  `minimal floor, sql.js defaults  ${Math.round(minimalDefaultFloor).toLocaleString('en-US')}   the same on sql.js's defaults; kernel / it ${((actions / minimalDefaultFloor) * 100).toFixed(0)}%`,
);
