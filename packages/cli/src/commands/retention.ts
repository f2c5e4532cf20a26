/**
 * Retention and outside proof (spec 05 §5.2–§5.4): `ctrlrun prune --through SEQ --older-than D`,
 * `ctrlrun hold --from SEQ [--to SEQ] --reason TEXT` (or `--list`), `ctrlrun release HOLD_ID`,
 * and `ctrlrun anchor` / `anchor --verify`. The anchor provider is an append-only JSONL file
 * (`--anchor-file PATH` or `$CTRLRUN_ANCHOR_FILE`, meant for another volume) or an HTTP endpoint
 * (`--anchor-url URL` or `$CTRLRUN_ANCHOR_URL`, its HMAC secret only in `$CTRLRUN_ANCHOR_SECRET`,
 * never on the command line). Every act is done through the kernel; a refusal names its cause.
 *
 * @module
 */
import { resolve as resolvePath } from 'node:path';
import {
  anchorChain,
  AnchorUnavailable,
  httpAnchorProvider,
  listHolds,
  placeHold,
  pruneChain,
  PruneRefused,
  releaseHold,
  verifyAnchors,
  type AnchorProvider,
  type StateStore,
} from '@ctrlrun/kernel';
import { jsonlAnchorProvider } from '@ctrlrun/store-node';
import { AS_APPROVER, STORE_URL, type Command, type OptionSpec } from '../command.js';
import type { CliIo } from '../io.js';
import { operatorName } from '../control.js';
import { storeTarget } from '../discovery.js';
import { CliRefusal, UsageError } from '../errors.js';
import { openAnswerer, openListing } from '../stores.js';

const ANCHOR_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  'anchor-file': { type: 'string', value: 'PATH', help: 'anchor provider: an append-only JSONL file, best on another volume (default: $CTRLRUN_ANCHOR_FILE)' },
  'anchor-url': {
    type: 'string',
    value: 'URL',
    help: 'anchor provider: an HTTP endpoint, requests signed with HMAC under $CTRLRUN_ANCHOR_SECRET (default: $CTRLRUN_ANCHOR_URL)',
  },
};

/** The anchor provider the command line or the environment names, or null. */
export function anchorProvider(io: CliIo, values: Readonly<Record<string, unknown>>): AnchorProvider | null {
  const file = (values['anchor-file'] as string | undefined) ?? io.env['CTRLRUN_ANCHOR_FILE'];
  const url = (values['anchor-url'] as string | undefined) ?? io.env['CTRLRUN_ANCHOR_URL'];
  if (file !== undefined && file !== '' && url !== undefined && url !== '')
    throw new UsageError('give one anchor provider: --anchor-file or --anchor-url, not both');
  if (file !== undefined && file !== '') return jsonlAnchorProvider(resolvePath(io.cwd, file));
  if (url !== undefined && url !== '') {
    const secret = io.env['CTRLRUN_ANCHOR_SECRET'];
    if (secret === undefined || secret.length < 16)
      throw new CliRefusal('an --anchor-url needs its shared secret in $CTRLRUN_ANCHOR_SECRET (at least 16 characters)', 2);
    return httpAnchorProvider({ url, secret });
  }
  return null;
}

function wholeNumber(raw: unknown, option: string, min: number): number {
  if (typeof raw !== 'string' || !/^[0-9]+$/.test(raw) || !Number.isSafeInteger(Number(raw)) || Number(raw) < min)
    throw new UsageError(`--${option} must be a whole number ≥ ${min}, got ${JSON.stringify(raw ?? null)}`);
  return Number(raw);
}

const UNITS: Readonly<Record<string, number>> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `0`, `45s`, `90m`, `12h`, `30d` as milliseconds. */
export function parseOlderThan(raw: unknown): number {
  const m = typeof raw === 'string' ? /^([0-9]+)([smhd]?)$/.exec(raw) : null;
  const n = m === null ? Number.NaN : Number(m[1]) * (m[2] === '' ? (m[1] === '0' ? 0 : Number.NaN) : UNITS[m[2]!]!);
  if (!Number.isSafeInteger(n))
    throw new UsageError(`--older-than must be 0 or a whole number with a unit s, m, h or d (30d), got ${JSON.stringify(raw ?? null)}`);
  return n;
}

/** Opens the existing store for one operator act (refused before any write connection when absent or outdated). */
function openForAct(io: CliIo, values: Readonly<Record<string, unknown>>): Promise<StateStore> {
  return openAnswerer(storeTarget(io, values['store-url'] as string | undefined), async () => undefined);
}

