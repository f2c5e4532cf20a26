/**
 * Anchors kept by a Durable Object (spec 05 §5.2): deploy {@link AnchorLedger} in **another**
 * Cloudflare account or namespace than the store it anchors, so that whoever can rewrite the
 * store's database cannot rewrite its anchors. The object keeps an append-only table in its own
 * SQLite storage (no statement here updates or deletes a row) and answers the kernel's signed
 * anchor protocol (`anchorEndpoint`, HMAC under `CTRLRUN_ANCHOR_SECRET`); the anchored side
 * reaches it with `httpAnchorProvider({ url, secret })` (or a service binding as its `fetch`).
 * Web-standard globals only.
 *
 * @module
 */
import { anchorEndpoint, checkAnchor, InvalidArgument, type Anchor, type AnchorProvider } from '@ctrlrun/kernel';
import type { DurableObjectSqlStorage } from './index.js';

const TABLE = 'ctrlrun_anchor_log';

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** An {@link AnchorProvider} over a Durable Object's SQL storage: an append-only table of anchors. */
export function durableObjectAnchors(storage: DurableObjectSqlStorage, options: { clock?: () => Date } = {}): AnchorProvider {
  if (typeof storage?.sql?.exec !== 'function') throw new InvalidArgument('storage must be a SQLite-backed Durable Object storage (ctx.storage)');
  const clock = options.clock ?? (() => new Date());
  const sql = storage.sql;
  sql.exec(
    `CREATE TABLE IF NOT EXISTS ${TABLE}(n INTEGER PRIMARY KEY AUTOINCREMENT, token TEXT NOT NULL UNIQUE, seq INTEGER NOT NULL, hash TEXT NOT NULL, kind TEXT NOT NULL, at TEXT NOT NULL)`,
  );
  const read = (query: string, ...bindings: unknown[]): Anchor[] =>
    sql
      .exec(query, ...bindings)
      .toArray()
      .map((r, i) => checkAnchor({ seq: r['seq'], hash: r['hash'], token: r['token'], kind: r['kind'], at: r['at'] }, `anchor row ${i + 1}`));
  return {
    name: 'durable object',
    async make(seq, hash, kind) {
      const token = `anc_${hex(crypto.getRandomValues(new Uint8Array(16)))}`;
      const a = checkAnchor({ seq, hash, kind, token, at: clock().toISOString() }, 'the new anchor');
      sql.exec(`INSERT INTO ${TABLE}(token, seq, hash, kind, at) VALUES (?, ?, ?, ?, ?)`, a.token, a.seq, a.hash, a.kind, a.at);
      return { token: a.token, at: a.at };
    },
    async check(seq, hash, token) {
      return sql.exec(`SELECT 1 AS x FROM ${TABLE} WHERE token = ? AND seq = ? AND hash = ?`, token, seq, hash).toArray().length === 1;
    },
    async latest() {
      return read(`SELECT seq, hash, token, kind, at FROM ${TABLE} ORDER BY seq DESC, n DESC LIMIT 1`)[0] ?? null;
    },
    async since(seq) {
      return read(`SELECT seq, hash, token, kind, at FROM ${TABLE} WHERE seq >= ? ORDER BY seq, n`, seq);
    },
  };
}

/**
 * The anchor ledger as a Durable Object class (declare it under `new_sqlite_classes`): its `fetch`
 * is the kernel's `anchorEndpoint` over {@link durableObjectAnchors}, its secret the binding
 * `CTRLRUN_ANCHOR_SECRET`. Route the Worker's requests to one object (`idFromName('anchors')`).
 */
export class AnchorLedger {
  readonly #handle: (request: Request) => Promise<Response>;
  constructor(ctx: { storage: DurableObjectSqlStorage }, env: { CTRLRUN_ANCHOR_SECRET?: string }) {
    const secret = env?.CTRLRUN_ANCHOR_SECRET;
    if (typeof secret !== 'string' || secret.length < 16) throw new InvalidArgument('bind CTRLRUN_ANCHOR_SECRET (at least 16 characters) as a secret');
    this.#handle = anchorEndpoint({ secret, provider: durableObjectAnchors(ctx.storage) });
  }

  fetch(request: Request): Promise<Response> {
    return this.#handle(request);
  }
}
