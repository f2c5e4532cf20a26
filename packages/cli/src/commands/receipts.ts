/**
 * `ctrlrun receipts`: the newest page of receipts, oldest first (`--all` streams every one,
 * `--last N` the last N); `--verify-chain` walks the chain in pages and names each break by its
 * name and seq (any break, even only `unchained`, exits 1). Memory stays bounded by a page
 * whatever the chain's length, on a store with paged reads (every SQL store has them).
 *
 * @module
 */
import { parseJson, verifyStoredChain, type JsonObject, type ReceiptRow, type StateStore } from '@ctrlrun/kernel';
import { offChainReceiptPages, pendingReceiptDocument, receiptPages } from '@ctrlrun/kernel/store';
import { isObject } from '../format.js';
import { STORE_URL, type Command } from '../command.js';
import { storeTarget } from '../discovery.js';
import { CliRefusal, UsageError } from '../errors.js';
import { openAnswerer, openListing } from '../stores.js';

function readDocument(json: string | null): JsonObject | null {
  if (json === null) return null;
  try {
    const doc = parseJson(json, { what: 'receipt', floats: 'allow' });
    return isObject(doc) ? (doc as JsonObject) : null;
  } catch {
    return null;
  }
}

const text = (v: unknown): string => (typeof v === 'string' && v !== '' ? v : '-');

/** Rows per read while streaming. */
const PAGE = 1000;
/** Receipts the default view shows: the newest page. */
export const NEWEST_PAGE = 50;

/** The last `n` rows of `rows` (a ring of at most `n`). */
async function lastOf<T>(rows: AsyncIterable<T>, n: number): Promise<T[]> {
  const ring: T[] = [];
  for await (const row of rows) {
    ring.push(row);
    if (ring.length > n) ring.shift();
  }
  return ring;
}

async function* flat<T>(pages: AsyncIterable<T[]>): AsyncGenerator<T> {
  for await (const page of pages) yield* page;
}

/** The off-chain rows that are pending receipts (see `pendingReceiptDocument`). */
async function countPending(store: StateStore): Promise<number> {
  let n = 0;
  const pages = store.receiptsOffChain ? offChainReceiptPages(store, PAGE) : [(await store.receipts()).filter((r) => r.seq === null)];
  for await (const page of pages) for (const row of page) if (pendingReceiptDocument(row) !== null) n += 1;
  return n;
}

/** `--chain-pending`: chains them, oldest first, and lists what it chained. */
async function chainPending(store: StateStore, out: (line: string) => void, json: (line: string) => void, asJson: boolean): Promise<number> {
  try {
    if (!store.chainPendingReceipts) throw new CliRefusal('this store cannot chain pending receipts');
    const chained = await store.chainPendingReceipts();
    for (const r of chained) {
      if (asJson) json(r.json);
      else
        out(`seq ${r.seq}  ${text(r.document['receipt_id'])}  ${text(r.document['action'])}  ${text(r.document['result'])}  ${text(r.document['effect_key'])}`);
    }
    if (!asJson) out(chained.length === 0 ? 'no pending receipts' : `chained ${chained.length} pending receipt${chained.length === 1 ? '' : 's'}`);
    return 0;
  } finally {
    await store.close();
  }
}