/** A kernel refusal as the CLI's one-line refusal. */
function refused(err: unknown): never {
  if (err instanceof PruneRefused || err instanceof AnchorUnavailable) throw new CliRefusal(err.message);
  throw err;
}

export const prune: Command = {
  name: 'prune',
  summary: 'delete the chain through a seq under a recorded checkpoint (holds, unsettled effects and new breaks refuse it)',
  positionals: [],
  options: {
    through: { type: 'string', value: 'SEQ', help: 'delete the receipts with seq ≤ SEQ (required; never the newest)' },
    'older-than': { type: 'string', value: 'D', help: 'refuse while an effect of the prefix was charged within D: 0, 45s, 90m, 12h, 30d (required)' },
    as: AS_APPROVER,
    ...ANCHOR_OPTIONS,
    json: { type: 'boolean', help: 'what was pruned, as JSON' },
    'store-url': STORE_URL,
  },
  details:
    "The prune's own receipt (ctrlrun.retention.prune) is chained first; then, under the receipt-write lock, it is refused while a live hold reaches into the range (the hold named), while an effect named in it is AMBIGUOUS, reserved or executing (the effect named), while a charge of it is younger than --older-than, or when the chain would report a break it does not now. With an anchor provider the checkpoint is anchored before anything is deleted. `ctrlrun receipts --verify-chain` verifies from the checkpoint.",
  async run({ io, values, out, json }) {
    const through = wholeNumber(values['through'], 'through', 1);
    if (values['older-than'] === undefined) throw new UsageError('missing --older-than (0 prunes regardless of charge age)');
    const olderThanMs = parseOlderThan(values['older-than']);
    const by = operatorName(io, values['as'] as string | undefined, '--as');
    const provider = anchorProvider(io, values);
    const store = await openForAct(io, values);
    try {
      const result = await pruneChain(store, { through, olderThanMs, by, anchor: provider }).catch(refused);
      if (values['json'] === true) {
        json(
          JSON.stringify({
            checkpoint: result.checkpoint,
            receipts_deleted: result.receiptsDeleted,
            ledger_rows_deleted: result.ledgerRowsDeleted,
            anchor: result.anchor,
            receipt_seq: result.receiptSeq,
          }),
        );
      } else {
        out(`pruned through seq ${result.checkpoint.seq}: ${result.receiptsDeleted} receipts deleted (${result.ledgerRowsDeleted} ledger rows), by ${by}`);
        out(`checkpoint (${result.checkpoint.seq}, ${result.checkpoint.hash}); the prune's receipt is seq ${result.receiptSeq}`);
        if (result.anchor !== null) out(`checkpoint anchored at ${provider!.name}: ${result.anchor.token}`);
      }
      return 0;
    } finally {
      await store.close();
    }
  },
};

export const hold: Command = {
  name: 'hold',
  summary: 'place a legal hold on a receipt range (no prune crosses it until a person releases it), or --list them',
  positionals: [],
  options: {
    from: { type: 'string', value: 'SEQ', help: 'the first seq held (required unless --list)' },
    to: { type: 'string', value: 'SEQ', help: 'the last seq held (default: open-ended, everything from --from on)' },
    reason: { type: 'string', value: 'TEXT', help: 'why (required unless --list): a matter, a ticket' },
    id: { type: 'string', value: 'ID', help: 'the hold id (default: hold_ and 32 random hex)' },
    list: { type: 'boolean', help: 'list every hold, live and released' },
    as: { ...AS_APPROVER, help: 'who places it (default: $CTRLRUN_APPROVER, else your OS login name)' },
    json: { type: 'boolean', help: 'as JSON' },
    'store-url': STORE_URL,
  },
  async run({ io, values, out, err, json }) {
    if (values['list'] === true) {
      const store = await openListing(storeTarget(io, values['store-url'] as string | undefined), err);
      try {
        const holds = store.retention ? await listHolds(store) : [];
        if (values['json'] === true) json(JSON.stringify(holds));
        else if (holds.length === 0) out('no holds');
        else
          for (const h of holds)
            out(
              `${h.holdId}  seq ${h.fromSeq}${h.toSeq === null ? ' onwards' : `–${h.toSeq}`}  ${h.releasedAt === null ? 'LIVE' : `released by ${h.releasedBy ?? '?'}`}  placed by ${h.placedBy}: ${h.reason}`,
            );
        return 0;
      } finally {
        await store.close();
      }
    }
    const fromSeq = wholeNumber(values['from'], 'from', 1);
    const toSeq = values['to'] === undefined ? null : wholeNumber(values['to'], 'to', fromSeq);
    const reason = values['reason'];
    if (typeof reason !== 'string' || reason.trim() === '') throw new UsageError('missing --reason');
    const by = operatorName(io, values['as'] as string | undefined, '--as');
    const store = await openForAct(io, values);
    try {
      const h = await placeHold(store, { fromSeq, toSeq, reason, by, ...(typeof values['id'] === 'string' ? { holdId: values['id'] } : {}) });
      if (values['json'] === true) json(JSON.stringify(h));
      else out(`${h.holdId}: seq ${h.fromSeq}${h.toSeq === null ? ' onwards' : `–${h.toSeq}`} held by ${by} (${h.reason}); no prune crosses it until released`);
      return 0;
    } finally {
      await store.close();
    }
  },
};

