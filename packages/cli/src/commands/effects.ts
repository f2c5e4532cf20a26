/**
 * `ctrlrun effects [--state STATE]`: the effect records, oldest first. A reserved or executing
 * record whose lease lapsed is shown `(lease expired)`; the display transitions nothing.
 *
 * @module
 */
import type { EffectState } from '@ctrlrun/kernel';
import { STORE_URL, type Command } from '../command.js';
import { storeTarget } from '../discovery.js';
import { UsageError } from '../errors.js';
import { stamp } from '../format.js';
import { openReader } from '../stores.js';

const STATES = ['new', 'reserved', 'executing', 'committed', 'failed', 'ambiguous'] as const;

export const effects: Command = {
  name: 'effects',
  summary: 'list effect records (reserved, executing, committed, failed, ambiguous)',
  positionals: [],
  options: {
    state: { type: 'string', value: 'STATE', help: `only records in STATE: ${STATES.join('|')}` },
    'store-url': STORE_URL,
  },
  async run({ io, values, out }) {
    const state = values['state'] as string | undefined;
    if (state !== undefined && !(STATES as readonly string[]).includes(state)) throw new UsageError(`--state must be one of ${STATES.join('|')}, got ${JSON.stringify(state)}`);
    const store = await openReader(storeTarget(io, values['store-url'] as string | undefined));
    try {
      // `new` is never stored: it means "no record".
      const records = state === 'new' ? [] : await store.listEffects(state as EffectState | undefined);
      if (records.length === 0) {
        out(state === undefined ? 'no effects yet' : `no effects are ${state}`);
        return 0;
      }
      const now = Date.now();
      for (const r of records) {
        let line = `${r.effectKey}  ${r.state}  attempt ${r.attempt}  ${r.actionId}  ${stamp(r.updatedAt)}`;
        const live = r.state === 'reserved' || r.state === 'executing';
        if (live && r.leaseExpiresAt !== null && Date.parse(r.leaseExpiresAt) < now) line += '  (lease expired)';
        if (r.resolvedBy !== null) line += `  resolved by ${r.resolvedBy}`;
        out(line);
      }
      return 0;
    } finally {
      await store.close();
    }
  },
};