export const receipts: Command = {
  name: 'receipts',
  summary: 'list the chained receipts, or verify the chain',
  positionals: [],
  options: {
    last: { type: 'string', value: 'N', help: `only the last N receipts (N ≥ 1; default ${NEWEST_PAGE})` },
    all: { type: 'boolean', help: 'every receipt, streamed oldest first (overrides --last)' },
    json: { type: 'boolean', help: 'one receipt document per line (with --verify-chain: the chain report)' },
    'verify-chain': { type: 'boolean', help: 'verify the hash chain; every break named by its seq and name (overrides --last and --control)' },
    control: { type: 'string', value: 'ID', help: 'only receipts whose controls cite ID' },
    'chain-pending': {
      type: 'boolean',
      help: 'chain the receipts left pending: an outcome kept with its receipt off the chain, whose writer stopped before chaining it (--verify-chain counts them)',
    },
    'store-url': STORE_URL,
  },
  async run({ io, values, out, err, json }) {
    let last: number | null = null;
    if (values['last'] !== undefined) {
      const raw = values['last'] as string;
      if (!/^[0-9]+$/.test(raw) || !Number.isSafeInteger(Number(raw)) || Number(raw) < 1)
        throw new UsageError(`--last must be a whole number ≥ 1, got ${JSON.stringify(raw)}`);
      last = Number(raw);
    }
    const target = storeTarget(io, values['store-url'] as string | undefined);
    if (values['chain-pending'] === true) {
      const other = ['verify-chain', 'last', 'all', 'control'].filter((k) => values[k] !== undefined && values[k] !== false);
      if (other.length > 0) throw new UsageError(`--chain-pending writes and takes no listing option; drop ${other.map((k) => `--${k}`).join(', ')}`);
      return chainPending(await openAnswerer(target, async () => undefined), out, json, values['json'] === true);
    }
    const store = await openListing(target, err);
    try {
      if (values['verify-chain'] === true) {
        // A chain the original pruned starts after its checkpoint (the receipts before it were deleted on purpose).
        const checkpoint = (await store.pruneCheckpoint?.()) ?? null;
        const report = await verifyStoredChain(store, { pageSize: PAGE });
        const pending = report.unchained === 0 ? 0 : await countPending(store);
        if (values['json'] === true) {
          json(
            JSON.stringify({
              ok: report.ok,
              verified: report.verified,
              chained: report.chained,
              unchained: report.unchained,
              head_seq: report.head_seq,
              head_hash: report.head_hash,
              breaks: report.breaks.map((b) => ({ name: b.name, seq: b.seq, detail: b.detail })),
              column_findings: report.column_findings.map((b) => ({ name: b.name, seq: b.seq, detail: b.detail })),
              pruned_through: checkpoint?.seq ?? null,
              pending,
            }),
          );
        } else {
          out(`chain: ${report.verified} of ${report.chained + report.unchained} receipts verified`);
          if (checkpoint !== null) out(`       receipts up to seq ${checkpoint.seq} were pruned; the chain is verified from its checkpoint`);
          if (report.unchained > pending) out(`       ${report.unchained - pending} written before the chain existed (unchained)`);
          if (pending > 0) {
            out(`       ${pending} pending: an outcome kept with its receipt off the chain, whose writer stopped before chaining it`);
            out('       (ctrlrun receipts --chain-pending chains them)');
          }
          for (const b of report.breaks) out(`  ${b.name}${b.seq === null ? '' : ` at seq ${b.seq}`}: ${b.detail}`);
          if (report.ok) out('the chain is intact');
          if (report.column_findings.length > 0) {
            // Beside the verdict, as the original reports anchors apart: only json is hashed, these columns are never trusted.
            out(`columns that disagree with their receipt (not part of the chain's verdict; views show the receipt's own fields):`);
            for (const f of report.column_findings) out(`  ${f.name} at seq ${f.seq}: ${f.detail}`);
          }
        }
        return report.ok ? 0 : 1;
      }
      const control = values['control'] as string | undefined;
      const all = values['all'] === true;
      const limit = last ?? NEWEST_PAGE;
      async function* shown(): AsyncGenerator<{ row: ReceiptRow; doc: JsonObject | null }> {
        for await (const row of flat(receiptPages(store, PAGE))) {
          const doc = readDocument(row.json);
          if (control !== undefined && !(Array.isArray(doc?.['controls']) && (doc['controls'] as unknown[]).includes(control))) continue;
          yield { row, doc };
        }
      }
      let rows: AsyncIterable<{ row: ReceiptRow; doc: JsonObject | null }>;
      let more = false;
      if (all) rows = shown();
      else {
        // The newest page: a bounded read from the chain's end when nothing is filtered.
        let picked: { row: ReceiptRow; doc: JsonObject | null }[];
        if (control === undefined && store.receiptsInChain && store.receiptsOffChain && limit <= 10_000) {
          const chained = await store.receiptsInChain({ newest: true, limit: limit + 1 });
          let page = chained.slice(-limit);
          more = chained.length > limit;
          if (page.length < limit) {
            // Rows off the chain come before it; the last of them fill the page.
            const room = limit - page.length;
            const off = await lastOf(flat(offChainReceiptPages(store, PAGE)), room + 1);
            more = off.length > room;
            page = [...off.slice(-room), ...page];
          }
          picked = page.map((row) => ({ row, doc: readDocument(row.json) }));
        } else {
          const tail = await lastOf(shown(), limit + 1);
          more = tail.length > limit;
          picked = tail.slice(-limit);
        }
        rows = (async function* () {
          yield* picked;
        })();
      }
      let count = 0;
      for await (const { row, doc } of rows) {
        count += 1;
        if (count % 256 === 0) await io.drained?.();
        if (values['json'] === true) {
          json(row.json ?? 'null');
          continue;
        }
        const principal = isObject(doc?.['principal']) ? (doc!['principal'] as JsonObject) : {};
        // Run under arguments a human edited: say so, and who (the proposal is in `inspect`).
        const edit = isObject(doc?.['edit']) ? (doc!['edit'] as JsonObject) : null;
        out(
          [
            text(doc?.['finished_at'] ?? row.ts),
            row.receipt_id,
            text(doc?.['action']),
            `${text(doc?.['decision'])}/${text(doc?.['result'] ?? row.result)}`,
            text(doc?.['effect_key'] ?? row.effect_key),
            text(principal['agent']),
            ...(edit === null ? [] : [`edited by ${text(edit['editor'])}`]),
          ].join('  '),
        );
      }
      if (count === 0) {
        out(control === undefined ? 'no receipts yet' : `no receipts cite '${control}'`);
        return 0;
      }
      if (more && last === null) err(`(the newest ${limit} receipts; --all lists every one, --last N the last N)`);
      return 0;
    } finally {
      await store.close();
    }
  },
};
