// Diagnostic (not a bench section): a better-sqlite3 file store, synchronous NORMAL and FULL, with
// group commit and one commit each, 1 and 8 callers of one Control — interleaved slices in one run,
// allowed actions/s — and the COMMITs per action (BEGIN IMMEDIATE counted on the connection).
// `tsx scripts/bench/_diag-sqlite.ts`.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Control, createAction } from '@ctrlrun/kernel';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { ALLOW_REFUND_POLICY as policy, BENCH_PRINCIPAL as principal } from './_allowed-refund.js';

// Every BEGIN IMMEDIATE prepared on any connection, counted when it runs.
let begins = 0;
const prepare = Database.prototype.prepare;
Database.prototype.prepare = function (this: Database.Database, sql: string) {
  const statement = prepare.call(this, sql);
  if (sql.trim().startsWith('BEGIN')) {
    const run = statement.run.bind(statement) as () => Database.RunResult;
    statement.run = (() => (begins++, run())) as typeof statement.run;
  }
  return statement;
} as typeof prepare;

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-diag-sqlite-'));
const subjects: { label: string; callers: number; control: Control }[] = [];
for (const synchronous of ['NORMAL', 'FULL'] as const) {
  for (const groupCommit of [true, false]) {
    const store = await createBetterSqlite3Store(join(dir, `${synchronous}-${groupCommit}.db`), { synchronous, groupCommit });
    const control = new Control({ policy, store, logger: { warn() {} } });
    for (const callers of [1, 8]) subjects.push({ label: `${synchronous} ${groupCommit ? 'group' : 'each '}`, callers, control });
  }
}
let n = 0;
const slice = async (s: (typeof subjects)[number], ms: number) => {
  const start = performance.now();
  let done = 0;
  await Promise.all(
    Array.from({ length: s.callers }, async () => {
      while (performance.now() - start < ms) {
        await s.control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `p${n++}`, amount: 500 }, principal }), () => ({ ok: true }));
        done++;
      }
    }),
  );
  return { done, secs: (performance.now() - start) / 1000 };
};
for (const s of subjects) await slice(s, 200);
const acc = subjects.map(() => ({ done: 0, secs: 0, begins: 0 }));
for (let r = 0; r < Number(process.env['DIAG_ROUNDS'] ?? 5); r++) {
  for (const i of r % 2 === 0 ? subjects.keys() : [...subjects.keys()].reverse()) {
    const b0 = begins;
    const { done, secs } = await slice(subjects[i]!, 300);
    acc[i]!.done += done;
    acc[i]!.secs += secs;
    acc[i]!.begins += begins - b0;
  }
}
subjects.forEach((s, i) => {
  const a = acc[i]!;
  console.log(
    `${s.label} ${s.callers} caller(s): ${(a.done / a.secs).toFixed(0).padStart(6)} actions/s, ${(a.begins / a.done).toFixed(2)} transactions per action`,
  );
});
console.log(
  `(load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')})`,
);
rmSync(dir, { recursive: true, force: true });
