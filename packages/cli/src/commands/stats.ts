/**
 * `ctrlrun stats [--since …] [--json]`: what the receipts recorded, as `ctrlrun.stats/v1`, in
 * the policy's mode. Reads the local store only; no network.
 *
 * @module
 */
import { InvalidArgument, parseSince, stats as countReceipts, type StatsDocument } from '@ctrlrun/kernel';
import { STORE_URL, type Command } from '../command.js';
import { banner } from '../control.js';
import { loadPolicyFile, policyPath, storeTarget } from '../discovery.js';
import { UsageError } from '../errors.js';
import { openListing } from '../stores.js';

function rows(doc: StatsDocument, out: (line: string) => void): void {
  const row = (label: string, n: number) => out(`${label.padEnd(30)}${String(n).padStart(6)}`);
  const reasons = (tally: Record<string, number> | undefined) => {
    for (const [reason, n] of Object.entries(tally ?? {})) out(`   ${reason.padEnd(27)}${String(n).padStart(6)}`);
  };
  out(`ctrlrun — ${doc.from ?? '-'} .. ${doc.to ?? '-'}   (${doc.mode} mode)`);
  row('actions', doc.actions);
  if (doc.mode === 'observe') {
    row('would have been denied', doc.would_have_been_denied ?? 0);
    reasons(doc.denied_by_reason);
    row('would have needed approval', doc.would_have_needed_approval ?? 0);
    row('would have been blocked', doc.would_have_been_blocked ?? 0);
    reasons(doc.blocked_by_reason);
  } else {
    row('denied', doc.denied ?? 0);
    reasons(doc.denied_by_reason);
  }
  row('ambiguous outcomes', doc.ambiguous_outcomes);
  // What was really enforced, whatever the mode: in observe mode, the refusals written before
  // the switch (or still refused in observe), never hidden behind the counterfactual numbers.
  if (doc.mode === 'observe') {
    if (doc.enforced_denied > 0) {
      row('denied (enforced)', doc.enforced_denied);
      reasons(doc.enforced_denied_by_reason);
    }
    if (doc.enforced_blocked > 0) row('blocked (enforced)', doc.enforced_blocked);
  } else {
    row('blocked', doc.enforced_blocked);
  }
  row('approval requests', doc.approvals_requested);
  row('   still pending', doc.approvals_pending);
  if (doc.mode === 'enforce') out('enforce-mode receipts record no duplicate/ambiguous split of blocked actions: they count as actions only.');
  out('actions awaiting a human have no receipt yet and are not counted.');
}

export const stats: Command = {
  name: 'stats',
  summary: 'count what the receipts recorded (denied, would have been denied, blocked, ambiguous)',
  positionals: [],
  options: {
    since: { type: 'string', value: 'WHEN', help: 'only receipts finished at or after WHEN: ISO-8601 with an offset, or <n>m, <n>h, <n>d' },
    json: { type: 'boolean', help: 'the ctrlrun.stats/v1 document' },
    'store-url': STORE_URL,
  },
  async run({ io, values, out, err, json }) {
    const now = new Date();
    let since: Date | null = null;
    if (values['since'] !== undefined) {
      try {
        since = parseSince(values['since'] as string, now);
      } catch (e) {
        if (e instanceof InvalidArgument) throw new UsageError(e.message);
        throw e;
      }
    }
    const { policy } = loadPolicyFile(policyPath(io));
    banner(policy, err);
    const store = await openListing(storeTarget(io, values['store-url'] as string | undefined), err);
    try {
      const doc = await countReceipts(store, { since, mode: policy.mode, clock: () => now });
      if (values['json'] === true) json(JSON.stringify(doc));
      else rows(doc, out);
      return 0;
    } finally {
      await store.close();
    }
  },
};