export const release: Command = {
  name: 'release',
  summary: 'release a legal hold (only a person ends a hold)',
  positionals: ['HOLD_ID'],
  options: { as: { ...AS_APPROVER, help: 'who releases it (default: $CTRLRUN_APPROVER, else your OS login name)' }, 'store-url': STORE_URL },
  async run({ io, values, positionals, out }) {
    const id = positionals[0]!;
    const by = operatorName(io, values['as'] as string | undefined, '--as');
    const store = await openForAct(io, values);
    try {
      const h = await releaseHold(store, id, by).catch((e: unknown) => {
        throw new CliRefusal(e instanceof Error ? e.message : String(e));
      });
      out(`${h.holdId} released by ${by}`);
      return 0;
    } finally {
      await store.close();
    }
  },
};

export const anchor: Command = {
  name: 'anchor',
  summary: 'record the chain head with an anchor provider outside the store, or --verify the store against it',
  positionals: [],
  options: {
    verify: { type: 'boolean', help: 'ask the provider and compare: anchor_broken, anchor_missing, anchor_repudiated (exit 1), unavailable (exit 3)' },
    ...ANCHOR_OPTIONS,
    json: { type: 'boolean', help: 'the anchor, or the anchor report, as JSON' },
    'store-url': STORE_URL,
  },
  details:
    'The anchor report is apart from the chain report (`ctrlrun receipts --verify-chain`, six names). A provider that fails anchors nothing and says so (exit 3); at --verify it makes the report "unavailable", never ok.',
  async run({ io, values, out, err, json }) {
    const provider = anchorProvider(io, values);
    if (provider === null)
      throw new UsageError('name an anchor provider: --anchor-file PATH or --anchor-url URL (or $CTRLRUN_ANCHOR_FILE / $CTRLRUN_ANCHOR_URL)');
    if (values['verify'] === true) {
      const store = await openListing(storeTarget(io, values['store-url'] as string | undefined), err);
      try {
        const report = await verifyAnchors(store, provider);
        if (values['json'] === true) json(JSON.stringify(report));
        else {
          out(`anchors at ${report.provider}: ${report.status}${report.status === 'unavailable' ? '' : ` (${report.anchors} held by the provider)`}`);
          if (report.unavailable !== undefined) out(`  ${report.unavailable}`);
          for (const b of report.breaks) out(`  ${b.name}${b.seq === null ? '' : ` at seq ${b.seq}`}: ${b.detail}`);
          const s = report.superseded;
          if (s !== undefined)
            out(
              `  ${s.anchors} anchor(s) at or below seq ${s.through} are superseded by the checkpoint anchored at ${s.checkpointAt} (a prune through seq ${s.through}): the receipts they anchored were deleted then; if no prune was made then, that history was removed by someone who could write the store and append to the anchors`,
            );
        }
        return report.status === 'ok' ? 0 : report.status === 'broken' ? 1 : 3;
      } finally {
        await store.close();
      }
    }
    const store = await openForAct(io, values);
    try {
      const a = await anchorChain(store, provider).catch((e: unknown) => {
        if (e instanceof AnchorUnavailable) throw new CliRefusal(e.message, 3);
        throw e;
      });
      if (values['json'] === true) json(JSON.stringify(a));
      else out(`anchored seq ${a.seq} (${a.hash}) at ${provider.name}: ${a.token}`);
      return 0;
    } finally {
      await store.close();
    }
  },
};
