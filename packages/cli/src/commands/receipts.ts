/**
 * `ctrlrun receipts`: the chained receipts, oldest first; `--verify-chain` walks the chain and
 * names each break by its name and seq (any break, even only `unchained`, exits 1).
 *
 * @module
 */
import { parseJson, verifyChain, type JsonObject } from '@ctrlrun/kernel';
import { isObject } from '../format.js';
import { STORE_URL, type Command } from '../command.js';
import { storeTarget } from '../discovery.js';
import { UsageError } from '../errors.js';
import { openReader } from '../stores.js';

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

export const receipts: Command = {
  name: 'receipts',
  summary: 'list the chained receipts, or verify the chain',
  positionals: [],
  options: {
    last: { type: 'string', value: 'N', help: 'only the last N receipts (N ≥ 1)' },
    json: { type: 'boolean', help: 'one receipt document per line (with --verify-chain: the chain report)' },
    'verify-chain': { type: 'boolean', help: 'verify the hash chain; every break named by its seq and name (overrides --last and --control)' },
    control: { type: 'string', value: 'ID', help: 'only receipts whose controls cite ID' },
    'store-url': STORE_URL,
  },
  async run({ io, values, out, json }) {
    let last: number | null = null;
    if (values['last'] !== undefined) {
      const raw = values['last'] as string;
      if (!/^[0-9]+$/.test(raw) || !Number.isSafeInteger(Number(raw)) || Number(raw) < 1) throw new UsageError(`--last must be a whole number ≥ 1, got ${JSON.stringify(raw)}`);
      last = Number(raw);
    }
    const store = await openReader(storeTarget(io, values['store-url'] as string | undefined));
    try {
      const rows = await store.receipts();
      if (values['verify-chain'] === true) {
        const report = verifyChain(rows, await store.chainHead());
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
            }),
          );
        } else {
          out(`chain: ${report.verified} of ${report.chained + report.unchained} receipts verified`);
          if (report.unchained > 0) out(`       ${report.unchained} written before the chain existed (unchained)`);
          for (const b of report.breaks) out(`  ${b.name}${b.seq === null ? '' : ` at seq ${b.seq}`}: ${b.detail}`);
          if (report.ok) out('the chain is intact');
        }
        return report.ok ? 0 : 1;
      }
      const control = values['control'] as string | undefined;
      let shown = rows.map((row) => ({ row, doc: readDocument(row.json) }));
      if (control !== undefined) shown = shown.filter(({ doc }) => Array.isArray(doc?.['controls']) && (doc['controls'] as unknown[]).includes(control));
      if (last !== null) shown = shown.slice(-last);
      if (shown.length === 0) {
        out(control === undefined ? 'no receipts yet' : `no receipts cite '${control}'`);
        return 0;
      }
      for (const { row, doc } of shown) {
        if (values['json'] === true) {
          json(row.json ?? 'null');
          continue;
        }
        const principal = isObject(doc?.['principal']) ? (doc!['principal'] as JsonObject) : {};
        out(
          [
            text(doc?.['finished_at'] ?? row.ts),
            row.receipt_id,
            text(doc?.['action']),
            `${text(doc?.['decision'])}/${text(doc?.['result'] ?? row.result)}`,
            text(doc?.['effect_key'] ?? row.effect_key),
            text(principal['agent']),
          ].join('  '),
        );
      }
      return 0;
    } finally {
      await store.close();
    }
  },
};
