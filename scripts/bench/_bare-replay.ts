// The floor of the better-sqlite3 figures: the statements the store ran for one allowed action,
// recorded, replayed bare through better-sqlite3 — prepared once, in the same BEGIN IMMEDIATE …
// COMMIT transactions, on a migrated file with the store's pragmas — with a fresh effect key,
// action id and receipt id per action and the receipt placed at the chain head it reads.
import Database from 'better-sqlite3';
import { randomIds } from '@ctrlrun/kernel';

/** One recorded step of an action: a transaction's start or end, or a statement and its parameters. */
export type RecordedOp = { kind: 'begin' | 'commit' } | { kind: 'query'; sql: string; params: readonly unknown[] };

/** `recorded` replayed bare on the database file at `path` (migrated by the store first), one action per `one()`. */
export function bareReplay(path: string, recorded: readonly RecordedOp[]): { one: () => void; close: () => void } {
  const db = new Database(path, { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  const queries = recorded.filter((o): o is Extract<RecordedOp, { kind: 'query' }> => o.kind === 'query');
  const reservation = queries.find((q) => /INSERT INTO effects/.test(q.sql));
  if (reservation === undefined) throw new Error('the recorded action reserved no effect key');
  const [key, actionId] = [reservation.params[0], reservation.params[2]];
  const statements = new Map(queries.map((q) => [q.sql, db.prepare(q.sql)]));
  let i = 0;
  return {
    one() {
      i++;
      let seq: unknown = null;
      // Random ids, as the kernel mints them: a receipt id lands at a random place in its index.
      const [act, ctr] = [randomIds('act'), randomIds('ctr')];
      for (const op of recorded) {
        if (op.kind !== 'query') (op.kind === 'begin' ? begin : commit).run();
        else {
          const params = op.params.map((p) =>
            p === key ? `refund:bare_${i}` : p === actionId ? act : typeof p === 'string' && p.startsWith('ctr_') ? ctr : p,
          );
          if (/^INSERT INTO receipts/.test(op.sql)) params[6] = seq;
          const st = statements.get(op.sql)!;
          if (st.reader) {
            const rows = st.all(...params) as Record<string, unknown>[];
            if (/receipt_chain/.test(op.sql)) seq = rows[0]!['seq'];
          } else st.run(...params);
        }
      }
    },
    close: () => db.close(),
  };
}
