// Diagnostic (not a bench section): where one caller's time goes on a better-sqlite3 file. The
// same allowed action through Control and its statements replayed bare (as the better-sqlite3
// section's floor), interleaved slices in one run, with the time inside better-sqlite3's own calls
// (BEGIN and COMMIT apart from the other statements) measured on both sides. What Control spends
// beyond the floor is then split: its statements running slower than the same statements bare,
// and the rest (the kernel's JavaScript between them). `tsx scripts/bench/_diag-sql-time.ts`.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Control, createAction } from '@ctrlrun/kernel';
import { createBetterSqlite3Store } from '@ctrlrun/store-node/better-sqlite3';
import { bareReplay, type RecordedOp } from './_bare-replay.js';
import { ALLOW_REFUND_POLICY as policy, BENCH_PRINCIPAL as principal } from './_allowed-refund.js';

/** Seconds inside better-sqlite3's calls, by kind, while `on`; and the statements of one action while `recording`. */
const inside = { ends: 0, statements: 0, on: false, recording: null as RecordedOp[] | null };
const prepare = Database.prototype.prepare;
Database.prototype.prepare = function (this: Database.Database, sql: string) {
  const statement = prepare.call(this, sql);
  const kind = /^BEGIN\b/.test(sql) ? 'begin' : sql.trim() === 'COMMIT' ? 'commit' : 'query';
  const timed = <F extends (...a: unknown[]) => unknown>(f: F): F =>
    ((...args: unknown[]) => {
      if (inside.recording) inside.recording.push(kind === 'query' ? { kind, sql, params: [...(args[0] as unknown[])] } : { kind });
      if (!inside.on) return f(...args);
      const t0 = performance.now();
      try {
        return f(...args);
      } finally {
        inside[kind === 'query' ? 'statements' : 'ends'] += (performance.now() - t0) / 1000;
      }
    }) as F;
  statement.run = timed(statement.run.bind(statement) as (...a: unknown[]) => unknown) as typeof statement.run;
  statement.all = timed(statement.all.bind(statement) as (...a: unknown[]) => unknown) as typeof statement.all;
  return statement;
} as typeof prepare;

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-diag-sqltime-'));
const store = await createBetterSqlite3Store(join(dir, 'control.db'));
const control = new Control({ policy, store, logger: { warn() {} } });
let n = 0;
const viaControl = async () => {
  n++;
  await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `txn_${n}`, amount: 50000 }, principal }), () => ({ ok: true }));
};
await viaControl();
inside.recording = [];
await viaControl();
const recorded = inside.recording;
inside.recording = null;

// The floor: the recorded statements replayed bare, as the better-sqlite3 section's (its calls timed here too).
await (await createBetterSqlite3Store(join(dir, 'floor.db'))).close();
const floor = bareReplay(join(dir, 'floor.db'), recorded);
const bare = floor.one;

for (let k = 0; k < 3000; k++) {
  await viaControl();
  bare();
}
const sides = { control: { n: 0, secs: 0, ends: 0, statements: 0 }, bare: { n: 0, secs: 0, ends: 0, statements: 0 } };
for (let r = 0; r < Number(process.env['DIAG_ROUNDS'] ?? 10); r++) {
  for (const side of ['control', 'bare'] as const) {
    Object.assign(inside, { ends: 0, statements: 0, on: true });
    const start = performance.now();
    let done = 0;
    while (performance.now() - start < 400) {
      if (side === 'control') await viaControl();
      else bare();
      done++;
    }
    inside.on = false;
    const s = sides[side];
    s.n += done;
    s.secs += (performance.now() - start) / 1000;
    s.ends += inside.ends;
    s.statements += inside.statements;
  }
}
const us = (secs: number, count: number) => ((secs / count) * 1e6).toFixed(1).padStart(6);
for (const [side, s] of Object.entries(sides)) {
  console.log(
    `${side.padEnd(8)} ${us(s.secs, s.n)} µs per action: BEGIN+COMMIT ${us(s.ends, s.n)}, other statements ${us(s.statements, s.n)}, the rest ${us(s.secs - s.ends - s.statements, s.n)}`,
  );
}
const [c, b] = [sides.control, sides.bare];
const slower = (c.ends + c.statements) / c.n - (b.ends + b.statements) / b.n;
const beyond = c.secs / c.n - b.secs / b.n;
console.log(
  `Control / bare ${((b.secs / b.n / (c.secs / c.n)) * 100).toFixed(0)}%; Control's ${(beyond * 1e6).toFixed(1)} µs more per action: the same statements running ${(slower * 1e6).toFixed(1)} µs slower, the kernel's own work ${((beyond - slower) * 1e6).toFixed(1)} µs (each call timed on both sides alike)`,
);
console.log(
  `(load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')})`,
);
await store.close();
floor.close();
rmSync(dir, { recursive: true, force: true });
